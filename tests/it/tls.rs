//! `https://` backends: the gateway speaks TLS to a gRPC agent whose certificate is signed
//! by a CA given with `--backend-ca`, and refuses one it cannot verify.

use crate::harness;

use a2a_gateway::proto::AgentCard;
use a2a_gateway::protocol::ops::Reply;
use harness::*;

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}"#;

#[tokio::test]
async fn grpc_over_tls_with_a_private_ca() {
    let key =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let (cert_pem, key_pem) = (key.cert.pem(), key.signing_key.serialize_pem());
    let backend = TestBackend::new(|_| {
        Answer::Reply(Reply::GetExtendedAgentCard(AgentCard {
            name: "tls".into(),
            ..Default::default()
        }))
    });
    let addr = backend.spawn_tls(&cert_pem, &key_pem).await;
    let dir = std::env::temp_dir().join(format!("a2a-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &cert_pem).unwrap();
    let url = format!("https://{addr}");

    let trusted =
        gateway_from_flags(&["--backend", &url, "--backend-ca", ca.to_str().unwrap()]).await;
    let reply = rpc(&trusted, CALL).await;
    assert_eq!(reply["result"]["name"], "tls", "{reply}");
    assert_eq!(backend.calls(), 1);

    // Without the CA the certificate cannot be verified: a gateway fault, no call made.
    let untrusted = gateway_from_flags(&["--backend", &url]).await;
    let reply = rpc(&untrusted, CALL).await;
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert_eq!(
        reply["error"]["data"][0]["domain"], "a2a-gateway",
        "{reply}"
    );
    assert_eq!(backend.calls(), 1);
    std::fs::remove_dir_all(&dir).ok();
}

//! Client certificates to backends (mTLS): a gRPC agent (tonic with a client CA) and an
//! HTTP+JSON agent (hyper over tokio-rustls with a client CA) that both require one. With
//! `--backend-client-cert` and `--backend-client-key` the calls go through, for a single
//! URL, a list and a `dns:///` name; without, or with a certificate of a CA the agent does
//! not trust, the client gets a gateway fault that names the TLS alert and the flags, and
//! the agent sees no call. `check-config` names the flag of a bad file.

use crate::harness;
use crate::harness::tls_pki;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use a2a_gateway::proto::AgentCard;
use a2a_gateway::protocol::ops::Reply;
use harness::dns::TestDns;
use harness::process::BIN;
use harness::process::{OutputWithin, EXITS_WITHIN};
use harness::{gateway_from_flags, message_params, request, rpc, Answer, TestBackend};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use tls_pki::{Ca, Dir, Leaf};

const CARD: &str = r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}"#;

/// The test's CAs and certificates, and the files the gateway reads.
struct Pki {
    dir: Dir,
    /// Signs the agents' server certificates.
    server_ca: Ca,
    /// The CA the agents trust for client certificates.
    client_ca: Ca,
    /// `--backend-ca`.
    server_ca_file: String,
}

impl Pki {
    fn new(test: &str) -> Pki {
        let dir = Dir::new(test);
        let server_ca = Ca::new("agents CA");
        let server_ca_file = dir.write("agents-ca.pem", &server_ca.pem);
        Pki {
            dir,
            server_ca,
            client_ca: Ca::new("gateway clients CA"),
            server_ca_file,
        }
    }

    /// The flags that present `leaf` as the gateway's client certificate.
    fn client_flags(&self, leaf: &Leaf) -> [String; 4] {
        [
            "--backend-client-cert".into(),
            self.dir.write("client.crt", &leaf.cert_pem),
            "--backend-client-key".into(),
            self.dir.write("client.key", &leaf.key_pem),
        ]
    }
}

/// A gRPC agent on 127.0.0.1 that requires a client certificate of `pki.client_ca`.
async fn grpc_agent(pki: &Pki) -> (TestBackend, SocketAddr) {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    let server = pki.server_ca.server("grpc agent", 1);
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&server.cert_pem, &server.key_pem))
        .client_ca_root(Certificate::from_pem(&pki.client_ca.pem));
    let backend = TestBackend::new(|_| {
        Answer::Reply(Reply::GetExtendedAgentCard(AgentCard {
            name: "mtls agent".into(),
            ..Default::default()
        }))
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let builder = tonic::transport::Server::builder().tls_config(tls).unwrap();
    backend.spawn_on(builder, listener, std::future::pending());
    (backend, addr)
}

/// An HTTP+JSON agent on 127.0.0.1 (HTTP/2 or HTTP/1.1 by ALPN) that requires a client
/// certificate of `pki.client_ca` and answers `SendMessage`; counts the requests it got.
async fn rest_agent(pki: &Pki) -> (Arc<AtomicUsize>, SocketAddr) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt as _;
    let server = pki.server_ca.server("rest agent", 1);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pki.client_ca.pem.as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let app = axum::Router::new().route(
        "/message:send",
        axum::routing::post(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async {
                let reply = json!({"message": {"messageId": "r-1", "role": "ROLE_AGENT",
                    "parts": [{"text": "over mTLS"}]}});
                (
                    [("content-type", "application/a2a+json")],
                    reply.to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = app.map_request(|r: http::Request<hyper::body::Incoming>| {
                    r.map(axum::body::Body::new)
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(service))
                    .await;
            });
        }
    });
    (requests, addr)
}

/// A gateway fault about the TLS session the agent refused: the alert is named, and for
/// a missing certificate the flags that give one.
fn assert_refused(reply: &Value, alert: &str) {
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    let info = &reply["error"]["data"][0];
    assert_eq!(info["domain"], "a2a-gateway", "{reply}");
    assert_eq!(info["reason"], "BACKEND_UNAVAILABLE", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("backend refused the TLS connection: TLS alert ")
            && message.contains(alert)
            && message.contains("--backend-client-cert"),
        "{message}"
    );
}

fn flags<'a>(fixed: &[&'a str], more: &'a [String]) -> Vec<&'a str> {
    fixed
        .iter()
        .copied()
        .chain(more.iter().map(String::as_str))
        .collect()
}

#[tokio::test]
async fn grpc_backend_that_requires_a_client_certificate() {
    let pki = Pki::new("mtls-grpc");
    let (backend, addr) = grpc_agent(&pki).await;
    let url = format!("https://{addr}");
    let ca = ["--backend-ca".to_owned(), pki.server_ca_file.clone()];
    let base = flags(&["--backend", &url], &ca);

    let member = pki.client_flags(&pki.client_ca.client("gateway"));
    let with = gateway_from_flags(&[base.clone(), flags(&[], &member)].concat()).await;
    let reply = rpc(&with, CARD).await;
    assert_eq!(reply["result"]["name"], "mtls agent", "{reply}");
    assert_eq!(backend.calls(), 1);

    // No certificate: TLS 1.3 finishes the client's handshake, then the agent's alert ends
    // the first call; every call gets the same clear error.
    let without = gateway_from_flags(&base).await;
    for _ in 0..2 {
        assert_refused(&rpc(&without, CARD).await, "certificate_required");
    }
    let intruder = Ca::new("rogue CA").client("intruder");
    let foreign = pki.client_flags(&intruder);
    let foreign = gateway_from_flags(&[base.clone(), flags(&[], &foreign)].concat()).await;
    assert_refused(&rpc(&foreign, CARD).await, "unknown_ca");
    assert_eq!(backend.calls(), 1, "no refused call reached the agent");

    // A list of endpoints and a DNS name (the pods' name, in the agent's certificate).
    let member = pki.client_flags(&pki.client_ca.client("gateway"));
    let other = format!("https://localhost:{}", addr.port());
    let list = flags(&["--backend", &url, "--backend", &other], &ca);
    let listed = gateway_from_flags(&[list, flags(&[], &member)].concat()).await;
    for _ in 0..4 {
        assert_eq!(rpc(&listed, CARD).await["result"]["name"], "mtls agent");
    }
    let dns = TestDns::start(harness::POD_NAME, &[std::net::Ipv4Addr::LOCALHOST]).await;
    let (name, resolver) = (
        format!("dns:///{}:{}", harness::POD_NAME, addr.port()),
        dns.addr.to_string(),
    );
    let resolved = flags(
        &[
            "--backend",
            &name,
            "--backend-tls",
            "--backend-resolver",
            &resolver,
        ],
        &ca,
    );
    let resolved = gateway_from_flags(&[resolved, flags(&[], &member)].concat()).await;
    assert_eq!(rpc(&resolved, CARD).await["result"]["name"], "mtls agent");
    assert_eq!(backend.calls(), 6);
}

#[tokio::test]
async fn http_json_backend_that_requires_a_client_certificate() {
    let pki = Pki::new("mtls-rest");
    let (requests, addr) = rest_agent(&pki).await;
    let url = format!("https://{addr}");
    let ca = ["--backend-ca".to_owned(), pki.server_ca_file.clone()];
    let base = flags(&["--binding", "HTTP+JSON", "--backend", &url], &ca);
    let send = request(json!(3), "SendMessage", message_params("hi"));

    let member = pki.client_flags(&pki.client_ca.client("gateway"));
    let with = gateway_from_flags(&[base.clone(), flags(&[], &member)].concat()).await;
    let reply = rpc(&with, &send).await;
    assert_eq!(
        reply["result"]["message"]["parts"][0]["text"], "over mTLS",
        "{reply}"
    );
    assert_eq!(requests.load(Ordering::Relaxed), 1);

    let without = gateway_from_flags(&base).await;
    assert_refused(&rpc(&without, &send).await, "certificate_required");
    let intruder = pki.client_flags(&Ca::new("rogue CA").client("intruder"));
    let foreign = gateway_from_flags(&[base.clone(), flags(&[], &intruder)].concat()).await;
    assert_refused(&rpc(&foreign, &send).await, "unknown_ca");
    assert_eq!(
        requests.load(Ordering::Relaxed),
        1,
        "no refused call reached the agent"
    );

    let dns = TestDns::start(harness::POD_NAME, &[std::net::Ipv4Addr::LOCALHOST]).await;
    let (name, resolver) = (
        format!("dns:///{}:{}", harness::POD_NAME, addr.port()),
        dns.addr.to_string(),
    );
    let member = pki.client_flags(&pki.client_ca.client("gateway"));
    let resolved = flags(
        &[
            "--binding",
            "HTTP+JSON",
            "--backend",
            &name,
            "--backend-tls",
            "--backend-resolver",
            &resolver,
        ],
        &ca,
    );
    let resolved = gateway_from_flags(&[resolved, flags(&[], &member)].concat()).await;
    let reply = rpc(&resolved, &send).await;
    assert_eq!(
        reply["result"]["message"]["parts"][0]["text"], "over mTLS",
        "{reply}"
    );
    assert_eq!(requests.load(Ordering::Relaxed), 2);
}

/// `check-config` refuses a route's client certificate files that cannot be used, naming
/// the route and the flag.
#[test]
fn check_config_names_the_client_certificate_flag_at_fault() {
    let ca = Ca::new("gateway clients CA");
    let (leaf, other) = (ca.client("gateway"), ca.client("other"));
    let dir = Dir::new("mtls-check");
    let cert = dir.write("client.crt", &leaf.cert_pem);
    let key = dir.write("client.key", &leaf.key_pem);
    let other_key = dir.write("other.key", &other.key_pem);
    let missing = dir.path("missing.pem");
    let check = |keys: &str| {
        let route = "[[route]]\nname = \"billing\"\npath = \"/billing\"\n";
        let text = format!("{route}backend = \"https://127.0.0.1:1\"\n{keys}");
        let file = dir.write("gateway.toml", &text);
        let out = std::process::Command::new(BIN)
            .args(["check-config", &file])
            .output_within(EXITS_WITHIN);
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let pair =
        |c: &str, k: &str| format!("backend-client-cert = {c:?}\nbackend-client-key = {k:?}\n");
    let cases = [
        (
            pair(&missing, &key),
            format!("--backend-client-cert {missing:?}: No such file"),
        ),
        (
            pair(&key, &key),
            format!("--backend-client-cert {key:?}: no PEM certificate"),
        ),
        (
            pair(&cert, &missing),
            format!("--backend-client-key {missing:?}: No such file"),
        ),
        (
            pair(&cert, &other_key),
            format!(
                "--backend-client-key {other_key:?}: not the private key of the \
                 --backend-client-cert certificate"
            ),
        ),
        (
            format!("backend-client-cert = {cert:?}\n"),
            "--backend-client-cert needs --backend-client-key".to_owned(),
        ),
    ];
    for (keys, expected) in cases {
        let (code, stderr) = check(&keys);
        assert_eq!(code, Some(2), "{keys}: {stderr}");
        assert!(
            stderr.contains("route \"billing\"") && stderr.contains(&expected),
            "{keys}\n→ {stderr}\nexpected: {expected}"
        );
    }
    let (code, stderr) = check(&pair(&cert, &key));
    assert_eq!(code, Some(0), "{stderr}");
}

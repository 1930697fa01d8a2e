//! The push-notification URL guard over real sockets: a refused push URL gets `-32602`
//! naming the field and the reason and never reaches the agent (the test backend counts
//! calls); an admitted one is forwarded unchanged; a name is resolved (a test DNS server)
//! and refused when it points inside; the agent's own push configs pass through.

use crate::harness;

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::Reply;
use harness::dns::TestDns;
use harness::*;
use serde_json::{json, Value};

fn config(url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        id: "cfg-1".into(),
        task_id: "t-1".into(),
        url: url.into(),
        ..Default::default()
    }
}

/// The agent echoes the config it is given.
fn handler(request: &a2a_gateway::protocol::ops::Request) -> Answer {
    use a2a_gateway::protocol::ops::{Request, UnaryRequest};
    match request {
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(c)) => {
            Answer::Reply(Reply::CreateTaskPushNotificationConfig(c.clone()))
        }
        // The agent's stored config may name any host: it is passed through untouched.
        Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(_)) => Answer::Reply(
            Reply::GetTaskPushNotificationConfig(config("http://127.0.0.1:9/stored")),
        ),
        other => panic!("unexpected call {other:?}"),
    }
}

async fn create(url: &str, hook: &str) -> Value {
    let params = json!({"taskId": "t-1", "id": "cfg-1", "url": hook});
    rpc(
        url,
        &request(json!(1), "CreateTaskPushNotificationConfig", params),
    )
    .await
}

#[tokio::test]
async fn inside_urls_in_every_spelling_are_refused_before_the_agent() {
    let settings = Settings {
        push: Some(push_guard(&["hooks.example"], None)),
        ..Default::default()
    };
    let (backend, url) = setup_with(handler, settings).await;
    let refused = [
        ("http://hooks.example/a", "scheme"),
        ("https://127.0.0.1/a", "loopback"),
        ("https://2130706433/a", "loopback"),
        ("https://0177.0.0.1/a", "loopback"),
        ("https://0x7f.1/a", "loopback"),
        ("https://127.0.0.1./a", "loopback"),
        ("https://[::ffff:127.0.0.1]/a", "loopback"),
        ("https://10.1.2.3/a", "private"),
        ("https://192.168.0.1/a", "private"),
        ("https://169.254.169.254/latest/meta-data", "metadata"),
        ("https://[fd00:ec2::254]/a", "metadata"),
        ("https://[fe80::1]/a", "link-local"),
        ("https://[fc00::1]/a", "unique-local"),
        ("https://100.64.0.1/a", "carrier"),
        ("https://224.0.0.1/a", "multicast"),
        ("https://0.0.0.0/a", "unspecified"),
        ("https://localhost/a", "localhost"),
        ("https://metadata.google.internal/a", "internal"),
        ("https://user:pass@hooks.example/a", "user"),
    ];
    for (hook, reason) in refused {
        let reply = create(&url, hook).await;
        assert_eq!(reply["error"]["code"], -32602, "{hook}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap().to_lowercase();
        assert!(
            message.contains("url"),
            "{hook}: names the field: {message}"
        );
        assert!(message.contains(reason), "{hook}: says {reason}: {message}");
    }
    assert_eq!(backend.calls(), 0, "no refused URL reached the agent");

    // What the operator admits is forwarded unchanged, and the next call is served.
    let reply = create(&url, "https://hooks.example/a2a").await;
    assert_eq!(
        reply["result"]["url"], "https://hooks.example/a2a",
        "{reply}"
    );
    assert_eq!(backend.calls(), 1);

    // The agent's configs are its own: passed through as they are.
    let params = json!({"taskId": "t-1", "id": "cfg-1"});
    let reply = rpc(
        &url,
        &request(json!(2), "GetTaskPushNotificationConfig", params),
    )
    .await;
    assert_eq!(
        reply["result"]["url"], "http://127.0.0.1:9/stored",
        "{reply}"
    );
}

#[tokio::test]
async fn a_name_is_resolved_and_every_address_checked() {
    let dns = TestDns::start("hooks.a2a.test", &[std::net::Ipv4Addr::new(10, 0, 0, 7)]).await;
    let settings = Settings {
        push: Some(push_guard(&[], Some(dns.addr))),
        ..Default::default()
    };
    let (backend, url) = setup_with(handler, settings).await;
    let reply = create(&url, "https://hooks.a2a.test/a").await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("10.0.0.7"),
        "{reply}"
    );
    assert!(dns.queries() >= 1, "the name was looked up");

    // A public address passes; a name that does not resolve is refused (fail closed).
    dns.set(&[std::net::Ipv4Addr::new(93, 184, 215, 14)]);
    let reply = create(&url, "https://hooks.a2a.test/a").await;
    assert_eq!(
        reply["result"]["url"], "https://hooks.a2a.test/a",
        "{reply}"
    );
    let reply = create(&url, "https://nowhere.a2a.test/a").await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(backend.calls(), 1);
}

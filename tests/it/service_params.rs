//! Service parameters at the wire (spec 3.2.6, 3.6, 9.2, 10.2): version negotiation,
//! headers forwarded as gRPC metadata, extensions reported back.

use crate::harness;

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::Reply;
use a2a_gateway::protocol::params::ForwardPolicy;
use harness::*;
use serde_json::json;

fn card() -> Answer {
    Answer::Reply(Reply::GetExtendedAgentCard(AgentCard::default()))
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}"#;

scheme_tests!(version_is_negotiated_by_the_gateway);
async fn version_is_negotiated_by_the_gateway(scheme: Scheme) {
    let (backend, url) = scheme.setup(|_| card()).await;
    for (headers, ok) in [
        (vec![("a2a-version", "1.0")], true),
        (vec![("A2A-Version", "1")], true),
        (vec![("a2a-version", "1.3")], true),
        (vec![("a2a-version", "1.0.0")], true),
        (vec![("a2a-version", "1.0.0.0")], false),
        (vec![("a2a-version", "1.0.x")], false),
        (vec![], false),
        (vec![("a2a-version", "")], false),
        (vec![("a2a-version", "0.3")], false),
        (vec![("a2a-version", "2.0")], false),
    ] {
        let (status, _, text) = post_with(&url, CALL, &headers).await;
        assert_eq!(status, 200);
        let reply: serde_json::Value = serde_json::from_str(&text).unwrap();
        if ok {
            assert!(reply.get("result").is_some(), "{headers:?}: {reply}");
        } else {
            assert_eq!(reply["error"]["code"], -32009, "{headers:?}: {reply}");
            assert!(reply["error"]["message"].as_str().unwrap().contains("1.0"));
            assert_eq!(reply["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
        }
    }
    let calls = backend.calls();
    let query_url = format!("{url}?A2A-Version=1.0");
    let (_, _, text) = post_with(&query_url, CALL, &[]).await;
    assert!(
        text.contains("\"result\""),
        "version as query parameter: {text}"
    );
    assert_eq!(backend.calls(), calls + 1);
}

scheme_tests!(headers_are_forwarded_as_metadata);
async fn headers_are_forwarded_as_metadata(scheme: Scheme) {
    let settings = Settings {
        forward: ForwardPolicy::new(&["x-tenant-hint"]).unwrap(),
        ..Default::default()
    };
    let (backend, url) = scheme.setup_with(|_| card(), settings).await;
    let (_, headers, _) = post_with(
        &url,
        CALL,
        &[
            ("a2a-version", "1.0"),
            ("authorization", "Bearer s3cret"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", "k=v"),
            ("x-request-id", "req-1"),
            ("a2a-extensions", "urn:a, urn:b"),
            ("x-tenant-hint", "blue"),
            ("x-not-forwarded", "no"),
            ("te", "trailers"),
        ],
    )
    .await;
    let md = backend.last().metadata;
    let get = |k: &str| md.get(k).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(get("a2a-version").as_deref(), Some("1.0"));
    assert_eq!(get("authorization").as_deref(), Some("Bearer s3cret"));
    assert_eq!(
        get("traceparent").as_deref(),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
    assert_eq!(get("tracestate").as_deref(), Some("k=v"));
    assert_eq!(get("x-request-id").as_deref(), Some("req-1"));
    assert_eq!(get("a2a-extensions").as_deref(), Some("urn:a, urn:b"));
    assert_eq!(get("x-tenant-hint").as_deref(), Some("blue"));
    assert_eq!(get("x-not-forwarded"), None);
    assert_eq!(get("connection"), None);
    // The backend's activated extensions come back as the A2A-Extensions header.
    assert_eq!(headers["a2a-extensions"], "urn:a, urn:b");
}

scheme_tests!(unary_deadline_is_sent_as_grpc_timeout);
async fn unary_deadline_is_sent_as_grpc_timeout(scheme: Scheme) {
    let settings = Settings {
        unary_timeout: Some(std::time::Duration::from_secs(7)),
        ..Default::default()
    };
    let (backend, url) = scheme.setup_with(|_| card(), settings).await;
    rpc(&url, CALL).await;
    let timeout = backend
        .last()
        .metadata
        .get("grpc-timeout")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let value: u64 = timeout
        .trim_end_matches(char::is_alphabetic)
        .parse()
        .unwrap();
    let unit = timeout.trim_start_matches(char::is_numeric);
    let millis = match unit {
        "S" => value * 1000,
        "m" => value,
        "u" => value / 1000,
        "n" => value / 1_000_000,
        _ => panic!("{timeout}"),
    };
    assert!((6_000..=7_000).contains(&millis), "grpc-timeout {timeout}");
}

scheme_tests!(tenant_travels_in_the_request);
async fn tenant_travels_in_the_request(scheme: Scheme) {
    let (backend, url) = scheme.setup(|_| card()).await;
    rpc(
        &url,
        &request(json!(1), "GetExtendedAgentCard", json!({"tenant": "acme"})),
    )
    .await;
    assert_eq!(
        backend.last().request,
        a2a_gateway::protocol::ops::Request::Unary(
            a2a_gateway::protocol::ops::UnaryRequest::GetExtendedAgentCard(
                GetExtendedAgentCardRequest {
                    tenant: "acme".into()
                }
            )
        )
    );
}

scheme_tests!(params_are_checked_before_the_version_as_the_sdk_does);
async fn params_are_checked_before_the_version_as_the_sdk_does(scheme: Scheme) {
    let (backend, url) = scheme.setup(|_| card()).await;
    let bad =
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","historyLength":"many"}}"#;
    let (_, _, text) = post_with(&url, bad, &[]).await;
    assert!(text.contains("-32602"), "{text}");
    let (_, _, text) = post_with(&url, r#"{"jsonrpc":"2.0","id":1,"method":"Nope"}"#, &[]).await;
    assert!(text.contains("-32601"), "{text}");
    assert_eq!(backend.calls(), 0);
}

/// A route's header rules at the wire: `set-header` replaces the client's value,
/// `remove-header` strips even a default-forwarded header, and on a fixed-tenant route an
/// `identity-header` is never taken from the client, even though `forward-header` names it
/// (on a route without a fixed tenant it is forwarded as named).
#[tokio::test]
async fn header_rules_shape_what_the_agent_sees() {
    let backend = TestBackend::new(|_| card());
    let url = format!("http://{}", backend.spawn().await);
    let flags = [
        "--backend",
        &url,
        "--forward-header",
        "x-user,x-hint",
        "--set-header",
        "x-route=billing",
        "--remove-header",
        "tracestate",
        "--identity-header",
        "x-user",
    ];
    for tenant in [None, Some("acme")] {
        let mut args = flags.to_vec();
        if let Some(tenant) = tenant {
            args.extend(["--tenant", tenant]);
        }
        let gateway = gateway_from_flags(&args).await;
        let headers = [
            ("a2a-version", "1.0"),
            ("x-user", "mallory"),
            ("x-hint", "h"),
            ("x-route", "from-the-client"),
            ("tracestate", "k=v"),
        ];
        let (status, _, text) = post_with(&gateway, CALL, &headers).await;
        assert_eq!(status, 200, "{text}");
        let md = backend.last().metadata;
        let get = |k: &str| md.get(k).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(get("x-route").as_deref(), Some("billing"), "{tenant:?}");
        assert_eq!(get("tracestate"), None, "{tenant:?}");
        assert_eq!(get("x-hint").as_deref(), Some("h"), "{tenant:?}");
        let user = tenant.is_none().then_some("mallory");
        assert_eq!(get("x-user").as_deref(), user, "{tenant:?}");
    }
}

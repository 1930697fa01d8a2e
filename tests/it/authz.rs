//! Authorization at the wire (`[[allow]]`, `front::call::authorize`): rules per method,
//! tenant and scheme; a refused call gets 403 with a `PERMISSION_DENIED` error naming what
//! no rule matched and never reaches the agent; GetExtendedAgentCard is refused like any
//! method (in both dialects) and no card URL hands it out instead; bad rules fail the load
//! naming the route and key; `/metrics` counts the decisions. The gateway is built from a
//! TOML file as the binary builds it, on two workers.

use crate::harness;

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use harness::process::TempFile;
use harness::*;
use serde_json::{json, Value};

/// A backend that answers GetTask and GetExtendedAgentCard.
async fn agent() -> (TestBackend, String) {
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetExtendedAgentCard(_)) => {
            Answer::Reply(Reply::GetExtendedAgentCard(AgentCard {
                name: "extended".into(),
                ..Default::default()
            }))
        }
        Request::Unary(UnaryRequest::GetTask(r)) => {
            Answer::Reply(Reply::GetTask(task(&r.id, TaskState::Working)))
        }
        _ => Answer::Reply(Reply::CancelTask(task("t-1", TaskState::Canceled))),
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

/// The gateway of the config `file` (after `backend = …`), on two workers; its origin.
async fn gateway(backend: &str, file: &str) -> String {
    let file = format!("backend = \"{backend}\"\n{file}");
    serve_on_workers(&[], Some(&file)).await
}

fn get_task(tenant: &str) -> String {
    request(json!(1), "GetTask", json!({"id": "t-1", "tenant": tenant}))
}

/// Checks a 403 naming `method` and the unmatched fields `missing`; the error object.
fn assert_denied(
    (status, headers, body): &(u16, reqwest::header::HeaderMap, String),
    method: &str,
    missing: &str,
) -> Value {
    assert_eq!(*status, 403, "{body}");
    assert!(headers.get("retry-after").is_none());
    let body: Value = serde_json::from_str(body).unwrap();
    let error = &body["error"];
    assert_eq!(error["code"], -31403, "{body}");
    let info = &error["data"][0];
    assert_eq!(info["reason"], "PERMISSION_DENIED", "{body}");
    assert_eq!(info["domain"], "a2a-gateway", "{body}");
    assert_eq!(
        info["metadata"],
        json!({"method": method, "missing": missing})
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(method) && message.contains(missing),
        "{message}"
    );
    error.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_per_method_and_tenant() {
    let (backend, url) = agent().await;
    let rules = "[[allow]]\nmethods = [\"GetTask\"]\ntenants = [\"acme\", \"team-*\"]\n";
    let origin = gateway(&url, rules).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    for tenant in ["acme", "team-x"] {
        let (status, _, body) = post(&endpoint, get_task(tenant)).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"result\""), "{body}");
    }
    assert_eq!(backend.calls(), 2);
    for tenant in ["", "other", "acme2", "team"] {
        let refused = post(&endpoint, get_task(tenant)).await;
        let error = assert_denied(&refused, "GetTask", "tenant");
        // What the client sent is not repeated back.
        assert!(
            tenant.is_empty() || !error.to_string().contains(tenant),
            "{error}"
        );
    }
    let cancel = request(
        json!(2),
        "CancelTask",
        json!({"id": "t-1", "tenant": "acme"}),
    );
    assert_denied(&post(&endpoint, cancel).await, "CancelTask", "method");
    // A stream is refused before it starts.
    let stream = request(json!(3), "SendStreamingMessage", message_params("hi"));
    assert_denied(
        &post(&endpoint, stream).await,
        "SendStreamingMessage",
        "method",
    );
    // A notification gets no body, but the status says why.
    let note = json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t"}}).to_string();
    let (status, _, body) = post(&endpoint, note).await;
    assert_eq!((status, body.as_str()), (403, ""));
    // In a batch, a refused member answers in the batch.
    let batch = format!("[{},{}]", get_task("acme"), get_task("other"));
    let (status, _, body) = post(&endpoint, batch).await;
    assert_eq!(status, 200, "{body}");
    let answers: Vec<Value> = serde_json::from_str(&body).unwrap();
    let denied = answers
        .iter()
        .filter(|a| a["error"]["code"] == -31403)
        .count();
    assert_eq!((answers.len(), denied), (2, 1), "{body}");
    assert_eq!(backend.calls(), 3, "no refused call reached the agent");
    let metrics = metrics_text(&origin).await;
    for line in [
        "a2a_gateway_authz_total{route=\"default\",result=\"allowed\"} 3\n",
        "a2a_gateway_authz_total{route=\"default\",result=\"denied\"} 8\n",
        "a2a_gateway_requests_total{route=\"default\",method=\"GetTask\",code=\"-31403\"} 6\n",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemes_on_a_route_without_authentication() {
    let (backend, url) = agent().await;
    let rules = "[[allow]]\nschemes = [\"anonymous\"]\nmethods = [\"GetTask\"]\n\
                 [[allow]]\nschemes = [\"api-key\"]\n\
                 [[allow]]\nprincipals = [\"*\"]\n";
    let origin = gateway(&url, rules).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    let (status, _, body) = post(&endpoint, get_task("")).await;
    assert_eq!(status, 200, "{body}");
    // Only the anonymous rule could match, and not for this method.
    let cancel = request(json!(2), "CancelTask", json!({"id": "t-1"}));
    assert_denied(
        &post(&endpoint, cancel).await,
        "CancelTask",
        "method,scheme,principal",
    );
    assert_eq!(backend.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extended_card_per_caller() {
    let (backend, url) = agent().await;
    let rules = "[[allow]]\nmethods = [\"GetExtendedAgentCard\"]\ntenants = [\"vip\"]\n\
                 [[allow]]\nmethods = [\"GetTask\"]\n";
    let origin = gateway(&url, rules).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    let card = |tenant: &str| request(json!(1), "GetExtendedAgentCard", json!({"tenant": tenant}));
    let (status, _, body) = post(&endpoint, card("vip")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"extended\""), "{body}");
    let error = assert_denied(
        &post(&endpoint, card("")).await,
        "GetExtendedAgentCard",
        "tenant,method",
    );
    assert!(!error.to_string().contains("extended\""), "{error}");
    // The v0.3 name is the same method.
    let v03 = json!({"jsonrpc": "2.0", "id": 7, "method": "agent/getAuthenticatedExtendedCard"});
    let refused = post_with(&endpoint, v03.to_string(), &[]).await;
    assert_eq!(refused.0, 403, "{}", refused.2);
    assert!(refused.2.contains("PERMISSION_DENIED"), "{}", refused.2);
    assert_eq!(backend.calls(), 1);
    // The route serves no card of its own: none from the agent's extended card.
    let card_url = format!("{origin}/.well-known/agent-card.json");
    let served = client().get(card_url).send().await.unwrap();
    assert_eq!(served.status(), 404);
    assert_eq!(backend.calls(), 1);
}

/// The load error of the config `file`.
fn load_error(file: &str) -> String {
    let file = TempFile::new("toml", file);
    let args = ["a2a-gateway", "--config", file.path()];
    match a2a_gateway::settings::Settings::load(args) {
        Ok(_) => panic!("loaded"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn bad_rules_fail_the_load_naming_route_and_key() {
    let route = "[[route]]\nname = \"billing\"\npath = \"/billing\"\nbackend = \"http://a:1\"\n";
    let cases = [
        (
            "[[route.allow]]\nmethods = [\"tasks/get\"]\n",
            "allow[0].methods: \"tasks/get\" is not an A2A v1.0 method name",
        ),
        (
            "[[route.allow]]\nmethods = [\"GetTask\"]\n[[route.allow]]\nschemes = [\"basic\"]\n",
            "allow[1].schemes: \"basic\" is not a scheme",
        ),
        (
            "[[route.allow]]\nprincipals = [\"svc-*-prod\"]\n",
            "allow[0].principals: \"svc-*-prod\": only a trailing `*`",
        ),
        (
            "[[route.allow]]\ntenants = []\n",
            "allow[0].tenants: an empty list matches nothing",
        ),
        (
            "[[route.allow]]\nmethod = [\"GetTask\"]\n",
            "route[0].allow[0].method",
        ),
    ];
    for (rules, expected) in cases {
        let err = load_error(&format!("{route}{rules}"));
        assert!(
            err.contains("route \"billing\" (line 2)") || err.contains("route[0]"),
            "{err}"
        );
        assert!(err.contains(expected), "{expected}\nin {err}");
    }
    // Top-level rules are every route's: the route that has them is named.
    let err = load_error(&format!("[[allow]]\nmethods = [\"Nope\"]\n{route}"));
    assert!(
        err.contains("route \"billing\"") && err.contains("allow[0].methods"),
        "{err}"
    );
}

#[test]
fn a_card_from_the_extended_card_needs_rules_that_let_everyone_have_it() {
    let base = "backend = \"http://a:1\"\n[card]\nsource = \"backend\"\n";
    let err = load_error(&format!("{base}[[allow]]\nmethods = [\"GetTask\"]\n"));
    assert!(err.contains("card source `backend`"), "{err}");
    let everyone = format!("{base}[[allow]]\nmethods = [\"GetTask\", \"GetExtendedAgentCard\"]\n");
    let file = TempFile::new("toml", &everyone);
    let args = ["a2a-gateway", "--config", file.path()];
    assert!(a2a_gateway::settings::Settings::load(args).is_ok());
    // A route that authenticates its callers does not let everyone have it, rules or not…
    let keys = TempFile::new("keys", &format!("alice {}\n", "0".repeat(64)));
    let authenticated = format!("{base}[auth.api-keys]\nfile = \"{}\"\n", keys.path());
    let err = load_error(&authenticated);
    assert!(err.contains("card source `backend`"), "{err}");
    // …unless it lets anonymous callers in as well.
    let open = format!(
        "{base}[auth]\nanonymous = true\n[auth.api-keys]\nfile = \"{}\"\n",
        keys.path()
    );
    let file = TempFile::new("toml", &open);
    let args = ["a2a-gateway", "--config", file.path()];
    assert!(a2a_gateway::settings::Settings::load(args).is_ok());
}

/// A client whose connections come from `address` (127.0.0.x: each a client of its own).
fn client_from(address: &str) -> reqwest::Client {
    let ip: std::net::IpAddr = address.parse().unwrap();
    reqwest::Client::builder()
        .local_address(ip)
        .build()
        .unwrap()
}

/// POSTs a GetTask as `client`: status, headers, body.
async fn call_as(
    client: &reqwest::Client,
    endpoint: &str,
) -> (u16, reqwest::header::HeaderMap, String) {
    let response = client
        .post(endpoint)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(get_task(""))
        .send()
        .await
        .unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

/// Checks a 429 of the per-client `limit`.
fn assert_throttled(
    (status, headers, body): &(u16, reqwest::header::HeaderMap, String),
    limit: &str,
) {
    assert_eq!(*status, 429, "{body}");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    let body: Value = serde_json::from_str(body).unwrap();
    let info = &body["error"]["data"][0];
    assert_eq!(info["reason"], "GATEWAY_RATE_LIMITED", "{body}");
    assert_eq!(info["metadata"]["limit"], limit, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("per-client"),
        "{body}"
    );
}

async fn metrics(origin: &str) -> String {
    let response = client()
        .get(format!("{origin}/metrics"))
        .send()
        .await
        .unwrap();
    response.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_rate_is_throttled_and_another_is_not() {
    let (backend, url) = agent().await;
    let flags = [
        "--backend",
        &url,
        "--client-rate-limit",
        "0.5",
        "--client-rate-burst",
        "2",
    ];
    let origin = serve_on_workers(&flags, None).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    let (a, b) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    for _ in 0..2 {
        assert_eq!(call_as(&a, &endpoint).await.0, 200);
    }
    assert_throttled(&call_as(&a, &endpoint).await, "client-rate-limit");
    for _ in 0..2 {
        assert_eq!(call_as(&b, &endpoint).await.0, 200, "b has its own bucket");
    }
    assert_throttled(&call_as(&b, &endpoint).await, "client-rate-limit");
    assert_eq!(backend.calls(), 4, "no throttled call reached the agent");
    let text = metrics(&origin).await;
    for line in [
        "a2a_gateway_limit_rejections_total{route=\"default\",limit=\"client-rate-limit\"} 2\n",
        "a2a_gateway_limit{route=\"default\",limit=\"client-rate-limit\"} 0.5\n",
        "a2a_gateway_limit_in_use{route=\"default\",limit=\"client-limit-keys\"} 2\n",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_at_its_concurrency_waits_and_another_is_served() {
    let backend = TestBackend::new(|_| {
        let reply = Reply::GetTask(task("t-1", TaskState::Working));
        Answer::After(
            std::time::Duration::from_millis(800),
            Box::new(Answer::Reply(reply)),
        )
    });
    let url = format!("http://{}", backend.spawn().await);
    let origin = serve_on_workers(&["--backend", &url, "--client-max-concurrent", "1"], None).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    let (a, b) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    let held = {
        let (a, endpoint) = (a.clone(), endpoint.clone());
        tokio::spawn(async move { call_as(&a, &endpoint).await })
    };
    while backend.calls() < 1 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_throttled(&call_as(&a, &endpoint).await, "client-max-concurrent");
    assert_eq!(call_as(&b, &endpoint).await.0, 200, "b has its own place");
    assert_eq!(held.await.unwrap().0, 200);
    // The place is given back when the call is answered.
    assert_eq!(call_as(&a, &endpoint).await.0, 200);
    assert_eq!(backend.calls(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_tracked_are_bounded() {
    let (backend, url) = agent().await;
    let rate = ["--client-rate-limit", "2", "--client-rate-burst", "1"];
    let flags = [&["--backend", &url, "--client-limit-keys", "1"][..], &rate].concat();
    let origin = serve_on_workers(&flags, None).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    let (a, b) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    assert_eq!(call_as(&a, &endpoint).await.0, 200);
    // a's bucket is not full again yet: it stays, and b finds no room.
    assert_throttled(&call_as(&b, &endpoint).await, "client-limit-keys");
    assert_throttled(&call_as(&a, &endpoint).await, "client-rate-limit");
    // Once a is idle (its bucket full again for an interval), it is forgotten for b.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(call_as(&b, &endpoint).await.0, 200);
    assert_eq!(backend.calls(), 2);
    let text = metrics(&origin).await;
    let line =
        "a2a_gateway_limit_rejections_total{route=\"default\",limit=\"client-limit-keys\"} 1\n";
    assert!(text.contains(line), "{text}");
}

#[test]
fn per_client_settings_are_checked() {
    let load = |flags: &[&str]| {
        let args = [&["a2a-gateway", "--backend", "http://a:1"][..], flags].concat();
        a2a_gateway::settings::Settings::load(args)
            .err()
            .map(|e| e.to_string())
    };
    let err = load(&["--client-rate-limit", "1", "--client-limit-keys", "0"]).unwrap();
    assert!(err.contains("client-limit-keys"), "{err}");
    let err = load(&["--client-rate-burst", "3"]).unwrap();
    assert!(
        err.contains("client-rate-limit: a burst needs a rate"),
        "{err}"
    );
    assert!(load(&["--client-max-concurrent", "2"]).is_none());
}

/// A route whose callers are the API keys `alice` and `bob` (keys `alice-key`, `bob-key`)
/// or anonymous, with the config `rest` after; its JSON-RPC endpoint and the key file.
async fn keyed_gateway(backend: &str, flags: &[&str], rest: &str) -> (String, TempFile) {
    let hex = key_digest_hex;
    let lines = format!("alice {}\nbob {}\n", hex(b"alice-key"), hex(b"bob-key"));
    let keys = TempFile::new("keys", &lines);
    let file = format!(
        "backend = \"{backend}\"\n[auth]\nanonymous = true\n[auth.api-keys]\nfile = \"{}\"\n{rest}",
        keys.path()
    );
    let origin = serve_on_workers(flags, Some(&file)).await;
    (format!("{origin}/a2a/jsonrpc"), keys)
}

/// POSTs `body` with the API key `key` (none: anonymous).
async fn post_as(
    endpoint: &str,
    key: Option<&str>,
    body: String,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut headers = vec![("a2a-version", "1.0")];
    headers.extend(key.map(|key| ("x-api-key", key)));
    post_with(endpoint, body, &headers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_per_api_key_principal() {
    let (backend, url) = agent().await;
    let rules = "[[allow]]\nprincipals = [\"alice\"]\nschemes = [\"api-key\"]\n\
                 [[allow]]\nprincipals = [\"b*\"]\nmethods = [\"GetTask\"]\n\
                 [[allow]]\nschemes = [\"anonymous\"]\nmethods = [\"GetExtendedAgentCard\"]\n";
    let (endpoint, _keys) = keyed_gateway(&url, &[], rules).await;
    let cancel = || request(json!(2), "CancelTask", json!({"id": "t-1"}));
    let card = || request(json!(3), "GetExtendedAgentCard", json!({}));
    for (key, body, allowed) in [
        (Some("alice-key"), cancel(), true),
        (Some("alice-key"), get_task(""), true),
        (Some("bob-key"), get_task(""), true),
        (Some("bob-key"), cancel(), false),
        (None, card(), true),
        (None, get_task(""), false),
        (Some("bob-key"), card(), false),
    ] {
        let answer = post_as(&endpoint, key, body.clone()).await;
        assert_eq!(answer.0 == 200, allowed, "{key:?} {body}: {}", answer.2);
        assert!(
            !answer.2.contains("alice") && !answer.2.contains("bob"),
            "{}",
            answer.2
        );
    }
    let denied = post_as(&endpoint, Some("bob-key"), cancel()).await;
    assert_denied(&denied, "CancelTask", "principal,method");
    let anonymous = post_as(&endpoint, None, get_task("")).await;
    assert_denied(&anonymous, "GetTask", "scheme,principal,method");
    // A wrong key is not anonymous: authentication refuses it before any rule.
    let (status, _, _) = post_as(&endpoint, Some("eve-key"), card()).await;
    assert_eq!(status, 401);
    assert_eq!(backend.calls(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_limits_count_each_principal() {
    let (backend, url) = agent().await;
    let flags = ["--client-rate-limit", "0.5", "--client-rate-burst", "1"];
    let (endpoint, _keys) = keyed_gateway(&url, &flags, "").await;
    // One address, three clients: alice, bob, and the anonymous caller (by address).
    for key in [Some("alice-key"), Some("bob-key"), None] {
        assert_eq!(post_as(&endpoint, key, get_task("")).await.0, 200);
    }
    for key in [Some("alice-key"), Some("bob-key"), None] {
        assert_throttled(
            &post_as(&endpoint, key, get_task("")).await,
            "client-rate-limit",
        );
    }
    assert_eq!(backend.calls(), 3);
}

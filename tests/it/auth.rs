//! Authentication at the wire (`front/call/authenticate.rs`, `auth::authenticator`): API
//! keys (the right key reaches the agent as its name; a wrong, missing, empty, doubled or
//! oversized key gets 401 with `WWW-Authenticate` and a JSON-RPC error that names no
//! credential, and the agent sees nothing), anonymous calls on and off, a batch refused
//! once, key files checked at load (`check-config`), the key header never forwarded,
//! `/metrics` and the access log.

use crate::harness;

use std::process::{Command, Stdio};

use a2a_gateway::auth::api_key::MAX_KEY;
use harness::process::*;
use harness::tls_pki::{Ca, Dir, Leaf};
use harness::*;
use serde_json::{json, Value};

fn get_task(id: u32) -> String {
    request(json!(id), "GetTask", json!({"id": format!("t-{id}")}))
}

/// A key file naming `alice` (key `alice-key`) and `max` (a key of `MAX_KEY` bytes).
fn key_file() -> TempFile {
    let max = vec![b'k'; MAX_KEY];
    TempFile::new(
        "keys",
        &format!(
            "# the gateway's callers\n\nalice {}\nmax {}\n",
            key_digest_hex(b"alice-key"),
            key_digest_hex(&max)
        ),
    )
}

/// Asserts a 401 refusal: the API key challenge, the JSON-RPC error with its `ErrorInfo`,
/// whose `why` contains `why`, under the id `null` (credentials are checked from the head,
/// before the body that names the id is read); returns the error.
fn assert_refused(
    (status, headers, body): &(u16, reqwest::header::HeaderMap, String),
    why: &str,
) -> Value {
    assert_eq!(*status, 401, "{body}");
    let challenges: Vec<_> = headers.get_all("www-authenticate").iter().collect();
    assert_eq!(challenges, ["ApiKey header=\"x-api-key\""], "{body}");
    let reply: Value = serde_json::from_str(body).unwrap();
    assert_eq!(reply["id"], Value::Null, "{body}");
    let error = &reply["error"];
    assert_eq!(error["code"], -31401, "{body}");
    let info = &error["data"][0];
    assert_eq!(info["reason"], "UNAUTHENTICATED", "{body}");
    assert_eq!(info["domain"], "a2a-gateway", "{body}");
    let metadata = &info["metadata"];
    assert!(metadata["why"].as_str().unwrap().contains(why), "{body}");
    assert!(error["message"].as_str().unwrap().contains(why), "{body}");
    error.clone()
}

#[tokio::test]
async fn api_keys_let_their_holders_in_by_name_and_refuse_the_rest_before_the_agent() {
    let (backend, url) = harness::task_backend().await;
    let keys = key_file();
    let file = format!(
        "backend = \"{url}\"\nforward-header = [\"x-api-key\"]\n[auth.api-keys]\nfile = \"{}\"\n",
        keys.path()
    );
    let origin = serve_on_workers(&[], Some(&file)).await;
    let jsonrpc = format!("{origin}/a2a/jsonrpc");

    // The right key: the agent is called, without the key (consumed even when the route
    // forwards a header of that name).
    let (status, _, body) = post_with(
        &jsonrpc,
        get_task(1),
        &[("a2a-version", "1.0"), ("x-api-key", "alice-key")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"t-1\""), "{body}");
    assert_eq!(backend.calls(), 1);
    assert!(backend.last().metadata.get("x-api-key").is_none());
    // A key of the longest accepted length is hashed and known.
    let max = "k".repeat(MAX_KEY);
    let at_limit = &[("a2a-version", "1.0"), ("x-api-key", max.as_str())];
    let (status, _, body) = post_with(&jsonrpc, get_task(2), at_limit).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(backend.calls(), 2);

    // Refused: none of these reach the agent, and no reply repeats the key.
    let over = "k".repeat(MAX_KEY + 1);
    let cases: [(&[(&str, &str)], &str); 5] = [
        (&[], "no credential"),
        (&[("x-api-key", "wrong-key")], "not valid"),
        (&[("x-api-key", "")], "empty"),
        (&[("x-api-key", &over)], "longer than 512 bytes"),
        (
            &[("x-api-key", "alice-key"), ("x-api-key", "wrong-key")],
            "more than once",
        ),
    ];
    for (i, (headers, why)) in cases.into_iter().enumerate() {
        let mut all = vec![("a2a-version", "1.0")];
        all.extend_from_slice(headers);
        let answer = post_with(&jsonrpc, get_task(10 + i as u32), &all).await;
        assert_refused(&answer, why);
        assert!(!answer.2.contains("wrong-key") && !answer.2.contains("kkkk"));
    }
    assert_eq!(backend.calls(), 2, "a refused call reached the agent");

    // A batch is refused once, as a whole, with one 401; with the key, every member runs.
    let batch = format!("[{},{}]", get_task(20), get_task(21));
    let refused = post_with(&jsonrpc, batch.clone(), &[("x-api-key", "nope")]).await;
    assert_refused(&refused, "not valid");
    assert_eq!(backend.calls(), 2);
    let with_key = &[("a2a-version", "1.0"), ("x-api-key", "alice-key")];
    let (status, _, body) = post_with(&jsonrpc, batch, with_key).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(backend.calls(), 4);

    // The card and the gateway's own endpoints stay public.
    for path in ["/.well-known/agent-card.json", "/healthz", "/metrics"] {
        let response = client()
            .get(format!("{origin}{path}"))
            .send()
            .await
            .unwrap();
        assert_ne!(response.status().as_u16(), 401, "{path}");
    }
    let metrics = metrics_text(&origin).await;
    for row in [
        "a2a_gateway_auth_total{route=\"default\",scheme=\"api-key\",result=\"ok\"} 3",
        "a2a_gateway_auth_total{route=\"default\",scheme=\"api-key\",result=\"invalid\"} 5",
        "a2a_gateway_auth_total{route=\"default\",scheme=\"none\",result=\"missing\"} 1",
    ] {
        assert!(metrics.contains(row), "{row}\n{metrics}");
    }
    assert!(!metrics.contains("alice"), "{metrics}");
}

#[tokio::test]
async fn anonymous_calls_pass_where_allowed_but_a_failed_key_is_never_downgraded() {
    let (backend, url) = harness::task_backend().await;
    let keys = key_file();
    let file = format!(
        "backend = \"{url}\"\n[auth]\nanonymous = true\n[auth.api-keys]\nfile = \"{}\"\n",
        keys.path()
    );
    let origin = serve_on_workers(&[], Some(&file)).await;
    let jsonrpc = format!("{origin}/a2a/jsonrpc");
    let reply = rpc(&jsonrpc, &get_task(1)).await;
    assert_eq!(reply["result"]["id"], "t-1", "{reply}");
    assert_eq!(backend.calls(), 1);
    let headers = &[("a2a-version", "1.0"), ("x-api-key", "wrong-key")];
    let answer = post_with(&jsonrpc, get_task(2), headers).await;
    assert_refused(&answer, "not valid");
    assert_eq!(backend.calls(), 1);
}

/// A notification without credentials gets its 401 (its body, not read, is not known to be
/// a notification's: the refusal answers under `null`); with `[auth.forward]
/// authorization = false` the client's `Authorization` stays at the gateway.
#[tokio::test]
async fn notifications_are_refused_and_authorization_can_stay_at_the_gateway() {
    let (backend, url) = harness::task_backend().await;
    let keys = key_file();
    let file = format!(
        "backend = \"{url}\"\n[auth.api-keys]\nfile = \"{}\"\n[auth.forward]\nauthorization = false\n",
        keys.path()
    );
    let origin = serve_on_workers(&[], Some(&file)).await;
    let jsonrpc = format!("{origin}/a2a/jsonrpc");
    let notification = json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t-1"}});
    let (status, headers, body) = post(&jsonrpc, notification.to_string()).await;
    assert_eq!(status, 401, "{body}");
    assert_refused(&(status, headers, body), "no credential");
    assert_eq!(backend.calls(), 0);
    let with = &[
        ("a2a-version", "1.0"),
        ("x-api-key", "alice-key"),
        ("authorization", "Bearer for-the-agent"),
    ];
    let (status, _, body) = post_with(&jsonrpc, get_task(1), with).await;
    assert_eq!(status, 200, "{body}");
    let seen = backend.last().metadata;
    assert!(seen.get("authorization").is_none() && seen.get("x-api-key").is_none());
}

/// `check-config` refuses key files that cannot be used, naming the file and line and
/// never the digest.
#[test]
fn bad_key_files_fail_the_load_naming_file_and_line() {
    let digest = key_digest_hex(b"k");
    for (keys, expected) in [
        (
            format!("alice {digest}\nbob {}\n", &digest[..60]),
            "line 2: the digest is not 64",
        ),
        (
            format!("alice {digest} trailing\n"),
            "line 1: expected `NAME SHA256-HEX`",
        ),
        (
            format!("alice {digest}\nbob {digest}\n"),
            "line 2: the digest is given twice",
        ),
        ("# nothing\n".to_owned(), "no key configured"),
    ] {
        let keys = TempFile::new("keys", &keys);
        let config = TempFile::new(
            "toml",
            &format!(
                "backend = \"http://127.0.0.1:1\"\n[auth.api-keys]\nfile = \"{}\"\n",
                keys.path()
            ),
        );
        let out = Command::new(BIN)
            .args(["check-config", config.path()])
            .stderr(Stdio::piped())
            .output_within(EXITS_WITHIN);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{expected}: {stderr}");
        assert!(!stderr.contains(&digest[..20]), "{stderr}");
    }
    let config = TempFile::new(
        "toml",
        "backend = \"http://127.0.0.1:1\"\n[auth.api-keys]\nfile = \"/nonexistent/keys\"\n",
    );
    let out = Command::new(BIN)
        .args(["check-config", config.path()])
        .output_within(EXITS_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("auth.api-keys file \"/nonexistent/keys\""),
        "{stderr}"
    );
}

/// An HTTPS client trusting `ca`, presenting `identity` if given.
fn https_client(ca: &Ca, identity: Option<&Leaf>) -> reqwest::Client {
    let root = reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap();
    let mut builder = reqwest::Client::builder().add_root_certificate(root);
    if let Some(leaf) = identity {
        let pem = format!("{}{}", leaf.cert_pem, leaf.key_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

/// A GetTask over `client` with `headers`: the status, `WWW-Authenticate` and the reply.
async fn call_with(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
) -> (u16, Vec<String>, Value) {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(get_task(1));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenges = response.headers().get_all("www-authenticate").iter();
    let challenges = challenges.map(|v| v.to_str().unwrap().to_owned()).collect();
    (status, challenges, response.json().await.unwrap())
}

/// The verified client certificate names the principal, by URI SAN, DNS SAN or subject as
/// each route says; a certificate without that name, or none, is refused; a route that
/// takes API keys ignores certificates. The principal and scheme are in the access log.
#[tokio::test]
async fn client_certificates_name_the_principal_each_route_chooses() {
    let (backend, url) = harness::task_backend().await;
    let (ca, clients) = (Ca::new("listener CA"), Ca::new("client CA"));
    let spiffe = "spiffe://example.org/ns/a/sa/agent";
    let named = clients.client_with("alice", &[spiffe], &["a.example.org"]);
    let bare = clients.client("bare");
    let dir = Dir::new("auth-mtls");
    let keys = key_file();
    let mut config = String::new();
    for (route, auth) in [
        ("uri", "[route.auth.mtls]\n"),
        ("dns", "[route.auth.mtls]\nidentity = \"dns\"\n"),
        ("subject", "[route.auth.mtls]\nidentity = \"subject\"\n"),
        (
            "keys",
            &format!("[route.auth.api-keys]\nfile = \"{}\"\n", keys.path()),
        ),
    ] {
        config.push_str(&format!(
            "[[route]]\nname = \"{route}\"\npath = \"/{route}\"\nbackend = \"{url}\"\n{auth}"
        ));
    }
    let config = dir.write("gateway.toml", &config);
    let server = ca.server("gateway", 1);
    let flags = [
        "--config".to_owned(),
        config,
        "--tls-cert".to_owned(),
        dir.write("tls.crt", &server.cert_pem),
        "--tls-key".to_owned(),
        dir.write("tls.key", &server.key_pem),
        "--tls-client-ca".to_owned(),
        dir.write("clients.pem", &clients.pem),
        "--tls-client-auth".to_owned(),
        "optional".to_owned(),
        "--log-format".to_owned(),
        "json".to_owned(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let log = TempFile::new("log", "");
    let listen = free_listen_address();
    let stderr = std::fs::File::create(log.path()).unwrap();
    // Traced to the last byte: the API key must appear nowhere in the log all the same.
    let env = [("RUST_LOG", "trace")];
    let mut gateway = spawn(&flags, &listen, &env, Stdio::from(stderr));
    while tokio::net::TcpStream::connect(&listen).await.is_err() {
        assert!(
            gateway.running(),
            "{}",
            std::fs::read_to_string(log.path()).unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let endpoint = |route: &str| format!("https://{listen}/{route}/a2a/jsonrpc");
    let (with_names, with_bare) = (
        https_client(&ca, Some(&named)),
        https_client(&ca, Some(&bare)),
    );
    let without = https_client(&ca, None);

    for route in ["uri", "dns", "subject"] {
        let (status, _, reply) = call_with(&with_names, &endpoint(route), &[]).await;
        assert_eq!(status, 200, "{route}: {reply}");
    }
    assert_eq!(backend.calls(), 3);
    let (status, challenges, reply) = call_with(&with_bare, &endpoint("uri"), &[]).await;
    assert_eq!((status, challenges), (401, vec!["MutualTLS".to_owned()]));
    let why = &reply["error"]["data"][0]["metadata"]["why"];
    assert_eq!(why, "the client certificate has no URI SAN", "{reply}");
    let (status, _, reply) = call_with(&without, &endpoint("dns"), &[]).await;
    assert_eq!(status, 401, "{reply}");
    assert_eq!(reply["error"]["data"][0]["metadata"]["scheme"], "none");
    // The key route: the certificate is no credential there; the key is.
    let (status, challenges, _) = call_with(&with_names, &endpoint("keys"), &[]).await;
    assert_eq!(
        (status, challenges),
        (401, vec!["ApiKey header=\"x-api-key\"".to_owned()])
    );
    let key = [("x-api-key", "alice-key")];
    let (status, _, reply) = call_with(&with_names, &endpoint("keys"), &key).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(backend.calls(), 4, "a refused call reached the agent");

    gateway.terminate();
    gateway
        .exit_within(
            std::time::Duration::from_secs(10),
            "the gateway did not stop",
        )
        .await;
    let log = std::fs::read_to_string(log.path()).unwrap();
    assert!(!log.contains("alice-key"), "the API key is in the log");
    let seen: Vec<(String, String)> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "a2a_gateway::access")
        .map(|line| {
            let fields = &line["fields"];
            let text = |name: &str| fields[name].as_str().unwrap().to_owned();
            (text("principal"), text("auth"))
        })
        .collect();
    let pair = |p: &str, s: &str| (p.to_owned(), s.to_owned());
    assert_eq!(
        seen,
        [
            pair(spiffe, "mtls"),
            pair("a.example.org", "mtls"),
            pair("CN=alice", "mtls"),
            pair("-", "-"),
            pair("-", "-"),
            pair("-", "-"),
            pair("alice", "api-key"),
        ]
    );
}

/// `[auth.mtls]` on a listener that asks clients for no certificate is a load error.
#[test]
fn mtls_needs_a_listener_with_client_certificates() {
    let config = TempFile::new(
        "toml",
        "backend = \"http://127.0.0.1:1\"\n[auth.mtls]\nidentity = \"uri\"\n",
    );
    let out = Command::new(BIN)
        .args(["check-config", config.path()])
        .output_within(EXITS_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("auth.mtls: the listener asks clients for no certificate"),
        "{stderr}"
    );
    let config = TempFile::new(
        "toml",
        "backend = \"http://127.0.0.1:1\"\n[auth.mtls]\nidentity = \"email\"\n",
    );
    let out = Command::new(BIN)
        .args(["check-config", config.path()])
        .output_within(EXITS_WITHIN);
    assert_eq!(out.status.code(), Some(2));
}

/// The server span names the caller (`enduser.id`) and its scheme; a refused call's span
/// names none.
#[tokio::test]
async fn the_server_span_names_the_principal() {
    use harness::otlp::{attr, Collector};
    let (collector, endpoint) = Collector::grpc().await;
    let (_backend, url) = harness::task_backend().await;
    let keys = key_file();
    let config = TempFile::new(
        "toml",
        &format!(
            "backend = \"{url}\"\n[auth.api-keys]\nfile = \"{}\"\n",
            keys.path()
        ),
    );
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ];
    let args = ["--config", config.path(), "--workers", "1"];
    let gateway = start_with(&args, &env, Stdio::null()).await;
    let with = &[("a2a-version", "1.0"), ("x-api-key", "alice-key")];
    let (status, _, body) = post_with(&gateway.1, get_task(1), with).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = post(&gateway.1, get_task(2)).await;
    assert_eq!(status, 401);
    let spans = collector
        .wait_for(3, std::time::Duration::from_secs(10))
        .await;
    let server: Vec<_> = spans
        .iter()
        .filter(|s| {
            s.span.name == "GetTask" && attr(&s.span, "rpc.system").as_deref() == Some("jsonrpc")
        })
        .map(|s| {
            let id = attr(&s.span, "rpc.jsonrpc.request_id");
            (
                id,
                attr(&s.span, "enduser.id"),
                attr(&s.span, "a2a_gateway.auth.scheme"),
            )
        })
        .collect();
    let some = |s: &str| Some(s.to_owned());
    assert!(
        server.contains(&(some("1"), some("alice"), some("api-key"))),
        "{server:?}"
    );
    // The refused call's body was never read: no span names its method or a principal.
    assert!(
        !server.iter().any(|(id, ..)| id == &some("2")),
        "{server:?}"
    );
}

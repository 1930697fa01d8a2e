//! v0.3 clients through the gateway (docs/compatibility.md "v0.3 clients", `src/protocol/legacy.rs`).
//!
//! Differential: the reference SDK agent's own v0.3 endpoint (`/v03/jsonrpc`, its compat
//! layer over the same agent) is the reference. The same v0.3 request sequences go to it and
//! through the gateway to the agent's v1.0 gRPC and HTTP+JSON endpoints; the answers must be
//! equal after normalising generated ids and timestamps, number formatting and default
//! values — unary replies, streams frame by frame, errors. Then the reference SDK's own v0.3
//! client through the gateway, the card forms, the version cases that must not move, and
//! `--legacy off`.

use crate::harness;

use std::time::Duration;

use harness::peer::Peer;
use harness::process::{start, start_with, TempFile, BIN};
use harness::process::{OutputWithin, EXITS_WITHIN, SDK_CLIENT_WITHIN};
use harness::*;
use serde_json::{json, Value};

/// The agent's v0.3 endpoint and the gateway in front of each of its v1.0 bindings.
struct Paths {
    _peer: Peer,
    paths: Vec<(&'static str, String)>,
}

async fn paths() -> Paths {
    let peer = Peer::start();
    let grpc = gateway_from_flags(&["--backend", &peer.grpc]).await;
    let rest = gateway_from_flags(&["--backend", &peer.rest, "--binding", "HTTP+JSON"]).await;
    let reference = peer.jsonrpc.replace("/jsonrpc", "/v03/jsonrpc");
    let paths = vec![
        ("sdk-v0.3", reference),
        ("gateway-grpc", grpc),
        ("gateway-rest", rest),
    ];
    Paths { _peer: peer, paths }
}

/// A v0.3 call as a v0.3 client makes it: no `A2A-Version`.
async fn call(url: &str, method: &str, params: Value) -> Value {
    let (status, headers, text) = post_with(url, request(json!(1), method, params), &[]).await;
    assert_eq!(status, 200, "{method}: {text}");
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{method}: {headers:?}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method}: {e}: {text}"))
}

/// A v0.3 streaming call: the data of every SSE event (each a whole JSON-RPC response;
/// v0.3 writes errors as plain events too), at most `limit`.
async fn stream(url: &str, method: &str, params: Value, limit: usize) -> Vec<Value> {
    let response = client()
        .post(url)
        .header("content-type", "application/json")
        .body(request(json!(1), method, params))
        .send()
        .await
        .unwrap();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{method}: a v0.3 stream call is answered with SSE, got {content_type}"
    );
    let mut response = response;
    let mut buffer = String::new();
    let mut frames = Vec::new();
    while frames.len() < limit {
        if let Some(end) = buffer.find("\n\n") {
            let frame = buffer[..end].to_owned();
            buffer.drain(..end + 2);
            let mut data = String::new();
            for line in frame.lines() {
                assert!(
                    !line.starts_with("event:"),
                    "{method}: v0.3 events are unnamed: {frame}"
                );
                if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            if !data.is_empty() {
                frames.push(serde_json::from_str(&data).unwrap());
            }
            continue;
        }
        match tokio::time::timeout(Duration::from_secs(20), response.chunk())
            .await
            .expect("stream stalled")
            .unwrap()
        {
            Some(chunk) => {
                buffer.push_str(&std::str::from_utf8(&chunk).unwrap().replace("\r\n", "\n"))
            }
            None => break,
        }
    }
    frames
}

fn message(text: &str, context_id: &str) -> Value {
    json!({"message": {"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(),
                       "contextId": context_id, "role": "user",
                       "parts": [{"kind": "text", "text": text}]}})
}

fn task_id(reply: &Value) -> String {
    reply["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task in {reply}"))
        .to_owned()
}

/// Differences that are the SDK's own, each with its reason.
fn known_sdk_differences(mut value: Value) -> Value {
    // An uncaught exception in agent code is worded differently by each SDK binding (as in
    // tests/it/interop.rs); the gateway passes the backend's message on, so only the code is
    // comparable.
    if value.pointer("/error/code") == Some(&json!(-32603.0))
        && value.pointer("/error/data").is_none()
    {
        value["error"]["message"] = json!("<agent exception>");
    }
    // A v0.3 request outside the schema: the reference's `data` is pydantic's report, the
    // gateway's names the member; both are one string.
    if value.pointer("/error/code") == Some(&json!(-32600.0)) {
        assert!(value["error"]["data"].is_string(), "{value}");
        value["error"]["data"] = json!("<problem>");
    }
    value
}

async fn differential<F, Fut>(name: &str, scenario: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Vec<Value>>,
{
    let paths = paths().await;
    transcript::differential(name, &paths.paths, known_sdk_differences, scenario).await;
}

#[tokio::test]
async fn unary_v03_calls_match_the_sdks_v03_endpoint() {
    differential("unary", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut out = Vec::new();
        out.push(call(&url, "message/send", message("hello", &ctx)).await);
        let done = call(&url, "message/send", message("task", &ctx)).await;
        let done_id = task_id(&done);
        out.push(done);
        out.push(call(&url, "message/send", message("fail", &ctx)).await);
        out.push(call(&url, "message/send", message("reject", &ctx)).await);
        out.push(call(&url, "tasks/get", json!({"id": done_id})).await);
        out.push(call(&url, "tasks/get", json!({"id": done_id, "historyLength": 1})).await);
        // v0.3's 0 is "no limit" (unset in v1.0, where 0 would mean "no history").
        out.push(call(&url, "tasks/get", json!({"id": done_id, "historyLength": 0})).await);
        let waiting = call(&url, "message/send", message("input", &ctx)).await;
        let waiting_id = task_id(&waiting);
        out.push(waiting);
        let mut follow_up = message("more", "");
        follow_up["message"]["taskId"] = json!(waiting_id);
        follow_up["message"].as_object_mut().unwrap().remove("contextId");
        out.push(call(&url, "message/send", follow_up).await);
        // Parts of every v0.3 kind, metadata and configuration on the way in.
        let mut rich = message("hello", &ctx);
        rich["message"]["parts"] = json!([
            {"kind": "text", "text": "hello", "metadata": {"k": "v"}},
            {"kind": "data", "data": {"a": [1, 2]}},
            {"kind": "file", "file": {"bytes": "AAEC", "mimeType": "application/octet-stream", "name": "b.bin"}},
            {"kind": "file", "file": {"uri": "https://files.example/x", "mimeType": "text/plain"}}]);
        rich["message"]["metadata"] = json!({"m": 1});
        rich["configuration"] = json!({"blocking": true, "acceptedOutputModes": ["text/plain"], "historyLength": 2});
        rich["metadata"] = json!({"request": "meta"});
        out.push(call(&url, "message/send", rich).await);
        out
    })
    .await;
}

#[tokio::test]
async fn push_config_v03_crud_matches() {
    differential("push configs", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let id = task_id(&call(&url, "message/send", message("task", &ctx)).await);
        let config = json!({"taskId": id, "pushNotificationConfig": {"id": "cfg-1",
            "url": "http://127.0.0.1:9/hook", "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}});
        let other =
            json!({"taskId": id, "pushNotificationConfig": {"url": "http://127.0.0.1:9/other"}});
        let named = json!({"id": id, "pushNotificationConfigId": "cfg-1"});
        vec![
            call(&url, "tasks/pushNotificationConfig/set", config).await,
            call(&url, "tasks/pushNotificationConfig/set", other).await,
            call(&url, "tasks/pushNotificationConfig/get", named.clone()).await,
            call(&url, "tasks/pushNotificationConfig/list", json!({"id": id})).await,
            call(&url, "tasks/pushNotificationConfig/delete", named.clone()).await,
            call(&url, "tasks/pushNotificationConfig/list", json!({"id": id})).await,
            call(&url, "tasks/pushNotificationConfig/get", named).await,
        ]
    })
    .await;
}

#[tokio::test]
async fn v03_streams_match_frame_by_frame() {
    differential("streams", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut out = Vec::new();
        for text in [
            "stream",
            "hello",
            "input",
            "late-error:TaskNotFound",
            "error:UnsupportedOperation",
        ] {
            out.extend(stream(&url, "message/stream", message(text, &ctx), 100).await);
        }
        out.extend(stream(&url, "tasks/resubscribe", json!({"id": "no-such-task"}), 10).await);
        out
    })
    .await;
}

#[tokio::test]
async fn v03_cancel_and_resubscribe_match() {
    differential("cancel and resubscribe", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut params = message("slow:20", &ctx);
        params["configuration"] = json!({"blocking": false});
        let started = call(&url, "message/send", params).await;
        let id = task_id(&started);
        let mut out = vec![json!(started["result"]["status"]["state"])];
        let watcher = tokio::spawn({
            let (url, id) = (url.clone(), id.clone());
            async move { stream(&url, "tasks/resubscribe", json!({"id": id}), 1000).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        out.push(call(&url, "tasks/cancel", json!({"id": id})).await);
        let frames = watcher.await.unwrap();
        // Tick events depend on timing; the first and last frames do not.
        out.push(frames.first().unwrap()["result"]["kind"].clone());
        out.push(frames.last().unwrap().clone());
        out.push(call(&url, "tasks/cancel", json!({"id": id})).await);
        out.extend(stream(&url, "tasks/resubscribe", json!({"id": id}), 10).await);
        out
    })
    .await;
}

#[tokio::test]
async fn v03_errors_match() {
    differential("errors", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut out = Vec::new();
        // v1.0's -32008 and -32009 have no v0.3 code: -32603.
        for name in peer::AGENT_ERRORS {
            out.push(
                call(
                    &url,
                    "message/send",
                    message(&format!("error:{name}"), &ctx),
                )
                .await,
            );
        }
        out.push(call(&url, "message/send", message("boom", &ctx)).await);
        out.push(call(&url, "tasks/get", json!({"id": "no-such-task"})).await);
        out.push(call(&url, "tasks/cancel", json!({"id": "no-such-task"})).await);
        let named = json!({"id": "no-such-task", "pushNotificationConfigId": "x"});
        out.push(call(&url, "tasks/pushNotificationConfig/get", named).await);
        out.push(call(&url, "message/send", json!({})).await);
        out.push(
            call(
                &url,
                "message/send",
                json!({"message": {"messageId": "m", "role": "user"}}),
            )
            .await,
        );
        out.push(call(&url, "tasks/get", json!({})).await);
        let unnamed = json!({"id": "no-such-task"});
        out.push(call(&url, "tasks/pushNotificationConfig/delete", unnamed).await);
        out.push(call(&url, "NoSuchMethod", json!({})).await);
        out
    })
    .await;
}

/// The agent's own well-known card, as the gateway's `--card` source.
fn agent_card_url(peer: &Peer) -> String {
    let origin = peer.jsonrpc.trim_end_matches("/jsonrpc");
    format!("{origin}/.well-known/agent-card.json")
}

/// GETs the gateway's card with `A2A-Version: version` (none: no header) once it is served.
async fn card(origin: &str, version: Option<&str>) -> (reqwest::header::HeaderMap, Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut request = client().get(format!("{origin}/.well-known/agent-card.json"));
        if let Some(version) = version {
            request = request.header("a2a-version", version);
        }
        let response = request.send().await.unwrap();
        if response.status() == 200 {
            return (response.headers().clone(), response.json().await.unwrap());
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the card is never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_sdks_v03_client_completes_a_conversation_through_the_gateway() {
    let peer = Peer::start();
    let source = agent_card_url(&peer);
    let python = harness::peer::python();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/client_v03.py");
    for backend in [
        vec!["--backend", &peer.grpc],
        vec!["--backend", &peer.rest, "--binding", "HTTP+JSON"],
    ] {
        // The SDK's conversation registers its push hook on loopback.
        let hooks = ["--push-allow-http", "--push-allow", "127.0.0.1"];
        let gateway = start(&[&backend[..], &["--card", &source], &hooks].concat()).await;
        let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
        card(&origin, None).await;
        let (python, script) = (python.clone(), script.clone());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .arg(script)
                .arg(origin)
                .output_within(SDK_CLIENT_WITHIN)
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{backend:?}: the SDK's v0.3 client failed\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("OK ") && l.ends_with("CompatJsonRpcTransport")),
            "{backend:?}: {stdout}"
        );
    }
}

/// Without `A2A-Version` the card is dual-format (v1.0 plus the v0.3 members), with `0.3`
/// it is the v0.3 card, with `1.0` the v1.0 card; the v0.3 extended card names the gateway;
/// `/metrics` counts v0.3 calls by version and v0.3 method.
#[tokio::test]
async fn v03_clients_get_cards_naming_the_gateway() {
    let peer = Peer::start();
    let gateway = start(&["--backend", &peer.grpc, "--card", &agent_card_url(&peer)]).await;
    let endpoint = gateway.1.clone();
    let origin = endpoint.trim_end_matches("/a2a/jsonrpc").to_owned();
    let (headers, v1) = card(&origin, Some("1.0")).await;
    assert!(
        headers["vary"].to_str().unwrap().contains("a2a-version"),
        "{headers:?}"
    );
    assert_eq!(
        v1["supportedInterfaces"],
        json!([{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    for v03_member in [
        "url",
        "preferredTransport",
        "protocolVersion",
        "additionalInterfaces",
    ] {
        assert!(
            v1.get(v03_member).is_none(),
            "{v03_member} in the v1.0 card"
        );
    }
    let (dual_headers, dual) = card(&origin, None).await;
    assert_ne!(dual_headers["etag"], headers["etag"]);
    let mut v1_part = dual.clone();
    let object = v1_part.as_object_mut().unwrap();
    assert_eq!(object.remove("url"), Some(json!(endpoint)));
    assert_eq!(object.remove("preferredTransport"), Some(json!("JSONRPC")));
    assert_eq!(object.remove("protocolVersion"), Some(json!("0.3.0")));
    assert_eq!(
        object.remove("additionalInterfaces"),
        Some(json!([{"url": endpoint, "transport": "JSONRPC"}]))
    );
    assert_eq!(
        object.remove("supportsAuthenticatedExtendedCard"),
        Some(json!(true))
    );
    assert_eq!(
        v1_part, v1,
        "the dual card is the v1.0 card plus v0.3 members"
    );
    let (_, v03) = card(&origin, Some("0.3")).await;
    assert!(v03.get("supportedInterfaces").is_none(), "{v03}");
    assert_eq!(v03["url"], endpoint);
    assert_eq!(v03["protocolVersion"], "0.3.0");
    assert_eq!(v03["skills"][0]["tags"], json!(["test"]));

    let extended = call(&endpoint, "agent/getAuthenticatedExtendedCard", json!({})).await;
    let extended = &extended["result"];
    assert_eq!(extended["url"], endpoint, "{extended}");
    assert_eq!(extended["preferredTransport"], "JSONRPC");
    assert!(extended.get("supportedInterfaces").is_none(), "{extended}");
    let skills: Vec<_> = extended["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert!(skills.contains(&&json!("extended-only")), "{extended}");

    let metrics = client()
        .get(format!("{origin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = "a2a_gateway_legacy_requests_total{route=\"default\",version=\"0.3\",method=\"agent/getAuthenticatedExtendedCard\",code=\"0\"} 1\n";
    assert!(metrics.contains(line), "{metrics}");
    assert!(
        metrics
            .contains("a2a_gateway_requests_total{route=\"default\",method=\"GetExtendedAgentCard\",code=\"0\"} 1\n"),
        "a v0.3 call counts under its operation too: {metrics}"
    );
}

/// What decides a v0.3 call: a v0.3 method name and a v0.3 version (none, empty or 0.3).
/// The cases of tests/it/service_params.rs and tests/it/interop.rs do not move: a v1.0 name
/// without a version is -32009, a v0.3 name with `1.0` is -32601; `--legacy off` serves no
/// v0.3 call.
#[tokio::test]
async fn only_v03_names_without_a_v1_version_are_v03_calls() {
    let peer = Peer::start();
    let on = gateway_from_flags(&["--backend", &peer.grpc]).await;
    let off = gateway_from_flags(&["--backend", &peer.grpc, "--legacy", "off"]).await;
    let code = |reply: &Value| reply["error"]["code"].as_i64();
    let get = |url: String, method: &'static str, version: Option<&'static str>| async move {
        let headers: Vec<(&str, &str)> = version.map(|v| ("a2a-version", v)).into_iter().collect();
        let body = request(json!(7), method, json!({"id": "no-such-task"}));
        let (_, _, text) = post_with(&url, body, &headers).await;
        serde_json::from_str::<Value>(&text).unwrap()
    };
    for version in [None, Some(""), Some("0.3"), Some("0.3.0")] {
        let reply = get(on.clone(), "tasks/get", version).await;
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "Task not found"}}),
            "{version:?}"
        );
        assert_eq!(
            code(&get(on.clone(), "GetTask", version).await),
            Some(-32009),
            "{version:?}"
        );
        assert_eq!(
            code(&get(off.clone(), "tasks/get", version).await),
            Some(-32601),
            "{version:?}"
        );
    }
    for version in ["1.0", "1", "2.0", "0.2"] {
        let reply = get(on.clone(), "tasks/get", Some(version)).await;
        assert_eq!(code(&reply), Some(-32601), "{version}: {reply}");
    }
    let v1 = get(on.clone(), "GetTask", Some("1.0")).await;
    assert_eq!(
        v1["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
        "v1.0 calls are unchanged: {v1}"
    );
    // Batches mix both, each member in its own version.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}},
        {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "x"}},
    ]);
    let (_, _, text) = post_with(&on, batch.to_string(), &[("a2a-version", "0.3")]).await;
    let replies: Value = serde_json::from_str(&text).unwrap();
    // v0.3's `X-A2A-Extensions` reaches the agent as `A2A-Extensions`, with version 1.0.
    let ext = "https://a2a-gateway.test/ext/echo/v1";
    let body = request(json!(8), "message/send", message("headers", "ctx"));
    let (_, headers, text) = post_with(&on, body, &[("x-a2a-extensions", ext)]).await;
    let reply: Value = serde_json::from_str(&text).unwrap();
    let seen: Value =
        serde_json::from_str(reply["result"]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(seen["requested_extensions"], json!([ext]), "{seen}");
    assert_eq!(seen["a2a-version"], "1.0", "{seen}");
    assert_eq!(headers["a2a-extensions"], ext);
    assert_eq!(
        (code(&replies[0]), code(&replies[1])),
        (Some(-32001), Some(-32009)),
        "{replies}"
    );
}

/// Each call's log names its protocol version (a `DEBUG` event `call`).
#[tokio::test]
async fn logs_label_each_calls_version() {
    let peer = Peer::start();
    let mut gateway = start_with(
        &["--backend", &peer.grpc, "--log-format", "json"],
        &[("RUST_LOG", "a2a_gateway=debug")],
        std::process::Stdio::piped(),
    )
    .await;
    let params = json!({"id": "no-such-task"});
    post_with(
        &gateway.1,
        request(json!(1), "tasks/get", params.clone()),
        &[],
    )
    .await;
    post(&gateway.1, request(json!(2), "GetTask", params)).await;
    let _ = gateway.0.kill();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut gateway.0.stderr.take().unwrap(), &mut log).unwrap();
    let call = |version: &str, method: &str| {
        log.lines().any(|line| {
            line.contains("\"message\":\"call\"")
                && line.contains(&format!("\"a2a_version\":\"{version}\""))
                && line.contains(&format!("\"method\":\"{method}\""))
        })
    };
    assert!(call("0.3", "tasks/get"), "{log}");
    assert!(call("1.0", "GetTask"), "{log}");
}

/// `legacy` is a per-route setting of the config file (top level: every route's default);
/// a value other than `v0.3` or `off` is refused naming the key.
#[tokio::test]
async fn legacy_is_set_per_route_in_the_config_file() {
    let peer = Peer::start();
    let config = TempFile::new(
        "toml",
        &format!(
            "legacy = \"off\"\n\
             [[route]]\nname = \"old-clients\"\npath = \"/old\"\nbackend = \"{0}\"\nlegacy = \"v0.3\"\n\
             [[route]]\nname = \"new-clients\"\npath = \"/new\"\nbackend = \"{0}\"\n",
            peer.grpc
        ),
    );
    let gateway = start(&["--config", config.path()]).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    for (route, code) in [("old", -32001), ("new", -32601)] {
        let url = format!("{origin}/{route}/a2a/jsonrpc");
        let body = request(json!(1), "tasks/get", json!({"id": "no-such-task"}));
        let (_, _, text) = post_with(&url, body, &[]).await;
        let reply: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(reply["error"]["code"], code, "{route}: {reply}");
    }
    let bad = TempFile::new(
        "toml",
        &format!("backend = \"{}\"\nlegacy = \"v0.2\"\n", peer.grpc),
    );
    let out = std::process::Command::new(BIN)
        .args(["check-config", bad.path()])
        .output_within(EXITS_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("legacy"), "{stderr}");
}

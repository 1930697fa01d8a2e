//! Interop with the reference SDK (a2a-sdk 1.3.0, `tests/peers/agent.py`). The same request
//! sequence goes (a) to the agent's own JSON-RPC endpoint, (b) through the gateway to its
//! gRPC endpoint and (c) through the gateway to its HTTP+JSON endpoint; the three
//! transcripts must be equal after normalising what legitimately differs:
//! generated ids and timestamps, number formatting (`1` vs `1.0`), and default-valued
//! fields present vs omitted. Streams compare frame by frame. Differences that are the
//! SDK's own are normalised in `known_sdk_differences`, each with its reason.

use crate::harness;

use std::time::Duration;

use harness::peer::Peer;
use harness::process::{OutputWithin, SDK_CLIENT_WITHIN};
use harness::*;
use serde_json::{json, Value};

/// The three ways to reach the agent.
struct Paths {
    _peer: Peer,
    paths: Vec<(&'static str, String)>,
}

async fn paths() -> Paths {
    let peer = Peer::start();
    let grpc = gateway_from_flags(&["--backend", &peer.grpc]).await;
    let rest = gateway_from_flags(&["--backend", &peer.rest, "--binding", "HTTP+JSON"]).await;
    let paths = vec![
        ("sdk-jsonrpc", peer.jsonrpc.clone()),
        ("gateway-grpc", grpc),
        ("gateway-rest", rest),
    ];
    Paths { _peer: peer, paths }
}

/// One JSON-RPC call; the whole response object.
async fn call(url: &str, method: &str, params: Value) -> Value {
    let (status, headers, text) = post(url, request(json!(1), method, params)).await;
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

/// A streaming call: every frame as `{"event": …, "data": …}`, or the plain reply.
async fn stream(url: &str, method: &str, params: Value, limit: usize) -> Vec<Value> {
    let response = client()
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(request(json!(1), method, params))
        .send()
        .await
        .unwrap();
    let is_sse = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream");
    if !is_sse {
        return vec![json!({"reply": response.json::<Value>().await.unwrap()})];
    }
    let mut frames = Vec::new();
    let mut buffer = String::new();
    let mut response = response;
    while frames.len() < limit {
        if let Some(end) = buffer.replace("\r\n", "\n").find("\n\n") {
            let normalised = buffer.replace("\r\n", "\n");
            let frame = normalised[..end].to_owned();
            buffer = normalised[end + 2..].to_owned();
            let mut event = "message";
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(e) = line.strip_prefix("event:") {
                    event = if e.trim() == "error" {
                        "error"
                    } else {
                        "message"
                    };
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            if !data.is_empty() {
                frames.push(
                    json!({"event": event, "data": serde_json::from_str::<Value>(&data).unwrap()}),
                );
            }
            continue;
        }
        match tokio::time::timeout(Duration::from_secs(20), response.chunk())
            .await
            .expect("stream stalled")
            .unwrap()
        {
            Some(chunk) => buffer.push_str(std::str::from_utf8(&chunk).unwrap()),
            None => break,
        }
    }
    frames
}

fn message(text: &str, context_id: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "contextId": context_id,
                       "role": "ROLE_USER", "parts": [{"text": text}]}})
}

fn task_id(reply: &Value) -> String {
    let result = &reply["result"];
    result["task"]["id"]
        .as_str()
        .or_else(|| result["id"].as_str())
        .unwrap_or_else(|| panic!("no task in {reply}"))
        .to_owned()
}

async fn differential<F, Fut>(name: &str, scenario: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Vec<Value>>,
{
    let paths = paths().await;
    transcript::differential(name, &paths.paths, known_sdk_differences, scenario).await;
}

/// Normalises differences that are the SDK's own, not the gateway's.
fn known_sdk_differences(mut value: Value) -> Value {
    // The SDK's gRPC server never fills `ErrorInfo.metadata` (its JSON-RPC server does,
    // even with non-string values), so metadata cannot survive a gRPC backend.
    if let Some(Value::Array(details)) = value.pointer_mut("/error/data") {
        for detail in details {
            if detail["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
                detail.as_object_mut().unwrap().remove("metadata");
            }
        }
    }
    // An uncaught exception in agent code is worded differently by each SDK binding:
    // JSON-RPC says "boom", gRPC (UNKNOWN) "Unexpected <class 'RuntimeError'>: boom",
    // REST (500) "unknown exception". The gateway passes the backend's message through,
    // so only the code is comparable. Gateway faults carry details and are not touched.
    if value.pointer("/error/code") == Some(&json!(-32603.0))
        && value.pointer("/error/data").is_none()
    {
        value["error"]["message"] = json!("<agent exception>");
    }
    value
}

#[tokio::test]
async fn unary_conversation_matches() {
    differential("unary", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut out = Vec::new();
        out.push(call(&url, "SendMessage", message("hello", &ctx)).await);
        let done = call(&url, "SendMessage", message("task", &ctx)).await;
        let done_id = task_id(&done);
        out.push(done);
        out.push(call(&url, "SendMessage", message("fail", &ctx)).await);
        out.push(call(&url, "SendMessage", message("reject", &ctx)).await);
        out.push(call(&url, "GetTask", json!({"id": done_id})).await);
        out.push(call(&url, "GetTask", json!({"id": done_id, "historyLength": 1})).await);
        out.push(call(&url, "ListTasks", json!({"contextId": ctx, "status": "TASK_STATE_COMPLETED"})).await);
        out.push(call(&url, "ListTasks", json!({"contextId": ctx, "pageSize": 1, "includeArtifacts": true})).await);
        let waiting = call(&url, "SendMessage", message("input", &ctx)).await;
        let waiting_id = task_id(&waiting);
        out.push(waiting);
        let follow_up = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "taskId": waiting_id,
                                           "role": "ROLE_USER", "parts": [{"text": "more"}]}});
        out.push(call(&url, "SendMessage", follow_up).await);
        out.push(call(&url, "GetExtendedAgentCard", json!({})).await);
        out
    }).await;
}

#[tokio::test]
async fn push_config_crud_matches() {
    differential("push configs", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let done = call(&url, "SendMessage", message("task", &ctx)).await;
        let id = task_id(&done);
        let config = json!({"taskId": id, "id": "cfg-1", "url": "http://127.0.0.1:9/hook", "token": "tok",
                            "authentication": {"scheme": "Bearer", "credentials": "secret"}});
        vec![
            call(&url, "CreateTaskPushNotificationConfig", config).await,
            call(&url, "CreateTaskPushNotificationConfig", json!({"taskId": id, "url": "http://127.0.0.1:9/other"})).await,
            call(&url, "GetTaskPushNotificationConfig", json!({"taskId": id, "id": "cfg-1"})).await,
            call(&url, "ListTaskPushNotificationConfigs", json!({"taskId": id})).await,
            call(&url, "DeleteTaskPushNotificationConfig", json!({"taskId": id, "id": "cfg-1"})).await,
            call(&url, "ListTaskPushNotificationConfigs", json!({"taskId": id})).await,
            call(&url, "GetTaskPushNotificationConfig", json!({"taskId": id, "id": "cfg-1"})).await,
        ]
    }).await;
}

#[tokio::test]
async fn streams_match_frame_by_frame() {
    differential("streams", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut out = Vec::new();
        out.extend(stream(&url, "SendStreamingMessage", message("stream", &ctx), 100).await);
        out.extend(stream(&url, "SendStreamingMessage", message("hello", &ctx), 100).await);
        out.extend(stream(&url, "SendStreamingMessage", message("input", &ctx), 100).await);
        out.extend(
            stream(
                &url,
                "SendStreamingMessage",
                message("late-error:TaskNotFound", &ctx),
                100,
            )
            .await,
        );
        out.extend(
            stream(
                &url,
                "SendStreamingMessage",
                message("error:UnsupportedOperation", &ctx),
                100,
            )
            .await,
        );
        out
    })
    .await;
}

#[tokio::test]
async fn cancel_and_subscribe_match() {
    differential("cancel and subscribe", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut params = message("slow:20", &ctx);
        params["configuration"] = json!({"returnImmediately": true});
        let started = call(&url, "SendMessage", params).await;
        let id = task_id(&started);
        let mut out = vec![json!(started["result"]["task"]["status"]["state"])];
        let watcher = tokio::spawn({
            let (url, id) = (url.clone(), id.clone());
            async move { stream(&url, "SubscribeToTask", json!({"id": id}), 1000).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        out.push(call(&url, "CancelTask", json!({"id": id})).await);
        let frames = watcher.await.unwrap();
        // Tick events depend on timing; the first and last frames do not.
        out.push(frames.first().unwrap()["data"]["result"]["task"]["id"].clone());
        out.push(frames.last().unwrap().clone());
        out.push(call(&url, "CancelTask", json!({"id": id})).await);
        out.extend(stream(&url, "SubscribeToTask", json!({"id": id}), 10).await);
        out.push(call(&url, "GetTask", json!({"id": id, "historyLength": 0})).await);
        out
    })
    .await;
}

#[tokio::test]
async fn errors_match() {
    differential("errors", |url| async move {
        let ctx = uuid::Uuid::new_v4().to_string();
        let mut out = Vec::new();
        for name in peer::AGENT_ERRORS {
            out.push(call(&url, "SendMessage", message(&format!("error:{name}"), &ctx)).await);
        }
        out.push(call(&url, "SendMessage", message("boom", &ctx)).await);
        out.push(call(&url, "GetTask", json!({"id": "no-such-task"})).await);
        out.push(call(&url, "CancelTask", json!({"id": "no-such-task"})).await);
        out.push(call(&url, "SubscribeToTask", json!({"id": "no-such-task"})).await);
        out.push(
            call(
                &url,
                "GetTaskPushNotificationConfig",
                json!({"taskId": "no-such-task", "id": "x"}),
            )
            .await,
        );
        out.push(call(&url, "SendMessage", json!({})).await);
        out.push(
            call(
                &url,
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER"}}),
            )
            .await,
        );
        out.push(call(&url, "ListTasks", json!({"pageSize": 1000})).await);
        out.push(call(&url, "NoSuchMethod", json!({})).await);
        out.push(call(&url, "message/send", json!({})).await);
        out
    })
    .await;
}

#[tokio::test]
async fn service_parameters_reach_the_agent() {
    let paths = paths().await;
    for (path, url) in &paths.paths {
        let mut params = message("headers", "ctx");
        params["tenant"] = json!("acme");
        let body = request(json!(1), "SendMessage", params);
        let (_, headers, text) = post_with(
            url,
            body,
            &[
                ("a2a-version", "1.0"),
                ("a2a-extensions", "https://a2a-gateway.test/ext/echo/v1"),
                ("authorization", "Bearer t0k"),
                (
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ),
                ("x-request-id", "req-9"),
            ],
        )
        .await;
        let reply: Value = serde_json::from_str(&text).unwrap();
        let seen: Value = serde_json::from_str(
            reply["result"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            seen["a2a-version"].as_str().map(|v| v.starts_with('1')),
            Some(true),
            "{path}: {seen}"
        );
        assert_eq!(seen["authorization"], "Bearer t0k", "{path}: {seen}");
        assert_eq!(
            seen["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "{path}: {seen}"
        );
        assert_eq!(seen["x-request-id"], "req-9", "{path}: {seen}");
        assert_eq!(
            seen["tenant"], "acme",
            "{path}: tenant (REST: the /{{tenant}} prefix)"
        );
        assert_eq!(
            seen["requested_extensions"],
            json!(["https://a2a-gateway.test/ext/echo/v1"]),
            "{path}: {seen}"
        );
        assert_eq!(
            headers["a2a-extensions"], "https://a2a-gateway.test/ext/echo/v1",
            "{path}: extensions reported back"
        );
    }
}

#[tokio::test]
async fn the_sdk_client_completes_a_conversation_through_the_gateway() {
    let paths = paths().await;
    let python = harness::peer::python();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/client_conversation.py");
    for (path, url) in &paths.paths[1..] {
        let url = url.clone();
        let (python, script) = (python.clone(), script.clone());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .arg(script)
                .arg(url)
                .output_within(SDK_CLIENT_WITHIN)
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{path}: SDK client failed\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.lines().any(|l| l.starts_with("OK ")),
            "{path}: {stdout}"
        );
    }
}

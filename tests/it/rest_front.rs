//! The HTTP+JSON front (spec 11) on the wire: every operation through it to an in-process
//! gRPC agent, and to the same agent behind a second gateway's HTTP+JSON backend (which
//! reads what the front writes); the same calls over JSON-RPC give the same results, the
//! agent the same requests, and every error row the same kind (HTTP status and reason on
//! one side, code and reason on the other). Then streams, tenant paths, what the front
//! refuses (415, 413, 404, 405, a query past its bounds, a missing version) and the card
//! listing the route's fronts in order.

use crate::harness;
use crate::operations::unary_case;

use a2a_gateway::protocol::error::{ErrorKind, Profile};
use a2a_gateway::protocol::ops::{Op, Request, StreamRequest, UnaryRequest};
use harness::process::TempFile;
use harness::*;
use prost::Message as _;
use reqwest::Method;
use serde_json::{json, Value};
use tonic::Status;
use tonic_types::pb;

/// The front's base path (`rest-path`'s default).
pub(crate) const REST: &str = "/a2a/rest";

/// Each operation's method and path below the front's base, as spec 11.3 lists them
/// (restated here as the oracle the front is held to).
fn rule(op: Op) -> (Method, &'static str) {
    match op {
        Op::SendMessage => (Method::POST, "/message:send"),
        Op::SendStreamingMessage => (Method::POST, "/message:stream"),
        Op::GetTask => (Method::GET, "/tasks/{id}"),
        Op::ListTasks => (Method::GET, "/tasks"),
        Op::CancelTask => (Method::POST, "/tasks/{id}:cancel"),
        Op::SubscribeToTask => (Method::POST, "/tasks/{id}:subscribe"),
        Op::CreateTaskPushNotificationConfig => {
            (Method::POST, "/tasks/{taskId}/pushNotificationConfigs")
        }
        Op::GetTaskPushNotificationConfig => {
            (Method::GET, "/tasks/{taskId}/pushNotificationConfigs/{id}")
        }
        Op::ListTaskPushNotificationConfigs => {
            (Method::GET, "/tasks/{taskId}/pushNotificationConfigs")
        }
        Op::DeleteTaskPushNotificationConfig => (
            Method::DELETE,
            "/tasks/{taskId}/pushNotificationConfigs/{id}",
        ),
        Op::GetExtendedAgentCard => (Method::GET, "/extendedAgentCard"),
    }
}

/// `task_id` → `taskId`.
fn camel(name: &str) -> String {
    let mut parts = name.split('_');
    let mut out = parts.next().unwrap_or_default().to_owned();
    for part in parts {
        let mut chars = part.chars();
        out.extend(chars.next().map(|c| c.to_ascii_uppercase()));
        out.push_str(chars.as_str());
    }
    out
}

/// The HTTP+JSON request of `op` with JSON-RPC `params`: the tenant as first segment, path
/// fields in the path, a POST's params as its body, a GET's or DELETE's other fields as
/// query parameters. Returns method, path (with query) below the base, and body.
pub(crate) fn layout(op: Op, params: &Value) -> (Method, String, Option<Value>) {
    let (method, template) = rule(op);
    let mut fields: serde_json::Map<String, Value> = match params {
        Value::Object(members) => members.iter().map(|(k, v)| (camel(k), v.clone())).collect(),
        _ => serde_json::Map::new(),
    };
    let mut path = String::new();
    if let Some(Value::String(tenant)) = fields.remove("tenant") {
        path.push('/');
        path.push_str(&tenant);
    }
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest.find('}').unwrap();
        path.push_str(&rest[..open]);
        let name = &rest[open + 1..close];
        let value = match method {
            Method::POST => fields[name].clone(),
            _ => fields.remove(name).unwrap(),
        };
        path.push_str(value.as_str().unwrap());
        rest = &rest[close + 1..];
    }
    path.push_str(rest);
    if method == Method::POST {
        return (method, path, Some(Value::Object(fields)));
    }
    let query: Vec<String> = fields
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={}", urlencoding(s)),
            other => format!("{k}={other}"),
        })
        .collect();
    if !query.is_empty() {
        path.push('?');
        path.push_str(&query.join("&"));
    }
    (method, path, None)
}

fn urlencoding(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// One HTTP+JSON request: status, headers and body text.
async fn send(
    method: Method,
    url: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = client().request(method, url);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/a2a+json")
            .body(body.to_string());
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// `op` with `params` through the HTTP+JSON front at `origin`.
async fn rest_call(
    origin: &str,
    op: Op,
    params: &Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let (method, path, body) = layout(op, params);
    let url = format!("{origin}{REST}{path}");
    send(method, &url, body.as_ref(), &[("a2a-version", "1.0")]).await
}

/// `op` with `params` through the JSON-RPC front at `origin`: the whole response object.
async fn rpc_call(origin: &str, op: Op, params: &Value) -> Value {
    let body = match params {
        Value::Null => json!({"jsonrpc": "2.0", "id": 1, "method": op.name()}).to_string(),
        params => request(json!(1), op.name(), params.clone()),
    };
    rpc(&format!("{origin}/a2a/jsonrpc"), &body).await
}

/// The `data:` values of a whole SSE body and, if it ended with one, its `event: error`.
fn sse_data(text: &str) -> (Vec<Value>, Option<Value>) {
    // The reference SDK ends its lines with CRLF.
    let text = text.replace("\r\n", "\n");
    let mut data = Vec::new();
    let mut error = None;
    for event in text
        .split("\n\n")
        .filter(|e| !e.is_empty() && !e.starts_with(':'))
    {
        let line = event
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap();
        let value: Value = serde_json::from_str(line).unwrap();
        match event.starts_with("event: error") {
            true => error = Some(value),
            false => data.push(value),
        }
    }
    (data, error)
}

/// An agent answering every operation with its case's reply (`operations::unary_case`),
/// and streams with two events; the gateway in front of it serving both fronts (`a`), and a
/// second gateway whose HTTP+JSON backend is `a`'s HTTP+JSON front (`b`).
async fn two_gateways(extra: &[&str]) -> (TestBackend, String, String) {
    use a2a_gateway::proto::TaskState;
    let backend = TestBackend::new(|request| match request {
        Request::Unary(unary) => Answer::Reply(unary_case(request_op(unary)).reply),
        Request::Stream(_) => Answer::Stream(vec![
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Event(status_update("t-1", TaskState::Completed)),
        ]),
    });
    let agent = format!("http://{}", backend.spawn().await);
    let mut flags = vec!["--backend", &agent, "--fronts", "JSONRPC,HTTP+JSON"];
    flags.extend(["--push", "pass"]);
    flags.extend_from_slice(extra);
    let a = serve_on_workers(&flags, None).await;
    let rest_agent = format!("{a}{REST}");
    let mut flags = vec!["--binding", "HTTP+JSON", "--backend", &rest_agent];
    flags.extend(["--fronts", "HTTP+JSON,JSONRPC", "--push", "pass"]);
    let b = serve_on_workers(&flags, None).await;
    (backend, a, b)
}

fn request_op(request: &UnaryRequest) -> Op {
    Request::Unary(request.clone()).op()
}

#[tokio::test]
async fn every_unary_operation_means_the_same_on_both_fronts_and_both_backends() {
    let (backend, a, b) = two_gateways(&[]).await;
    for &op in Op::ALL.iter().filter(|op| !op.is_streaming()) {
        let case = unary_case(op);
        for origin in [&a, &b] {
            let (status, headers, text) = rest_call(origin, op, &case.params).await;
            assert_eq!(status, 200, "{op:?} via {origin}: {text}");
            assert_eq!(headers["content-type"], "application/a2a+json");
            let over_rest: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(backend.last().request, case.expected, "{op:?} via {origin}");
            let over_rpc = rpc_call(origin, op, &case.params).await;
            assert_eq!(backend.last().request, case.expected, "{op:?} via {origin}");
            match op {
                // ProtoJSON's `Empty` over HTTP+JSON, `null` over JSON-RPC (as the
                // reference SDK writes each).
                Op::DeleteTaskPushNotificationConfig => {
                    assert_eq!(
                        (&over_rest, &over_rpc["result"]),
                        (&json!({}), &Value::Null)
                    );
                }
                // The extended card names the gateway's own interfaces.
                Op::GetExtendedAgentCard => {
                    assert_eq!(over_rest, over_rpc["result"], "via {origin}: {over_rpc}")
                }
                _ => {
                    assert_eq!(over_rest, over_rpc["result"], "{op:?} via {origin}");
                    assert_eq!(over_rest, case.result, "{op:?} via {origin}");
                }
            }
        }
    }
}

#[tokio::test]
async fn streams_are_bare_stream_responses_on_both_backends() {
    let (backend, a, b) = two_gateways(&[]).await;
    let cases = [
        (Op::SendStreamingMessage, message_params("go")),
        (Op::SubscribeToTask, json!({"id": "t-1", "tenant": "acme"})),
    ];
    for (op, params) in cases {
        for origin in [&a, &b] {
            let (status, headers, text) = rest_call(origin, op, &params).await;
            assert_eq!(status, 200, "{op:?} via {origin}: {text}");
            assert_eq!(headers["content-type"], "text/event-stream");
            let (events, error) = sse_data(&text);
            assert_eq!(error, None);
            let seen = backend.last().request;
            assert_eq!(seen.op(), op);
            if let Request::Stream(StreamRequest::SubscribeToTask(subscribe)) = &seen {
                assert_eq!(
                    (subscribe.id.as_str(), subscribe.tenant.as_str()),
                    ("t-1", "acme")
                );
            }
            let url = format!("{origin}/a2a/jsonrpc");
            let body = request(json!(1), op.name(), params.clone());
            let (_, _, rpc_text) = post(&url, body).await;
            let (rpc_events, _) = sse_data(&rpc_text);
            let results: Vec<Value> = rpc_events.iter().map(|e| e["result"].clone()).collect();
            assert_eq!(events, results, "{op:?} via {origin}");
            assert_eq!(events.len(), 2, "{text}");
            assert_eq!(
                events[1]["statusUpdate"]["status"]["state"],
                "TASK_STATE_COMPLETED"
            );
        }
    }
}

/// A stream that fails after its first event ends with an `event: error` whose data is the
/// `google.rpc.Status` body; one that fails at once is a plain error reply.
#[tokio::test]
async fn stream_errors_are_status_bodies() {
    use a2a_gateway::proto::TaskState;
    let backend = TestBackend::new(|request| match request {
        Request::Stream(StreamRequest::SubscribeToTask(_)) => {
            Answer::Error(Status::not_found("no such task"))
        }
        _ => Answer::Stream(vec![
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Error(Status::internal("agent broke")),
        ]),
    });
    let agent = format!("http://{}", backend.spawn().await);
    let origin = serve_on_workers(&["--backend", &agent, "--fronts", "HTTP+JSON"], None).await;
    let (status, _, text) =
        rest_call(&origin, Op::SendStreamingMessage, &message_params("go")).await;
    assert_eq!(status, 200);
    let (events, error) = sse_data(&text);
    assert_eq!(events.len(), 1, "{text}");
    let error = error.unwrap_or_else(|| panic!("no error event in {text}"));
    assert_eq!(error["error"]["code"], 500, "{error}");
    assert_eq!(error["error"]["status"], "INTERNAL");
    let (status, headers, text) =
        rest_call(&origin, Op::SubscribeToTask, &json!({"id": "t-9"})).await;
    assert_eq!(status, 404, "{text}");
    assert_eq!(headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND");
    // Only the JSON-RPC front was left out: its path is not served.
    let (status, _, _) = post(&format!("{origin}/a2a/jsonrpc"), "{}").await;
    assert_eq!(status, 404);
}

fn error_status(kind: ErrorKind, reason: &str) -> Status {
    let info = pb::ErrorInfo {
        reason: reason.into(),
        domain: "a2a-protocol.org".into(),
        metadata: Default::default(),
    };
    let details = vec![prost_types::Any {
        type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
        value: info.encode_to_vec(),
    }];
    let status = pb::Status {
        code: kind.grpc(Profile::V1_0_1) as i32,
        message: format!("agent says {reason}"),
        details,
    };
    Status::with_details(
        kind.grpc(Profile::V1_0_1),
        format!("agent says {reason}"),
        status.encode_to_vec().into(),
    )
}

/// The reason of the `ErrorInfo` among `details`.
fn reason_in(details: &Value) -> Option<&str> {
    details
        .as_array()?
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")?["reason"]
        .as_str()
}

/// Every error row with a reason, raised by the agent for GetTask (the task id names the
/// reason): the HTTP+JSON front answers the table's HTTP status in the route's
/// `spec-profile` and the reason, the JSON-RPC front the table's code and the reason,
/// directly (in both profiles) and behind a second gateway's HTTP+JSON backend.
#[tokio::test]
async fn every_error_row_is_the_same_kind_on_both_fronts() {
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(get)) => {
            let kind = ErrorKind::ALL
                .iter()
                .find(|k| k.reason() == Some(get.id.as_str()));
            Answer::Error(error_status(*kind.unwrap(), &get.id))
        }
        _ => Answer::Error(Status::unimplemented("GetTask only")),
    });
    let agent = format!("http://{}", backend.spawn().await);
    let a = serve_on_workers(
        &["--backend", &agent, "--fronts", "JSONRPC,HTTP+JSON"],
        None,
    )
    .await;
    let rest_agent = format!("{a}{REST}");
    let b = serve_on_workers(
        &[
            "--binding",
            "HTTP+JSON",
            "--backend",
            &rest_agent,
            "--fronts",
            "JSONRPC,HTTP+JSON",
        ],
        None,
    )
    .await;
    let old = serve_on_workers(
        &[
            "--backend",
            &agent,
            "--fronts",
            "JSONRPC,HTTP+JSON",
            "--spec-profile",
            "1.0.0",
        ],
        None,
    )
    .await;
    let mut rows = 0;
    let mut differ = 0;
    for &kind in ErrorKind::ALL {
        let Some(reason) = kind.reason() else {
            continue;
        };
        rows += 1;
        let params = json!({"id": reason});
        if kind.http(Profile::V1_0_0) != kind.http(Profile::V1_0_1) {
            differ += 1;
        }
        let profiles = [
            (&a, Profile::V1_0_1),
            (&b, Profile::V1_0_1),
            (&old, Profile::V1_0_0),
        ];
        for (origin, profile) in profiles {
            let (status, _, text) = rest_call(origin, Op::GetTask, &params).await;
            assert_eq!(status, kind.http(profile), "{kind:?} via {origin}: {text}");
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["error"]["code"], kind.http(profile), "{kind:?}");
            assert_eq!(
                reason_in(&body["error"]["details"]),
                Some(reason),
                "{kind:?}: {text}"
            );
            assert_eq!(body["error"]["message"], format!("agent says {reason}"));
            let reply = rpc_call(origin, Op::GetTask, &params).await;
            assert_eq!(
                reply["error"]["code"],
                kind.code(),
                "{kind:?} via {origin}: {reply}"
            );
            assert_eq!(reason_in(&reply["error"]["data"]), Some(reason), "{kind:?}");
        }
    }
    assert!(rows >= 13, "{rows} rows");
    assert!(
        differ > 0,
        "no row's HTTP status differs between the profiles"
    );
}

/// What the front refuses, each at its bound and one past: a body that is not A2A JSON
/// (415), one past `max-body` (413), a path no operation has (404), a method the path is
/// not served with (405, `Allow`), a query past its bounds and a call without a version
/// (400); and a tenant segment reaching the agent.
#[tokio::test]
async fn refusals_and_tenant_paths() {
    let (backend, origin, _) = two_gateways(&["--max-body", "2000"]).await;
    let url = |path: &str| format!("{origin}{REST}{path}");
    let version = [("a2a-version", "1.0")];

    let body = message_params("hi").to_string();
    for (content_type, expected) in [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("application/json; charset=utf-8", 200),
        ("application/a2a+json", 200),
    ] {
        let response = client()
            .post(url("/message:send"))
            .header("content-type", content_type)
            .header("a2a-version", "1.0")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected, "{content_type}");
    }

    let sized = |len: usize| {
        let empty = message_params("").to_string();
        message_params(&"x".repeat(len - empty.len())).to_string()
    };
    let at = sized(2000);
    assert_eq!(at.len(), 2000);
    let (status, _, text) = post_with(&url("/message:send"), at, &version).await;
    assert_eq!(status, 200, "{text}");
    let (status, _, text) = post_with(&url("/message:send"), sized(2001), &version).await;
    assert_eq!(status, 413, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], 413);

    let (status, _, _) = send(Method::GET, &url("/nope"), None, &version).await;
    assert_eq!(status, 404);
    // A path longer than any operation's (4 KiB below rest-path) is 414, naming the bound.
    let long = format!("/{}", "x".repeat(4096));
    let (status, _, text) = send(Method::GET, &url(&long), None, &version).await;
    assert_eq!(status, 414, "{text}");
    assert!(text.contains("longer than the 4096"), "{text}");
    let (status, _, _) = send(Method::GET, &url(&long[..4096]), None, &version).await;
    assert_eq!(status, 404);
    let (status, headers, text) = send(Method::PUT, &url("/tasks/t-1"), None, &version).await;
    assert_eq!(status, 405, "{text}");
    assert_eq!(headers["allow"], "GET");

    let query = |n: usize| {
        (0..n)
            .map(|i| format!("x{i}=1"))
            .collect::<Vec<_>>()
            .join("&")
    };
    let (status, _, text) = send(
        Method::GET,
        &url(&format!("/tasks?{}", query(32))),
        None,
        &version,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let (status, _, text) = send(
        Method::GET,
        &url(&format!("/tasks?{}", query(33))),
        None,
        &version,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let token = "p".repeat(8192 - "pageToken=".len());
    let (status, _, text) = send(
        Method::GET,
        &url(&format!("/tasks?pageToken={token}")),
        None,
        &version,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let (status, _, text) = send(
        Method::GET,
        &url(&format!("/tasks?pageToken={token}p")),
        None,
        &version,
    )
    .await;
    assert_eq!(status, 400, "{text}");

    let (status, _, text) = send(
        Method::GET,
        &url("/acme%2Fco/tasks/t-1?historyLength=2"),
        None,
        &version,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let Request::Unary(UnaryRequest::GetTask(get)) = backend.last().request else {
        panic!("not a GetTask");
    };
    assert_eq!(
        (get.tenant.as_str(), get.id.as_str(), get.history_length),
        ("acme/co", "t-1", Some(2))
    );

    let (status, _, text) = send(Method::GET, &url("/tasks/t-1"), None, &[]).await;
    assert_eq!(status, 400, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        reason_in(&body["error"]["details"]),
        Some("VERSION_NOT_SUPPORTED")
    );
    // The version may be a query parameter (spec 3.6.1).
    let (status, _, text) = send(Method::GET, &url("/tasks/t-1?A2A-Version=1.0"), None, &[]).await;
    assert_eq!(status, 200, "{text}");
}

/// The card lists the gateway's interfaces first, one per front in the configured order
/// (gRPC as the origin's host and port: it has no path), and the extended card through either front the
/// same.
#[tokio::test]
async fn the_card_lists_every_front_in_order() {
    let card = json!({"name": "agent", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": "http://agent.internal", "protocolBinding": "GRPC",
                                 "protocolVersion": "1.0"}]});
    let file = harness::process::TempFile::new("json", &card.to_string());
    let backend = TestBackend::new(|_| Answer::Reply(unary_case(Op::GetExtendedAgentCard).reply));
    let agent = format!("http://{}", backend.spawn().await);
    let flags = [
        "--backend",
        &agent,
        "--card",
        file.path(),
        "--public-url",
        "https://gw.example/base",
        "--fronts",
        "HTTP+JSON,JSONRPC,GRPC",
        "--rest-path",
        "/rest",
    ];
    let origin = serve_on_workers(&flags, None).await;
    let expected = json!([
        {"url": "https://gw.example/base/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": "https://gw.example/base/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "gw.example:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    ]);
    let served: Value = client()
        .get(format!("{origin}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(served["supportedInterfaces"], expected, "{served}");
    let version = [("a2a-version", "1.0")];
    let (status, _, text) = send(
        Method::GET,
        &format!("{origin}/rest/extendedAgentCard"),
        None,
        &version,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let extended: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(extended["supportedInterfaces"], expected, "{extended}");
    let reply = rpc_call(&origin, Op::GetExtendedAgentCard, &Value::Null).await;
    assert_eq!(reply["result"], extended);
}

/// The HTTP+JSON front enters the same call stack as JSON-RPC: the route's API keys refuse
/// a caller without one (401, the challenge, a status body), and caller-bound tasks hold
/// across fronts (a task alice made over HTTP+JSON is hers over JSON-RPC too, and unknown
/// to bob).
#[tokio::test]
async fn authentication_and_caller_bound_tasks_hold_on_both_fronts() {
    use a2a_gateway::proto::{send_message_response, SendMessageResponse, TaskState};
    use a2a_gateway::protocol::ops::Reply;
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::SendMessage(_)) => {
            Answer::Reply(Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Task(task(
                    "t-1",
                    TaskState::Working,
                ))),
            }))
        }
        Request::Unary(UnaryRequest::GetTask(get)) => {
            Answer::Reply(Reply::GetTask(task(&get.id, TaskState::Working)))
        }
        _ => Answer::Error(Status::unimplemented("SendMessage and GetTask only")),
    });
    let agent = format!("http://{}", backend.spawn().await);
    let keys = TempFile::new(
        "keys",
        &format!(
            "alice {}\nbob {}\n",
            key_digest_hex(b"alice-key"),
            key_digest_hex(b"bob-key")
        ),
    );
    let owner_keys = TempFile::new("owner", "the owner key of this test, 32 b\n");
    let config = format!(
        "task-owner = true\nowner-key-file = {:?}\nfronts = [\"JSONRPC\", \"HTTP+JSON\"]\n\
         [auth.api-keys]\nfile = {:?}\n[[route]]\nname = \"r\"\npath = \"/r\"\nbackend = {agent:?}\n",
        owner_keys.path(),
        keys.path()
    );
    let origin = serve_on_workers(&[], Some(&config)).await;
    let rest = format!("{origin}/r{REST}");
    let as_ = |key: &'static str| [("a2a-version", "1.0"), ("x-api-key", key)];

    let (status, headers, text) = send(
        Method::GET,
        &format!("{rest}/tasks/t-1"),
        None,
        &[("a2a-version", "1.0")],
    )
    .await;
    assert_eq!(status, 401, "{text}");
    assert_eq!(headers["www-authenticate"], "ApiKey header=\"x-api-key\"");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (
            body["error"]["code"].clone(),
            body["error"]["status"].clone()
        ),
        (json!(401), json!("UNAUTHENTICATED"))
    );
    assert_eq!(backend.calls(), 0);

    let message = message_params("hi");
    let (status, _, text) = send(
        Method::POST,
        &format!("{rest}/message:send"),
        Some(&message),
        &as_("alice-key"),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let sent: Value = serde_json::from_str(&text).unwrap();
    let sealed = sent["task"]["id"].as_str().unwrap().to_owned();
    assert_ne!(sealed, "t-1", "the id is bound to its caller");

    let url = format!("{rest}/tasks/{sealed}");
    let (status, _, text) = send(Method::GET, &url, None, &as_("alice-key")).await;
    assert_eq!(status, 200, "{text}");
    let Request::Unary(UnaryRequest::GetTask(get)) = backend.last().request else {
        panic!("not a GetTask");
    };
    assert_eq!(get.id, "t-1");
    let (status, _, text) = send(Method::GET, &url, None, &as_("bob-key")).await;
    assert_eq!(status, 404, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reason_in(&body["error"]["details"]), Some("TASK_NOT_FOUND"));

    let jsonrpc = format!("{origin}/r/a2a/jsonrpc");
    let get = request(json!(1), "GetTask", json!({"id": sealed}));
    let (status, _, text) = post_with(&jsonrpc, get, &as_("alice-key")).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reply["result"]["id"], sealed.as_str(), "{reply}");
}

/// The reference SDK's HTTP+JSON client (a2a-sdk 1.3.0, `tests/peers/client_from_card.py`
/// with `--binding HTTP+JSON`), given only the gateway's base URL: it reads the card, picks
/// the gateway's HTTP+JSON interface and holds its conversation (send, stream, get,
/// cancel) through it, with agent.py behind the gateway over gRPC.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_sdk_converses_over_the_http_json_front_from_the_card() {
    use harness::process::{OutputWithin, SDK_CLIENT_WITHIN};
    let agent = tokio::task::spawn_blocking(harness::peer::Peer::start)
        .await
        .unwrap();
    let agent_http = agent.jsonrpc.trim_end_matches("/jsonrpc").to_owned();
    // agent.py's own card, served by the gateway from a file (a URL source is fetched by
    // the binary's refresh task, which this in-process gateway does not run).
    let card = reqwest::get(format!("{agent_http}/.well-known/agent-card.json"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let card = TempFile::new("json", &card);
    let flags = [
        "--backend",
        &agent.grpc,
        "--card",
        card.path(),
        "--fronts",
        "HTTP+JSON,JSONRPC",
        "--timeout",
        "20s",
    ];
    let origin = serve_on_workers(&flags, None).await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/client_from_card.py");
    let base = origin.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(harness::peer::python())
            .arg(script)
            .arg(&base)
            .args(["--binding", "HTTP+JSON"])
            .output_within(SDK_CLIENT_WITHIN)
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let interface = format!("INTERFACE HTTP+JSON 1.0 {origin}{REST}");
    assert!(stdout.lines().any(|l| l == interface), "{stdout}");
    assert!(
        stdout.lines().any(|l| l == "AGENT binding=grpc tenant=-"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l == "OK 6 steps"), "{stdout}");
}

/// One HTTP+JSON call below `base` for a transcript: its status and body (JSON, or for a
/// stream its `data:` values and final error).
async fn transcribed(base: &str, method: Method, path: &str, body: Option<Value>) -> Value {
    let url = format!("{base}{path}");
    let (status, headers, text) =
        send(method, &url, body.as_ref(), &[("a2a-version", "1.0")]).await;
    let is_sse = headers
        .get("content-type")
        .is_some_and(|t| t.to_str().unwrap().starts_with("text/event-stream"));
    let body = match is_sse {
        true => {
            let (events, error) = sse_data(&text);
            json!({"events": events, "error": error})
        }
        false => serde_json::from_str(&text).unwrap_or(Value::String(text)),
    };
    json!({"status": status, "body": body})
}

fn user_message(text: &str, context_id: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "contextId": context_id,
                       "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// The reference SDK's own HTTP+JSON server (agent.py) against the gateway's HTTP+JSON
/// front in front of the same agent over gRPC, and over HTTP+JSON: the same calls give the
/// same statuses and bodies, up to ids and timestamps (`transcript::normalise`).
#[tokio::test(flavor = "multi_thread")]
async fn the_front_answers_as_the_reference_sdks_own_http_json_server() {
    let agent = tokio::task::spawn_blocking(harness::peer::Peer::start)
        .await
        .unwrap();
    let fronts = [
        "--fronts",
        "HTTP+JSON",
        "--push-allow-http",
        "--push-allow",
        "127.0.0.1",
    ];
    let mut flags = vec!["--backend", &agent.grpc];
    flags.extend(fronts);
    let over_grpc = serve_on_workers(&flags, None).await;
    let mut flags = vec!["--backend", &agent.rest, "--binding", "HTTP+JSON"];
    flags.extend(fronts);
    let over_rest = serve_on_workers(&flags, None).await;
    let paths = [
        ("sdk-rest", agent.rest.clone()),
        ("gateway-rest-over-grpc", format!("{over_grpc}{REST}")),
        ("gateway-rest-over-rest", format!("{over_rest}{REST}")),
    ];
    transcript::differential(
        "rest front",
        &paths,
        known_sdk_differences,
        |base| async move {
            let ctx = uuid::Uuid::new_v4().to_string();
            let send = |text: &str| {
                (
                    Method::POST,
                    "/message:send".to_owned(),
                    Some(user_message(text, &ctx)),
                )
            };
            let mut calls = vec![send("hello")];
            let task = transcribed(
                &base,
                Method::POST,
                "/message:send",
                Some(user_message("task", &ctx)),
            )
            .await;
            let id = task["body"]["task"]["id"].as_str().unwrap().to_owned();
            calls.extend([
                send("fail"),
                send("reject"),
                (Method::GET, format!("/tasks/{id}"), None),
                (Method::GET, format!("/tasks/{id}?historyLength=1"), None),
                (
                    Method::GET,
                    format!("/tasks?contextId={ctx}&status=TASK_STATE_COMPLETED"),
                    None,
                ),
                (
                    Method::GET,
                    format!("/tasks?contextId={ctx}&pageSize=1&includeArtifacts=true"),
                    None,
                ),
                (
                    Method::POST,
                    "/message:stream".to_owned(),
                    Some(user_message("stream", &ctx)),
                ),
                (
                    Method::POST,
                    format!("/tasks/{id}:cancel"),
                    Some(json!({"id": id})),
                ),
                (Method::GET, "/tasks/no-such-task".to_owned(), None),
                (
                    Method::POST,
                    "/tasks/no-such-task:cancel".to_owned(),
                    Some(json!({})),
                ),
                (
                    Method::POST,
                    format!("/tasks/{id}/pushNotificationConfigs"),
                    Some(json!({"taskId": id, "id": "cfg-1", "url": "http://127.0.0.1:9/hook"})),
                ),
                (
                    Method::GET,
                    format!("/tasks/{id}/pushNotificationConfigs/cfg-1"),
                    None,
                ),
                (
                    Method::GET,
                    format!("/tasks/{id}/pushNotificationConfigs"),
                    None,
                ),
                (
                    Method::DELETE,
                    format!("/tasks/{id}/pushNotificationConfigs/cfg-1"),
                    None,
                ),
                (Method::POST, "/message:send".to_owned(), Some(json!({}))),
            ]);
            calls.extend(
                peer::AGENT_ERRORS
                    .iter()
                    .map(|name| send(&format!("error:{name}"))),
            );
            let mut out = vec![task];
            for (method, path, body) in calls {
                out.push(transcribed(&base, method, &path, body).await);
            }
            out
        },
    )
    .await;
}

/// Normalises what is the reference SDK's own: its gRPC server never fills
/// `ErrorInfo.metadata` (its HTTP+JSON server does), so metadata cannot survive a gRPC agent.
fn known_sdk_differences(mut value: Value) -> Value {
    if let Some(Value::Array(details)) = value.pointer_mut("/body/error/details") {
        for detail in details {
            if detail["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
                detail.as_object_mut().unwrap().remove("metadata");
            }
        }
    }
    value
}

/// `rest-path = "/"` serves the operations at the route's prefix itself, beside the card
/// and the gateway's own endpoints, which keep their paths.
#[tokio::test]
async fn the_front_may_sit_at_the_route_prefix() {
    let (backend, url) = harness::task_backend().await;
    let origin = serve_on_workers(
        &[
            "--backend",
            &url,
            "--fronts",
            "HTTP+JSON",
            "--rest-path",
            "/",
        ],
        None,
    )
    .await;
    let version = [("a2a-version", "1.0")];
    let (status, _, text) = send(Method::GET, &format!("{origin}/tasks/t-1"), None, &version).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(backend.calls(), 1);
    let (status, _, text) = send(Method::GET, &format!("{origin}/healthz"), None, &[]).await;
    assert_eq!((status, text.as_str()), (200, "ok\n"));
    let (status, _, _) = send(Method::GET, &format!("{origin}/metrics"), None, &[]).await;
    assert_eq!(status, 200);
}

/// `A2A-Extensions` reaches the agent from an HTTP+JSON call as from a JSON-RPC one (the
/// route's forwarding policy).
#[tokio::test]
async fn extensions_reach_the_agent() {
    let (backend, origin, _) = two_gateways(&[]).await;
    let headers = [("a2a-version", "1.0"), ("a2a-extensions", "urn:a, urn:b")];
    let url = format!("{origin}{REST}/tasks/t-1");
    let (status, _, text) = send(Method::GET, &url, None, &headers).await;
    assert_eq!(status, 200, "{text}");
    let seen = backend.last().metadata;
    assert_eq!(seen.get("a2a-extensions").unwrap(), "urn:a, urn:b");
}

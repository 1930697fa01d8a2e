//! The HTTP+JSON backend on the wire: a mock agent (`rest_mock`) records what
//! `RestBackend` sends and answers with canned bodies; the backend is driven directly
//! through the `Backend` trait with typed requests.

use crate::harness::rest_mock;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use a2a_gateway::backend::rest::RestBackend;
use a2a_gateway::backend::{Answer, Backend, Call, EventStream};
use a2a_gateway::proto::*;
use a2a_gateway::protocol::error::{A2aError, ErrorKind, Profile};
use a2a_gateway::protocol::ops::{Op, Reply, Request, StreamRequest, UnaryRequest};
use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use rest_mock::{
    answer, broken_body, endless_sse, error_json, ok_json, sse_chunks, MockAgent, Recorded,
};
use serde_json::json;

const TASK: &str = r#"{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}"#;
const CONFIG: &str = r#"{"id":"cfg-1","taskId":"t-1","url":"https://example.com/hook"}"#;

fn call<R>(request: R) -> Call<R> {
    Call {
        request,
        forwarded: Vec::new(),
        deadline: Some(Instant::now() + Duration::from_secs(10)),
        trace: None,
    }
}

fn backend(url: &str) -> RestBackend {
    RestBackend::new(url, Duration::from_secs(2), None).unwrap()
}

/// A plausible success answer for every route, chosen by method and path.
fn any_success(r: &Recorded) -> axum::response::Response {
    let path = r.path.as_str();
    match r.method.as_str() {
        _ if path.ends_with(":stream") || path.ends_with(":subscribe") => {
            sse_chunks(vec![format!("data: {{\"task\":{TASK}}}\n\n").into_bytes()])
        }
        "DELETE" => answer(200, "", ""),
        _ if path.ends_with("/message:send") => ok_json(&format!("{{\"task\":{TASK}}}")),
        _ if path.ends_with("/extendedAgentCard") => ok_json(r#"{"name":"Mock agent"}"#),
        "GET" if path.ends_with("/tasks") => {
            ok_json(r#"{"tasks":[],"nextPageToken":"","pageSize":50,"totalSize":0}"#)
        }
        "GET" if path.ends_with("/pushNotificationConfigs") => {
            ok_json(&format!("{{\"configs\":[{CONFIG}]}}"))
        }
        _ if path.contains("/pushNotificationConfigs") => ok_json(CONFIG),
        _ => ok_json(TASK),
    }
}

fn user_message(text: &str) -> Message {
    Message {
        message_id: "m-1".into(),
        role: Role::User as i32,
        parts: vec![Part {
            content: Some(part::Content::Text(text.into())),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// One request of every operation, with `tenant`, and its expected method and path.
fn every_operation(tenant: &str) -> Vec<(Request, &'static str, String)> {
    let t = tenant.to_owned();
    let prefix = if tenant.is_empty() {
        String::new()
    } else {
        format!("/{tenant}")
    };
    let send = SendMessageRequest {
        tenant: t.clone(),
        message: Some(user_message("hi")),
        ..Default::default()
    };
    let rows = vec![
        (
            Request::from(UnaryRequest::SendMessage(send.clone())),
            "POST",
            "/message:send",
        ),
        (
            Request::from(UnaryRequest::GetTask(GetTaskRequest {
                tenant: t.clone(),
                id: "t-1".into(),
                history_length: None,
            })),
            "GET",
            "/tasks/t-1",
        ),
        (
            Request::from(UnaryRequest::ListTasks(ListTasksRequest {
                tenant: t.clone(),
                ..Default::default()
            })),
            "GET",
            "/tasks",
        ),
        (
            Request::from(UnaryRequest::CancelTask(CancelTaskRequest {
                tenant: t.clone(),
                id: "t-1".into(),
                metadata: None,
            })),
            "POST",
            "/tasks/t-1:cancel",
        ),
        (
            Request::from(UnaryRequest::CreateTaskPushNotificationConfig(
                TaskPushNotificationConfig {
                    tenant: t.clone(),
                    task_id: "t-1".into(),
                    url: "https://example.com/hook".into(),
                    ..Default::default()
                },
            )),
            "POST",
            "/tasks/t-1/pushNotificationConfigs",
        ),
        (
            Request::from(UnaryRequest::GetTaskPushNotificationConfig(
                GetTaskPushNotificationConfigRequest {
                    tenant: t.clone(),
                    task_id: "t-1".into(),
                    id: "cfg-1".into(),
                },
            )),
            "GET",
            "/tasks/t-1/pushNotificationConfigs/cfg-1",
        ),
        (
            Request::from(UnaryRequest::ListTaskPushNotificationConfigs(
                ListTaskPushNotificationConfigsRequest {
                    tenant: t.clone(),
                    task_id: "t-1".into(),
                    ..Default::default()
                },
            )),
            "GET",
            "/tasks/t-1/pushNotificationConfigs",
        ),
        (
            Request::from(UnaryRequest::DeleteTaskPushNotificationConfig(
                DeleteTaskPushNotificationConfigRequest {
                    tenant: t.clone(),
                    task_id: "t-1".into(),
                    id: "cfg-1".into(),
                },
            )),
            "DELETE",
            "/tasks/t-1/pushNotificationConfigs/cfg-1",
        ),
        (
            Request::from(UnaryRequest::GetExtendedAgentCard(
                GetExtendedAgentCardRequest { tenant: t.clone() },
            )),
            "GET",
            "/extendedAgentCard",
        ),
        (
            Request::from(StreamRequest::SendStreamingMessage(send)),
            "POST",
            "/message:stream",
        ),
        (
            Request::from(StreamRequest::SubscribeToTask(SubscribeToTaskRequest {
                tenant: t.clone(),
                id: "t-1".into(),
            })),
            "GET",
            "/tasks/t-1:subscribe",
        ),
    ];
    rows.into_iter()
        .map(|(request, method, path)| (request, method, format!("{prefix}{path}")))
        .collect()
}

/// Performs `request` unary or streaming as its operation says; a stream's events are
/// collected.
async fn perform(
    backend: &RestBackend,
    request: Request,
) -> Result<(Option<Reply>, Vec<Result<StreamResponse, A2aError>>), A2aError> {
    match request {
        Request::Stream(request) => {
            let answer = backend.stream(call(request)).await?;
            let events = answer.value.map(|event| event.map_err(A2aError::from));
            Ok((None, events.collect().await))
        }
        Request::Unary(request) => {
            Ok((Some(backend.unary(call(request)).await?.value), Vec::new()))
        }
    }
}

#[tokio::test]
async fn every_operation_uses_its_route_with_and_without_tenant_and_base_path() {
    let mock = MockAgent::start(any_success).await;
    for (tenant, base) in [
        ("", ""),
        ("acme", ""),
        ("", "/a2a/v1"),
        ("acme", "/a2a/v1/"),
    ] {
        let backend = backend(&format!("{}{base}", mock.url));
        let rows = every_operation(tenant);
        assert_eq!(rows.len(), Op::ALL.len(), "one row per operation");
        for (request, method, path) in rows {
            mock.clear();
            let op = request.op();
            let (reply, events) = perform(&backend, request)
                .await
                .unwrap_or_else(|e| panic!("{op:?} with tenant {tenant:?}: {e}"));
            let seen = mock.single();
            let base = base.trim_end_matches('/');
            assert_eq!(
                (seen.method.as_str(), seen.path.as_str()),
                (method, format!("{base}{path}").as_str()),
                "{op:?} with tenant {tenant:?} and base {base:?}"
            );
            assert_eq!(seen.query, None, "{op:?}: no query for default fields");
            if let Some(reply) = reply {
                assert_eq!(reply.op(), op);
            } else {
                assert_eq!(events.len(), 1, "{op:?}");
                assert!(events[0].is_ok(), "{op:?}: {:?}", events[0]);
            }
            if method == "POST" {
                let body = seen.body_json();
                assert!(body.get("tenant").is_none(), "{op:?}: tenant only in path");
            } else {
                assert!(seen.body.is_empty(), "{op:?}: {method} has no body");
            }
        }
    }
}

#[tokio::test]
async fn replies_decode_into_their_types() {
    let mock = MockAgent::start(any_success).await;
    let backend = backend(&mock.url);
    for (request, _, _) in every_operation("") {
        let Request::Unary(request) = request else {
            continue;
        };
        let reply = backend.unary(call(request)).await.unwrap().value;
        match reply {
            Reply::SendMessage(r) => assert!(matches!(
                r.payload,
                Some(send_message_response::Payload::Task(ref t)) if t.id == "t-1"
            )),
            Reply::GetTask(t) | Reply::CancelTask(t) => {
                assert_eq!(t.status.unwrap().state, TaskState::Working as i32)
            }
            Reply::ListTasks(r) => assert_eq!(r.page_size, 50),
            Reply::CreateTaskPushNotificationConfig(c)
            | Reply::GetTaskPushNotificationConfig(c) => {
                assert_eq!(c.id, "cfg-1")
            }
            Reply::ListTaskPushNotificationConfigs(r) => assert_eq!(r.configs.len(), 1),
            Reply::DeleteTaskPushNotificationConfig(_) => {}
            Reply::GetExtendedAgentCard(card) => assert_eq!(card.name, "Mock agent"),
        }
    }
}

#[tokio::test]
async fn query_parameters_use_spec_encodings() {
    let mock = MockAgent::start(any_success).await;
    let backend = backend(&mock.url);
    let request = UnaryRequest::ListTasks(ListTasksRequest {
        tenant: String::new(),
        context_id: "ctx-1".into(),
        status: TaskState::InputRequired as i32,
        page_size: Some(50),
        page_token: "next page/2".into(),
        history_length: Some(0),
        status_timestamp_after: Some(Timestamp {
            seconds: 1_762_684_200,
            nanos: 0,
        }),
        include_artifacts: Some(true),
    });
    backend.unary(call(request)).await.unwrap();
    let seen = mock.single();
    assert_eq!(seen.path, "/tasks");
    assert_eq!(
        seen.query.as_deref(),
        Some(
            "contextId=ctx-1&status=TASK_STATE_INPUT_REQUIRED&pageSize=50\
             &pageToken=next%20page%2F2&historyLength=0\
             &statusTimestampAfter=2025-11-09T10%3A30%3A00Z&includeArtifacts=true"
        )
    );

    mock.clear();
    let request = UnaryRequest::GetTask(GetTaskRequest {
        tenant: String::new(),
        id: "t-1".into(),
        history_length: Some(10),
    });
    backend.unary(call(request)).await.unwrap();
    let seen = mock.single();
    assert_eq!(seen.path, "/tasks/t-1");
    assert_eq!(seen.query.as_deref(), Some("historyLength=10"));

    mock.clear();
    let request =
        UnaryRequest::ListTaskPushNotificationConfigs(ListTaskPushNotificationConfigsRequest {
            tenant: String::new(),
            task_id: "t-1".into(),
            page_size: 5,
            page_token: "p".into(),
        });
    backend.unary(call(request)).await.unwrap();
    let seen = mock.single();
    assert_eq!(seen.query.as_deref(), Some("pageSize=5&pageToken=p"));
}

#[tokio::test]
async fn path_and_query_values_are_percent_encoded() {
    let mock = MockAgent::start(any_success).await;
    let backend = backend(&mock.url);
    let awkward = "a/b ?#%é☃:x";
    let encoded = "a%2Fb%20%3F%23%25%C3%A9%E2%98%83%3Ax";
    let request = UnaryRequest::GetTask(GetTaskRequest {
        tenant: "ten ant".into(),
        id: awkward.into(),
        history_length: None,
    });
    backend.unary(call(request)).await.unwrap();
    assert_eq!(mock.single().path, format!("/ten%20ant/tasks/{encoded}"));

    mock.clear();
    let request = UnaryRequest::CancelTask(CancelTaskRequest {
        id: awkward.into(),
        ..Default::default()
    });
    backend.unary(call(request)).await.unwrap();
    let seen = mock.single();
    assert_eq!(seen.path, format!("/tasks/{encoded}:cancel"));
    assert_eq!(seen.body_json(), json!({"id": awkward}));

    mock.clear();
    let request = UnaryRequest::ListTasks(ListTasksRequest {
        context_id: awkward.into(),
        ..Default::default()
    });
    backend.unary(call(request)).await.unwrap();
    assert_eq!(
        mock.single().query.as_deref(),
        Some(format!("contextId={encoded}").as_str())
    );
}

#[tokio::test]
async fn empty_path_parameters_are_refused_without_a_request() {
    let mock = MockAgent::start(any_success).await;
    let backend = backend(&mock.url);
    let request =
        UnaryRequest::GetTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest {
            task_id: "t-1".into(),
            ..Default::default()
        });
    let err = backend
        .unary(call(request))
        .await
        .err()
        .map(A2aError::from)
        .unwrap();
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    assert_eq!(err.data[1]["fieldViolations"][0]["field"], "id");
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn headers_version_forwarded_content_type_and_extensions() {
    let mock = MockAgent::start(|r| {
        let mut response = any_success(r);
        let headers = response.headers_mut();
        headers.append("a2a-extensions", HeaderValue::from_static("https://ext/a"));
        headers.append("a2a-extensions", HeaderValue::from_static("https://ext/b"));
        response
    })
    .await;
    let backend = backend(&mock.url);
    let forwarded = vec![
        (
            HeaderName::from_static("authorization"),
            HeaderValue::from_static("Bearer secret"),
        ),
        (
            HeaderName::from_static("a2a-extensions"),
            HeaderValue::from_static("https://ext/a"),
        ),
        (
            HeaderName::from_static("x-request-id"),
            HeaderValue::from_static("req-7"),
        ),
    ];
    let send = SendMessageRequest {
        message: Some(user_message("hello")),
        ..Default::default()
    };
    let answer = backend
        .unary(Call {
            request: UnaryRequest::SendMessage(send.clone()),
            forwarded: forwarded.clone(),
            deadline: None,
            trace: None,
        })
        .await
        .unwrap();
    assert_eq!(
        answer.extensions.unwrap().to_str().unwrap(),
        "https://ext/a, https://ext/b"
    );
    let seen = mock.single();
    assert_eq!(seen.header("a2a-version"), Some("1.0"));
    assert_eq!(seen.header("authorization"), Some("Bearer secret"));
    assert_eq!(seen.header("a2a-extensions"), Some("https://ext/a"));
    assert_eq!(seen.header("x-request-id"), Some("req-7"));
    assert_eq!(seen.header("content-type"), Some("application/a2a+json"));
    assert_eq!(seen.header("accept"), Some("application/a2a+json"));
    let body: SendMessageRequest = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(body, send, "the body is the whole request in ProtoJSON");
    assert_eq!(
        seen.body_json()["message"]["role"],
        "ROLE_USER",
        "enums by name"
    );

    mock.clear();
    let answer = backend
        .stream(Call {
            request: StreamRequest::SendStreamingMessage(send),
            forwarded,
            deadline: None,
            trace: None,
        })
        .await
        .unwrap();
    assert!(answer.extensions.is_some());
    let seen = mock.single();
    assert_eq!(seen.header("accept"), Some("text/event-stream"));
    assert_eq!(seen.header("a2a-version"), Some("1.0"));
    assert_eq!(seen.header("authorization"), Some("Bearer secret"));

    mock.clear();
    let get = UnaryRequest::GetTask(GetTaskRequest {
        id: "t-1".into(),
        ..Default::default()
    });
    backend.unary(call(get)).await.unwrap();
    let seen = mock.single();
    assert_eq!(seen.header("content-type"), None, "GET has no body");
    assert_eq!(seen.header("a2a-version"), Some("1.0"));
}

fn subscribe(id: &str) -> Call<StreamRequest> {
    call(StreamRequest::SubscribeToTask(SubscribeToTaskRequest {
        tenant: String::new(),
        id: id.into(),
    }))
}

#[tokio::test]
async fn subscribe_falls_back_to_post_on_405_and_remembers() {
    let mock = MockAgent::start(|r| match r.method.as_str() {
        "GET" => answer(405, "text/plain", "Method Not Allowed"),
        _ => any_success(r),
    })
    .await;
    let backend = backend(&mock.url);
    let events: Vec<_> = backend
        .stream(subscribe("t-1"))
        .await
        .unwrap()
        .value
        .collect()
        .await;
    assert_eq!(events.len(), 1);
    let seen: Vec<_> = mock
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    assert_eq!(
        seen,
        [
            ("GET".to_owned(), "/tasks/t-1:subscribe".to_owned()),
            ("POST".to_owned(), "/tasks/t-1:subscribe".to_owned()),
        ]
    );
    let post = &mock.requests()[1];
    assert_eq!(post.body_json(), json!({"id": "t-1"}));
    assert_eq!(post.header("content-type"), Some("application/a2a+json"));

    mock.clear();
    backend.stream(subscribe("t-2")).await.unwrap();
    let seen = mock.single();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/tasks/t-2:subscribe")
    );

    // A clone shares what was learned.
    mock.clear();
    backend.clone().stream(subscribe("t-3")).await.unwrap();
    assert_eq!(mock.single().method, "POST");
}

#[tokio::test]
async fn subscribe_stays_on_get_when_the_backend_allows_it() {
    let mock = MockAgent::start(any_success).await;
    let backend = backend(&mock.url);
    for _ in 0..2 {
        backend.stream(subscribe("t-1")).await.unwrap();
    }
    let methods: Vec<_> = mock.requests().into_iter().map(|r| r.method).collect();
    assert_eq!(methods, ["GET", "GET"]);
}

#[tokio::test]
async fn subscribe_405_on_both_methods_is_reported() {
    let mock = MockAgent::start(|_| {
        error_json(
            405,
            json!({"error": {"code": 405, "status": "UNIMPLEMENTED", "message": "no subscribe"}}),
        )
    })
    .await;
    let backend = backend(&mock.url);
    let err = backend
        .stream(subscribe("t-1"))
        .await
        .err()
        .map(A2aError::from)
        .unwrap();
    assert_eq!(err.kind, ErrorKind::MethodNotFound);
    assert_eq!(err.message, "no subscribe");
    assert_eq!(mock.requests().len(), 2);
    mock.clear();
    backend
        .stream(subscribe("t-1"))
        .await
        .err()
        .map(A2aError::from)
        .unwrap();
    assert_eq!(mock.requests().len(), 2, "POST was never learned");
}

async fn stream_of(mock: &MockAgent) -> Vec<Result<StreamResponse, A2aError>> {
    let send = SendMessageRequest {
        message: Some(user_message("stream")),
        ..Default::default()
    };
    let Answer { value, .. } = backend(&mock.url)
        .stream(call(StreamRequest::SendStreamingMessage(send)))
        .await
        .unwrap();
    collect_all(value).await
}

async fn collect_all(stream: EventStream) -> Vec<Result<StreamResponse, A2aError>> {
    let events = stream.map(|event| event.map_err(A2aError::from));
    tokio::time::timeout(Duration::from_secs(10), events.collect())
        .await
        .expect("stream ends")
}

fn status_text(event: &StreamResponse) -> String {
    match &event.payload {
        Some(stream_response::Payload::StatusUpdate(update)) => {
            let message = update.status.as_ref().unwrap().message.as_ref().unwrap();
            match &message.parts[0].content {
                Some(part::Content::Text(text)) => text.clone(),
                other => panic!("{other:?}"),
            }
        }
        Some(stream_response::Payload::Task(task)) => task.id.clone(),
        other => panic!("{other:?}"),
    }
}

fn status_update(text: &str) -> String {
    json!({"statusUpdate": {
        "taskId": "t-1", "contextId": "c-1",
        "status": {"state": "TASK_STATE_WORKING", "message": {
            "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}]}}}})
    .to_string()
}

#[tokio::test]
async fn sse_split_at_awkward_chunk_boundaries() {
    // One body with BOM, CRLF, CR and LF line ends, comments, an id field, a multi-line
    // data field and non-ASCII text, cut into chunks at the worst places.
    let first = status_update("première ✓");
    let second = status_update("two\nlines");
    let (a, b) = second.split_at(second.find("\"status\"").unwrap());
    let mut body = Vec::new();
    body.extend_from_slice(b"\xEF\xBB\xBF: hello\r\n\r\n");
    body.extend_from_slice(format!("id: 1\r\ndata: {{\"task\":{TASK}}}\r\n\r\n").as_bytes());
    body.extend_from_slice(format!("data: {first}\r\r").as_bytes());
    body.extend_from_slice(format!("event: message\ndata: {a}\ndata: {b}\n\n").as_bytes());
    let cut = |needle: &[u8], offset: usize| {
        body.windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
            + offset
    };
    let mut cuts = vec![
        1,                      // inside the BOM
        cut(b"\r\n\r\nid", 1),  // between CR and LF
        cut(b"\r\n\r\nid", 3),  // between CR and LF of the blank line
        cut("è".as_bytes(), 1), // inside a two-byte character
        cut("✓".as_bytes(), 2), // inside a three-byte character
        cut(b"\r\revent", 1),   // between two CRs
        cut(b"\ndata: ", 3),    // inside a field name
    ];
    cuts.sort();
    let mut chunks = Vec::new();
    let mut start = 0;
    for end in cuts {
        chunks.push(body[start..end].to_vec());
        start = end;
    }
    chunks.push(body[start..].to_vec());
    let mock = MockAgent::start(move |_| sse_chunks(chunks.clone())).await;
    let events: Vec<_> = stream_of(&mock)
        .await
        .into_iter()
        .map(|e| status_text(&e.unwrap()))
        .collect();
    assert_eq!(events, ["t-1", "première ✓", "two\nlines"]);
}

#[tokio::test]
async fn error_event_mid_stream_ends_the_stream() {
    let error = json!({"error": {"code": 400, "status": "FAILED_PRECONDITION",
        "message": "task is gone", "details": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
             "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org",
             "metadata": {"taskId": "t-1"}}]}});
    let chunks = vec![
        format!("data: {{\"task\":{TASK}}}\n\n").into_bytes(),
        format!("event: error\ndata: {error}\n\n").into_bytes(),
        format!("data: {}\n\n", status_update("never")).into_bytes(),
    ];
    let mock = MockAgent::start(move |_| sse_chunks(chunks.clone())).await;
    let events = stream_of(&mock).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[0].is_ok());
    let err = events[1].as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::UnsupportedOperation);
    assert_eq!(err.message, "task is gone");
    assert_eq!(
        err.data,
        error["error"]["details"].as_array().unwrap().clone()
    );
}

#[tokio::test]
async fn undecodable_frame_ends_the_stream_with_a_gateway_fault() {
    let chunks = vec![
        format!("data: {{\"task\":{TASK}}}\n\n").into_bytes(),
        b"data: <html>oops</html>\n\n".to_vec(),
        format!("data: {}\n\n", status_update("never")).into_bytes(),
    ];
    let mock = MockAgent::start(move |_| sse_chunks(chunks.clone())).await;
    let events = stream_of(&mock).await;
    assert_eq!(events.len(), 2);
    let err = events[1].as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE");
    assert_eq!(err.data[0]["domain"], "a2a-gateway");
    assert!(err.data[1]["detail"]
        .as_str()
        .unwrap()
        .contains("<html>oops"));
}

#[tokio::test]
async fn stream_broken_mid_body_is_a_connection_reset() {
    let mock = MockAgent::start(|_| {
        broken_body(
            200,
            "text/event-stream",
            b"data: {\"task\":{\"id\":\"t-1\"}}\n\n",
        )
    })
    .await;
    let events = stream_of(&mock).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[0].is_ok());
    let err = events[1].as_ref().unwrap_err();
    assert_eq!(err.data[0]["reason"], "BACKEND_CONNECTION_RESET", "{err:?}");
    assert!(
        err.message.contains("connection to backend lost"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn stream_answered_with_json_is_a_bad_response() {
    let mock = MockAgent::start(|_| ok_json(TASK)).await;
    let send = SendMessageRequest::default();
    let err = backend(&mock.url)
        .stream(call(StreamRequest::SendStreamingMessage(send)))
        .await
        .err()
        .map(A2aError::from)
        .unwrap();
    assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE");
    assert!(
        err.message.contains("not an event stream"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_upstream_request() {
    let dropped = Arc::new(tokio::sync::Notify::new());
    let notify = dropped.clone();
    let mock = MockAgent::start(move |_| {
        endless_sse(b"data: {\"task\":{\"id\":\"t-1\"}}\n\n", notify.clone())
    })
    .await;
    let mut events = backend(&mock.url)
        .stream(subscribe("t-1"))
        .await
        .unwrap()
        .value;
    assert!(events.next().await.unwrap().is_ok());
    drop(events);
    tokio::time::timeout(Duration::from_secs(5), dropped.notified())
        .await
        .expect("the mock agent saw the client go away");
}

async fn unary_error(
    response: impl Fn() -> axum::response::Response + Send + Sync + 'static,
) -> A2aError {
    let mock = MockAgent::start(move |_| response()).await;
    let request = UnaryRequest::GetTask(GetTaskRequest {
        id: "t-1".into(),
        ..Default::default()
    });
    backend(&mock.url)
        .unary(call(request))
        .await
        .err()
        .map(A2aError::from)
        .unwrap()
}

#[tokio::test]
async fn structured_error_maps_by_error_info_reason() {
    let details = json!([
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_CANCELABLE",
         "domain": "a2a-protocol.org", "metadata": {"taskId": "t-1"}},
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": "id", "description": "done"}]}
    ]);
    let body = json!({"error": {"code": 400, "status": "FAILED_PRECONDITION",
        "message": "Task t-1 is completed", "details": details}});
    let err = unary_error(move || error_json(400, body.clone())).await;
    assert_eq!(err.kind, ErrorKind::TaskNotCancelable);
    assert_eq!(err.kind.code(), -32002);
    assert_eq!(err.message, "Task t-1 is completed");
    assert_eq!(
        err.data,
        details.as_array().unwrap().clone(),
        "details kept as they are"
    );
}

#[tokio::test]
async fn every_a2a_reason_maps_to_its_row() {
    for kind in ErrorKind::ALL
        .iter()
        .copied()
        .filter(|k| k.reason().is_some())
    {
        for status in Profile::ALL.map(|p| kind.http(p)) {
            let body = json!({"error": {"code": status, "status": "UNKNOWN", "message": "m",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": kind.reason().unwrap(), "domain": "a2a-protocol.org"}]}});
            let err = unary_error(move || error_json(status, body.clone())).await;
            assert_eq!(err.kind, kind);
        }
    }
}

#[tokio::test]
async fn status_name_decides_without_error_info() {
    // HTTP 400 alone would mean invalid params; the status name says NOT_FOUND.
    let body = json!({"error": {"code": 400, "status": "NOT_FOUND", "message": "no such task"}});
    let err = unary_error(move || error_json(400, body.clone())).await;
    assert_eq!(err.kind, ErrorKind::TaskNotFound);
    assert_eq!(err.message, "no such task");
    assert!(err.data.is_empty());

    let body = json!({"error": {"code": 501, "status": "UNIMPLEMENTED", "message": ""}});
    let err = unary_error(move || error_json(501, body.clone())).await;
    assert_eq!(err.kind, ErrorKind::MethodNotFound);
    assert_eq!(
        err.message, "Method not found",
        "standard message when empty"
    );
}

#[tokio::test]
async fn http_status_decides_without_status_name() {
    for (status, kind) in [
        (401, ErrorKind::Unauthenticated),
        (403, ErrorKind::PermissionDenied),
        (404, ErrorKind::TaskNotFound),
        (400, ErrorKind::InvalidParams),
        (503, ErrorKind::Internal),
    ] {
        let body = json!({"error": {"code": status, "message": "from the agent"}});
        let err = unary_error(move || error_json(status, body.clone())).await;
        assert_eq!(err.kind, kind, "HTTP {status}");
        assert_eq!(err.message, "from the agent");
    }
}

fn assert_bad_response(err: &A2aError, status: &str, content_type: Option<&str>) {
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(err.kind.code(), -32603);
    let info = &err.data[0];
    assert_eq!(info["reason"], "BACKEND_BAD_RESPONSE");
    assert_eq!(info["domain"], "a2a-gateway");
    assert_eq!(info["metadata"]["httpStatus"], status);
    match content_type {
        Some(ct) => assert_eq!(info["metadata"]["contentType"], ct),
        None => assert!(info["metadata"].get("contentType").is_none()),
    }
    let debug = &err.data[1];
    assert_eq!(debug["@type"], "type.googleapis.com/google.rpc.DebugInfo");
    assert!(debug["detail"]
        .as_str()
        .unwrap()
        .contains("could not parse the backend's answer"));
}

#[tokio::test]
async fn html_502_from_a_proxy_is_a_bad_response() {
    let html = "<html><body><h1>502 Bad Gateway</h1></body></html>";
    let err = unary_error(move || answer(502, "text/html", html)).await;
    assert_eq!(
        err.message,
        "backend answered HTTP 502 Bad Gateway with a body that is not an A2A error"
    );
    assert_bad_response(&err, "502", Some("text/html"));
    assert!(err.data[1]["detail"]
        .as_str()
        .unwrap()
        .contains("<h1>502 Bad Gateway</h1>"));
}

#[tokio::test]
async fn empty_404_is_a_bad_response() {
    let err = unary_error(|| answer(404, "", "")).await;
    assert_eq!(
        err.message,
        "backend answered HTTP 404 Not Found with an empty body, not an A2A error"
    );
    assert_bad_response(&err, "404", None);
    assert_eq!(err.data[0]["metadata"]["bodyLength"], "0");
}

#[tokio::test]
async fn text_plain_error_is_a_bad_response() {
    let err = unary_error(|| answer(404, "text/plain; charset=utf-8", "Not Found")).await;
    assert!(
        err.message.contains("HTTP 404 Not Found"),
        "{}",
        err.message
    );
    assert_bad_response(&err, "404", Some("text/plain; charset=utf-8"));
}

#[tokio::test]
async fn json_that_is_not_an_error_body_is_a_bad_response() {
    let err = unary_error(|| error_json(500, json!({"detail": "Internal Server Error"}))).await;
    assert_bad_response(&err, "500", Some("application/json"));
}

#[tokio::test]
async fn undecodable_success_body_is_a_bad_response() {
    let err = unary_error(|| ok_json(r#"{"id": 42}"#)).await;
    assert!(err.message.contains("HTTP 200 OK"), "{}", err.message);
    assert!(err.message.contains("GetTask reply"), "{}", err.message);
    assert_bad_response(&err, "200", Some("application/a2a+json"));
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let err = unary_error(|| {
        let mut response = answer(307, "", "");
        response
            .headers_mut()
            .insert("location", HeaderValue::from_static("http://127.0.0.1:1/x"));
        response
    })
    .await;
    assert_bad_response(&err, "307", None);
}

#[tokio::test]
async fn delete_accepts_an_empty_body_or_an_empty_object() {
    for body in ["", "{}", "\n"] {
        let mock = MockAgent::start(move |_| ok_json(body)).await;
        let request = UnaryRequest::DeleteTaskPushNotificationConfig(
            DeleteTaskPushNotificationConfigRequest {
                tenant: String::new(),
                task_id: "t-1".into(),
                id: "cfg-1".into(),
            },
        );
        let reply = backend(&mock.url).unary(call(request)).await.unwrap().value;
        assert_eq!(reply.op(), Op::DeleteTaskPushNotificationConfig, "{body:?}");
    }
}

async fn refused_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[tokio::test]
async fn connection_refused_is_backend_unavailable() {
    let backend = backend(&refused_url().await);
    let request = UnaryRequest::GetTask(GetTaskRequest {
        id: "t-1".into(),
        ..Default::default()
    });
    let err = backend
        .unary(call(request))
        .await
        .err()
        .map(A2aError::from)
        .unwrap();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(err.data[0]["reason"], "BACKEND_UNAVAILABLE");
    assert!(
        err.message.starts_with("backend unreachable"),
        "{}",
        err.message
    );
    let err = backend
        .stream(subscribe("t-1"))
        .await
        .err()
        .map(A2aError::from)
        .unwrap();
    assert_eq!(err.data[0]["reason"], "BACKEND_UNAVAILABLE");
}

#[tokio::test]
async fn slow_backend_is_deadline_exceeded() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let mock = MockAgent::start(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        let slow = futures::stream::once(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, std::convert::Infallible>(axum::body::Bytes::from_static(b"{}"))
        });
        answer(
            200,
            "application/a2a+json",
            axum::body::Body::from_stream(slow),
        )
    })
    .await;
    let request = UnaryRequest::GetTask(GetTaskRequest {
        id: "t-1".into(),
        ..Default::default()
    });
    let started = std::time::Instant::now();
    let err = backend(&mock.url)
        .unary(Call {
            request,
            forwarded: Vec::new(),
            deadline: Some(Instant::now() + Duration::from_millis(200)),
            trace: None,
        })
        .await
        .err()
        .map(A2aError::from)
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        err.data[0]["reason"], "BACKEND_DEADLINE_EXCEEDED",
        "{err:?}"
    );
    assert!(
        err.message.starts_with("backend deadline exceeded"),
        "{}",
        err.message
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn unary_body_broken_mid_way_is_a_connection_reset() {
    let err = unary_error(|| broken_body(200, "application/a2a+json", b"{\"id\":")).await;
    assert_eq!(err.data[0]["reason"], "BACKEND_CONNECTION_RESET", "{err:?}");
}

#[tokio::test]
async fn bad_backend_urls_are_refused() {
    for url in [
        "ftp://example.com",
        "http://example.com/a?x=1",
        "http://user:pw@example.com",
        "not a url",
    ] {
        assert!(
            RestBackend::new(url, Duration::from_secs(1), None).is_err(),
            "{url}"
        );
    }
    assert!(RestBackend::new("https://example.com/a2a/", Duration::from_secs(1), None).is_ok());
}

#[tokio::test]
async fn the_server_builds_an_http_json_gateway() {
    let settings = a2a_gateway::settings::Settings::load([
        "a2a-gateway",
        "--binding",
        "HTTP+JSON",
        "--backend",
        "http://127.0.0.1:9/base",
    ])
    .unwrap();
    let route = &settings.routes[0];
    assert!(a2a_gateway::route::gateway(route, Default::default()).is_ok());
}

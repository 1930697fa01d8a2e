//! JSON-RPC 2.0 envelope rules at the wire: parse and request errors, ids echoed exactly,
//! notifications, batches, HTTP method and body limits, params decoding errors.

use crate::harness;

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::Reply;
use harness::*;
use serde_json::{json, Value};

fn card() -> Reply {
    Reply::GetExtendedAgentCard(AgentCard {
        name: "n".into(),
        ..Default::default()
    })
}

async fn card_backend() -> (TestBackend, String) {
    setup(|_| Answer::Reply(card())).await
}

fn code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

#[tokio::test]
async fn envelope_errors() {
    let (backend, url) = card_backend().await;
    let cases: &[(&str, i64, Value)] = &[
        ("{not json", -32700, Value::Null),
        ("", -32700, Value::Null),
        ("\"just a string\"", -32600, Value::Null),
        ("42", -32600, Value::Null),
        (
            r#"{"id": 1, "method": "GetExtendedAgentCard"}"#,
            -32600,
            json!(1),
        ),
        (
            r#"{"jsonrpc": "1.0", "id": 1, "method": "GetExtendedAgentCard"}"#,
            -32600,
            json!(1),
        ),
        (
            r#"{"jsonrpc": 2.0, "id": 1, "method": "GetExtendedAgentCard"}"#,
            -32600,
            json!(1),
        ),
        (r#"{"jsonrpc": "2.0", "id": 1}"#, -32600, json!(1)),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": 7}"#,
            -32600,
            json!(1),
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": [1]}"#,
            -32600,
            json!(1),
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": "x"}"#,
            -32600,
            json!(1),
        ),
        (
            r#"{"jsonrpc": "2.0", "id": true, "method": "GetExtendedAgentCard"}"#,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1.5, "method": "GetExtendedAgentCard"}"#,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetExtendedAgentCard"}"#,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}"#,
            -32601,
            json!(1),
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {}}"#,
            -32601,
            json!(1),
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "sendMessage", "params": {}}"#,
            -32601,
            json!(1),
        ),
    ];
    for (body, expected, id) in cases {
        let reply = rpc(&url, body).await;
        assert_eq!(code(&reply), *expected, "{body} → {reply}");
        assert_eq!(reply["id"], *id, "{body} → {reply}");
        assert_eq!(reply["jsonrpc"], "2.0");
        assert!(reply["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    assert_eq!(
        backend.calls(),
        0,
        "no invalid request may reach the backend"
    );
}

#[tokio::test]
async fn ids_are_echoed_exactly() {
    let (_, url) = card_backend().await;
    for id in [
        "123456789012345678901234567890",
        "-5",
        "0",
        "\"abc\"",
        "\"\\u00e9t\\u00e9\"",
        "null",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetExtendedAgentCard"}}"#);
        let (_, _, text) = post(&url, body).await;
        assert!(
            text.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#)),
            "{id}: {text}"
        );
    }
}

#[tokio::test]
async fn params_errors_name_the_field() {
    let (backend, url) = card_backend().await;
    let cases = [
        (
            "SendMessage",
            json!({"message": {"parts": [{"text": 5}]}}),
            "message.parts[0].text",
        ),
        (
            "SendMessage",
            json!({"message": {"role": "ROLE_BOSS"}}),
            "message.role",
        ),
        (
            "GetTask",
            json!({"id": "t", "historyLength": "many"}),
            "historyLength",
        ),
        (
            "ListTasks",
            json!({"statusTimestampAfter": "yesterday"}),
            "statusTimestampAfter",
        ),
        (
            "SendMessage",
            json!({"message": {"parts": [{"raw": "***"}]}}),
            "message.parts[0].raw",
        ),
    ];
    for (method, params, field) in cases {
        let reply = rpc(&url, &request(json!(1), method, params.clone())).await;
        assert_eq!(code(&reply), -32602, "{params} → {reply}");
        let info = &reply["error"]["data"][0];
        assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
        assert_eq!(
            (info["reason"].as_str(), info["domain"].as_str()),
            (Some("INVALID_PARAMS"), Some("a2a-protocol.org"))
        );
        assert!(info["metadata"]["parseError"]
            .as_str()
            .unwrap()
            .contains(field));
        let detail = &reply["error"]["data"][1];
        assert_eq!(detail["@type"], "type.googleapis.com/google.rpc.BadRequest");
        assert_eq!(detail["fieldViolations"][0]["field"], field, "{reply}");
        assert!(reply["error"]["message"].as_str().unwrap().contains(field));
    }
    assert_eq!(backend.calls(), 0);
}

#[tokio::test]
async fn missing_params_mean_an_empty_request() {
    let (backend, url) =
        setup(|_| Answer::Reply(Reply::ListTasks(ListTasksResponse::default()))).await;
    let reply = rpc(&url, r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks"}"#).await;
    assert_eq!(
        reply["result"],
        json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0})
    );
    assert_eq!(
        backend.last().request,
        a2a_gateway::protocol::ops::Request::Unary(
            a2a_gateway::protocol::ops::UnaryRequest::ListTasks(ListTasksRequest::default())
        )
    );
}

#[tokio::test]
async fn notifications_are_performed_without_a_reply() {
    let (backend, url) = card_backend().await;
    let (status, _, body) =
        post(&url, r#"{"jsonrpc":"2.0","method":"GetExtendedAgentCard"}"#).await;
    assert_eq!((status, body.as_str()), (204, ""));
    assert_eq!(backend.calls(), 1);
    // Unknown methods in notifications get no answer either.
    let (status, _, body) = post(&url, r#"{"jsonrpc":"2.0","method":"Nope"}"#).await;
    assert_eq!((status, body.as_str()), (204, ""));
}

#[tokio::test]
async fn batches() {
    let (backend, url) = card_backend().await;
    let body = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"},
        {"jsonrpc": "2.0", "method": "GetExtendedAgentCard"},
        {"jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": message_params("x")},
        {"jsonrpc": "2.0", "id": 3, "method": "Nope"},
        5
    ]);
    let reply = rpc(&url, &body.to_string()).await;
    let items = reply.as_array().unwrap();
    assert_eq!(items.len(), 4, "{reply}");
    assert_eq!(items[0]["id"], 1);
    assert_eq!(items[0]["result"]["name"], "n");
    assert_eq!(
        (items[1]["id"].clone(), code(&items[1])),
        (json!("s"), -32600)
    );
    assert_eq!(
        (items[2]["id"].clone(), code(&items[2])),
        (json!(3), -32601)
    );
    assert_eq!(
        (items[3]["id"].clone(), code(&items[3])),
        (Value::Null, -32600)
    );
    assert_eq!(backend.calls(), 2, "the request and the notification");

    let reply = rpc(&url, "[]").await;
    assert_eq!(code(&reply), -32600);
    let (status, _, body) = post(
        &url,
        r#"[{"jsonrpc":"2.0","method":"GetExtendedAgentCard"}]"#,
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (204, ""),
        "a batch of notifications has no reply"
    );
}

#[tokio::test]
async fn other_http_methods_get_405() {
    let (_, url) = card_backend().await;
    for method in [
        reqwest::Method::GET,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
    ] {
        let response = client().request(method.clone(), &url).send().await.unwrap();
        assert_eq!(response.status(), 405, "{method}");
        assert_eq!(response.headers()["allow"], "POST", "{method}");
    }
}

#[tokio::test]
async fn oversized_bodies_get_a_jsonrpc_error() {
    let settings = Settings {
        max_body: 1024,
        ..Default::default()
    };
    let (backend, url) = setup_with(|_| Answer::Reply(card()), settings).await;
    let big = request(
        json!(1),
        "SendMessage",
        message_params(&"x".repeat(64 * 1024)),
    );
    let reply = rpc(&url, &big).await;
    assert_eq!(code(&reply), -32600);
    assert!(
        reply["error"]["message"].as_str().unwrap().contains("1024"),
        "{reply}"
    );
    assert_eq!(backend.calls(), 0);

    // The same on one HTTP/1.1 keep-alive connection: after the refusal the connection is
    // still usable, and the next request on it passes.
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut connection = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (status, reply) = exchange(&mut connection, &addr, &big).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(code(&reply), -32600, "{reply}");
    let small = r#"{"jsonrpc":"2.0","id":2,"method":"GetExtendedAgentCard"}"#;
    let (status, ok) = exchange(&mut connection, &addr, small).await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(ok["result"]["name"], "n", "{ok}");
    assert_eq!(backend.calls(), 1);
}

/// `max-body` is the largest body taken: a request of exactly that many bytes is called,
/// one byte more is answered -32600 naming the limit, and the agent never sees it.
#[tokio::test]
async fn a_body_at_max_body_is_served_and_one_byte_more_is_not() {
    const MAX: usize = 1024;
    let settings = Settings {
        max_body: MAX,
        ..Default::default()
    };
    let answer = |_: &_| {
        let task = task("t-1", TaskState::Completed);
        Answer::Reply(Reply::SendMessage(SendMessageResponse {
            payload: Some(send_message_response::Payload::Task(task)),
        }))
    };
    let (backend, url) = setup_with(answer, settings).await;
    // A SendMessage of exactly `size` bytes.
    let sized = |size: usize| {
        let empty = request(json!(1), "SendMessage", message_params("")).to_string();
        let text = "x".repeat(size - empty.len());
        let body = request(json!(1), "SendMessage", message_params(&text)).to_string();
        assert_eq!(body.len(), size);
        body
    };
    let (status, _, text) = post(&url, sized(MAX)).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert!(reply.get("error").is_none(), "{reply}");
    assert_eq!(backend.calls(), 1);

    let (status, _, text) = post(&url, sized(MAX + 1)).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(code(&reply), -32600, "{reply}");
    assert!(text.contains("1024"), "{reply}");
    assert_eq!(backend.calls(), 1, "the agent never saw it");
}

/// One HTTP/1.1 keep-alive request on `connection`; returns the status and the JSON body.
async fn exchange(connection: &mut tokio::net::TcpStream, host: &str, body: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let head = format!(
        "POST {ROUTE_PREFIX}/a2a/jsonrpc HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         a2a-version: 1.0\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    connection.write_all(head.as_bytes()).await.unwrap();
    connection.write_all(body.as_bytes()).await.unwrap();
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = |buffer: &Vec<u8>| -> Option<(u16, usize, usize)> {
        let end = buffer.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = std::str::from_utf8(&buffer[..end])
            .unwrap()
            .to_ascii_lowercase();
        let status = head[9..12].parse().unwrap();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .expect("a JSON reply has a content-length")
            .trim()
            .parse()
            .unwrap();
        Some((status, end, length))
    };
    loop {
        if let Some((status, end, length)) = read(&buffer) {
            if buffer.len() >= end + length {
                assert_eq!(buffer.len(), end + length, "bytes after the reply");
                let reply = serde_json::from_slice(&buffer[end..]).unwrap();
                return (status, reply);
            }
        }
        let n = connection.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the connection was closed");
        buffer.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn batch_members_run_boundedly_and_answer_in_order() {
    let slow = || {
        Answer::After(
            std::time::Duration::from_millis(100),
            Box::new(Answer::Reply(card())),
        )
    };
    let (backend, url) = setup(move |_| slow()).await;
    let batch: Vec<Value> = (0..20)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "GetExtendedAgentCard"}))
        .collect();
    let started = std::time::Instant::now();
    let reply = rpc(&url, &Value::Array(batch).to_string()).await;
    let ids: Vec<i64> = reply
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
    assert_eq!(backend.calls(), 20);
    // At most 16 members in flight: 20 members of 100 ms need at least two rounds.
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
}

/// Deep nesting never reaches a recursive parser: params nested deeper than 48 levels,
/// whether in an unknown member or a typed value (`metadata`, a Struct), are refused with
/// -32602, and the gateway serves on. (100,000 nested brackets in an unknown member
/// overflowed a worker's stack in sonic-rs and aborted the process.)
#[tokio::test]
async fn deeply_nested_params_get_an_answer() {
    let (_, url) = setup(harness::echo_message).await;
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let message = r#"{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}"#;
    let call = |params: String| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{params}}}"#)
    };
    for params in [
        format!(r#"{{"message":{message},"extra":{deep}}}"#),
        format!(r#"{{"message":{message},"metadata":{{"k":{deep}}}}}"#),
    ] {
        let reply = rpc(&url, &call(params)).await;
        assert_eq!(code(&reply), -32602, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains("deeper than 48"), "{message}");
    }
    // At the limit: params (1) > metadata (2) > 46 nested lists = 48 levels, which the
    // agent (prost: at most 100 protobuf levels) still decodes.
    for (lists, accepted) in [(46, true), (47, false)] {
        let nested = "[".repeat(lists) + &"]".repeat(lists);
        let params = format!(r#"{{"message":{message},"metadata":{{"k":{nested}}}}}"#);
        let reply = rpc(&url, &call(params)).await;
        assert_eq!(
            reply["result"].is_object(),
            accepted,
            "{lists} lists: {reply}"
        );
    }
    let reply = rpc(&url, &call(format!(r#"{{"message":{message}}}"#))).await;
    assert_eq!(reply["result"]["message"]["messageId"], "m", "{reply}");
}

/// Only JSON is a JSON-RPC request: a cross-site form post (text/plain, urlencoded,
/// multipart, which browsers send without a preflight) or a body without a Content-Type
/// gets 415 and a JSON-RPC error, and never reaches the agent.
#[tokio::test]
async fn a_post_that_is_not_json_gets_415_and_reaches_no_agent() {
    let (backend, url) = harness::setup(|_| {
        harness::Answer::Reply(a2a_gateway::protocol::ops::Reply::GetTask(harness::task(
            "t-1",
            a2a_gateway::proto::TaskState::Working,
        )))
    })
    .await;
    let body = harness::request(
        serde_json::json!(1),
        "GetTask",
        serde_json::json!({"id": "t-1"}),
    );
    let client = harness::client();
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonp"),
        None,
    ] {
        let mut post = client
            .post(&url)
            .header("a2a-version", "1.0")
            .body(body.clone());
        if let Some(value) = content_type {
            post = post.header("content-type", value);
        }
        let reply = post.send().await.unwrap();
        assert_eq!(reply.status(), 415, "{content_type:?}");
        let error: serde_json::Value = reply.json().await.unwrap();
        assert_eq!(error["error"]["code"], -32600, "{content_type:?}: {error}");
    }
    // Two Content-Types, the first JSON: what a filter in front judged may not be what
    // the gateway would read.
    let reply = client
        .post(&url)
        .header("a2a-version", "1.0")
        .header("content-type", "application/json")
        .header("content-type", "text/plain")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 415, "two Content-Types");
    assert_eq!(backend.calls(), 0);
    for content_type in ["application/json; charset=utf-8", "application/a2a+json"] {
        let reply = client
            .post(&url)
            .header("a2a-version", "1.0")
            .header("content-type", content_type)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{content_type}");
    }
    assert_eq!(backend.calls(), 2);
}

/// Task and context ids are bounded (an agent repeats them in its errors, in a header): an
/// id of 1024 bytes reaches the agent, one of 1025 gets -32602 and does not, wherever the
/// request carries it; so are the tenant and a page token.
#[tokio::test]
async fn ids_past_their_bound_are_refused_before_the_agent() {
    let (backend, url) = harness::setup(|_| {
        harness::Answer::Reply(a2a_gateway::protocol::ops::Reply::GetTask(harness::task(
            "t-1",
            a2a_gateway::proto::TaskState::Working,
        )))
    })
    .await;
    let (at_limit, past) = ("a".repeat(1024), "a".repeat(1025));
    let reply = rpc(&url, &request(json!(1), "GetTask", json!({"id": at_limit}))).await;
    assert!(reply.get("result").is_some(), "{reply}");
    assert_eq!(backend.calls(), 1);
    let mut in_message = message_params("hi");
    in_message["message"]["referenceTaskIds"] = json!(["t-0", past]);
    let mut context = message_params("hi");
    context["message"]["contextId"] = json!(past);
    for body in [
        request(json!(2), "GetTask", json!({"id": past})),
        request(json!(3), "SendMessage", in_message),
        request(json!(4), "SendMessage", context),
        request(json!(5), "ListTasks", json!({"contextId": past})),
    ] {
        let reply = rpc(&url, &body).await;
        assert_eq!(code(&reply), -32602, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("1025 bytes") && message.contains("1024"),
            "{message}"
        );
    }
    assert_eq!(backend.calls(), 1);

    // The tenant (1024 bytes, as ids) and a ListTasks page token (16384) are bounded too:
    // both become part of an agent's URL or metadata.
    let tenant = |len: usize| json!({"id": "t-1", "tenant": "t".repeat(len)});
    let token = |len: usize| json!({"pageToken": "p".repeat(len)});
    for (method, at, over, past) in [
        (
            "GetTask",
            tenant(1024),
            tenant(1025),
            "tenant: a tenant of 1025 bytes",
        ),
        (
            "ListTasks",
            token(16384),
            token(16385),
            "pageToken: the page token of 16385 bytes is longer than 16384 characters",
        ),
    ] {
        let calls = backend.calls();
        rpc(&url, &request(json!(6), method, at)).await;
        assert_eq!(
            backend.calls(),
            calls + 1,
            "{method} at the bound reaches the agent"
        );
        let reply = rpc(&url, &request(json!(7), method, over)).await;
        assert_eq!(code(&reply), -32602, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(past), "{message}");
        assert_eq!(backend.calls(), calls + 1, "{method} past the bound");
    }
}

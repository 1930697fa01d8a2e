//! The access log of the gateway binary: one structured line per call (unary calls when
//! answered, streams when they end), and credentials in no log line and no span, even with
//! every log at TRACE and traces exported.

use crate::harness;
use crate::harness::otlp;

use std::process::Stdio;
use std::time::Duration;

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use harness::process::{start_with, Running, TempFile};
use harness::{message_params, request, status_update, task, Answer, SseReader, Step, TestBackend};
use otlp::Collector;
use serde_json::{json, Value};

fn backend() -> TestBackend {
    TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::SendMessage(_)) => {
            Answer::Reply(Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Task(task(
                    "t-1",
                    TaskState::Completed,
                ))),
            }))
        }
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(config)) => {
            Answer::Reply(Reply::CreateTaskPushNotificationConfig(config.clone()))
        }
        Request::Stream(StreamRequest::SendStreamingMessage(_)) => Answer::Stream(vec![
            Step::Event(status_update("t-2", TaskState::Working)),
            Step::Event(status_update("t-2", TaskState::Completed)),
        ]),
        Request::Stream(StreamRequest::SubscribeToTask(_)) => Answer::Stream(vec![
            Step::Event(status_update("t-3", TaskState::Working)),
            Step::Error(tonic::Status::internal("agent crashed")),
        ]),
        _ => Answer::Error(tonic::Status::not_found("no such task")),
    })
}

/// Starts the gateway in front of `agent` with its log going to a file.
async fn start(agent: &TestBackend, args: &[&str], env: &[(&str, &str)]) -> (Running, TempFile) {
    let addr = agent.spawn().await;
    let backend_url = format!("http://{addr}");
    let log = TempFile::new("log", "");
    let file = std::fs::File::create(log.path()).unwrap();
    // The push hook of the logged calls names a host that does not resolve here.
    let mut all = vec![
        "--backend",
        &backend_url,
        "--drain-delay",
        "0",
        "--push-allow",
        "hooks.example",
    ];
    all.extend_from_slice(args);
    let gateway = start_with(&all, env, Stdio::from(file)).await;
    (gateway, log)
}

/// Stops the gateway with SIGTERM and returns its whole log.
async fn stop(mut gateway: Running, log: &TempFile) -> String {
    gateway.terminate();
    let status = gateway
        .exit_within(Duration::from_secs(10), "the gateway did not stop")
        .await;
    assert!(status.success(), "{status}");
    std::fs::read_to_string(log.path()).unwrap()
}

/// The access log lines of a JSON log, their fields.
fn access_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "a2a_gateway::access")
        .map(|line| line["fields"].clone())
        .collect()
}

#[tokio::test]
async fn one_line_per_call_with_its_facts() {
    let agent = backend();
    let (gateway, log) = start(&agent, &["--log-format", "json"], &[]).await;
    let url = gateway.1.clone();

    let send = request(json!(1), "SendMessage", message_params("hi"));
    let headers = [
        ("a2a-version", "1.0"),
        ("x-request-id", "req-42"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
    ];
    let (status, reply_headers, reply) = harness::post_with(&url, send.clone(), &headers).await;
    assert_eq!(status, 200);
    assert_eq!(reply_headers["x-request-id"], "req-42");

    let get = request(json!("g"), "GetTask", json!({"id": "t-9"}));
    let (_, _, error_reply) = harness::post(&url, get.clone()).await;

    let stream = request(json!(3), "SendStreamingMessage", message_params("go"));
    let (_, mut reader) = SseReader::open(&url, stream.clone()).await;
    let mut frames = Vec::new();
    while let Some(frame) = reader.frame().await {
        frames.push(frame);
    }
    assert_eq!(frames.len(), 2);

    let (_, _, parse_error) = harness::post(&url, "{oops").await;
    let batch = format!("[{send},{get}]");
    harness::post(&url, batch).await;
    let subscribe = request(json!(4), "SubscribeToTask", json!({"id": "t-3"}));
    let (_, mut reader) = SseReader::open(&url, subscribe).await;
    while reader.frame().await.is_some() {}

    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(
        lines.len(),
        7,
        "one line per call (a batch: per element): {lines:#?}"
    );

    let unary = &lines[0];
    assert_eq!(unary["message"], "access");
    // The route's name (as the metrics label it), and the path apart.
    assert_eq!(unary["route"], "default");
    assert_eq!(unary["path"], "/a2a/jsonrpc");
    assert_eq!(unary["method"], "SendMessage");
    assert_eq!(unary["id"], "1");
    assert_eq!(unary["code"], 0);
    assert_eq!(unary["backend_status"], "0");
    assert_eq!(unary["bytes_in"], send.len());
    assert_eq!(unary["bytes_out"], reply.len());
    assert_eq!(unary["frames"], 0);
    assert_eq!(unary["request_id"], "req-42");
    assert_eq!(unary["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert!(
        unary["client"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{unary}"
    );
    assert!(unary["duration_us"].as_u64().unwrap() > 0);

    let failed = &lines[1];
    assert_eq!(failed["method"], "GetTask");
    assert_eq!(failed["id"], "\"g\"");
    assert_eq!(failed["code"], -32001);
    assert_eq!(failed["backend_status"], "5", "NOT_FOUND");
    assert_eq!(failed["bytes_out"], error_reply.len());
    assert_eq!(failed["trace_id"], "-");
    let generated = failed["request_id"].as_str().unwrap();
    assert!(uuid_like(generated), "a generated request id: {generated}");

    // The stream's line is written when it ends, with its frames and all its bytes.
    let streamed = &lines[2];
    assert_eq!(streamed["method"], "SendStreamingMessage");
    assert_eq!(streamed["code"], 0);
    assert_eq!(streamed["frames"], 2);
    let sse_bytes: usize = frames.iter().map(|f| f.len() + 2).sum();
    assert_eq!(streamed["bytes_out"], sse_bytes);

    let rejected = &lines[3];
    assert_eq!(rejected["method"], "");
    assert_eq!(rejected["code"], -32700);
    assert_eq!(rejected["backend_status"], "-");
    assert_eq!(rejected["bytes_out"], parse_error.len());

    assert_eq!(lines[4]["method"], "SendMessage");
    assert_eq!(lines[4]["bytes_in"], send.len(), "the element's bytes");
    assert_eq!(lines[5]["method"], "GetTask");
    assert_eq!(lines[5]["code"], -32001);

    // A stream that ends with an error: its code, the error event among its frames.
    let broken = &lines[6];
    assert_eq!(broken["method"], "SubscribeToTask");
    assert_eq!(broken["code"], -32603);
    assert_eq!(broken["frames"], 2);
    assert_eq!(broken["backend_status"], "0", "the stream started well");
}

fn uuid_like(text: &str) -> bool {
    text.len() == 36 && text.chars().filter(|c| *c == '-').count() == 4
}

#[tokio::test]
async fn access_log_can_be_turned_off_by_flag_and_file() {
    let config = TempFile::new("toml", "access-log = false\n");
    for args in [
        &["--access-log", "false", "--log-format", "json"][..],
        &["--config", config.path(), "--log-format", "json"][..],
    ] {
        let agent = backend();
        let (gateway, log) = start(&agent, args, &[("RUST_LOG", "debug")]).await;
        let send = request(json!(1), "SendMessage", message_params("hi"));
        harness::rpc(&gateway.1, &send).await;
        let log = stop(gateway, &log).await;
        assert!(access_lines(&log).is_empty(), "{args:?}: {log}");
        assert!(
            log.contains("a2a-gateway serving"),
            "other logs stay: {log}"
        );
    }
}

/// A credential planted in each place one travels: `Authorization`, `Proxy-Authorization`,
/// cookies, a configured forwarded header, a push config's token and credentials. With
/// every log at TRACE and traces exported, none is in the log or in any span.
#[tokio::test]
async fn planted_credentials_appear_in_no_log_line_and_no_span() {
    const SECRET: &str = "pl4nted-s3cret";
    let (collector, endpoint) = Collector::grpc().await;
    let agent = backend();
    let env = [
        ("RUST_LOG", "trace"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ];
    let args = ["--forward-header", "x-api-key"];
    let (gateway, log) = start(&agent, &args, &env).await;
    let url = gateway.1.clone();
    let authorization = format!("Bearer {SECRET}-authorization");
    let proxy = format!("Basic {SECRET}-proxy");
    let cookie = format!("session={SECRET}-cookie");
    let api_key = format!("{SECRET}-api-key");
    let headers = [
        ("a2a-version", "1.0"),
        ("authorization", authorization.as_str()),
        ("proxy-authorization", proxy.as_str()),
        ("cookie", cookie.as_str()),
        ("x-api-key", api_key.as_str()),
    ];
    let config = json!({
        "taskId": "t-1",
        "id": "c-1",
        "url": "https://hooks.example/a2a",
        "token": format!("{SECRET}-token"),
        "authentication": {"scheme": "Bearer", "credentials": format!("{SECRET}-credentials")},
    });
    let bodies = [
        request(json!(1), "SendMessage", message_params("hi")),
        request(json!(2), "CreateTaskPushNotificationConfig", config),
        request(json!(3), "GetTask", json!({"id": "t-9"})),
        format!("{{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"SendMessage\",\"params\":{{\"token\":\"{SECRET}\""),
    ];
    for body in bodies {
        let (status, _, text) = harness::post_with(&url, body, &headers).await;
        assert_eq!(status, 200, "{text}");
    }
    let stream = request(json!(5), "SendStreamingMessage", message_params("go"));
    let mut request = harness::client()
        .post(&url)
        .header("content-type", "application/json")
        .body(stream);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let streamed = request.send().await.unwrap().text().await.unwrap();
    assert!(streamed.contains("TASK_STATE_COMPLETED"), "{streamed}");

    // The secrets were really there to leak: the agent got them.
    let seen = agent.seen.lock().unwrap().clone();
    let created = seen
        .iter()
        .find(|s| {
            matches!(
                s.request,
                Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(_))
            )
        })
        .unwrap();
    assert_eq!(
        created.metadata.get("authorization").unwrap(),
        authorization.as_str()
    );
    assert_eq!(created.metadata.get("x-api-key").unwrap(), api_key.as_str());
    assert!(format!("{:?}", created.request).contains(&format!("{SECRET}-credentials")));

    let log = stop(gateway, &log).await;
    let spans = collector.wait_for(8, Duration::from_secs(5)).await;
    assert!(
        spans.len() >= 8,
        "4 calls with a backend call, 1 without: {spans:#?}"
    );
    assert!(log.contains("TRACE"), "every log at TRACE: {log}");
    assert!(log.lines().count() > 50, "{log}");
    assert_eq!(log.matches("a2a_gateway::access").count(), 5, "{log}");
    for (line_no, line) in log.lines().enumerate() {
        assert!(!line.contains(SECRET), "log line {line_no}: {line}");
    }
    let exported = collector.dump();
    assert!(
        !exported.contains(SECRET),
        "a span holds a credential: {exported}"
    );
}

/// Ids, request ids and message ids are the client's: in the text log and the spans each
/// is bounded and escaped, so 40 KB ids make short lines and an id that looks like log
/// fields forges none; a request id that is not a plausible id is replaced by a fresh one,
/// the same in the reply and toward the agent.
#[tokio::test]
async fn client_strings_are_bounded_and_escaped_in_log_and_spans() {
    let (collector, endpoint) = Collector::grpc().await;
    let agent = backend();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ];
    let (gateway, log) = start(&agent, &[], &env).await;
    let url = gateway.1.clone();
    let huge = |c: &str| c.repeat(40_000);
    let forged = "x code=0 method=Forged";

    // Request ids: too long, fields with spaces, two of them; then one that is kept.
    let mut fresh = Vec::new();
    for values in [
        vec![huge("r")],
        vec![forged.to_owned()],
        vec!["a".into(), "b".into()],
    ] {
        let mut call = harness::client()
            .post(&url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(request(json!(1), "SendMessage", message_params("hi")));
        for value in &values {
            call = call.header("x-request-id", value);
        }
        let reply = call.send().await.unwrap();
        let id = reply.headers()["x-request-id"].to_str().unwrap().to_owned();
        assert!(
            uuid_like(&id),
            "{values:?} replaced by a fresh id, got {id}"
        );
        fresh.push(id);
    }
    let kept = "req-7:trace/span+a=@b_c.d";
    let headers = [("a2a-version", "1.0"), ("x-request-id", kept)];
    let send = request(json!(1), "SendMessage", message_params("hi"));
    let (_, reply_headers, _) = harness::post_with(&url, send, &headers).await;
    assert_eq!(reply_headers["x-request-id"], kept);
    let toward_agent: Vec<String> = agent
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| {
            s.metadata
                .get("x-request-id")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(toward_agent[..3], fresh[..], "the agent got the fresh ids");
    assert_eq!(toward_agent[3], kept);

    // A JSON-RPC id and a message id of 40 KB, task ids of 1000 bytes (the most a task id
    // may have is 1024), and an id that looks like fields.
    let headers = [("a2a-version", "1.0")];
    let task_id = "t".repeat(1000);
    let mut message = message_params("hi");
    message["message"]["messageId"] = json!(huge("m"));
    message["message"]["taskId"] = json!(task_id);
    for body in [
        request(json!(huge("i")), "GetTask", json!({"id": task_id})),
        request(json!(forged), "GetTask", json!({"id": "t-1"})),
        request(json!(2), "SendMessage", message),
    ] {
        let (status, _, _) = harness::post_with(&url, body, &headers).await;
        assert_eq!(status, 200);
    }

    let log = stop(gateway, &log).await;
    let spans = collector.wait_for(7, Duration::from_secs(5)).await;
    assert!(spans.len() >= 7, "{spans:#?}");
    assert_eq!(log.matches("a2a_gateway::access").count(), 7, "{log}");
    let longest = log.lines().map(str::len).max().unwrap();
    assert!(longest < 1024, "a log line of {longest} bytes: {log}");
    assert!(!log.contains("\u{1b}["), "no colours in a log file: {log}");
    for (line_no, line) in log.lines().enumerate() {
        assert!(!line.contains(" method=Forged"), "line {line_no}: {line}");
        assert!(!line.contains(&"r".repeat(200)), "line {line_no}: {line}");
    }
    assert!(log.contains("…(+"), "cut values say so: {log}");
    let exported = collector.dump();
    for c in ["i", "m", "t", "r"] {
        assert!(
            !exported.contains(&c.repeat(200)),
            "a span attribute holds a whole {c} id"
        );
    }
    assert!(exported.contains("…(+"), "{exported}");
}

/// Lines are written while the gateway runs, not only at exit; and a stderr that takes
/// nothing (a pipe nobody reads) stalls no call and no probe: past the log's bounds, lines
/// are dropped and counted in `/metrics`.
#[tokio::test]
async fn lines_are_written_soon_and_a_stuck_stderr_stalls_no_call() {
    let agent = backend();
    let (gateway, log) = start(&agent, &["--log-format", "json"], &[]).await;
    let send = request(json!(1), "SendMessage", message_params("hi"));
    harness::post(&gateway.1, send).await;
    let started = std::time::Instant::now();
    while access_lines(&std::fs::read_to_string(log.path()).unwrap()).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "no access line yet"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop(gateway, &log).await;

    let addr = agent.spawn().await;
    let backend_url = format!("http://{addr}");
    let admin = harness::free_listen_address();
    let args = ["--backend", &backend_url, "--admin-listen", &admin];
    let stuck = start_with(&args, &[], Stdio::piped()).await;
    // 100 members a batch, so 100 lines of ~500 bytes (ids are logged up to 128) a
    // request: 300 requests are ~15 MB of lines, past what the pipe (64 KiB) and the log's
    // queue (8 MiB) hold.
    let member = request(json!("i".repeat(120)), "GetTask", json!({"id": "t-9"}));
    let batch = format!("[{}]", vec![member; 100].join(","));
    for n in 0..300 {
        let started = std::time::Instant::now();
        let (status, _, _) = harness::post(&stuck.1, batch.clone()).await;
        if n % 50 == 0 {
            // A probe logs on the main thread (the agent offers no health service).
            let ready = harness::client()
                .get(format!("http://{admin}/readyz"))
                .send()
                .await;
            assert!(ready.is_ok(), "batch {n}: {ready:?}");
        }
        assert_eq!(status, 200);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "batch {n} took {:?}",
            started.elapsed()
        );
    }
    let metrics = harness::client()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("a2a_gateway_log_lines_dropped_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(dropped > 0, "{metrics}");
}

/// A gRPC message past `max-body` is refused before any call and logged as the JSON-RPC
/// front logs a body past it: no method, the INVALID_REQUEST row's code; one at the bound
/// is a call.
#[tokio::test]
async fn a_grpc_message_past_max_body_is_logged_as_refused() {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    use prost::Message as _;
    let agent = backend();
    let args = [
        "--log-format",
        "json",
        "--fronts",
        "JSONRPC,GRPC",
        "--max-body",
        "1024",
    ];
    let (gateway, log) = start(&agent, &args, &[]).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let mut client = A2aServiceClient::connect(origin).await.unwrap();
    // The tenant carries the size (ids are bounded on their own).
    let sized = |len: usize| {
        let mut request = GetTaskRequest {
            id: "t-1".into(),
            ..Default::default()
        };
        request.tenant = "x".repeat(len - request.encoded_len() - 3);
        assert_eq!(request.encoded_len(), len);
        request
    };
    let at = client.get_task(sized(1024)).await.unwrap_err();
    assert_eq!(
        at.code(),
        tonic::Code::NotFound,
        "the agent answered: {at:?}"
    );
    let past = client.get_task(sized(1025)).await.unwrap_err();
    assert_eq!(past.code(), tonic::Code::InvalidArgument, "{past:?}");
    drop(client);

    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(lines[0]["method"], "GetTask");
    assert_eq!(lines[0]["bytes_in"], 1024);
    let refused = &lines[1];
    assert_eq!(refused["method"], "");
    assert_eq!(refused["code"], -32600);
    assert_eq!(refused["backend_status"], "-");
}

/// Every post to the push relay's callback gets one access line: the route its token named
/// (none when it names none), the path, the HTTP status, why it was refused, duration and
/// bytes; never its token, nor the client's webhook, token or credentials.
#[tokio::test]
async fn every_push_callback_post_gets_one_line_without_its_token() {
    use base64::Engine;
    // Holds the push configs it is given, as the relay's callback asks.
    let held = harness::PushStore::default();
    let agent = harness::push_config_agent(held.clone());
    let key = TempFile::new(
        "key",
        &base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
    );
    let args = [
        "--log-format",
        "json",
        "--push",
        "relay",
        "--push-callback-url",
        "https://gateway.example/a2a/push",
        "--push-key-file",
        key.path(),
        // The hook's name does not resolve here: one attempt, then the delivery is over.
        "--push-max-attempts",
        "1",
    ];
    let (gateway, log) = start(&agent, &args, &[]).await;
    let config = json!({"taskId": "t-1", "id": "cfg-1", "url": "https://hooks.example/h",
        "token": "client-token", "authentication": {"scheme": "Bearer", "credentials": "client-secret"}});
    let created = harness::rpc(
        &gateway.1,
        &request(json!(1), "CreateTaskPushNotificationConfig", config),
    )
    .await;
    assert!(created["result"].is_object(), "{created}");
    let Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(sealed)) =
        agent.last().request
    else {
        panic!("not a push config");
    };
    let callback = gateway.1.replace("/a2a/jsonrpc", "/a2a/push");
    let event = serde_json::to_vec(&status_update("t-1", TaskState::Working)).unwrap();
    let post = |token: &str, content_type: &str| {
        harness::client()
            .post(&callback)
            .header("content-type", content_type)
            .header("x-a2a-notification-token", token)
            .body(event.clone())
            .send()
    };
    assert_eq!(
        post(&sealed.token, "application/json")
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        post("forged", "application/json").await.unwrap().status(),
        401
    );
    assert_eq!(
        post(&sealed.token, "text/plain").await.unwrap().status(),
        415
    );
    // A token whose config the agent dropped.
    let other = json!({"taskId": "t-1", "id": "cfg-2", "url": "https://hooks.example/h"});
    let created = harness::rpc(
        &gateway.1,
        &request(json!(2), "CreateTaskPushNotificationConfig", other),
    )
    .await;
    assert!(created["result"].is_object(), "{created}");
    let dropped = held.lock().unwrap().pop().unwrap();
    assert_eq!(
        post(&dropped.token, "application/json")
            .await
            .unwrap()
            .status(),
        401
    );

    let log = stop(gateway, &log).await;
    let lines: Vec<Value> = access_lines(&log)
        .into_iter()
        .filter(|line| line["path"] == "/a2a/push")
        .collect();
    assert_eq!(lines.len(), 4, "one line per post: {lines:#?}");
    for (line, route, status, refused, bytes_in) in [
        (&lines[0], "default", 204, None, event.len()),
        (&lines[1], "", 401, Some("no valid notification token"), 0),
        (
            &lines[2],
            "default",
            415,
            Some("the Content-Type must be application/a2a+json or application/json"),
            0,
        ),
        (
            &lines[3],
            "default",
            401,
            Some("the token's push config is no longer held by the agent"),
            event.len(),
        ),
    ] {
        assert_eq!(line["route"], route, "{line}");
        assert_eq!(line["method"], "PushCallback", "{line}");
        assert_eq!(line["status"], status, "{line}");
        assert_eq!(line["code"], 0, "answered, not left: {line}");
        assert_eq!(line["refused"].as_str(), refused, "{line}");
        assert_eq!(line["bytes_in"], bytes_in, "{line}");
        assert!(line["duration_us"].as_i64().unwrap() >= 0, "{line}");
        assert_ne!(line["client"], "-", "{line}");
    }
    assert_eq!(lines[0]["bytes_out"], 0);
    assert!(lines[1]["bytes_out"].as_i64().unwrap() > 0);
    for secret in [
        sealed.token.as_str(),
        dropped.token.as_str(),
        "client-token",
        "client-secret",
        "hooks.example/h",
    ] {
        assert!(!log.contains(secret), "{secret} in the log");
    }
}

/// How long each client below stays before it leaves: the line's duration is at least this.
const STAYED: Duration = Duration::from_millis(300);

/// An agent that never finishes: a unary call waits ten minutes, a stream sends one event
/// and stays open.
fn hanging_backend() -> TestBackend {
    TestBackend::new(|request| match request {
        Request::Stream(_) => Answer::Stream(vec![
            Step::Event(status_update("t-h", TaskState::Working)),
            Step::Hang,
        ]),
        _ => Answer::After(
            Duration::from_secs(600),
            Box::new(Answer::Error(tonic::Status::not_found("too late"))),
        ),
    })
}

/// Waits until the log holds `n` access lines (each is written within about 100 ms of its
/// call's end) and returns them.
async fn await_lines(log: &TempFile, n: usize) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let lines = access_lines(&std::fs::read_to_string(log.path()).unwrap());
        if lines.len() >= n {
            return lines;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{n} lines expected: {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts that `line` is of a call its client left after `STAYED`: code 499, nothing
/// sent.
fn assert_left(line: &Value, path: &str) {
    assert_eq!(line["path"], path, "{line}");
    assert_eq!(line["code"], 499, "{line}");
    assert_eq!(line["bytes_out"], 0, "{line}");
    assert_eq!(line["frames"], 0, "{line}");
    let stayed = u64::try_from(STAYED.as_micros()).unwrap();
    assert!(line["duration_us"].as_u64().unwrap() >= stayed, "{line}");
}

/// The host and port of a gateway URL.
fn authority(url: &str) -> String {
    let url: http::Uri = url.parse().unwrap();
    url.authority().unwrap().as_str().to_owned()
}

/// An HTTP/1.1 POST to `path` announcing 10,000 bytes of body and sending `body` once the
/// gateway asked for it (`100 Continue`: its handler, and the call's duration, have begun).
async fn post_head(authority: &str, path: &str, body: &[u8]) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(authority).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         A2A-Version: 1.0\r\nContent-Length: 10000\r\nExpect: 100-continue\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    while !answer.ends_with(b"\r\n\r\n") {
        let mut byte = [0];
        tcp.read_exact(&mut byte).await.unwrap();
        answer.push(byte[0]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 100"), "{answer:?}");
    tcp.write_all(body).await.unwrap();
    tcp
}

/// A client that announces 10,000 bytes of body, sends 100 and leaves (its connection
/// closed or reset, its HTTP/2 stream reset or its connection dropped) is logged once, when
/// the gateway sees it go: code 499 (nginx's "client closed request"), the bytes it sent,
/// nothing sent back, the time until it left; on every front.
#[tokio::test]
async fn a_client_that_leaves_mid_body_is_logged_as_gone_with_what_it_sent() {
    let agent = backend();
    let args = ["--log-format", "json", "--fronts", "JSONRPC,HTTP+JSON,GRPC"];
    let (gateway, log) = start(&agent, &args, &[]).await;
    let authority = authority(&gateway.1);
    let mut n = 0;
    for path in ["/a2a/jsonrpc", "/a2a/rest/message:send"] {
        for reset in [false, true] {
            let tcp = post_head(&authority, path, &[b' '; 100]).await;
            tokio::time::sleep(STAYED).await;
            if reset {
                tcp.set_zero_linger().unwrap();
            }
            drop(tcp);
            n += 1;
            let line = &await_lines(&log, n).await[n - 1];
            assert_left(line, path);
            assert_eq!(line["bytes_in"], 100, "reset: {reset}: {line}");
            assert_eq!(line["method"], "", "{line}");
        }
    }

    let path = "/lf.a2a.v1.A2AService/SendMessage";
    for reset in [false, true] {
        let started = std::time::Instant::now();
        let tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        let connection = tokio::spawn(connection);
        let request = http::Request::post(format!("http://{authority}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let mut client = client.ready().await.unwrap();
        let (_response, mut body) = client.send_request(request, false).unwrap();
        // A gRPC message announcing 10,000 bytes, 100 of them sent.
        let mut message = vec![0];
        message.extend_from_slice(&10_000u32.to_be_bytes());
        message.extend_from_slice(&[0x0a; 100]);
        body.send_data(message.into(), false).unwrap();
        tokio::time::sleep(STAYED).await;
        match reset {
            true => body.send_reset(h2::Reason::CANCEL),
            false => connection.abort(),
        }
        n += 1;
        let line = &await_lines(&log, n).await[n - 1];
        assert_eq!(line["path"], path, "{line}");
        assert_eq!(line["code"], 499, "{line}");
        assert_eq!(line["bytes_out"], 0, "{line}");
        assert_eq!(line["bytes_in"], 105, "reset: {reset}: {line}");
        // Nothing tells this client when the gateway's handler began: its duration is
        // bounded by the client's own.
        let duration = line["duration_us"].as_u64().unwrap();
        let client_us = u64::try_from(started.elapsed().as_micros()).unwrap();
        assert!(0 < duration && duration <= client_us, "{line}");
        drop(client);
    }
    assert_eq!(agent.calls(), 0);
    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), n, "one line per call: {lines:#?}");
}

/// A client that leaves while its call waits for the agent (its connection closed, its
/// gRPC call cancelled) is logged once, code 499, with what it sent and nothing sent back,
/// on every front; the agent's call is not awaited for it.
#[tokio::test]
async fn a_client_that_leaves_a_call_in_flight_is_logged_as_gone() {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    let agent = hanging_backend();
    let args = ["--log-format", "json", "--fronts", "JSONRPC,HTTP+JSON,GRPC"];
    let (gateway, log) = start(&agent, &args, &[]).await;
    let authority = authority(&gateway.1);
    let send = request(json!(1), "SendMessage", message_params("hi"));
    let rest = message_params("hi").to_string();
    let mut n = 0;
    for (path, body) in [("/a2a/jsonrpc", &send), ("/a2a/rest/message:send", &rest)] {
        use tokio::io::AsyncWriteExt;
        let mut tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             A2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        while agent.calls() == n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(STAYED).await;
        drop(tcp);
        n += 1;
        let line = &await_lines(&log, n).await[n - 1];
        assert_left(line, path);
        assert_eq!(line["method"], "SendMessage", "{line}");
        assert_eq!(line["bytes_in"], body.len(), "{line}");
    }

    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let mut client = A2aServiceClient::connect(origin).await.unwrap();
    let request = SendMessageRequest {
        message: Some(Message {
            message_id: "m-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let call = tokio::spawn(async move { client.send_message(request).await });
    while agent.calls() == n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(STAYED).await;
    // Dropping the call's future resets its stream (CANCEL).
    call.abort();
    n += 1;
    let line = &await_lines(&log, n).await[n - 1];
    assert_left(line, "/lf.a2a.v1.A2AService/SendMessage");
    assert_eq!(line["method"], "SendMessage", "{line}");
    assert!(line["bytes_in"].as_u64().unwrap() > 0, "{line}");
    // The request metric counts them too, with the line's code.
    let metrics = harness::client::metrics_text(gateway.1.trim_end_matches("/a2a/jsonrpc")).await;
    let left =
        "a2a_gateway_requests_total{route=\"default\",method=\"SendMessage\",code=\"499\"} 3\n";
    assert!(metrics.contains(left), "{metrics}");

    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), n, "one line per call: {lines:#?}");
}

/// A stream its client abandons (the SSE connection closed, the gRPC stream cancelled or its
/// connection dropped) is logged once, code 499, with the events and bytes sent until then,
/// on every front.
#[tokio::test]
async fn a_stream_its_client_abandons_is_logged_as_gone_with_what_was_sent() {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    use prost::Message as _;
    let agent = hanging_backend();
    let args = [
        "--log-format",
        "json",
        "--fronts",
        "JSONRPC,HTTP+JSON,GRPC",
        "--keepalive",
        "1h",
    ];
    let (gateway, log) = start(&agent, &args, &[]).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let stream = request(json!(3), "SendStreamingMessage", message_params("go"));
    let rest_url = format!("{origin}/a2a/rest/message:stream");
    let rest = message_params("go").to_string();
    let mut n = 0;
    for (url, body) in [(&gateway.1, stream), (&rest_url, rest)] {
        let (_, mut reader) = SseReader::open(url, body).await;
        let frame = reader.frame().await.unwrap();
        tokio::time::sleep(STAYED).await;
        drop(reader);
        n += 1;
        let line = &await_lines(&log, n).await[n - 1];
        assert_eq!(line["method"], "SendStreamingMessage", "{line}");
        assert_eq!(line["code"], 499, "{line}");
        assert_eq!(
            line["backend_status"], "0",
            "the stream started well: {line}"
        );
        assert_eq!(line["frames"], 1, "{line}");
        assert_eq!(line["bytes_out"], frame.len() + 2, "{line}");
        let stayed = u64::try_from(STAYED.as_micros()).unwrap();
        assert!(line["duration_us"].as_u64().unwrap() >= stayed, "{line}");
    }

    let mut client = A2aServiceClient::connect(origin).await.unwrap();
    let request = SendMessageRequest {
        message: Some(Message {
            message_id: "m-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut events = client
        .send_streaming_message(request.clone())
        .await
        .unwrap()
        .into_inner();
    let first = events.message().await.unwrap().unwrap();
    tokio::time::sleep(STAYED).await;
    // Dropping the stream resets it (CANCEL).
    drop(events);
    n += 1;
    let line = &await_lines(&log, n).await[n - 1];
    assert_eq!(line["path"], "/lf.a2a.v1.A2AService/SendStreamingMessage");
    assert_eq!(line["code"], 499, "{line}");
    assert_eq!(line["frames"], 1, "{line}");
    assert_eq!(line["bytes_out"], first.encoded_len(), "{line}");

    // A gRPC stream whose connection drops after its first event.
    let authority = authority(&gateway.1);
    let tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    let path = "/lf.a2a.v1.A2AService/SendStreamingMessage";
    let head = http::Request::post(format!("http://{authority}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut client = client.ready().await.unwrap();
    let (response, mut body) = client.send_request(head, false).unwrap();
    let message = request.encode_to_vec();
    let message = harness::hostile::frames::grpc_message(&message);
    body.send_data(message.into(), true).unwrap();
    let mut events = response.await.unwrap().into_body();
    events.data().await.unwrap().unwrap();
    tokio::time::sleep(STAYED).await;
    connection.abort();
    n += 1;
    let line = &await_lines(&log, n).await[n - 1];
    assert_eq!(line["path"], path);
    assert_eq!(line["code"], 499, "{line}");
    assert_eq!(line["frames"], 1, "{line}");

    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), n, "one line per call: {lines:#?}");
}

/// One SendMessage on each front (JSON-RPC, HTTP+JSON, gRPC) of the gateway at `url`: the
/// JSON-RPC error code of the JSON-RPC reply (the other two must fail too).
async fn send_on_every_front(url: &str) -> i64 {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    let send = request(json!(1), "SendMessage", message_params("hi"));
    let (_, _, reply) = harness::post(url, send).await;
    let reply: Value = serde_json::from_str(&reply).unwrap();
    let code = reply["error"]["code"].as_i64().expect("an error");
    let origin = url.trim_end_matches("/a2a/jsonrpc").to_owned();
    let rest = harness::client()
        .post(format!("{origin}/a2a/rest/message:send"))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(message_params("hi").to_string())
        .send()
        .await
        .unwrap();
    assert!(!rest.status().is_success(), "{rest:?}");
    let mut client = A2aServiceClient::connect(origin).await.unwrap();
    let request = SendMessageRequest {
        message: Some(Message {
            message_id: "m-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    client.send_message(request).await.unwrap_err();
    code
}

/// A call a limit refuses, and one whose deadline passes, each log one line on every front,
/// with the code of the error the client got (a JSON-RPC client's, through the error table
/// on the other fronts).
#[tokio::test]
async fn a_refused_call_and_a_passed_deadline_log_their_code_on_every_front() {
    let fronts = ["--log-format", "json", "--fronts", "JSONRPC,HTTP+JSON,GRPC"];
    // One call a thousand seconds: the first passes, the rest are refused.
    let agent = backend();
    let mut args = fronts.to_vec();
    args.extend(["--rate-limit", "0.001", "--rate-burst", "1"]);
    let (gateway, log) = start(&agent, &args, &[]).await;
    let send = request(json!(1), "SendMessage", message_params("hi"));
    harness::rpc(&gateway.1, &send).await;
    let code = send_on_every_front(&gateway.1).await;
    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(lines[0]["code"], 0);
    for line in &lines[1..] {
        assert_eq!(line["method"], "SendMessage", "{line}");
        assert_eq!(line["code"], code, "{line}");
        assert_eq!(line["backend_status"], "-", "{line}");
    }
    assert_eq!(agent.calls(), 1);

    let agent = hanging_backend();
    let mut args = fronts.to_vec();
    args.extend(["--timeout", "1s"]);
    let (gateway, log) = start(&agent, &args, &[]).await;
    let code = send_on_every_front(&gateway.1).await;
    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    for line in &lines {
        assert_eq!(line["method"], "SendMessage", "{line}");
        assert_eq!(line["code"], code, "{line}");
        assert!(line["duration_us"].as_u64().unwrap() >= 1_000_000, "{line}");
    }
}

/// A gRPC agent that answers each stream with one event, then drops its connection when
/// `die` is notified; its address.
async fn dying_agent(die: std::sync::Arc<tokio::sync::Notify>) -> std::net::SocketAddr {
    use prost::Message as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut connection = h2::server::handshake(tcp).await.unwrap();
            while let Some(Ok((request, mut respond))) = connection.accept().await {
                let response = http::Response::builder()
                    .header("content-type", "application/grpc")
                    .body(())
                    .unwrap();
                if !request.uri().path().ends_with("/SendStreamingMessage") {
                    continue;
                }
                let mut stream = respond.send_response(response, false).unwrap();
                let event = status_update("t-d", TaskState::Working).encode_to_vec();
                let message = harness::hostile::frames::grpc_message(&event);
                stream.send_data(message.into(), false).unwrap();
                // The connection is driven while the agent waits to die.
                tokio::select! {
                    () = die.notified() => break,
                    _ = connection.accept() => {}
                }
                break;
            }
            // Dropping the connection closes its socket: the agent is gone mid-stream.
        }
    });
    addr
}

/// A stream whose agent dies after its first event ends with an error event (gRPC: status)
/// and logs one line with that error's code and both frames, on every front.
#[tokio::test]
async fn a_stream_whose_agent_dies_logs_its_error_on_every_front() {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    let die = std::sync::Arc::new(tokio::sync::Notify::new());
    let addr = dying_agent(die.clone()).await;
    let backend_url = format!("http://{addr}");
    let log = TempFile::new("log", "");
    let file = std::fs::File::create(log.path()).unwrap();
    let args = [
        "--backend",
        &backend_url,
        "--drain-delay",
        "0",
        "--log-format",
        "json",
        "--fronts",
        "JSONRPC,HTTP+JSON,GRPC",
        "--keepalive",
        "1h",
    ];
    let gateway = start_with(&args, &[], Stdio::from(file)).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let stream = request(json!(3), "SendStreamingMessage", message_params("go"));
    let rest_url = format!("{origin}/a2a/rest/message:stream");
    let mut code = None;
    for (url, body) in [
        (&gateway.1, stream),
        (&rest_url, message_params("go").to_string()),
    ] {
        let (_, mut reader) = SseReader::open(url, body).await;
        reader.data().await.unwrap();
        die.notify_one();
        let error = reader.data().await.unwrap();
        assert!(reader.frame().await.is_none(), "the error ends the stream");
        if url == &gateway.1 {
            code = error["error"]["code"].as_i64();
        }
    }
    let mut client = A2aServiceClient::connect(origin).await.unwrap();
    let request = SendMessageRequest {
        message: Some(Message {
            message_id: "m-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut events = client
        .send_streaming_message(request)
        .await
        .unwrap()
        .into_inner();
    events.message().await.unwrap().unwrap();
    die.notify_one();
    events.message().await.unwrap_err();

    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let code = code.expect("a JSON-RPC error event");
    assert!(code < 0, "{code}");
    for line in &lines {
        assert_eq!(line["method"], "SendStreamingMessage", "{line}");
        assert_eq!(line["code"], code, "{line}");
        assert_eq!(line["frames"], 2, "the event and the error: {line}");
        assert_eq!(
            line["backend_status"], "0",
            "the stream started well: {line}"
        );
    }
}

/// The gRPC front logs what it refuses before a call enters the stack as the JSON-RPC front
/// logs the same: a message over the body bytes in flight (`GATEWAY_OVERLOADED`'s code, as a
/// JSON-RPC body over them), and a compressed message (UNIMPLEMENTED, read through the
/// error table as the JSON-RPC code of that status).
#[tokio::test]
async fn the_grpc_front_logs_its_refusals_before_the_stack() {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    let agent = backend();
    let args = [
        "--log-format",
        "json",
        "--fronts",
        "JSONRPC,GRPC",
        "--global-max-body-bytes-in-flight",
        "1000",
    ];
    let (gateway, log) = start(&agent, &args, &[]).await;
    let send = request(json!(1), "SendMessage", message_params(&"x".repeat(2000)));
    let (status, _, reply) = harness::post(&gateway.1, send).await;
    assert_eq!(status, 503, "{reply}");
    let reply: Value = serde_json::from_str(&reply).unwrap();
    let over = reply["error"]["code"].as_i64().unwrap();

    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let mut client = A2aServiceClient::connect(origin).await.unwrap();
    let request = SendMessageRequest {
        message: Some(Message {
            message_id: "x".repeat(1000),
            ..Default::default()
        }),
        ..Default::default()
    };
    let refused = client.send_message(request).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");

    let authority = authority(&gateway.1);
    let tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let head = http::Request::post(format!("http://{authority}/lf.a2a.v1.A2AService/GetTask"))
        .header("content-type", "application/grpc")
        .header("grpc-encoding", "gzip")
        .body(())
        .unwrap();
    let mut client = client.ready().await.unwrap();
    let (response, _) = client.send_request(head, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "12", "UNIMPLEMENTED");

    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(lines[0]["code"], over);
    assert_eq!(lines[1]["path"], "/lf.a2a.v1.A2AService/SendMessage");
    assert_eq!(
        lines[1]["code"], over,
        "as the JSON-RPC front: {}",
        lines[1]
    );
    assert!(
        lines[1]["bytes_in"].as_u64().unwrap() > 1000,
        "{}",
        lines[1]
    );
    assert_eq!(lines[2]["path"], "/lf.a2a.v1.A2AService/GetTask");
    assert_eq!(lines[2]["code"], -32601, "{}", lines[2]);
    assert_eq!(agent.calls(), 0);
}

/// A request whose header fields pass the route's `max-header-size` is refused from its head
/// (431; gRPC: a status) and logged once, with the refusal's code, on every front.
#[tokio::test]
async fn a_head_over_max_header_size_is_logged_on_every_front() {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    let agent = backend();
    let args = [
        "--log-format",
        "json",
        "--fronts",
        "JSONRPC,HTTP+JSON,GRPC",
        "--max-header-size",
        "4KiB",
    ];
    let (gateway, log) = start(&agent, &args, &[]).await;
    let filler = "f".repeat(6000);
    let send = request(json!(1), "SendMessage", message_params("hi"));
    let headers = [("a2a-version", "1.0"), ("x-filler", filler.as_str())];
    let (status, _, reply) = harness::post_with(&gateway.1, send, &headers).await;
    assert_eq!(status, 431, "{reply}");
    let reply: Value = serde_json::from_str(&reply).unwrap();
    let code = reply["error"]["code"].as_i64().unwrap();

    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let rest = harness::client()
        .post(format!("{origin}/a2a/rest/message:send"))
        .header("content-type", "application/json")
        .header("x-filler", &filler)
        .body(message_params("hi").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 431);

    let mut client = A2aServiceClient::connect(origin).await.unwrap();
    let mut request = tonic::Request::new(SendMessageRequest::default());
    request
        .metadata_mut()
        .insert("x-filler", filler.parse().unwrap());
    client.send_message(request).await.unwrap_err();

    let lines = access_lines(&stop(gateway, &log).await);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let paths = [
        "/a2a/jsonrpc",
        "/a2a/rest/message:send",
        "/lf.a2a.v1.A2AService/SendMessage",
    ];
    for (line, path) in lines.iter().zip(paths) {
        assert_eq!(line["path"], path, "{line}");
        assert_eq!(line["code"], code, "{line}");
        assert_eq!(line["method"], "", "refused from the head: {line}");
    }
    assert_eq!(agent.calls(), 0);
}

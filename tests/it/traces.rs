//! Traces on the wire: the gateway binary exports its spans to an in-process OTLP receiver
//! (`otlp`), over gRPC and over http/protobuf, configured by the standard `OTEL_*`
//! variables or by flags. One server span per call (JSON-RPC or HTTP+JSON), one client
//! span per backend call; the client's trace is continued and the backend gets the
//! gateway's client span as its parent; spans still buffered are exported at SIGTERM.

use crate::harness;
use crate::harness::otlp;
use crate::harness::rest_mock;

use std::process::Stdio;
use std::time::Duration;

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use harness::process::{start_with, Running};
use harness::process::{OutputWithin, EXITS_WITHIN};
use harness::{message_params, request, status_update, task, Answer, SseReader, Step, TestBackend};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use otlp::{attr, hex, Collector, Received};
use serde_json::json;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// The client's context: the gateway's server span must be its child.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A backend answering SendMessage with a completed task, SendStreamingMessage with three
/// events, and GetTask with NOT_FOUND.
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
        Request::Stream(StreamRequest::SendStreamingMessage(_)) => Answer::Stream(vec![
            Step::Event(status_update("t-2", TaskState::Submitted)),
            Step::Event(status_update("t-2", TaskState::Working)),
            Step::Event(status_update("t-2", TaskState::Completed)),
        ]),
        _ => Answer::Error(tonic::Status::not_found("no such task")),
    })
}

/// Posts `body` with the client's trace context; returns the JSON reply.
async fn call(url: &str, body: &str, traceparent: Option<&str>) -> serde_json::Value {
    let mut headers = vec![("a2a-version", "1.0")];
    if let Some(traceparent) = traceparent {
        headers.push(("traceparent", traceparent));
        headers.push(("tracestate", "vendor=x"));
    }
    let (status, _, text) = harness::post_with(url, body.to_owned(), &headers).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// Opens a stream and reads it to its end; returns the number of events.
async fn stream_to_end(url: &str) -> usize {
    let body = request(json!(7), "SendStreamingMessage", message_params("go"));
    let (_, mut reader) = SseReader::open(url, body).await;
    let mut events = 0;
    while reader.data().await.is_some() {
        events += 1;
    }
    events
}

/// Stops the gateway the way Kubernetes does and waits for it to exit.
async fn terminate(gateway: &mut Running) {
    gateway.terminate();
    let status = gateway
        .exit_within(
            Duration::from_secs(10),
            "the gateway did not stop after SIGTERM",
        )
        .await;
    assert!(status.success(), "{status}");
}

fn find<'a>(spans: &'a [Received], kind: SpanKind, name: &str) -> Vec<&'a Received> {
    spans
        .iter()
        .filter(|s| s.span.kind == kind as i32 && s.span.name == name)
        .collect()
}

fn one<'a>(spans: &'a [Received], kind: SpanKind, name: &str) -> &'a Received {
    let found = find(spans, kind, name);
    assert_eq!(found.len(), 1, "one {kind:?} span {name:?} in {spans:#?}");
    found[0]
}

fn assert_attrs(span: &Received, expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(
            attr(&span.span, key).as_deref(),
            Some(*value),
            "{key} of {:?}: {:#?}",
            span.span.name,
            span.span.attributes
        );
    }
}

/// The `traceparent` the backend got: (trace id, parent span id).
fn parent_seen(metadata: &tonic::metadata::MetadataMap) -> (String, String) {
    let value = metadata
        .get("traceparent")
        .expect("the backend got a traceparent")
        .to_str()
        .unwrap();
    let parts: Vec<&str> = value.split('-').collect();
    (parts[1].to_owned(), parts[2].to_owned())
}

#[tokio::test]
async fn grpc_export_of_unary_and_stream_spans_flushed_at_sigterm() {
    let (collector, endpoint) = Collector::grpc().await;
    let agent = backend();
    let addr = agent.spawn().await;
    let backend_url = format!("http://{addr}");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_SERVICE_NAME", "edge-under-test"),
        // No periodic export during the test: what arrives was flushed at shutdown.
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
    ];
    let args = [
        "--backend",
        &backend_url,
        "--tenant",
        "acme",
        "--drain-delay",
        "0",
        "--workers",
        "1",
    ];
    let mut gateway = start_with(&args, &env, Stdio::null()).await;
    let url = gateway.1.clone();

    let send = request(json!(1), "SendMessage", message_params("hi"));
    let reply = call(&url, &send, Some(TRACEPARENT)).await;
    assert_eq!(reply["result"]["task"]["id"], "t-1", "{reply}");
    let unary_seen = agent.last().metadata;
    assert_eq!(stream_to_end(&url).await, 3);
    let get = request(json!(2), "GetTask", json!({"id": "t-9"}));
    let reply = call(&url, &get, Some(TRACEPARENT)).await;
    assert_eq!(reply["error"]["code"], -32001, "{reply}");

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        collector.spans().is_empty(),
        "the batch is only exported at shutdown here"
    );
    terminate(&mut gateway).await;
    let spans = collector.wait_for(6, Duration::from_secs(5)).await;
    assert_eq!(spans.len(), 6, "3 calls, 2 spans each: {spans:#?}");
    assert!(spans.iter().all(|s| s.service == "edge-under-test"));

    // The unary call: the client's trace continued, the backend under the client span.
    let server = one(&spans, SpanKind::Server, "SendMessage");
    assert_eq!(hex(&server.span.trace_id), TRACE_ID);
    assert_eq!(hex(&server.span.parent_span_id), CLIENT_SPAN);
    assert_attrs(
        server,
        &[
            ("a2a.method.name", "SendMessage"),
            ("a2a.protocol.version", "1.0"),
            ("a2a.protocol.binding", "JSONRPC"),
            ("a2a.tenant", "acme"),
            ("a2a.message.id", "m-1"),
            ("a2a.task.id", "t-1"),
            ("a2a.task.state", "TASK_STATE_COMPLETED"),
            ("rpc.system", "jsonrpc"),
            ("rpc.method", "SendMessage"),
            ("rpc.jsonrpc.request_id", "1"),
            ("http.request.method", "POST"),
            ("url.path", "/a2a/jsonrpc"),
            ("client.address", "127.0.0.1"),
        ],
    );
    let client = one(&spans, SpanKind::Client, "lf.a2a.v1.A2AService/SendMessage");
    assert_eq!(hex(&client.span.trace_id), TRACE_ID);
    assert_eq!(client.span.parent_span_id, server.span.span_id);
    assert_attrs(
        client,
        &[
            ("a2a.method.name", "SendMessage"),
            ("a2a.protocol.binding", "GRPC"),
            ("rpc.system", "grpc"),
            ("rpc.service", "lf.a2a.v1.A2AService"),
            ("rpc.method", "SendMessage"),
            ("rpc.grpc.status_code", "0"),
            ("server.address", "127.0.0.1"),
            ("server.port", &addr.port().to_string()),
        ],
    );
    let (trace_id, parent) = parent_seen(&unary_seen);
    assert_eq!(trace_id, TRACE_ID, "the agent joins the client's trace");
    assert_eq!(
        parent,
        hex(&client.span.span_id),
        "under the gateway's client span"
    );
    assert_eq!(unary_seen.get("tracestate").unwrap(), "vendor=x");

    // The stream: a new trace (no traceparent), ended with its frames counted.
    let server = one(&spans, SpanKind::Server, "SendStreamingMessage");
    assert!(server.span.parent_span_id.is_empty());
    assert_attrs(
        server,
        &[
            ("a2a.stream.frames_sent", "3"),
            ("a2a.task.id", "t-2"),
            ("a2a.task.state", "TASK_STATE_COMPLETED"),
        ],
    );
    let client = one(
        &spans,
        SpanKind::Client,
        "lf.a2a.v1.A2AService/SendStreamingMessage",
    );
    assert_eq!(client.span.parent_span_id, server.span.span_id);
    assert_eq!(client.span.events.len(), 3, "one event per received frame");
    assert!(server.span.end_time_unix_nano >= client.span.end_time_unix_nano);

    // The failed call: its JSON-RPC code as the status.
    let server = one(&spans, SpanKind::Server, "GetTask");
    assert_attrs(
        server,
        &[("rpc.jsonrpc.error_code", "-32001"), ("a2a.task.id", "t-9")],
    );
    let status = server.span.status.as_ref().unwrap();
    assert_eq!(status.code, 2, "ERROR");
    assert!(status.message.starts_with("-32001"), "{}", status.message);
    let client = one(&spans, SpanKind::Client, "lf.a2a.v1.A2AService/GetTask");
    assert_attrs(client, &[("rpc.grpc.status_code", "5")]);
}

#[tokio::test]
async fn http_protobuf_export_by_flags_with_a_rest_agent() {
    let (collector, endpoint) = Collector::http().await;
    let agent = rest_mock::MockAgent::start(|r| {
        if r.path.ends_with(":stream") {
            let events = ["SUBMITTED", "COMPLETED"].map(|state| {
                format!("data: {{\"statusUpdate\":{{\"taskId\":\"t-3\",\"status\":{{\"state\":\"TASK_STATE_{state}\"}}}}}}\n\n")
                    .into_bytes()
            });
            rest_mock::sse_chunks(events.to_vec())
        } else {
            rest_mock::ok_json(r#"{"task":{"id":"t-4","status":{"state":"TASK_STATE_WORKING"}}}"#)
        }
    })
    .await;
    let args = [
        "--binding",
        "HTTP+JSON",
        "--backend",
        &agent.url,
        "--otlp-endpoint",
        &endpoint,
        "--otlp-protocol",
        "http/protobuf",
        "--drain-delay",
        "0",
    ];
    // The flags win over the variables.
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
    ];
    let mut gateway = start_with(&args, &env, Stdio::null()).await;
    let url = gateway.1.clone();
    let send = request(json!("a"), "SendMessage", message_params("hi"));
    let reply = call(&url, &send, None).await;
    assert_eq!(reply["result"]["task"]["id"], "t-4", "{reply}");
    assert_eq!(stream_to_end(&url).await, 2);
    terminate(&mut gateway).await;
    let spans = collector.wait_for(4, Duration::from_secs(5)).await;
    assert_eq!(spans.len(), 4, "{spans:#?}");
    assert!(spans.iter().all(|s| s.service == "a2a-gateway"));

    let server = one(&spans, SpanKind::Server, "SendMessage");
    assert!(server.span.parent_span_id.is_empty(), "a new trace");
    assert_attrs(
        server,
        &[
            ("a2a.task.id", "t-4"),
            ("a2a.task.state", "TASK_STATE_WORKING"),
            ("rpc.jsonrpc.request_id", "a"),
        ],
    );
    let client = one(&spans, SpanKind::Client, "POST /message:send");
    assert_eq!(client.span.parent_span_id, server.span.span_id);
    assert_attrs(
        client,
        &[
            ("a2a.protocol.binding", "HTTP+JSON"),
            ("http.request.method", "POST"),
            ("url.template", "/message:send"),
            ("http.response.status_code", "200"),
            ("server.address", "127.0.0.1"),
        ],
    );
    let requests = agent.requests();
    let sent = requests
        .iter()
        .find(|r| r.path.ends_with("/message:send"))
        .unwrap();
    let traceparent = sent.header("traceparent").expect("traceparent sent");
    assert_eq!(
        traceparent,
        format!(
            "00-{}-{}-01",
            hex(&client.span.trace_id),
            hex(&client.span.span_id)
        )
    );

    let server = one(&spans, SpanKind::Server, "SendStreamingMessage");
    assert_attrs(
        server,
        &[
            ("a2a.stream.frames_sent", "2"),
            ("a2a.task.state", "TASK_STATE_COMPLETED"),
        ],
    );
    let client = one(&spans, SpanKind::Client, "POST /message:stream");
    assert_eq!(client.span.parent_span_id, server.span.span_id);
}

#[tokio::test]
async fn without_configuration_the_client_traceparent_is_forwarded_as_is() {
    let agent = backend();
    let addr = agent.spawn().await;
    let backend_url = format!("http://{addr}");
    let env = [("OTEL_TRACES_SAMPLER", "always_on")];
    let gateway = start_with(&["--backend", &backend_url], &env, Stdio::null()).await;
    let send = request(json!(1), "SendMessage", message_params("hi"));
    call(&gateway.1, &send, Some(TRACEPARENT)).await;
    let seen = agent.last().metadata;
    assert_eq!(seen.get("traceparent").unwrap(), TRACEPARENT);
    assert_eq!(seen.get("tracestate").unwrap(), "vendor=x");
}

#[tokio::test]
async fn sampled_out_traces_export_nothing_but_still_propagate() {
    let (collector, endpoint) = Collector::grpc().await;
    let agent = backend();
    let addr = agent.spawn().await;
    let backend_url = format!("http://{addr}");
    let args = [
        "--backend",
        &backend_url,
        "--otlp-endpoint",
        &endpoint,
        "--otlp-protocol",
        "grpc",
        "--trace-sampler",
        "always_off",
        "--drain-delay",
        "0",
    ];
    let mut gateway = start_with(&args, &[], Stdio::null()).await;
    let send = request(json!(1), "SendMessage", message_params("hi"));
    call(&gateway.1, &send, Some(TRACEPARENT)).await;
    let (trace_id, parent) = parent_seen(&agent.last().metadata);
    assert_eq!(trace_id, TRACE_ID, "the trace still reaches the agent");
    assert_ne!(parent, CLIENT_SPAN);
    terminate(&mut gateway).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(collector.spans().is_empty(), "{:#?}", collector.spans());
}

#[tokio::test]
async fn bad_trace_settings_stop_the_start_naming_their_source() {
    /// Flags, environment, and the name the error must give.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (
            &[],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ],
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        (
            &["--otlp-endpoint", "collector:4317"],
            &[],
            "--otlp-endpoint",
        ),
        (
            &[
                "--otlp-endpoint",
                "http://127.0.0.1:4318",
                "--trace-sampler",
                "often",
            ],
            &[],
            "--trace-sampler",
        ),
    ];
    for (args, env, named) in cases {
        let output = std::process::Command::new(harness::process::BIN)
            .args(["--backend", "http://127.0.0.1:1"])
            .args(*args)
            .envs(env.iter().copied())
            .output_within(EXITS_WITHIN);
        assert_eq!(output.status.code(), Some(2), "{args:?} {env:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(named), "{named} in {stderr}");
    }
}

#[tokio::test]
async fn trace_settings_from_the_config_file() {
    let (collector, endpoint) = Collector::grpc().await;
    let agent = backend();
    let addr = agent.spawn().await;
    let config = harness::process::TempFile::new(
        "toml",
        &format!(
            "backend = \"http://{addr}\"\notlp-endpoint = \"{endpoint}\"\notlp-protocol = \"grpc\"\ntrace-sampler = \"parentbased_traceidratio\"\ntrace-sampler-arg = 1.0\n"
        ),
    );
    let args = ["--config", config.path(), "--drain-delay", "0"];
    let mut gateway = start_with(&args, &[], Stdio::null()).await;
    let send = request(json!(1), "SendMessage", message_params("hi"));
    call(&gateway.1, &send, Some(TRACEPARENT)).await;
    terminate(&mut gateway).await;
    let spans = collector.wait_for(2, Duration::from_secs(5)).await;
    let server = one(&spans, SpanKind::Server, "SendMessage");
    assert_eq!(hex(&server.span.trace_id), TRACE_ID);

    let bad = harness::process::TempFile::new(
        "toml",
        &format!("backend = \"http://{addr}\"\notlp-endpoint = \"{endpoint}\"\ntrace-sampler = \"traceidratio\"\ntrace-sampler-arg = 1.5\n"),
    );
    let output = std::process::Command::new(harness::process::BIN)
        .args(["check-config", bad.path()])
        .output_within(EXITS_WITHIN);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--trace-sampler-arg"), "{stderr}");
}

/// A call through the HTTP+JSON front: its server span names that front (binding, the
/// operation's path template, the HTTP method, the HTTP status of a failure) and carries
/// no JSON-RPC attributes; the client's trace is continued as on the JSON-RPC front.
#[tokio::test]
async fn the_http_json_front_names_itself_in_the_server_span() {
    let (collector, endpoint) = Collector::grpc().await;
    let agent = backend();
    let addr = agent.spawn().await;
    let backend_url = format!("http://{addr}");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
    ];
    let args = [
        "--backend",
        &backend_url,
        "--fronts",
        "HTTP+JSON",
        "--drain-delay",
        "0",
    ];
    let mut gateway = start_with(&args, &env, Stdio::null()).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let response = harness::client()
        .get(format!("{origin}/a2a/rest/tasks/t-9"))
        .header("a2a-version", "1.0")
        .header("traceparent", TRACEPARENT)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    terminate(&mut gateway).await;
    let spans = collector.wait_for(2, Duration::from_secs(5)).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let server = one(&spans, SpanKind::Server, "GetTask");
    assert_eq!(hex(&server.span.trace_id), TRACE_ID);
    assert_eq!(hex(&server.span.parent_span_id), CLIENT_SPAN);
    assert_attrs(
        server,
        &[
            ("a2a.method.name", "GetTask"),
            ("a2a.protocol.binding", "HTTP+JSON"),
            ("url.template", "/tasks/{id}"),
            ("http.request.method", "GET"),
            ("url.path", "/a2a/rest/tasks/t-9"),
            ("http.response.status_code", "404"),
        ],
    );
    for absent in [
        "rpc.system",
        "rpc.jsonrpc.request_id",
        "rpc.jsonrpc.error_code",
    ] {
        assert_eq!(attr(&server.span, absent), None, "{absent}");
    }
}

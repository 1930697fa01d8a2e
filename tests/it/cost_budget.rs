//! Cost budget of the request path: heap allocations (count and bytes) per unary request
//! and per stream frame through the JSON-RPC front (and per unary request through the
//! HTTP+JSON front), counted by the global allocator.
//!
//! The router, inside the edge stack every connection serves, is driven in-process
//! (`tower::ServiceExt::oneshot`) on a current-thread runtime in front of a stub backend that answers at once, so the counts are exact and
//! the same on every run and machine: no timing is involved. One budget covers the real
//! gRPC client too, against an in-process tonic backend (both sides counted). The budgets below are the
//! measured counts plus small headroom; a change that adds real per-request work (a
//! `serde_json::Value` detour, a per-request client, an extra copy of the body) breaks
//! them. When a change lowers the counts, lower the budgets with it (the test prints the
//! measured values). The throughput side is measured by `benches/overhead.rs`.

use crate::harness;

use std::alloc::System;
use std::sync::Arc;

use a2a_gateway::backend::{Answer, Backend, Call, Error, EventStream, Status};
use a2a_gateway::proto::{
    part, send_message_response, stream_response, Artifact, Message, Part, Role,
    SendMessageResponse, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent,
    Timestamp,
};
use a2a_gateway::protocol::error::{A2aError, ErrorKind};
use a2a_gateway::protocol::ops::{Reply, StreamRequest, UnaryRequest};
use axum::body::Body;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http_body_util::BodyExt;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tower::ServiceExt;

use crate::harness::own_process::in_own_process;

// The allocator of the whole test binary: every test's allocations are counted, and the
// budget test runs in a process of its own (`harness::own_process`), where they are its own.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations per request (or frame) and bytes allocated per request: the budget.
struct Budget {
    what: &'static str,
    allocations: f64,
    bytes: f64,
}

// Measured (see the test's output) plus headroom of about 15 % and a few allocations.
//
// The requests go through the edge stack (`front::layers`), which costs 9 allocations
// (about 800 bytes) per request of the 13 → 22 of a small SendMessage: SetRequestId 4
// (the generated id, 1; the `RequestId` request extension, 3: extensions map, its table,
// the boxed value), the forward policy's list now holding that id 1, PropagateRequestId 3
// (the same extension on the response), CatchPanic 1 (it boxes the response body again).
// The sensitive-header layers and the trace layer (span disabled) allocate nothing.
// Params the envelope's scan decodes are boxed until the call takes them (about 540 bytes,
// one allocation, so the envelope stays small; the scan saves a pass over the params).
// The reply's buffer has room for sonic-rs's reservation of 6 × a string's length
// (worst-case escaping) from the start (`Reply::json_capacity`), so it never grows and is
// copied: reserved address space, of which only the written part is touched.
// Issue 20 raised the bytes (6,496 -> 7,096 for this call): the per-call state carries
// the body charge and the batch bounds (+~560 B); the push guard's resolver future is
// boxed and built only for calls that carry a push URL.
// Issue 21 (the call as a stack) lowered them (7,080 -> 5,784 bytes; GetTask 8,949 ->
// 7,653): the handler's future went from 3,080 to 1,784 bytes, as the request travels the
// layers boxed and the envelope is consumed before the call's future exists.
const SEND_SMALL: Budget = Budget {
    what: "unary SendMessage, 200 B",
    allocations: 25.0,
    bytes: 6000.0,
};
const SEND_16K: Budget = Budget {
    what: "unary SendMessage, 16 KiB",
    allocations: 25.0,
    bytes: 160000.0,
};
const GET_TASK: Budget = Budget {
    what: "unary GetTask",
    allocations: 42.0,
    bytes: 7900.0,
};
const SEND_SMALL_GRPC: Budget = Budget {
    what: "SendMessage, 200 B, over gRPC",
    // Both sides of the socket: about 22 of these are the front's (edge stack included),
    // the rest the h2 client's and the tonic backend's (which now also receives the
    // generated x-request-id). Measured 81.3 allocations, 42.3 kB with the h2 client (the
    // own HTTP/2 client it replaced: 92 with the edge stack, 41.8 kB). Varies by ±0.3
    // with how reads split frames.
    allocations: 94.0,
    bytes: 48000.0,
};
const SEND_SMALL_GRPC_FRONT: Budget = Budget {
    what: "SendMessage, gRPC front",
    // The same call as `SEND_SMALL` through the gRPC front: the same stack, tonic's framing
    // and a protobuf reply with trailers. Measured 26 allocations, 5,921 bytes (22 and
    // 5,992 for JSON-RPC). The 4 more allocations are tonic's framing: its reader (the
    // boxed body, the message's buffer), its writer (the framed reply's buffer and the
    // shared handle it splits off) and the trailers (a `Status` and their header map),
    // less what JSON-RPC's envelope costs; the handler's future is smaller (it holds the
    // request's head once). Through `tonic::server::Grpc` it was 33 allocations, 9,543
    // bytes (a copy of the head, the body boxed twice, a boxed decoder, 1 KiB buffers each
    // way, the message copied out of the read buffer before decoding).
    allocations: 28.0,
    bytes: 6100.0,
};
// The HTTP+JSON front against the JSON-RPC front's figures (issue 24 asks for no more per
// call). Measured: SendMessage 21 allocations, 5,820 bytes (JSON-RPC: 22, 5,992; the
// body is the params, decoded by the `decode` layer instead of the envelope's scan, and
// the handler's future holds the request's head once); GetTask 40 allocations, 7,803
// bytes (JSON-RPC: 38, 7,861; the id is copied out of the path and the params text is
// written, where JSON-RPC borrows both from the body). Before: 22 and 6,212, 40 and
// 8,155 (room for two path parameters on every call, and the request held twice).
const REST_SEND_SMALL: Budget = Budget {
    what: "HTTP+JSON SendMessage, 200 B",
    allocations: 24.0,
    bytes: 5900.0,
};
const REST_GET_TASK: Budget = Budget {
    what: "HTTP+JSON GetTask",
    allocations: 43.0,
    bytes: 7900.0,
};
const STREAM_FRAME: Budget = Budget {
    what: "one SSE frame of a stream",
    allocations: 2.5,
    bytes: 520.0,
};

/// The bytes one open SSE stream holds in the gateway over HTTP/1.1 (its connection, its
/// call, its body), with the client's socket in this process, net of what was freed once
/// the stream's first event arrived. Measured (this debug build; futures are smaller in
/// release): 25,729 bytes in 20 allocations, most of it hyper's 8 KiB read and write
/// buffers. It was 43,145 bytes in 22 while hyper-util's protocol detection served
/// cleartext connections: it hands hyper the first bytes as a read of their own, hyper
/// grew its read buffer to 16 KiB, and the connection's task was sized for HTTP/2's state
/// too (benches/README.md, "fan-in").
const HELD_PER_STREAM: Budget = Budget {
    what: "held by an open SSE stream",
    allocations: 23.0,
    bytes: 29_500.0,
};

/// The text of a SendStreamingMessage whose stream sends one event and stays open.
const HOLD: &str = "stream:hold";

/// Answers at once: SendMessage echoes the message, GetTask returns a fixed task,
/// SendStreamingMessage streams `stream:N` status updates (`HOLD`: one, then stays open).
struct Stub {
    task: Task,
    event: StreamResponse,
}

fn text_part(text: &str) -> Part {
    Part {
        content: Some(part::Content::Text(text.to_owned())),
        ..Part::default()
    }
}

fn first_text(message: &Message) -> &str {
    message
        .parts
        .iter()
        .find_map(|p| match &p.content {
            Some(part::Content::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The stub's answer to operations it does not serve, as an agent would give it.
fn unsupported() -> Error {
    let error = A2aError::new(ErrorKind::MethodNotFound);
    Error::agent(error, Status::Grpc(tonic::Code::Unimplemented))
}

impl Backend for Stub {
    fn unary(&self, call: Call<UnaryRequest>) -> BoxFuture<'static, Result<Answer<Reply>, Error>> {
        let reply = match call.request {
            UnaryRequest::SendMessage(request) => {
                let mut message = request.message.unwrap_or_default();
                message.role = Role::Agent as i32;
                Ok(Reply::SendMessage(SendMessageResponse {
                    payload: Some(send_message_response::Payload::Message(message)),
                }))
            }
            UnaryRequest::GetTask(_) => Ok(Reply::GetTask(self.task.clone())),
            _ => Err(unsupported()),
        };
        let answer = reply.map(|value| Answer {
            value,
            status: Some(Status::Grpc(tonic::Code::Ok)),
            extensions: None,
        });
        std::future::ready(answer).boxed()
    }

    fn stream(
        &self,
        call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>> {
        let StreamRequest::SendStreamingMessage(request) = call.request else {
            return std::future::ready(Err(unsupported())).boxed();
        };
        let text = first_text(&request.message.unwrap_or_default()).to_owned();
        let event = self.event.clone();
        if text == HOLD {
            // One event, then the stream stays open.
            let events = futures::stream::iter([Ok(event)]).chain(futures::stream::pending());
            return std::future::ready(Ok(Answer {
                value: events.boxed(),
                status: Some(Status::Grpc(tonic::Code::Ok)),
                extensions: None,
            }))
            .boxed();
        }
        let frames: usize = text
            .strip_prefix("stream:")
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        let events = futures::stream::iter((0..frames).map(move |_| Ok(event.clone()))).boxed();
        std::future::ready(Ok(Answer {
            value: events,
            status: Some(Status::Grpc(tonic::Code::Ok)),
            extensions: None,
        }))
        .boxed()
    }
}

fn stub() -> Stub {
    let timestamp = Some(Timestamp {
        seconds: 1_767_225_600,
        nanos: 250_000_000,
    });
    let message = |id: &str, role: Role, text: &str| Message {
        message_id: id.to_owned(),
        context_id: "ctx-1".to_owned(),
        task_id: "task-1".to_owned(),
        role: role as i32,
        parts: vec![text_part(text)],
        ..Message::default()
    };
    let task = Task {
        id: "task-1".to_owned(),
        context_id: "ctx-1".to_owned(),
        status: Some(TaskStatus {
            state: TaskState::Completed as i32,
            message: None,
            timestamp,
        }),
        artifacts: vec![Artifact {
            artifact_id: "a-1".to_owned(),
            name: "result".to_owned(),
            parts: vec![text_part(&"r".repeat(120))],
            ..Artifact::default()
        }],
        history: vec![
            message("m-1", Role::User, "summarise the quarterly report"),
            message("m-2", Role::Agent, "working on it"),
        ],
        metadata: None,
    };
    let event = StreamResponse {
        payload: Some(stream_response::Payload::StatusUpdate(
            TaskStatusUpdateEvent {
                task_id: "task-stream".to_owned(),
                context_id: "ctx-stream".to_owned(),
                status: Some(TaskStatus {
                    state: TaskState::Working as i32,
                    message: None,
                    timestamp,
                }),
                metadata: None,
            },
        )),
    };
    Stub { task, event }
}

/// The routes inside the edge stack, as every connection serves them.
type Edge = a2a_gateway::front::layers::Edge<a2a_gateway::server::Frontend>;

fn router() -> Edge {
    let gateway = a2a_gateway::route::handler_over(
        &harness::route_settings(&["--push", "pass"]),
        Arc::new(stub()),
        Default::default(),
    )
    .unwrap();
    a2a_gateway::front::layers::stack(
        a2a_gateway::server::router(gateway, "/a2a/jsonrpc"),
        a2a_gateway::protocol::params::sensitive_names(&[]),
    )
}

/// The router in front of the real gRPC client (on h2, over `http://`) and an in-process
/// tonic backend that echoes. The count covers both sides of
/// the socket, the backend's (tonic, and the test backend's record of each call) too.
async fn grpc_router() -> Edge {
    let backend = harness::TestBackend::new(harness::echo_message);
    let addr = backend.spawn().await;
    let grpc = a2a_gateway::backend::grpc::GrpcBackend::new(
        &format!("http://{addr}"),
        &Default::default(),
        None,
    )
    .unwrap();
    let gateway = a2a_gateway::route::handler_over(
        &harness::route_settings(&["--push", "pass"]),
        Arc::new(grpc),
        Default::default(),
    )
    .unwrap();
    a2a_gateway::front::layers::stack(
        a2a_gateway::server::router(gateway, "/a2a/jsonrpc"),
        a2a_gateway::protocol::params::sensitive_names(&[]),
    )
}

/// The stub's route serving only the HTTP+JSON front at `/a2a/rest`, inside the edge stack.
fn rest_router() -> Edge {
    let gateway = a2a_gateway::route::handler_over(
        &harness::route_settings(&["--push", "pass"]),
        Arc::new(stub()),
        Default::default(),
    )
    .unwrap();
    let route = a2a_gateway::server::routing::ServedRoute {
        name: "default".to_owned(),
        prefix: String::new(),
        host: None,
        jsonrpc_path: None,
        rest_path: Some("/a2a/rest".to_owned()),
        grpc: false,
        endpoints: None,
        gateway: gateway.clone(),
    };
    let (metrics, lifecycle) = (gateway.metrics.clone(), gateway.lifecycle.clone());
    a2a_gateway::front::layers::stack(
        a2a_gateway::server::Frontend::new(vec![route], metrics, lifecycle),
        a2a_gateway::protocol::params::sensitive_names(&[]),
    )
}

/// An HTTP+JSON request: `POST` of `body` to `path`, or `GET` of `path` without one.
fn rest_request(path: &str, body: Option<&str>) -> http::Request<Body> {
    let request = match body {
        Some(_) => http::Request::post(path).header("content-type", "application/a2a+json"),
        None => http::Request::get(path),
    };
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_owned()));
    request.header("a2a-version", "1.0").body(body).unwrap()
}

fn send_body(text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m-1","role":"ROLE_USER","parts":[{{"text":"{text}"}}]}}}}}}"#
    )
}

fn stream_body(frames: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{{"message":{{"messageId":"m-1","role":"ROLE_USER","parts":[{{"text":"stream:{frames}"}}]}}}}}}"#
    )
}

const GET_TASK_BODY: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-1"}}"#;

/// The router of `router` with the gRPC front on too.
fn grpc_front_router() -> Edge {
    let settings = harness::route_settings(&["--push", "pass", "--fronts", "JSONRPC,GRPC"]);
    let gateway =
        a2a_gateway::route::handler_over(&settings, Arc::new(stub()), Default::default()).unwrap();
    a2a_gateway::front::layers::stack(
        a2a_gateway::route::frontend(&settings, gateway),
        a2a_gateway::protocol::params::sensitive_names(&[]),
    )
}

/// The gRPC front's SendMessage of the same message as `send_body(text)`: HTTP/2, one
/// length-prefixed protobuf message (gRPC over HTTP/2, "Length-Prefixed-Message").
fn grpc_send(text: &str) -> http::Request<Body> {
    use prost::Message as _;
    let send = a2a_gateway::proto::SendMessageRequest {
        message: Some(Message {
            message_id: "m-1".to_owned(),
            role: Role::User as i32,
            parts: vec![text_part(text)],
            ..Message::default()
        }),
        ..Default::default()
    };
    let message = send.encode_to_vec();
    let mut framed = vec![0];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let mut request = http::Request::post("/lf.a2a.v1.A2AService/SendMessage")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::from(framed))
        .unwrap();
    *request.version_mut() = http::Version::HTTP_2;
    request
}

fn http_request(body: &str) -> http::Request<Body> {
    http::Request::post("/a2a/jsonrpc")
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(Body::from(body.to_owned()))
        .unwrap()
}

/// (allocations, bytes allocated) per call over `calls` calls of `body`. The requests are
/// built before counting starts; the count covers routing, decoding, the backend call,
/// encoding and reading the whole response body.
async fn cost(router: &Edge, body: &str, calls: usize, expect: &str) -> (f64, f64) {
    cost_of(router, || http_request(body), calls, expect).await
}

/// `cost` of the requests `request` makes.
async fn cost_of(
    router: &Edge,
    request: impl Fn() -> http::Request<Body>,
    calls: usize,
    expect: &str,
) -> (f64, f64) {
    let requests: Vec<_> = (0..calls).map(|_| request()).collect();
    let region = Region::new(GLOBAL);
    for request in requests {
        let response = router.clone().oneshot(request).await.unwrap();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert!(
            memchr_find(&bytes, expect.as_bytes()),
            "unexpected reply: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        );
    }
    let change = region.change();
    (
        change.allocations as f64 / calls as f64,
        change.bytes_allocated as f64 / calls as f64,
    )
}

fn memchr_find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn check(budget: &Budget, (allocations, bytes): (f64, f64), failures: &mut Vec<String>) {
    println!(
        "{:<28} {allocations:>8.2} allocations (budget {:>6.1}), {bytes:>9.0} bytes (budget {:>8.0})",
        budget.what, budget.allocations, budget.bytes
    );
    if allocations > budget.allocations {
        failures.push(format!(
            "{}: {allocations:.2} allocations per call > budget {}",
            budget.what, budget.allocations
        ));
    }
    if bytes > budget.bytes {
        failures.push(format!(
            "{}: {bytes:.0} bytes allocated per call > budget {}",
            budget.what, budget.bytes
        ));
    }
}

/// Runs `test` (this module's test of that name) in a process of its own, where the
/// global counters see no other test's work, on a current-thread runtime.
fn in_own_runtime(test: &str, body: impl std::future::Future<Output = ()>) {
    if !in_own_process(module_path!(), test, &[]) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(body);
}

/// One test in a process of its own: the global counters see no other test's work.
#[test]
fn allocations_per_request_and_per_frame_stay_within_budget() {
    in_own_runtime(
        "allocations_per_request_and_per_frame_stay_within_budget",
        async {
            let router = router();
            let small = send_body(&"x".repeat(76));
            let large = send_body(&"x".repeat(16 * 1024 - 124));
            let short_stream = stream_body(10);
            let long_stream = stream_body(1010);
            // Warm-up: lazily initialised statics, timer wheel and buffers settle first.
            for body in [&small, &large, GET_TASK_BODY, &short_stream, &long_stream] {
                cost(&router, body, 20, "\"result\"").await;
            }

            let mut failures = Vec::new();
            check(
                &SEND_SMALL,
                cost(&router, &small, 200, "\"result\"").await,
                &mut failures,
            );
            check(
                &SEND_16K,
                cost(&router, &large, 200, "\"result\"").await,
                &mut failures,
            );
            check(
                &GET_TASK,
                cost(&router, GET_TASK_BODY, 200, "task-1").await,
                &mut failures,
            );
            let grpc = grpc_router().await;
            cost(&grpc, &small, 20, "\"result\"").await;
            check(
                &SEND_SMALL_GRPC,
                cost(&grpc, &small, 200, "\"result\"").await,
                &mut failures,
            );
            let grpc_front = grpc_front_router();
            let text = "x".repeat(76);
            cost_of(&grpc_front, || grpc_send(&text), 20, &text).await;
            check(
                &SEND_SMALL_GRPC_FRONT,
                cost_of(&grpc_front, || grpc_send(&text), 200, &text).await,
                &mut failures,
            );
            let rest = rest_router();
            // The same message as `small`, as the HTTP+JSON body (the params alone).
            let params = &small[small.find("{\"message\"").unwrap()..small.len() - 1];
            let send = || rest_request("/a2a/rest/message:send", Some(params));
            let get = || rest_request("/a2a/rest/tasks/task-1", None);
            cost_of(&rest, send, 20, "\"message\"").await;
            cost_of(&rest, get, 20, "task-1").await;
            check(
                &REST_SEND_SMALL,
                cost_of(&rest, send, 200, "\"message\"").await,
                &mut failures,
            );
            check(
                &REST_GET_TASK,
                cost_of(&rest, get, 200, "task-1").await,
                &mut failures,
            );
            let short = cost(&router, &short_stream, 50, "statusUpdate").await;
            let long = cost(&router, &long_stream, 50, "statusUpdate").await;
            let per_frame = ((long.0 - short.0) / 1000.0, (long.1 - short.1) / 1000.0);
            check(&STREAM_FRAME, per_frame, &mut failures);
            assert!(failures.is_empty(), "over budget:\n{}", failures.join("\n"));
        },
    );
}

/// `count` SSE streams opened over HTTP/1.1 to `addr`, each once its first event arrived.
async fn open_streams(addr: std::net::SocketAddr, count: usize) -> Vec<tokio::net::TcpStream> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = stream_body(0).replace("stream:0", HOLD);
    let request = format!(
        "POST /a2a/jsonrpc HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n\
         a2a-version: 1.0\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0; 1024];
        while !memchr_find(&seen, b"statusUpdate") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
        assert!(
            seen.starts_with(b"HTTP/1.1 200 "),
            "{}",
            String::from_utf8_lossy(&seen)
        );
        streams.push(stream);
    }
    streams
}

/// What an open stream holds, over a real socket through the server's connection path, in
/// a process of its own (the counts are exact; nothing waits for time).
#[test]
fn bytes_held_per_open_stream_stay_within_budget() {
    in_own_runtime("bytes_held_per_open_stream_stay_within_budget", async {
        let settings = harness::route_settings(&["--push", "pass"]);
        let gateway =
            a2a_gateway::route::handler_over(&settings, Arc::new(stub()), Default::default())
                .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(a2a_gateway::server::serve(
            listener,
            a2a_gateway::server::router(gateway, "/a2a/jsonrpc"),
            async {
                let _ = stopped.await;
            },
            std::time::Duration::from_secs(1),
        ));
        // Warm-up: lazily initialised statics, the timer wheel and slabs settle first.
        let warm = open_streams(addr, 50).await;
        let streams = 200;
        let region = Region::new(GLOBAL);
        let held = open_streams(addr, streams).await;
        let change = region.change();
        let net_allocations = change.allocations as f64 - change.deallocations as f64;
        let net_bytes = change.bytes_allocated as f64 - change.bytes_deallocated as f64
            + change.bytes_reallocated as f64;
        let mut failures = Vec::new();
        let per_stream = streams as f64;
        check(
            &HELD_PER_STREAM,
            (net_allocations / per_stream, net_bytes / per_stream),
            &mut failures,
        );
        drop((warm, held));
        let _ = stop.send(());
        server.await.unwrap();
        assert!(failures.is_empty(), "over budget:\n{}", failures.join("\n"));
    });
}

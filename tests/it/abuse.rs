//! Abusive clients against the real gateway binary in front of an in-process gRPC backend:
//! slowloris heads and bodies, clients that never read their stream, disconnect storms,
//! 10,000 idle connections, huge headers, hostile JSON (deep nesting, giant ids and
//! strings), a pipelined flood, HTTP/2 rapid reset and running out of file descriptors.
//!
//! Each case asserts the gateway's defined answer and its time bound, that its memory stays
//! bounded (peak RSS from `/proc/PID/status` during the attack), and that a well-behaved
//! client measured during the attack keeps its median latency within 2x (or +5 ms) of its
//! baseline (`vitals::assert_unhurt`). The attacks run at bounded rates: the machine the
//! tests run on may have two cores, shared with the gateway and the backend.

use crate::harness;
use crate::harness::vitals;

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::proto::{
    part, send_message_response, stream_response, Artifact, Message, Part, Role,
    SendMessageResponse, StreamResponse, TaskState,
};
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use harness::process::{start_with, Running};
use harness::{status_update, task, Answer, Step, TestBackend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vitals::{assert_unhurt, median_latency, open_fds, rss_kib, RssWatch};

const MIB: u64 = 1024;

/// The cases run one at a time: each measures latency and memory, which a case attacking
/// another gateway at the same moment would disturb.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// GetTask answers at once (with a 16 KiB artifact for ids starting with "big"); SendMessage echoes the length of its text (after 10 s for the
/// text "slow"); a stream sends one event and stays open.
fn handler(request: &Request) -> Answer {
    match request {
        Request::Unary(UnaryRequest::GetTask(r)) => {
            let mut reply = task(&r.id, TaskState::Completed);
            if r.id.starts_with("big") {
                reply.artifacts = vec![Artifact {
                    artifact_id: "a".into(),
                    parts: vec![text_part(&"b".repeat(16 << 10))],
                    ..Default::default()
                }];
            }
            Answer::Reply(Reply::GetTask(reply))
        }
        Request::Unary(UnaryRequest::SendMessage(r)) => {
            let text = r
                .message
                .as_ref()
                .and_then(|m| m.parts.first())
                .and_then(|p| match &p.content {
                    Some(part::Content::Text(t)) => Some(t.as_str()),
                    _ => None,
                })
                .unwrap_or_default();
            let reply = Answer::Reply(Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Message(Message {
                    message_id: "reply".into(),
                    role: Role::Agent as i32,
                    parts: vec![text_part(&format!("length {}", text.len()))],
                    ..Default::default()
                })),
            }));
            if text == "slow" {
                Answer::After(Duration::from_secs(10), Box::new(reply))
            } else {
                reply
            }
        }
        Request::Stream(StreamRequest::SendStreamingMessage(_)) => Answer::Stream(vec![
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Hang,
        ]),
        _ => Answer::Error(tonic::Status::unimplemented("not in this test")),
    }
}

fn text_part(text: &str) -> Part {
    Part {
        content: Some(part::Content::Text(text.to_owned())),
        ..Default::default()
    }
}

/// A gateway under attack, and its control: the same gateway beside it, which the
/// well-behaved client calls in turn with the attacked one (`vitals::assert_unhurt`).
struct Gateways {
    attacked: Running,
    control: Running,
    /// The backend's port (the gateways' backend connections go there).
    backend_port: u16,
}

impl std::ops::Deref for Gateways {
    type Target = Running;

    fn deref(&self) -> &Running {
        &self.attacked
    }
}

impl Gateways {
    /// Asserts the well-behaved client is not hurt while `attack` goes on.
    async fn assert_unhurt(&self, baseline: Duration, attack: &str) {
        assert_unhurt(&self.attacked.1, &self.control.1, baseline, attack).await;
    }
}

/// The gateway binary (two workers, `flags`) in front of a backend answering `handler`,
/// and a control gateway.
async fn start(
    flags: &[&str],
    handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
) -> (TestBackend, Gateways) {
    let backend = TestBackend::new(handler);
    let addr = backend.spawn().await;
    let url = format!("http://{addr}");
    let workers = WORKERS.to_string();
    let mut args = vec!["--backend", &url, "--workers", &workers];
    args.extend_from_slice(flags);
    let attacked = start_with(&args, &[("RUST_LOG", "error")], Stdio::null()).await;
    let control = start_with(&args, &[("RUST_LOG", "error")], Stdio::null()).await;
    let backend_port = addr.port();
    let gateways = Gateways {
        attacked,
        control,
        backend_port,
    };
    (backend, gateways)
}

/// `host:port` of the gateway.
fn authority(gateway: &Running) -> String {
    gateway.origin().trim_start_matches("http://").to_owned()
}

/// Serving threads of the gateways under test.
const WORKERS: usize = 2;

/// A raw HTTP/1.1 request to the JSON-RPC endpoint.
fn raw_request(body: &str) -> String {
    format!(
        "POST /a2a/jsonrpc HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n\
         a2a-version: 1.0\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The head of a JSON-RPC POST over HTTP/2 to the gateway at `address`.
fn jsonrpc_head(address: &str) -> http::Request<()> {
    http::Request::post(format!("http://{address}/a2a/jsonrpc"))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(())
        .unwrap()
}

fn get_task(id: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetTask","params":{{"id":"t-{id}"}}}}"#)
}

fn streaming_message(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"SendStreamingMessage","params":{}}}"#,
        harness::message_params("go")
    )
}

/// Reads until the peer closes (or resets) the connection, at most `limit`; returns what
/// was read and whether it closed.
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (data, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (data, true),
            Ok(Ok(n)) => data.extend_from_slice(&buf[..n]),
        }
    }
}

/// Asserts the gateway's peak RSS during an attack grew less than `bound_mib` over `before`.
fn assert_memory(watch: &RssWatch, before: u64, bound_mib: u64, attack: &str) {
    let grown = watch.peak_kib().saturating_sub(before);
    println!(
        "{attack}: RSS {} MiB before, peak {} MiB (+{} KiB; bound +{bound_mib} MiB)",
        before / MIB,
        watch.peak_kib() / MIB,
        grown
    );
    assert!(
        grown < bound_mib * MIB,
        "{attack}: RSS grew by {grown} KiB, over the bound of {bound_mib} MiB"
    );
}

/// Slowloris heads: 300 connections each send a request head one byte every 250 ms. Each is
/// closed at the header deadline (2 s here), not before it and not much after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_heads_are_cut_at_the_header_deadline() {
    let _serial = SERIAL.lock().await;
    let (_backend, gateway) = start(&["--client-header-timeout", "2s"], handler).await;
    let baseline = median_latency(&gateway.1).await;
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let address = authority(&gateway);
    let attackers: Vec<_> = (0..300)
        .map(|_| {
            let address = address.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let mut stream = TcpStream::connect(&address).await.unwrap();
                let (mut read, mut write) = stream.split();
                let trickle = async {
                    let _ = write
                        .write_all(b"POST /a2a/jsonrpc HTTP/1.1\r\nhost: g\r\nx-slow: ")
                        .await;
                    loop {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        if write.write_all(b"a").await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                };
                let mut buf = [0u8; 1024];
                tokio::select! {
                    () = trickle => unreachable!(),
                    _ = tokio::time::timeout(Duration::from_secs(15), read.read(&mut buf)) => {}
                }
                started.elapsed()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    gateway.assert_unhurt(baseline, "slowloris heads").await;
    let mut closed = Vec::new();
    for attacker in attackers {
        closed.push(attacker.await.unwrap());
    }
    closed.sort();
    println!(
        "slowloris heads: closed after {:?} .. {:?}",
        closed[0],
        closed[closed.len() - 1]
    );
    assert!(
        closed[0] >= Duration::from_millis(1900),
        "cut early: {:?}",
        closed[0]
    );
    assert!(
        closed[closed.len() - 1] < Duration::from_secs(6),
        "a slowloris head was held {:?}",
        closed[closed.len() - 1]
    );
    assert_memory(&watch, before, 32, "slowloris heads");
}

/// Slowloris bodies: 100 connections each send a head announcing 100 kB, then one body byte
/// every 100 ms. At the body deadline (2 s here) each gets the JSON-RPC -32600 naming it and
/// the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_bodies_are_cut_at_the_body_deadline() {
    let _serial = SERIAL.lock().await;
    let (_backend, gateway) = start(&["--client-body-timeout", "2s"], handler).await;
    let baseline = median_latency(&gateway.1).await;
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let address = authority(&gateway);
    let attackers: Vec<_> = (0..100)
        .map(|_| {
            let address = address.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let mut stream = TcpStream::connect(&address).await.unwrap();
                let head =
                    "POST /a2a/jsonrpc HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\n\
                            content-length: 100000\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,";
                stream.write_all(head.as_bytes()).await.unwrap();
                let (mut read, mut write) = stream.split();
                let trickle = async {
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if write.write_all(b" ").await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                };
                let mut answer = Vec::new();
                let mut buf = [0u8; 4096];
                let reading = async {
                    loop {
                        match read.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => answer.extend_from_slice(&buf[..n]),
                        }
                    }
                };
                tokio::select! {
                    () = trickle => unreachable!(),
                    _ = tokio::time::timeout(Duration::from_secs(15), reading) => {}
                }
                (
                    started.elapsed(),
                    String::from_utf8_lossy(&answer).into_owned(),
                )
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    gateway.assert_unhurt(baseline, "slowloris bodies").await;
    let mut outcomes = Vec::new();
    for attacker in attackers {
        outcomes.push(attacker.await.unwrap());
    }
    let answered = outcomes.iter().filter(|(_, text)| !text.is_empty()).count();
    for (elapsed, text) in &outcomes {
        assert!(
            *elapsed >= Duration::from_millis(1900),
            "cut early: {elapsed:?}"
        );
        assert!(
            *elapsed < Duration::from_secs(6),
            "a slow body was held {elapsed:?}"
        );
        if !text.is_empty() {
            assert!(
                text.starts_with("HTTP/1.1 200") && text.contains("\"code\":-32600"),
                "{text}"
            );
            assert!(text.contains("--client-body-timeout"), "{text}");
        }
    }
    println!("slowloris bodies: {answered} of 100 read their -32600 before the close");
    assert!(
        answered >= 50,
        "only {answered} of 100 got the JSON-RPC error"
    );
    assert_memory(&watch, before, 32, "slowloris bodies");
}

/// A stream event of about 64 KiB.
/// `handler`, but a stream is 40 large events (2.5 MiB, more than a window), then stays open.
fn large_then_open(request: &Request) -> Answer {
    match request {
        Request::Stream(_) => {
            let mut steps: Vec<Step> = (0..40).map(|n| Step::Event(big_event(n))).collect();
            steps.push(Step::Hang);
            Answer::Stream(steps)
        }
        other => handler(other),
    }
}

fn big_event(n: usize) -> StreamResponse {
    let mut snapshot = task("t-big", TaskState::Working);
    snapshot.artifacts = vec![Artifact {
        artifact_id: format!("a-{n}"),
        parts: vec![text_part(&"x".repeat(64 << 10))],
        ..Default::default()
    }];
    StreamResponse {
        payload: Some(stream_response::Payload::Task(snapshot)),
    }
}

/// Clients that open a stream of large events and never read it: once the buffers between
/// them and the backend are full, the client accepts nothing for the send timeout (2 s
/// here), its connection is closed, and the backend sees its call cancelled. What the
/// gateway buffers per stream meanwhile is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_never_read_are_dropped_and_their_calls_cancelled() {
    let _serial = SERIAL.lock().await;
    const STREAMS: usize = 8;
    let (backend, gateway) = start(&["--client-send-timeout", "2s"], |request| match request {
        // About 10 MiB per stream: more than the socket buffers on both sides hold.
        Request::Stream(_) => {
            let mut steps: Vec<Step> = (0..160).map(|n| Step::Event(big_event(n))).collect();
            steps.push(Step::Hang);
            Answer::Stream(steps)
        }
        other => handler(other),
    })
    .await;
    let baseline = median_latency(&gateway.1).await;
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let started = Instant::now();
    let mut clients = Vec::new();
    for id in 0..STREAMS {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket
            .connect(authority(&gateway).parse().unwrap())
            .await
            .unwrap();
        stream
            .write_all(raw_request(&streaming_message(id)).as_bytes())
            .await
            .unwrap();
        clients.push(stream);
    }
    gateway.assert_unhurt(baseline, "streams never read").await;
    while backend.cancelled.load(Ordering::SeqCst) < STREAMS {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{} of {STREAMS} stalled streams were cancelled after {:?}",
            backend.cancelled.load(Ordering::SeqCst),
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "streams never read: all {STREAMS} cancelled upstream after {:?}",
        started.elapsed()
    );
    let scraper = vitals::Scraper::new(&gateway.1);
    assert_eq!(scraper.metric("a2a_gateway_streams_open").await, 0.0);
    // Each client finds its connection closed once it reads what was buffered.
    for mut client in clients {
        let (_, closed) = read_to_close(&mut client, Duration::from_secs(10)).await;
        assert!(closed, "a stalled stream's connection is still open");
    }
    assert_memory(&watch, before, 96, "streams never read");
}

/// Over HTTP/2 a client can stop taking one stream (it grants no flow-control window) while
/// its connection goes on. Once nothing of the stream could be sent for the send timeout
/// (2 s here) its backend call is cancelled; reading again, the client finds the stream
/// reset, and the next call on the same connection is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_never_read_are_reset_alone() {
    let _serial = SERIAL.lock().await;
    let (backend, gateway) = start(&["--client-send-timeout", "2s"], large_then_open).await;
    let address = authority(&gateway);
    let tcp = TcpStream::connect(&address).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut ready = client.clone().ready().await.unwrap();
    let (response, mut body) = ready.send_request(jsonrpc_head(&address), false).unwrap();
    body.send_data(bytes::Bytes::from(streaming_message(1)), true)
        .unwrap();
    let started = Instant::now();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    // Nothing of the stream is read, so its window is never granted again.
    let mut stalled = response.into_body();
    while backend.cancelled.load(Ordering::SeqCst) < 1 {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the stalled stream's backend call was not cancelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled_after = started.elapsed();
    assert!(
        cancelled_after >= Duration::from_millis(1900),
        "{cancelled_after:?}"
    );
    // Reading again, the client finds its stream cut off: what was under way, then a reset.
    let ending = loop {
        match tokio::time::timeout(Duration::from_secs(5), stalled.data()).await {
            Ok(Some(Ok(chunk))) => {
                let _ = stalled.flow_control().release_capacity(chunk.len());
            }
            other => break other,
        }
    };
    assert!(matches!(ending, Ok(Some(Err(_)))), "{ending:?}");
    // The connection goes on.
    let mut ready = client.ready().await.unwrap();
    let (response, mut body) = ready.send_request(jsonrpc_head(&address), false).unwrap();
    body.send_data(bytes::Bytes::from(get_task(2)), true)
        .unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let mut data = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = data.data().await {
        let chunk = chunk.unwrap();
        let _ = data.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    assert!(String::from_utf8_lossy(&text).contains("\"result\""));
    println!("HTTP/2 stream never read: reset and cancelled upstream after {cancelled_after:?}");
}

/// A client that never grants a stream window again does not hold its connection: once the
/// stream is dropped (send timeout, 2 s) nothing is in flight, so the idle timeout (3 s)
/// shuts the connection down, and since the dropped stream can never finish, it is closed
/// a send timeout later. Before, the stream kept its request in flight and the connection
/// stayed open for as long as the client answered pings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_a_stream_never_granted_window_does_not_hold_its_connection() {
    let _serial = SERIAL.lock().await;
    let flags = ["--client-send-timeout", "2s", "--client-idle-timeout", "3s"];
    let (backend, gateway) = start(&flags, large_then_open).await;
    let address = authority(&gateway);
    let tcp = TcpStream::connect(&address).await.unwrap();
    // No window for any stream, ever: not one byte of a reply body can be sent.
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    let request = jsonrpc_head(&address);
    let mut ready = client.ready().await.unwrap();
    let (response, mut body) = ready.send_request(request, false).unwrap();
    body.send_data(bytes::Bytes::from(streaming_message(1)), true)
        .unwrap();
    let started = Instant::now();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let _held = response.into_body();
    // Dropped at the send timeout (its backend call cancelled), idle 3 s later, closed at
    // most a send timeout after that: 7 s, and 10 s of slack for a loaded machine.
    let ended = tokio::time::timeout(Duration::from_secs(17), connection).await;
    let closed_after = started.elapsed();
    assert!(
        ended.is_ok(),
        "the connection is still open after {closed_after:?}"
    );
    assert_eq!(backend.cancelled.load(Ordering::SeqCst), 1);
    assert!(closed_after >= Duration::from_secs(5), "{closed_after:?}");
    println!("HTTP/2 stream never granted window: connection closed after {closed_after:?}");
}

/// Clients that start calls and go away at once make the gateway cancel streams the agent
/// has only just read. An h2 agent counts the streams reset before it took them and past a
/// limit (here 4; 20 by default) closes the connection with GOAWAY `ENHANCE_YOUR_CALM`,
/// failing every other call on it. A relay that hands the agent the gateway's bytes in
/// 20 ms batches puts each cancel in the same read as its stream's head unless the gateway
/// holds a young stream (100 ms from its send) before cancelling it: then another client's
/// stream on the same connection lives through 40 such calls (before, it ended with
/// `BACKEND_CONNECTION_RESET`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_dropped_at_once_do_not_take_the_agent_connection_down() {
    let _serial = SERIAL.lock().await;
    let backend = TestBackend::new(|request| match request {
        Request::Stream(_) => {
            let mut steps = Vec::new();
            for _ in 0..200 {
                steps.push(Step::Event(status_update("t-1", TaskState::Working)));
                steps.push(Step::Sleep(Duration::from_millis(50)));
            }
            Answer::Stream(steps)
        }
        other => handler(other),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let agent = listener.local_addr().unwrap();
    let server =
        tonic::transport::Server::builder().http2_max_pending_accept_reset_streams(Some(4));
    let _serving = backend.spawn_on(server, listener, std::future::pending());
    let relay = batching_relay(agent, Duration::from_millis(20)).await;
    let url = format!("http://{relay}");
    // One worker: every call shares one connection to the agent.
    let args = ["--backend", &url, "--workers", "1"];
    let gateway = start_with(&args, &[("RUST_LOG", "error")], Stdio::null()).await;
    let address = authority(&gateway);

    let mut victim = TcpStream::connect(&address).await.unwrap();
    victim
        .write_all(raw_request(&streaming_message(1)).as_bytes())
        .await
        .unwrap();
    let (first, _) = read_for(&mut victim, Duration::from_millis(500)).await;
    assert!(
        first.contains("HTTP/1.1 200") && first.contains("TASK_STATE_WORKING"),
        "{first}"
    );

    let slow = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{}}}"#,
        harness::message_params("slow")
    );
    for _ in 0..8 {
        let wave: Vec<_> = (0..5)
            .map(|_| {
                let (address, request) = (address.clone(), raw_request(&slow));
                tokio::spawn(async move {
                    let mut caller = TcpStream::connect(&address).await.unwrap();
                    caller.write_all(request.as_bytes()).await.unwrap();
                    // Gone before the agent could answer (it takes 10 s).
                    tokio::time::sleep(Duration::from_millis(10)).await;
                })
            })
            .collect();
        for caller in wave {
            caller.await.unwrap();
        }
    }
    // The dropped calls' cancels have all reached the agent (100 ms, then a batch), and the
    // victim's stream goes on.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (after, open) = read_for(&mut victim, Duration::from_millis(500)).await;
    assert!(open, "the victim's stream ended: {after}");
    assert!(
        after.contains("TASK_STATE_WORKING") && !after.contains("error"),
        "{after}"
    );
}

/// A TCP relay to `agent` that forwards what its client sends once every `every`, all of
/// it in one write (and the agent's replies as they come).
async fn batching_relay(agent: std::net::SocketAddr, every: Duration) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(agent).await else {
                continue;
            };
            let (from_client, mut to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
            });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    tokio::time::sleep(every).await;
                    let mut batch = Vec::new();
                    loop {
                        match from_client.try_read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => batch.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                            Err(_) => return,
                        }
                    }
                    if to_server.write_all(&batch).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

/// What `stream` sends within `window`, and whether it is still open after it.
async fn read_for(stream: &mut TcpStream, window: Duration) -> (String, bool) {
    let mut text = Vec::new();
    let mut buf = [0u8; 16 << 10];
    let until = tokio::time::Instant::now() + window;
    loop {
        match tokio::time::timeout_at(until, stream.read(&mut buf)).await {
            Err(_) => return (String::from_utf8_lossy(&text).into_owned(), true),
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&text).into_owned(), false),
            Ok(Ok(n)) => text.extend_from_slice(&buf[..n]),
        }
    }
}

/// A disconnect storm: 1,000 clients start a stream or a slow unary call and go away at once.
/// Every upstream call is cancelled, and the gateway's open descriptors, tasks and streams
/// return to where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_storms_leave_nothing_behind() {
    let _serial = SERIAL.lock().await;
    const CLIENTS: usize = 1000;
    let (backend, gateway) = start(&[], handler).await;
    let scraper = vitals::Scraper::new(&gateway.1);
    vitals::warm_up(&gateway.1).await;
    let baseline = median_latency(&gateway.1).await;
    // The least of a few readings: a connection of the warm-up may still be closing.
    // Each serving thread keeps its first backend connection (a descriptor and its driver
    // task) once it has served a call; the warm-up usually reaches every thread, but on a
    // loaded machine one thread may serve its first call only in the storm. Descriptors and
    // tasks are therefore counted without the backend connections, which are bounded apart.
    let backend_port = gateway.backend_port;
    let own = |fds: usize, tasks: f64| {
        let backend = vitals::connections_to(gateway.pid(), backend_port);
        (fds.saturating_sub(backend), tasks - backend as f64, backend)
    };
    let (mut tasks_before, mut fds_before) = (f64::MAX, usize::MAX);
    for _ in 0..5 {
        let tasks = scraper.metric("a2a_gateway_tasks_alive").await;
        let (fds, tasks, _) = own(open_fds(gateway.pid()), tasks);
        tasks_before = tasks_before.min(tasks);
        fds_before = fds_before.min(fds);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let address = authority(&gateway);
    let streams = Arc::new(AtomicUsize::new(0));
    let storm =
        {
            let streams = streams.clone();
            tokio::spawn(async move {
                let gate = Arc::new(tokio::sync::Semaphore::new(50));
                let mut clients = Vec::new();
                for id in 0..CLIENTS {
                    let permit = gate.clone().acquire_owned().await.unwrap();
                    let (address, streams) = (address.clone(), streams.clone());
                    clients.push(tokio::spawn(async move {
                    let mut stream = TcpStream::connect(&address).await.unwrap();
                    let body = if id % 2 == 0 {
                        streaming_message(id)
                    } else {
                        format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"method":"SendMessage","params":{}}}"#,
                            harness::message_params("slow")
                        )
                    };
                    stream.write_all(raw_request(&body).as_bytes()).await.unwrap();
                    if id % 2 == 0 {
                        // Gone once the stream has started.
                        let mut buf = [0u8; 1024];
                        let n = stream.read(&mut buf).await.unwrap();
                        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
                        streams.fetch_add(1, Ordering::SeqCst);
                    } else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    drop(permit);
                }));
                }
                for client in clients {
                    client.await.unwrap();
                }
            })
        };
    tokio::time::sleep(Duration::from_millis(200)).await;
    gateway.assert_unhurt(baseline, "disconnect storm").await;
    storm.await.unwrap();
    let streams = streams.load(Ordering::SeqCst);
    assert_eq!(streams, CLIENTS / 2);
    let settled = Instant::now();
    loop {
        let cancelled = backend.cancelled.load(Ordering::SeqCst);
        let open = scraper.metric("a2a_gateway_streams_open").await;
        let tasks = scraper.metric("a2a_gateway_tasks_alive").await;
        let (fds, tasks, backend) = own(open_fds(gateway.pid()), tasks);
        // The spares of the storm closed: the connections that stay are one per serving
        // thread and the health probe's (readiness, `/metrics`).
        let backend_settled = backend <= WORKERS + 1;
        if cancelled == streams
            && open == 0.0
            && tasks <= tasks_before
            && fds <= fds_before
            && backend_settled
        {
            println!(
                "disconnect storm: settled after {:?}; besides {backend} backend connections: \
                 fds {fds_before} -> {fds}, tasks {tasks_before} -> {tasks}",
                settled.elapsed()
            );
            break;
        }
        assert!(
            settled.elapsed() < Duration::from_secs(20),
            "after the storm: {cancelled} of {streams} streams cancelled, {open} open, \
             besides {backend} backend connections: tasks {tasks_before} -> {tasks}, \
             fds {fds_before} -> {fds}; its connections:\n{}",
            vitals::connections_of(gateway.pid())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_memory(&watch, before, 64, "disconnect storm");
}

/// 10,000 idle connections: 5,000 HTTP/1.1 keep-alive connections after one call each,
/// 5,000 that never send a byte, and 3 HTTP/2 connections after one call each. The gateway
/// holds them in bounded memory without hurting a working client, then closes every one at
/// its deadline (`--client-header-timeout` for the keep-alive ones, `--client-idle-timeout`
/// for the others) and its descriptors return to where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_connections_are_held_cheaply_then_closed() {
    let _serial = SERIAL.lock().await;
    const EACH: usize = 5000;
    const TIMEOUT: Duration = Duration::from_secs(30);
    vitals::raise_fd_limit();
    let (_backend, gateway) = start(
        &[
            "--client-header-timeout",
            "30s",
            "--client-idle-timeout",
            "30s",
        ],
        handler,
    )
    .await;
    vitals::warm_up(&gateway.1).await;
    let baseline = median_latency(&gateway.1).await;
    let fds_before = open_fds(gateway.pid());
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let address = authority(&gateway);
    let opened = Instant::now();
    let mut streams = Vec::with_capacity(2 * EACH);
    for _ in 0..2 * EACH {
        streams.push((TcpStream::connect(&address).await.unwrap(), Instant::now()));
    }
    let connected = opened.elapsed();
    let gate = Arc::new(tokio::sync::Semaphore::new(500));
    let mut idle = Vec::new();
    for (n, (mut stream, connected_at)) in streams.into_iter().enumerate() {
        let permit = gate.clone().acquire_owned().await.unwrap();
        idle.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut idle_since = connected_at;
            if n % 2 == 0 {
                stream
                    .write_all(raw_request(&get_task(n)).as_bytes())
                    .await
                    .unwrap();
                let read = stream.read(&mut buf).await.unwrap();
                assert!(buf[..read].starts_with(b"HTTP/1.1 200"));
                idle_since = Instant::now();
            }
            drop(permit);
            let (rest, closed) = read_to_close(&mut stream, TIMEOUT * 3).await;
            assert!(closed && rest.is_empty(), "idle connection {n}: {rest:?}");
            idle_since.elapsed()
        }));
    }
    let _all = gate.acquire_many(500).await.unwrap();
    let h2 = open_h2_idle(&address, 3).await;
    println!(
        "10,000 idle: connected in {connected:?}, 5,000 calls made after {:?}",
        opened.elapsed()
    );
    let fds_held = open_fds(gateway.pid());
    assert!(fds_held >= fds_before + 2 * EACH, "{fds_held} descriptors");
    let held = rss_kib(gateway.pid());
    gateway
        .assert_unhurt(baseline, "10,000 idle connections")
        .await;
    println!(
        "10,000 idle: RSS {} MiB -> {} MiB ({} bytes per connection), fds {fds_before} -> {fds_held}",
        before / MIB,
        held / MIB,
        held.saturating_sub(before) * 1024 / (2 * EACH as u64)
    );
    let mut lifetimes = Vec::new();
    for connection in idle {
        lifetimes.push(connection.await.unwrap());
    }
    for connection in h2 {
        lifetimes.push(connection.await.unwrap());
    }
    lifetimes.sort();
    println!(
        "10,000 idle: closed after {:?} .. {:?} idle",
        lifetimes[0],
        lifetimes[lifetimes.len() - 1]
    );
    // The client sees a reply a moment after the gateway has sent it (and restarted the
    // connection's clock): a second of slack for a loaded machine.
    assert!(
        lifetimes[0] >= TIMEOUT - Duration::from_secs(1),
        "{:?}",
        lifetimes[0]
    );
    assert!(lifetimes[lifetimes.len() - 1] < TIMEOUT + Duration::from_secs(8));
    let settled = Instant::now();
    while open_fds(gateway.pid()) > fds_before {
        assert!(
            settled.elapsed() < Duration::from_secs(5),
            "descriptors after closing: {} (before: {fds_before}); its connections:\n{}",
            open_fds(gateway.pid()),
            vitals::connections_of(gateway.pid())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // hyper's connection state (read and write buffers) and the socket's: 20 KiB each.
    assert_memory(&watch, before, 200, "10,000 idle connections");
}

/// `count` HTTP/2 (prior knowledge) connections that make one call each and then stay idle;
/// each handle ends with how long its connection stayed open after the call.
async fn open_h2_idle(address: &str, count: usize) -> Vec<tokio::task::JoinHandle<Duration>> {
    let mut handles = Vec::new();
    for _ in 0..count {
        let tcp = TcpStream::connect(address).await.unwrap();
        let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
        let request = jsonrpc_head(address);
        let driver = tokio::spawn(connection);
        let (response, mut body) = client.send_request(request, false).unwrap();
        body.send_data(bytes::Bytes::from(get_task(7)), true)
            .unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        let mut data = response.into_body();
        while data.data().await.is_some() {}
        let idle_since = Instant::now();
        handles.push(tokio::spawn(async move {
            // Ends when the gateway closes the connection (GOAWAY, then EOF).
            let _ = tokio::time::timeout(Duration::from_secs(60), driver).await;
            drop(client);
            idle_since.elapsed()
        }));
    }
    handles
}

/// Huge headers: 20 clients at once send a request with a 1 MiB header. Each gets 431 or a
/// closed connection, and the gateway's memory does not follow the header size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_headers_get_431_or_a_closed_connection() {
    let _serial = SERIAL.lock().await;
    let (backend, gateway) = start(&[], handler).await;
    let baseline = median_latency(&gateway.1).await;
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let address = authority(&gateway);
    let header = format!("x-huge: {}\r\n", "h".repeat(1 << 20));
    let attack = tokio::spawn(async move {
        let mut outcomes = Vec::new();
        for _ in 0..5 {
            let attackers: Vec<_> = (0..20)
                .map(|_| {
                    let (address, header) = (address.clone(), header.clone());
                    tokio::spawn(async move {
                        let mut stream = TcpStream::connect(&address).await.unwrap();
                        let body = get_task(1);
                        let request = format!(
                            "POST /a2a/jsonrpc HTTP/1.1\r\nhost: g\r\n{header}content-type: application/json\r\n\
                             content-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        // The gateway may close before taking it all.
                        let _ = stream.write_all(request.as_bytes()).await;
                        let (answer, closed) = read_to_close(&mut stream, Duration::from_secs(10)).await;
                        (String::from_utf8_lossy(&answer).into_owned(), closed)
                    })
                })
                .collect();
            for attacker in attackers {
                outcomes.push(attacker.await.unwrap());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        outcomes
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    gateway.assert_unhurt(baseline, "huge headers").await;
    let outcomes = attack.await.unwrap();
    for (answer, closed) in &outcomes {
        assert!(closed, "a connection with a 1 MiB header stayed open");
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "{}",
            &answer[..answer.len().min(200)]
        );
    }
    let refused = outcomes.iter().filter(|(a, _)| !a.is_empty()).count();
    println!(
        "huge headers: {refused} of {} got 431, the rest a closed connection",
        outcomes.len()
    );
    let reached = backend.seen.lock().unwrap().iter().any(
        |seen| matches!(&seen.request, Request::Unary(UnaryRequest::GetTask(r)) if r.id == "t-1"),
    );
    assert!(
        !reached,
        "a request with a 1 MiB header reached the backend"
    );
    assert_memory(&watch, before, 48, "huge headers");
}

/// Hostile JSON: nesting 100,000 deep in params, in the envelope and as a batch; ids and
/// strings of megabytes. Each gets its defined answer within a second; giant ids come
/// back byte for byte; bodies over the limit get -32600 naming it. Meanwhile memory is
/// bounded by a small multiple of the body limit per request in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_json_gets_defined_answers() {
    let _serial = SERIAL.lock().await;
    let (backend, gateway) = start(&[], handler).await;
    let url = gateway.1.clone();
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let message =
        serde_json::json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    let huge_text = "t".repeat(3 << 20);
    let huge_string_id = format!("\"{}\"", "i".repeat(3 << 20));
    let huge_number_id = "9".repeat(1 << 20);
    // (body, what the answer must hold, and the whole answer's longest size)
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{message},"metadata":{{"k":{deep}}}}}}}"#
            ),
            vec!["\"code\":-32602".into(), "deeper than 48".into()],
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"GetTask","x":{deep},"params":{{"id":"t"}}}}"#
            ),
            vec!["\"id\":2,\"result\"".into()],
        ),
        (deep.clone(), vec!["\"code\":-32600".into()]),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":{huge_string_id},"method":"GetTask","params":{{"id":"t"}}}}"#
            ),
            vec![format!("\"id\":{huge_string_id},\"result\"")],
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":{huge_number_id},"method":"GetTask","params":{{"id":"t"}}}}"#
            ),
            vec![format!("\"id\":{huge_number_id},\"result\"")],
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{}}}"#,
                harness::message_params(&huge_text)
            ),
            vec![format!("length {}", 3 << 20)],
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":"{}","method":"GetTask","params":{{"id":"t"}}}}"#,
                "o".repeat(5 << 20)
            ),
            vec![
                "\"code\":-32600".into(),
                "exceeds the limit of 4194304 bytes".into(),
            ],
        ),
    ];
    let baseline = median_latency(&url).await;
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    for (body, expected) in &cases {
        let started = Instant::now();
        let (status, _, text) = harness::post(&url, body.clone()).await;
        let elapsed = started.elapsed();
        assert_eq!(status, 200);
        for part in expected {
            assert!(
                text.contains(part.as_str()),
                "{} → {}",
                &body[..body.len().min(120)],
                &text[..text.len().min(300)]
            );
        }
        assert!(
            elapsed < Duration::from_secs(2),
            "answered after {elapsed:?}"
        );
    }
    let sequential = watch.peak_kib();
    // Four such requests at a time, again and again, while the probe measures.
    let attack = {
        let (url, cases) = (url.clone(), Arc::new(cases));
        tokio::spawn(async move {
            for round in 0..6 {
                let calls: Vec<_> = (0..4)
                    .map(|i| {
                        let (url, cases) = (url.clone(), cases.clone());
                        tokio::spawn(async move {
                            let (body, expected) = &cases[(round + i) % cases.len()];
                            let (_, _, text) = harness::post(&url, body.clone()).await;
                            assert!(text.contains(expected[0].as_str()));
                        })
                    })
                    .collect();
                for call in calls {
                    call.await.unwrap();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    gateway.assert_unhurt(baseline, "hostile JSON").await;
    attack.await.unwrap();
    println!(
        "hostile JSON: RSS peak {} MiB after the sequential cases, {} MiB with 4 at a time",
        sequential / MIB,
        watch.peak_kib() / MIB
    );
    assert!(backend.calls() > 0);
    // Four requests of up to 4 MiB, each held as the body, the decoded params, the gRPC
    // message and the reply: 4 x 4 x 4 MiB, plus the allocator's slack.
    assert_memory(&watch, before, 96, "hostile JSON");
}

/// A pipelined flood on one HTTP/1.1 connection. 2,000 requests written at once are
/// answered in order; a client that writes requests and never reads the answers is cut
/// off once it has accepted nothing for the send timeout, with bounded memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_floods_are_answered_in_order_or_cut_off() {
    let _serial = SERIAL.lock().await;
    const PIPELINED: usize = 2000;
    let (_backend, gateway) = start(&["--client-send-timeout", "2s"], handler).await;
    let address = authority(&gateway);
    // In order.
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let requests: String = (0..PIPELINED)
        .map(|id| raw_request(&get_task(id)))
        .collect();
    let (mut read, mut write) = stream.split();
    let writing = async { write.write_all(requests.as_bytes()).await.unwrap() };
    let reading = async {
        let mut text = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        let expected_end = format!("\"id\":{},", PIPELINED - 1);
        while !String::from_utf8_lossy(&text[text.len().saturating_sub(4096)..])
            .contains(&expected_end)
        {
            let n = read.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before every answer");
            text.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(text).unwrap()
    };
    let ((), text) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(writing, reading)
    })
    .await
    .expect("2,000 pipelined requests were not answered within 60 s");
    let ids: Vec<usize> = text
        .match_indices("{\"jsonrpc\":\"2.0\",\"id\":")
        .map(|(i, m)| {
            let rest = &text[i + m.len()..];
            rest[..rest.find(',').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(ids, (0..PIPELINED).collect::<Vec<_>>());
    drop(stream);
    // Never read.
    let baseline = median_latency(&gateway.1).await;
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut flood = socket.connect(address.parse().unwrap()).await.unwrap();
    let started = Instant::now();
    let writer = tokio::spawn(async move {
        // Large replies fill the socket buffers (megabytes on loopback) quickly.
        let big = |id| {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetTask","params":{{"id":"big"}}}}"#)
        };
        let chunk: String = (0..100).map(|id| raw_request(&big(id))).collect();
        let mut written = 0usize;
        // At most about 20,000 requests a second.
        loop {
            match tokio::time::timeout(Duration::from_secs(20), flood.write_all(chunk.as_bytes()))
                .await
            {
                Ok(Ok(())) => written += 100,
                Ok(Err(_)) => return (written, started.elapsed()),
                Err(_) => panic!("the flood's connection was neither read nor closed for 20 s"),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    gateway.assert_unhurt(baseline, "pipelined flood").await;
    let (written, cut) = writer.await.unwrap();
    println!("pipelined flood: {written} requests written before the cut after {cut:?}");
    assert!(cut < Duration::from_secs(20));
    assert_memory(&watch, before, 32, "pipelined flood");
}

/// HTTP/2 rapid reset (CVE-2023-44487): bursts of requests each reset right after it was
/// sent, at a bounded rate. Bursts of 50, over the 20 resets of not yet accepted streams
/// a connection may have, end it with GOAWAY; bursts of 10 do not. No reset call reaches
/// the backend's handler long enough to matter, and a working client is not hurt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_rapid_reset_is_bounded() {
    let _serial = SERIAL.lock().await;
    let (backend, gateway) = start(&[], |request| match request {
        Request::Unary(UnaryRequest::SendMessage(_)) => Answer::After(
            Duration::from_secs(30),
            Box::new(Answer::Error(tonic::Status::internal("never"))),
        ),
        other => handler(other),
    })
    .await;
    let baseline = median_latency(&gateway.1).await;
    let before = rss_kib(gateway.pid());
    let watch = RssWatch::start(gateway.pid());
    let address = authority(&gateway);
    let attack = tokio::spawn(reset_bursts(address.clone(), 50, Duration::from_secs(4)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    gateway.assert_unhurt(baseline, "HTTP/2 rapid reset").await;
    let (sent, connections, cut) = attack.await.unwrap();
    let (below_sent, below_connections, below_cut) =
        reset_bursts(address, 10, Duration::from_secs(2)).await;
    let reached = backend
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| matches!(s.request, Request::Unary(UnaryRequest::SendMessage(_))))
        .count();
    println!(
        "HTTP/2 rapid reset: bursts of 50: {sent} streams reset on {connections} connections, \
         cut {cut:?}; bursts of 10: {below_sent} streams on {below_connections} \
         connection(s), cut {below_cut:?}; {reached} calls reached the backend"
    );
    assert!(sent >= 1000, "the attack sent only {sent} streams");
    // The last connection may end with the attack, before the gateway cuts it.
    assert!(
        cut.total() * 10 >= connections * 9,
        "{cut:?} of {connections} connections cut"
    );
    assert!(cut.goaway > 0, "no connection got a GOAWAY: {cut:?}");
    assert_eq!((below_connections, below_cut), (1, Cut::default()));
    assert!(below_sent >= 300, "{below_sent}");
    assert_memory(&watch, before, 32, "HTTP/2 rapid reset");
}

/// For `length`, HTTP/2 connections (a new one whenever the gateway ends the last) send
/// bursts of `burst` requests, each reset at once, 20 bursts a second. Returns the streams
/// sent, the connections used and how the gateway ended them.
async fn reset_bursts(address: String, burst: usize, length: Duration) -> (usize, usize, Cut) {
    let (mut sent, mut connections, mut cut) = (0usize, 0usize, Cut::default());
    let started = Instant::now();
    let body = bytes::Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}}"#,
        harness::message_params("hi")
    ));
    while started.elapsed() < length {
        let tcp = TcpStream::connect(&address).await.unwrap();
        let Ok((client, connection)) = h2::client::handshake(tcp).await else {
            continue;
        };
        connections += 1;
        let driver = tokio::spawn(connection);
        'bursts: while started.elapsed() < length {
            for _ in 0..burst {
                let Ok(mut ready) = client.clone().ready().await else {
                    break 'bursts;
                };
                let request = jsonrpc_head(&address);
                let Ok((_, mut stream)) = ready.send_request(request, false) else {
                    break 'bursts;
                };
                let _ = stream.send_data(body.clone(), true);
                stream.send_reset(h2::Reason::CANCEL);
                sent += 1;
            }
            if driver.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(client);
        // The gateway's GOAWAY may reach us as a reset instead: it closes the socket while
        // our burst is still being written, and unread bytes make the kernel send RST.
        match tokio::time::timeout(Duration::from_secs(2), driver).await {
            Ok(Ok(Err(e))) if e.is_go_away() => cut.goaway += 1,
            Ok(Ok(Err(e))) if e.is_io() => cut.reset += 1,
            _ => {}
        }
    }
    (sent, connections, cut)
}

/// How the gateway ended the connections of one [`reset_bursts`] run.
#[derive(Debug, Default, PartialEq)]
struct Cut {
    goaway: usize,
    reset: usize,
}

impl Cut {
    fn total(&self) -> usize {
        self.goaway + self.reset
    }
}

/// Out of file descriptors: a gateway whose hard limit is 256 is held at it by idle
/// connections. It stays up, keeps serving the connections it has, and accepts again as
/// soon as descriptors are free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_survives_running_out_of_descriptors() {
    let _serial = SERIAL.lock().await;
    let backend = TestBackend::new(handler);
    let addr = backend.spawn().await;
    let listen = harness::free_listen_address();
    let script = format!(
        "ulimit -n 256 && exec {} --backend http://{addr} --workers 2 --listen {listen}",
        harness::process::BIN
    );
    let child = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("RUST_LOG", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let attacked = Running(child, format!("http://{listen}/a2a/jsonrpc"));
    harness::await_serving(&listen).await;
    let backend_url = format!("http://{addr}");
    let control = start_with(&["--backend", &backend_url], &[], Stdio::null()).await;
    let gateway = Gateways {
        attacked,
        control,
        backend_port: addr.port(),
    };
    let baseline = median_latency(&gateway.1).await;
    // A keep-alive client connected before the descriptors run out.
    let client = reqwest::Client::new();
    let call = |client: reqwest::Client, url: String| async move {
        client
            .post(&url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(vitals::PROBE_CALL)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .is_ok()
    };
    assert!(call(client.clone(), gateway.1.clone()).await);
    let mut hogs = Vec::new();
    for _ in 0..300 {
        hogs.push(TcpStream::connect(&listen).await.unwrap());
    }
    // Wait until the gateway holds every descriptor it may.
    let started = Instant::now();
    while open_fds(gateway.pid()) < 250 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{} fds",
            open_fds(gateway.pid())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "out of descriptors: the gateway holds {}",
        open_fds(gateway.pid())
    );
    // A new connection waits in the listen backlog, answered once descriptors are free.
    let waiting = tokio::spawn(call(reqwest::Client::new(), gateway.1.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "a connection was served beyond the limit"
    );
    assert!(
        call(client, gateway.1.clone()).await,
        "an established client was not served"
    );
    assert!(
        gateway.0.id() > 0 && rss_kib(gateway.pid()) > 0,
        "the gateway died"
    );
    hogs.truncate(0);
    let freed = Instant::now();
    assert!(waiting.await.unwrap(), "the waiting client was not served");
    println!(
        "out of descriptors: accepting again {:?} after they were freed",
        freed.elapsed()
    );
    assert!(freed.elapsed() < Duration::from_secs(2));
    gateway
        .assert_unhurt(baseline, "after running out of descriptors")
        .await;
}

//! The gateway's own HTTP/2 client against tonic servers configured to push it to its
//! edges: windows far smaller than the messages, a concurrent stream limit below the
//! calls in flight, a backend that shuts down (GOAWAY) and comes back, backends that
//! break the protocol, and one that stops answering keepalive pings; each over `http://`
//! and `https://`.

use crate::harness;
// The HTTP/2 frames and HPACK of the hostile-backend suite; this file uses a few.
use crate::harness::hostile::frames;

use std::time::{Duration, Instant};

use a2a_gateway::proto::{send_message_response, SendMessageResponse};
use harness::*;
use serde_json::json;
use tonic::transport::Server;

async fn listener() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()
}

scheme_tests!(messages_larger_than_every_window_cross_both_ways);
async fn messages_larger_than_every_window_cross_both_ways(scheme: Scheme) {
    let backend = TestBackend::new(echo_message);
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    // 64 KiB windows: the 3 MiB request waits for the server's WINDOW_UPDATEs about 50
    // times; the 3 MiB reply exceeds the gateway's 2 MiB stream window.
    let server = Server::builder()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535);
    backend.spawn_on(scheme.server(server), listener, std::future::pending());
    let url = gateway(&scheme.url(addr), Settings::default()).await;
    let text: String = (0..3 << 20)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let reply = rpc(
        &url,
        &request(json!(1), "SendMessage", message_params(&text)),
    )
    .await;
    let echoed = reply["result"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no echo: {:.300}", reply.to_string()));
    assert_eq!(echoed.len(), text.len());
    assert!(echoed == text, "the echo differs from the request");
}

scheme_tests!(calls_beyond_the_servers_stream_limit_wait_for_a_slot);
async fn calls_beyond_the_servers_stream_limit_wait_for_a_slot(scheme: Scheme) {
    let backend = TestBackend::new(|request| {
        Answer::After(Duration::from_millis(50), Box::new(echo_message(request)))
    });
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    let server = Server::builder().max_concurrent_streams(Some(2));
    backend.spawn_on(scheme.server(server), listener, std::future::pending());
    let url = gateway(&scheme.url(addr), Settings::default()).await;
    // One call first, so the server's SETTINGS (the limit) are in before the burst.
    rpc(
        &url,
        &request(json!(0), "SendMessage", message_params("warm")),
    )
    .await;
    let started = Instant::now();
    let calls = (0..12).map(|i| {
        let url = url.clone();
        async move { rpc(&url, &request(json!(i), "SendMessage", message_params("x"))).await }
    });
    for reply in futures::future::join_all(calls).await {
        assert_eq!(
            reply["result"]["message"]["parts"][0]["text"], "x",
            "{reply}"
        );
    }
    // Twelve 50 ms calls: the first connection carries eight of them (the worker spills
    // onto a second connection past eight in flight), two at a time: at least four rounds.
    assert!(
        started.elapsed() >= Duration::from_millis(190),
        "{:?}: the stream limit was not honoured",
        started.elapsed()
    );
}

scheme_tests!(a_backend_that_goes_away_and_returns_is_reconnected);
async fn a_backend_that_goes_away_and_returns_is_reconnected(scheme: Scheme) {
    let backend = TestBackend::new(echo_message);
    let first = listener().await;
    let addr = first.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = backend.spawn_on(scheme.server(Server::builder()), first, async {
        let _ = stopped.await;
    });
    let url = gateway(&scheme.url(addr), Settings::default()).await;
    let hello = request(json!(1), "SendMessage", message_params("hello"));
    assert_eq!(
        rpc(&url, &hello).await["result"]["message"]["parts"][0]["text"],
        "hello"
    );

    // Graceful shutdown: GOAWAY, then the connection closes.
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("the backend did not shut down: the gateway kept its connection open")
        .unwrap();
    let reply = rpc(&url, &hello).await;
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert_eq!(
        reply["error"]["data"][0]["reason"], "BACKEND_UNAVAILABLE",
        "{reply}"
    );

    let again = tokio::net::TcpListener::bind(addr).await.unwrap();
    backend.spawn_on(
        scheme.server(Server::builder()),
        again,
        std::future::pending(),
    );
    assert_eq!(
        rpc(&url, &hello).await["result"]["message"]["parts"][0]["text"],
        "hello"
    );
}

scheme_tests!(a_backend_that_breaks_http2_gets_an_error_not_a_hang);
async fn a_backend_that_breaks_http2_gets_an_error_not_a_hang(scheme: Scheme) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An HTTP/1.1 server, and an HTTP/2 server that pushes although push is disabled.
    let push_promise = [0, 0, 4, 5, 4, 0, 0, 0, 1, 0, 0, 0, 2];
    for garbage in [&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], &push_promise[..]] {
        let listener = listener().await;
        let addr = listener.local_addr().unwrap();
        let garbage = garbage.to_vec();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let garbage = garbage.clone();
                tokio::spawn(async move {
                    let Some(mut socket) = scheme.accept(socket).await else {
                        return;
                    };
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    let _ = socket.write_all(&garbage).await;
                    // Keeps the connection open: only the gateway's parsing can end the call.
                    tokio::time::sleep(Duration::from_secs(30)).await;
                });
            }
        });
        let url = gateway(&scheme.url(addr), Settings::default()).await;
        let hello = request(json!(1), "SendMessage", message_params("hello"));
        let reply = tokio::time::timeout(Duration::from_secs(5), rpc(&url, &hello))
            .await
            .expect("the call hung on a broken backend");
        assert_eq!(reply["error"]["code"], -32603, "{reply}");
        assert_eq!(
            reply["error"]["data"][0]["reason"], "BACKEND_BAD_RESPONSE",
            "{reply}"
        );
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains("broke HTTP/2"), "{message}");
    }
}

scheme_tests!(a_backend_that_stops_answering_pings_fails_its_calls_at_once);
async fn a_backend_that_stops_answering_pings_fails_its_calls_at_once(scheme: Scheme) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Some(mut socket) = scheme.accept(socket).await else {
                    return;
                };
                // An empty SETTINGS frame, as a live HTTP/2 server sends; then silence.
                let _ = socket.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await;
                let mut sink = [0u8; 4096];
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
            });
        }
    });
    let backend = scheme.url(addr);
    let mut flags = vec![
        "--backend",
        &backend,
        "--backend-keepalive",
        "200ms",
        "--backend-keepalive-timeout",
        "200ms",
    ];
    let ca = scheme.ca_flags();
    flags.extend(ca.iter().map(String::as_str));
    let url = gateway_from_flags(&flags).await;
    let started = Instant::now();
    let hello = request(json!(1), "SendMessage", message_params("hello"));
    let reply = tokio::time::timeout(Duration::from_secs(5), rpc(&url, &hello))
        .await
        .expect("the call waited for its 30 s deadline");
    assert_eq!(
        reply["error"]["data"][0]["reason"], "BACKEND_CONNECTION_RESET",
        "{reply}"
    );
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("keepalive ping unanswered"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn replies_up_to_the_message_limit_pass_and_larger_ones_are_refused() {
    use prost::Message as _;
    let backend = TestBackend::new(echo_message);
    let addr = backend.spawn().await;
    let backend_url = format!("http://{addr}");
    let url =
        gateway_from_flags(&["--backend", &backend_url, "--backend-max-message", "1KiB"]).await;
    // The text length whose echoed reply is exactly 1024 bytes of protobuf.
    let reply_len = |text: &str| {
        let params: a2a_gateway::proto::SendMessageRequest =
            serde_json::from_value(message_params(text)).unwrap();
        SendMessageResponse {
            payload: params.message.map(send_message_response::Payload::Message),
        }
        .encoded_len()
    };
    let at_limit = (0..1024)
        .map(|n| "x".repeat(n))
        .find(|text| reply_len(text) == 1024)
        .expect("a text whose reply is 1024 bytes");
    let reply = rpc(
        &url,
        &request(json!(1), "SendMessage", message_params(&at_limit)),
    )
    .await;
    assert_eq!(
        reply["result"]["message"]["parts"][0]["text"], at_limit,
        "{reply:.200}"
    );
    let over = format!("{at_limit}x");
    assert_eq!(reply_len(&over), 1025);
    let reply = rpc(
        &url,
        &request(json!(2), "SendMessage", message_params(&over)),
    )
    .await;
    assert_eq!(reply["error"]["code"], -32603, "{reply:.300}");
    assert_eq!(
        reply["error"]["data"][0]["reason"], "BACKEND_BAD_RESPONSE",
        "{reply:.300}"
    );
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("1025 bytes exceeds the limit of 1024"),
        "{message}"
    );
}

/// A scripted HTTP/2 backend that answers every request head with a good reply and hands
/// over each head's HPACK block, to see how the gateway encodes its headers.
async fn header_block_backend() -> (String, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    let (blocks_tx, blocks) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut preface = [0u8; 24];
        socket.read_exact(&mut preface).await.unwrap();
        socket.write_all(&frames::settings(&[])).await.unwrap();
        loop {
            let mut head = [0u8; 9];
            if socket.read_exact(&mut head).await.is_err() {
                return;
            }
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            socket.read_exact(&mut payload).await.unwrap();
            let reply = match kind {
                frames::SETTINGS if flags & frames::ACK == 0 => frames::settings_ack(),
                frames::PING if flags & frames::ACK == 0 => frames::ping(frames::ACK, &payload),
                frames::HEADERS => {
                    assert_ne!(flags & 0x4, 0, "a request head in one frame (END_HEADERS)");
                    let _ = blocks_tx.send(payload);
                    frames::good_reply(stream)
                }
                _ => continue,
            };
            socket.write_all(&reply).await.unwrap();
        }
    });
    (format!("http://{addr}"), blocks)
}

/// The representations of every head `blocks` received.
fn heads_of(
    blocks: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
) -> Vec<Vec<frames::hpack::Representation>> {
    let mut heads = Vec::new();
    while let Ok(block) = blocks.try_recv() {
        heads.push(frames::hpack::representations(&block).expect("a well-formed header block"));
    }
    heads
}

/// Per-call header values (request id, trace context, deadline) reach the backend as
/// never-indexed literals (RFC 7541 §6.2.3), so after the first call no request head adds
/// to the connection's HPACK table: the fixed headers stay indexed, one byte each.
#[tokio::test]
async fn per_call_headers_stay_out_of_the_hpack_table() {
    use frames::hpack::Representation;
    let (backend, mut blocks) = header_block_backend().await;
    let url = gateway(&backend, Settings::default()).await;
    let client = reqwest::Client::new();
    for call in 0..20 {
        let body = request(json!(call), "SendMessage", message_params("hi"));
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .header("x-request-id", format!("request-{call:04}"))
            .header(
                "traceparent",
                format!("00-{:032x}-{:016x}-01", call + 1, call + 1),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        let reply: serde_json::Value = response.json().await.unwrap();
        assert!(reply["result"]["message"].is_object(), "{reply}");
    }
    let heads = heads_of(&mut blocks);
    assert_eq!(heads.len(), 20);
    for (call, head) in heads.iter().enumerate().skip(1) {
        let count = |kind| head.iter().filter(|r| **r == kind).count();
        // x-request-id, traceparent, grpc-timeout.
        assert_eq!(
            count(Representation::NeverIndexed),
            3,
            "call {call}: {head:?}"
        );
        assert_eq!(
            count(Representation::IncrementalIndexing),
            0,
            "call {call}: {head:?}"
        );
        // `:path`: h2 never indexes its value.
        assert_eq!(
            count(Representation::WithoutIndexing),
            1,
            "call {call}: {head:?}"
        );
    }
    assert!(
        heads[0].contains(&Representation::IncrementalIndexing),
        "the first head indexes the fixed headers: {:?}",
        heads[0]
    );
}

/// Credentials reach the agent as never-indexed literals, so no HPACK table (the agent's,
/// or an intermediary's that re-encodes) keeps them: `Authorization` always, a forwarded
/// header marked `--sensitive-header`, and a `--set-header` marked so. The same values
/// every call: unmarked, they would be indexed once and sent as an index from then on,
/// as the unmarked control header is.
#[tokio::test]
async fn credentials_are_never_indexed_toward_the_agent() {
    use frames::hpack::Representation;
    let strings = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let forward = strings(&["x-api-token", "x-plain"]);
    let set = strings(&["x-set-secret=s3cret-constant"]);
    // Per call: (marked sensitive, NeverIndexed expected). The request id and the deadline
    // are never indexed in both; Authorization always; the two marked headers only when
    // marked.
    for (sensitive, never_indexed) in [(strings(&["x-api-token", "x-set-secret"]), 5), (vec![], 3)]
    {
        let (backend, mut blocks) = header_block_backend().await;
        let rules = a2a_gateway::protocol::params::HeaderRules {
            forward: &forward,
            set: &set,
            remove: &[],
            identity: &[],
            sensitive: &sensitive,
            fixed_tenant: false,
            caller: &[],
            consumed: &[],
        };
        let settings = Settings {
            forward: a2a_gateway::protocol::params::ForwardPolicy::with_rules(&rules).unwrap(),
            ..Settings::default()
        };
        let url = gateway(&backend, settings).await;
        let client = reqwest::Client::new();
        for call in 0..5 {
            let body = request(json!(call), "SendMessage", message_params("hi"));
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .header("a2a-version", "1.0")
                .header("authorization", "Bearer same-token-every-call")
                .header("x-api-token", "same-api-token")
                .header("x-plain", "visible-value")
                .body(body)
                .send()
                .await
                .unwrap();
            let reply: serde_json::Value = response.json().await.unwrap();
            assert!(reply["result"]["message"].is_object(), "{reply}");
        }
        let heads = heads_of(&mut blocks);
        assert_eq!(heads.len(), 5);
        for (call, head) in heads.iter().enumerate() {
            let count = |kind| head.iter().filter(|r| **r == kind).count();
            assert_eq!(
                count(Representation::NeverIndexed),
                never_indexed,
                "call {call}, marked {sensitive:?}: {head:?}"
            );
            if call > 0 {
                // The control header (and the unmarked ones) come from the table.
                assert_eq!(count(Representation::IncrementalIndexing), 0, "{head:?}");
            }
        }
    }
}

/// A worker serves calls on one connection per backend until 8 are in flight on it, then
/// spreads them over more (at most 4): a burst of 20 held calls, started one after the
/// other, uses three connections (8 + 8 + 4); 8 calls at a time stay on one; the extra
/// connections close once idle.
#[tokio::test]
async fn busy_connections_spill_calls_onto_a_few_more() {
    use a2a_gateway::proto::a2a_service_server::A2aServiceServer;
    use futures::StreamExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let backend = TestBackend::new(|request| {
        Answer::After(Duration::from_millis(600), Box::new(echo_message(request)))
    });
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).inspect(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    tokio::spawn(
        Server::builder()
            .add_service(A2aServiceServer::new(backend.clone()))
            .serve_with_incoming(incoming),
    );
    let url = gateway(&format!("http://{addr}"), Settings::default()).await;
    let burst = |calls: usize| {
        let url = url.clone();
        async move {
            let calls = (0..calls).map(|i| {
                let url = url.clone();
                async move {
                    // One after the other, so each call sees those before it in flight.
                    tokio::time::sleep(Duration::from_millis(20 * i as u64)).await;
                    let body = request(json!(i), "SendMessage", message_params("x"));
                    rpc(&url, &body).await
                }
            });
            for reply in futures::future::join_all(calls).await {
                assert!(reply["result"]["message"].is_object(), "{reply}");
            }
        }
    };
    burst(8).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "8 calls in flight share one connection"
    );
    burst(20).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "20 calls: 8 + 8 + 4");
    burst(40).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        4,
        "never more than 4 connections"
    );
    // Idle for longer than spares live (2 to 4 s): the three spares closed, the first
    // connection stayed; 20 calls open two spares again.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    burst(20).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        6,
        "idle spares closed, the first connection kept"
    );
}

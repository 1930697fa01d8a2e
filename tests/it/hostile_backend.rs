//! Hostile gRPC backends: a scripted HTTP/2 server (raw frames, hand-encoded HPACK; over
//! cleartext and over TLS with ALPN `h2`) misbehaves in one way per case, in front of the
//! real gateway binary (`--timeout 5s --workers 2 --keepalive 1s`). Every case must end in
//! a defined JSON-RPC answer within its time bound, with the gateway alive afterwards
//! (`/healthz`, and the next call served), its peak RSS bounded (and its CPU time and open
//! descriptors where the attack aims at those).
//!
//! One row of `hostile_cases!` is one case; it becomes the tests `http::<name>` and
//! `https::<name>`. All selected cases run in parallel on a runner (`harness/hostile.rs`);
//! each test waits for its verdict. `cargo test --test it hostile_backend:: -- --nocapture`
//! prints what each case observed (answer, time, peak RSS, CPU), passed or not.

use crate::harness::hostile;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use hostile::frames::*;
use hostile::Call::*;
use hostile::Expect::*;
use hostile::Hostile::*;
use hostile::{Case, Peer, DEADLINE};

type Scripted<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A hostile connection's transport failed: the backend broke HTTP/2 (or HPACK, or a
/// limit), and the client tore the stream or connection down. Either is defensible: h2
/// reports some violations as a stream reset and some as a lost connection.
const PROTOCOL: &[&str] = &["BACKEND_BAD_RESPONSE", "BACKEND_CONNECTION_RESET"];
/// Well-formed HTTP/2 carrying a reply the gateway cannot use.
const BAD: &[&str] = &["BACKEND_BAD_RESPONSE"];
const DEADLINE_ONLY: &[&str] = &["BACKEND_DEADLINE_EXCEEDED"];
/// The backend refused the call without processing it (GOAWAY, REFUSED_STREAM).
const REFUSED: &[&str] = &["BACKEND_UNAVAILABLE", "BACKEND_CONNECTION_RESET"];
/// Not an HTTP/2 server at all.
const NOT_HTTP2: &[&str] = &["BACKEND_BAD_RESPONSE", "BACKEND_UNAVAILABLE"];
/// No HTTP/2 handshake ever completes: the call deadline or the connect deadline (both 5 s).
const SILENT: &[&str] = &["BACKEND_DEADLINE_EXCEEDED", "BACKEND_UNAVAILABLE"];
/// The backend does not read: the call cannot finish before its deadline, unless the
/// client gives up the flooded connection first.
const STALLED: &[&str] = &["BACKEND_DEADLINE_EXCEEDED", "BACKEND_CONNECTION_RESET"];

/// Peak RSS bound. The gateway idles at ~12 MiB (debug build); what a backend may make it
/// hold legitimately is bounded by the HTTP/2 windows (2 MiB per stream, 5 MiB per
/// connection, one connection per worker), the 16 KiB header list limit h2 enforces and
/// SSE buffers. 48 MiB leaves room for allocator slack and catches every blow-up measured
/// on the hand-written client (58 MiB to 2.6 GiB).
const RSS_MIB: u64 = 48;
/// Answered within the deadline plus 1 s.
const WITHIN: Duration = Duration::from_millis(DEADLINE.as_millis() as u64 + 1000);
/// A case that has to wait for the deadline must not answer much earlier.
const AT_DEADLINE: Duration = Duration::from_millis(DEADLINE.as_millis() as u64 - 500);

/// The defaults of a row.
const ROW: Case = Case {
    name: "",
    script: silent,
    hostile: First,
    call: Unary,
    expect: Fault(PROTOCOL),
    within: WITHIN,
    not_before: Duration::ZERO,
    rss_mib: RSS_MIB,
    cpu: None,
};

macro_rules! hostile_cases {
    ($( $name:ident { $($field:tt)* } )*) => {
        const CASES: &[Case] = &[ $( Case { name: stringify!($name), $($field)* }, )* ];
        /// Where the tests are (the runner matches their names against the command line).
        const SUITE: &str = module_path!();

        mod http {
            $( #[test] fn $name() { super::hostile::verdict(super::SUITE, super::CASES, stringify!($name), super::hostile::Scheme::Http) } )*
        }

        mod https {
            $( #[test] fn $name() { super::hostile::verdict(super::SUITE, super::CASES, stringify!($name), super::hostile::Scheme::Https) } )*
        }
    };
}

hostile_cases! {
    // One 4 KB HPACK table entry referenced 250,000 times: ~1 GB of headers from 250 KB.
    hpack_bomb { script: hpack_bomb, ..ROW }
    // A gRPC length prefix of 4 GiB (over the 64 MiB message limit), bytes sent as fast as
    // the windows allow: rejected at the prefix, never buffered.
    length_prefix_4gib { script: length_prefix_4gib, expect: Fault(BAD), ..ROW }
    // Zero-length CONTINUATION frames without end: h2 gives up after a few.
    continuation_flood { script: continuation_flood, cpu: Some(Duration::from_secs(1)), ..ROW }
    // The same on both workers at once: both must stay responsive.
    continuation_flood_both_workers {
        script: continuation_flood, hostile: Every, call: BothWorkers,
        cpu: Some(Duration::from_secs(1)), ..ROW
    }
    // A dynamic table size update far above the client's SETTINGS_HEADER_TABLE_SIZE, then
    // 256 MiB of indexed entries.
    hpack_table_growth { script: hpack_table_growth, ..ROW }
    // PING and SETTINGS without end while never reading the client's acknowledgements.
    // Alone (a CPU case), so the flood runs at full speed whatever else runs.
    ping_settings_flood {
        script: ping_settings_flood, expect: Fault(STALLED), cpu: Some(Duration::from_secs(2)), ..ROW
    }
    // A stream whose events ignore flow control without end while the SSE client does not
    // read: the client must not buffer beyond its windows.
    ignores_flow_control {
        script: ignores_flow_control, call: StalledStream, ..ROW
    }
    // One burst of the stream's window + 32 MiB of events while the SSE client does not read.
    data_beyond_window {
        script: data_beyond_window, call: StalledStream, ..ROW
    }
    // 30,000 distinct response header names (~400 KB of header list).
    many_header_names { script: many_header_names, ..ROW }
    // GOAWAY(last_stream_id=0) right after SETTINGS on every connection.
    goaway_every_connection { script: goaway_at_once, hostile: Every, expect: Fault(REFUSED), ..ROW }
    // The same for 200 calls: no socket may leak.
    goaway_no_descriptor_leak {
        script: goaway_at_once, hostile: Every, call: Repeated(200), expect: Fault(REFUSED), ..ROW
    }
    // A PING of 4 bytes (must be 8: FRAME_SIZE_ERROR).
    ping_wrong_length { script: ping_wrong_length, ..ROW }
    // A DATA frame one byte longer than the client's SETTINGS_MAX_FRAME_SIZE.
    oversize_frame { script: oversize_frame, ..ROW }
    // Trailers without grpc-status.
    missing_grpc_status { script: missing_grpc_status, expect: Fault(BAD), ..ROW }
    grpc_status_not_a_number { script: grpc_status_abc, expect: Fault(BAD), ..ROW }
    grpc_status_out_of_range { script: grpc_status_huge, expect: Fault(BAD), ..ROW }
    // NOT_FOUND with grpc-status-details-bin that is not base64: the status still maps
    // (-32001) and error.data says the details were malformed.
    status_details_bad_base64 { script: status_details_bad_base64, expect: Code(-32001), ..ROW }
    // 10 MB of grpc-status-details-bin: over the header list limit.
    status_details_10mb { script: status_details_10mb, ..ROW }
    // An HTTP/1.1 503 with an HTML body instead of HTTP/2.
    http1_503 { script: http1_503, hostile: Every, expect: Fault(NOT_HTTP2), ..ROW }
    // Accepts and never sends a byte: answered at the deadline.
    silent { script: silent, expect: Fault(SILENT), not_before: AT_DEADLINE, ..ROW }
    // RST_STREAM(REFUSED_STREAM) on every stream.
    refused_stream { script: refused_stream, hostile: Every, expect: Fault(REFUSED), ..ROW }
    // SETTINGS_INITIAL_WINDOW_SIZE 0 and never a WINDOW_UPDATE: the request body (100 KB,
    // over the 64 KiB sendable before SETTINGS) cannot be sent; the deadline still fires.
    zero_window {
        script: zero_window, call: LargeUnary, expect: Fault(DEADLINE_ONLY),
        not_before: AT_DEADLINE, ..ROW
    }
    // DATA on an odd stream the client never opened.
    frame_on_unopened_stream { script: frame_on_unopened_stream, ..ROW }
    // HEADERS on an even (server-initiated) stream without PUSH_PROMISE.
    frame_on_even_stream { script: frame_on_even_stream, ..ROW }
    // HPACK index 200 while the dynamic table is empty.
    invalid_hpack_index { script: invalid_hpack_index, ..ROW }
    // Serves one call well, then closes the idle connection without GOAWAY (as a crashed
    // backend would): the next call must reconnect, not fail.
    closes_idle_connection { script: closes_idle_connection, expect: Reply, ..ROW }
    // The first event, then nothing: the stream stays open with keepalive comments.
    quiet_stream { script: quiet_stream, call: QuietStream, expect: OpenStream, ..ROW }
    // A stream whose first event never comes: a JSON-RPC error at the first-event
    // deadline (the unary --timeout).
    first_event_never {
        script: first_event_never, call: Stream, expect: Fault(DEADLINE_ONLY),
        not_before: AT_DEADLINE, ..ROW
    }
}

// ---- the scripts: one per hostile behaviour ----------------------------------------------

/// SETTINGS, then the stream id of the first request.
async fn greet(p: &mut Peer) -> Option<u32> {
    if !p.hello(&[]).await {
        return None;
    }
    p.request().await
}

/// HEADERS with `block` and no END_HEADERS (CONTINUATION frames are to follow).
fn open_block(stream: u32, block: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    head(&mut out, block.len(), HEADERS, 0, stream);
    out.extend_from_slice(block);
    out
}

/// Sends `batch` until the client stops taking it.
async fn forever(p: &Peer, batch: &[u8]) {
    while p.send(batch).await {}
}

fn silent(p: &mut Peer) -> Scripted<'_> {
    // Reads (the reader task) but never writes.
    Box::pin(async move { while p.frame().await.is_some() {} })
}

fn hpack_bomb(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        let mut block = response_head();
        // 6 + 4000 + 32 bytes: fits the default 4096-byte table.
        hpack::literal_indexed(&mut block, b"x-bomb", &[b'a'; 4000]);
        block.resize(block.len() + 250_000, 0x80 | hpack::FIRST_DYNAMIC as u8);
        let mut reply = headers(s, &block, false);
        reply.extend(data(s, &grpc_message(&reply_message()), false));
        reply.extend(headers(s, &fields(&[("grpc-status", "0")]), true));
        p.send(&reply).await;
    })
}

fn length_prefix_4gib(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        p.send(&headers(s, &response_head(), false)).await;
        p.send_within_window(s, &[0, 0xff, 0xff, 0xff, 0xff], 4 << 30)
            .await;
    })
}

fn continuation_flood(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        if !p.send(&open_block(s, &response_head())).await {
            return;
        }
        let batch: Vec<u8> = (0..4096)
            .flat_map(|_| frame(CONTINUATION, 0, s, &[]))
            .collect();
        forever(p, &batch).await;
    })
}

fn hpack_table_growth(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        let mut block = Vec::new();
        hpack::size_update(&mut block, 1 << 30);
        block.extend(response_head());
        if !p.send(&open_block(s, &block)).await {
            return;
        }
        let value = vec![b'v'; 16_000];
        for i in 0..16_384 {
            let mut entry = Vec::new();
            hpack::literal_indexed(&mut entry, format!("x-grow-{i}").as_bytes(), &value);
            if !p.send(&frame(CONTINUATION, 0, s, &entry)).await {
                return;
            }
        }
        let mut rest = frame(CONTINUATION, END_HEADERS, s, &[]);
        rest.extend(data(s, &grpc_message(&reply_message()), false));
        rest.extend(headers(s, &fields(&[("grpc-status", "0")]), true));
        p.send(&rest).await;
    })
}

fn ping_settings_flood(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(_) = greet(p).await else { return };
        p.stop_reading();
        let mut batch = Vec::new();
        for i in 0..2048u64 {
            batch.extend(ping(0, &i.to_be_bytes()));
            batch.extend(settings(&[]));
        }
        forever(p, &batch).await;
    })
}

/// Response head and the first event; the stream id.
async fn first_event(p: &mut Peer) -> Option<u32> {
    let s = greet(p).await?;
    let mut out = headers(s, &response_head(), false);
    out.extend(data(s, &grpc_message(&reply_message()), false));
    p.send(&out).await.then_some(s)
}

/// DATA frames of 16 KiB, each one whole event of ~16 KB (few SSE frames per MiB, so
/// reading what the gateway buffered legitimately is quick).
fn event_frames(stream: u32, frames: usize) -> Vec<u8> {
    let event = grpc_message(&big_message(MIN_FRAME - 64));
    let per_frame = MIN_FRAME / event.len();
    let payload = event.repeat(per_frame);
    (0..frames)
        .flat_map(|_| data(stream, &payload, false))
        .collect()
}

fn ignores_flow_control(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = first_event(p).await else {
            return;
        };
        // 1 GiB at most, in 16 MiB writes, never looking at the windows.
        let batch = event_frames(s, 1024);
        for _ in 0..64 {
            if !p.send(&batch).await {
                return;
            }
        }
    })
}

fn data_beyond_window(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = first_event(p).await else {
            return;
        };
        let frames = (p.initial_window() + (32 << 20)) / MIN_FRAME + 1;
        p.send(&event_frames(s, frames)).await;
    })
}

fn many_header_names(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        let mut block = response_head();
        for i in 0..30_000 {
            hpack::literal(&mut block, format!("x-h-{i}").as_bytes(), b"v");
        }
        let mut reply = headers(s, &block, false);
        reply.extend(data(s, &grpc_message(&reply_message()), false));
        reply.extend(headers(s, &fields(&[("grpc-status", "0")]), true));
        p.send(&reply).await;
    })
}

fn goaway_at_once(p: &mut Peer) -> Scripted<'_> {
    // The connection stays open afterwards: closing it is the client's job.
    Box::pin(async move {
        let mut out = settings(&[]);
        out.extend(goaway(0, 0));
        p.send(&out).await;
    })
}

fn ping_wrong_length(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(_) = greet(p).await else { return };
        p.send(&ping(0, &[1, 2, 3, 4])).await;
    })
}

fn oversize_frame(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        let mut out = headers(s, &response_head(), false);
        let mut payload = grpc_message(&reply_message());
        payload.resize(p.max_frame() + 1, 0);
        out.extend(data(s, &payload, false));
        p.send(&out).await;
    })
}

/// A whole reply whose trailers are `trailers`.
async fn reply_with_trailers(p: &mut Peer, trailers: &[(&str, &str)]) {
    let Some(s) = greet(p).await else { return };
    let mut out = headers(s, &response_head(), false);
    out.extend(data(s, &grpc_message(&reply_message()), false));
    out.extend(headers(s, &fields(trailers), true));
    p.send(&out).await;
}

fn missing_grpc_status(p: &mut Peer) -> Scripted<'_> {
    Box::pin(reply_with_trailers(p, &[("x-note", "no status")]))
}

fn grpc_status_abc(p: &mut Peer) -> Scripted<'_> {
    Box::pin(reply_with_trailers(p, &[("grpc-status", "abc")]))
}

fn grpc_status_huge(p: &mut Peer) -> Scripted<'_> {
    Box::pin(reply_with_trailers(p, &[("grpc-status", "99999999999")]))
}

/// A trailers-only reply (one HEADERS with END_STREAM) of `fields` after the head.
async fn trailers_only(p: &mut Peer, extra: &[(&str, &str)]) {
    let Some(s) = greet(p).await else { return };
    let mut block = response_head();
    block.extend(fields(extra));
    p.send(&headers(s, &block, true)).await;
}

fn status_details_bad_base64(p: &mut Peer) -> Scripted<'_> {
    Box::pin(trailers_only(
        p,
        &[
            ("grpc-status", "5"),
            ("grpc-message", "no such task"),
            ("grpc-status-details-bin", "!!!not base64!!!"),
        ],
    ))
}

fn status_details_10mb(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        // 10 MB of details, base64 without padding: 13.3 MB of header value.
        let details = "A".repeat(10_000_000 / 3 * 4);
        let extra = [
            ("grpc-status", "5"),
            ("grpc-message", "huge"),
            ("grpc-status-details-bin", details.as_str()),
        ];
        trailers_only(p, &extra).await;
    })
}

fn http1_503(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let body = "<html><body><h1>503 Service Unavailable</h1></body></html>\n";
        let response = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        p.send(response.as_bytes()).await;
        p.close().await;
    })
}

fn refused_stream(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        if !p.hello(&[]).await {
            return;
        }
        while let Some(s) = p.request().await {
            if !p.send(&rst_stream(s, REFUSED_STREAM)).await {
                return;
            }
        }
    })
}

fn zero_window(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        if p.hello(&[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]).await {
            while p.frame().await.is_some() {}
        }
    })
}

fn frame_on_unopened_stream(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        p.send(&data(s + 100, &grpc_message(&reply_message()), false))
            .await;
    })
}

fn frame_on_even_stream(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(_) = greet(p).await else { return };
        p.send(&headers(2, &response_head(), false)).await;
    })
}

fn invalid_hpack_index(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        let mut block = Vec::new();
        hpack::indexed(&mut block, hpack::STATUS_200);
        hpack::indexed(&mut block, 200);
        p.send(&headers(s, &block, false)).await;
    })
}

fn closes_idle_connection(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        p.send(&good_reply(s)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        p.close().await;
    })
}

fn quiet_stream(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        if first_event(p).await.is_some() {
            while p.frame().await.is_some() {}
        }
    })
}

fn first_event_never(p: &mut Peer) -> Scripted<'_> {
    Box::pin(async move {
        let Some(s) = greet(p).await else { return };
        p.send(&headers(s, &response_head(), false)).await;
        while p.frame().await.is_some() {}
    })
}

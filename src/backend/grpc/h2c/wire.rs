//! A client HTTP/2 connection (RFC 9113) cut to what a gRPC client needs: requests whose
//! whole body is known when they start, responses read as headers, data and trailers.
//!
//! Why not the `h2` crate: its generic stream state machine, HPACK encoder and connection
//! task were about half of the gateway's instructions per unary call (benches/README.md).
//! Here a call locks the connection once to queue its frames and once per received piece;
//! request heads are mostly precomputed bytes (HPACK literals without indexing, so the
//! encoder keeps no state); one writer task flushes everything queued in one write, one
//! reader task parses frames and wakes the calls.
//!
//! Covered: SETTINGS (with ACK), PING (answered; keepalive pings with a timeout), GOAWAY
//! (streams the server never processed fail as refused, so the caller may retry),
//! RST_STREAM both ways (a dropped call cancels its stream), flow control both ways
//! (sending waits for window; the connection window is returned as data arrives, a
//! stream's window as its reader consumes it), MAX_CONCURRENT_STREAMS (calls wait for a
//! slot), padding, priority fields, CONTINUATION, peer MAX_FRAME_SIZE. Server push is
//! disabled in our SETTINGS and refused as a protocol error.

use std::collections::HashMap;
use std::fmt;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
const PROTOCOL_ERROR: u32 = 1;
const FLOW_CONTROL_ERROR: u32 = 3;
const FRAME_SIZE_ERROR: u32 = 6;
const REFUSED_STREAM: u32 = 7;
const CANCEL: u32 = 8;
/// The largest frame we accept: the protocol's default, never raised in our SETTINGS.
const MAX_FRAME: usize = 16_384;
/// Largest header block we accept from the server.
const MAX_HEADER_BLOCK: usize = 1 << 20;
const DEFAULT_WINDOW: i64 = 65_535;
const MAX_WINDOW: i64 = (1 << 31) - 1;

/// Settings of this client.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub stream_window: u32,
    pub connection_window: u32,
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
}

/// Why a stream or the connection failed.
#[derive(Clone, Debug)]
pub enum Error {
    /// The server did not process the stream (GOAWAY below its id, or REFUSED_STREAM):
    /// sending it again, on another connection, is safe.
    Refused,
    /// The server reset the stream with this HTTP/2 error code.
    Reset(u32),
    /// The connection is gone (I/O error, closed, protocol error, keepalive timeout).
    Closed(Arc<str>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Refused => f.write_str("stream refused by the server before processing"),
            Error::Reset(code) => write!(f, "stream reset by the server ({})", code_name(*code)),
            Error::Closed(why) => f.write_str(why),
        }
    }
}

fn code_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES
        .get(code as usize)
        .map_or_else(|| format!("error code {code}"), |name| (*name).to_owned())
}

/// A response head: status and headers (pseudo-headers removed).
pub struct Head {
    pub status: StatusCode,
    pub headers: HeaderMap,
}

/// One connection; clones share it.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer task when frames are queued.
    queued: Notify,
    config: Config,
}

struct State {
    /// Frames waiting for the writer task.
    out: Vec<u8>,
    streams: HashMap<u32, Slot>,
    next_id: u32,
    /// Set once the connection takes no new streams; `dead` once it is gone.
    draining: bool,
    dead: Option<Error>,
    send_window: i64,
    peer_stream_window: i64,
    peer_max_frame: usize,
    peer_max_streams: usize,
    /// Calls waiting for a stream slot under the peer's MAX_CONCURRENT_STREAMS.
    waiting: Vec<Waker>,
    /// Received DATA not yet returned to the connection window.
    recv_unacked: u32,
}

#[derive(Default)]
struct Slot {
    /// The final (non-1xx) head arrived; HEADERS after it are trailers.
    head_seen: bool,
    head: Option<Head>,
    data: std::collections::VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    /// END_STREAM received.
    ended: bool,
    error: Option<Error>,
    waker: Option<Waker>,
    send_window: i64,
    /// Request body still to send, waiting for window; END_STREAM goes with its last byte.
    pending: Option<Bytes>,
    consumed_unacked: u32,
}

impl Slot {
    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

impl Connection {
    /// Starts HTTP/2 on `tcp` (prior knowledge: cleartext, no upgrade) and spawns the
    /// connection's reader and writer tasks on the current runtime.
    pub fn start(tcp: TcpStream, config: Config) -> Connection {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(PREFACE);
        let settings = [
            (0x2u16, 0u32), // ENABLE_PUSH
            (0x4, config.stream_window),
        ];
        frame_head(&mut out, settings.len() * 6, SETTINGS, 0, 0);
        for (id, value) in settings {
            out.put_u16(id);
            out.put_u32(value);
        }
        let grow = config
            .connection_window
            .saturating_sub(DEFAULT_WINDOW as u32);
        if grow > 0 {
            window_update(&mut out, 0, grow);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                out,
                streams: HashMap::new(),
                next_id: 1,
                draining: false,
                dead: None,
                send_window: DEFAULT_WINDOW,
                peer_stream_window: DEFAULT_WINDOW,
                peer_max_frame: MAX_FRAME,
                peer_max_streams: usize::MAX,
                waiting: Vec::new(),
                recv_unacked: 0,
            }),
            queued: Notify::new(),
            config,
        });
        let (read, write) = tcp.into_split();
        tokio::spawn(write_loop(shared.clone(), write));
        tokio::spawn(read_loop(shared.clone(), read));
        shared.queued.notify_one();
        Connection { shared }
    }

    /// Whether new streams may still be opened here.
    pub fn is_open(&self) -> bool {
        let state = self.shared.lock();
        state.dead.is_none() && !state.draining
    }

    /// Opens a stream: queues `head` (an HPACK block) and `body` with END_STREAM. Waits
    /// while the server's concurrent stream limit is reached.
    pub async fn send(&self, head: &[u8], body: Bytes) -> Result<Stream, Error> {
        let id = poll_fn(|cx| {
            let mut state = self.shared.lock();
            if let Some(err) = &state.dead {
                return Poll::Ready(Err(err.clone()));
            }
            if state.draining || state.next_id > MAX_WINDOW as u32 {
                return Poll::Ready(Err(Error::Refused));
            }
            if state.streams.len() >= state.peer_max_streams {
                state.waiting.push(cx.waker().clone());
                return Poll::Pending;
            }
            let id = state.next_id;
            state.next_id += 2;
            let max_frame = state.peer_max_frame;
            header_frames(&mut state.out, id, head, max_frame);
            let send_window = state.peer_stream_window;
            state.streams.insert(
                id,
                Slot {
                    send_window,
                    pending: Some(body.clone()),
                    ..Slot::default()
                },
            );
            state.flush_pending(id);
            Poll::Ready(Ok(id))
        })
        .await?;
        self.shared.queued.notify_one();
        Ok(Stream {
            shared: self.shared.clone(),
            id,
            done: false,
        })
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Sends as much of stream `id`'s pending body as the windows allow.
    fn flush_pending(&mut self, id: u32) {
        let max_frame = self.peer_max_frame;
        let Some(slot) = self.streams.get_mut(&id) else {
            return;
        };
        let Some(mut body) = slot.pending.take() else {
            return;
        };
        loop {
            let allowed = self.send_window.min(slot.send_window).max(0) as usize;
            let len = body.len().min(allowed).min(max_frame);
            if len == 0 && !body.is_empty() {
                slot.pending = Some(body);
                return;
            }
            let chunk = body.split_to(len);
            let last = body.is_empty();
            frame_head(
                &mut self.out,
                len,
                DATA,
                if last { END_STREAM } else { 0 },
                id,
            );
            self.out.extend_from_slice(&chunk);
            self.send_window -= len as i64;
            slot.send_window -= len as i64;
            if last {
                return;
            }
        }
    }

    fn flush_all_pending(&mut self) {
        let ids: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, slot)| slot.pending.is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.flush_pending(id);
        }
    }

    /// Marks the connection gone: every stream fails and every waiter wakes.
    fn fail(&mut self, err: Error) {
        if self.dead.is_some() {
            return;
        }
        tracing::debug!(error = %err, "backend HTTP/2 connection closed");
        for slot in self.streams.values_mut() {
            if slot.error.is_none() && !slot.ended {
                slot.error = Some(err.clone());
            }
            slot.wake();
        }
        for waker in self.waiting.drain(..) {
            waker.wake();
        }
        self.dead = Some(err);
    }

    fn forget(&mut self, id: u32) {
        self.streams.remove(&id);
        for waker in self.waiting.drain(..) {
            waker.wake();
        }
    }
}

/// One request's response, read in order: `head`, then `data` until `None`, then
/// `trailers`. Dropping it before the end cancels the stream (RST_STREAM CANCEL).
pub struct Stream {
    shared: Arc<Shared>,
    id: u32,
    done: bool,
}

impl Stream {
    /// The response status and headers.
    pub async fn head(&mut self) -> Result<Head, Error> {
        poll_fn(|cx| {
            let mut state = self.shared.lock();
            let Some(slot) = state.streams.get_mut(&self.id) else {
                return Poll::Ready(Err(Error::Closed("the stream is no longer tracked".into())));
            };
            if let Some(head) = slot.head.take() {
                return Poll::Ready(Ok(head));
            }
            if let Some(err) = &slot.error {
                return Poll::Ready(Err(err.clone()));
            }
            if slot.ended {
                return Poll::Ready(Err(Error::Closed(
                    "the server ended the stream without a response head".into(),
                )));
            }
            slot.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// The next piece of the response body; `None` at its end.
    pub async fn data(&mut self) -> Option<Result<Bytes, Error>> {
        let stream_window = self.shared.config.stream_window;
        let next = poll_fn(|cx| {
            let mut state = self.shared.lock();
            let state = &mut *state;
            let Some(slot) = state.streams.get_mut(&self.id) else {
                return Poll::Ready(None);
            };
            if let Some(chunk) = slot.data.pop_front() {
                // The stream's window comes back as its reader consumes, so a slow reader
                // holds the server back instead of buffering without bound.
                slot.consumed_unacked += chunk.len() as u32;
                if !slot.ended && slot.consumed_unacked >= stream_window / 2 {
                    window_update(&mut state.out, self.id, slot.consumed_unacked);
                    slot.consumed_unacked = 0;
                    return Poll::Ready(Some((Ok(chunk), true)));
                }
                return Poll::Ready(Some((Ok(chunk), false)));
            }
            if let Some(err) = &slot.error {
                return Poll::Ready(Some((Err(err.clone()), false)));
            }
            if slot.ended {
                return Poll::Ready(None);
            }
            slot.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
        match next? {
            (chunk, true) => {
                self.shared.queued.notify_one();
                Some(chunk)
            }
            (chunk, false) => Some(chunk),
        }
    }

    /// The trailers, once the body has been read; `None` if the server sent none.
    pub async fn trailers(&mut self) -> Result<Option<HeaderMap>, Error> {
        let result = poll_fn(|cx| {
            let mut state = self.shared.lock();
            let Some(slot) = state.streams.get_mut(&self.id) else {
                return Poll::Ready(Ok(None));
            };
            if let Some(trailers) = slot.trailers.take() {
                return Poll::Ready(Ok(Some(trailers)));
            }
            if let Some(err) = &slot.error {
                return Poll::Ready(Err(err.clone()));
            }
            if slot.ended {
                return Poll::Ready(Ok(None));
            }
            slot.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
        if result.is_ok() {
            self.done = true;
        }
        result
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        let open = state
            .streams
            .get(&self.id)
            .is_some_and(|slot| !slot.ended && slot.error.is_none());
        state.forget(self.id);
        if open && !self.done && state.dead.is_none() {
            rst_stream(&mut state.out, self.id, CANCEL);
            drop(state);
            self.shared.queued.notify_one();
        }
    }
}

async fn write_loop(shared: Arc<Shared>, mut socket: OwnedWriteHalf) {
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        {
            let mut state = shared.lock();
            if state.dead.is_some() && state.out.is_empty() {
                return;
            }
            std::mem::swap(&mut buf, &mut state.out);
        }
        if buf.is_empty() {
            shared.queued.notified().await;
            continue;
        }
        if let Err(e) = socket.write_all(&buf).await {
            shared.lock().fail(Error::Closed(
                format!("writing to the backend failed: {e}").into(),
            ));
            return;
        }
        buf.clear();
        // A large buffer from one big request is not kept for the connection's life.
        if buf.capacity() > 1 << 20 {
            buf = Vec::with_capacity(16 * 1024);
        }
    }
}

async fn read_loop(shared: Arc<Shared>, mut socket: OwnedReadHalf) {
    let mut reader = Reader {
        buf: BytesMut::with_capacity(32 * 1024),
        decoder: loona_hpack::Decoder::new(),
        block: None,
    };
    let config = shared.config;
    let mut next_ping = Instant::now() + config.ping_interval;
    let mut ping_deadline: Option<Instant> = None;
    // One timer for the connection's life, moved only when the next ping event changes.
    let timer = tokio::time::sleep_until(next_ping);
    tokio::pin!(timer);
    let err = loop {
        let wake = ping_deadline.map_or(next_ping, |deadline| deadline.min(next_ping));
        if timer.deadline() != wake {
            timer.as_mut().reset(wake);
        }
        if reader.buf.capacity() - reader.buf.len() < MAX_FRAME {
            reader.buf.reserve(32 * 1024);
        }
        tokio::select! {
            read = socket.read_buf(&mut reader.buf) => match read {
                Ok(0) => break Error::Closed("the backend closed the connection".into()),
                Ok(_) => {
                    let mut state = shared.lock();
                    let outcome = reader.frames(&mut state, config, &mut ping_deadline);
                    let queued = !state.out.is_empty();
                    drop(state);
                    if queued {
                        shared.queued.notify_one();
                    }
                    if let Err((code, why)) = outcome {
                        let mut state = shared.lock();
                        goaway(&mut state.out, code);
                        drop(state);
                        shared.queued.notify_one();
                        break Error::Closed(format!("backend HTTP/2 protocol error: {why}").into());
                    }
                }
                Err(e) => break Error::Closed(format!("reading from the backend failed: {e}").into()),
            },
            () = &mut timer => {
                let now = Instant::now();
                if ping_deadline.is_some_and(|deadline| now >= deadline) {
                    tracing::warn!("backend keepalive ping timed out; reconnecting");
                    break Error::Closed("backend keepalive ping timed out".into());
                }
                if now >= next_ping {
                    let mut state = shared.lock();
                    frame_head(&mut state.out, 8, PING, 0, 0);
                    state.out.extend_from_slice(&[0; 8]);
                    drop(state);
                    shared.queued.notify_one();
                    ping_deadline = Some(now + config.ping_timeout);
                    next_ping = now + config.ping_interval;
                }
            }
        }
    };
    shared.lock().fail(err);
    shared.queued.notify_one();
}

/// A header block being received, possibly across CONTINUATION frames.
struct Block {
    stream: u32,
    end_stream: bool,
    /// The HEADERS payload as received (no copy); joined with CONTINUATION payloads.
    bytes: Bytes,
}

struct Reader {
    buf: BytesMut,
    decoder: loona_hpack::Decoder<'static>,
    block: Option<Block>,
}

type ConnError = (u32, String);

impl Reader {
    /// Handles every complete frame in the buffer.
    fn frames(
        &mut self,
        state: &mut State,
        config: Config,
        ping_deadline: &mut Option<Instant>,
    ) -> Result<(), ConnError> {
        while self.buf.len() >= 9 {
            let len = (usize::from(self.buf[0]) << 16)
                | (usize::from(self.buf[1]) << 8)
                | usize::from(self.buf[2]);
            if len > MAX_FRAME {
                return Err((FRAME_SIZE_ERROR, format!("frame of {len} bytes")));
            }
            if self.buf.len() < 9 + len {
                break;
            }
            let kind = self.buf[3];
            let flags = self.buf[4];
            let id = u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]])
                & 0x7fff_ffff;
            self.buf.advance(9);
            let payload = self.buf.split_to(len).freeze();
            if self.block.is_some() && kind != CONTINUATION {
                return Err((PROTOCOL_ERROR, "header block interrupted".into()));
            }
            match kind {
                DATA => self.data(state, config, id, flags, payload)?,
                HEADERS => {
                    let mut payload = unpad(flags, payload)?;
                    if flags & PRIORITY != 0 {
                        if payload.len() < 5 {
                            return Err((FRAME_SIZE_ERROR, "short HEADERS".into()));
                        }
                        payload.advance(5);
                    }
                    self.block = Some(Block {
                        stream: id,
                        end_stream: flags & END_STREAM != 0,
                        bytes: payload,
                    });
                    if flags & END_HEADERS != 0 {
                        self.headers(state)?;
                    }
                }
                CONTINUATION => {
                    let Some(block) = self.block.as_mut().filter(|b| b.stream == id) else {
                        return Err((PROTOCOL_ERROR, "unexpected CONTINUATION".into()));
                    };
                    if block.bytes.len() + payload.len() > MAX_HEADER_BLOCK {
                        return Err((PROTOCOL_ERROR, "header block too large".into()));
                    }
                    let mut joined = BytesMut::with_capacity(block.bytes.len() + payload.len());
                    joined.extend_from_slice(&block.bytes);
                    joined.extend_from_slice(&payload);
                    block.bytes = joined.freeze();
                    if flags & END_HEADERS != 0 {
                        self.headers(state)?;
                    }
                }
                RST_STREAM => {
                    if payload.len() != 4 {
                        return Err((FRAME_SIZE_ERROR, "RST_STREAM".into()));
                    }
                    let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                    if let Some(slot) = state.streams.get_mut(&id) {
                        slot.error = Some(match code {
                            REFUSED_STREAM => Error::Refused,
                            code => Error::Reset(code),
                        });
                        slot.pending = None;
                        slot.wake();
                    }
                }
                SETTINGS if flags & ACK == 0 => self.settings(state, &payload)?,
                SETTINGS => {}
                PING if flags & ACK == 0 => {
                    frame_head(&mut state.out, 8, PING, ACK, 0);
                    state.out.extend_from_slice(&payload);
                }
                PING => *ping_deadline = None,
                GOAWAY => {
                    if payload.len() < 8 {
                        return Err((FRAME_SIZE_ERROR, "GOAWAY".into()));
                    }
                    let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        & 0x7fff_ffff;
                    state.draining = true;
                    for (id, slot) in state.streams.iter_mut() {
                        if *id > last {
                            slot.error = Some(Error::Refused);
                            slot.wake();
                        }
                    }
                    for waker in state.waiting.drain(..) {
                        waker.wake();
                    }
                }
                WINDOW_UPDATE => {
                    if payload.len() != 4 {
                        return Err((FRAME_SIZE_ERROR, "WINDOW_UPDATE".into()));
                    }
                    let grow = i64::from(
                        u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                            & 0x7fff_ffff,
                    );
                    if id == 0 {
                        state.send_window += grow;
                        if state.send_window > MAX_WINDOW {
                            return Err((FLOW_CONTROL_ERROR, "window overflow".into()));
                        }
                        state.flush_all_pending();
                    } else if let Some(slot) = state.streams.get_mut(&id) {
                        slot.send_window += grow;
                        state.flush_pending(id);
                    }
                }
                PUSH_PROMISE => return Err((PROTOCOL_ERROR, "push is disabled".into())),
                _ => {}
            }
        }
        Ok(())
    }

    fn data(
        &mut self,
        state: &mut State,
        config: Config,
        id: u32,
        flags: u8,
        payload: Bytes,
    ) -> Result<(), ConnError> {
        // Flow control counts the whole payload, padding included.
        state.recv_unacked += payload.len() as u32;
        if state.recv_unacked >= config.connection_window / 2 {
            let grow = state.recv_unacked;
            window_update(&mut state.out, 0, grow);
            state.recv_unacked = 0;
        }
        let data = unpad(flags, payload)?;
        if let Some(slot) = state.streams.get_mut(&id) {
            if !slot.head_seen {
                // Data before any head: the stream is broken, the connection is not.
                slot.error = Some(Error::Reset(PROTOCOL_ERROR));
            } else if !data.is_empty() {
                slot.data.push_back(data);
            }
            slot.ended |= flags & END_STREAM != 0;
            slot.wake();
        }
        Ok(())
    }

    fn headers(&mut self, state: &mut State) -> Result<(), ConnError> {
        let Some(block) = self.block.take() else {
            return Ok(());
        };
        let mut status = None;
        let mut headers = HeaderMap::new();
        // Every block is decoded, even for a stream already gone: the decoder's table
        // must follow the server's encoder.
        self.decoder
            .decode_with_cb(&block.bytes, |name, value| {
                if &name[..] == b":status" {
                    status = StatusCode::from_bytes(&value).ok();
                } else if name.first() != Some(&b':') {
                    if let (Ok(name), Ok(value)) = (
                        HeaderName::from_bytes(&name),
                        HeaderValue::from_bytes(&value),
                    ) {
                        headers.append(name, value);
                    }
                }
            })
            .map_err(|e| (PROTOCOL_ERROR, format!("header block: {e:?}")))?;
        let Some(slot) = state.streams.get_mut(&block.stream) else {
            return Ok(());
        };
        if !slot.head_seen {
            match status {
                // Informational heads (1xx) precede the real one.
                Some(status) if status.is_informational() => return Ok(()),
                Some(status) => {
                    slot.head_seen = true;
                    slot.head = Some(Head { status, headers });
                }
                None => slot.error = Some(Error::Reset(PROTOCOL_ERROR)),
            }
        } else {
            slot.trailers = Some(headers);
        }
        slot.ended |= block.end_stream;
        slot.wake();
        Ok(())
    }

    fn settings(&mut self, state: &mut State, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() % 6 != 0 {
            return Err((FRAME_SIZE_ERROR, "SETTINGS".into()));
        }
        for entry in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([entry[0], entry[1]]);
            let value = u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]);
            match id {
                0x3 => state.peer_max_streams = value as usize,
                0x4 => {
                    if i64::from(value) > MAX_WINDOW {
                        return Err((FLOW_CONTROL_ERROR, "initial window too large".into()));
                    }
                    let delta = i64::from(value) - state.peer_stream_window;
                    state.peer_stream_window = i64::from(value);
                    for slot in state.streams.values_mut() {
                        slot.send_window += delta;
                    }
                }
                0x5 => {
                    if !(16_384..=16_777_215).contains(&value) {
                        return Err((PROTOCOL_ERROR, "invalid MAX_FRAME_SIZE".into()));
                    }
                    state.peer_max_frame = value as usize;
                }
                _ => {}
            }
        }
        frame_head(&mut state.out, 0, SETTINGS, ACK, 0);
        state.flush_all_pending();
        for waker in state.waiting.drain(..) {
            waker.wake();
        }
        Ok(())
    }
}

/// A padded frame's content without its padding.
fn unpad(flags: u8, mut payload: Bytes) -> Result<Bytes, ConnError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let Some(&pad) = payload.first() else {
        return Err((PROTOCOL_ERROR, "padded frame without pad length".into()));
    };
    let pad = usize::from(pad);
    if pad >= payload.len() {
        return Err((PROTOCOL_ERROR, "padding longer than the frame".into()));
    }
    payload.advance(1);
    payload.truncate(payload.len() - pad);
    Ok(payload)
}

fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, id: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&id.to_be_bytes());
}

fn window_update(out: &mut Vec<u8>, id: u32, grow: u32) {
    frame_head(out, 4, WINDOW_UPDATE, 0, id);
    out.extend_from_slice(&grow.to_be_bytes());
}

fn rst_stream(out: &mut Vec<u8>, id: u32, code: u32) {
    frame_head(out, 4, RST_STREAM, 0, id);
    out.extend_from_slice(&code.to_be_bytes());
}

fn goaway(out: &mut Vec<u8>, code: u32) {
    frame_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// HEADERS, then CONTINUATION frames if the block exceeds the peer's frame size.
fn header_frames(out: &mut Vec<u8>, id: u32, block: &[u8], max_frame: usize) {
    let mut chunks = block.chunks(max_frame).peekable();
    let mut kind = HEADERS;
    if chunks.peek().is_none() {
        frame_head(out, 0, HEADERS, END_HEADERS, id);
        return;
    }
    while let Some(chunk) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            END_HEADERS
        } else {
            0
        };
        frame_head(out, chunk.len(), kind, flags, id);
        out.extend_from_slice(chunk);
        kind = CONTINUATION;
    }
}

/// HPACK for requests, without a dynamic table (RFC 7541 6.1 and 6.2.2): a static-table
/// entry by index, or a literal that is never indexed, so the encoder has no state.
pub mod hpack {
    /// Static table entries (RFC 7541 appendix A) that request heads use.
    pub const AUTHORITY: usize = 1;
    pub const METHOD_POST: usize = 3;
    pub const PATH: usize = 4;
    pub const SCHEME_HTTP: usize = 6;
    pub const CONTENT_TYPE: usize = 31;
    pub const USER_AGENT: usize = 58;

    /// The whole header `index` of the static table (e.g. `METHOD_POST`).
    pub fn indexed(out: &mut Vec<u8>, index: usize) {
        integer(out, index, 7, 0x80);
    }

    /// A literal value under the static table's name `name_index`.
    pub fn literal_indexed_name(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
        integer(out, name_index, 4, 0x00);
        string(out, value);
    }

    /// A literal name and value (the name in lowercase).
    pub fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        out.push(0x00);
        string(out, name);
        string(out, value);
    }

    fn string(out: &mut Vec<u8>, bytes: &[u8]) {
        integer(out, bytes.len(), 7, 0x00);
        out.extend_from_slice(bytes);
    }

    fn integer(out: &mut Vec<u8>, mut value: usize, prefix_bits: u8, first: u8) {
        let max = (1usize << prefix_bits) - 1;
        if value < max {
            out.push(first | value as u8);
            return;
        }
        out.push(first | max as u8);
        value -= max;
        while value >= 128 {
            out.push((value % 128) as u8 | 0x80);
            value /= 128;
        }
        out.push(value as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_literals_decode_back() {
        let mut block = Vec::new();
        hpack::indexed(&mut block, hpack::METHOD_POST);
        hpack::indexed(&mut block, hpack::SCHEME_HTTP);
        hpack::literal_indexed_name(&mut block, hpack::PATH, b"/lf.a2a.v1.A2AService/GetTask");
        hpack::literal(&mut block, b"te", b"trailers");
        let long = vec![b'v'; 300];
        hpack::literal(&mut block, b"x-long", &long);
        let decoded = loona_hpack::Decoder::new().decode(&block).unwrap();
        let expect: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b":method".to_vec(), b"POST".to_vec()),
            (b":scheme".to_vec(), b"http".to_vec()),
            (b":path".to_vec(), b"/lf.a2a.v1.A2AService/GetTask".to_vec()),
            (b"te".to_vec(), b"trailers".to_vec()),
            (b"x-long".to_vec(), long),
        ];
        assert_eq!(decoded, expect);
    }

    #[test]
    fn large_header_blocks_continue() {
        let block = vec![7u8; 40_000];
        let mut out = Vec::new();
        header_frames(&mut out, 5, &block, 16_384);
        let mut kinds = Vec::new();
        let mut rest = &out[..];
        while !rest.is_empty() {
            let len =
                (usize::from(rest[0]) << 16) | (usize::from(rest[1]) << 8) | usize::from(rest[2]);
            kinds.push((rest[3], rest[4], len));
            rest = &rest[9 + len..];
        }
        assert_eq!(
            kinds,
            [
                (HEADERS, 0, 16_384),
                (CONTINUATION, 0, 16_384),
                (CONTINUATION, END_HEADERS, 7_232)
            ]
        );
    }

    #[test]
    fn padding_is_removed() {
        let frame = Bytes::from_static(&[2, b'a', b'b', 0, 0]);
        assert_eq!(unpad(PADDED, frame).unwrap(), Bytes::from_static(b"ab"));
        assert!(unpad(PADDED, Bytes::from_static(&[9, b'a'])).is_err());
    }
}

//! The HTTP/2 connections of one worker to one gRPC backend, on the `h2` crate, over TCP
//! or TLS (tokio-rustls, ALPN `h2`).
//!
//! One connection is shared by the calls of a worker, and a few spares (`Pool`) while many
//! calls are in flight on it; each is made on first use (a backend that is down at start
//! is not fatal) and replaced once it ends, receives GOAWAY or runs out of stream ids;
//! spares close themselves once idle. Its driver is one spawned task, supervised: however
//! it ends (error, keepalive timeout, panic), the connection is marked closed with the
//! reason, its calls fail at once with that reason, and the next call connects anew. Calls
//! themselves run on their callers' tasks (no per-call task, no dispatch channel).
//!
//! Keepalive, as gRPC servers accept it (gRPC proposal A8; grpc C-core, grpc-go and
//! grpc-java punish pings more often than every 5 minutes without data, two strikes and
//! GOAWAY `too_many_pings`): a ping is sent only after an interval in which nothing was
//! read, and by default only while calls are in flight; a pong missing after the timeout
//! closes the connection. On GOAWAY `ENHANCE_YOUR_CALM` + `too_many_pings`, the interval
//! doubles for this backend, logged once.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::backend::fault::Fault;

/// Receive window of one stream: as hyper's client sets it (the 64 KiB default throttles
/// streams); bounds what a backend may send ahead of a slow reader, per call.
const STREAM_WINDOW: u32 = 2 << 20;
/// Receive window of the connection: a few streams' worth, so one slow SSE reader cannot
/// stall the others, yet bounded per connection.
const CONNECTION_WINDOW: u32 = 5 << 20;
/// Largest response header block (headers or trailers): gRPC's default metadata limit is
/// 8 KiB; status details can be larger, so 64 KiB. Bigger blocks (HPACK bombs, 30,000
/// header names, 10 MB details) reset the stream instead of being buffered.
const MAX_HEADER_LIST: u32 = 64 << 10;
/// Streams the backend may reset before h2 treats the connection as abusive (h2's own
/// default, stated so it is a decision, not an accident).
const MAX_CONCURRENT_RESET_STREAMS: usize = 10;
/// Bytes a stream may buffer for sending before it waits for window: a request is one
/// message (at most `--max-body`), sent whole; this only caps what h2 asks capacity for.
const MAX_SEND_BUFFER: usize = 1 << 20;
/// Local resets (e.g. streams the backend answers malformed) before the connection is
/// closed as abusive; h2's default, stated.
const MAX_LOCAL_ERROR_RESETS: usize = 1024;
/// HPACK table the backend's encoder may use: 4 KiB, the protocol default; keeps the
/// table a backend can grow within a small bound.
const HEADER_TABLE: u32 = 4096;
/// Read buffer in front of h2's frame reader, which reads at most its spare capacity
/// (about 8 KiB, or the rest of the frame at hand): a 16 KiB reply took two or three
/// `recvfrom` per call; through this buffer one read takes whatever replies have arrived,
/// at the price of copying the bytes once more.
const READ_BUFFER: usize = 64 << 10;
/// Streams per connection before it is replaced: client stream ids are odd and end at
/// 2^31 - 1, so about 2^30 streams; a margin stays for calls racing the switch.
const MAX_STREAMS: u32 = (1 << 30) - 1024;

/// The TLS client of an `https://` backend and the name its certificate must carry.
pub type Tls = (
    tokio_rustls::TlsConnector,
    rustls::pki_types::ServerName<'static>,
);

/// How the connections of a backend are made and kept alive.
pub struct Connector {
    /// `host:port` (or `ip:port`) to connect to.
    authority: String,
    /// For `https://` backends.
    tls: Option<Tls>,
    connect_timeout: Duration,
    keepalive: Keepalive,
    /// Streams after which a connection is replaced (`MAX_STREAMS`; lower in a test).
    max_streams: u32,
}

/// The keepalive policy of one backend (see the module doc).
pub struct Keepalive {
    /// Current interval in milliseconds; doubles on `too_many_pings`.
    interval_ms: AtomicU64,
    pub timeout: Duration,
    pub while_idle: bool,
    /// Whether the doubling was logged already.
    backed_off: AtomicBool,
}

impl Keepalive {
    pub fn new(interval: Duration, timeout: Duration, while_idle: bool) -> Self {
        Keepalive {
            interval_ms: AtomicU64::new(interval.as_millis().max(1) as u64),
            timeout,
            while_idle,
            backed_off: AtomicBool::new(false),
        }
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms.load(Ordering::Relaxed))
    }

    /// gRPC proposal A8: the server found pings at `interval` too frequent; double it.
    /// Every worker's connection may be told at once: the interval doubles once per
    /// interval that was punished, not once per connection.
    fn too_many_pings(&self, interval: Duration, authority: &str) {
        let punished = interval.as_millis() as u64;
        let doubled = punished.saturating_mul(2);
        let swapped = self.interval_ms.compare_exchange(
            punished,
            doubled,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        if swapped.is_ok() && !self.backed_off.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                backend = authority,
                interval = ?Duration::from_millis(doubled),
                "backend closed the connection for too many pings (GOAWAY too_many_pings); \
                 keepalive interval doubled (logged once)"
            );
        }
    }
}

impl Connector {
    pub fn new(
        authority: String,
        tls: Option<Tls>,
        connect_timeout: Duration,
        keepalive: Keepalive,
    ) -> Self {
        Connector {
            authority,
            tls,
            connect_timeout,
            keepalive,
            max_streams: MAX_STREAMS,
        }
    }

    /// The same target (TLS name, timeouts, keepalive settings) reached at `address`: one
    /// pod of a DNS name. Its keepalive policy is its own, as each pod polices pings itself.
    pub fn at(&self, address: String) -> Connector {
        let keepalive = &self.keepalive;
        Connector {
            authority: address,
            tls: self.tls.clone(),
            connect_timeout: self.connect_timeout,
            keepalive: Keepalive::new(
                keepalive.interval(),
                keepalive.timeout,
                keepalive.while_idle,
            ),
            max_streams: self.max_streams,
        }
    }

    /// Connects (TCP, TLS, HTTP/2 handshake) within the connect timeout and spawns the
    /// connection's supervised driver on the current runtime. A `spare` connection closes
    /// itself once idle (`SPARE_IDLE`).
    async fn connect(self: &Arc<Self>, spare: bool) -> Result<Connection, Fault> {
        let timeout = self.connect_timeout;
        let connecting = async {
            let tcp = TcpStream::connect(&self.authority)
                .await
                .map_err(|e| Fault::connect(&e))?;
            // Small request heads and messages must not wait for Nagle's algorithm.
            let _ = tcp.set_nodelay(true);
            match &self.tls {
                None => self.handshake(tcp, spare).await,
                Some((tls, name)) => {
                    let stream = tls
                        .connect(name.clone(), tcp)
                        .await
                        .map_err(|e| Fault::tls_handshake(&e))?;
                    let alpn = stream.get_ref().1.alpn_protocol();
                    if alpn.is_some_and(|p| p != b"h2") {
                        return Err(Fault::Connect("TLS peer did not agree to HTTP/2".into()));
                    }
                    self.handshake(stream, spare).await
                }
            }
        };
        match tokio::time::timeout(timeout, connecting).await {
            Ok(connection) => connection,
            Err(_) => Err(Fault::Connect(format!(
                "connect timed out after {timeout:?}"
            ))),
        }
    }

    async fn handshake<T>(self: &Arc<Self>, io: T, spare: bool) -> Result<Connection, Fault>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let state = Arc::new(State::new(spare));
        let io = ReadTap {
            inner: tokio::io::BufReader::with_capacity(READ_BUFFER, io),
            state: state.clone(),
        };
        let (send, mut connection) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_header_list_size(MAX_HEADER_LIST)
            .max_concurrent_reset_streams(MAX_CONCURRENT_RESET_STREAMS)
            .max_send_buffer_size(MAX_SEND_BUFFER)
            .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
            .header_table_size(HEADER_TABLE)
            // Server push is not part of gRPC; a PUSH_PROMISE is a protocol error.
            .enable_push(false)
            .handshake::<_, Bytes>(io)
            .await
            .map_err(|e| Fault::Connect(format!("HTTP/2 handshake failed: {e}")))?;
        let pings = connection.ping_pong();
        let driver = drive(connection, pings, state.clone(), self.clone());
        let supervised = state.clone();
        let authority = self.authority.clone();
        let task = tokio::spawn(driver);
        // The supervisor learns how the driver ended, panics included.
        tokio::spawn(async move {
            let end = match task.await {
                Ok(end) => end,
                Err(e) if e.is_panic() => {
                    tracing::error!(backend = %authority, "backend connection task panicked");
                    Fault::Lost("the connection task failed".into())
                }
                Err(_) => Fault::Lost("the gateway is shutting down".into()),
            };
            supervised.close(end);
        });
        Ok(Connection { send, state })
    }
}

/// What the driver, the calls and the pool share about one connection.
struct State {
    /// The connection's start; `last_read_ms` counts from here.
    origin: Instant,
    closed: AtomicBool,
    /// Why the connection ended, once it has.
    end: Mutex<Option<Fault>>,
    /// Calls started and not yet finished.
    in_flight: AtomicUsize,
    /// Streams opened so far.
    opened: AtomicU32,
    /// When something was last read, in ms after the connection's origin.
    last_read_ms: AtomicU64,
    /// Wakes the driver when the first call starts after an idle time.
    activity: tokio::sync::Notify,
    /// A connection a busy pool added (`Pool`): it closes itself once idle.
    spare: bool,
}

impl State {
    fn new(spare: bool) -> Self {
        State {
            spare,
            origin: Instant::now(),
            closed: AtomicBool::new(false),
            end: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            opened: AtomicU32::new(0),
            last_read_ms: AtomicU64::new(0),
            activity: tokio::sync::Notify::new(),
        }
    }

    /// When something was last read.
    fn last_read(&self) -> Instant {
        self.origin + Duration::from_millis(self.last_read_ms.load(Ordering::Relaxed))
    }

    fn close(&self, end: Fault) {
        let mut slot = self.end.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(end);
        self.closed.store(true, Ordering::Release);
    }

    fn end(&self) -> Option<Fault> {
        self.end.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A call's h2 error; a lost stream is explained by how the connection ended.
    fn fault(&self, err: &h2::Error) -> Fault {
        match (Fault::h2(err), self.end()) {
            (Fault::Lost(_), Some(end)) => end,
            (fault, _) => fault,
        }
    }
}

/// The transport, noting when bytes arrive (the keepalive's "nothing was read").
struct ReadTap<T> {
    inner: T,
    state: Arc<State>,
}

impl<T: AsyncRead + Unpin> AsyncRead for ReadTap<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            let now = self.state.origin.elapsed().as_millis() as u64;
            self.state.last_read_ms.store(now, Ordering::Relaxed);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ReadTap<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Drives the connection until it ends; returns why. The reason is recorded before the
/// connection is dropped, so the calls it fails find it.
async fn drive<T>(
    connection: h2::client::Connection<ReadTap<T>, Bytes>,
    pings: Option<h2::PingPong>,
    state: Arc<State>,
    connector: Arc<Connector>,
) -> Fault
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut connection = std::pin::pin!(connection);
    let end = run(connection.as_mut(), pings, &state, &connector).await;
    state.close(end.clone());
    end
}

/// Polls the connection and runs the keepalive until the connection ends.
async fn run<T>(
    mut connection: std::pin::Pin<&mut h2::client::Connection<ReadTap<T>, Bytes>>,
    mut pings: Option<h2::PingPong>,
    state: &State,
    connector: &Connector,
) -> Fault
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let keepalive = &connector.keepalive;
    // When a pong is due, while a ping is out.
    let mut pong_due: Option<Instant> = None;
    // Quiet time is counted from the later of the last read and the end of an idle spell,
    // so the first call after a long idle time is not greeted by a ping.
    let mut busy_since = Instant::now();
    // A spare connection's idleness is checked every `SPARE_IDLE`: no call in flight and
    // none opened since the last check.
    let mut spare_check = Instant::now() + SPARE_IDLE;
    let mut opened_at_check = state.opened.load(Ordering::Relaxed);
    loop {
        let interval = keepalive.interval();
        let quiet_since = state.last_read().max(busy_since);
        let wake = pong_due.unwrap_or(quiet_since + interval);
        let idle = state.in_flight.load(Ordering::Relaxed) == 0 && !keepalive.while_idle;
        tokio::select! {
            ended = connection.as_mut() => return ended_with(ended, interval, connector),
            pong = poll_fn(|cx| match pings.as_mut() {
                Some(pings) if pong_due.is_some() => pings.poll_pong(cx),
                _ => Poll::Pending,
            }) => {
                pong_due = None;
                if let Err(e) = pong {
                    return Fault::Lost(format!("keepalive ping failed: {e}"));
                }
            }
            () = tokio::time::sleep_until(wake), if !idle || pong_due.is_some() => {
                if pong_due.is_some() {
                    return Fault::Lost(format!(
                        "keepalive ping unanswered within {:?}",
                        keepalive.timeout
                    ));
                }
                // Something may have been read since `wake` was computed.
                let quiet_since = state.last_read().max(busy_since);
                if quiet_since + interval <= Instant::now() {
                    if let Some(pings) = pings.as_mut() {
                        if pings.send_ping(h2::Ping::opaque()).is_ok() {
                            pong_due = Some(Instant::now() + keepalive.timeout);
                        }
                    }
                }
            }
            () = state.activity.notified(), if idle => busy_since = Instant::now(),
            () = tokio::time::sleep_until(spare_check), if state.spare => {
                let opened = state.opened.load(Ordering::Relaxed);
                if opened == opened_at_check && state.in_flight.load(Ordering::Relaxed) == 0 {
                    // Calls run on this worker's thread, as this driver does, and take a
                    // connection and open their stream without yielding in between while it
                    // has free stream slots; a call refused anyway is sent on a fresh one.
                    return Fault::Lost("idle spare connection closed".into());
                }
                opened_at_check = opened;
                spare_check = Instant::now() + SPARE_IDLE;
            }
        }
    }
}

/// Why a connection whose driver returned ended; notes `too_many_pings` against the
/// `interval` it was pinging at.
fn ended_with(ended: Result<(), h2::Error>, interval: Duration, connector: &Connector) -> Fault {
    match ended {
        Ok(()) => Fault::Lost("the backend closed the connection".into()),
        Err(e) => {
            // h2 gives the GOAWAY's debug data only in its message.
            let calm = e.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM);
            if calm && e.is_go_away() && e.is_remote() && e.to_string().contains("too_many_pings") {
                connector
                    .keepalive
                    .too_many_pings(interval, &connector.authority);
            }
            Fault::h2(&e)
        }
    }
}

/// A handle on a live connection; clones share it.
#[derive(Clone)]
pub struct Connection {
    send: SendRequest<Bytes>,
    state: Arc<State>,
}

/// A call's hold on its connection: counts it as in flight until dropped, and explains
/// its errors by how the connection ended.
pub struct InFlight(Arc<State>);

impl InFlight {
    /// The call's h2 error, explained by how the connection ended when it has.
    pub fn fault(&self, err: &h2::Error) -> Fault {
        self.0.fault(err)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Connection {
    fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::Relaxed)
    }

    fn usable(&self, max_streams: u32) -> bool {
        !self.state.closed.load(Ordering::Acquire)
            && self.state.opened.load(Ordering::Relaxed) < max_streams
    }

    /// Opens a stream for `request` and sends `body` as its whole request body. A failure
    /// before the request left is `Refused`: nothing reached the backend.
    pub async fn send(&self, request: http::Request<()>, body: Bytes) -> Result<ReplyHead, Fault> {
        let refused = |e: h2::Error| match self.state.end() {
            Some(end) => Fault::Refused(end.to_string()),
            None => Fault::Refused(e.to_string()),
        };
        let mut send = self.send.clone().ready().await.map_err(refused)?;
        self.state.opened.fetch_add(1, Ordering::Relaxed);
        let (response, mut stream) = send.send_request(request, false).map_err(refused)?;
        if self.state.in_flight.fetch_add(1, Ordering::Relaxed) == 0 {
            self.state.activity.notify_one();
        }
        let in_flight = InFlight(self.state.clone());
        // The whole message at once: its size is bounded by the request limit, and h2
        // sends it as the backend's window allows.
        stream
            .send_data(body, true)
            .map_err(|e| in_flight.fault(&e))?;
        Ok(ReplyHead {
            response: Some((response, in_flight)),
            cancel_from: Instant::now() + YOUNG_CANCEL_DELAY,
        })
    }
}

/// How long a call's stream is held after its caller went away before its reply head came,
/// counted from when it was sent. h2 servers (tonic, hyper) count the streams reset before
/// their application took them and, past a small number (20 by default), send GOAWAY
/// `ENHANCE_YOUR_CALM` and close the connection, failing every other call on it: a client
/// that starts calls and drops them at once (HTTP/2 resets, or connections opened and
/// closed) would make the gateway reset streams the agent has only just read, and take
/// other clients' calls down with them. A stream reset this much later has been taken,
/// unless it waited that long in h2's queue for the agent's stream limit or the agent is
/// that far behind (then its HEADERS and RST still arrive together: not yet handled).
const YOUNG_CANCEL_DELAY: Duration = Duration::from_millis(100);

/// The reply head of a sent call (`Connection::send`), and the call in flight on its
/// connection. Dropped before the head came, within `YOUNG_CANCEL_DELAY` of the send, the
/// stream stays open (and in flight, so the pool spreads new calls over its other
/// connections) until then or until its head comes, and is cancelled after; dropped later,
/// it is cancelled at once.
pub struct ReplyHead {
    response: Option<(h2::client::ResponseFuture, InFlight)>,
    cancel_from: Instant,
}

impl std::future::Future for ReplyHead {
    type Output = (Result<http::Response<h2::RecvStream>, h2::Error>, InFlight);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Self::Output> {
        let (response, _) = self.response.as_mut().expect("polled after its head came");
        let head = std::task::ready!(std::pin::Pin::new(response).poll(cx));
        let (_, in_flight) = self.response.take().expect("polled after its head came");
        Poll::Ready((head, in_flight))
    }
}

impl Drop for ReplyHead {
    fn drop(&mut self) {
        let Some((response, in_flight)) = self.response.take() else {
            return;
        };
        if Instant::now() >= self.cancel_from {
            return;
        }
        // Outside a runtime (it is shutting down) the stream is cancelled at once.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let until = self.cancel_from;
            runtime.spawn(async move {
                let _ = tokio::time::timeout_at(until, response).await;
                drop(in_flight);
            });
        }
    }
}

/// How long a spare connection (`Pool`) stays open without calls, at least; at most twice
/// this. Long enough that steady load keeps its connections, short enough that a burst's
/// extra connections (and their descriptors and tasks) are gone within seconds.
const SPARE_IDLE: Duration = Duration::from_secs(2);

/// Calls in flight on a connection past which a worker spreads new calls over another
/// connection to the same backend. Measured against a tonic backend (benches/README.md,
/// "Closing issue 8"): with 16 calls of 16 KiB multiplexed per connection the backend
/// spent 15 % more CPU per call than with 8 (its streams' tasks and their connection's
/// task meet on one lock from both of its threads); below this, one connection serves all.
const SPILL_AT: usize = 8;
/// Connections per worker and backend at most; past `SPILL_AT` on all of them, calls go to
/// the least busy.
const MAX_CONNECTIONS: usize = 4;

/// A worker's connections to one backend: the first serves every call until `SPILL_AT`
/// calls are in flight on it, then the next is used (and opened) as well. The first stays;
/// the others are spares, which close themselves once idle (`SPARE_IDLE`).
pub struct Pool {
    connector: Arc<Connector>,
    /// Made at the first call: most of 10,000 routes are never called on most workers,
    /// and the slots took 0.25 KiB a route and worker.
    slots: std::sync::OnceLock<Box<[Slot; MAX_CONNECTIONS]>>,
}

/// One connection of a pool, replaced when it ends.
#[derive(Default)]
struct Slot {
    current: Mutex<Option<Connection>>,
    /// Serializes connecting, so a burst of calls makes one connection.
    connecting: tokio::sync::Mutex<()>,
}

impl Pool {
    pub fn new(connector: Arc<Connector>) -> Self {
        Pool {
            connector,
            slots: std::sync::OnceLock::new(),
        }
    }

    fn slots(&self) -> &[Slot; MAX_CONNECTIONS] {
        self.slots.get_or_init(Box::default)
    }

    /// A pool of its own to the same backend, sharing the connector.
    pub fn sibling(&self) -> Pool {
        Pool::new(self.connector.clone())
    }

    /// A pool of its own to the same target reached at `address` (`Connector::at`).
    pub fn at(&self, address: String) -> Pool {
        Pool::new(Arc::new(self.connector.at(address)))
    }

    fn live(&self, slot: &Slot) -> Option<Connection> {
        let max = self.connector.max_streams;
        slot.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(|c| c.usable(max))
    }

    /// A connection for the next call: the first live one with fewer than `SPILL_AT` calls
    /// in flight, else a new one in the first free slot, else the least busy.
    pub async fn connection(&self) -> Result<Connection, Fault> {
        let mut least_busy = None::<Connection>;
        for (index, slot) in self.slots().iter().enumerate() {
            match self.live(slot) {
                Some(live) if live.in_flight() < SPILL_AT => return Ok(live),
                Some(live) => {
                    if least_busy
                        .as_ref()
                        .is_none_or(|best| live.in_flight() < best.in_flight())
                    {
                        least_busy = Some(live);
                    }
                }
                None => return Box::pin(self.connect(index)).await,
            }
        }
        match least_busy {
            Some(connection) => Ok(connection),
            None => Box::pin(self.connect(0)).await,
        }
    }

    /// The live connection of slot `index`, or a new one (a spare, but in the first slot).
    /// Callers box it: connecting (TCP, TLS, HTTP/2) is a future of about 5 KB, which every
    /// call's future carried although only a call that connects runs it (10,000 streams
    /// opened at once: 256 -> 242 MiB).
    async fn connect(&self, index: usize) -> Result<Connection, Fault> {
        let slot = &self.slots()[index];
        let _connecting = slot.connecting.lock().await;
        if let Some(live) = self.live(slot) {
            return Ok(live);
        }
        // The replaced connection's driver finishes once its last stream has.
        let connection = self.connector.connect(index > 0).await?;
        *slot.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(connection.clone());
        Ok(connection)
    }

    /// Takes `connection` out of use (it refused a call); the next call connects anew.
    /// Without handles and streams, h2 closes it.
    pub fn retire(&self, connection: &Connection) {
        connection.state.closed.store(true, Ordering::Release);
        for slot in self.slots.get().map_or(&[][..], |slots| &slots[..]) {
            let mut current = slot.current.lock().unwrap_or_else(|e| e.into_inner());
            if current
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(&c.state, &connection.state))
            {
                *current = None;
            }
        }
    }
}

#[cfg(test)]
impl Pool {
    /// A pool whose connections are replaced after `max` streams, so the switch that
    /// stream-id exhaustion forces after about 2^30 streams can be seen in a test.
    pub fn with_max_streams(&self, max: u32) -> Pool {
        let connector = &self.connector;
        let keepalive = &connector.keepalive;
        Pool::new(Arc::new(Connector {
            authority: connector.authority.clone(),
            tls: connector.tls.clone(),
            connect_timeout: connector.connect_timeout,
            keepalive: Keepalive::new(
                keepalive.interval(),
                keepalive.timeout,
                keepalive.while_idle,
            ),
            max_streams: max,
        }))
    }

    /// The identity of the first connection (the address of its shared state).
    pub fn current_state(&self) -> Option<usize> {
        let current = self.slots()[0]
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        current.as_ref().map(|c| Arc::as_ptr(&c.state) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_punished_interval_doubles_once_however_many_connections_report_it() {
        let keepalive = Keepalive::new(Duration::from_secs(1), Duration::from_secs(1), false);
        keepalive.too_many_pings(Duration::from_secs(1), "a:1");
        keepalive.too_many_pings(Duration::from_secs(1), "a:1");
        assert_eq!(keepalive.interval(), Duration::from_secs(2));
        keepalive.too_many_pings(Duration::from_secs(2), "a:1");
        assert_eq!(keepalive.interval(), Duration::from_secs(4));
    }
}

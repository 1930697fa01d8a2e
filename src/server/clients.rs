//! What one client connection may hold of the gateway, and for how long (`ClientLimits`):
//! the hyper connection settings (the request head's read deadline, HTTP/2 stream limits
//! and pings, `http1_builder`, `http2_builder`; `Replay` hands HTTP/2 the bytes HTTP/1.1
//! read of a connection), a deadline for each whole request body (`DeadlineBody`),
//! closing connections with no request in flight (`Activity`), and a bound on how long a
//! client may leave response bytes unread (`SendStall`: the connection is closed, which
//! drops its streams and cancels their backend calls).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep_until, Instant, Sleep};

/// HTTP/2 pings find connections whose peer vanished while streams are open (idle ones
/// are closed by the idle timeout); hyper's server pings only after this long without
/// reading anything from the client.
const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Streams one HTTP/2 connection may have open at once (RFC 9113 recommends no fewer than
/// 100); each may hold a backend call.
const HTTP2_MAX_STREAMS: u32 = 100;
/// Streams a client resets before the gateway accepted them; past this the connection
/// gets GOAWAY `ENHANCE_YOUR_CALM` (HTTP/2 rapid reset, CVE-2023-44487). h2's default,
/// set here so an upgrade cannot change it unnoticed.
const HTTP2_MAX_PENDING_ACCEPT_RESETS: usize = 20;
/// Resets the gateway sends for a client's protocol errors before it gives up on the
/// connection (RUSTSEC-2024-0003); hyper's default, set explicitly for the same reason.
const HTTP2_MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// The client-facing deadlines of every connection (`--client-*-timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// A request head (HTTP/1.1) must arrive within this; it also bounds how long an idle
    /// HTTP/1.1 keep-alive connection waits for its next request.
    pub header_timeout: Duration,
    /// A request body must arrive whole within this, counted from its head.
    pub body_timeout: Duration,
    /// A connection with no request in flight this long is closed (HTTP/2: GOAWAY).
    pub idle_timeout: Duration,
    /// A connection whose client accepts no response bytes this long is closed.
    pub send_timeout: Duration,
}

impl Default for ClientLimits {
    /// The flags' defaults.
    fn default() -> Self {
        ClientLimits {
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(30),
        }
    }
}

/// The HTTP/1.1 connection builder, with every limit that bounds what a client holds set
/// explicitly (as `http2_builder`).
pub fn http1_builder(limits: &ClientLimits) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // hyper restarts this timer whenever it waits for a request head: slowloris heads
        // and idle keep-alive connections both end with it.
        .header_read_timeout(limits.header_timeout);
    builder
}

/// The HTTP/2 connection builder (prior knowledge, or chosen by ALPN), with every limit
/// that bounds what a client holds set explicitly (as `http1_builder`).
pub fn http2_builder() -> hyper::server::conn::http2::Builder<TokioExecutor> {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(HTTP2_MAX_STREAMS)
        .max_pending_accept_reset_streams(HTTP2_MAX_PENDING_ACCEPT_RESETS)
        .max_local_error_reset_streams(HTTP2_MAX_LOCAL_ERROR_RESETS)
        .keep_alive_interval(HTTP2_PING_INTERVAL)
        .keep_alive_timeout(HTTP2_PING_TIMEOUT);
    builder
}

/// A connection whose first bytes were already read, by hyper's HTTP/1.1 connection that
/// found HTTP/2's preface in them (`hyper::Error::is_parse_version_h2`): the HTTP/2
/// server reads them again first. They are released once read.
pub struct Replay<T> {
    first: Bytes,
    io: T,
}

impl<T> Replay<T> {
    pub fn new(first: Bytes, io: T) -> Self {
        Replay { first, io }
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Replay<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        if self.first.is_empty() {
            return Pin::new(&mut self.io).poll_read(cx, buf);
        }
        let mut first = std::mem::take(&mut self.first);
        let n = first.len().min(buf.remaining());
        buf.put_slice(&first[..n]);
        if n < first.len() {
            self.first = first.split_off(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Replay<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A request body that fails once its deadline passes while it is still arriving, so a
/// client trickling a body is cut off (the JSON-RPC handler answers -32600 and the
/// connection closes). The timer exists only once the body had to be waited for.
pub struct DeadlineBody<B> {
    inner: B,
    deadline: Instant,
    limit: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl<B> DeadlineBody<B> {
    /// `inner`, which must arrive within `limit` from now.
    pub fn new(inner: B, limit: Duration) -> Self {
        DeadlineBody {
            inner,
            deadline: Instant::now() + limit,
            limit,
            timer: None,
        }
    }
}

/// The request body was not received within its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the body did not arrive within {0:?} (--client-body-timeout)")]
pub struct BodyTimeout(Duration);

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimeout(this.limit).into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Requests in flight on one connection (from the call until the response body is done
/// or dropped), and since when none is.
pub struct Activity {
    epoch: Instant,
    in_flight: AtomicUsize,
    /// When the last request finished, in milliseconds since `epoch`.
    idle_since: AtomicU64,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
        })
    }

    /// A request starts; it is in flight until the guard drops.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Relaxed);
        InFlight(self.clone())
    }

    /// Resolves once no request has been in flight for `limit`.
    pub async fn idle_for(&self, limit: Duration) {
        loop {
            let wake = if self.in_flight.load(Relaxed) == 0 {
                let since = self.epoch + Duration::from_millis(self.idle_since.load(Relaxed));
                if since.elapsed() >= limit {
                    return;
                }
                since + limit
            } else {
                Instant::now() + limit
            };
            sleep_until(wake).await;
        }
    }
}

/// One request in flight (`Activity::start`).
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.0.epoch.elapsed().as_millis() as u64;
        self.0.idle_since.store(now, Relaxed);
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

/// The service of one connection: each request's body gets its deadline and each request
/// is in flight (`Activity`) until its response body is done.
#[derive(Clone)]
pub struct Track<S> {
    inner: S,
    activity: Arc<Activity>,
    limits: ClientLimits,
}

impl<S> Track<S> {
    pub fn new(inner: S, activity: Arc<Activity>, limits: ClientLimits) -> Self {
        Track {
            inner,
            activity,
            limits,
        }
    }
}

impl<S, B> tower::Service<http::Request<Incoming>> for Track<S>
where
    S: tower::Service<http::Request<axum::body::Body>, Response = http::Response<B>>,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError> + Send,
{
    type Response = http::Response<Tracked<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Incoming>) -> Self::Future {
        let limit = self.limits.body_timeout;
        // Over HTTP/1.1 a client that stops reading stalls the connection's writes, which
        // `SendStall` ends; only an HTTP/2 stream can stall alone (out of window) while
        // the connection writes on, so only there is a stream read ahead by a task.
        let read_ahead =
            (request.version() == http::Version::HTTP_2).then_some(self.limits.send_timeout);
        let request = request.map(|body| axum::body::Body::new(DeadlineBody::new(body, limit)));
        TrackedFuture {
            in_flight: Some(self.activity.start()),
            read_ahead,
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// A response on its way; its body takes the request's `InFlight` along.
    pub struct TrackedFuture<F> {
        #[pin]
        inner: F,
        in_flight: Option<InFlight>,
        // The send timeout of a stream read ahead (`Tracked::new`), for HTTP/2 requests.
        read_ahead: Option<Duration>,
    }
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError> + Send,
{
    type Output = Result<http::Response<Tracked<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.inner.poll(cx))?;
        let in_flight = this.in_flight.take().expect("polled after completion");
        let read_ahead = *this.read_ahead;
        Poll::Ready(Ok(
            response.map(|body| Tracked::new(body, in_flight, read_ahead))
        ))
    }
}

/// Chunks of a stream read ahead of its client.
const STREAM_QUEUE: usize = 2;
/// The reading of a stream goes on, the stream ended by itself, or it was dropped for
/// its client (what it had queued is not sent any more).
const READING: u8 = 0;
const ENDED: u8 = 1;
const DROPPED: u8 = 2;

/// A response body that keeps its request in flight until it is done or dropped. A
/// streaming one (no bound on its length: SSE, a gRPC stream; a unary gRPC reply states
/// its length as an upper bound) of an HTTP/2 request is read by a task of its own
/// into a small queue, so a client that stops taking it is noticed although nothing polls
/// the body (its stream out of flow-control window): once the queue has had no room for
/// the send timeout, the stream is dropped, which cancels its backend call, and the
/// client's stream is reset when it next grants window. The dropped stream is no longer in
/// flight either, so a client that never grants it window leaves an idle connection, which
/// the idle timeout closes (`server::drive`). (Over HTTP/1.1 the stalled writes of
/// `SendStall` close the connection; the task and its queue, about 7 KiB per stream, would
/// only cost memory.)
pub struct Tracked<B> {
    inner: Inner<B>,
}

enum Inner<B> {
    Whole {
        body: B,
        _in_flight: InFlight,
    },
    Streamed {
        queue: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, axum::BoxError>>,
        reading: Arc<ReadAhead>,
    },
}

/// What a stream's reader task and its body share.
struct ReadAhead {
    /// How the reading ended, if it has (`READING`, `ENDED`, `DROPPED`).
    state: AtomicU8,
    /// The request in flight, until the body is done or the reader drops the stream.
    in_flight: std::sync::Mutex<Option<InFlight>>,
}

impl ReadAhead {
    fn state(&self) -> u8 {
        self.state.load(SeqCst)
    }

    /// The stream ended by itself: its body keeps the request in flight until it is sent.
    fn ended(&self) {
        self.state.store(ENDED, SeqCst);
    }

    /// The stream was dropped for its client: nothing of it is sent any more, so the
    /// request is no longer in flight (hyper may never poll the body again to find out).
    fn dropped(&self) {
        self.state.store(DROPPED, SeqCst);
        if let Ok(mut in_flight) = self.in_flight.lock() {
            in_flight.take();
        }
    }
}

impl<B> Tracked<B>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError> + Send,
{
    /// `send_timeout`: read a stream ahead, dropping it after this long without room.
    pub fn new(body: B, in_flight: InFlight, send_timeout: Option<Duration>) -> Self {
        let streamed = !body.is_end_stream() && body.size_hint().upper().is_none();
        let inner = match send_timeout {
            Some(send_timeout) if streamed => {
                let (sender, queue) = tokio::sync::mpsc::channel(STREAM_QUEUE);
                let reading = Arc::new(ReadAhead {
                    state: AtomicU8::new(READING),
                    in_flight: std::sync::Mutex::new(Some(in_flight)),
                });
                tokio::spawn(read_ahead(body, sender, reading.clone(), send_timeout));
                Inner::Streamed { queue, reading }
            }
            _ => Inner::Whole {
                body,
                _in_flight: in_flight,
            },
        };
        Tracked { inner }
    }
}

/// Moves `body` into `queue` until it ends, its client goes away, or the queue has had no
/// room for `send_timeout`.
async fn read_ahead<B>(
    mut body: B,
    queue: tokio::sync::mpsc::Sender<Result<Frame<Bytes>, axum::BoxError>>,
    reading: Arc<ReadAhead>,
    send_timeout: Duration,
) where
    B: Body<Data = Bytes> + Send + Unpin,
    B::Error: Into<axum::BoxError> + Send,
{
    use http_body_util::BodyExt as _;
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            () = queue.closed() => return,
        };
        let Some(frame) = frame else {
            reading.ended();
            return;
        };
        match tokio::time::timeout(send_timeout, queue.send(frame.map_err(Into::into))).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                reading.dropped();
                tracing::info!(
                    ?send_timeout,
                    "a client took nothing of its stream; stream dropped"
                );
                return;
            }
        }
    }
}

/// A stream was dropped because its client stopped taking it.
#[derive(Debug, thiserror::Error)]
#[error("the client took nothing of the stream for the send timeout (--client-send-timeout)")]
pub struct StreamStalled;

impl<B> Body for Tracked<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        match &mut self.get_mut().inner {
            Inner::Whole { body, .. } => Pin::new(body).poll_frame(cx).map_err(Into::into),
            Inner::Streamed { queue, reading } => {
                if reading.state() == DROPPED {
                    return Poll::Ready(Some(Err(StreamStalled.into())));
                }
                match queue.poll_recv(cx) {
                    Poll::Ready(None) if reading.state() != ENDED => {
                        Poll::Ready(Some(Err(StreamStalled.into())))
                    }
                    other => other,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Whole { body, .. } => body.is_end_stream(),
            Inner::Streamed { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Whole { body, .. } => body.size_hint(),
            Inner::Streamed { .. } => SizeHint::default(),
        }
    }
}

/// A client connection whose writes fail once the client has accepted no bytes for
/// `limit`: a client that stops reading (a stream, pipelined replies) holds its buffers
/// and backend calls only that long. An HTTP/2 stream whose client stops granting it
/// flow-control window holds at most that window; the rest of its connection goes on.
pub struct SendStall<T> {
    io: T,
    limit: Duration,
    /// Armed while a write waits; made on the first wait.
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

impl<T> SendStall<T> {
    pub fn new(io: T, limit: Duration) -> Self {
        SendStall {
            io,
            limit,
            timer: None,
            armed: false,
        }
    }

    /// The outcome of a write attempt: progress disarms the timer; waiting arms it, and
    /// fails once it has run out.
    fn waited<R>(
        &mut self,
        cx: &mut Context<'_>,
        attempt: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if attempt.is_ready() {
            self.armed = false;
            return attempt;
        }
        let deadline = Instant::now() + self.limit;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(sleep_until(deadline)));
        if !self.armed {
            timer.as_mut().reset(deadline);
            self.armed = true;
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client accepted no data for {:?} (--client-send-timeout)",
                    self.limit
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SendStall<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SendStall<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let attempt = Pin::new(&mut this.io).poll_write(cx, buf);
        this.waited(cx, attempt)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let attempt = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.waited(cx, attempt)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let attempt = Pin::new(&mut this.io).poll_flush(cx);
        this.waited(cx, attempt)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

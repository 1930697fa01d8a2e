//! HTTP serving, sockets only: connections with TCP_NODELAY under each client's bounds
//! (`clients`), HTTPS when configured (`tls`), graceful shutdown with a bounded grace
//! period, and the worker threads the binary serves on (`workers`), each with its own
//! `routing::Frontend` (which `route` builds) and `/readyz`'s cached view (`readiness`).

pub(crate) mod clients;
pub(crate) mod readiness;
pub mod routing;
pub(crate) mod tls;
pub mod workers;

pub use routing::{router, Frontend};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_stream::wrappers::TcpListenerStream;
use tower::ServiceExt as _;

use self::clients::ClientLimits;
use crate::auth::mtls::PeerIdentity;
use crate::front::layers::{self, Edge, MaybeCors};
use crate::telemetry::ConnectionAddrs;
use tls::ServerTls;

/// Serves `router` on `listener` on the current runtime until `shutdown` resolves, then
/// drains as `serve_connections` does. The binary serves through `workers` instead.
pub async fn serve(
    listener: TcpListener,
    router: Frontend,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) {
    let (_, served) = watch::channel(Served::new(router));
    serve_live(listener, served, shutdown, grace).await;
}

/// `serve`, of whatever `served` holds when each request arrives (the admin listener,
/// whose routes a reload replaces).
pub async fn serve_live(
    listener: TcpListener,
    served: watch::Receiver<Served>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) {
    let incoming = TcpListenerStream::new(listener).take_until(shutdown);
    serve_connections(incoming, served, grace, None, ClientLimits::default()).await;
}

/// What a listener serves: the edge stack (`front::layers`) around a `Frontend`. A reload
/// replaces it whole; each request is served by the one current when it arrives, and keeps
/// it to its end.
#[derive(Clone)]
pub struct Served {
    edge: Edge<MaybeCors<Frontend>>,
    max_header_size: Option<usize>,
    lifecycle: Arc<crate::lifecycle::Lifecycle>,
}

impl Served {
    /// The edge stack around `router`.
    pub fn new(router: Frontend) -> Served {
        let max_header_size = router.max_header_size();
        let lifecycle = router.lifecycle().clone();
        let cors = router.cors();
        let sensitive = router.sensitive();
        let edge = layers::stack(layers::with_cors(router, cors), sensitive.iter().cloned());
        Served {
            edge,
            max_header_size,
            lifecycle,
        }
    }
}

/// A connection's service: each request goes to what `served` holds at that moment, so
/// the requests of a kept-alive connection see a reload too.
struct Live {
    served: watch::Receiver<Served>,
    /// The edge that was ready for the next call.
    ready: Option<Edge<MaybeCors<Frontend>>>,
}

impl Clone for Live {
    fn clone(&self) -> Live {
        Live {
            served: self.served.clone(),
            ready: None,
        }
    }
}

impl tower::Service<http::Request<axum::body::Body>> for Live {
    type Response =
        <Edge<MaybeCors<Frontend>> as tower::Service<http::Request<axum::body::Body>>>::Response;
    type Error =
        <Edge<MaybeCors<Frontend>> as tower::Service<http::Request<axum::body::Body>>>::Error;
    type Future =
        <Edge<MaybeCors<Frontend>> as tower::Service<http::Request<axum::body::Body>>>::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        let edge = self
            .ready
            .get_or_insert_with(|| self.served.borrow().edge.clone());
        edge.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<axum::body::Body>) -> Self::Future {
        let mut edge = self
            .ready
            .take()
            .unwrap_or_else(|| self.served.borrow().edge.clone());
        edge.call(request)
    }
}

/// Serves each connection of `incoming` on its own task of the current runtime, over
/// `tls` when given and within `limits`, through the edge stack (`front::layers`) around
/// `router`. When `incoming` ends, idle connections are closed and in-flight requests may
/// finish for at most `grace`; then open streams end with a final error frame
/// (`Lifecycle::close_streams`), which they get `FINAL_FRAME_FLUSH` to deliver, and what
/// remains is closed.
pub(crate) async fn serve_connections(
    incoming: impl Stream<Item = std::io::Result<TcpStream>>,
    served: watch::Receiver<Served>,
    grace: Duration,
    tls: Option<ServerTls>,
    limits: ClientLimits,
) {
    // Every reload keeps the process's lifecycle (`route::Routes::sharing`).
    let lifecycle = served.borrow().lifecycle.clone();
    let (stop_tx, stop) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut incoming = std::pin::pin!(incoming);
    loop {
        tokio::select! {
            next = incoming.next() => match next {
                Some(Ok(stream)) => {
                    // Header bounds are the connection's: a reload sets them for new ones.
                    let max = served.borrow().max_header_size;
                    let edge = Live { served: served.clone(), ready: None };
                    let (stop, tls) = (stop.clone(), tls.clone());
                    connections.spawn(serve_connection(stream, edge, max, stop, tls, limits));
                }
                Some(Err(e)) => accept_failed(&e).await,
                None => break,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    if connections.is_empty() {
        return;
    }
    tracing::info!(
        ?grace,
        connections = connections.len(),
        "shutting down: draining in-flight requests"
    );
    let _ = stop_tx.send(true);
    if !drain(&mut connections, grace).await {
        tracing::info!("grace period over; ending open streams");
        lifecycle.close_streams();
        if !drain(&mut connections, FINAL_FRAME_FLUSH).await {
            tracing::warn!("closing the remaining connections");
            connections.shutdown().await;
        }
    }
}

/// Whether every connection ended within `limit`.
async fn drain(connections: &mut JoinSet<()>, limit: Duration) -> bool {
    let drained = async { while connections.join_next().await.is_some() {} };
    tokio::time::timeout(limit, drained).await.is_ok()
}

/// hyper's smallest HTTP/1.1 read buffer.
const MIN_BUF_SIZE: usize = 8 << 10;

/// How long streams get to deliver their final frame before connections are cut.
const FINAL_FRAME_FLUSH: Duration = Duration::from_secs(1);

/// One connection: its TLS handshake first when the listener serves HTTPS (here, on the
/// connection's task, so a slow handshake holds up no other connection), then HTTP.
async fn serve_connection(
    stream: TcpStream,
    edge: Live,
    max_header_size: Option<usize>,
    mut stop: watch::Receiver<bool>,
    tls: Option<ServerTls>,
    limits: ClientLimits,
) {
    // Small JSON replies and SSE frames must not wait for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    // The access log names the client; a card without a configured origin names the local end.
    let peer = match (stream.peer_addr(), stream.local_addr()) {
        (Ok(client), Ok(local)) => Some(ConnectionAddrs { client, local }),
        _ => None,
    };
    let connection = (peer, edge, max_header_size, limits);
    match tls {
        // Cleartext: HTTP/1.1, or HTTP/2 with prior knowledge (`serve_http`).
        None => serve_http(stream, connection, (None, None), stop).await,
        Some(tls) => {
            // Boxed: the TLS session and its connection state would otherwise size the task
            // of every cleartext connection too.
            Box::pin(async move {
                if let Some(session) = tls.accept(stream, &mut stop).await {
                    // The verified client certificate's names, read once for every request
                    // of the connection (mTLS identity, `auth::mtls`).
                    let tls = session.get_ref().1;
                    let identity = tls
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|leaf| Arc::new(PeerIdentity::of(leaf)));
                    // The protocol rustls agreed by ALPN needs no detection.
                    let version = match tls.alpn_protocol() {
                        Some(b"h2") => Some(http::Version::HTTP_2),
                        Some(b"http/1.1") => Some(http::Version::HTTP_11),
                        _ => None,
                    };
                    serve_http(session, connection, (identity, version), stop).await;
                }
            })
            .await
        }
    }
}

/// HTTP/1.1 or HTTP/2 (prior knowledge, or chosen by ALPN) on one connection within
/// `limits`, closed gracefully once `stop` turns true or no request has been in flight for
/// the idle timeout. Each request carries the peer's address and, over TLS with a client
/// certificate, its `identity`; `version`, when ALPN agreed one, spares detecting it.
async fn serve_http<I>(
    stream: I,
    (peer, edge, max_header_size, limits): (
        Option<ConnectionAddrs>,
        Live,
        Option<usize>,
        ClientLimits,
    ),
    (identity, version): (Option<Arc<PeerIdentity>>, Option<http::Version>),
    stop: watch::Receiver<bool>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let edge = edge.map_request(move |mut r: http::Request<axum::body::Body>| {
        if let Some(peer) = peer {
            r.extensions_mut().insert(peer);
        }
        if let Some(identity) = &identity {
            r.extensions_mut().insert(identity.clone());
        }
        r
    });
    let activity = clients::Activity::new();
    let service = TowerToHyperService::new(clients::Track::new(edge, activity.clone(), limits));
    let io = TokioIo::new(clients::SendStall::new(stream, limits.send_timeout));
    let bounds = (&*activity, limits);
    if version == Some(http::Version::HTTP_2) {
        // Boxed here and below: HTTP/2's connection state would otherwise size every
        // HTTP/1.1 connection's task too.
        Box::pin(serve_http2(io, service, max_header_size, stop, bounds)).await;
        return;
    }
    // HTTP/1.1 first, also when nothing said which (cleartext, or TLS without ALPN): hyper's
    // HTTP/1.1 connection tells an HTTP/2 preface (prior knowledge) from a request head and
    // hands back what it read. hyper-util's detection instead hands hyper the first bytes as
    // a read of their own, and hyper grows its read buffer to 16 KiB for the connection's
    // life (benches/README.md, "fan-in"). A preface cut after its version and before its
    // 24th byte is answered as a malformed HTTP/1.1 request (400); clients write it whole.
    let mut builder = clients::http1_builder(&limits);
    // With header limits, the listener refuses (431) heads above every route's limit
    // before they are buffered whole; each route then holds requests to its own.
    if let Some(max) = max_header_size {
        builder.max_buf_size(max.max(MIN_BUF_SIZE));
    }
    let mut connection = builder.serve_connection(io, service);
    let served = drive(
        std::pin::Pin::new(&mut connection),
        |c| c.graceful_shutdown(),
        stop.clone(),
        bounds,
    )
    .await;
    let preface = served.is_some_and(|served| served.is_err_and(|e| e.is_parse_version_h2()));
    if version.is_some() || !preface {
        return;
    }
    let hyper::server::conn::http1::Parts {
        io,
        read_buf,
        service,
        ..
    } = connection.into_parts();
    let io = clients::Replay::new(read_buf, io);
    Box::pin(serve_http2(io, service, max_header_size, stop, bounds)).await;
}

/// HTTP/2 on one connection, as `serve_http`.
async fn serve_http2<I, S>(
    io: I,
    service: S,
    max_header_size: Option<usize>,
    stop: watch::Receiver<bool>,
    bounds: (&clients::Activity, ClientLimits),
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming> + Send,
    S::Future: Send + 'static,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = clients::http2_builder();
    if let Some(max) = max_header_size {
        builder.max_header_list_size(max.try_into().unwrap_or(u32::MAX));
    }
    let connection = std::pin::pin!(builder.serve_connection(io, service));
    let _ = drive(connection, |c| c.graceful_shutdown(), stop, bounds).await;
}

/// Serves `connection` until it ends, and gives its outcome; once `stop` turns true or
/// nothing has been in flight on it (`activity`) for the idle timeout, it is shut down
/// gracefully first. Shut down for being idle, it is closed (no outcome) if it has not
/// ended a send timeout later: with nothing in flight, what can still hold it open is an
/// HTTP/2 stream dropped because its client granted it no window (`clients::Tracked`),
/// which hyper would wait on for as long as the client likes.
async fn drive<C: Future>(
    mut connection: std::pin::Pin<&mut C>,
    graceful_shutdown: impl FnOnce(std::pin::Pin<&mut C>),
    mut stop: watch::Receiver<bool>,
    (activity, limits): (&clients::Activity, ClientLimits),
) -> Option<C::Output> {
    let idled = tokio::select! {
        served = connection.as_mut() => return Some(served),
        _ = stop.wait_for(|stop| *stop) => false,
        () = activity.idle_for(limits.idle_timeout) => true,
    };
    graceful_shutdown(connection.as_mut());
    match idled {
        true => tokio::time::timeout(limits.send_timeout, connection)
            .await
            .ok(),
        false => Some(connection.await),
    }
}

/// Errors of a single incoming connection are the client's problem; others (e.g. out of
/// file descriptors) would repeat at once, so accepting pauses a moment.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// What asked the process to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGTERM: the orchestrator's stop, with a drain delay first.
    Terminate,
    /// Ctrl-C: someone at a terminal, who is not kept waiting by the drain delay.
    Interrupt,
}

/// The Ctrl-Cs that come after it is made (on Unix, SIGINT is listened for from `listen` on; a
/// `tokio::signal::ctrl_c` future would only listen from its first poll).
pub struct Interrupts {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    /// Listens from now on.
    pub fn listen() -> Interrupts {
        Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    /// Resolves at the next Ctrl-C; never if none can be listened for.
    pub async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            if signal.recv().await.is_some() {
                return;
            }
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_ok() {
            return;
        }
        std::future::pending().await
    }
}

/// Resolves on SIGTERM or Ctrl-C, saying which.
pub async fn shutdown_signal() -> StopSignal {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => StopSignal::Interrupt,
        () = term => StopSignal::Terminate,
    }
}

//! HTTP serving: the routes of a configuration built once (`FrontendTemplate`) and per
//! serving thread (`routing::Frontend`), connections with TCP_NODELAY, HTTPS when
//! configured (`tls`), graceful shutdown with a bounded grace period, and the worker
//! threads the binary serves on (`workers`).

pub mod clients;
pub mod readiness;
pub mod routing;
pub mod tls;
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
use tower_http::cors::CorsLayer;

use self::clients::ClientLimits;
use crate::backend::affinity::{Affine, IdCodec};
use crate::backend::endpoints::balance::Balanced;
use crate::backend::endpoints::{
    probe_address, AtAddress, Endpoint, NewClient, RouteEndpoints, Targets,
};
use crate::backend::grpc::GrpcBackend;
use crate::backend::{rest::RestBackend, Backend};
use crate::card::{CardService, RouteCard, BACKEND_CARD_SOURCE};
use crate::front::layers::{self, Edge, MaybeCors};
use crate::front::limits::Limits;
use crate::front::Gateway;
use crate::lifecycle::Lifecycle;
use crate::protocol::binding::Binding;
use crate::settings::{ConfigError, RouteSettings, Settings, Upstream};
use crate::telemetry::ClientAddr;
use crate::telemetry::Metrics;
use tls::ServerTls;

/// A route's backend or card could not be built from its settings.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Card(#[from] crate::card::CardConfigError),
    #[error(transparent)]
    Grpc(#[from] crate::backend::grpc::GrpcConfigError),
    #[error(transparent)]
    Rest(#[from] crate::backend::rest::RestConfigError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("route {route:?}: {error}")]
    Route {
        route: String,
        error: Box<BackendError>,
    },
}

/// The gateway of one route's settings, built once; each serving thread takes its own
/// instance (`gateway`). The backend's shared parts are built here once (TLS set up, the
/// gRPC keepalive policy a backend's GOAWAY `too_many_pings` adjusts for every worker; for
/// many endpoints their set, health and resolution, `backend::endpoints`); each instance
/// has its own connections.
pub struct GatewayTemplate {
    settings: RouteSettings,
    /// What the route's backend is, with the demo agent's address in place of `--demo`.
    targets: Targets,
    backend: BackendTemplate,
}

enum BackendTemplate {
    Grpc(GrpcBackend),
    Rest {
        url: String,
    },
    /// Many endpoints: each worker balances over them; with task affinity, through the
    /// route's id codec.
    Balanced(Arc<RouteEndpoints>, Option<Arc<IdCodec>>),
}

impl GatewayTemplate {
    /// Builds the backend's shared parts of `settings` (one URL, a list, or a `dns:///`
    /// name; `demo_backend` for the demo agent). A `dns:///` name is resolved by a task on
    /// the current runtime from now on.
    pub fn new(settings: &RouteSettings, demo_backend: Option<&str>) -> Result<Self, BackendError> {
        let targets = match (&settings.upstream, demo_backend) {
            (Upstream::Targets(targets), _) => targets.clone(),
            (Upstream::Demo, Some(url)) => Targets::One(url.to_owned()),
            (Upstream::Demo, None) => return Err(ConfigError::NoBackend.into()),
        };
        let codec = settings.affinity.clone();
        let backend = match targets.clone() {
            Targets::One(url) => match settings.binding {
                Binding::Grpc => BackendTemplate::Grpc(grpc_backend(settings, &url)?),
                Binding::HttpJson => {
                    // Built once here so a bad URL fails at start, not in a worker.
                    let client = &settings.client;
                    RestBackend::with_identity(
                        &url,
                        client.connect_timeout,
                        client.ca.as_deref(),
                        client.identity.as_deref(),
                    )?;
                    BackendTemplate::Rest { url }
                }
            },
            Targets::List(urls) => {
                let endpoints = urls
                    .iter()
                    .map(|url| listed_endpoint(settings, url, codec.as_deref()))
                    .collect::<Result<_, _>>()?;
                BackendTemplate::Balanced(
                    RouteEndpoints::fixed(endpoints, settings.policy.clone()),
                    codec,
                )
            }
            Targets::Dns(target) => {
                let at = dns_endpoints(settings, &target.url(), codec.clone())?;
                let route = RouteEndpoints::resolved(
                    &target,
                    &settings.resolution,
                    at,
                    settings.policy.clone(),
                )
                .map_err(ConfigError::BackendUrl)?;
                BackendTemplate::Balanced(route, codec)
            }
        };
        Ok(GatewayTemplate {
            settings: settings.clone(),
            targets,
            backend,
        })
    }

    /// A backend client of its own, for the runtime this is called on.
    pub fn backend(&self) -> Result<Arc<dyn Backend>, BackendError> {
        let client = &self.settings.client;
        Ok(match &self.backend {
            BackendTemplate::Grpc(grpc) => Arc::new(grpc.for_worker()),
            BackendTemplate::Rest { url } => Arc::new(
                RestBackend::with_identity(
                    url,
                    client.connect_timeout,
                    client.ca.as_deref(),
                    client.identity.as_deref(),
                )?
                .max_message(client.max_message),
            ),
            BackendTemplate::Balanced(route, None) => Arc::new(Balanced::new(route.clone())),
            BackendTemplate::Balanced(route, Some(codec)) => {
                Arc::new(Affine::new(Balanced::new(route.clone()), codec.clone()))
            }
        })
    }

    /// The route's push guard, resolving on the runtime this is called on.
    fn push_guard(&self) -> Result<Option<crate::push::PushGuard>, BackendError> {
        let Some(policy) = &self.settings.push else {
            return Ok(None);
        };
        crate::push::PushGuard::new(policy.clone(), self.settings.resolution.server)
            .map(Some)
            .map_err(|e| ConfigError::PushResolver(e).into())
    }

    /// The route's endpoints, when it balances over many (readiness and metrics).
    pub fn endpoints(&self) -> Option<&Arc<RouteEndpoints>> {
        match &self.backend {
            BackendTemplate::Balanced(route, _) => Some(route),
            BackendTemplate::Grpc(_) | BackendTemplate::Rest { .. } => None,
        }
    }

    /// One instance, with a backend client of its own, sharing `metrics` and the route's
    /// card, if it serves one.
    pub fn gateway(
        &self,
        metrics: Arc<Metrics>,
        card: Option<Arc<CardService>>,
        lifecycle: Arc<Lifecycle>,
    ) -> Result<Arc<Gateway>, BackendError> {
        let settings = &self.settings;
        Ok(Arc::new(Gateway {
            backend: self.backend()?,
            forward: settings.forward.clone(),
            unary_timeout: settings.unary_timeout,
            stream_timeout: settings.stream_timeout,
            first_event_timeout: settings.first_event_timeout,
            keepalive: settings.keepalive,
            max_body: settings.max_body,
            batch: settings.batch,
            tenant: settings.tenant.clone(),
            card,
            lifecycle,
            metrics,
            legacy: settings.legacy,
            push: self.push_guard()?,
        }))
    }
}

/// Every route of a configuration, checked and built once (`new`); each serving thread
/// takes its own `Frontend` from it (`frontend`). The routes' card services are shared by
/// every thread.
pub struct FrontendTemplate {
    routes: Vec<RouteTemplate>,
    lifecycle: Arc<Lifecycle>,
    /// The global public URL, forwarded-header trust and allowed hosts, for the catalog.
    origins: crate::card::origin::Origins,
    /// Every route's limits, shared by all workers, and the CORS layer.
    limits: Option<Arc<Limits>>,
    cors: Option<CorsLayer>,
    /// `/readyz`'s checks of the agents, shared by every thread and listener.
    readiness: Arc<readiness::Readiness>,
    /// Whether `/metrics` is served by the admin listener instead of the main one.
    admin_listener: bool,
    /// The listener's HTTPS (`--tls-cert`), shared by every serving thread.
    tls: Option<ServerTls>,
    /// What each client connection may hold, and for how long.
    client_limits: ClientLimits,
}

struct RouteTemplate {
    gateway: GatewayTemplate,
    card: Option<Arc<CardService>>,
}

impl FrontendTemplate {
    /// Builds every route's backend template and card service (a card file is read and
    /// checked now). `demo_backend` is the `--demo` agent's address; the demo route serves
    /// the demo agent's card unless one is configured.
    /// Runs on the runtime the card services will refresh on (`start_cards`).
    pub fn new(settings: &Settings, demo_backend: Option<&str>) -> Result<Self, BackendError> {
        let mut routes = Vec::with_capacity(settings.routes.len());
        let mut checks = Vec::with_capacity(settings.routes.len());
        for route in &settings.routes {
            let in_route = |error: BackendError| BackendError::Route {
                route: route.name.clone(),
                error: Box::new(error),
            };
            let built = RouteTemplate::new(route, demo_backend).map_err(in_route)?;
            checks.push(
                readiness::RouteCheck::new(&route.name, &built.gateway)
                    .map_err(|e| in_route(e.into()))?,
            );
            routes.push(built);
        }
        let process = &settings.process;
        let readiness =
            readiness::Readiness::new(checks, process.readiness_cache, process.readiness_timeout);
        let route_limits: Vec<_> = settings
            .routes
            .iter()
            .map(|route| (route.name.as_str(), route.limits))
            .collect();
        Ok(FrontendTemplate {
            routes,
            lifecycle: Arc::default(),
            origins: process.origins.clone(),
            limits: Limits::new(process.limits, &route_limits),
            cors: process.cors.clone(),
            readiness: Arc::new(readiness),
            admin_listener: process.admin_listen.is_some(),
            tls: process.tls.clone(),
            client_limits: process.client_limits,
        })
    }

    /// The deadlines of every client connection.
    pub fn client_limits(&self) -> ClientLimits {
        self.client_limits
    }

    /// Starts fetching and refreshing every route's card, on the current runtime.
    pub fn start_cards(&self) {
        for card in self.routes.iter().filter_map(|r| r.card.as_ref()) {
            card.start();
        }
    }

    /// One serving thread's routes, with backend clients of their own, sharing `metrics`.
    pub fn frontend(&self, metrics: &Arc<Metrics>) -> Result<Frontend, BackendError> {
        let mut served = Vec::with_capacity(self.routes.len());
        for route in &self.routes {
            let settings = &route.gateway.settings;
            served.push(routing::ServedRoute {
                name: settings.name.clone(),
                prefix: settings.prefix.clone(),
                host: settings.host.clone(),
                jsonrpc_path: settings.jsonrpc_path.clone(),
                endpoints: route.gateway.endpoints().cloned(),
                gateway: route.gateway.gateway(
                    metrics.clone(),
                    route.card.clone(),
                    self.lifecycle.clone(),
                )?,
            });
        }
        let surface = match self.admin_listener {
            true => routing::Surface::Public,
            false => routing::Surface::All,
        };
        let extra: Vec<String> = self
            .routes
            .iter()
            .flat_map(|route| route.gateway.settings.sensitive_headers.iter().cloned())
            .collect();
        Ok(
            Frontend::new(served, metrics.clone(), self.lifecycle.clone())
                .with_sensitive(crate::protocol::params::sensitive_names(&extra))
                .with_origin(self.origins.clone())
                .with_limits(self.limits.clone())
                .with_cors(self.cors.clone())
                .with_readiness(self.readiness.clone(), surface),
        )
    }

    /// The admin listener's frontend (`--admin-listen`): `/metrics`, `/healthz` and
    /// `/readyz` only, on the current runtime.
    pub fn admin_frontend(&self, metrics: &Arc<Metrics>) -> Result<Frontend, BackendError> {
        let frontend = self.frontend(metrics)?;
        Ok(frontend.with_readiness(self.readiness.clone(), routing::Surface::Admin))
    }

    /// The life of the process every route and stream of every thread follows.
    pub fn lifecycle(&self) -> &Arc<Lifecycle> {
        &self.lifecycle
    }

    /// The listener's HTTPS, when configured.
    pub fn tls(&self) -> Option<&ServerTls> {
        self.tls.as_ref()
    }
}

impl RouteTemplate {
    fn new(route: &RouteSettings, demo_backend: Option<&str>) -> Result<Self, BackendError> {
        let gateway = GatewayTemplate::new(route, demo_backend)?;
        let mut settings = route.card.clone();
        if demo_backend.is_some() && settings.source.is_none() {
            settings.source = Some(BACKEND_CARD_SOURCE.to_owned());
        }
        // Every route has a card service: without a source of its own it still rewrites
        // the extended cards of GetExtendedAgentCard and checks the request's host.
        let backend = match settings.source.as_deref() {
            Some(BACKEND_CARD_SOURCE) => Some(gateway.backend()?),
            _ => None,
        };
        let place = route_card(route);
        let card = Some(Arc::new(CardService::new(&settings, place, backend)?));
        Ok(RouteTemplate { gateway, card })
    }
}

/// What the card service of `route` must know about it.
fn route_card(route: &RouteSettings) -> RouteCard {
    let origin = &route.origin;
    RouteCard {
        route: route.name.clone(),
        jsonrpc_path: route.jsonrpc_path(),
        card_path: route.card_path(),
        public_url: origin.public_url.clone(),
        trust_forwarded: origin.trust_forwarded,
        trusted_proxy_hops: origin.trusted_proxy_hops,
        allowed_hosts: origin.allowed_hosts.clone(),
        tls: origin.tls,
        fixed_tenant: route.tenant.clone(),
        binding: route.binding,
        legacy: route.legacy,
    }
}

/// One gateway for a route's settings (one serving thread).
pub fn gateway(route: &RouteSettings, metrics: Arc<Metrics>) -> Result<Arc<Gateway>, BackendError> {
    GatewayTemplate::new(route, None)?.gateway(metrics, None, Arc::default())
}

fn grpc_backend(settings: &RouteSettings, url: &str) -> Result<GrpcBackend, BackendError> {
    let client = &settings.client;
    Ok(GrpcBackend::with_identity(
        url,
        &client.grpc(),
        client.ca.as_deref(),
        client.identity.as_deref(),
    )?)
}

/// One URL of a balanced list, checked now (a bad one fails the start).
fn listed_endpoint(
    settings: &RouteSettings,
    url: &str,
    codec: Option<&IdCodec>,
) -> Result<Endpoint, BackendError> {
    let probe = probe_address(url)
        .ok_or_else(|| ConfigError::BackendUrl(format!("{url:?} has no host")))?;
    let client = &settings.client;
    let (ca, id) = (client.ca.clone(), client.identity.clone());
    let new_client: NewClient = match settings.binding {
        Binding::Grpc => {
            let grpc = grpc_backend(settings, url)?;
            Box::new(move || Ok(Arc::new(grpc.for_worker()) as Arc<dyn Backend>))
        }
        Binding::HttpJson => {
            RestBackend::with_identity(url, client.connect_timeout, ca.as_deref(), id.as_deref())?;
            let (url, timeout) = (url.to_owned(), client.connect_timeout);
            let max_message = client.max_message;
            Box::new(move || {
                let rest = RestBackend::with_identity(&url, timeout, ca.as_deref(), id.as_deref())
                    .map_err(|e| e.to_string())?;
                Ok(Arc::new(rest.max_message(max_message)) as Arc<dyn Backend>)
            })
        }
    };
    Ok(Endpoint::new(url.to_owned(), probe, new_client, codec))
}

/// How the endpoint at each address of a `dns:///` backend is made: the client of `url`
/// (the DNS name's, for `:authority`, `Host` and TLS), connecting to the address. The
/// URL is checked now.
fn dns_endpoints(
    settings: &RouteSettings,
    url: &str,
    codec: Option<Arc<IdCodec>>,
) -> Result<AtAddress, BackendError> {
    let client = &settings.client;
    Ok(match settings.binding {
        Binding::Grpc => {
            let grpc = grpc_backend(settings, url)?;
            Box::new(move |address| {
                let pod = grpc.at(address);
                let new_client: NewClient =
                    Box::new(move || Ok(Arc::new(pod.for_worker()) as Arc<dyn Backend>));
                let label = address.to_string();
                Endpoint::new(label.clone(), label, new_client, codec.as_deref())
            })
        }
        Binding::HttpJson => {
            let (ca, id) = (client.ca.clone(), client.identity.clone());
            RestBackend::with_identity(url, client.connect_timeout, ca.as_deref(), id.as_deref())?;
            let (url, timeout, ca, id) = (
                url.to_owned(),
                client.connect_timeout,
                Arc::new(ca),
                Arc::new(id),
            );
            let max_message = client.max_message;
            Box::new(move |address| {
                let (url, ca, id) = (url.clone(), ca.clone(), id.clone());
                let new_client: NewClient = Box::new(move || {
                    let rest =
                        RestBackend::at(&url, timeout, ca.as_deref(), id.as_deref(), address)
                            .map_err(|e| e.to_string())?;
                    Ok(Arc::new(rest.max_message(max_message)) as Arc<dyn Backend>)
                });
                let label = address.to_string();
                Endpoint::new(label.clone(), label, new_client, codec.as_deref())
            })
        }
    })
}

/// Serves `router` on `listener` on the current runtime until `shutdown` resolves, then
/// drains as `serve_connections` does. The binary serves through `workers` instead.
pub async fn serve(
    listener: TcpListener,
    router: Frontend,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) {
    let incoming = TcpListenerStream::new(listener).take_until(shutdown);
    serve_connections(incoming, router, grace, None, ClientLimits::default()).await;
}

/// Serves each connection of `incoming` on its own task of the current runtime, over
/// `tls` when given and within `limits`, through the edge stack (`front::layers`) around
/// `router`. When `incoming` ends, idle connections are closed and in-flight requests may
/// finish for at most `grace`; then open streams end with a final error frame
/// (`Lifecycle::close_streams`), which they get `FINAL_FRAME_FLUSH` to deliver, and what
/// remains is closed.
pub async fn serve_connections(
    incoming: impl Stream<Item = std::io::Result<TcpStream>>,
    router: Frontend,
    grace: Duration,
    tls: Option<ServerTls>,
    limits: ClientLimits,
) {
    let lifecycle = router.lifecycle().clone();
    let max_header_size = router.max_header_size();
    let cors = router.cors();
    let sensitive = router.sensitive();
    let edge = layers::stack(layers::with_cors(router, cors), sensitive.iter().cloned());
    let (stop_tx, stop) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut incoming = std::pin::pin!(incoming);
    loop {
        tokio::select! {
            next = incoming.next() => match next {
                Some(Ok(stream)) => {
                    let (edge, stop, tls) = (edge.clone(), stop.clone(), tls.clone());
                    let (max, limits) = (max_header_size, limits);
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
    edge: Edge<MaybeCors<Frontend>>,
    max_header_size: Option<usize>,
    mut stop: watch::Receiver<bool>,
    tls: Option<ServerTls>,
    limits: ClientLimits,
) {
    // Small JSON replies and SSE frames must not wait for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    // The access log names the client.
    let peer = stream.peer_addr().ok().map(ClientAddr);
    let connection = (peer, edge, max_header_size, limits);
    match tls {
        None => serve_http(stream, connection, stop).await,
        Some(tls) => {
            // Boxed: the TLS session and its connection state would otherwise size the task
            // of every cleartext connection too.
            Box::pin(async move {
                if let Some(session) = tls.accept(stream, &mut stop).await {
                    serve_http(session, connection, stop).await;
                }
            })
            .await
        }
    }
}

/// HTTP/1.1 or HTTP/2 (prior knowledge, or chosen by ALPN) on one connection within
/// `limits`, closed gracefully once `stop` turns true or no request has been in flight for
/// the idle timeout.
async fn serve_http<I>(
    stream: I,
    (peer, edge, max_header_size, limits): (
        Option<ClientAddr>,
        Edge<MaybeCors<Frontend>>,
        Option<usize>,
        ClientLimits,
    ),
    mut stop: watch::Receiver<bool>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let edge = edge.map_request(move |mut r: http::Request<axum::body::Body>| {
        if let Some(peer) = peer {
            r.extensions_mut().insert(peer);
        }
        r
    });
    let activity = clients::Activity::new();
    let service = TowerToHyperService::new(clients::Track::new(edge, activity.clone(), limits));
    let mut builder = clients::builder(&limits);
    // With header limits, the listener refuses (431) heads above every route's limit
    // before they are buffered whole; each route then holds requests to its own.
    if let Some(max) = max_header_size {
        builder.http1().max_buf_size(max.max(MIN_BUF_SIZE));
        builder
            .http2()
            .max_header_list_size(max.try_into().unwrap_or(u32::MAX));
    }
    let io = TokioIo::new(clients::SendStall::new(stream, limits.send_timeout));
    let mut connection = std::pin::pin!(builder.serve_connection(io, service));
    tokio::select! {
        _ = connection.as_mut() => return,
        _ = stop.wait_for(|stop| *stop) => connection.as_mut().graceful_shutdown(),
        () = activity.idle_for(limits.idle_timeout) => connection.as_mut().graceful_shutdown(),
    }
    let _ = connection.await;
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

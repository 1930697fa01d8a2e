//! The gateway's HTTP surface as one service: each route's JSON-RPC endpoint, HTTP+JSON
//! operations (`front::rest`: a path that names none falls through to the rest) and agent
//! card, and the gateway's own endpoints (`/healthz`, `/readyz`, `/metrics`, and the API
//! catalog, RFC 9727, listing every route's card and fronts), which no route may take
//! (`config::routes`). A request for anything else gets a 404 with a small
//! JSON body; a known path with the wrong method a 405 with `Allow`. The push relay's
//! callback (`push-callback-url`'s path) comes before the routes. An admin listener
//! serves only the gateway's health and metrics endpoints, and takes `/metrics` off the
//! main one (`Surface`). Only the admin listener's `/readyz` says which route is not
//! ready and why; elsewhere it says ready or not (the reasons are logged,
//! `server::readiness`).
//!
//! A `POST` to a JSON-RPC endpoint, nearly every request, is matched with a few string
//! comparisons and goes straight to its handler (the axum router's matching and
//! extractors cost about 5 % of a unary call, benches/README.md).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::Poll;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use clap::ValueEnum;
use futures::future::{BoxFuture, FutureExt, Shared, WeakShared};
use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderValue, Method, StatusCode};
use tower_http::cors::CorsLayer;

mod index;

pub(crate) use index::RouteIndex;

use crate::backend::endpoints::RouteEndpoints;
use crate::card::origin::Origins;
use crate::front::call::authenticate;
use crate::front::jsonrpc::refused_response;
use crate::front::limits::Limits;
use crate::front::rest::{self, Routed};
use crate::front::{grpc, jsonrpc, Gateway};
use crate::lifecycle::Lifecycle;
use crate::push::sign::JWKS_PATH;
use crate::server::readiness::{Readiness, ReadinessMode};
use crate::telemetry::access::CallRecord;
use crate::telemetry::ConnectionAddrs;
use crate::telemetry::{DeliveryMetrics, Metrics};

/// The path of a route's agent card below its prefix (spec 8.2).
pub(crate) const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The API catalog's well-known path (RFC 9727).
pub(crate) const CATALOG_PATH: &str = "/.well-known/api-catalog";

/// Room in the listener's header bound for what a route's header count leaves out.
const HEADER_SLACK: usize = 8 << 10;

/// One route as a worker serves it.
pub struct ServedRoute {
    /// The route's name (`[[route]] name`), in logs and metrics.
    pub name: String,
    /// Empty (the root) or `/segment…` without trailing `/`.
    pub prefix: String,
    /// Lowercase host name; `None`: any host.
    pub host: Option<String>,
    /// The JSON-RPC endpoint's path below the prefix (`None`: the route does not serve the
    /// JSON-RPC front).
    pub jsonrpc_path: Option<String>,
    /// The HTTP+JSON front's base path below the prefix, empty for the prefix itself
    /// (`None`: the route does not serve the HTTP+JSON front).
    pub rest_path: Option<String>,
    /// Whether the route serves the gRPC front (calls told by their content type).
    pub grpc: bool,
    /// The route's endpoints when it balances over many (`/readyz`, `/metrics`).
    pub endpoints: Option<Arc<RouteEndpoints>>,
    /// What the route's calls go through: its backend, policies and deadlines.
    pub gateway: Arc<Gateway>,
}

/// The routes of one worker plus the gateway's own endpoints.
#[derive(Clone)]
pub struct Frontend {
    routes: Arc<[ServedRoute]>,
    /// Finds a request's route among `routes` (by prefix and host).
    index: Arc<RouteIndex>,
    /// Whether any route selects by host (else the `Host` header is never read).
    by_host: bool,
    /// Whether any route serves gRPC (then so is `grpc.health.v1`).
    grpc: bool,
    metrics: Arc<Metrics>,
    /// `/readyz` follows it.
    lifecycle: Arc<Lifecycle>,
    /// Where the catalog is public: the gateway's public URL, else from the request
    /// (forwarded headers if trusted), within the allowed hosts.
    origins: Origins,
    /// The routes' limits (in route order), shared by every worker; `None`: no limits.
    limits: Option<Arc<Limits>>,
    /// The CORS layer the connections serve this frontend behind (`layers::with_cors`).
    cors: Option<CorsLayer>,
    /// The headers the edge marks sensitive (`params::sensitive_names`, every route's).
    sensitive: Arc<[http::HeaderName]>,
    /// The agents' checks behind `/readyz`; without them only the endpoints' ejection
    /// state counts.
    readiness: Option<Arc<Readiness>>,
    surface: Surface,
    /// The push relay's callback (`push-callback-url`), served before the routes.
    push_callback: Option<Arc<crate::push::relay::callback::Callback>>,
    /// The push deliveries' counters, for `/metrics`.
    push_metrics: Option<Arc<DeliveryMetrics>>,
    /// The JWK Set of the push signing key (`push::sign::JWKS_PATH`).
    jwks: Option<bytes::Bytes>,
    /// The `/metrics` render in progress on this frontend, which the requests that arrive
    /// meanwhile share: with thousands of routes a render is megabytes, and concurrent
    /// scrapes would each make their own.
    metrics_render: Arc<std::sync::Mutex<Option<WeakShared<BoxFuture<'static, bytes::Bytes>>>>>,
}

/// What a listener serves. Every surface but `Admin` is public: whoever reaches it learns
/// from `/readyz` whether the gateway is ready, not which routes or agents are failing
/// and why (route names, agent addresses, health services; issue 20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Surface {
    /// The routes and every gateway endpoint; `/readyz` says ready or not only.
    All,
    /// The routes and every gateway endpoint but `/metrics`, which an admin listener serves;
    /// `/readyz` says ready or not only.
    Public,
    /// The admin listener: `/metrics`, `/healthz` and `/readyz` only, `/readyz` naming each
    /// route that is not ready and why.
    Admin,
}

impl Frontend {
    /// The service for `routes`, which `config::routes` made disjoint.
    pub fn new(
        routes: Vec<ServedRoute>,
        metrics: Arc<Metrics>,
        lifecycle: Arc<Lifecycle>,
    ) -> Frontend {
        let index = (routes.iter()).map(|r| (r.prefix.as_str(), r.host.as_deref()));
        let index = Arc::new(RouteIndex::new(index));
        Frontend::over(routes, index, metrics, lifecycle)
    }

    /// The service for `routes` found through `index`, their index, which every worker
    /// serving the same routes shares.
    pub(crate) fn over(
        routes: Vec<ServedRoute>,
        index: Arc<RouteIndex>,
        metrics: Arc<Metrics>,
        lifecycle: Arc<Lifecycle>,
    ) -> Frontend {
        Frontend {
            by_host: routes.iter().any(|r| r.host.is_some()),
            grpc: routes.iter().any(|r| r.grpc),
            index,
            routes: routes.into(),
            metrics,
            lifecycle,
            origins: Origins::default(),
            limits: None,
            cors: None,
            sensitive: crate::protocol::params::sensitive_names(&[]).into(),
            readiness: None,
            surface: Surface::All,
            push_callback: None,
            push_metrics: None,
            jwks: None,
            metrics_render: Arc::default(),
        }
    }

    /// Serves the push relay's callback at its path (`push/relay/callback.rs`).
    pub(crate) fn with_push_callback(
        mut self,
        callback: Option<Arc<crate::push::relay::callback::Callback>>,
    ) -> Frontend {
        self.push_callback = callback;
        self
    }

    /// The push deliveries' counters, and the JWK Set of their signing key if they are
    /// signed (`push::deliver`, `push::sign`).
    pub(crate) fn with_push(
        mut self,
        metrics: Arc<DeliveryMetrics>,
        jwks: Option<bytes::Bytes>,
    ) -> Frontend {
        self.push_metrics = Some(metrics);
        self.jwks = jwks;
        self
    }

    /// The routes' limits (`front::limits`), built once for every worker.
    pub(crate) fn with_limits(mut self, limits: Option<Arc<Limits>>) -> Frontend {
        self.limits = limits;
        self
    }

    /// The CORS layer for browser clients (`front::cors`).
    pub(crate) fn with_cors(mut self, cors: Option<CorsLayer>) -> Frontend {
        self.cors = cors;
        self
    }

    /// The headers the edge marks sensitive: `SENSITIVE` and every route's
    /// `--sensitive-header` names.
    pub(crate) fn with_sensitive(mut self, names: Vec<http::HeaderName>) -> Frontend {
        self.sensitive = names.into();
        self
    }

    /// The headers the edge stack marks sensitive before any layer sees them.
    pub(crate) fn sensitive(&self) -> Arc<[http::HeaderName]> {
        self.sensitive.clone()
    }

    /// The CORS layer to serve this frontend behind, if CORS is configured.
    pub(crate) fn cors(&self) -> Option<CorsLayer> {
        self.cors.clone()
    }

    /// The listener's bound on request headers: above every route's own limit
    /// (`RouteLimits::check_headers` holds each route to its own), with room for the
    /// request line or HTTP/2 pseudo-headers that the routes' count leaves out.
    pub(crate) fn max_header_size(&self) -> Option<usize> {
        let routes = self.limits.as_ref()?.max_header_size()?;
        Some(routes.saturating_add(HEADER_SLACK))
    }

    /// `/readyz` checks the agents through `readiness`; the listener serves `surface`.
    pub(crate) fn with_readiness(
        mut self,
        readiness: Arc<Readiness>,
        surface: Surface,
    ) -> Frontend {
        self.readiness = Some(readiness);
        self.surface = surface;
        self
    }

    /// The life of the process this frontend follows.
    pub(crate) fn lifecycle(&self) -> &Arc<Lifecycle> {
        &self.lifecycle
    }

    /// Where the gateway is public, for the catalog's own URL and host check.
    pub(crate) fn with_origin(mut self, origins: Origins) -> Frontend {
        self.origins = origins;
        self
    }

    /// RFC 9727's catalog, a linkset (RFC 9264): the catalog's `item` links are the routes'
    /// card URLs; then each route's entry, anchored at its card, links the URL of every
    /// front the route enables.
    ///
    /// Relation types: `item` (RFC 6573), as RFC 9727 lists a publisher's APIs; a route's
    /// fronts are `describes` targets of its card (RFC 6892: the card is a description of
    /// each of these endpoints, which A2A clients pick by the `title`, the card's
    /// `protocolBinding`). RFC 8631's `service-desc` says the same from the other end, but
    /// would anchor one entry per front, not one per route.
    fn catalog(&self, request: &http::request::Parts) -> Response {
        let origin = match self.origins.origin(request) {
            Ok(origin) => origin,
            Err(refusal) => return json_error(StatusCode::BAD_REQUEST, &refusal.to_string()),
        };
        let origin = origin.as_str();
        let listed: Vec<_> = self
            .routes
            .iter()
            .filter_map(|route| {
                let card = route.gateway.card.as_ref().filter(|c| c.serves_card())?;
                // A card served only to authenticated callers is not listed to everyone.
                let public = route
                    .gateway
                    .auth
                    .as_ref()
                    .is_none_or(|a| a.card_is_public());
                let listing = card.listing(request).filter(|_| public)?;
                Some((route.name.as_str(), listing))
            })
            .collect();
        let items: Vec<_> = (listed.iter())
            .map(|(name, listing)| {
                serde_json::json!({
                    "href": listing.card,
                    "type": "application/json",
                    "title": name,
                })
            })
            .collect();
        let mut linkset = vec![serde_json::json!({
            "anchor": format!("{origin}{CATALOG_PATH}"),
            "item": items,
        })];
        linkset.extend(listed.iter().map(|(_, listing)| {
            let fronts: Vec<_> = (listing.fronts.iter())
                .map(|(binding, url)| serde_json::json!({ "href": url, "title": binding.name() }))
                .collect();
            serde_json::json!({ "anchor": listing.card, "describes": fronts })
        }));
        let linkset = serde_json::json!({ "linkset": linkset });
        let mut response = (
            [(CONTENT_TYPE, "application/linkset+json")],
            linkset.to_string(),
        )
            .into_response();
        // RFC 9727 section 2: the catalog names itself, for clients that only send HEAD.
        response.headers_mut().insert(
            http::header::LINK,
            HeaderValue::from_static("</.well-known/api-catalog>; rel=\"api-catalog\""),
        );
        response
    }

    /// `/readyz`: 503 while shutting down; else what the readiness mode asks
    /// (`ReadinessMode`): `process` is ready without asking the routes, `any-route` and
    /// `all-routes` judge each route (`route_readiness`). A public surface answers `ready`
    /// or `not ready` only (the log carries the reasons). The admin listener always judges
    /// the routes and names each one that is not ready and why, one line each (after
    /// `ready` when the mode is satisfied all the same); `verbose` there answers JSON
    /// listing every route, with the same status.
    async fn readiness(self, verbose: bool) -> Response {
        let draining = !self.lifecycle.is_ready();
        let admin = self.surface == Surface::Admin;
        let mode = self.mode();
        if draining && !(admin && verbose) {
            return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
        }
        if !admin && !mode.asks_routes() {
            return "ready\n".into_response();
        }
        let routes = self.route_readiness().await;
        let ready = !draining && mode.is_ready(routes.iter().map(|(_, u)| u.is_none()));
        let status = match ready {
            true => StatusCode::OK,
            false => StatusCode::SERVICE_UNAVAILABLE,
        };
        if admin && verbose {
            let state = match (draining, ready) {
                (true, _) => "shutting down",
                (false, true) => "ready",
                (false, false) => "not ready",
            };
            let routes: Vec<_> = (routes.iter())
                .map(|(route, unready)| match unready {
                    None => serde_json::json!({ "route": route, "ready": true }),
                    Some(unready) => {
                        serde_json::json!({ "route": route, "ready": false, "why": unready.why() })
                    }
                })
                .collect();
            let mode = mode.to_possible_value().map(|v| v.get_name().to_owned());
            let body = serde_json::json!({ "status": state, "mode": mode, "routes": routes });
            let kind = [(CONTENT_TYPE, "application/json")];
            return (status, kind, body.to_string()).into_response();
        }
        let mut why = String::new();
        for (route, unready) in &routes {
            match unready {
                Some(Unready::NoEndpoint) => {
                    why.push_str(&format!("route {route:?} has no connectable endpoint\n"))
                }
                Some(Unready::Check(reason)) => {
                    why.push_str(&format!("route {route:?} is not ready: {reason}\n"))
                }
                None => {}
            }
        }
        match (ready, admin) {
            (true, true) => format!("ready\n{why}").into_response(),
            (true, false) => "ready\n".into_response(),
            (false, true) => (status, why).into_response(),
            (false, false) => (status, "not ready\n").into_response(),
        }
    }

    /// Which routes `/readyz` needs ready (`router` gateways, without checks: the default).
    fn mode(&self) -> ReadinessMode {
        self.readiness
            .as_ref()
            .map_or_else(ReadinessMode::default, |r| r.mode())
    }

    /// Each route and, when it is not ready, why: a balanced route without an endpoint to
    /// call (none resolved, or all ejected; read fresh on every call), or one whose agent
    /// check failed (`server::readiness`, cached).
    async fn route_readiness(&self) -> Vec<(&str, Option<Unready>)> {
        let report = match &self.readiness {
            Some(readiness) => Some(readiness.report().await),
            None => None,
        };
        self.routes
            .iter()
            .enumerate()
            .map(|(i, route)| {
                let connectable = route.endpoints.as_ref().is_none_or(|e| e.is_connectable());
                let checked = report
                    .as_ref()
                    .and_then(|r| r.routes.get(i)?.1.as_ref().err());
                let unready = match (connectable, checked) {
                    (false, _) => Some(Unready::NoEndpoint),
                    (true, Some(why)) => Some(Unready::Check(why.clone())),
                    (true, None) => None,
                };
                (route.name.as_str(), unready)
            })
            .collect()
    }

    /// Every metric: the shared counters, then each route's readiness, then the balanced
    /// routes' endpoints.
    /// The `/metrics` render in progress, or a new one.
    fn shared_render(&self) -> Shared<BoxFuture<'static, bytes::Bytes>> {
        let mut slot = (self.metrics_render.lock()).unwrap_or_else(|e| e.into_inner());
        let running = slot.as_ref().and_then(WeakShared::upgrade);
        if let Some(running) = running.filter(|render| render.peek().is_none()) {
            return running;
        }
        let this = self.clone();
        let render = async move { bytes::Bytes::from(this.render_metrics().await) };
        let render = render.boxed().shared();
        *slot = render.downgrade();
        render
    }

    async fn render_metrics(self) -> String {
        let mut text = self.metrics.render();
        if let Some(limits) = &self.limits {
            limits.render(&mut text);
        }
        let ready: Vec<_> = self
            .route_readiness()
            .await
            .into_iter()
            .map(|(route, unready)| (route, unready.is_none()))
            .collect();
        crate::telemetry::render_route_ready(&mut text, &ready);
        let endpoints: Vec<_> = self
            .routes
            .iter()
            .filter_map(|r| Some((r.name.as_str(), r.endpoints.as_ref()?.stats())))
            .collect();
        self.metrics.render_endpoints(&mut text, &endpoints);
        let cards: Vec<_> = self
            .routes
            .iter()
            .filter_map(|r| {
                let card = r.gateway.card.as_ref().filter(|c| c.serves_card())?;
                Some((r.name.as_str(), card.renders()))
            })
            .collect();
        crate::telemetry::render_card_renders(&mut text, &cards);
        let refreshes: Vec<_> = (self.routes.iter())
            .filter_map(|r| {
                let card = r.gateway.card.as_ref().filter(|c| c.serves_card())?;
                Some((r.name.as_str(), card.refresh_failures()))
            })
            .collect();
        crate::telemetry::render_card_refresh_failures(&mut text, &refreshes);
        let auth: Vec<_> = self
            .routes
            .iter()
            .filter_map(|r| Some(r.gateway.auth.as_ref()?.counts(&r.name)))
            .flatten()
            .collect();
        crate::telemetry::render_auth(&mut text, &auth);
        let authz: Vec<_> = (self.routes.iter())
            .filter_map(|r| Some((r.name.as_str(), r.gateway.allow.as_ref()?.counts())))
            .collect();
        crate::telemetry::render_authz(&mut text, &authz);
        if let Some(push) = &self.push_metrics {
            push.render(&mut text);
        }
        text
    }

    /// The route of a gRPC call at the root path: the one route serving gRPC for the call's
    /// host, else the one serving it for any host; `None` when there are several (the call
    /// must then name its route's prefix) or none.
    fn grpc_route<B>(&self, request: &http::Request<B>) -> Option<(usize, &ServedRoute)> {
        let host = if self.by_host {
            request_host(request)
        } else {
            None
        };
        let serving = || (self.routes.iter().enumerate()).filter(|(_, r)| r.grpc);
        let for_host = serving().filter(|(_, r)| {
            let named = r.host.as_deref();
            named.is_some()
                && named
                    .zip(host)
                    .is_some_and(|(n, h)| n.eq_ignore_ascii_case(h))
        });
        if for_host.clone().next().is_some() {
            return only(for_host);
        }
        only(serving().filter(|(_, r)| r.host.is_none()))
    }

    /// The route `request` belongs to, and its index: a route for its host before a route
    /// for any host.
    fn route<B>(&self, request: &http::Request<B>) -> Option<(usize, &ServedRoute)> {
        let host = if self.by_host {
            request_host(request)
        } else {
            None
        };
        let index = self.index.find(request.uri().path(), host)?;
        Some((index, &self.routes[index]))
    }
}

/// The name of the route of the flags-only shorthand.
pub(crate) const DEFAULT_ROUTE: &str = "default";

/// One route in front of `gateway` at the root, answering JSON-RPC at `jsonrpc_path`
/// (what the one-route shorthand serves; tests use it too).
pub fn router(gateway: Arc<Gateway>, jsonrpc_path: &str) -> Frontend {
    let metrics = gateway.metrics.clone();
    let lifecycle = gateway.lifecycle.clone();
    let route = ServedRoute {
        name: DEFAULT_ROUTE.to_owned(),
        prefix: String::new(),
        host: None,
        jsonrpc_path: Some(jsonrpc_path.to_owned()),
        rest_path: None,
        grpc: false,
        endpoints: None,
        gateway,
    };
    Frontend::new(vec![route], metrics, lifecycle)
}

/// The request's host without port: the URI's authority (HTTP/2, absolute form), else the
/// `Host` header; without the trailing dot of a fully qualified name (`billing.example.` is
/// `billing.example`).
fn request_host<B>(request: &http::Request<B>) -> Option<&str> {
    let host = match request.uri().host() {
        Some(host) => host,
        None => {
            let host = request.headers().get(http::header::HOST)?.to_str().ok()?;
            // `[v6]:port`, `name:port` or `name`.
            match host.rfind(':') {
                Some(colon) if !host[colon..].contains(']') => &host[..colon],
                _ => host,
            }
        }
    };
    Some(host.strip_suffix('.').unwrap_or(host))
}

/// Why a request off the wire names no one valid host, which RFC 9112 section 3.2 answers
/// with 400: more than one `Host` field (which one a proxy in front judged by is unknown), a
/// `Host` that is not a `host[:port]`, or an HTTP/1.1 request without one. In-process
/// requests (no connection: tests, benchmarks) need none.
fn host_refusal<B>(request: &http::Request<B>) -> Option<&'static str> {
    use crate::card::origin::authority_parts;
    let mut hosts = request.headers().get_all(http::header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Some("the request has more than one Host header field"),
        (Some(host), None) => {
            let Some((host, port)) = host.to_str().ok().and_then(authority_parts) else {
                return Some("the request's Host is not a valid host[:port]");
            };
            // HTTP/2 names the host twice when a client sends both; a proxy in front may
            // have judged by either (RFC 9113 section 8.3.1).
            let same = |authority: &http::uri::Authority| {
                authority_parts(authority.as_str())
                    .is_some_and(|(h, p)| h.eq_ignore_ascii_case(host) && p == port)
            };
            (request.version() == http::Version::HTTP_2
                && request.uri().authority().is_some_and(|a| !same(a)))
            .then_some("the request's :authority and Host name different hosts")
        }
        (None, _) => (request.version() == http::Version::HTTP_11
            && request.uri().authority().is_none()
            && request.extensions().get::<ConnectionAddrs>().is_some())
        .then_some("an HTTP/1.1 request needs a Host header field"),
    }
}

impl tower::Service<http::Request<Body>> for Frontend {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if let Some(why) = host_refusal(&request) {
            if grpc::is_grpc(&request) {
                return ready(tonic::Status::invalid_argument(why).into_http());
            }
            return ready(json_error(StatusCode::BAD_REQUEST, why));
        }
        let path = request.uri().path();
        let own = match self.surface {
            Surface::All => true,
            Surface::Public => path != "/metrics",
            Surface::Admin => matches!(path, "/healthz" | "/readyz" | "/metrics"),
        };
        if !own {
            return ready(not_found());
        }
        if let Some(callback) = self.push_callback.as_ref().filter(|c| c.path() == path) {
            let callback = callback.clone();
            return Box::pin(async move { Ok(callback.handle(request).await) });
        }
        // The gateway's own gRPC health, where a route serves gRPC.
        if grpc::is_grpc(&request) && path.starts_with(grpc::health::HEALTH_PATH) && self.grpc {
            let mut health = grpc::health::service(self.lifecycle.clone());
            return Box::pin(async move {
                let response = tower::Service::call(&mut health, request).await;
                Ok(response.map_or_else(|never| match never {}, |r| r.map(Body::new)))
            });
        }
        // Reflection of the A2A service, where a route serves gRPC.
        if grpc::is_grpc(&request)
            && path.starts_with(grpc::reflection::REFLECTION_PATH)
            && self.grpc
        {
            if let Some(mut reflection) = grpc::reflection::service() {
                return Box::pin(async move {
                    let response = tower::Service::call(&mut reflection, request).await;
                    Ok(response.map_or_else(|never| match never {}, |r| r.map(Body::new)))
                });
            }
        }
        // gRPC clients cannot put a route's prefix before the method: a gRPC call at the
        // root goes to the one route of its host that serves gRPC (`grpc_route`).
        let grpc_at_root = grpc::is_grpc(&request) && path.starts_with(grpc::SERVICE_PATH);
        let at_root = grpc_at_root.then(|| self.grpc_route(&request)).flatten();
        if let Some((index, route)) = at_root.or_else(|| self.route(&request)) {
            let limits = self.limits.as_ref().and_then(|l| l.route(index));
            if let Some(Err(refusal)) = limits.map(|l| l.check_headers(request.headers())) {
                let grpc = grpc_at_root || grpc::is_grpc(&request);
                // Logged as every front logs a refusal, from the head alone.
                let head = request.into_parts().0;
                let mut record = CallRecord::start(route.name.as_str(), &head, 0, None);
                record.failed(refusal.error.kind);
                if grpc {
                    let profile = route.gateway.profile;
                    return ready(grpc::status::of_refusal(&refusal, profile).into_http());
                }
                let policy = route.gateway.refusal_status;
                let body = refusal.body(None);
                record.sent(body.len());
                return ready(refused_response(&refusal, body, policy));
            }
            let below = match at_root {
                Some(_) => path,
                None => &path[route.prefix.len()..],
            };
            let card = route.gateway.card.as_ref();
            // A gRPC call's path is the method's, below the route's prefix.
            let grpc_call = route.grpc
                && grpc::is_grpc(&request)
                && request.method() == Method::POST
                && below.starts_with(grpc::SERVICE_PATH);
            let jsonrpc = !grpc_call && route.jsonrpc_path.as_deref() == Some(below);
            let rest = match route.rest_path.as_deref() {
                Some(base) if !grpc_call && !jsonrpc && below != CARD_PATH => below
                    .strip_prefix(base)
                    .map(|op| rest::route(request.method(), op)),
                _ => None,
            }
            .filter(|routed| *routed != Routed::NotFound);
            let serves = jsonrpc
                || grpc_call
                || rest.is_some()
                || (below == CARD_PATH && card.is_some_and(|c| c.serves_card()));
            // A Host allow-list holds for the JSON-RPC endpoint too, not only the card;
            // the probes (a kubelet names the pod's address) stay reachable.
            if let (true, Some(Err(why))) = (
                serves,
                card.map(|c| c.admit(request.uri(), request.headers())),
            ) {
                if grpc_call {
                    return ready(tonic::Status::invalid_argument(why).into_http());
                }
                return ready(json_error(StatusCode::BAD_REQUEST, &why));
            }
            if grpc_call {
                let gateway = route.gateway.clone();
                let limits = limits.cloned();
                return Box::pin(async move { Ok(grpc::handle(gateway, limits, request).await) });
            }
            match rest {
                Some(Routed::Call(matched)) => {
                    let gateway = route.gateway.clone();
                    let limits = limits.cloned();
                    return Box::pin(async move {
                        Ok(rest::handle(gateway, limits, matched, request).await)
                    });
                }
                Some(Routed::WrongMethod(allow)) => {
                    return ready(rest::wrong_method(&allow, route.gateway.profile))
                }
                Some(Routed::TooLong(length)) => {
                    let parts = request.into_parts().0;
                    return ready(rest::path_too_long(&route.gateway, &parts, length));
                }
                _ => {}
            }
            if jsonrpc {
                if request.method() != Method::POST {
                    return ready(wrong_method("POST"));
                }
                let gateway = route.gateway.clone();
                let limits = limits.cloned();
                return Box::pin(async move {
                    Ok(jsonrpc::handle(State(gateway), limits, request).await)
                });
            }
            if let (CARD_PATH, Some(card)) = (below, card.filter(|c| c.serves_card())) {
                if !is_read(request.method()) {
                    return ready(wrong_method("GET, HEAD"));
                }
                let parts = request.into_parts().0;
                if let Some(auth) = route.gateway.auth.as_ref().filter(|a| !a.card_is_public()) {
                    let (auth, card) = (auth.clone(), card.clone());
                    let policy = route.gateway.refusal_status;
                    return Box::pin(async move {
                        Ok(match auth.authenticate(&parts).await {
                            Ok(_) => card.respond(&parts),
                            Err(failure) => {
                                let refusal = authenticate::refusal(&auth, &failure);
                                refused_response(&refusal, refusal.body(None), policy)
                            }
                        })
                    });
                }
                return ready(card.respond(&parts));
            }
        }
        let response = match path {
            "/healthz" | "/readyz" | "/metrics" | CATALOG_PATH if !is_read(request.method()) => {
                wrong_method("GET, HEAD")
            }
            CATALOG_PATH => self.catalog(&request.into_parts().0),
            JWKS_PATH => match &self.jwks {
                Some(_) if !is_read(request.method()) => wrong_method("GET, HEAD"),
                Some(jwks) => {
                    ([(CONTENT_TYPE, "application/jwk-set+json")], jwks.clone()).into_response()
                }
                None => not_found(),
            },
            "/healthz" => "ok\n".into_response(),
            "/readyz" => {
                let this = self.clone();
                let verbose = (request.uri().query().unwrap_or_default().split('&'))
                    .any(|pair| pair.split('=').next() == Some("verbose"));
                return Box::pin(async move { Ok(this.readiness(verbose).await) });
            }
            "/metrics" => {
                let render = self.shared_render();
                return Box::pin(async move {
                    let text = render.await;
                    let kind = [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")];
                    Ok((kind, Body::from(text)).into_response())
                });
            }
            _ if grpc_at_root => {
                let why = match self.routes.iter().any(|r| r.grpc) {
                    true => "no route of this gateway serves this gRPC call here (no route, or several, serve gRPC for this host: call the route's path prefix, or grpc-listen)",
                    false => "no route of this gateway serves gRPC",
                };
                tonic::Status::unimplemented(why).into_http()
            }
            _ => not_found(),
        };
        ready(response)
    }
}

/// Why a route is not ready.
enum Unready {
    /// A balanced route with no endpoint to call.
    NoEndpoint,
    /// Its agent failed the check, for this reason.
    Check(String),
}

impl Unready {
    fn why(&self) -> &str {
        match self {
            Unready::NoEndpoint => "no connectable endpoint",
            Unready::Check(why) => why,
        }
    }
}

/// The one item of `items`; `None` when there are none or several.
fn only<T>(mut items: impl Iterator<Item = T>) -> Option<T> {
    let first = items.next()?;
    items.next().is_none().then_some(first)
}

fn ready(response: Response) -> BoxFuture<'static, Result<Response, Infallible>> {
    Box::pin(std::future::ready(Ok(response)))
}

fn is_read(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// A small JSON error body for what is not JSON-RPC (unknown paths, wrong methods).
fn json_error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    (status, [(CONTENT_TYPE, "application/json")], body).into_response()
}

fn not_found() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "no route of this gateway matches the request",
    )
}

fn wrong_method(allow: &'static str) -> Response {
    let mut response = json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed here");
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests for `/metrics` while a render runs share it; one after it has finished
    /// starts another.
    #[tokio::test]
    async fn concurrent_scrapes_share_one_render() {
        let args = ["a2a-gateway", "--backend", "http://127.0.0.1:9"];
        let settings = crate::settings::Settings::load(args).unwrap();
        let gateway = crate::route::gateway(&settings.routes[0], Default::default()).unwrap();
        let frontend = router(gateway, "/a2a/jsonrpc");
        let first = frontend.shared_render();
        let second = frontend.clone().shared_render();
        assert!(first.ptr_eq(&second), "a render in progress is shared");
        let text = first.await;
        assert!(!text.is_empty());
        assert_eq!(second.await, text);
        let third = frontend.shared_render();
        assert!(
            third.peek().is_none(),
            "a finished render is not served again"
        );
        assert!(third.await.starts_with(b"#"));
    }
}

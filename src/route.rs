//! Assembles routes from their settings, in one place: each route's backend (a connector
//! per binding that serves one URL, a list and a `dns:///` name alike, `connect`), its card
//! service, its readiness check (`readiness`) and its handler (`front::Gateway`, built by
//! `Route::handler` only). `Routes` is every route of the settings, built once; each serving
//! thread takes its own `Frontend` from it. Sockets are `server`'s.

mod connect;
mod readiness;
pub mod reload;

use std::collections::HashMap;
use std::sync::Arc;

use crate::backend::affinity::{Affine, IdCodec};
use crate::backend::endpoints::balance::Balanced;
use crate::backend::endpoints::resolve::Resolvers;
use crate::backend::endpoints::{probe_address, Endpoint, RouteEndpoints, Targets};
use crate::backend::Backend;
use crate::card::{CardService, RouteCard, BACKEND_CARD_SOURCE};
use crate::front::limits::Limits;
use crate::front::{Gateway, Handling};
use crate::lifecycle::Lifecycle;
use crate::protocol::binding::Binding;
use crate::push::deliver::{Deliverer, DeliveryRoute};
use crate::push::outbox::Outbox;
use crate::push::relay::callback::{self, Callback, RouteOutbox};
use crate::push::relay::RelaySettings;
use crate::push::{PushMode, PushPolicy};
use crate::server::clients::ClientLimits;
use crate::server::readiness::{AgentCheck, Readiness};
use crate::server::routing::{self, Frontend, RouteIndex};
use crate::server::tls::ServerTls;
use crate::server::workers::Frontends;
use crate::settings::{ConfigError, RouteSettings, Settings, Upstream};
use crate::telemetry::{DeliveryMetrics, Metrics};
use connect::Connector;

/// A route could not be built from its settings.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The route's agent card cannot be served.
    #[error(transparent)]
    Card(#[from] crate::card::CardConfigError),
    /// The gRPC client of the route's backend cannot be built.
    #[error(transparent)]
    Grpc(#[from] crate::backend::grpc::GrpcConfigError),
    /// The HTTP+JSON client of the route's backend cannot be built.
    #[error(transparent)]
    Rest(#[from] crate::backend::rest::RestConfigError),
    /// The route's settings cannot be served.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Building one of the routes failed: which, and why.
    #[error("route {route:?}: {error}")]
    Route {
        /// The route's name.
        route: String,
        /// Why it failed.
        error: Box<RouteError>,
    },
}

/// A route's backend, built once and shared by every worker (TLS set up, the gRPC
/// keepalive policy a backend's GOAWAY `too_many_pings` adjusts for every worker; for many
/// endpoints their set, health and resolution, `backend::endpoints`); each worker's
/// clients have connections of their own.
enum Backends {
    One {
        url: String,
        connector: Connector,
    },
    /// A list of URLs, balanced; each URL's connector (by label) for its probe.
    List {
        endpoints: Arc<RouteEndpoints>,
        connectors: HashMap<String, Connector>,
    },
    /// Every address of a DNS name, balanced: the name's connector, placed at each.
    Dns {
        endpoints: Arc<RouteEndpoints>,
        base: Connector,
    },
}

impl Backends {
    /// The backend of `settings` (`demo_backend` for the demo agent). A `dns:///` name is
    /// resolved by a task on the current runtime from now on.
    fn new(settings: &RouteSettings, demo_backend: Option<&str>) -> Result<Backends, RouteError> {
        let targets = match (&settings.upstream, demo_backend) {
            (Upstream::Targets(targets), _) => targets.clone(),
            (Upstream::Demo, Some(url)) => Targets::One(url.to_owned()),
            (Upstream::Demo, None) => return Err(ConfigError::NoBackend.into()),
        };
        let (binding, client) = (settings.binding, &settings.client);
        let codec = settings.affinity.as_deref();
        Ok(match targets {
            Targets::One(url) => Backends::One {
                connector: Connector::new(&url, binding, client)?,
                url,
            },
            Targets::List(urls) => {
                let mut connectors = HashMap::with_capacity(urls.len());
                let mut endpoints = Vec::with_capacity(urls.len());
                for url in urls {
                    let probe = probe_address(&url)
                        .ok_or_else(|| ConfigError::BackendUrl(format!("{url:?} has no host")))?;
                    let connector = Connector::new(&url, binding, client)?;
                    let new_client = connector.clone().new_client();
                    endpoints.push(Endpoint::new(url.clone(), probe, new_client, codec));
                    connectors.insert(url, connector);
                }
                let policy = settings.policy.clone();
                Backends::List {
                    endpoints: RouteEndpoints::fixed(endpoints, policy),
                    connectors,
                }
            }
            Targets::Dns(target) => {
                let base = Connector::new(&target.url(), binding, client)?;
                let (at, codec) = (base.clone(), settings.affinity.clone());
                let endpoint_at = Box::new(move |address| {
                    let label = std::net::SocketAddr::to_string(&address);
                    let new_client = at.at(address).new_client();
                    Endpoint::new(label.clone(), label, new_client, codec.as_deref())
                });
                let (resolution, policy) = (&settings.resolution, settings.policy.clone());
                let endpoints = RouteEndpoints::resolved(&target, resolution, endpoint_at, policy)
                    .map_err(ConfigError::BackendUrl)?;
                Backends::Dns { endpoints, base }
            }
        })
    }

    /// The route's endpoints, when it balances over many (readiness and metrics).
    fn endpoints(&self) -> Option<&Arc<RouteEndpoints>> {
        match self {
            Backends::One { .. } => None,
            Backends::List { endpoints, .. } | Backends::Dns { endpoints, .. } => Some(endpoints),
        }
    }
}

/// One route, built: what selects it, its backend, and what its handlers share. It keeps
/// no copy of its settings: with thousands of routes, that copy was more than a tenth of
/// a route's memory (benches/README.md, many routes).
struct Route {
    /// The route's name (`[[route]] name`), in logs and metrics.
    name: String,
    /// Where clients reach it.
    face: Face,
    backends: Backends,
    /// What every worker's handler of the route shares: its policies and card service.
    handling: Arc<Handling>,
    /// Task affinity's id codec (`None`: none), over each worker's balanced client.
    affinity: Option<Arc<IdCodec>>,
    /// The push URL policy each worker's guard applies (`None`: `push = "pass"`), and the
    /// DNS server the guard asks.
    push: Option<Arc<PushPolicy>>,
    resolver: Option<std::net::SocketAddr>,
}

/// The paths and host a route answers, as each worker's router serves it.
struct Face {
    prefix: String,
    host: Option<String>,
    jsonrpc_path: Option<String>,
    rest_path: Option<String>,
    grpc: bool,
}

impl Face {
    fn of(settings: &RouteSettings) -> Face {
        Face {
            prefix: settings.prefix.clone(),
            host: settings.host.clone(),
            jsonrpc_path: (settings.fronts.contains(&Binding::JsonRpc))
                .then(|| settings.jsonrpc_path.clone()),
            rest_path: (settings.fronts.contains(&Binding::HttpJson))
                .then(|| settings.rest_path.clone()),
            grpc: settings.fronts.contains(&Binding::Grpc),
        }
    }
}

impl Route {
    /// Builds the route of `settings`: its backend and its card service (a card file is read
    /// and checked now). With `demo_backend` the demo route serves the demo agent's card
    /// unless one is configured.
    /// `push` is its push policy, shared with routes of the same.
    fn new(
        settings: &RouteSettings,
        demo_backend: Option<&str>,
        grpc_port: Option<u16>,
        push: Option<Arc<PushPolicy>>,
    ) -> Result<Route, RouteError> {
        let backends = Backends::new(settings, demo_backend)?;
        let mut card = settings.card.clone();
        // The demo agent's card is its extended card: not for a route whose rules keep
        // GetExtendedAgentCard from some callers.
        let extended_public = (settings.allow.as_ref()).is_none_or(|rules| {
            rules.allow_everyone(crate::protocol::ops::Op::GetExtendedAgentCard)
        });
        if demo_backend.is_some() && card.source.is_none() && extended_public {
            card.source = Some(BACKEND_CARD_SOURCE.to_owned());
        }
        // Every route has a card service: without a source of its own it still rewrites
        // the extended cards of GetExtendedAgentCard and checks the request's host.
        let owner = settings.owner.is_some();
        let backend = match card.source.as_deref() {
            Some(BACKEND_CARD_SOURCE) => {
                Some(client(&backends, settings.affinity.as_ref(), owner)?)
            }
            _ => None,
        };
        let service = CardService::new(&card, route_card(settings, grpc_port), backend)?;
        Ok(Route::of(settings, backends, Some(Arc::new(service)), push))
    }

    /// The route of `settings` over `backends`, with the card service `card` and the push
    /// policy `push`.
    fn of(
        settings: &RouteSettings,
        backends: Backends,
        card: Option<Arc<CardService>>,
        push: Option<Arc<PushPolicy>>,
    ) -> Route {
        Route {
            name: settings.name.clone(),
            face: Face::of(settings),
            backends,
            handling: handling(settings, card),
            affinity: settings.affinity.clone(),
            push,
            resolver: settings.resolution.server,
        }
    }

    /// The route's handler for one serving thread: a backend client and push guard of its
    /// own (resolving on the runtime this is called on), sharing `metrics`, the route's
    /// handling and the process's `lifecycle`.
    fn handler(
        &self,
        metrics: Arc<Metrics>,
        lifecycle: Arc<Lifecycle>,
        resolvers: &Resolvers,
    ) -> Result<Arc<Gateway>, RouteError> {
        let owner = self.handling.owner.is_some();
        let mut backend = client(&self.backends, self.affinity.as_ref(), owner)?;
        let route_metrics = metrics.route(&self.name);
        if let Backends::One { url, .. } = &self.backends {
            // Balanced routes time each endpoint's attempts themselves.
            let endpoint = crate::telemetry::untrusted::without_credentials(url);
            let latency = route_metrics.backend_latency(&endpoint);
            backend = Arc::new(crate::backend::timed::Timed {
                inner: backend,
                latency,
            });
        }
        Ok(Arc::new(Gateway {
            backend,
            push: push_guard(self.push.as_ref(), self.resolver, resolvers)?,
            lifecycle,
            route_metrics,
            metrics,
            handling: self.handling.clone(),
        }))
    }
}

/// A backend client of its own of `backends`, for the runtime this is called on; over
/// task affinity when the route has it (`owner`: ids are caller-bound).
fn client(
    backends: &Backends,
    affinity: Option<&Arc<IdCodec>>,
    owner: bool,
) -> Result<Arc<dyn Backend>, RouteError> {
    let balanced = match backends {
        Backends::One { connector, .. } => return Ok(connector.client()?),
        Backends::List { endpoints, .. } | Backends::Dns { endpoints, .. } => {
            Balanced::new(endpoints.clone())
        }
    };
    Ok(match affinity {
        None => Arc::new(balanced),
        Some(codec) => Arc::new(Affine::new(balanced, codec.clone(), owner)),
    })
}

/// A push guard of `policy` (none without one), resolving with the thread's resolver
/// asking `server`.
fn push_guard(
    policy: Option<&Arc<PushPolicy>>,
    server: Option<std::net::SocketAddr>,
    resolvers: &Resolvers,
) -> Result<Option<crate::push::PushGuard>, RouteError> {
    let Some(policy) = policy else {
        return Ok(None);
    };
    let resolver = resolvers.get(server).map_err(ConfigError::PushResolver)?;
    Ok(Some(crate::push::PushGuard::new(policy.clone(), resolver)))
}

/// What a route's handlers share, from its `settings`, with the card service `card`.
fn handling(settings: &RouteSettings, card: Option<Arc<CardService>>) -> Arc<Handling> {
    Arc::new(Handling {
        forward: settings.forward.clone(),
        caller_headers: settings.caller_headers.clone(),
        unary_timeout: settings.unary_timeout,
        stream_timeout: settings.stream_timeout,
        first_event_timeout: settings.first_event_timeout,
        keepalive: settings.keepalive,
        max_body: settings.max_body,
        batch: settings.batch,
        tenant: settings.tenant.clone(),
        card,
        legacy: settings.legacy,
        profile: settings.profile,
        refusal_status: settings.refusal_status,
        relay: (settings.relay.clone()).map(|relay| crate::push::relay::Relay {
            route: settings.name.as_str().into(),
            settings: relay,
        }),
        relayed_elsewhere: settings.relayed_elsewhere.clone(),
        owner: settings.owner.clone(),
        allow: settings.allow.clone(),
        auth: settings.auth.clone(),
    })
}

/// What a route's handler shares with the rest of the process.
#[derive(Default)]
pub struct Shared {
    /// The route's card service (`None`: no card).
    pub(crate) card: Option<Arc<CardService>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) lifecycle: Arc<Lifecycle>,
    /// The serving thread's DNS resolvers (push guards), shared by its routes.
    pub(crate) resolvers: Resolvers,
}

/// The handler of a route's `settings` over `backend`, with its own push guard (resolving
/// on the runtime this is called on). Tests and fuzzing give their own backends here;
/// `Route::handler` builds the same from a built route.
pub fn handler_over(
    settings: &RouteSettings,
    backend: Arc<dyn Backend>,
    shared: Shared,
) -> Result<Arc<Gateway>, RouteError> {
    let (policy, server) = (
        settings.push.clone().map(Arc::new),
        settings.resolution.server,
    );
    Ok(Arc::new(Gateway {
        backend,
        push: push_guard(policy.as_ref(), server, &shared.resolvers)?,
        lifecycle: shared.lifecycle,
        route_metrics: shared.metrics.route(&settings.name),
        metrics: shared.metrics,
        handling: handling(settings, shared.card),
    }))
}

/// The process's push deliverer, with each route's URL policy (the strict default where
/// its guard is off) and resolver, and its counters (going on from `running`'s, a reload's).
fn deliverer(
    settings: &Settings,
    running: Option<&DeliveryMetrics>,
) -> Result<(Arc<Deliverer>, Arc<DeliveryMetrics>), RouteError> {
    // Series for the relaying routes only: 10,000 routes that do not relay made 100,000
    // lines of zeros, most of a 13 MB /metrics.
    let relaying = (settings.routes.iter()).filter(|route| route.push_mode == PushMode::Relay);
    let names = relaying.map(|route| route.name.as_str());
    let metrics = Arc::new(match running {
        Some(running) => DeliveryMetrics::carrying(names, running),
        None => DeliveryMetrics::new(names),
    });
    let mut routes = Vec::new();
    // One resolver per DNS server, whatever the number of relaying routes.
    let resolvers = Resolvers::default();
    // Only a relaying route's notifications come this way: no client for the others.
    for route in (settings.routes.iter()).filter(|r| r.push_mode == PushMode::Relay) {
        let resolver =
            (resolvers.get(route.resolution.server)).map_err(ConfigError::PushResolver)?;
        routes.push(DeliveryRoute {
            name: route.name.clone(),
            policy: route.push.clone().unwrap_or_default(),
            lookup: crate::push::deliver::connect::Lookup::Dns(resolver),
        });
    }
    let deliverer = Deliverer::new(settings.process.push_delivery.clone(), routes, &metrics)
        .map_err(|why| ConfigError::PushDelivery("push-ca-file", why))?;
    Ok((Arc::new(deliverer), metrics))
}

/// What the card service of `route` must know about it; `grpc_port`: `--grpc-listen`'s.
fn route_card(route: &RouteSettings, grpc_port: Option<u16>) -> RouteCard {
    let origin = &route.origin;
    RouteCard {
        route: route.name.clone(),
        jsonrpc_path: route.jsonrpc_path(),
        fronts: route.fronts.clone(),
        rest_path: route.rest_path(),
        card_path: route.card_path(),
        public_url: origin.public_url.clone(),
        trust_forwarded: origin.trust_forwarded,
        trusted_proxy_hops: origin.trusted_proxy_hops,
        allowed_hosts: origin.allowed_hosts.clone(),
        tls: origin.tls,
        host: route.host.clone(),
        fixed_tenant: route.tenant.clone(),
        binding: route.binding,
        grpc_port,
        legacy: route.legacy,
        enforced: route.enforced.clone(),
    }
}

/// The bare handler of one route's settings, without a card service (one serving thread).
pub fn gateway(
    settings: &RouteSettings,
    metrics: Arc<Metrics>,
) -> Result<Arc<Gateway>, RouteError> {
    let push = settings.push.clone().map(Arc::new);
    let route = Route::of(settings, Backends::new(settings, None)?, None, push);
    route.handler(metrics, Arc::default(), &Resolvers::default())
}

/// The route of `settings` alone in front of `gateway`, serving its fronts (tests call it
/// with the gateway of `gateway`).
pub fn frontend(settings: &RouteSettings, gateway: Arc<Gateway>) -> Frontend {
    let (metrics, lifecycle) = (gateway.metrics.clone(), gateway.lifecycle.clone());
    let served = served_route(&settings.name, &Face::of(settings), None, gateway);
    Frontend::new(vec![served], metrics, lifecycle)
}

/// The route named `name` as a worker serves it: the paths of its fronts.
fn served_route(
    name: &str,
    face: &Face,
    endpoints: Option<Arc<RouteEndpoints>>,
    gateway: Arc<Gateway>,
) -> routing::ServedRoute {
    routing::ServedRoute {
        name: name.to_owned(),
        prefix: face.prefix.clone(),
        host: face.host.clone(),
        jsonrpc_path: face.jsonrpc_path.clone(),
        rest_path: face.rest_path.clone(),
        grpc: face.grpc,
        endpoints,
        gateway,
    }
}

/// Every route of the settings, built once (`new`); each serving thread takes its own
/// `Frontend` from it (`frontend`). The routes' card services are shared by every thread.
pub struct Routes {
    routes: Vec<Route>,
    lifecycle: Arc<Lifecycle>,
    /// The global public URL, forwarded-header trust and allowed hosts, for the catalog.
    origins: crate::card::origin::Origins,
    /// Every route's limits, shared by all workers, and the CORS layer.
    limits: Option<Arc<Limits>>,
    cors: Option<tower_http::cors::CorsLayer>,
    /// `/readyz`'s checks of the agents, shared by every thread and listener.
    readiness: Arc<Readiness>,
    /// Whether `/metrics` is served by the admin listener instead of the main one.
    admin_listener: bool,
    /// The listener's HTTPS (`--tls-cert`), shared by every serving thread.
    tls: Option<ServerTls>,
    /// What each client connection may hold, and for how long.
    client_limits: ClientLimits,
    /// The push relay's settings, when a route relays.
    push_relay: Option<Arc<RelaySettings>>,
    /// Each relaying route's delivery (`with_outbox`), by route name.
    outboxes: HashMap<Arc<str>, Arc<dyn Outbox>>,
    /// Sends relayed push notifications to the clients' webhooks (the relay's `Outbox`).
    push: Arc<Deliverer>,
    /// Its counters, shown at `/metrics`.
    push_metrics: Arc<DeliveryMetrics>,
    /// The JWK Set of `--push-sign-key`, served at `/.well-known/jwks.json`.
    jwks: Option<bytes::Bytes>,
    /// The headers the edge marks sensitive: `SENSITIVE` and every route's own.
    sensitive: Vec<http::HeaderName>,
    /// Finds a request's route, for every worker.
    index: Arc<RouteIndex>,
}

impl Routes {
    /// Builds every route of `settings`. `demo_backend` is the `--demo` agent's address.
    /// Runs on the runtime the card services will refresh on (`start_cards`) and the
    /// readiness checks run on.
    pub fn new(settings: &Settings, demo_backend: Option<&str>) -> Result<Routes, RouteError> {
        Routes::build(settings, demo_backend, None)
    }

    /// The routes a reload builds to replace those whose push delivery counters are
    /// `running`: the counters of the routes kept go on from there (`DeliveryMetrics::carrying`).
    pub(crate) fn reloaded(
        settings: &Settings,
        demo_backend: Option<&str>,
        running: &DeliveryMetrics,
    ) -> Result<Routes, RouteError> {
        Routes::build(settings, demo_backend, Some(running))
    }

    /// The push delivery counters, which a reload's routes go on from (`reloaded`).
    pub(crate) fn push_counters(&self) -> Arc<DeliveryMetrics> {
        self.push_metrics.clone()
    }

    /// `new`, or `reloaded` when `running_push` is the replaced routes' counters.
    fn build(
        settings: &Settings,
        demo_backend: Option<&str>,
        running_push: Option<&DeliveryMetrics>,
    ) -> Result<Routes, RouteError> {
        let mut routes = Vec::with_capacity(settings.routes.len());
        let mut checks: Vec<(String, Arc<dyn AgentCheck>)> = Vec::new();
        // Routes to the same agent, reached the same way, share its check: 10,000 routes
        // to one agent made a scrape of /metrics open 10,000 connections to it.
        let mut same_agent: HashMap<readiness::CheckKey, Arc<dyn AgentCheck>> = HashMap::new();
        // So do routes of the same push policy (most have the default), and their guards.
        let mut push_policies: HashMap<&PushPolicy, Arc<PushPolicy>> = HashMap::new();
        for route in &settings.routes {
            let in_route = |error: RouteError| RouteError::Route {
                route: route.name.clone(),
                error: Box::new(error),
            };
            let grpc_port = settings.process.grpc_listen.map(|addr| addr.port());
            let push = (route.push.as_ref()).map(|policy| {
                let shared = push_policies.entry(policy);
                shared.or_insert_with(|| Arc::new(policy.clone())).clone()
            });
            let built = Route::new(route, demo_backend, grpc_port, push).map_err(in_route)?;
            let key = readiness::CheckKey::of(route);
            let check = match key.as_ref().and_then(|key| same_agent.get(key)) {
                Some(check) => check.clone(),
                None => {
                    let check = readiness::RouteCheck::new(&built.backends, &route.health_service)
                        .map_err(|e| in_route(e.into()))?;
                    let check: Arc<dyn AgentCheck> = Arc::new(check);
                    if let Some(key) = key {
                        same_agent.insert(key, check.clone());
                    }
                    check
                }
            };
            checks.push((route.name.clone(), check));
            routes.push(built);
        }
        let process = &settings.process;
        let readiness = Readiness::new(
            process.readiness,
            checks,
            process.readiness_cache,
            process.readiness_timeout,
        );
        let (push, push_metrics) = deliverer(settings, running_push)?;
        // Each relaying route's notifications go to the deliverer (tests put their own
        // outbox in its place, `with_outbox`).
        let outboxes: HashMap<Arc<str>, Arc<dyn Outbox>> = (settings.routes.iter())
            .filter(|route| route.push_mode == PushMode::Relay)
            .map(|route| (route.name.as_str().into(), push.clone() as Arc<dyn Outbox>))
            .collect();
        let extra: Vec<String> = (settings.routes.iter())
            .flat_map(|route| route.sensitive_headers.iter().cloned())
            .collect();
        let route_limits: Vec<_> = settings
            .routes
            .iter()
            .map(|route| (route.name.as_str(), route.limits))
            .collect();
        Ok(Routes {
            routes,
            lifecycle: Arc::default(),
            origins: process.origins.clone(),
            limits: Limits::new(process.limits, &route_limits),
            cors: process.cors.clone(),
            readiness: Arc::new(readiness),
            admin_listener: process.admin_listen.is_some(),
            tls: process.tls.clone(),
            client_limits: process.client_limits,
            push_relay: process.push_relay.clone(),
            outboxes,
            push,
            push_metrics,
            jwks: (process.push_delivery.signer.as_ref()).map(|signer| signer.jwks()),
            sensitive: crate::protocol::params::sensitive_names(&extra),
            index: Arc::new(RouteIndex::new(
                (settings.routes.iter()).map(|r| (r.prefix.as_str(), r.host.as_deref())),
            )),
        })
    }

    /// These routes as the successor of `running` (a reload): they follow the process's
    /// life, and each route's card is the running route's of the same name until its
    /// first fetch.
    pub fn succeeding(mut self, running: &Routes) -> Routes {
        self.lifecycle = running.lifecycle.clone();
        let cards: std::collections::HashMap<&str, &Arc<CardService>> = (running.routes.iter())
            .filter_map(|r| Some((r.name.as_str(), r.handling.card.as_ref()?)))
            .collect();
        for route in &self.routes {
            if let (Some(card), Some(running)) =
                (&route.handling.card, cards.get(route.name.as_str()))
            {
                card.inherit(running);
            }
        }
        self
    }

    /// The names of the routes, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|route| route.name.as_str())
    }

    /// Hands the notifications agents post for route `route` to `outbox`, which delivers
    /// them. Posts for a route without one are refused as those of a route that does not
    /// relay (401).
    pub fn with_outbox(mut self, route: &str, outbox: Arc<dyn Outbox>) -> Routes {
        self.outboxes.insert(route.into(), outbox);
        self
    }

    /// The push relay's callback for one serving thread: every relaying route's outbox,
    /// and its agent as the thread's handler of it (`gateways`, in the routes' order)
    /// reaches it.
    fn push_callback(
        &self,
        metrics: &Arc<Metrics>,
        gateways: &[Arc<Gateway>],
    ) -> Option<Arc<Callback>> {
        let relay = self.push_relay.as_ref()?;
        // The limits are in the routes' order (`Limits::new`).
        let routes = (self.routes.iter().zip(gateways).enumerate())
            .filter_map(|(index, (route, gateway))| {
                let (name, outbox) = self.outboxes.get_key_value(route.name.as_str())?;
                let route = RouteOutbox {
                    outbox: outbox.clone(),
                    metrics: metrics.route(name),
                    limits: self.limits.as_ref().and_then(|l| l.route(index)).cloned(),
                    agent: gateway.backend.clone(),
                    timeout: gateway.unary_timeout,
                    set_headers: gateway.forward.set_headers().to_vec(),
                    tenant: gateway.tenant.clone().unwrap_or_default(),
                    lookups: Arc::new(tokio::sync::Semaphore::new(callback::MAX_LOOKUPS)),
                };
                Some((name.clone(), route))
            })
            .collect();
        Some(Arc::new(Callback::new(
            relay.clone(),
            routes,
            metrics.clone(),
        )))
    }

    /// After a reload swapped these routes in for `running`: the push deliveries waiting in
    /// `running`'s deliverer move to this one, so a reload loses none.
    pub fn adopt_push(&self, running: &Routes) {
        if !Arc::ptr_eq(&self.push, &running.push) {
            self.push.adopt(&running.push);
        }
    }

    /// After `adopt_push` took what waits: the replaced deliverer takes no more and
    /// finishes what it is sending (within its retries' bounds, `--push-max-attempts` and
    /// `--push-max-age`, not a grace), then goes. Only the deliverer is kept meanwhile, not
    /// these routes.
    pub fn retire_push(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let push = self.push.clone();
        async move { push.retire().await }
    }

    /// After serving has stopped: sends the push deliveries still held, for up to
    /// `grace`, then drops (and counts) the rest.
    pub async fn flush_push(&self, grace: std::time::Duration) {
        self.push.shutdown(grace).await;
    }

    /// Starts fetching and refreshing every route's card, on the current runtime.
    pub fn start_cards(&self) {
        for card in self.routes.iter().filter_map(|r| r.handling.card.as_ref()) {
            card.start();
        }
    }

    /// Starts every route's background authentication work (the JWT issuers' keys), on
    /// the current runtime.
    pub fn start_auth(&self) {
        for auth in self.routes.iter().filter_map(|r| r.handling.auth.as_ref()) {
            auth.start();
        }
    }

    /// One serving thread's routes, with backend clients of their own, sharing `metrics`.
    pub fn frontend(&self, metrics: &Arc<Metrics>) -> Result<Frontend, RouteError> {
        let resolvers = Resolvers::default();
        let mut served = Vec::with_capacity(self.routes.len());
        let mut gateways = Vec::with_capacity(self.routes.len());
        for route in &self.routes {
            let gateway = route.handler(metrics.clone(), self.lifecycle.clone(), &resolvers)?;
            let endpoints = route.backends.endpoints().cloned();
            gateways.push(gateway.clone());
            served.push(served_route(&route.name, &route.face, endpoints, gateway));
        }
        let push_callback = self.push_callback(metrics, &gateways);
        let surface = match self.admin_listener {
            true => routing::Surface::Public,
            false => routing::Surface::All,
        };
        let index = self.index.clone();
        Ok(
            Frontend::over(served, index, metrics.clone(), self.lifecycle.clone())
                .with_sensitive(self.sensitive.clone())
                .with_origin(self.origins.clone())
                .with_limits(self.limits.clone())
                .with_cors(self.cors.clone())
                .with_readiness(self.readiness.clone(), surface)
                .with_push_callback(push_callback)
                .with_push(self.push_metrics.clone(), self.jwks.clone()),
        )
    }

    /// The admin listener's frontend (`--admin-listen`): `/metrics`, `/healthz` and
    /// `/readyz` only, on the current runtime.
    pub fn admin_frontend(&self, metrics: &Arc<Metrics>) -> Result<Frontend, RouteError> {
        let frontend = self.frontend(metrics)?;
        Ok(frontend.with_readiness(self.readiness.clone(), routing::Surface::Admin))
    }

    /// The life of the process every route and stream of every thread follows.
    pub fn lifecycle(&self) -> &Arc<Lifecycle> {
        &self.lifecycle
    }
}

impl Frontends for Routes {
    fn worker_frontend(&self, metrics: &Arc<Metrics>) -> Result<Frontend, String> {
        self.frontend(metrics).map_err(|e| e.to_string())
    }

    fn tls(&self) -> Option<&ServerTls> {
        self.tls.as_ref()
    }

    fn client_limits(&self) -> ClientLimits {
        self.client_limits
    }
}

//! What `/readyz` asks the agents: whether each route's backend can take calls.
//!
//! - **gRPC**: the standard `grpc.health.v1.Health/Check` (service `health-service`, by
//!   default "", the server as a whole) over a connection of its own; `SERVING` is ready,
//!   any other status, error or silence within `readiness-timeout` is not. An agent that
//!   answers UNIMPLEMENTED offers no health service: it is remembered per endpoint and
//!   checked by a TCP connect from then on, until a connect fails (the agent may come back
//!   with a health service).
//! - **HTTP+JSON**: a TCP connect to the agent's address. The binding has no standard
//!   health resource, and a request to any path may need credentials or count as traffic;
//!   the connect proves what the gateway needs, that the address accepts connections.
//! - **Balanced routes**: ready when one endpoint that is not ejected passes (checked at
//!   once, the first to pass decides).
//!
//! Checks run on the runtime that built the routes (the main one, never a worker's) and
//! their result is kept for `readiness-cache`: every probe within that time, on any worker
//! or listener, gets the same answer, and concurrent probes share one check, so a probe
//! storm never reaches the agents.
//!
//! Every change of a route's readiness is logged with its reason (`route not ready`,
//! `route ready again`): only the admin listener's `/readyz` names routes and reasons.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, Shared};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tonic_health::pb::health_check_response::ServingStatus;

use super::{BackendTemplate, GatewayTemplate};
use crate::backend::endpoints::{probe_address, RouteEndpoints, Targets};
use crate::backend::grpc::health::HealthAnswer;
use crate::backend::grpc::GrpcBackend;
use crate::protocol::binding::Binding;
use crate::settings::ConfigError;

/// The readiness of every route, checked at most once per cache period.
pub struct Readiness {
    routes: Vec<RouteCheck>,
    /// How long a finished check answers probes.
    cache: Duration,
    /// Bounds the check of one endpoint (connecting included).
    timeout: Duration,
    /// Where checks run: the runtime that built the routes.
    runtime: tokio::runtime::Handle,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The latest report and when it was made.
    last: Option<(Instant, Arc<Report>)>,
    /// The check under way, which every probe meanwhile waits for.
    running: Option<Shared<BoxFuture<'static, Arc<Report>>>>,
}

/// One check's outcome: each route and, when it is not ready, why (in route order).
#[derive(Debug)]
pub struct Report {
    pub routes: Vec<(String, Result<(), String>)>,
}

impl Readiness {
    /// Checks of `routes`, run on the current runtime.
    pub fn new(routes: Vec<RouteCheck>, cache: Duration, timeout: Duration) -> Readiness {
        Readiness {
            routes,
            cache,
            timeout,
            runtime: tokio::runtime::Handle::current(),
            state: Mutex::default(),
        }
    }

    /// The latest report if it is younger than the cache period, else the one of a check
    /// started now (or already under way).
    pub async fn report(self: &Arc<Self>) -> Arc<Report> {
        let running = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, report)) = &state.last {
                if at.elapsed() < self.cache {
                    return report.clone();
                }
            }
            match &state.running {
                Some(running) => running.clone(),
                None => {
                    let this = self.clone();
                    let task = self.runtime.spawn(async move { this.check().await });
                    let this = self.clone();
                    let running = task
                        .map(move |done| done.unwrap_or_else(|_| this.cut_short()))
                        .boxed()
                        .shared();
                    state.running = Some(running.clone());
                    running
                }
            }
        };
        running.await
    }

    /// The report of a check that ended without one (its runtime shut down, or it
    /// panicked); the next probe checks anew.
    fn cut_short(&self) -> Arc<Report> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).running = None;
        let why = || Err("the readiness check was cut short".to_owned());
        let routes = self
            .routes
            .iter()
            .map(|r| (r.name.clone(), why()))
            .collect();
        Arc::new(Report { routes })
    }

    /// Checks every route at once; records the report and logs each change of a route.
    async fn check(&self) -> Arc<Report> {
        let checks = self.routes.iter().map(|route| route.check(self.timeout));
        let results = futures::future::join_all(checks).await;
        let report = Arc::new(Report {
            routes: self
                .routes
                .iter()
                .zip(results)
                .map(|(route, result)| (route.name.clone(), result))
                .collect(),
        });
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let before = state.last.as_ref().map(|(_, report)| report.clone());
        for (i, (route, result)) in report.routes.iter().enumerate() {
            let was = before.as_ref().map_or(&Ok(()), |b| &b.routes[i].1);
            log_change(route, was, result);
        }
        state.last = Some((Instant::now(), report.clone()));
        state.running = None;
        report
    }
}

/// Logs a route's change of readiness, with the reason on every change: public listeners'
/// `/readyz` says only ready or not (`routing::Surface`), so without an admin listener the
/// log is where an operator reads why. A route that stays not ready for another reason is
/// logged again.
fn log_change(route: &str, was: &Result<(), String>, now: &Result<(), String>) {
    match (was, now) {
        (Ok(()), Err(why)) => tracing::warn!(%route, %why, "route not ready"),
        (Err(was), Err(why)) if was != why => {
            tracing::warn!(%route, %why, %was, "route not ready")
        }
        (Err(was), Ok(())) => tracing::info!(%route, %was, "route ready again"),
        _ => {}
    }
}

/// How one route's backend is checked.
pub struct RouteCheck {
    name: String,
    target: Target,
}

enum Target {
    One(Probe),
    /// Many endpoints: a probe per endpoint, made when it first shows up.
    Balanced {
        endpoints: Arc<RouteEndpoints>,
        probe_of: ProbeOf,
        probes: Mutex<HashMap<String, Arc<Probe>>>,
    },
}

/// The probe of the endpoint with a label (its URL in a list, its address behind a DNS
/// name); `None` for a label it cannot make one of.
type ProbeOf = Box<dyn Fn(&str) -> Option<Probe> + Send + Sync>;

impl RouteCheck {
    /// The check of route `name`, whose backend `template` built.
    pub(super) fn new(name: &str, template: &GatewayTemplate) -> Result<RouteCheck, ConfigError> {
        let service: Arc<str> = template.settings.health_service.as_str().into();
        let target = match &template.backend {
            BackendTemplate::Grpc(grpc) => {
                let origin = grpc.origin();
                let address = probe_address(&origin)
                    .ok_or_else(|| ConfigError::BackendUrl(format!("{origin:?} has no host")))?;
                Target::One(Probe::grpc(grpc.for_worker(), address, service))
            }
            BackendTemplate::Rest { url, .. } => {
                let address = probe_address(url)
                    .ok_or_else(|| ConfigError::BackendUrl(format!("{url:?} has no host")))?;
                Target::One(Probe::connect(address))
            }
            BackendTemplate::Balanced(endpoints, _) => Target::Balanced {
                endpoints: endpoints.clone(),
                probe_of: balanced_probes(template, service)?,
                probes: Mutex::default(),
            },
        };
        Ok(RouteCheck {
            name: name.to_owned(),
            target,
        })
    }

    async fn check(&self, timeout: Duration) -> Result<(), String> {
        let (endpoints, probe_of, probes) = match &self.target {
            Target::One(probe) => return probe.check(timeout).await,
            Target::Balanced {
                endpoints,
                probe_of,
                probes,
            } => (endpoints, probe_of, probes),
        };
        let set = endpoints.subscribe().borrow().clone();
        if set.endpoints.is_empty() {
            return Err(match set.resolved {
                true => "the backend name resolves to no address".into(),
                false => "the backend name is not resolved yet".into(),
            });
        }
        // Ejected endpoints are left to the ejection prober; the others are checked at
        // once, and the first that passes makes the route ready.
        let candidates: Vec<(String, Arc<Probe>)> = {
            let mut probes = probes.lock().unwrap_or_else(|e| e.into_inner());
            probes.retain(|label, _| set.endpoints.iter().any(|e| &e.label == label));
            set.endpoints
                .iter()
                .filter(|e| !e.health.is_ejected())
                .filter_map(|e| {
                    let probe = match probes.get(&e.label) {
                        Some(probe) => probe.clone(),
                        None => {
                            let probe = Arc::new(probe_of(&e.label)?);
                            probes.insert(e.label.clone(), probe.clone());
                            probe
                        }
                    };
                    Some((e.label.clone(), probe))
                })
                .collect()
        };
        let mut pending: FuturesUnordered<_> = candidates
            .iter()
            .map(|(label, probe)| async move {
                let result = probe.check(timeout).await;
                result.map_err(|why| format!("{label}: {why}"))
            })
            .collect();
        let mut failures = Vec::new();
        while let Some(result) = pending.next().await {
            match result {
                Ok(()) => return Ok(()),
                Err(why) => failures.push(why),
            }
        }
        // By endpoint label, not in the order the checks ended: the same failures make the
        // same reason, so the log shows a change only when there is one (`log_change`).
        failures.sort();
        match failures.is_empty() {
            true => Err("every endpoint is ejected".into()),
            false => Err(format!("no endpoint is ready ({})", failures.join("; "))),
        }
    }
}

/// How the endpoints of a balanced route are probed: their gRPC clients are made as the
/// route's own are (`listed_endpoint`, `dns_endpoints`), with connections of their own.
fn balanced_probes(template: &GatewayTemplate, service: Arc<str>) -> Result<ProbeOf, ConfigError> {
    let settings = &template.settings;
    if settings.binding == Binding::HttpJson {
        return Ok(match &template.targets {
            Targets::Dns(_) => Box::new(|label| Some(Probe::connect(label.to_owned()))),
            _ => Box::new(|label| probe_address(label).map(Probe::connect)),
        });
    }
    let grpc = |url: &str| {
        super::grpc_backend(settings, url).map_err(|e| ConfigError::BackendUrl(e.to_string()))
    };
    Ok(match &template.targets {
        Targets::Dns(target) => {
            let base = grpc(&target.url())?;
            Box::new(move |label| {
                let address: SocketAddr = label.parse().ok()?;
                Some(Probe::grpc(
                    base.at(address),
                    label.to_owned(),
                    service.clone(),
                ))
            })
        }
        Targets::One(url) => {
            return Err(ConfigError::BackendUrl(format!(
                "{url:?}: one backend is not balanced"
            )))
        }
        Targets::List(urls) => {
            let mut clients = HashMap::new();
            for url in urls {
                clients.insert(url.clone(), grpc(url)?);
            }
            Box::new(move |label| {
                let grpc = clients.get(label)?;
                let address = probe_address(label)?;
                Some(Probe::grpc(grpc.for_worker(), address, service.clone()))
            })
        }
    })
}

/// How one endpoint is checked.
struct Probe {
    /// `host:port` a connect check tries.
    address: String,
    /// The client a health check asks; `None`: connect checks only (HTTP+JSON).
    grpc: Option<(GrpcBackend, Arc<str>)>,
    /// The agent answered UNIMPLEMENTED: connect checks until one fails.
    no_health_service: AtomicBool,
}

impl Probe {
    fn grpc(client: GrpcBackend, address: String, service: Arc<str>) -> Probe {
        Probe {
            address,
            grpc: Some((client, service)),
            no_health_service: AtomicBool::new(false),
        }
    }

    fn connect(address: String) -> Probe {
        Probe {
            address,
            grpc: None,
            no_health_service: AtomicBool::new(true),
        }
    }

    async fn check(&self, timeout: Duration) -> Result<(), String> {
        if let Some((client, service)) = &self.grpc {
            if !self.no_health_service.load(Relaxed) {
                match client.check_health(service, timeout).await? {
                    HealthAnswer::Status(ServingStatus::Serving) => return Ok(()),
                    HealthAnswer::Status(status) => {
                        return Err(format!(
                            "the agent reports {} for service {service:?}",
                            status.as_str_name()
                        ))
                    }
                    HealthAnswer::Unimplemented => {
                        tracing::info!(
                            endpoint = %self.address,
                            "the agent offers no grpc.health.v1 service; readiness checks connecting to it"
                        );
                        self.no_health_service.store(true, Relaxed);
                    }
                }
            }
        }
        let connect = tokio::net::TcpStream::connect(self.address.as_str());
        let result = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("cannot connect to {}: {e}", self.address)),
            Err(_) => Err(format!(
                "cannot connect to {} within {timeout:?}",
                self.address
            )),
        };
        if result.is_err() && self.grpc.is_some() {
            // Whatever comes back at the address may offer a health service.
            self.no_health_service.store(false, Relaxed);
        }
        result
    }
}

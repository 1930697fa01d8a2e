//! How `/readyz` probes a route's agent (`server::readiness` caches and serves the result).
//!
//! - **gRPC**: the standard `grpc.health.v1.Health/Check` (service `health-service`, by
//!   default "", the server as a whole) over a connection of its own (the connector's,
//!   which calls never use); `SERVING` is ready,
//!   any other status, error or silence within `readiness-timeout` is not. An agent that
//!   answers UNIMPLEMENTED offers no health service: it is remembered per endpoint and
//!   checked by a TCP connect from then on, until a connect fails (the agent may come back
//!   with a health service).
//! - **HTTP+JSON**: a TCP connect to the agent's address. The binding has no standard
//!   health resource, and a request to any path may need credentials or count as traffic;
//!   the connect proves what the gateway needs, that the address accepts connections.
//! - **Balanced routes**: ready when one endpoint that is not ejected passes (checked at
//!   once, the first to pass decides).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tonic_health::pb::health_check_response::ServingStatus;

use super::connect::Connector;
use super::Backends;
use crate::backend::endpoints::Targets;
use crate::backend::endpoints::{probe_address, RouteEndpoints};
use crate::backend::grpc::health::HealthAnswer;
use crate::server::readiness::AgentCheck;
use crate::settings::{ConfigError, RouteSettings, Upstream};

/// What makes two routes' checks one: the same agent URL, binding, client settings and
/// health service. Balanced routes have none: each checks its own endpoints.
/// It borrows from the settings: a copy per route was garbage the loading left resident.
#[derive(PartialEq, Eq, Hash)]
pub(super) struct CheckKey<'a> {
    url: &'a str,
    binding: &'static str,
    service: &'a str,
    connect_timeout: Duration,
    ca: Option<&'a [u8]>,
    identity: Option<&'a [u8]>,
}

impl CheckKey<'_> {
    /// The key of the check of `route`, when it has one agent URL of its own.
    pub(super) fn of(route: &RouteSettings) -> Option<CheckKey<'_>> {
        let Upstream::Targets(Targets::One(url)) = &route.upstream else {
            return None;
        };
        Some(CheckKey {
            url,
            binding: route.binding.name(),
            service: &route.health_service,
            connect_timeout: route.client.connect_timeout,
            ca: route.client.ca.as_deref(),
            identity: route.client.identity.as_deref(),
        })
    }
}

/// How one route's backend is checked.
pub struct RouteCheck {
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
    /// The check of a route's `backends`, asking a gRPC agent about `service`. Probes
    /// take clients of their own from the route's connectors (connections of their own).
    pub(super) fn new(backends: &Backends, service: &str) -> Result<RouteCheck, ConfigError> {
        let service: Arc<str> = service.into();
        let target = match backends {
            Backends::One { url, connector } => {
                let address = probe_address(url)
                    .ok_or_else(|| ConfigError::BackendUrl(format!("{url:?} has no host")))?;
                Target::One(Probe::new(connector, address, service))
            }
            Backends::List {
                endpoints,
                connectors,
            } => {
                let connectors = connectors.clone();
                let probe_of: ProbeOf = Box::new(move |label| {
                    let address = probe_address(label)?;
                    Some(Probe::new(connectors.get(label)?, address, service.clone()))
                });
                Target::balanced(endpoints, probe_of)
            }
            Backends::Dns { endpoints, base } => {
                let base = base.clone();
                let probe_of: ProbeOf = Box::new(move |label| {
                    let address: SocketAddr = label.parse().ok()?;
                    let at = base.at(address);
                    Some(Probe::new(&at, label.to_owned(), service.clone()))
                });
                Target::balanced(endpoints, probe_of)
            }
        };
        Ok(RouteCheck { target })
    }
}

impl Target {
    fn balanced(endpoints: &Arc<RouteEndpoints>, probe_of: ProbeOf) -> Target {
        Target::Balanced {
            endpoints: endpoints.clone(),
            probe_of,
            probes: Mutex::default(),
        }
    }
}

impl AgentCheck for RouteCheck {
    fn check(&self, timeout: Duration) -> BoxFuture<'_, Result<(), String>> {
        self.check_now(timeout).boxed()
    }
}

impl RouteCheck {
    async fn check_now(&self, timeout: Duration) -> Result<(), String> {
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

/// How one endpoint is checked.
struct Probe {
    /// `host:port` a connect check tries.
    address: String,
    /// The client a health check asks; `None`: connect checks only (HTTP+JSON).
    grpc: Option<(Arc<crate::backend::grpc::GrpcBackend>, Arc<str>)>,
    /// The agent answered UNIMPLEMENTED: connect checks until one fails.
    no_health_service: AtomicBool,
}

impl Probe {
    /// The probe of the endpoint at `address` that `connector` makes clients of: a
    /// health check for gRPC, a connect check for HTTP+JSON. A gRPC probe asks through
    /// the connector's own client, whose connections no call uses (each worker's clients
    /// are made from it): a client of its own cost every route 0.4 KiB.
    fn new(connector: &Connector, address: String, service: Arc<str>) -> Probe {
        match connector {
            Connector::Grpc(grpc) => Probe {
                address,
                grpc: Some((grpc.clone(), service)),
                no_health_service: AtomicBool::new(false),
            },
            Connector::Rest(_) => Probe {
                address,
                grpc: None,
                no_health_service: AtomicBool::new(true),
            },
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

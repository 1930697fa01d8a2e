//! Agents with many pods: a route's backend as a set of endpoints, the calls spread over
//! them, and endpoints that fail taken out for a while.
//!
//! **What a route's `backend` names** (`Targets`):
//! - one `http(s)://` URL: one client per worker, exactly as without this module (no
//!   balancing, no ejection, no request copies: `tests/it/cost_budget.rs` guards that path);
//! - several URLs (a TOML array, or `--backend` more than once): a fixed set of endpoints;
//! - `dns:///name:port[/base/path]`: every address the name resolves to (a headless
//!   Kubernetes Service answers with every ready pod), re-resolved every
//!   `backend-resolve-interval` and soon (at most once a second) after a connection failed.
//!   `backend-tls = true` reaches them over TLS; the TLS server name, `:authority` and `Host`
//!   are the DNS name, the connection goes to each address. A base path is for HTTP+JSON.
//!
//! **Where things run.** A `RouteEndpoints` per route is shared by every worker thread:
//! the current `EndpointSet` (a `tokio::sync::watch`), each endpoint's `Health` (its
//! ejection and counters), and the route's `Policy`. Resolution (`resolve`) and the probes
//! of ejected endpoints (`health`) run as tasks on the runtime that builds the route (the
//! main one), never on a worker's. Each worker calls through its own `balance::Balanced`,
//! which keeps a client per endpoint for that worker (its own connections) and picks one
//! per call. An endpoint that leaves the set gets no new call; its clients stay alive while
//! calls hold them, so its open streams finish.
//!
//! **Ejection** (`health`): an endpoint whose connection fails (`BACKEND_UNAVAILABLE`) is
//! ejected at once; one that fails `eject-after` calls in a row with
//! `BACKEND_CONNECTION_RESET` or `BACKEND_DEADLINE_EXCEEDED` too. Agent errors are answers,
//! and count as successes. An ejection lasts `eject-backoff`, doubling with each ejection
//! that follows without a success in between, at most `MAX_EJECTION`; then a TCP connect
//! probe decides whether the endpoint takes calls again. When every endpoint is ejected,
//! calls go to all of them again rather than to none (a pod that came back is found by the
//! next call). `/readyz` is ready while each route has an endpoint that is not ejected.

pub(crate) mod balance;
mod health;
pub(crate) mod resolve;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::{watch, Notify};

use super::affinity::IdCodec;
use super::fault::Fault;
use super::Backend;
use crate::telemetry::untrusted::{has_credentials, without_credentials};
use crate::telemetry::EndpointStats;

/// The scheme of a backend named by DNS (`dns:///name:port`).
pub(crate) const DNS_SCHEME: &str = "dns:///";

/// How calls are spread over a route's endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Deserialize)]
pub(crate) enum Balance {
    /// Power of two choices: of two endpoints drawn at random, the one with fewer calls
    /// outstanding (as linkerd and Envoy balance).
    #[default]
    #[value(name = "p2c")]
    #[serde(rename = "p2c")]
    P2c,
    /// Each endpoint in turn.
    #[value(name = "round-robin")]
    #[serde(rename = "round-robin")]
    RoundRobin,
}

/// What a route's `backend` setting names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targets {
    /// One URL: a plain client, no balancing.
    One(String),
    /// Several URLs, balanced.
    List(Vec<String>),
    /// Every address of a DNS name, balanced.
    Dns(DnsTarget),
}

/// A `dns:///name:port[/path]` backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsTarget {
    /// The DNS name whose A and AAAA records are the endpoints.
    pub name: String,
    /// The port every endpoint is called on.
    pub port: u16,
    /// Reached over TLS (`backend-tls`).
    pub(crate) tls: bool,
    /// Base path of an HTTP+JSON agent: empty or `/segment…`.
    pub path: String,
}

impl DnsTarget {
    /// The URL every endpoint is called by: `http(s)://name:port/path`.
    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}:{}{}", self.name, self.port, self.path)
    }
}

impl Targets {
    /// Reads the `backend` setting. `tls` is `backend-tls`, which only `dns:///` needs (an
    /// `http(s)://` URL says it itself). The error says what is wrong with which URL.
    pub(crate) fn parse(backends: &[String], tls: bool) -> Result<Targets, String> {
        // Credentials would be logged with the URL and sent to every endpoint it resolves
        // to; the error shows the URL without them.
        if let Some(url) = backends.iter().find(|url| has_credentials(url)) {
            return Err(format!(
                "{:?}: a user name or password cannot be part of a backend URL (forward Authorization or use set-header)",
                without_credentials(url)
            ));
        }
        let dns = backends.iter().filter(|b| b.starts_with("dns:")).count();
        match backends {
            [] => Err("no backend".into()),
            [one] if dns == 1 => parse_dns(one, tls).map(Targets::Dns),
            _ if dns > 0 => Err("a dns:/// backend must be the route's only backend".into()),
            urls => {
                for url in urls {
                    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
                    if !scheme_ok || url.parse::<http::Uri>().is_err() {
                        return Err(format!(
                            "{url:?} is not an http://, https:// or dns:/// URL"
                        ));
                    }
                    if tls && url.starts_with("http://") {
                        return Err(format!(
                            "backend-tls is for dns:/// backends; {url:?} says http://"
                        ));
                    }
                }
                Ok(match urls {
                    [one] => Targets::One(one.clone()),
                    _ => Targets::List(urls.to_vec()),
                })
            }
        }
    }
}

fn parse_dns(url: &str, tls: bool) -> Result<DnsTarget, String> {
    let bad = |why: &str| Err(format!("{url:?}: {why}"));
    let Some(rest) = url.strip_prefix(DNS_SCHEME) else {
        return bad("expected dns:///name:port (a DNS server in the URL is not supported; set backend-resolver)");
    };
    let (host_port, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let Some((name, port)) = host_port.rsplit_once(':') else {
        return bad("the port is missing (dns:///name:port)");
    };
    let Ok(port) = port.parse::<u16>() else {
        return bad("the port is not a number");
    };
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && name
            .trim_end_matches('.')
            .split('.')
            .all(|l| !l.is_empty() && l.len() <= 63)
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if !name_ok {
        return bad("the name is not a DNS name");
    }
    let path = path.trim_end_matches('/');
    if path.contains(['?', '#']) || path.contains("//") {
        return bad("the base path must be a plain path");
    }
    Ok(DnsTarget {
        name: name.to_ascii_lowercase(),
        port,
        tls,
        path: path.to_owned(),
    })
}

/// The `host:port` a URL's connections go to, for connect probes.
pub(crate) fn probe_address(url: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    let default = if uri.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    let port = uri.port_u16().unwrap_or(default);
    let host = uri.host()?;
    Some(format!("{host}:{port}"))
}

/// A client of one endpoint for the calling worker (its own connections).
pub(crate) type NewClient = Box<dyn Fn() -> Result<Arc<dyn Backend>, String> + Send + Sync>;

/// The endpoint of a DNS target at one address.
pub(crate) type AtAddress = Box<dyn Fn(SocketAddr) -> Endpoint + Send + Sync>;

/// How task affinity names an endpoint inside the ids clients see (`backend::affinity`):
/// keyed by the route's affinity key (`IdCodec::tag`), so every gateway replica with the
/// same configuration and key names an endpoint alike without sharing anything, and no
/// one without the key can tell which pod an id names. A route without affinity names
/// none (every tag is `UNTAGGED`: nothing looks endpoints up by tag there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct EndpointTag(pub [u8; 8]);

impl EndpointTag {
    /// The tag of every endpoint of a route without affinity.
    pub(crate) const UNTAGGED: EndpointTag = EndpointTag([0; 8]);
}

/// One endpoint of a route, shared by every worker.
pub(crate) struct Endpoint {
    /// How `/metrics` and logs name it: its address, or its URL in a fixed list.
    pub(crate) label: String,
    /// Its name in task and context ids (computed once, when the endpoint appears).
    pub(crate) tag: EndpointTag,
    /// `host:port` a connect probe tries after an ejection.
    probe: String,
    new_client: NewClient,
    pub(crate) health: health::Health,
}

impl Endpoint {
    /// The endpoint labelled `label`, tagged by its route's id codec (task affinity).
    pub(crate) fn new(
        label: String,
        probe: String,
        new_client: NewClient,
        codec: Option<&IdCodec>,
    ) -> Endpoint {
        Endpoint {
            tag: codec.map_or(EndpointTag::UNTAGGED, |codec| codec.tag(&label)),
            label,
            probe,
            new_client,
            health: health::Health::default(),
        }
    }
}

/// The endpoints of a route at one time.
#[derive(Clone, Default)]
pub(crate) struct EndpointSet {
    pub(crate) endpoints: Arc<[Arc<Endpoint>]>,
    /// Whether a first resolution has answered (a fixed list always has).
    pub(crate) resolved: bool,
}

/// How a route balances and ejects.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    pub(crate) balance: Balance,
    /// Calls in a row failing with a gateway fault (reset, deadline) that eject.
    pub(crate) eject_after: u32,
    /// The first ejection's length; later ones double it, up to `MAX_EJECTION`.
    pub(crate) eject_backoff: Duration,
    /// Bounds a connect probe, and how long a call waits for a first resolution.
    pub(crate) connect_timeout: Duration,
}

/// Where DNS names are resolved.
#[derive(Clone, Debug)]
pub struct Resolution {
    pub(crate) interval: Duration,
    /// The DNS server to ask (tests, special setups); `None`: the system's
    /// (`/etc/resolv.conf`).
    pub server: Option<SocketAddr>,
}

/// A route's endpoints, shared by every worker (see the module doc).
pub struct RouteEndpoints {
    set: watch::Sender<EndpointSet>,
    policy: Policy,
    /// Asks the resolver for an early resolution (a connection failed).
    resolve_soon: Arc<Notify>,
    /// Tells the prober an endpoint was ejected.
    ejected: Arc<Notify>,
}

impl RouteEndpoints {
    /// A fixed list; starts its prober on the current runtime.
    pub(crate) fn fixed(endpoints: Vec<Endpoint>, policy: Policy) -> Arc<RouteEndpoints> {
        let set = EndpointSet {
            endpoints: endpoints.into_iter().map(Arc::new).collect(),
            resolved: true,
        };
        Self::start(set, policy)
    }

    /// The addresses of `target`, resolved on the current runtime from now on; `at` makes
    /// the endpoint of a new address. Fails when the system's resolver configuration
    /// cannot be read.
    pub(crate) fn resolved(
        target: &DnsTarget,
        resolution: &Resolution,
        at: AtAddress,
        policy: Policy,
    ) -> Result<Arc<RouteEndpoints>, String> {
        let resolver = resolve::resolver(resolution.server)?;
        let route = Self::start(EndpointSet::default(), policy);
        let task = resolve::Task {
            route: Arc::downgrade(&route),
            resolver,
            name: target.name.clone(),
            port: target.port,
            interval: resolution.interval,
            at,
            soon: route.resolve_soon.clone(),
        };
        tokio::spawn(task.run());
        Ok(route)
    }

    fn start(set: EndpointSet, policy: Policy) -> Arc<RouteEndpoints> {
        let route = Arc::new(RouteEndpoints {
            set: watch::Sender::new(set),
            policy,
            resolve_soon: Arc::default(),
            ejected: Arc::default(),
        });
        tokio::spawn(health::probe(Arc::downgrade(&route), route.ejected.clone()));
        route
    }

    /// The current endpoints, and their changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<EndpointSet> {
        self.set.subscribe()
    }

    /// How many endpoints the route has now.
    pub(crate) fn endpoint_count(&self) -> usize {
        self.set.borrow().endpoints.len()
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether the route has an endpoint to call: resolved, and not ejected (`/readyz`).
    pub(crate) fn is_connectable(&self) -> bool {
        let set = self.set.borrow();
        set.endpoints.iter().any(|e| !e.health.is_ejected())
    }

    /// Each endpoint's state and counters, for `/metrics`.
    pub(crate) fn stats(&self) -> Vec<EndpointStats> {
        let set = self.set.borrow();
        set.endpoints
            .iter()
            .map(|e| EndpointStats {
                endpoint: e.label.clone(),
                ejected: e.health.is_ejected(),
                calls: e.health.calls(),
                ejections: e.health.ejections_total(),
                latency: e.health.latency.counts(),
            })
            .collect()
    }

    /// How a call on `endpoint` ended: `fault` is the fault of the gateway's path, if any
    /// (an agent's error is an answer: the path is healthy).
    pub(crate) fn observe(&self, endpoint: &Endpoint, fault: Option<&Fault>) {
        let ejected = match fault {
            None => {
                endpoint.health.succeeded();
                false
            }
            Some(Fault::Connect(_) | Fault::Refused(_) | Fault::TlsRefused(_)) => {
                // Nothing reached the agent: the pod may be gone, so ask DNS again too.
                self.resolve_soon.notify_one();
                endpoint.health.unreachable(&self.policy)
            }
            Some(Fault::Lost(_) | Fault::Deadline(_)) => endpoint.health.failed(&self.policy),
            // The agent answered, badly: not the path's health.
            Some(Fault::BadResponse(_) | Fault::Unusable(_)) => false,
        };
        if ejected {
            let fault = fault.map(Fault::gateway_fault);
            tracing::warn!(endpoint = %endpoint.label, ?fault, "endpoint ejected");
            self.ejected.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(backends: &[&str], tls: bool) -> Result<Targets, String> {
        let backends: Vec<String> = backends.iter().map(|s| s.to_string()).collect();
        Targets::parse(&backends, tls)
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse(&["http://a:1"], false),
            Ok(Targets::One("http://a:1".into()))
        );
        assert_eq!(
            parse(&["http://a:1", "https://b:2"], false),
            Ok(Targets::List(vec![
                "http://a:1".into(),
                "https://b:2".into()
            ]))
        );
        let dns = parse(&["dns:///Agent.ns.svc:50051"], true).unwrap();
        let Targets::Dns(dns) = dns else {
            panic!("{dns:?}")
        };
        assert_eq!(dns.url(), "https://agent.ns.svc:50051");
        let rest = parse(&["dns:///agent:8080/a2a/"], false).unwrap();
        assert!(matches!(rest, Targets::Dns(t) if t.url() == "http://agent:8080/a2a"));
        for bad in [
            &["dns:///agent"][..],
            &["dns:///agent:x"],
            &["dns://10.0.0.1/agent:1"],
            &["dns:///a_b:1"],
            &["dns:///a:1", "http://b:1"],
            &["ftp://a"],
            &[],
        ] {
            assert!(parse(bad, false).is_err(), "{bad:?}");
        }
        assert!(parse(&["http://a:1"], true).is_err());
        assert!(parse(&["https://a:1"], true).is_ok());
    }

    #[test]
    fn probe_addresses() {
        assert_eq!(probe_address("https://a.b"), Some("a.b:443".into()));
        assert_eq!(probe_address("http://a:8/x"), Some("a:8".into()));
        assert_eq!(probe_address("http://[::1]:8"), Some("[::1]:8".into()));
    }
}

//! Resolution of a `dns:///` backend, with hickory-resolver, as one task per route on the
//! runtime that built the route: the name is resolved at once, then every interval, and
//! soon after a connection failed (at most once per `AFTER_FAILURE`, so a dead pod
//! cannot make the gateway flood its DNS server). Each answer that differs from the last
//! is published to every worker; an address that stays keeps its `Endpoint` (its health
//! and its workers' connections).
//!
//! The resolver's cache is cleared before each resolution: the interval, not the
//! records' TTL, says how fresh the endpoints are. A name without addresses (NXDOMAIN, or
//! no A/AAAA records: a headless Service without ready pods) empties the set; a failing
//! DNS server keeps the last answer.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{AtAddress, Endpoint, EndpointSet, RouteEndpoints};

/// The shortest time between two resolutions asked for by connection failures.
const AFTER_FAILURE: Duration = Duration::from_secs(1);

/// A resolver asking `server`, or the system's (`/etc/resolv.conf`).
pub fn resolver(server: Option<SocketAddr>) -> Result<TokioResolver, String> {
    let builder = match server {
        None => TokioResolver::builder_tokio()
            .map_err(|e| format!("cannot read the system's DNS configuration: {e}"))?,
        Some(server) => {
            let mut name_server = NameServerConfig::udp_and_tcp(server.ip());
            for connection in &mut name_server.connections {
                connection.port = server.port();
            }
            let config = ResolverConfig::from_name_servers(vec![name_server]);
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
        }
    };
    builder
        .build()
        .map_err(|e| format!("cannot set up DNS resolution: {e}"))
}

/// One serving thread's resolvers, one per DNS server, shared by its routes' push guards:
/// a resolver (its cache, its connections) takes about 40 KiB, which per route and thread
/// made 10,000 routes take 800 MiB on two threads. Clones share the resolvers; each is
/// handed out behind an `Arc`, as a resolver's clone copies its search domains.
#[derive(Clone, Default)]
pub struct Resolvers(Arc<std::sync::Mutex<HashMap<Option<SocketAddr>, Arc<TokioResolver>>>>);

impl Resolvers {
    /// The resolver asking `server` (or the system's), made at its first use.
    pub fn get(&self, server: Option<SocketAddr>) -> Result<Arc<TokioResolver>, String> {
        let mut resolvers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(resolver) = resolvers.get(&server) {
            return Ok(resolver.clone());
        }
        let made = Arc::new(resolver(server)?);
        resolvers.insert(server, made.clone());
        Ok(made)
    }
}

/// The resolution task of one route.
pub struct Task {
    pub route: Weak<RouteEndpoints>,
    pub resolver: TokioResolver,
    pub name: String,
    pub port: u16,
    pub interval: Duration,
    pub at: AtAddress,
    /// A connection failed: resolve soon.
    pub soon: Arc<Notify>,
}

impl Task {
    /// Runs until the route is gone.
    pub async fn run(self) {
        loop {
            let answer = self.resolve().await;
            let last = Instant::now();
            {
                let Some(route) = self.route.upgrade() else {
                    return;
                };
                if let Some(addresses) = answer {
                    self.publish(&route, &addresses);
                }
            }
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                () = self.soon.notified() => {
                    tokio::time::sleep_until(last + AFTER_FAILURE).await;
                }
            }
            if self.route.strong_count() == 0 {
                return;
            }
        }
    }

    /// The name's addresses; `None` when the DNS server could not say.
    async fn resolve(&self) -> Option<BTreeSet<SocketAddr>> {
        self.resolver.clear_cache();
        match self.resolver.lookup_ip(self.name.as_str()).await {
            Ok(lookup) => Some(
                lookup
                    .iter()
                    .map(|ip| SocketAddr::new(ip, self.port))
                    .collect(),
            ),
            Err(e) if e.is_no_records_found() => {
                tracing::warn!(name = %self.name, "backend name has no address");
                Some(BTreeSet::new())
            }
            Err(e) => {
                tracing::warn!(name = %self.name, error = %e, "resolving the backend name failed; keeping its last addresses");
                None
            }
        }
    }

    /// Publishes `addresses` if they differ from the route's current endpoints.
    fn publish(&self, route: &RouteEndpoints, addresses: &BTreeSet<SocketAddr>) {
        let current = route.set.borrow().clone();
        let same = current.resolved
            && current.endpoints.len() == addresses.len()
            && current
                .endpoints
                .iter()
                .all(|e| addresses.iter().any(|a| a.to_string() == e.label));
        if same {
            return;
        }
        let endpoints: Arc<[Arc<Endpoint>]> = addresses
            .iter()
            .map(|address| {
                let label = address.to_string();
                match current.endpoints.iter().find(|e| e.label == label) {
                    Some(kept) => kept.clone(),
                    None => Arc::new((self.at)(*address)),
                }
            })
            .collect();
        tracing::info!(
            name = %self.name,
            endpoints = ?addresses,
            "backend endpoints changed"
        );
        route.set.send_replace(EndpointSet {
            endpoints,
            resolved: true,
        });
    }
}

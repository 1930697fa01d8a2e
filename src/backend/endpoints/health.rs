//! Outlier ejection: each endpoint's health, shared by every worker (atomics, no lock on
//! the call path), and the prober that decides when an ejected endpoint takes calls again.
//!
//! An ejection lasts the route's `eject-backoff` times 2^(n-1) for the n-th ejection
//! without a success in between, at most `MAX_EJECTION` (or the backoff itself, if
//! larger). When it ends, a TCP connect to the endpoint decides: it connects, and the
//! endpoint takes calls again (its next failure ejects it for twice as long); it does not,
//! and it is ejected again for the next, longer period. The probe runs on the runtime that
//! built the route, so `/readyz` follows pods coming back without any traffic.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Endpoint, Policy, RouteEndpoints};

/// The longest ejection (unless `eject-backoff` itself is longer).
pub(crate) const MAX_EJECTION: Duration = Duration::from_secs(300);

/// How long the prober sleeps when nothing is ejected (a new ejection wakes it).
const IDLE: Duration = Duration::from_secs(3600);

/// One endpoint's health. Ejection times are milliseconds after `epoch()`.
#[derive(Debug, Default)]
pub struct Health {
    ejected: AtomicBool,
    /// When the current ejection ends.
    until_ms: AtomicU64,
    /// Calls in a row that failed with a gateway fault.
    failures: AtomicU32,
    /// Ejections in a row, without a success in between.
    ejections: AtomicU32,
    /// A probe is running (the prober starts one per ejection).
    probing: AtomicBool,
    calls: AtomicU64,
    ejections_total: AtomicU64,
    /// How long its calls took (`/metrics`).
    pub latency: crate::telemetry::BackendLatency,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

impl Health {
    pub fn is_ejected(&self) -> bool {
        self.ejected.load(Relaxed)
    }

    /// A call starts.
    pub fn called(&self) {
        self.calls.fetch_add(1, Relaxed);
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Relaxed)
    }

    pub fn ejections_total(&self) -> u64 {
        self.ejections_total.load(Relaxed)
    }

    /// A call was answered (an agent error is an answer). Re-admits an endpoint that a
    /// call reached while every endpoint was ejected.
    pub fn succeeded(&self) {
        // Plain loads first: the common case writes nothing (no cache line ping-pong
        // between workers).
        if self.failures.load(Relaxed) != 0 {
            self.failures.store(0, Relaxed);
        }
        if self.ejections.load(Relaxed) != 0 {
            self.ejections.store(0, Relaxed);
        }
        if self.ejected.load(Relaxed) {
            self.ejected.store(false, Relaxed);
        }
    }

    /// No connection could be made: ejected at once. Whether this ejected it.
    pub fn unreachable(&self, policy: &Policy) -> bool {
        self.failures.fetch_add(1, Relaxed);
        self.eject(policy)
    }

    /// A call failed with a reset or a deadline; the `eject_after`-th in a row ejects.
    pub fn failed(&self, policy: &Policy) -> bool {
        let failures = self.failures.fetch_add(1, Relaxed) + 1;
        failures >= policy.eject_after && self.eject(policy)
    }

    /// Ejects, unless it is ejected already (calls that were under way when it was
    /// ejected do not lengthen the ejection).
    fn eject(&self, policy: &Policy) -> bool {
        if self.ejected.swap(true, Relaxed) {
            return false;
        }
        self.ejections_total.fetch_add(1, Relaxed);
        self.extend(policy);
        true
    }

    /// Starts the next, longer ejection period.
    fn extend(&self, policy: &Policy) {
        let n = self.ejections.fetch_add(1, Relaxed).min(20);
        let cap = MAX_EJECTION.max(policy.eject_backoff);
        let period = policy.eject_backoff.saturating_mul(1 << n).min(cap);
        self.until_ms
            .store(now_ms() + period.as_millis() as u64, Relaxed);
        self.failures.store(0, Relaxed);
    }

    /// When the ejection ends, if the endpoint is ejected and not being probed.
    fn probe_due(&self) -> Option<u64> {
        (self.is_ejected() && !self.probing.load(Relaxed)).then(|| self.until_ms.load(Relaxed))
    }
}

/// Probes the route's ejected endpoints as their ejections end, until the route is gone.
/// `ejected` wakes it when an endpoint is ejected, and when a probe has ended.
pub async fn probe(route: Weak<RouteEndpoints>, ejected: Arc<Notify>) {
    loop {
        let next = {
            let Some(route) = route.upgrade() else {
                return;
            };
            let set = route.set.borrow().clone();
            let now = now_ms();
            let mut next = None::<u64>;
            for endpoint in set.endpoints.iter() {
                match endpoint.health.probe_due() {
                    Some(until) if until <= now => {
                        endpoint.health.probing.store(true, Relaxed);
                        let probe = probe_one(endpoint.clone(), route.policy.clone());
                        let done = ejected.clone();
                        tokio::spawn(async move {
                            probe.await;
                            // The prober plans the next probe of a still ejected endpoint.
                            done.notify_one();
                        });
                    }
                    Some(until) => next = Some(next.map_or(until, |n| n.min(until))),
                    None => {}
                }
            }
            next
        };
        let sleep = next.map_or(IDLE, |until| {
            Duration::from_millis(until.saturating_sub(now_ms()))
        });
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = ejected.notified() => {}
        }
    }
}

/// One connect probe of an ejected endpoint: it takes calls again, or its ejection is
/// extended.
async fn probe_one(endpoint: Arc<Endpoint>, policy: Policy) {
    let health = &endpoint.health;
    let connect = tokio::net::TcpStream::connect(endpoint.probe.as_str());
    match tokio::time::timeout(policy.connect_timeout, connect).await {
        Ok(Ok(_)) => {
            tracing::info!(endpoint = %endpoint.label, "ejected endpoint connects again");
            health.failures.store(0, Relaxed);
            health.ejected.store(false, Relaxed);
        }
        _ => health.extend(&policy),
    }
    health.probing.store(false, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::endpoints::Balance;

    fn policy() -> Policy {
        Policy {
            balance: Balance::P2c,
            eject_after: 3,
            eject_backoff: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn consecutive_faults_eject_and_successes_reset() {
        let health = Health::default();
        let policy = policy();
        assert!(!health.failed(&policy));
        assert!(!health.failed(&policy));
        health.succeeded();
        assert!(!health.failed(&policy));
        assert!(!health.failed(&policy));
        assert!(health.failed(&policy), "the third in a row ejects");
        assert!(health.is_ejected());
        assert!(!health.failed(&policy), "already ejected");
        assert!(!health.unreachable(&policy), "already ejected");
        assert_eq!(health.ejections_total(), 1);
    }

    #[test]
    fn ejections_grow_and_are_bounded() {
        let health = Health::default();
        let policy = policy();
        let period = |health: &Health| {
            Duration::from_millis(health.until_ms.load(Relaxed).saturating_sub(now_ms()))
        };
        assert!(health.unreachable(&policy));
        assert!(period(&health) <= Duration::from_secs(10));
        assert!(period(&health) > Duration::from_secs(9));
        health.extend(&policy);
        assert!(period(&health) > Duration::from_secs(19));
        for _ in 0..30 {
            health.extend(&policy);
        }
        assert!(period(&health) <= MAX_EJECTION);
        assert!(period(&health) > MAX_EJECTION - Duration::from_secs(1));
        health.succeeded();
        assert!(!health.is_ejected());
        assert!(health.unreachable(&policy));
        assert!(
            period(&health) <= Duration::from_secs(10),
            "a success resets the growth"
        );
    }
}

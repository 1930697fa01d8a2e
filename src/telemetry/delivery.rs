//! The push deliveries' counters (`push::deliver`): per relaying route, how deliveries
//! ended (`a2a_gateway_push_deliveries_total`), retries, drops by reason and the queue's
//! depth. The relay's own counters (registrations, callbacks) are in `push`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// How a push delivery ended (`push::deliver`), the `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeliveryOutcome {
    /// The webhook answered 2xx.
    Delivered,
    /// The webhook answered a 4xx other than 429: not retried.
    Rejected,
    /// The webhook answered 3xx: redirects are not followed, nor retried.
    Redirected,
    /// The URL, or an address its name resolves to, is refused (`push` guard's table).
    Refused,
    /// The token or authentication cannot be sent as a header value.
    Invalid,
    /// Retries ran out (`--push-max-attempts`, `--push-max-age`).
    Exhausted,
}

impl DeliveryOutcome {
    const ALL: [DeliveryOutcome; 6] = [
        DeliveryOutcome::Delivered,
        DeliveryOutcome::Rejected,
        DeliveryOutcome::Redirected,
        DeliveryOutcome::Refused,
        DeliveryOutcome::Invalid,
        DeliveryOutcome::Exhausted,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            DeliveryOutcome::Delivered => "delivered",
            DeliveryOutcome::Rejected => "rejected",
            DeliveryOutcome::Redirected => "redirected",
            DeliveryOutcome::Refused => "refused",
            DeliveryOutcome::Invalid => "invalid",
            DeliveryOutcome::Exhausted => "exhausted",
        }
    }
}

/// Why a push delivery was dropped unsent, the `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// A queue was at its bound (`--push-queue`, `--push-queue-per-destination`).
    QueueFull,
    /// The same event for the same webhook was queued recently.
    Duplicate,
    /// The gateway stopped before it was sent.
    Shutdown,
    /// Being sent by a deliverer that too many reloads since replaced (`MAX_REPLACED_SENDING`).
    Replaced,
}

impl DropReason {
    const ALL: [DropReason; 4] = [
        DropReason::QueueFull,
        DropReason::Duplicate,
        DropReason::Shutdown,
        DropReason::Replaced,
    ];

    fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::Duplicate => "duplicate",
            DropReason::Shutdown => "shutdown",
            DropReason::Replaced => "replaced",
        }
    }
}

/// One route's push deliveries: outcomes, retries, drops and what waits in the queues.
#[derive(Default)]
pub(crate) struct DeliveryCounters {
    outcomes: [AtomicU64; DeliveryOutcome::ALL.len()],
    retries: AtomicU64,
    drops: [AtomicU64; DropReason::ALL.len()],
    depth: AtomicI64,
}

impl DeliveryCounters {
    pub(crate) fn delivered(&self, outcome: DeliveryOutcome) {
        self.outcomes[outcome as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Relaxed);
    }

    pub(crate) fn dropped(&self, reason: DropReason, n: u64) {
        self.drops[reason as usize].fetch_add(n, Relaxed);
    }

    /// Deliveries queued (`+`) or taken from the queue (`-`).
    pub(crate) fn queued(&self, change: i64) {
        self.depth.fetch_add(change, Relaxed);
    }
}

/// The push deliveries of every route, labelled with the configured names only: the
/// table is fixed when the routes are built. A reload's table carries the counters of the
/// routes it keeps (`carrying`), so they are counters in Prometheus' sense: they never go
/// back at a reload.
pub(crate) struct DeliveryMetrics {
    routes: Vec<(Box<str>, Arc<DeliveryCounters>)>,
}

impl DeliveryMetrics {
    /// Counters for each of `routes`.
    pub(crate) fn new<'a>(routes: impl IntoIterator<Item = &'a str>) -> DeliveryMetrics {
        DeliveryMetrics {
            routes: routes
                .into_iter()
                .map(|name| (name.into(), Arc::default()))
                .collect(),
        }
    }

    /// Counters for each of `routes`: those of a route `running` counts (the table a
    /// reload replaces) go on from where they are, shared with it (what its deliverer
    /// still sends is counted here too); a new route's start at zero.
    pub(crate) fn carrying<'a>(
        routes: impl IntoIterator<Item = &'a str>,
        running: &DeliveryMetrics,
    ) -> DeliveryMetrics {
        DeliveryMetrics {
            routes: routes
                .into_iter()
                .map(|name| (name.into(), running.route(name).unwrap_or_default()))
                .collect(),
        }
    }

    /// The counters of the route named `name`, if it is one.
    pub(crate) fn route(&self, name: &str) -> Option<Arc<DeliveryCounters>> {
        let (_, counters) = self.routes.iter().find(|(n, _)| &**n == name)?;
        Some(counters.clone())
    }

    /// The four push delivery families, every route's series.
    pub(crate) fn render(&self, out: &mut String) {
        out.push_str("# HELP a2a_gateway_push_deliveries_total Push notifications delivered to webhooks, or given up, by route and outcome.\n");
        out.push_str("# TYPE a2a_gateway_push_deliveries_total counter\n");
        for (route, counters) in &self.routes {
            for (outcome, n) in DeliveryOutcome::ALL.iter().zip(&counters.outcomes) {
                let (outcome, n) = (outcome.name(), n.load(Relaxed));
                let _ = writeln!(
                    out,
                    "a2a_gateway_push_deliveries_total{{route=\"{route}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP a2a_gateway_push_delivery_retries_total Push delivery attempts retried (connection failures, timeouts, 5xx, 429).\n");
        out.push_str("# TYPE a2a_gateway_push_delivery_retries_total counter\n");
        for (route, counters) in &self.routes {
            let n = counters.retries.load(Relaxed);
            let _ = writeln!(
                out,
                "a2a_gateway_push_delivery_retries_total{{route=\"{route}\"}} {n}"
            );
        }
        out.push_str("# HELP a2a_gateway_push_delivery_drops_total Push deliveries dropped unsent, by route and reason.\n");
        out.push_str("# TYPE a2a_gateway_push_delivery_drops_total counter\n");
        for (route, counters) in &self.routes {
            for (reason, n) in DropReason::ALL.iter().zip(&counters.drops) {
                let (reason, n) = (reason.name(), n.load(Relaxed));
                let _ = writeln!(
                    out,
                    "a2a_gateway_push_delivery_drops_total{{route=\"{route}\",reason=\"{reason}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP a2a_gateway_push_queue_depth Push deliveries waiting to be sent (not those being sent).\n");
        out.push_str("# TYPE a2a_gateway_push_queue_depth gauge\n");
        for (route, counters) in &self.routes {
            let n = counters.depth.load(Relaxed);
            let _ = writeln!(out, "a2a_gateway_push_queue_depth{{route=\"{route}\"}} {n}");
        }
    }
}

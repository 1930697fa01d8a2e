//! What clients talk to: the edge layers, the JSON-RPC endpoint (dispatch in `jsonrpc`, the
//! envelope and response writers in `envelope`), the HTTP+JSON endpoint (`rest`), the gRPC
//! endpoint (`grpc`), and the SSE streams of the first two (`sse`).

pub(crate) mod call;
pub(crate) mod cors;
pub(crate) mod dialect;
pub(crate) mod envelope;
pub(crate) mod grpc;
pub(crate) mod jsonrpc;
pub mod layers;
pub(crate) mod limits;
pub(crate) mod rest;
pub(crate) mod sse;

use std::sync::Arc;
use std::time::Duration;

use crate::backend::Backend;
use crate::card::CardService;
use crate::lifecycle::Lifecycle;
use crate::protocol::params::ForwardPolicy;
use crate::telemetry::{Metrics, RouteMetrics};

/// One route as one serving thread calls it: the thread's backend client and push guard
/// over the route's `Handling`, which every thread shares. Reads of the shared part go
/// through `Deref`: a per-thread copy of it was a large part of what each of thousands
/// of routes cost (benches/README.md, many routes).
pub struct Gateway {
    /// The thread's client of the route's agent (connections of its own).
    pub(crate) backend: Arc<dyn Backend>,
    /// The route's push URL guard, resolving on the thread's runtime (`None`:
    /// `push = "pass"`).
    pub(crate) push: Option<crate::push::PushGuard>,
    /// The process's life: open streams end with a final frame when it closes.
    pub lifecycle: Arc<Lifecycle>,
    /// Request, latency and stream metrics, served at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// This route's share of `metrics`: its requests, latencies and streams.
    pub route_metrics: Arc<RouteMetrics>,
    /// What the route's calls go through, the same on every thread.
    pub(crate) handling: Arc<Handling>,
}

impl std::ops::Deref for Gateway {
    type Target = Handling;

    fn deref(&self) -> &Handling {
        &self.handling
    }
}

/// What a route's calls go through besides the agent: its policies, deadlines and card,
/// built once from its settings and shared by every serving thread.
pub struct Handling {
    pub(crate) forward: ForwardPolicy,
    /// The headers telling the agent who calls, from `Exchange::principal`.
    pub(crate) caller_headers: crate::auth::forward::CallerHeaders,
    /// Deadline of unary calls (`None`: no deadline).
    pub(crate) unary_timeout: Option<Duration>,
    /// Deadline of whole streams (`None`: streams may stay open indefinitely).
    pub(crate) stream_timeout: Option<Duration>,
    /// Deadline of a stream's first event (`None`: none).
    pub(crate) first_event_timeout: Option<Duration>,
    /// Interval of SSE keepalive comments on an idle stream.
    pub(crate) keepalive: Duration,
    /// Largest accepted request body, in bytes.
    pub(crate) max_body: usize,
    /// The bounds of a JSON-RPC batch.
    pub(crate) batch: BatchLimits,
    /// The route's fixed tenant: set on requests without one; others are refused.
    pub(crate) tenant: Option<String>,
    /// The route's card service: it also rewrites GetExtendedAgentCard replies.
    pub(crate) card: Option<Arc<CardService>>,
    /// Whether v0.3 clients are served (`--legacy v0.3`).
    pub(crate) legacy: bool,
    /// The error table's column this route's fronts write (`--spec-profile`).
    pub(crate) profile: crate::protocol::error::Profile,
    /// The HTTP status of refusals (`--refusal-status`).
    pub(crate) refusal_status: jsonrpc::RefusalStatus,
    /// The route's push relay (`None`: the route does not relay).
    pub(crate) relay: Option<crate::push::relay::Relay>,
    /// On a route that does not relay, another route's relay: its sealed configs are not
    /// shown here (`RelaySettings::hide_sealed`).
    pub(crate) relayed_elsewhere: Option<Arc<crate::push::relay::RelaySettings>>,
    /// The keys of caller-bound ids (`None`: `task-owner = false`).
    pub(crate) owner: Option<Arc<crate::auth::owner::OwnerKeys>>,
    /// The route's `allow` rules (`None`: every call is allowed).
    pub(crate) allow: Option<Arc<crate::auth::rules::Rules>>,
    /// The route's authentication (`None`: none configured, calls carry no principal).
    pub(crate) auth: Option<Arc<crate::auth::authenticator::Authenticator>>,
}

/// How large a JSON-RPC batch may be (`--max-batch-size`) and its reply
/// (`--max-batch-reply`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchLimits {
    /// Members, notifications included.
    pub(crate) size: usize,
    /// Bytes of the reply's array.
    pub(crate) reply: usize,
}

impl Default for BatchLimits {
    /// The flags' defaults.
    fn default() -> Self {
        BatchLimits {
            size: 100,
            reply: 4 << 20,
        }
    }
}

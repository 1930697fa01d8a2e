//! Limits that protect the agents (and the gateway): concurrent unary calls, concurrent
//! streams and a call rate, each per route and across all routes (`global-*`), checked
//! right before a call would go to its backend (a call to N endpoints counts N); the size
//! of a request's header fields, checked when the request has found its route; and the
//! request body bytes held across all routes, charged while a body is read. A call over a load limit never reaches
//! the agent: it gets HTTP 429 (rate) or 503 (concurrency) with `Retry-After` and a
//! JSON-RPC error whose `ErrorInfo` (domain `a2a-gateway`) names the limit.
//!
//! Per-client limits (`per_client`) count each client's calls within a route: a rate and
//! calls in flight per principal or client address, refused with 429.
//!
//! The counters are per gateway process: every worker thread (`server::workers`) shares
//! them, so they are atomics. A rate is a token bucket kept as GCRA (one atomic "theoretical
//! arrival time"): `burst` calls may come at once, then one per `1 / rate` seconds.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::json;

use crate::front::envelope::write_error;
use crate::protocol::error::{A2aError, GatewayFault};
use crate::telemetry::{LimitRow, RejectionRow};
use crate::units::optional;

mod per_client;

use per_client::PerClient;
pub use per_client::{ClientKey, PerClientSettings};

/// The limits, each named as its setting: what a rejection says, and its HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Calls,
    Streams,
    Rate,
    GlobalCalls,
    GlobalStreams,
    GlobalRate,
    HeaderSize,
    GlobalBodyBytes,
    ClientRate,
    ClientConcurrent,
    ClientKeys,
}

impl Limit {
    const ALL: [Limit; 11] = [
        Limit::Calls,
        Limit::Streams,
        Limit::Rate,
        Limit::GlobalCalls,
        Limit::GlobalStreams,
        Limit::GlobalRate,
        Limit::HeaderSize,
        Limit::GlobalBodyBytes,
        Limit::ClientRate,
        Limit::ClientConcurrent,
        Limit::ClientKeys,
    ];

    /// The limit table: setting name, gateway fault (the `ErrorInfo.reason`), HTTP status.
    fn row(self) -> (&'static str, GatewayFault, StatusCode) {
        use GatewayFault::{HeadersTooLarge, Overloaded, RateLimited};
        const BUSY: StatusCode = StatusCode::SERVICE_UNAVAILABLE;
        const RATE: StatusCode = StatusCode::TOO_MANY_REQUESTS;
        match self {
            Limit::Calls => ("max-concurrent-calls", Overloaded, BUSY),
            Limit::Streams => ("max-concurrent-streams", Overloaded, BUSY),
            Limit::Rate => ("rate-limit", RateLimited, RATE),
            Limit::GlobalCalls => ("global-max-concurrent-calls", Overloaded, BUSY),
            Limit::GlobalStreams => ("global-max-concurrent-streams", Overloaded, BUSY),
            Limit::GlobalRate => ("global-rate-limit", RateLimited, RATE),
            Limit::HeaderSize => (
                "max-header-size",
                HeadersTooLarge,
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ),
            Limit::GlobalBodyBytes => ("global-max-body-bytes-in-flight", Overloaded, BUSY),
            // The client's own doing: 429 (call less), as a rate's.
            Limit::ClientRate => ("client-rate-limit", RateLimited, RATE),
            Limit::ClientConcurrent => ("client-max-concurrent", RateLimited, RATE),
            Limit::ClientKeys => ("client-limit-keys", RateLimited, RATE),
        }
    }

    /// The setting's name, as flags, file keys and metrics write it.
    pub fn name(self) -> &'static str {
        self.row().0
    }
}

/// Whether a call is unary or a stream: each kind has its own concurrency limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    Unary,
    Stream,
}

/// A concurrency limit and how much of it is in use.
struct Concurrency {
    max: usize,
    in_use: AtomicUsize,
}

impl Concurrency {
    fn new(max: usize) -> Option<Concurrency> {
        (max > 0).then(|| Concurrency {
            max,
            in_use: AtomicUsize::new(0),
        })
    }

    /// Takes `n` units; `n` is at most `max` (a wider call needs the whole limit).
    fn try_acquire(&self, n: usize) -> bool {
        self.in_use
            .fetch_update(Relaxed, Relaxed, |used| {
                (used + n <= self.max).then_some(used + n)
            })
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.in_use.fetch_sub(n, Relaxed);
    }
}

/// A token bucket as GCRA: `tat` is when the bucket would be full again (nanoseconds
/// since `base`); a call is admitted while that lies at most `burst` intervals ahead.
struct Rate {
    per_second: f64,
    burst: u32,
    interval: u64,
    tolerance: u64,
    base: Instant,
    tat: AtomicU64,
}

impl Rate {
    fn new(per_second: f64, burst: u32) -> Option<Rate> {
        if per_second <= 0.0 {
            return None;
        }
        let burst = if burst == 0 {
            per_second.ceil().max(1.0) as u32
        } else {
            burst
        };
        let interval = (1e9 / per_second).round().max(1.0) as u64;
        Some(Rate {
            per_second,
            burst,
            interval,
            tolerance: interval.saturating_mul(u64::from(burst)),
            base: Instant::now(),
            tat: AtomicU64::new(0),
        })
    }

    /// Takes a token, or says how long until one is there.
    fn try_take(&self) -> Result<(), Duration> {
        let now = self.base.elapsed().as_nanos() as u64;
        let mut wait = 0;
        let taken = self.tat.fetch_update(Relaxed, Relaxed, |tat| {
            let next = tat.max(now) + self.interval;
            wait = (next - now).saturating_sub(self.tolerance);
            (wait == 0).then_some(next)
        });
        taken.map(drop).map_err(|_| Duration::from_nanos(wait))
    }

    /// Gives back a token taken by a call that another limit then refused.
    fn refund(&self) {
        self.tat.fetch_sub(self.interval, Relaxed);
    }
}

/// The load limits of one scope: a route, or the whole gateway.
#[derive(Default)]
struct Scope {
    calls: Option<Concurrency>,
    streams: Option<Concurrency>,
    rate: Option<Rate>,
    /// Request body bytes held (the gateway's scope only).
    body_bytes: Option<Concurrency>,
}

impl Scope {
    fn new(calls: usize, streams: usize, rate: f64, burst: u32) -> Scope {
        Scope {
            calls: Concurrency::new(calls),
            streams: Concurrency::new(streams),
            rate: Rate::new(rate, burst),
            body_bytes: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.calls.is_none()
            && self.streams.is_none()
            && self.rate.is_none()
            && self.body_bytes.is_none()
    }

    fn concurrency(&self, kind: CallKind) -> Option<&Concurrency> {
        match kind {
            CallKind::Unary => self.calls.as_ref(),
            CallKind::Stream => self.streams.as_ref(),
        }
    }

    /// The rows `/metrics` shows for this scope's configured limits.
    fn rows<'a>(&self, route: Option<&'a str>, global: bool) -> Vec<LimitRow<'a>> {
        let pick = |own: Limit, across: Limit| if global { across } else { own };
        let mut rows = Vec::new();
        for (limit, concurrency) in [
            (pick(Limit::Calls, Limit::GlobalCalls), &self.calls),
            (pick(Limit::Streams, Limit::GlobalStreams), &self.streams),
        ] {
            if let Some(c) = concurrency {
                rows.push(LimitRow {
                    route,
                    limit: limit.name(),
                    value: c.max as f64,
                    in_use: Some(c.in_use.load(Relaxed) as u64),
                });
            }
        }
        if let Some(bytes) = &self.body_bytes {
            rows.push(LimitRow {
                route,
                limit: Limit::GlobalBodyBytes.name(),
                value: bytes.max as f64,
                in_use: Some(bytes.in_use.load(Relaxed) as u64),
            });
        }
        if let Some(rate) = &self.rate {
            let limit = pick(Limit::Rate, Limit::GlobalRate).name();
            let burst = if global {
                "global-rate-burst"
            } else {
                "rate-burst"
            };
            rows.push(LimitRow {
                route,
                limit,
                value: rate.per_second,
                in_use: None,
            });
            rows.push(LimitRow {
                route,
                limit: burst,
                value: f64::from(rate.burst),
                in_use: None,
            });
        }
        rows
    }
}

/// One route's limits, with the gateway-wide ones every route shares.
pub struct RouteLimits {
    name: String,
    own: Scope,
    global: Arc<Scope>,
    max_header_size: Option<usize>,
    /// How long a stream may go without an event from the backend (`sse`).
    pub stream_idle: Option<Duration>,
    /// Each client's own limits (`None`: none configured); boxed, as most routes have
    /// none and thousands of routes each held its room.
    client: Option<Box<PerClient>>,
    rejections: [AtomicU64; Limit::ALL.len()],
}

/// A refused call: what refused it, and the HTTP status, `Retry-After`,
/// `WWW-Authenticate` and JSON-RPC error that say so.
#[derive(Debug)]
pub struct Refusal {
    pub by: RefusedBy,
    pub status: StatusCode,
    /// Whole seconds, as `Retry-After` takes them; none for the header size.
    pub retry_after: Option<u64>,
    /// `WWW-Authenticate` challenges (a refused credential's; empty for a limit).
    pub challenges: Vec<HeaderValue>,
    pub error: A2aError,
}

/// The shortest wait a refusal advises: a busy limit frees in an instant it cannot know.
const MIN_RETRY: Duration = Duration::from_millis(100);

/// What refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusedBy {
    Limit(Limit),
    /// The route's authentication (`auth::Authenticator`): 401.
    Authentication,
    /// The route's `allow` rules (`front::call::authorize`): 403.
    Authorization,
}

impl RefusedBy {
    /// The limit's setting name, or `authentication`.
    pub fn name(self) -> &'static str {
        match self {
            RefusedBy::Limit(limit) => limit.name(),
            RefusedBy::Authentication => "authentication",
            RefusedBy::Authorization => "allow",
        }
    }
}

impl Refusal {
    /// The JSON-RPC error response of the refused call `id`.
    pub fn body(&self, id: Option<&str>) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        write_error(&mut out, id, &self.error);
        out
    }
}

impl RouteLimits {
    /// Admits a call of `kind` that goes to `width` endpoints by the client `who` names
    /// under the client's own limits (first: a throttled client takes nothing from the
    /// route's), then the route's and the gateway's: the rate (one token), then concurrency
    /// (`width` units of each limit, at most the whole limit). The permit holds them until
    /// dropped. `who` is asked only when per-client limits are on.
    pub fn admit(
        self: &Arc<Self>,
        kind: CallKind,
        width: usize,
        who: impl FnOnce() -> ClientKey,
    ) -> Result<Permit, Refusal> {
        let client = match &self.client {
            None => None,
            Some(client) => {
                let key = who();
                match client.admit(&key) {
                    Ok(held) => held.then_some(key),
                    Err((limit, what, wait)) => return Err(self.refuse(limit, &what, wait)),
                }
            }
        };
        // From here a refusal drops `permit`, which gives the client's place back.
        let mut permit = Permit {
            limits: self.clone(),
            kind,
            taken: [0; 2],
            client,
        };
        let scopes = [(&self.own, false), (&*self.global, true)];
        for (i, &(scope, global)) in scopes.iter().enumerate() {
            let Some(rate) = &scope.rate else { continue };
            if let Err(wait) = rate.try_take() {
                scopes[..i].iter().for_each(|(s, _)| refund(s));
                let limit = if global {
                    Limit::GlobalRate
                } else {
                    Limit::Rate
                };
                let message = format!(
                    "{} call(s) per second (burst {}); retry in {wait:.1?}",
                    rate.per_second, rate.burst
                );
                return Err(self.refuse(limit, &message, wait));
            }
        }
        let taken = &mut permit.taken;
        for (i, &(scope, global)) in scopes.iter().enumerate() {
            let Some(concurrency) = scope.concurrency(kind) else {
                continue;
            };
            taken[i] = width.clamp(1, concurrency.max);
            if !concurrency.try_acquire(taken[i]) {
                scopes[..i]
                    .iter()
                    .zip(std::mem::take(taken))
                    .for_each(|((s, _), n)| release(s, kind, n));
                scopes.iter().for_each(|(s, _)| refund(s));
                let (what, limit) = match (kind, global) {
                    (CallKind::Unary, false) => ("unary calls", Limit::Calls),
                    (CallKind::Stream, false) => ("streams", Limit::Streams),
                    (CallKind::Unary, true) => ("unary calls", Limit::GlobalCalls),
                    (CallKind::Stream, true) => ("streams", Limit::GlobalStreams),
                };
                let message = format!("{} concurrent {what}", concurrency.max);
                return Err(self.refuse(limit, &message, Duration::from_secs(1)));
            }
        }
        Ok(permit)
    }

    /// The body charge of one request: nothing held yet.
    pub fn body_charge(self: &Arc<Self>) -> BodyCharge {
        BodyCharge {
            limits: self.clone(),
            held: 0,
        }
    }

    /// Refuses a request whose header fields are larger than the route's limit, counted
    /// as HTTP/2 counts a header list (RFC 9113 6.5.2): name, value and 32 bytes each.
    pub fn check_headers(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(max) = self.max_header_size else {
            return Ok(());
        };
        let size: usize = headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 32)
            .sum();
        if size <= max {
            return Ok(());
        }
        let limit = Limit::HeaderSize;
        self.rejections[limit as usize].fetch_add(1, Relaxed);
        let message = format!(
            "the request's header fields ({size} bytes) exceed this route's limit of {max} bytes ({})",
            limit.name()
        );
        Err(Refusal {
            by: RefusedBy::Limit(limit),
            status: limit.row().2,
            retry_after: None,
            challenges: Vec::new(),
            error: self.error(limit, message, max as f64),
        })
    }

    fn refuse(&self, limit: Limit, what: &str, wait: Duration) -> Refusal {
        self.rejections[limit as usize].fetch_add(1, Relaxed);
        let scope = match limit {
            Limit::GlobalCalls
            | Limit::GlobalStreams
            | Limit::GlobalRate
            | Limit::GlobalBodyBytes => "the gateway's",
            Limit::ClientRate | Limit::ClientConcurrent | Limit::ClientKeys => {
                "this route's per-client"
            }
            _ => "this route's",
        };
        let message = format!(
            "over {scope} limit of {what} ({}); the call did not reach the agent",
            limit.name()
        );
        let value = match limit {
            Limit::Calls => self.own.calls.as_ref().map(|c| c.max),
            Limit::Streams => self.own.streams.as_ref().map(|c| c.max),
            Limit::GlobalCalls => self.global.calls.as_ref().map(|c| c.max),
            Limit::GlobalStreams => self.global.streams.as_ref().map(|c| c.max),
            Limit::GlobalBodyBytes => self.global.body_bytes.as_ref().map(|c| c.max),
            _ => None,
        };
        let value = match (limit, value) {
            (Limit::Rate, _) => self.own.rate.as_ref().map_or(0.0, |r| r.per_second),
            (Limit::GlobalRate, _) => self.global.rate.as_ref().map_or(0.0, |r| r.per_second),
            (Limit::ClientRate | Limit::ClientConcurrent | Limit::ClientKeys, _) => {
                self.client.as_ref().map_or(0.0, |c| c.value(limit))
            }
            (_, value) => value.unwrap_or_default() as f64,
        };
        let mut error = self.error(limit, message, value);
        // The wait to the millisecond, for clients that read the error rather than the
        // HTTP head (`Retry-After` has whole seconds).
        error
            .data
            .push(crate::protocol::details::retry_info(wait.max(MIN_RETRY)));
        Refusal {
            by: RefusedBy::Limit(limit),
            status: limit.row().2,
            retry_after: Some(wait.as_secs_f64().ceil().max(1.0) as u64),
            challenges: Vec::new(),
            error,
        }
    }

    /// The JSON-RPC error of a refusal: the gateway fault, with the limit in its metadata.
    fn error(&self, limit: Limit, message: String, value: f64) -> A2aError {
        let mut error = A2aError::gateway(limit.row().1, message);
        if let Some(info) = error.data.first_mut() {
            info["metadata"] = json!({
                "limit": limit.name(),
                "value": value.to_string(),
                "route": self.name,
            });
        }
        error
    }

    /// The rejection counters of this route, for `/metrics`: every limit that applies.
    fn rejection_rows(&self) -> Vec<RejectionRow<'_>> {
        let configured = |limit: Limit| match limit {
            Limit::Calls => self.own.calls.is_some(),
            Limit::Streams => self.own.streams.is_some(),
            Limit::Rate => self.own.rate.is_some(),
            Limit::GlobalCalls => self.global.calls.is_some(),
            Limit::GlobalStreams => self.global.streams.is_some(),
            Limit::GlobalRate => self.global.rate.is_some(),
            Limit::HeaderSize => self.max_header_size.is_some(),
            Limit::GlobalBodyBytes => self.global.body_bytes.is_some(),
            Limit::ClientRate | Limit::ClientConcurrent | Limit::ClientKeys => {
                self.client.as_ref().is_some_and(|c| c.has(limit))
            }
        };
        Limit::ALL
            .into_iter()
            .filter(|limit| configured(*limit))
            .map(|limit| RejectionRow {
                route: &self.name,
                limit: limit.name(),
                count: self.rejections[limit as usize].load(Relaxed),
            })
            .collect()
    }
}

fn refund(scope: &Scope) {
    if let Some(rate) = &scope.rate {
        rate.refund();
    }
}

fn release(scope: &Scope, kind: CallKind, n: usize) {
    if let Some(concurrency) = scope.concurrency(kind) {
        concurrency.release(n);
    }
}

/// A call admitted under its route's limits; it counts as in use until dropped (a unary
/// call when answered, a stream when its SSE body ends).
pub struct Permit {
    limits: Arc<RouteLimits>,
    kind: CallKind,
    /// Units taken of the route's and of the gateway's limit.
    taken: [usize; 2],
    /// The client holding a place among its calls in flight.
    client: Option<ClientKey>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        release(&self.limits.own, self.kind, self.taken[0]);
        release(&self.limits.global, self.kind, self.taken[1]);
        if let (Some(key), Some(client)) = (&self.client, &self.limits.client) {
            client.release(key);
        }
    }
}

/// The body bytes one request holds against `global-max-body-bytes-in-flight`, given
/// back when dropped (when the request's handler is done with the body).
pub struct BodyCharge {
    limits: Arc<RouteLimits>,
    held: usize,
}

impl BodyCharge {
    /// Raises the charge to `total` bytes; refused (nothing more held) when the gateway's
    /// bodies would then hold more than the limit.
    pub fn grow_to(&mut self, total: usize) -> Result<(), Refusal> {
        let Some(bytes) = &self.limits.global.body_bytes else {
            return Ok(());
        };
        if total <= self.held {
            return Ok(());
        }
        if !bytes.try_acquire(total - self.held) {
            let what = format!("{} request body bytes in flight", bytes.max);
            let limit = Limit::GlobalBodyBytes;
            return Err(self.limits.refuse(limit, &what, Duration::from_secs(1)));
        }
        self.held = total;
        Ok(())
    }
}

impl Drop for BodyCharge {
    fn drop(&mut self) {
        if let Some(bytes) = &self.limits.global.body_bytes {
            bytes.release(self.held);
        }
    }
}

/// Every route's limits (in the configuration's route order) and the gateway-wide ones,
/// shared by all workers.
pub struct Limits {
    global: Arc<Scope>,
    routes: Vec<Arc<RouteLimits>>,
}

/// The limits across all routes (`global-*`); `0` turns one off.
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobalLimitSettings {
    pub max_body_bytes_in_flight: usize,
    pub max_concurrent_calls: usize,
    pub max_concurrent_streams: usize,
    pub rate_limit: f64,
    pub rate_burst: u32,
}

/// One route's own limits; `0` turns one off.
#[derive(Clone, Copy, Debug, Default)]
pub struct RouteLimitSettings {
    pub max_concurrent_calls: usize,
    pub max_concurrent_streams: usize,
    pub rate_limit: f64,
    pub rate_burst: u32,
    pub max_header_size: usize,
    pub stream_idle_timeout: Duration,
    /// Each client's own limits.
    pub client: PerClientSettings,
}

impl Limits {
    /// The `global` limits and each route's, by name in the configuration's order; `None`
    /// when they set none (then nothing is checked).
    pub fn new(
        global: GlobalLimitSettings,
        routes: &[(&str, RouteLimitSettings)],
    ) -> Option<Arc<Limits>> {
        let global = Arc::new(Scope {
            body_bytes: Concurrency::new(global.max_body_bytes_in_flight),
            ..Scope::new(
                global.max_concurrent_calls,
                global.max_concurrent_streams,
                global.rate_limit,
                global.rate_burst,
            )
        });
        let routes: Vec<_> = routes
            .iter()
            .map(|(name, settings)| Arc::new(route_limits(name, settings, &global)))
            .collect();
        let none = global.is_empty()
            && routes.iter().all(|r| {
                r.own.is_empty()
                    && r.max_header_size.is_none()
                    && r.stream_idle.is_none()
                    && r.client.is_none()
            });
        (!none).then(|| Arc::new(Limits { global, routes }))
    }

    /// The limits of the route at `index` in the configuration.
    pub fn route(&self, index: usize) -> Option<&Arc<RouteLimits>> {
        self.routes.get(index)
    }

    /// The largest header size any route allows, for the listener's own bound; `None`
    /// when some route has no limit.
    pub fn max_header_size(&self) -> Option<usize> {
        self.routes
            .iter()
            .map(|r| r.max_header_size)
            .try_fold(0, |max, size| Some(max.max(size?)))
    }

    /// Appends the limits, their use and their rejections to a `/metrics` text.
    pub fn render(&self, out: &mut String) {
        let mut rows = self.global.rows(None, true);
        let mut rejections = Vec::new();
        for route in &self.routes {
            rows.extend(route.own.rows(Some(&route.name), false));
            if let Some(size) = route.max_header_size {
                rows.push(LimitRow {
                    route: Some(&route.name),
                    limit: Limit::HeaderSize.name(),
                    value: size as f64,
                    in_use: None,
                });
            }
            if let Some(idle) = route.stream_idle {
                rows.push(LimitRow {
                    route: Some(&route.name),
                    limit: "stream-idle-timeout",
                    value: idle.as_secs_f64(),
                    in_use: None,
                });
            }
            let client_rows = route.client.as_ref().map(|c| c.rows()).unwrap_or_default();
            rows.extend(
                client_rows
                    .into_iter()
                    .map(|(limit, value, in_use)| LimitRow {
                        route: Some(&route.name),
                        limit: limit.name(),
                        value,
                        in_use,
                    }),
            );
            rejections.extend(route.rejection_rows());
        }
        crate::telemetry::render_limits(out, &rows, &rejections);
    }
}

fn route_limits(name: &str, settings: &RouteLimitSettings, global: &Arc<Scope>) -> RouteLimits {
    RouteLimits {
        name: name.to_owned(),
        own: Scope::new(
            settings.max_concurrent_calls,
            settings.max_concurrent_streams,
            settings.rate_limit,
            settings.rate_burst,
        ),
        global: global.clone(),
        max_header_size: (settings.max_header_size > 0).then_some(settings.max_header_size),
        stream_idle: optional(settings.stream_idle_timeout),
        client: PerClient::new(&settings.client).map(Box::new),
        rejections: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_admits_its_burst_then_one_per_interval() {
        let rate = Rate::new(10.0, 3).unwrap();
        for _ in 0..3 {
            rate.try_take().unwrap();
        }
        let wait = rate.try_take().unwrap_err();
        assert!(wait > Duration::from_millis(50) && wait <= Duration::from_millis(100));
        rate.refund();
        rate.try_take().unwrap();
        assert!(rate.try_take().is_err());
        std::thread::sleep(Duration::from_millis(110));
        rate.try_take().unwrap();
        assert!(rate.try_take().is_err(), "one token per interval");
    }

    #[test]
    fn each_limit_has_its_own_name_and_the_status_of_its_fault() {
        for (i, limit) in Limit::ALL.into_iter().enumerate() {
            assert_eq!(limit as usize, i, "ALL is in declaration order");
            let (name, fault, status) = limit.row();
            assert!(Limit::ALL[..i].iter().all(|l| l.name() != name), "{name}");
            let expected = match fault {
                GatewayFault::RateLimited => StatusCode::TOO_MANY_REQUESTS,
                GatewayFault::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
                GatewayFault::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                other => panic!("{name}: {other:?} is no limit's fault"),
            };
            assert_eq!(status, expected, "{name}");
        }
    }

    #[test]
    fn the_default_burst_is_one_second_of_rate() {
        assert_eq!(Rate::new(2.5, 0).unwrap().burst, 3);
        assert_eq!(Rate::new(0.1, 0).unwrap().burst, 1);
        assert!(Rate::new(0.0, 5).is_none());
    }

    fn nobody() -> ClientKey {
        ClientKey::of(None, None)
    }

    #[test]
    fn a_refusal_by_the_global_limit_gives_back_the_route_share() {
        let global = Arc::new(Scope::new(1, 0, 0.0, 0));
        let route = |name: &str| {
            Arc::new(RouteLimits {
                name: name.into(),
                own: Scope::new(1, 1, 0.0, 0),
                global: global.clone(),
                max_header_size: None,
                stream_idle: None,
                client: None,
                rejections: Default::default(),
            })
        };
        let (a, b) = (route("a"), route("b"));
        let held = a.admit(CallKind::Unary, 1, nobody).unwrap();
        let Err(refused) = b.admit(CallKind::Unary, 1, nobody) else {
            panic!("admitted over the global limit");
        };
        assert_eq!(refused.by, RefusedBy::Limit(Limit::GlobalCalls));
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(b.own.calls.as_ref().unwrap().in_use.load(Relaxed), 0);
        // Streams have their own limits; the global one is for unary calls only.
        let stream = b.admit(CallKind::Stream, 1, nobody).unwrap();
        drop(held);
        let _again = b.admit(CallKind::Unary, 1, nobody).unwrap();
        drop(stream);
        assert_eq!(a.rejection_rows()[0].count, 0);
        let rows = b.rejection_rows();
        let global_calls = rows
            .iter()
            .find(|r| r.limit == "global-max-concurrent-calls");
        assert_eq!(global_calls.unwrap().count, 1);
    }
}

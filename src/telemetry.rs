//! Prometheus metrics: JSON-RPC requests by route, method and outcome (the error table's
//! JSON-RPC code, `0` for success), latency histograms per route and method, open SSE streams
//! and SSE events sent per route (events exposed as `a2a_gateway_stream_frames_total`, a name
//! kept as the external contract), and the endpoints of balanced routes
//! (`render_endpoints`: per route healthy and ejected counts, per endpoint calls and
//! ejections), and the push deliveries to webhooks (`DeliveryMetrics`, per route outcomes,
//! retries, drops and queue depth). The `route` label is the configured route name, never
//! a request's value.
//!
//! Recording is a few relaxed atomic additions into fixed arrays indexed by the operation
//! and error tables, so the request path takes no lock and allocates nothing; the text
//! exposition format is written only when `/metrics` is scraped.
//!
//! Traces (`trace`) and the access log (`access`) are submodules; `untrusted` bounds and
//! escapes the peer-chosen strings both write.

pub mod access;
mod delivery;
mod push;
pub mod trace;
pub mod untrusted;

pub(crate) use delivery::{DeliveryCounters, DeliveryMetrics, DeliveryOutcome, DropReason};
pub(crate) use push::{PushCallback, PushRegistration};

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::protocol::error::ErrorKind;
use crate::protocol::legacy::{self, Method};
use crate::protocol::ops::Op;

/// The two ends of a request's connection: facts of the connection, put in each request's
/// extensions by the server. The client's is read by the access log, the spans and the
/// per-client limits; the local one (the gateway's address as the client dialled it) is
/// the origin a card names when the configuration names none (`card::origin`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectionAddrs {
    pub client: std::net::SocketAddr,
    pub local: std::net::SocketAddr,
}

#[cfg(test)]
impl ConnectionAddrs {
    /// A client at 192.0.2.1 that reached the gateway at 10.1.2.3:8080 (a pod's address).
    pub(crate) fn example() -> ConnectionAddrs {
        ConnectionAddrs {
            client: "192.0.2.1:50000".parse().unwrap(),
            local: "10.1.2.3:8080".parse().unwrap(),
        }
    }
}

const OPS: usize = Op::ALL.len();
/// One slot per error-table row, plus success and the client's leaving.
const OUTCOMES: usize = ErrorKind::ALL.len() + 2;
/// Upper bounds of the call latency buckets, in seconds: from a quarter millisecond (the
/// gateway's own cost) to 300 s, past the default 30 s call deadline (`--timeout`) and the
/// longer ones operators set, so a slow agent's calls land in a bucket, not in `+Inf`.
const CALL_BUCKETS: [f64; 19] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0, 120.0, 300.0,
];
/// Upper bounds of the stream duration buckets, in seconds: streams last seconds to hours
/// (`--stream-timeout` is off by default); those past an hour count only in `+Inf`.
const STREAM_BUCKETS: [f64; 10] = [
    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// How one JSON-RPC request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Error(ErrorKind),
    /// The client left before the call was answered (`access::CLIENT_CLOSED`, as the
    /// access line says).
    ClientClosed,
}

impl Outcome {
    fn index(self) -> usize {
        match self {
            Outcome::Ok => 0,
            Outcome::Error(kind) => kind as usize + 1,
            Outcome::ClientClosed => OUTCOMES - 1,
        }
    }

    fn code(index: usize) -> i32 {
        match index {
            0 => 0,
            i if i == OUTCOMES - 1 => access::CLIENT_CLOSED,
            i => ErrorKind::ALL[i - 1].code(),
        }
    }
}

/// A histogram over `N` bucket bounds, which the caller passes (`CALL_BUCKETS`,
/// `STREAM_BUCKETS`) so each histogram holds only its counters.
#[derive(Debug)]
struct Histogram<const N: usize> {
    buckets: [AtomicU64; N],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl<const N: usize> Default for Histogram<N> {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl<const N: usize> Histogram<N> {
    fn observe(&self, bounds: &[f64; N], elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = bounds.iter().position(|b| seconds <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micros
            .fetch_add(elapsed.as_micros().min(u64::MAX as u128) as u64, Relaxed);
    }

    /// The counts now, for rendering.
    fn counts(&self) -> Counts<N> {
        Counts {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            count: self.count.load(Relaxed),
            sum_micros: self.sum_micros.load(Relaxed),
        }
    }

    fn render(&self, bounds: &[f64; N], out: &mut String, name: &str, labels: &str) {
        self.counts().render(bounds, out, name, labels);
    }
}

/// A histogram's counts at one time (per bucket, not cumulative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts<const N: usize> {
    buckets: [u64; N],
    count: u64,
    sum_micros: u64,
}

impl<const N: usize> Default for Counts<N> {
    fn default() -> Self {
        Counts {
            buckets: [0; N],
            count: 0,
            sum_micros: 0,
        }
    }
}

impl<const N: usize> Counts<N> {
    /// The series of `name` with the labels `labels` (written before `le`), if any was
    /// observed.
    fn render(&self, bounds: &[f64; N], out: &mut String, name: &str, labels: &str) {
        let count = self.count;
        if count == 0 {
            return;
        }
        let mut cumulative = 0;
        for (bound, bucket) in bounds.iter().zip(&self.buckets) {
            cumulative += bucket;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let sum = self.sum_micros as f64 / 1e6;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// How long backend calls to one endpoint took (`a2a_gateway_backend_call_duration_seconds`):
/// a unary call to its answer, a stream to its start; shared by every worker. Its counters
/// are allocated at the first call, so that routes never called cost a few bytes.
#[derive(Debug, Default)]
pub struct BackendLatency(OnceLock<Box<Histogram<{ CALL_BUCKETS.len() }>>>);

/// `BackendLatency`'s counts at one time.
pub type BackendLatencyCounts = Counts<{ CALL_BUCKETS.len() }>;

impl BackendLatency {
    pub(crate) fn observe(&self, elapsed: Duration) {
        let histogram = self.0.get_or_init(Box::default);
        histogram.observe(&CALL_BUCKETS, elapsed);
    }

    pub(crate) fn counts(&self) -> BackendLatencyCounts {
        self.0.get().map_or_else(Counts::default, |h| h.counts())
    }
}

/// The gateway's metrics, shared by all requests: each route's (`route`) and the
/// process's own.
#[derive(Default)]
pub struct Metrics {
    /// Every route's metrics, in the order their handlers were first built; one entry per
    /// configured name, so the `route` label is bounded by the configuration.
    routes: std::sync::Mutex<RouteTable>,
    /// The serving runtimes, whose alive tasks `/metrics` counts.
    runtimes: std::sync::Mutex<Vec<tokio::runtime::Handle>>,
    /// Identity header values not sent to the agent (`auth::forward`: unsendable values).
    caller_headers_dropped: AtomicU64,
    /// The serving certificate's notAfter, read at scrape time (`None`: cleartext).
    serving_certificate: OnceLock<NotAfter>,
    /// Configuration reloads by outcome (`ReloadOutcome`).
    reloads: [AtomicU64; RELOAD_OUTCOMES.len()],
    /// When the configuration in use was loaded, in seconds since the Unix epoch.
    config_loaded_at: AtomicU64,
    /// Posts to the push relay's callback whose token names no relaying route.
    push_unrouted: push::PushCounters,
}

/// How a configuration reload ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new configuration serves.
    Applied = 0,
    /// The new configuration was refused (a bad setting or file); the old one serves.
    Refused = 1,
}

/// `ReloadOutcome`'s label values, in its order.
const RELOAD_OUTCOMES: [&str; 2] = ["applied", "refused"];

/// Reads a certificate's notAfter, in seconds since the Unix epoch.
type NotAfter = Box<dyn Fn() -> Option<i64> + Send + Sync>;

/// The routes' metrics in order, and by name (each worker looks up every route when it
/// builds its handlers: thousands of routes must not cost a scan each).
#[derive(Default)]
struct RouteTable {
    routes: Vec<Arc<RouteMetrics>>,
    by_name: std::collections::HashMap<Box<str>, Arc<RouteMetrics>>,
}

/// One route's requests, latencies and streams, labelled with its configured name.
pub struct RouteMetrics {
    name: Box<str>,
    /// Allocated at the route's first call, so that routes never called cost a few bytes.
    calls: OnceLock<Box<CallCounters>>,
    streams_open: AtomicI64,
    stream_events: AtomicU64,
    /// A one-backend route's backend: its address and call latency (balanced routes have
    /// theirs per endpoint).
    backend: OnceLock<(Box<str>, Arc<BackendLatency>)>,
    /// Push registrations and callbacks, allocated at the route's first.
    push: OnceLock<Box<push::PushCounters>>,
}

/// The per-call counters of one route.
struct CallCounters {
    requests: [[AtomicU64; OUTCOMES]; OPS],
    /// Requests rejected before a method was known (parse errors, bad envelopes).
    rejected: [AtomicU64; OUTCOMES],
    latency: [Histogram<{ CALL_BUCKETS.len() }>; OPS],
    /// How long the route's SSE streams lasted, from the reply's start to their end.
    stream_duration: Histogram<{ STREAM_BUCKETS.len() }>,
    /// v0.3 calls by v0.3 method and outcome (they also count under their operation).
    v03: [[AtomicU64; OUTCOMES]; Method::ALL.len()],
}

impl Default for CallCounters {
    fn default() -> Self {
        Self {
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            rejected: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: std::array::from_fn(|_| Histogram::default()),
            stream_duration: Histogram::default(),
            v03: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
        }
    }
}

impl RouteMetrics {
    fn calls(&self) -> &CallCounters {
        self.calls.get_or_init(Box::default)
    }

    /// A finished request of `op` (for streams: until the first event or error).
    pub(crate) fn request(&self, op: Op, outcome: Outcome, elapsed: Duration) {
        let calls = self.calls();
        calls.requests[op as usize][outcome.index()].fetch_add(1, Relaxed);
        calls.latency[op as usize].observe(&CALL_BUCKETS, elapsed);
    }

    /// A finished v0.3 call of `method`.
    pub(crate) fn v03_request(&self, method: Method, outcome: Outcome) {
        self.calls().v03[method as usize][outcome.index()].fetch_add(1, Relaxed);
    }

    /// The route's configured name: its `route` label, and its access-log lines' field.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// A request refused before its method was known.
    pub fn rejected(&self, kind: ErrorKind) {
        self.calls().rejected[Outcome::Error(kind).index()].fetch_add(1, Relaxed);
    }

    /// An SSE stream opened; the guard counts it closed when dropped.
    pub(crate) fn stream_opened(self: &Arc<Self>) -> StreamGuard {
        self.streams_open.fetch_add(1, Relaxed);
        StreamGuard {
            route: self.clone(),
            opened: Instant::now(),
        }
    }

    /// The call latency of the route's one backend, at `endpoint` (its configured address),
    /// the same for every worker's client.
    pub fn backend_latency(&self, endpoint: &str) -> Arc<BackendLatency> {
        let (_, latency) = self
            .backend
            .get_or_init(|| (endpoint.into(), Arc::default()));
        latency.clone()
    }

    /// A push config a client handed the agent, and what became of it.
    pub(crate) fn push_registration(&self, outcome: PushRegistration) {
        self.push.get_or_init(Box::default).registration(outcome);
    }

    /// A notification an agent posted to the relay's callback for this route.
    pub(crate) fn push_callback(&self, outcome: PushCallback) {
        self.push.get_or_init(Box::default).callback(outcome);
    }

    /// SSE events written to streams.
    fn events(&self, n: u64) {
        self.stream_events.fetch_add(n, Relaxed);
    }
}

impl Metrics {
    /// The metrics of the route named `name`, the same for every handler of it (each
    /// serving thread builds its own). Called when handlers are built, never per request.
    pub fn route(&self, name: &str) -> Arc<RouteMetrics> {
        let mut table = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(route) = table.by_name.get(name) {
            return route.clone();
        }
        let route = Arc::new(RouteMetrics {
            name: name.into(),
            calls: OnceLock::new(),
            streams_open: AtomicI64::new(0),
            stream_events: AtomicU64::new(0),
            backend: OnceLock::new(),
            push: OnceLock::new(),
        });
        table.routes.push(route.clone());
        table.by_name.insert(name.into(), route.clone());
        route
    }

    /// Identity header values dropped as unsendable (none: nothing is touched).
    pub(crate) fn caller_headers_dropped(&self, n: usize) {
        if n > 0 {
            self.caller_headers_dropped.fetch_add(n as u64, Relaxed);
        }
    }

    /// A post to the push relay's callback whose token names no relaying route.
    pub(crate) fn push_callback_unrouted(&self, outcome: PushCallback) {
        self.push_unrouted.callback(outcome);
    }

    /// The listener's certificate, whose expiry `/metrics` shows (the first one given).
    pub fn serving_certificate(&self, not_after: NotAfter) {
        let _ = self.serving_certificate.set(not_after);
    }

    /// The endpoints of balanced routes (`render_endpoints`), and the backend latency of
    /// one-backend routes with them, as one family.
    pub(crate) fn render_endpoints(
        &self,
        out: &mut String,
        balanced: &[(&str, Vec<EndpointStats>)],
    ) {
        let routes = self
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .routes
            .clone();
        let single: Vec<(&str, &str, BackendLatencyCounts)> = routes
            .iter()
            .filter_map(|r| {
                let (endpoint, latency) = r.backend.get()?;
                Some((&*r.name, &**endpoint, latency.counts()))
            })
            .collect();
        render_endpoints(out, balanced, &single);
    }

    /// A serving runtime (one per worker thread), whose tasks `/metrics` counts.
    pub(crate) fn count_tasks_of(&self, runtime: tokio::runtime::Handle) {
        if let Ok(mut runtimes) = self.runtimes.lock() {
            runtimes.push(runtime);
        }
    }

    /// The Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let routes = self
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .routes
            .clone();
        let called: Vec<(&str, &CallCounters)> = routes
            .iter()
            .filter_map(|r| Some((&*r.name, r.calls.get()?.as_ref())))
            .collect();
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP a2a_gateway_requests_total JSON-RPC requests by route, method and JSON-RPC code (0 = success).\n");
        out.push_str("# TYPE a2a_gateway_requests_total counter\n");
        for (route, calls) in &called {
            for (op, row) in Op::ALL.iter().zip(&calls.requests) {
                for (i, counter) in row.iter().enumerate() {
                    let n = counter.load(Relaxed);
                    if n > 0 {
                        let code = Outcome::code(i);
                        let _ = writeln!(
                            out,
                            "a2a_gateway_requests_total{{route=\"{route}\",method=\"{}\",code=\"{code}\"}} {n}",
                            op.name()
                        );
                    }
                }
            }
            for (i, counter) in calls.rejected.iter().enumerate() {
                let n = counter.load(Relaxed);
                if n > 0 {
                    let code = Outcome::code(i);
                    let _ = writeln!(
                        out,
                        "a2a_gateway_requests_total{{route=\"{route}\",method=\"\",code=\"{code}\"}} {n}"
                    );
                }
            }
        }
        out.push_str("# HELP a2a_gateway_request_duration_seconds Time to the reply (streams: to the first event).\n");
        out.push_str("# TYPE a2a_gateway_request_duration_seconds histogram\n");
        for (route, calls) in &called {
            for (op, histogram) in Op::ALL.iter().zip(&calls.latency) {
                let labels = format!("route=\"{route}\",method=\"{}\"", op.name());
                let name = "a2a_gateway_request_duration_seconds";
                histogram.render(&CALL_BUCKETS, &mut out, name, &labels);
            }
        }
        render_v03(&mut out, &called);
        out.push_str("# HELP a2a_gateway_streams_open SSE streams currently open.\n");
        out.push_str("# TYPE a2a_gateway_streams_open gauge\n");
        for route in &routes {
            let open = route.streams_open.load(Relaxed);
            let _ = writeln!(
                out,
                "a2a_gateway_streams_open{{route=\"{}\"}} {open}",
                route.name
            );
        }
        out.push_str("# HELP a2a_gateway_stream_duration_seconds How long SSE streams lasted, from the reply's start to their end.\n");
        out.push_str("# TYPE a2a_gateway_stream_duration_seconds histogram\n");
        for (route, calls) in &called {
            let (name, labels) = (
                "a2a_gateway_stream_duration_seconds",
                format!("route=\"{route}\""),
            );
            calls
                .stream_duration
                .render(&STREAM_BUCKETS, &mut out, name, &labels);
        }
        out.push_str(
            "# HELP a2a_gateway_stream_frames_total Data and error events sent on SSE streams.\n",
        );
        out.push_str("# TYPE a2a_gateway_stream_frames_total counter\n");
        for route in &routes {
            let sent = route.stream_events.load(Relaxed);
            let _ = writeln!(
                out,
                "a2a_gateway_stream_frames_total{{route=\"{}\"}} {sent}",
                route.name
            );
        }
        let pushed: Vec<(&str, &push::PushCounters)> = std::iter::once(("", &self.push_unrouted))
            .chain(
                routes
                    .iter()
                    .filter_map(|r| Some((&*r.name, &**r.push.get()?))),
            )
            .collect();
        push::render(&mut out, &pushed);
        out.push_str("# HELP a2a_gateway_log_lines_dropped_total Log lines (an event, or a piece of access lines) dropped because stderr did not take them.\n");
        out.push_str("# TYPE a2a_gateway_log_lines_dropped_total counter\n");
        let dropped = access::sink::dropped();
        let _ = writeln!(out, "a2a_gateway_log_lines_dropped_total {dropped}");
        out.push_str("# HELP a2a_gateway_caller_headers_dropped_total Values of [auth.forward] headers not sent to the agent: not printable ASCII, too long, or a claim with no text form.\n");
        out.push_str("# TYPE a2a_gateway_caller_headers_dropped_total counter\n");
        let dropped = self.caller_headers_dropped.load(Relaxed);
        let _ = writeln!(out, "a2a_gateway_caller_headers_dropped_total {dropped}");
        render_build_info(&mut out);
        out.push_str("# HELP a2a_gateway_config_reloads_total Configuration reloads (a changed file or SIGHUP) by outcome: applied, or refused with the old configuration still serving.\n");
        out.push_str("# TYPE a2a_gateway_config_reloads_total counter\n");
        for (outcome, count) in RELOAD_OUTCOMES.iter().zip(&self.reloads) {
            let count = count.load(Relaxed);
            let _ = writeln!(
                out,
                "a2a_gateway_config_reloads_total{{outcome=\"{outcome}\"}} {count}"
            );
        }
        out.push_str("# HELP a2a_gateway_config_loaded_timestamp_seconds When the configuration serving now was loaded, in seconds since the Unix epoch.\n");
        out.push_str("# TYPE a2a_gateway_config_loaded_timestamp_seconds gauge\n");
        let loaded = self.config_loaded_at.load(Relaxed);
        let _ = writeln!(out, "a2a_gateway_config_loaded_timestamp_seconds {loaded}");
        if let Some(not_after) = self.serving_certificate.get().and_then(|read| read()) {
            out.push_str("# HELP a2a_gateway_serving_certificate_expiry_timestamp_seconds When the certificate new TLS handshakes get expires (its notAfter), in seconds since the Unix epoch.\n");
            out.push_str("# TYPE a2a_gateway_serving_certificate_expiry_timestamp_seconds gauge\n");
            let _ = writeln!(
                out,
                "a2a_gateway_serving_certificate_expiry_timestamp_seconds {not_after}"
            );
        }
        self.render_process(&mut out);
        out
    }

    /// Counts a reload's `outcome`; an applied one (or the first load, `None`) is the
    /// configuration serving from now.
    pub fn config_loaded(&self, outcome: Option<ReloadOutcome>) {
        if let Some(outcome) = outcome {
            self.reloads[outcome as usize].fetch_add(1, Relaxed);
        }
        if outcome != Some(ReloadOutcome::Refused) {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            let now = now.map_or(0, |since| since.as_secs());
            self.config_loaded_at.store(now, Relaxed);
        }
    }

    /// What leaks would show: resident memory and open file descriptors (Linux, from
    /// `/proc/self`), and the serving runtimes' alive tasks, all read now.
    fn render_process(&self, out: &mut String) {
        if let Some(bytes) = resident_bytes() {
            out.push_str("# HELP process_resident_memory_bytes Resident memory size in bytes.\n");
            out.push_str("# TYPE process_resident_memory_bytes gauge\n");
            let _ = writeln!(out, "process_resident_memory_bytes {bytes}");
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            // The directory handle being read is one of them.
            let open = fds.count().saturating_sub(1);
            out.push_str("# HELP process_open_fds Number of open file descriptors.\n");
            out.push_str("# TYPE process_open_fds gauge\n");
            let _ = writeln!(out, "process_open_fds {open}");
        }
        let tasks: usize = match self.runtimes.lock() {
            Ok(runtimes) => runtimes.iter().map(|r| r.metrics().num_alive_tasks()).sum(),
            Err(_) => return,
        };
        out.push_str("# HELP a2a_gateway_tasks_alive Tokio tasks alive on the serving threads.\n");
        out.push_str("# TYPE a2a_gateway_tasks_alive gauge\n");
        let _ = writeln!(out, "a2a_gateway_tasks_alive {tasks}");
    }
}

/// The version and the commit built (`build.rs`; `unknown` when built outside a git
/// checkout), so dashboards can tell the replicas of a rollout apart.
fn render_build_info(out: &mut String) {
    out.push_str("# HELP a2a_gateway_build_info The gateway's version and commit; always 1.\n");
    out.push_str("# TYPE a2a_gateway_build_info gauge\n");
    let _ = writeln!(
        out,
        "a2a_gateway_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        env!("A2A_GATEWAY_COMMIT")
    );
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// v0.3 calls by route, protocol version, v0.3 method and the v0.3 code the client got,
/// so operators can watch v0.3 traffic drain.
fn render_v03(out: &mut String, called: &[(&str, &CallCounters)]) {
    out.push_str("# HELP a2a_gateway_legacy_requests_total Calls of older protocol versions by route, version, method and JSON-RPC code (0 = success).\n");
    out.push_str("# TYPE a2a_gateway_legacy_requests_total counter\n");
    for (route, calls) in called {
        for (method, row) in Method::ALL.iter().zip(&calls.v03) {
            for (i, counter) in row.iter().enumerate() {
                let n = counter.load(Relaxed);
                if n > 0 {
                    let code = match i {
                        0 => 0,
                        i if i == OUTCOMES - 1 => access::CLIENT_CLOSED,
                        _ => legacy::v03_kind(ErrorKind::ALL[i - 1]).code(),
                    };
                    let _ = writeln!(
                        out,
                        "a2a_gateway_legacy_requests_total{{route=\"{route}\",version=\"0.3\",method=\"{}\",code=\"{code}\"}} {n}",
                        method.name()
                    );
                }
            }
        }
    }
}

/// One endpoint of a balanced route as `/metrics` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EndpointStats {
    /// Its address, or its URL in a fixed list.
    pub(crate) endpoint: String,
    pub(crate) ejected: bool,
    /// Calls started on it (a retried call counts on both endpoints).
    pub calls: u64,
    pub ejections: u64,
    pub latency: BackendLatencyCounts,
}

/// Authentications of one route, scheme and result, as `/metrics` shows them
/// (`auth::authenticator`). No principal is a label.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AuthRow<'a> {
    pub(crate) route: &'a str,
    /// `jwt`, `api-key`, `mtls`, `anonymous`, or `none` (no single credential).
    pub(crate) scheme: &'static str,
    /// `ok`, `invalid` (a credential that failed, or more than one) or `missing` (none,
    /// where anonymous calls are not taken).
    pub(crate) result: &'static str,
    pub(crate) count: u64,
}

/// The authentications of every route with authentication.
pub(crate) fn render_auth(out: &mut String, rows: &[AuthRow<'_>]) {
    if rows.is_empty() {
        return;
    }
    out.push_str("# HELP a2a_gateway_auth_total Authentications by route, scheme and result.\n");
    out.push_str("# TYPE a2a_gateway_auth_total counter\n");
    for row in rows {
        let _ = writeln!(
            out,
            "a2a_gateway_auth_total{{route=\"{}\",scheme=\"{}\",result=\"{}\"}} {}",
            row.route, row.scheme, row.result, row.count
        );
    }
}

/// Each route's readiness as `/readyz` judges it: 1 ready, 0 not.
pub(crate) fn render_route_ready(out: &mut String, routes: &[(&str, bool)]) {
    out.push_str("# HELP a2a_gateway_route_ready Whether the route's agent is ready (/readyz).\n");
    out.push_str("# TYPE a2a_gateway_route_ready gauge\n");
    for (route, ready) in routes {
        let _ = writeln!(
            out,
            "a2a_gateway_route_ready{{route=\"{route}\"}} {}",
            u8::from(*ready)
        );
    }
}

/// The card answers of each route serving a card, `(route name, (served from a kept
/// render, rendered anew, renders kept))`: only vouched origins are kept, so the kept
/// count stays within the configuration however many hosts clients name.
pub(crate) fn render_card_renders(out: &mut String, routes: &[(&str, (u64, u64, usize))]) {
    if routes.is_empty() {
        return;
    }
    out.push_str("# HELP a2a_gateway_card_answers_total Agent card answers by whether a kept render served them.\n");
    out.push_str("# TYPE a2a_gateway_card_answers_total counter\n");
    for (route, (hits, misses, _)) in routes {
        for (render, n) in [("kept", hits), ("new", misses)] {
            let _ = writeln!(
                out,
                "a2a_gateway_card_answers_total{{route=\"{route}\",render=\"{render}\"}} {n}"
            );
        }
    }
    out.push_str("# HELP a2a_gateway_card_renders_kept Rendered agent cards kept for reuse.\n");
    out.push_str("# TYPE a2a_gateway_card_renders_kept gauge\n");
    for (route, (_, _, kept)) in routes {
        let _ = writeln!(
            out,
            "a2a_gateway_card_renders_kept{{route=\"{route}\"}} {kept}"
        );
    }
}

/// The failed card refreshes of each route serving a card, `(route name, failures)`.
pub fn render_card_refresh_failures(out: &mut String, routes: &[(&str, u64)]) {
    if routes.is_empty() {
        return;
    }
    out.push_str("# HELP a2a_gateway_card_refresh_failures_total Agent card refreshes that failed (source unreachable or card invalid); the last good card stays.\n");
    out.push_str("# TYPE a2a_gateway_card_refresh_failures_total counter\n");
    for (route, failures) in routes {
        let _ = writeln!(
            out,
            "a2a_gateway_card_refresh_failures_total{{route=\"{route}\"}} {failures}"
        );
    }
}

/// The endpoint metrics of balanced routes, each `(route name, its endpoints)`, and the
/// backend latency of one-backend routes, `(route name, endpoint, counts)`, in the text
/// exposition format. Written at scrape time from the endpoints' own counters.
fn render_endpoints(
    out: &mut String,
    routes: &[(&str, Vec<EndpointStats>)],
    single: &[(&str, &str, BackendLatencyCounts)],
) {
    render_backend_latency(out, routes, single);
    if routes.is_empty() {
        return;
    }
    out.push_str("# HELP a2a_gateway_route_endpoints Endpoints of a balanced route by state.\n");
    out.push_str("# TYPE a2a_gateway_route_endpoints gauge\n");
    for (route, endpoints) in routes {
        let ejected = endpoints.iter().filter(|e| e.ejected).count();
        let healthy = endpoints.len() - ejected;
        for (state, n) in [("healthy", healthy), ("ejected", ejected)] {
            let _ = writeln!(
                out,
                "a2a_gateway_route_endpoints{{route=\"{route}\",state=\"{state}\"}} {n}"
            );
        }
    }
    out.push_str("# HELP a2a_gateway_endpoint_calls_total Backend calls started per endpoint.\n");
    out.push_str("# TYPE a2a_gateway_endpoint_calls_total counter\n");
    for (route, endpoints) in routes {
        for e in endpoints {
            let _ = writeln!(
                out,
                "a2a_gateway_endpoint_calls_total{{route=\"{route}\",endpoint=\"{}\"}} {}",
                e.endpoint, e.calls
            );
        }
    }
    out.push_str("# HELP a2a_gateway_endpoint_ejections_total Outlier ejections per endpoint.\n");
    out.push_str("# TYPE a2a_gateway_endpoint_ejections_total counter\n");
    for (route, endpoints) in routes {
        for e in endpoints {
            let _ = writeln!(
                out,
                "a2a_gateway_endpoint_ejections_total{{route=\"{route}\",endpoint=\"{}\"}} {}",
                e.endpoint, e.ejections
            );
        }
    }
}

/// Backend call latency by route and endpoint: each endpoint of balanced routes, and the
/// one backend of the others.
fn render_backend_latency(
    out: &mut String,
    routes: &[(&str, Vec<EndpointStats>)],
    single: &[(&str, &str, BackendLatencyCounts)],
) {
    if routes.is_empty() && single.is_empty() {
        return;
    }
    let name = "a2a_gateway_backend_call_duration_seconds";
    out.push_str("# HELP a2a_gateway_backend_call_duration_seconds Backend calls per endpoint, to the answer (streams: to their start).\n");
    out.push_str("# TYPE a2a_gateway_backend_call_duration_seconds histogram\n");
    let balanced = routes.iter().flat_map(|(route, endpoints)| {
        endpoints
            .iter()
            .map(move |e| (*route, &*e.endpoint, &e.latency))
    });
    let single = single
        .iter()
        .map(|(route, endpoint, counts)| (*route, *endpoint, counts));
    for (route, endpoint, counts) in balanced.chain(single) {
        let labels = format!("route=\"{route}\",endpoint=\"{endpoint}\"");
        counts.render(&CALL_BUCKETS, out, name, &labels);
    }
}

/// One configured limit as `/metrics` shows it (`front::limits`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LimitRow<'a> {
    /// The route it belongs to; `None`: it applies across all routes.
    pub(crate) route: Option<&'a str>,
    /// The setting's name, e.g. `max-concurrent-calls`.
    pub(crate) limit: &'static str,
    pub(crate) value: f64,
    /// How much of a concurrency limit is taken now.
    pub(crate) in_use: Option<u64>,
}

/// Calls a limit refused on one route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RejectionRow<'a> {
    pub(crate) route: &'a str,
    pub(crate) limit: &'static str,
    pub(crate) count: u64,
}

/// The configured limits, their use and their rejections, in the text exposition format.
pub(crate) fn render_limits(out: &mut String, limits: &[LimitRow], rejections: &[RejectionRow]) {
    let labels = |row: &LimitRow| match row.route {
        Some(route) => format!("route=\"{route}\",limit=\"{}\"", row.limit),
        None => format!("limit=\"{}\"", row.limit),
    };
    out.push_str("# HELP a2a_gateway_limit Configured limits (concurrent calls or streams, calls per second, burst, bytes, seconds).\n");
    out.push_str("# TYPE a2a_gateway_limit gauge\n");
    for row in limits {
        let _ = writeln!(out, "a2a_gateway_limit{{{}}} {}", labels(row), row.value);
    }
    out.push_str(
        "# HELP a2a_gateway_limit_in_use Calls or streams holding a concurrency limit now.\n",
    );
    out.push_str("# TYPE a2a_gateway_limit_in_use gauge\n");
    for row in limits {
        if let Some(n) = row.in_use {
            let _ = writeln!(out, "a2a_gateway_limit_in_use{{{}}} {n}", labels(row));
        }
    }
    out.push_str("# HELP a2a_gateway_limit_rejections_total Requests refused by a limit, by route and limit.\n");
    out.push_str("# TYPE a2a_gateway_limit_rejections_total counter\n");
    for r in rejections {
        let _ = writeln!(
            out,
            "a2a_gateway_limit_rejections_total{{route=\"{}\",limit=\"{}\"}} {}",
            r.route, r.limit, r.count
        );
    }
}

/// The `allow` rules' decisions of each route with rules, `(route name, (allowed, denied))`;
/// never a principal's name as a label.
pub(crate) fn render_authz(out: &mut String, routes: &[(&str, (u64, u64))]) {
    if routes.is_empty() {
        return;
    }
    out.push_str(
        "# HELP a2a_gateway_authz_total Calls the route's allow rules allowed or denied.\n",
    );
    out.push_str("# TYPE a2a_gateway_authz_total counter\n");
    for (route, (allowed, denied)) in routes {
        for (result, count) in [("allowed", allowed), ("denied", denied)] {
            let _ = writeln!(
                out,
                "a2a_gateway_authz_total{{route=\"{route}\",result=\"{result}\"}} {count}"
            );
        }
    }
}

/// Counts an open stream of a route until dropped, the SSE events sent on it, and how
/// long it lasted.
pub struct StreamGuard {
    route: Arc<RouteMetrics>,
    opened: Instant,
}

impl StreamGuard {
    /// SSE events written to this stream.
    pub fn events(&self, n: u64) {
        self.route.events(n);
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.route.streams_open.fetch_sub(1, Relaxed);
        let lasted = self.opened.elapsed();
        self.route
            .calls()
            .stream_duration
            .observe(&STREAM_BUCKETS, lasted);
    }
}

/// Times one request of a known operation and records how it ended; one dropped before
/// (the client left while the call ran, and its future with it) records `ClientClosed`.
pub struct Meter<'a> {
    metrics: &'a RouteMetrics,
    op: Op,
    started: Instant,
    /// The v0.3 method of a v0.3 call.
    v03: Option<Method>,
    recorded: bool,
}

impl<'a> Meter<'a> {
    pub(crate) fn start(metrics: &'a RouteMetrics, op: Op, started: Instant) -> Self {
        Self {
            metrics,
            op,
            started,
            v03: None,
            recorded: false,
        }
    }

    /// Also counts the call as a v0.3 call of `method` (`None`: a v1.0 call).
    pub(crate) fn in_v03(mut self, method: Option<Method>) -> Self {
        self.v03 = method;
        self
    }

    /// The call is not counted (a JSON-RPC notification: nothing answered it).
    pub(crate) fn uncounted(mut self) {
        self.recorded = true;
    }

    pub(crate) fn record(&mut self, outcome: Outcome) {
        self.recorded = true;
        self.metrics
            .request(self.op, outcome, self.started.elapsed());
        if let Some(method) = self.v03 {
            self.metrics.v03_request(method, outcome);
        }
    }
}

impl Drop for Meter<'_> {
    fn drop(&mut self) {
        // A panic is recorded by `front::layers` as the internal error it answers.
        if !self.recorded && !std::thread::panicking() {
            self.record(Outcome::ClientClosed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_what_was_recorded_by_route() {
        let m = Metrics::default();
        let r = m.route("billing");
        assert!(Arc::ptr_eq(&r, &m.route("billing")), "one entry per name");
        let idle = m.route("idle");
        r.request(Op::GetTask, Outcome::Ok, Duration::from_micros(300));
        r.request(
            Op::GetTask,
            Outcome::Error(ErrorKind::TaskNotFound),
            Duration::from_millis(2),
        );
        r.rejected(ErrorKind::ParseError);
        r.v03_request(Method::TasksGet, Outcome::Error(ErrorKind::TaskNotFound));
        r.v03_request(
            Method::MessageSend,
            Outcome::Error(ErrorKind::VersionNotSupported),
        );
        let guard = r.stream_opened();
        guard.events(3);
        let text = m.render();
        for line in [
            "a2a_gateway_requests_total{route=\"billing\",method=\"GetTask\",code=\"0\"} 1\n",
            "a2a_gateway_requests_total{route=\"billing\",method=\"GetTask\",code=\"-32001\"} 1\n",
            "a2a_gateway_requests_total{route=\"billing\",method=\"\",code=\"-32700\"} 1\n",
            "a2a_gateway_request_duration_seconds_bucket{route=\"billing\",method=\"GetTask\",le=\"0.0005\"} 1\n",
            "a2a_gateway_request_duration_seconds_bucket{route=\"billing\",method=\"GetTask\",le=\"0.0025\"} 2\n",
            "a2a_gateway_request_duration_seconds_count{route=\"billing\",method=\"GetTask\"} 2\n",
            "a2a_gateway_streams_open{route=\"billing\"} 1\n",
            "a2a_gateway_streams_open{route=\"idle\"} 0\n",
            "a2a_gateway_legacy_requests_total{route=\"billing\",version=\"0.3\",method=\"tasks/get\",code=\"-32001\"} 1\n",
            // v0.3 has no -32009: the client got -32603, and the metric says so.
            "a2a_gateway_legacy_requests_total{route=\"billing\",version=\"0.3\",method=\"message/send\",code=\"-32603\"} 1\n",
            "a2a_gateway_stream_frames_total{route=\"billing\"} 3\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(
            !text.contains("SendMessage"),
            "untouched methods are not listed"
        );
        assert!(
            !text.contains("_total{route=\"idle\",method"),
            "a route never called has no request series"
        );
        assert!(idle.calls.get().is_none(), "nor call counters");
        drop(guard);
        let text = m.render();
        assert!(text.contains("a2a_gateway_streams_open{route=\"billing\"} 0\n"));
        assert!(text.contains(
            "a2a_gateway_stream_duration_seconds_bucket{route=\"billing\",le=\"1\"} 1\n"
        ));
        assert!(text.contains("a2a_gateway_stream_duration_seconds_count{route=\"billing\"} 1\n"));
    }

    #[test]
    fn call_buckets_reach_past_the_default_deadline() {
        let m = Metrics::default();
        let r = m.route("slow");
        let deadline = Duration::from_secs(30);
        r.request(Op::SendMessage, Outcome::Ok, deadline);
        r.request(Op::SendMessage, Outcome::Ok, Duration::from_secs(299));
        let text = m.render();
        for line in [
            "a2a_gateway_request_duration_seconds_bucket{route=\"slow\",method=\"SendMessage\",le=\"10\"} 0\n",
            "a2a_gateway_request_duration_seconds_bucket{route=\"slow\",method=\"SendMessage\",le=\"30\"} 1\n",
            "a2a_gateway_request_duration_seconds_bucket{route=\"slow\",method=\"SendMessage\",le=\"300\"} 2\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn renders_process_figures_at_scrape_time() {
        let m = Metrics::default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        m.count_tasks_of(runtime.handle().clone());
        let _task = runtime.spawn(std::future::pending::<()>());
        let text = m.render();
        assert!(text.contains("a2a_gateway_tasks_alive 1\n"), "{text}");
        let build = format!(
            "a2a_gateway_build_info{{version=\"{}\",commit=\"",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{text}");
        let value = |name: &str| -> u64 {
            let line = text.lines().find(|l| l.starts_with(name)).unwrap();
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes ") > 1 << 20);
        // stdin, stdout and stderr at least.
        assert!(value("process_open_fds ") >= 3);
    }

    #[test]
    fn renders_endpoints() {
        let took = BackendLatency::default();
        took.observe(Duration::from_millis(40));
        let stats = |endpoint: &str, ejected, calls| EndpointStats {
            endpoint: endpoint.into(),
            ejected,
            calls,
            ejections: u64::from(ejected),
            latency: match ejected {
                false => took.counts(),
                true => BackendLatencyCounts::default(),
            },
        };
        let mut text = String::new();
        let routes = [(
            "billing",
            vec![
                stats("10.0.0.1:50051", false, 7),
                stats("10.0.0.2:50051", true, 2),
            ],
        )];
        render_endpoints(&mut text, &routes, &[]);
        for line in [
            "a2a_gateway_route_endpoints{route=\"billing\",state=\"healthy\"} 1\n",
            "a2a_gateway_route_endpoints{route=\"billing\",state=\"ejected\"} 1\n",
            "a2a_gateway_endpoint_calls_total{route=\"billing\",endpoint=\"10.0.0.1:50051\"} 7\n",
            "a2a_gateway_endpoint_ejections_total{route=\"billing\",endpoint=\"10.0.0.2:50051\"} 1\n",
            "a2a_gateway_backend_call_duration_seconds_bucket{route=\"billing\",endpoint=\"10.0.0.1:50051\",le=\"0.025\"} 0\n",
            "a2a_gateway_backend_call_duration_seconds_bucket{route=\"billing\",endpoint=\"10.0.0.1:50051\",le=\"0.05\"} 1\n",
            "a2a_gateway_backend_call_duration_seconds_count{route=\"billing\",endpoint=\"10.0.0.1:50051\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(
            !text.contains("duration_seconds_count{route=\"billing\",endpoint=\"10.0.0.2:50051\""),
            "an endpoint never called has no latency series"
        );
        let mut none = String::new();
        render_endpoints(&mut none, &[], &[]);
        assert!(none.is_empty());
    }
}

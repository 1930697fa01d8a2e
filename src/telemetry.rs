//! Prometheus metrics: JSON-RPC requests by method and outcome (the error table's JSON-RPC
//! code, `0` for success), latency histograms per method, open SSE streams and SSE events sent
//! (exposed as `a2a_gateway_stream_frames_total`, a name kept as the external contract), and
//! the endpoints of balanced routes (`render_endpoints`: per route healthy and ejected
//! counts, per endpoint calls and ejections).
//!
//! Recording is a few relaxed atomic additions into fixed arrays indexed by the operation
//! and error tables, so the request path takes no lock and allocates nothing; the text
//! exposition format is written only when `/metrics` is scraped.
//!
//! Traces (`trace`) and the access log (`access`) are submodules; `untrusted` bounds and
//! escapes the peer-chosen strings both write.

pub mod access;
pub mod trace;
pub mod untrusted;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::protocol::error::ErrorKind;
use crate::protocol::legacy::{self, Method};
use crate::protocol::ops::Op;

/// The peer address of a request's connection: a fact of the connection, put in each
/// request's extensions by the server, read by the access log and the spans.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientAddr(pub std::net::SocketAddr);

const OPS: usize = Op::ALL.len();
/// One slot per error-table row, plus success.
const OUTCOMES: usize = ErrorKind::ALL.len() + 1;
/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];

/// How one JSON-RPC request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Error(ErrorKind),
}

impl Outcome {
    fn index(self) -> usize {
        match self {
            Outcome::Ok => 0,
            Outcome::Error(kind) => kind as usize + 1,
        }
    }

    fn code(index: usize) -> i32 {
        if index == 0 {
            0
        } else {
            ErrorKind::ALL[index - 1].code()
        }
    }
}

#[derive(Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micros
            .fetch_add(elapsed.as_micros().min(u64::MAX as u128) as u64, Relaxed);
    }
}

/// The gateway's metrics, shared by all requests.
pub struct Metrics {
    requests: [[AtomicU64; OUTCOMES]; OPS],
    /// Requests rejected before a method was known (parse errors, bad envelopes).
    rejected: [AtomicU64; OUTCOMES],
    latency: [Histogram; OPS],
    streams_open: AtomicI64,
    stream_events: AtomicU64,
    /// The serving runtimes, whose alive tasks `/metrics` counts.
    runtimes: std::sync::Mutex<Vec<tokio::runtime::Handle>>,
    /// v0.3 calls by v0.3 method and outcome (they also count under their operation).
    v03: [[AtomicU64; OUTCOMES]; Method::ALL.len()],
    /// Identity header values not sent to the agent (`auth::forward`: unsendable values).
    caller_headers_dropped: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            rejected: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: std::array::from_fn(|_| Histogram::default()),
            streams_open: AtomicI64::new(0),
            stream_events: AtomicU64::new(0),
            runtimes: std::sync::Mutex::default(),
            v03: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            caller_headers_dropped: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// A finished request of `op` (for streams: until the first event or error).
    pub(crate) fn request(&self, op: Op, outcome: Outcome, elapsed: Duration) {
        self.requests[op as usize][outcome.index()].fetch_add(1, Relaxed);
        self.latency[op as usize].observe(elapsed);
    }

    /// A finished v0.3 call of `method`.
    pub(crate) fn v03_request(&self, method: Method, outcome: Outcome) {
        self.v03[method as usize][outcome.index()].fetch_add(1, Relaxed);
    }

    /// A request refused before its method was known.
    pub(crate) fn rejected(&self, kind: ErrorKind) {
        self.rejected[Outcome::Error(kind).index()].fetch_add(1, Relaxed);
    }

    /// An SSE stream opened; the guard counts it closed when dropped.
    pub(crate) fn stream_opened(self: &Arc<Self>) -> StreamGuard {
        self.streams_open.fetch_add(1, Relaxed);
        StreamGuard(self.clone())
    }

    /// Identity header values dropped as unsendable (none: nothing is touched).
    pub(crate) fn caller_headers_dropped(&self, n: usize) {
        if n > 0 {
            self.caller_headers_dropped.fetch_add(n as u64, Relaxed);
        }
    }

    /// SSE events written to streams.
    pub(crate) fn events(&self, n: u64) {
        self.stream_events.fetch_add(n, Relaxed);
    }

    /// A serving runtime (one per worker thread), whose tasks `/metrics` counts.
    pub(crate) fn count_tasks_of(&self, runtime: tokio::runtime::Handle) {
        if let Ok(mut runtimes) = self.runtimes.lock() {
            runtimes.push(runtime);
        }
    }

    /// The Prometheus text exposition (version 0.0.4).
    pub(crate) fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP a2a_gateway_requests_total JSON-RPC requests by method and JSON-RPC code (0 = success).\n");
        out.push_str("# TYPE a2a_gateway_requests_total counter\n");
        for (op, row) in Op::ALL.iter().zip(&self.requests) {
            for (i, counter) in row.iter().enumerate() {
                let n = counter.load(Relaxed);
                if n > 0 {
                    let code = Outcome::code(i);
                    let _ = writeln!(
                        out,
                        "a2a_gateway_requests_total{{method=\"{}\",code=\"{code}\"}} {n}",
                        op.name()
                    );
                }
            }
        }
        for (i, counter) in self.rejected.iter().enumerate() {
            let n = counter.load(Relaxed);
            if n > 0 {
                let code = Outcome::code(i);
                let _ = writeln!(
                    out,
                    "a2a_gateway_requests_total{{method=\"\",code=\"{code}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP a2a_gateway_request_duration_seconds Time to the reply (streams: to the first event).\n");
        out.push_str("# TYPE a2a_gateway_request_duration_seconds histogram\n");
        for (op, histogram) in Op::ALL.iter().zip(&self.latency) {
            let count = histogram.count.load(Relaxed);
            if count == 0 {
                continue;
            }
            let mut cumulative = 0;
            for (bound, bucket) in BUCKETS.iter().zip(&histogram.buckets) {
                cumulative += bucket.load(Relaxed);
                let _ = writeln!(out, "a2a_gateway_request_duration_seconds_bucket{{method=\"{}\",le=\"{bound}\"}} {cumulative}", op.name());
            }
            let name = op.name();
            let sum = histogram.sum_micros.load(Relaxed) as f64 / 1e6;
            let _ = writeln!(out, "a2a_gateway_request_duration_seconds_bucket{{method=\"{name}\",le=\"+Inf\"}} {count}");
            let _ = writeln!(
                out,
                "a2a_gateway_request_duration_seconds_sum{{method=\"{name}\"}} {sum}"
            );
            let _ = writeln!(
                out,
                "a2a_gateway_request_duration_seconds_count{{method=\"{name}\"}} {count}"
            );
        }
        self.render_v03(&mut out);
        out.push_str("# HELP a2a_gateway_streams_open SSE streams currently open.\n");
        out.push_str("# TYPE a2a_gateway_streams_open gauge\n");
        let _ = writeln!(
            out,
            "a2a_gateway_streams_open {}",
            self.streams_open.load(Relaxed)
        );
        out.push_str(
            "# HELP a2a_gateway_stream_frames_total Data and error events sent on SSE streams.\n",
        );
        out.push_str("# TYPE a2a_gateway_stream_frames_total counter\n");
        let _ = writeln!(
            out,
            "a2a_gateway_stream_frames_total {}",
            self.stream_events.load(Relaxed)
        );
        out.push_str("# HELP a2a_gateway_log_lines_dropped_total Log lines (an event, or a piece of access lines) dropped because stderr did not take them.\n");
        out.push_str("# TYPE a2a_gateway_log_lines_dropped_total counter\n");
        let dropped = access::sink::dropped();
        let _ = writeln!(out, "a2a_gateway_log_lines_dropped_total {dropped}");
        out.push_str("# HELP a2a_gateway_caller_headers_dropped_total Values of [auth.forward] headers not sent to the agent: not printable ASCII, too long, or a claim with no text form.\n");
        out.push_str("# TYPE a2a_gateway_caller_headers_dropped_total counter\n");
        let dropped = self.caller_headers_dropped.load(Relaxed);
        let _ = writeln!(out, "a2a_gateway_caller_headers_dropped_total {dropped}");
        self.render_process(&mut out);
        out
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

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl Metrics {
    /// v0.3 calls by protocol version, v0.3 method and the v0.3 code the client got, so
    /// operators can watch v0.3 traffic drain.
    fn render_v03(&self, out: &mut String) {
        out.push_str("# HELP a2a_gateway_legacy_requests_total Calls of older protocol versions by version, method and JSON-RPC code (0 = success).\n");
        out.push_str("# TYPE a2a_gateway_legacy_requests_total counter\n");
        for (method, row) in Method::ALL.iter().zip(&self.v03) {
            for (i, counter) in row.iter().enumerate() {
                let n = counter.load(Relaxed);
                if n > 0 {
                    let code = match i {
                        0 => 0,
                        _ => legacy::v03_kind(ErrorKind::ALL[i - 1]).code(),
                    };
                    let _ = writeln!(
                        out,
                        "a2a_gateway_legacy_requests_total{{version=\"0.3\",method=\"{}\",code=\"{code}\"}} {n}",
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
    pub(crate) calls: u64,
    pub(crate) ejections: u64,
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

/// The endpoint metrics of balanced routes, each `(route name, its endpoints)`, in the
/// text exposition format. Written at scrape time from the endpoints' own counters.
pub(crate) fn render_endpoints(out: &mut String, routes: &[(&str, Vec<EndpointStats>)]) {
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

/// Counts an open stream until dropped, and the SSE events sent on it.
pub(crate) struct StreamGuard(Arc<Metrics>);

impl StreamGuard {
    /// SSE events written to this stream.
    pub(crate) fn events(&self, n: u64) {
        self.0.events(n);
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.streams_open.fetch_sub(1, Relaxed);
    }
}

/// Times one request of a known operation and records how it ended.
pub(crate) struct Meter<'a> {
    metrics: &'a Metrics,
    op: Op,
    started: Instant,
    /// The v0.3 method of a v0.3 call.
    v03: Option<Method>,
}

impl<'a> Meter<'a> {
    pub(crate) fn start(metrics: &'a Metrics, op: Op, started: Instant) -> Self {
        Self {
            metrics,
            op,
            started,
            v03: None,
        }
    }

    /// Also counts the call as a v0.3 call of `method` (`None`: a v1.0 call).
    pub(crate) fn in_v03(mut self, method: Option<Method>) -> Self {
        self.v03 = method;
        self
    }

    pub(crate) fn record(&self, outcome: Outcome) {
        self.metrics
            .request(self.op, outcome, self.started.elapsed());
        if let Some(method) = self.v03 {
            self.metrics.v03_request(method, outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_what_was_recorded() {
        let m = Arc::new(Metrics::default());
        m.request(Op::GetTask, Outcome::Ok, Duration::from_micros(300));
        m.request(
            Op::GetTask,
            Outcome::Error(ErrorKind::TaskNotFound),
            Duration::from_millis(2),
        );
        m.rejected(ErrorKind::ParseError);
        m.v03_request(Method::TasksGet, Outcome::Error(ErrorKind::TaskNotFound));
        m.v03_request(
            Method::MessageSend,
            Outcome::Error(ErrorKind::VersionNotSupported),
        );
        let guard = m.stream_opened();
        guard.events(3);
        let text = m.render();
        assert!(
            text.contains("a2a_gateway_requests_total{method=\"GetTask\",code=\"0\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("a2a_gateway_requests_total{method=\"GetTask\",code=\"-32001\"} 1\n"));
        assert!(text.contains("a2a_gateway_requests_total{method=\"\",code=\"-32700\"} 1\n"));
        assert!(text.contains(
            "a2a_gateway_request_duration_seconds_bucket{method=\"GetTask\",le=\"0.0005\"} 1\n"
        ));
        assert!(text.contains(
            "a2a_gateway_request_duration_seconds_bucket{method=\"GetTask\",le=\"0.0025\"} 2\n"
        ));
        assert!(text.contains("a2a_gateway_request_duration_seconds_count{method=\"GetTask\"} 2\n"));
        assert!(text.contains("a2a_gateway_streams_open 1\n"));
        assert!(text.contains(
            "a2a_gateway_legacy_requests_total{version=\"0.3\",method=\"tasks/get\",code=\"-32001\"} 1\n"
        ));
        // v0.3 has no -32009: the client got -32603, and the metric says so.
        assert!(text.contains(
            "a2a_gateway_legacy_requests_total{version=\"0.3\",method=\"message/send\",code=\"-32603\"} 1\n"
        ));
        assert!(text.contains("a2a_gateway_stream_frames_total 3\n"));
        assert!(
            !text.contains("SendMessage"),
            "untouched methods are not listed"
        );
        drop(guard);
        assert!(m.render().contains("a2a_gateway_streams_open 0\n"));
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
        let stats = |endpoint: &str, ejected, calls| EndpointStats {
            endpoint: endpoint.into(),
            ejected,
            calls,
            ejections: u64::from(ejected),
        };
        let mut text = String::new();
        let routes = [(
            "billing",
            vec![
                stats("10.0.0.1:50051", false, 7),
                stats("10.0.0.2:50051", true, 2),
            ],
        )];
        render_endpoints(&mut text, &routes);
        for line in [
            "a2a_gateway_route_endpoints{route=\"billing\",state=\"healthy\"} 1\n",
            "a2a_gateway_route_endpoints{route=\"billing\",state=\"ejected\"} 1\n",
            "a2a_gateway_endpoint_calls_total{route=\"billing\",endpoint=\"10.0.0.1:50051\"} 7\n",
            "a2a_gateway_endpoint_ejections_total{route=\"billing\",endpoint=\"10.0.0.2:50051\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        let mut none = String::new();
        render_endpoints(&mut none, &[]);
        assert!(none.is_empty());
    }
}

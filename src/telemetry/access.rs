//! One call as the access log and the traces see it. The front keeps a `CallRecord` per
//! JSON-RPC call (its server span and, when the access log is on, its line), finished when
//! the reply is written or, for a stream, when the stream's body is dropped. The backend's
//! status comes with its answer (`backend::Answer`, `backend::Error::status`), and the
//! front records it here (`backend_status`).
//!
//! The line has the shape of an INFO event of target `a2a_gateway::access`, written by
//! `sink` off the request path (on a serving thread, once it goes idle after the replies:
//! `defer_lines`; the log filter still decides whether there is one), with
//! fixed fields: route (the
//! configured name of the route that served the call, as the metrics' `route` label), path
//! (the request path), method, JSON-RPC id, result code (0: success), backend status (gRPC
//! status code or HTTP status, `-` when the backend was not reached), duration, bytes in and
//! out, SSE frames, client address, request id, principal and its scheme (`auth`), and trace
//! id; a post to the push relay's callback (`push/relay/callback.rs`) adds its HTTP
//! `status` and, when refused, why (`refused`). A call its client left before it was
//! answered (a body cut short, a connection closed or a stream reset while the call ran, a
//! stream abandoned) is logged with `code` `CLIENT_CLOSED` when the gateway saw it go, with
//! what was received and sent until then. No header value and no param
//! other than the id is ever logged, so credentials cannot appear in it; the path, the ids,
//! the request id and the principal are bounded and escaped (`untrusted::clip`).
//! `--access-log false` turns the target off in the log filter; then `CallRecord::start`
//! sees it disabled and keeps nothing.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderName, HeaderValue};
use opentelemetry::trace::TraceId;

pub mod sink;

use super::trace::{self, ServerSpan, TraceContext};
use super::untrusted::ClippedField;
use super::ConnectionAddrs;
use crate::proto::StreamResponse;
use crate::protocol::binding::Binding;
use crate::protocol::error::{A2aError, ErrorKind, Profile};
use crate::protocol::ops::{Op, Reply, Request};
use sink::field_name;

/// The target of access log lines (`RUST_LOG=a2a_gateway::access=off` silences them too).
pub const TARGET: &str = "a2a_gateway::access";

/// The `code` of a call its client left before it was answered: nginx's "client closed
/// request", which no JSON-RPC code (0 or negative) can be.
pub const CLIENT_CLOSED: i32 = 499;

/// The header of the client's (or the edge's generated) request id.
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The most lines a thread keeps for its next calls (`SPARE_LINES`).
const SPARE_LINES_MAX: usize = 64;

/// Finished lines a serving thread holds at most before it writes them (`DEFERRED`).
const DEFERRED_MAX: usize = 16;

/// How long a finished line waits at most for its thread to go idle, as long as calls keep
/// ending on that thread (the writer thread's own period, `sink`).
const DEFERRED_FOR: Duration = Duration::from_millis(100);

thread_local! {
    /// Boxes of finished calls' lines, taken by the next calls on this thread: once a
    /// thread has served its first calls, a call's line costs no allocation.
    #[expect(clippy::vec_box, reason = "a call holds the box itself, not a copy of the line")]
    static SPARE_LINES: RefCell<Vec<Box<Line>>> = const { RefCell::new(Vec::new()) };
    /// On a serving thread (`defer_lines`), the lines of calls that ended since it last
    /// went idle, in the order they ended: written (`write_deferred`) when its runtime is
    /// about to park, after the replies went out, or sooner once `DEFERRED_MAX` have
    /// gathered or the oldest waited `DEFERRED_FOR`. `None`: each line is written when its
    /// call ends.
    static DEFERRED: RefCell<Option<Deferred>> = const { RefCell::new(None) };
}

/// A serving thread's finished lines not yet written; whatever is left when it is dropped
/// (the thread ends, even by a panic) is written then.
struct Deferred(
    #[expect(clippy::vec_box, reason = "the boxes go back to SPARE_LINES")] Vec<Box<Line>>,
);

impl Deferred {
    /// Writes the lines, with one lock of the log's buffer, and keeps their boxes.
    fn write(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let lines = &self.0;
        sink::append(lines.len(), |out, format| {
            for line in lines {
                line.write(out, format);
            }
        });
        for line in self.0.drain(..) {
            spare(line);
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        self.write();
    }
}

/// From now on, this thread's lines wait until `write_deferred` (its runtime's park hook):
/// formatting a line then costs a call no latency.
pub(crate) fn defer_lines() {
    let _ = DEFERRED.try_with(|deferred| {
        deferred
            .borrow_mut()
            .get_or_insert_with(|| Deferred(Vec::with_capacity(DEFERRED_MAX)));
    });
}

/// Writes the lines this thread deferred.
pub(crate) fn write_deferred() {
    let _ = DEFERRED.try_with(|deferred| deferred.borrow_mut().as_mut().map(Deferred::write));
}

/// Writes what this thread deferred, and its lines from now on as their calls end (a
/// serving thread whose runtime is gone).
pub(crate) fn stop_deferring() {
    // Dropped after the borrow ends: written then.
    let deferred = DEFERRED.try_with(|deferred| deferred.borrow_mut().take());
    drop(deferred);
}

/// `line`, finished, to this thread's deferred lines, or written now when it does not
/// defer them.
fn finished(line: Box<Line>) {
    // Outside the closure: on a thread whose locals are gone the line is still written.
    let mut line = Some(line);
    let due = DEFERRED.try_with(|deferred| {
        let mut deferred = deferred.borrow_mut();
        let lines = &mut deferred.as_mut()?.0;
        lines.extend(line.take());
        // The newest line ended just now: no clock is read again.
        let waited = match (lines.first(), lines.last()) {
            (Some(oldest), Some(newest)) => newest.ended.saturating_duration_since(oldest.ended),
            _ => Duration::ZERO,
        };
        Some(lines.len() >= DEFERRED_MAX || waited >= DEFERRED_FOR)
    });
    match (line, due) {
        (Some(line), _) => {
            sink::append(1, |out, format| line.write(out, format));
            spare(line);
        }
        (None, Ok(Some(true))) => write_deferred(),
        (None, _) => {}
    }
}

/// The access log line of a call, filled in as it goes (kept only when the log is on).
struct Line {
    started: Instant,
    route: ClippedField,
    path: ClippedField,
    id: Option<ClippedField>,
    method: &'static str,
    bytes_in: usize,
    bytes_out: usize,
    frames: u64,
    backend: Option<u16>,
    client: Option<SocketAddr>,
    request_id: Option<ClippedField>,
    /// The client's trace id, when traces are off (with traces, the span's).
    traceparent: Option<ClippedField>,
    /// The caller's name (empty: anonymous) and scheme, once authenticated.
    principal: Option<ClippedField>,
    scheme: &'static str,
    /// A callback post's answer, and why it was refused (other lines have neither).
    status: Option<u16>,
    refused: Option<&'static str>,
    /// Set when the call ends (`finish`): its result code, the server span's trace id
    /// (traces on), when it ended, on both clocks.
    code: i32,
    span_trace: Option<TraceId>,
    ended: Instant,
    ended_at: SystemTime,
}

impl Line {
    fn new() -> Line {
        Line {
            started: Instant::now(),
            route: ClippedField::of(""),
            path: ClippedField::of(""),
            id: None,
            method: "",
            bytes_in: 0,
            bytes_out: 0,
            frames: 0,
            backend: None,
            client: None,
            request_id: None,
            traceparent: None,
            principal: None,
            scheme: "-",
            status: None,
            refused: None,
            code: 0,
            span_trace: None,
            ended: Instant::now(),
            ended_at: SystemTime::UNIX_EPOCH,
        }
    }

    /// The call ended now with `code`.
    fn finish(&mut self, code: i32, span_trace: Option<TraceId>) {
        (self.code, self.span_trace) = (code, span_trace);
        self.ended = Instant::now();
        self.ended_at = SystemTime::now();
    }

    /// Starts the line of a new call, in place (a reused box keeps its old bytes, which
    /// are overwritten, not cleared).
    fn fill(
        &mut self,
        route: &str,
        request: &http::request::Parts,
        bytes_in: usize,
        id: Option<&str>,
    ) {
        self.started = Instant::now();
        self.route.set(route);
        self.path.set(request.uri.path());
        set(&mut self.id, id);
        self.method = "";
        (self.bytes_in, self.bytes_out, self.frames) = (bytes_in, 0, 0);
        self.backend = None;
        self.client = request
            .extensions
            .get::<ConnectionAddrs>()
            .map(|c| c.client);
        let request_id = request.headers.get(X_REQUEST_ID);
        set(
            &mut self.request_id,
            request_id.and_then(|v| v.to_str().ok()),
        );
        let traceparent = trace::traceparent_trace_id(&request.headers);
        set(&mut self.traceparent, traceparent);
        self.principal = None;
        self.scheme = "-";
        (self.status, self.refused) = (None, None);
    }
}

/// One call being handled: its server span and access log line. Both boxed, so a call
/// with neither costs the handler's future three words.
pub(crate) struct CallRecord {
    line: Option<Box<Line>>,
    span: Option<Box<ServerSpan>>,
    failure: Option<ErrorKind>,
    /// Whether the call was answered (as `failure` says); a record dropped before is of a
    /// call its client left (`CLIENT_CLOSED`).
    answered: bool,
}

impl CallRecord {
    /// A call of `bytes_in` bytes (the whole body, or the batch element) with JSON-RPC
    /// `id`, on `request`.
    pub(crate) fn start(
        route: &str,
        request: &http::request::Parts,
        bytes_in: usize,
        id: Option<&str>,
    ) -> Self {
        let on = sink::installed() && tracing::enabled!(target: TARGET, tracing::Level::INFO);
        let line = on.then(|| {
            let spare = SPARE_LINES.try_with(|spare| spare.borrow_mut().pop());
            let mut line = spare
                .ok()
                .flatten()
                .unwrap_or_else(|| Box::new(Line::new()));
            line.fill(route, request, bytes_in, id);
            line
        });
        CallRecord {
            line,
            span: None,
            failure: None,
            answered: false,
        }
    }

    /// The call's JSON-RPC id, once its envelope is read.
    pub(crate) fn id(&mut self, id: Option<&str>) {
        if let Some(line) = &mut self.line {
            set(&mut line.id, id);
        }
    }

    /// The request's bytes received so far (the whole body once it is read).
    pub(crate) fn received(&mut self, bytes: usize) {
        if let Some(line) = &mut self.line {
            line.bytes_in = bytes;
        }
    }

    /// The request is a batch: each member is a call with its own record, and this one
    /// writes no line.
    pub(crate) fn discard(mut self) {
        if let Some(line) = self.line.take() {
            spare(line);
        }
    }

    /// The method is known: starts its server span (when traces are on) for the front
    /// (`binding`) the call came through, its errors in the route's `profile`.
    pub(crate) fn method(
        &mut self,
        op: Op,
        request: &http::request::Parts,
        id: Option<&str>,
        front: (Binding, Profile),
    ) {
        if let Some(line) = &mut self.line {
            line.method = op.name();
        }
        self.span = ServerSpan::start(op, request, id, front).map(Box::new);
    }

    /// The call's caller, as authentication found it: the line's `principal` and `auth`
    /// fields, the span's `enduser.id` and `a2a_gateway.auth.scheme`.
    pub(crate) fn principal(&mut self, principal: &crate::auth::Principal) {
        if let Some(line) = &mut self.line {
            line.principal = match &*principal.name {
                "" => None,
                name => Some(ClippedField::of(name)),
            };
            line.scheme = principal.scheme.as_str();
        }
        if let Some(span) = &mut self.span {
            span.principal(principal);
        }
    }

    /// Records the decoded request on the span.
    pub(crate) fn request(&mut self, request: &Request) {
        if let Some(span) = &mut self.span {
            span.request(request);
        }
    }

    /// The trace context that makes the backend call a child of the server span (`None`
    /// with traces off); see `trace::ServerSpan::context`.
    pub(crate) fn propagate(
        &self,
        forwarded: &mut Vec<(HeaderName, HeaderValue)>,
    ) -> Option<Box<TraceContext>> {
        let span = self.span.as_ref()?;
        Some(span.context(forwarded))
    }

    /// Records a unary reply on the span.
    pub(crate) fn reply(&mut self, reply: &Reply) {
        if let Some(span) = &mut self.span {
            span.reply(reply);
        }
    }

    /// The call failed with `kind` (the reply or the stream's last frame is this error).
    pub(crate) fn failed(&mut self, kind: ErrorKind) {
        self.failure = Some(kind);
        self.answered = true;
    }

    /// The call was answered: its reply is made, or its stream ended (with the error
    /// `failed` gave, if any).
    pub(crate) fn answered(&mut self) {
        self.answered = true;
    }

    /// The backend's status, as its answer or error gave it (`None`: not reached).
    pub(crate) fn backend_status(&mut self, status: Option<u16>) {
        if let Some(line) = &mut self.line {
            line.backend = status;
        }
    }

    /// A stream event was sent.
    pub(crate) fn event(&mut self, event: &StreamResponse) {
        if let Some(line) = &mut self.line {
            line.frames += 1;
        }
        if let Some(span) = &mut self.span {
            span.event(event);
        }
    }

    /// The stream's final error event was sent.
    pub(crate) fn error_event(&mut self, err: &A2aError) {
        if let Some(line) = &mut self.line {
            line.frames += 1;
        }
        self.failed(err.kind);
        if let Some(span) = &mut self.span {
            span.error_event();
        }
    }

    /// A post to the push relay's callback was answered `status`: the route its token
    /// named (empty: none), the body bytes read, and why it was `refused`.
    pub(crate) fn push_callback(
        &mut self,
        route: &str,
        bytes_in: usize,
        status: u16,
        refused: Option<&'static str>,
    ) {
        if let Some(line) = &mut self.line {
            line.route.set(route);
            line.method = "PushCallback";
            line.bytes_in = bytes_in;
            (line.status, line.refused) = (Some(status), refused);
        }
        self.answered = true;
    }

    /// Bytes written to the client for this call.
    pub(crate) fn sent(&mut self, bytes: usize) {
        if let Some(line) = &mut self.line {
            line.bytes_out += bytes;
        }
    }
}

impl Drop for CallRecord {
    /// The call is over: the span ends, the line is written.
    fn drop(&mut self) {
        let code = match self.answered {
            true => self.failure.map_or(0, ErrorKind::code),
            // A panic is answered with an internal error (`front::layers`).
            false if std::thread::panicking() => ErrorKind::Internal.code(),
            false => CLIENT_CLOSED,
        };
        if let (Some(span), Some(kind)) = (&mut self.span, self.failure) {
            span.failed(&A2aError::new(kind));
        }
        let Some(mut line) = self.line.take() else {
            return;
        };
        line.finish(code, self.span.as_ref().map(|span| span.trace_id()));
        finished(line);
    }
}

/// Keeps `line`'s box for a later call on this thread (past the cap, or while the thread
/// ends, it is freed).
fn spare(line: Box<Line>) {
    let _ = SPARE_LINES.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_LINES_MAX {
            spare.push(line);
        }
    });
}

/// Sets an optional text field of a line, reusing its buffer.
fn set(field: &mut Option<ClippedField>, text: Option<&str>) {
    match text {
        Some(text) => field.get_or_insert_with(|| ClippedField::of("")).set(text),
        None => *field = None,
    }
}

impl Line {
    /// Writes the line of the finished call into `out` in `format`. Each value is written
    /// straight: the formatting machinery only for a span's trace id and an IPv6 client.
    fn write(&self, out: &mut Vec<u8>, format: sink::LineFormat) {
        let took = self.ended.saturating_duration_since(self.started);
        let duration_us = i64::try_from(took.as_micros()).unwrap_or(i64::MAX);
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        fn text(field: &Option<ClippedField>) -> &str {
            field.as_ref().map_or("-", ClippedField::as_str)
        }
        let mut status = itoa::Buffer::new();
        let backend_status = self.backend.map_or("-", |s| status.format(s));
        let mut client = AddrText::default();
        let client = self.client.map_or("-", |addr| client.of(addr));
        sink::open_line(out, format, TARGET, self.ended_at);
        sink::text_field(out, format, field_name!("route"), self.route.as_str());
        sink::text_field(out, format, field_name!("path"), self.path.as_str());
        sink::text_field(out, format, field_name!("method"), self.method);
        sink::bare_field(out, format, field_name!("id"), text(&self.id));
        sink::number_field(out, format, field_name!("code"), i64::from(self.code));
        if let Some(status) = self.status {
            sink::number_field(out, format, field_name!("status"), i64::from(status));
        }
        if let Some(refused) = self.refused {
            sink::text_field(out, format, field_name!("refused"), refused);
        }
        sink::bare_field(out, format, field_name!("backend_status"), backend_status);
        sink::number_field(out, format, field_name!("duration_us"), duration_us);
        sink::number_field(out, format, field_name!("bytes_in"), count(self.bytes_in));
        sink::number_field(out, format, field_name!("bytes_out"), count(self.bytes_out));
        let frames = i64::try_from(self.frames).unwrap_or(i64::MAX);
        sink::number_field(out, format, field_name!("frames"), frames);
        sink::bare_field(out, format, field_name!("client"), client);
        sink::bare_field(
            out,
            format,
            field_name!("request_id"),
            text(&self.request_id),
        );
        sink::bare_field(out, format, field_name!("principal"), text(&self.principal));
        sink::bare_field(out, format, field_name!("auth"), self.scheme);
        match &self.span_trace {
            Some(id) => sink::shown_field(out, format, field_name!("trace_id"), id),
            None => {
                sink::bare_field(
                    out,
                    format,
                    field_name!("trace_id"),
                    text(&self.traceparent),
                );
            }
        }
        sink::close_line(out, format, TARGET);
    }
}

/// A client address as `SocketAddr`'s `Display` writes it (`1.2.3.4:5`, `[::1]:5`).
struct AddrText {
    bytes: [u8; 64],
    len: usize,
}

impl Default for AddrText {
    fn default() -> Self {
        AddrText {
            bytes: [0; 64],
            len: 0,
        }
    }
}

impl AddrText {
    fn of(&mut self, addr: SocketAddr) -> &str {
        let mut digits = itoa::Buffer::new();
        match addr {
            SocketAddr::V4(v4) => {
                for (i, octet) in v4.ip().octets().into_iter().enumerate() {
                    if i > 0 {
                        self.push(b".");
                    }
                    self.push(digits.format(octet).as_bytes());
                }
            }
            SocketAddr::V6(v6) => {
                let mut cursor = std::io::Cursor::new(&mut self.bytes[..]);
                // `[` 45 characters at most `]`: it fits.
                let _ = std::io::Write::write_fmt(&mut cursor, format_args!("[{}]", v6.ip()));
                self.len = cursor.position() as usize;
            }
        }
        self.push(b":");
        self.push(digits.format(addr.port()).as_bytes());
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or("-")
    }

    fn push(&mut self, text: &[u8]) {
        let end = (self.len + text.len()).min(self.bytes.len());
        self.bytes[self.len..end].copy_from_slice(&text[..end - self.len]);
        self.len = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines this thread holds back.
    fn deferred() -> Option<usize> {
        DEFERRED.with(|deferred| deferred.borrow().as_ref().map(|lines| lines.0.len()))
    }

    fn line_ended_now() -> Box<Line> {
        let mut line = Box::new(Line::new());
        line.finish(0, None);
        line
    }

    /// A serving thread holds its finished lines until its runtime parks, but never more
    /// than `DEFERRED_MAX` of them nor for longer than `DEFERRED_FOR` while calls end;
    /// any other thread writes each line at once.
    #[test]
    fn a_serving_thread_defers_a_bounded_number_of_lines_for_a_bounded_time() {
        std::thread::spawn(|| {
            finished(line_ended_now());
            assert_eq!(deferred(), None, "not a serving thread: written at once");

            defer_lines();
            for held in 1..DEFERRED_MAX {
                finished(line_ended_now());
                assert_eq!(deferred(), Some(held));
            }
            finished(line_ended_now());
            assert_eq!(deferred(), Some(0), "the {DEFERRED_MAX}th writes them all");

            finished(line_ended_now());
            write_deferred();
            assert_eq!(deferred(), Some(0), "the park hook writes them");

            finished(line_ended_now());
            std::thread::sleep(DEFERRED_FOR);
            finished(line_ended_now());
            assert_eq!(deferred(), Some(0), "the oldest waited long enough");

            finished(line_ended_now());
            let spare = || SPARE_LINES.with(|spare| spare.borrow().len());
            let kept = spare();
            stop_deferring();
            assert_eq!(deferred(), None);
            assert_eq!(spare(), kept + 1, "the held line was written, its box kept");
            finished(line_ended_now());
            assert_eq!(deferred(), None, "written at once again");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn client_addresses_are_written_as_display_writes_them() {
        for addr in [
            "1.2.3.4:5",
            "255.255.255.255:65535",
            "[::1]:8080",
            "[fe80::1:2]:1",
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            assert_eq!(AddrText::default().of(addr), addr.to_string());
        }
    }
}

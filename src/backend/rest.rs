//! HTTP+JSON backend (spec 11): one pooled reqwest client shared by all requests; every
//! route comes from the operation table (`Op::http_rule`), never restated here.
//!
//! **Requests.** URL = backend URL (with its base path) + `/{tenant}` when the request's
//! `tenant` is non-empty + the rule's path with `{field}` placeholders filled from the
//! request's ProtoJSON (`{task_id}` reads `taskId`). Every path segment value and query
//! value is percent-encoded so that only RFC 3986 unreserved characters stay literal. A
//! path parameter that is empty, `.` or `..` cannot be carried in a URL path (it would
//! address another resource after normalisation), so such requests are refused with
//! -32602 naming the field.
//! - `POST` rules send the whole request as ProtoJSON (`content-type: application/a2a+json`)
//!   minus `tenant`, which travels in the path. Path parameter fields stay in the body: it
//!   is then exactly the request, and servers bind the path over the body (`body: "*"`
//!   transcoding, the reference SDK) or ignore it.
//! - `GET`/`DELETE` rules send every other set field as a camelCase query parameter
//!   (spec 11.5), in ProtoJSON form and proto field order: enums by name, timestamps in
//!   ISO 8601 `Z` form, booleans lowercase, numbers decimal, repeated fields as repeated
//!   parameters; nested objects cannot be expressed and are left out.
//! - Headers: `A2A-Version: 1.0`, the call's forwarded headers, `accept`
//!   (`application/a2a+json`, or `text/event-stream` for streams). The call's timeout
//!   bounds the whole exchange (for streams only when one is set).
//!
//! **SubscribeToTask.** The schema's rule says `GET …:subscribe`, the prose of spec 11.3.2
//! says `POST`. We send the table's `GET`; a backend that answers 405 gets the same request
//! once more as `POST` (body = the request), and the backend remembers that `POST` works
//! so later subscriptions go straight to `POST`.
//!
//! **Answers.** 2xx bodies decode with `Reply::from_json`; the `A2A-Extensions` response
//! header becomes `Answer::extensions`. A reply body or one stream event over
//! `--backend-max-message` (`RestBackend::max_message`) fails the call as a bad response
//! once that much is read, so an endless body costs bounded memory. Streams are SSE
//! (`sse::SseParser`): each `data` event is a `StreamResponse`; an `event: error` frame
//! carries `{"error": Status}` and ends the stream with that error. Dropping the stream drops the response, which cancels
//! the upstream request.
//!
//! **Errors.** A `{"error": {"code", "status", "message", "details"}}` body (spec 11.6)
//! becomes `A2aError::from_backend`: `ErrorInfo.reason` decides, else the gRPC status name
//! in `error.status`, else the HTTP status. Anything else (an HTML 502 from a proxy, an
//! empty 404, text/plain) is the gateway's fault `BACKEND_BAD_RESPONSE` (-32603) whose data
//! carries the HTTP status, content type and the start of the body. Transport failures
//! become `BACKEND_UNAVAILABLE` (cannot connect), `BACKEND_DEADLINE_EXCEEDED` (timeout) or
//! `BACKEND_CONNECTION_RESET` (connection lost). Redirects are not followed (a backend URL
//! is configuration, and credentials must not follow a redirect); they are bad responses.

mod route;
pub(crate) mod sse;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use http::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tonic::Code;

use self::route::{layout, Outgoing};
use self::sse::SseParser;
use super::error::Seen;
use super::fault::Fault;
use super::grpc::{shared_client_config, Alpn};
use super::{Answer, Backend, Call, Error, EventStream, Status};
use crate::backend::observed::BackendCall;
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, ErrorKind, Profile};
use crate::protocol::ops::{HttpMethod, Op, Reply, StreamRequest, TypedRequest, UnaryRequest};
use crate::protocol::params::{response_extensions, SUPPORTED_VERSION, VERSION};
use crate::telemetry::trace::Hop;
use crate::telemetry::untrusted::{clip, without_credentials};

/// Media type of A2A JSON bodies (spec 11.1).
const A2A_JSON: &str = "application/a2a+json";
const EVENT_STREAM: &str = "text/event-stream";
/// Largest reply body or single stream event accepted unless `max_message` says otherwise
/// (the default of `--backend-max-message`, the gRPC backend's limit too).
pub(crate) const MAX_BODY: usize = 16 << 20;
/// Largest error body read; longer ones are not A2A errors.
const MAX_ERROR_BODY: usize = 1 << 20;
/// How much of an unusable body is quoted back in `DebugInfo.detail`.
const SNIPPET: usize = 512;

/// A backend reached over HTTP+JSON.
#[derive(Clone, Debug)]
pub struct RestBackend {
    shared: Arc<Shared>,
    max_body: usize,
}

#[derive(Debug)]
struct Shared {
    client: reqwest::Client,
    /// The shared TLS configuration `client` holds a copy of: held here, since the cache
    /// (`shared_client_config`) keeps it only while a backend does.
    _tls: Arc<rustls::ClientConfig>,
    /// `scheme://authority[/base/path]` without a trailing slash.
    base: String,
    /// The backend answered 405 to `GET …:subscribe` and accepted `POST`.
    subscribe_post: AtomicBool,
}

/// The backend address cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid HTTP+JSON backend {url:?}: {reason}")]
pub struct RestConfigError {
    url: String,
    reason: String,
}

impl RestConfigError {
    /// `url` (its credentials left out) cannot be used, for `reason`.
    pub(crate) fn new(url: &str, reason: String) -> RestConfigError {
        RestConfigError {
            url: without_credentials(url).into_owned(),
            reason,
        }
    }
}

impl RestBackend {
    /// A backend at `url` (`http://host:port[/base-path]`, `https://` for TLS). HTTP/2 is
    /// used when TLS negotiates it, HTTP/1.1 otherwise. For TLS the system roots are trusted,
    /// plus the PEM certificates in `ca_pem`. Connections are made on first use, so a
    /// backend that is down at start is not fatal.
    pub fn new(
        url: &str,
        connect_timeout: Duration,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, RestConfigError> {
        Self::build(url, connect_timeout, ca_pem, None, None)
    }

    /// As `new`; over TLS the client certificate chain and key in `identity_pem` (PEM, the
    /// chain first) are presented to a backend that asks for one (mTLS).
    pub(crate) fn with_identity(
        url: &str,
        connect_timeout: Duration,
        ca_pem: Option<&[u8]>,
        identity_pem: Option<&[u8]>,
    ) -> Result<Self, RestConfigError> {
        Self::build(url, connect_timeout, ca_pem, identity_pem, None)
    }

    /// The backend at `url` reached at `address` instead of the URL host's own addresses:
    /// one pod behind a DNS name (`backend::endpoints`). `Host` and the TLS name stay the
    /// URL's host; the port is the URL's. The client certificate as in `with_identity`.
    pub(crate) fn at(
        url: &str,
        connect_timeout: Duration,
        ca_pem: Option<&[u8]>,
        identity_pem: Option<&[u8]>,
        address: std::net::SocketAddr,
    ) -> Result<Self, RestConfigError> {
        Self::build(url, connect_timeout, ca_pem, identity_pem, Some(address))
    }

    fn build(
        url: &str,
        connect_timeout: Duration,
        ca_pem: Option<&[u8]>,
        identity_pem: Option<&[u8]>,
        address: Option<std::net::SocketAddr>,
    ) -> Result<Self, RestConfigError> {
        let err = |reason: String| RestConfigError::new(url, reason);
        let parsed = reqwest::Url::parse(url).map_err(|e| err(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
            return Err(err("expected http://host:port or https://host:port".into()));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(err("a query or fragment cannot be part of it".into()));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(err(
                "credentials in the URL are not supported (forward Authorization instead)".into(),
            ));
        }
        // The TLS configuration (roots, CA bundle, client certificate) is the one every
        // backend client made of the same files shares: reqwest's own, built per client,
        // made each HTTP+JSON route cost tens of KiB (benches/README.md, many routes).
        let tls = shared_client_config(ca_pem, identity_pem, Alpn::H2OrHttp1).map_err(err)?;
        let mut builder = reqwest::Client::builder().use_preconfigured_tls(tls.as_ref().clone());
        if let (Some(address), Some(host)) = (address, parsed.host_str()) {
            builder = builder.resolve(host, address);
        }
        let client = builder
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(90))
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(10))
            .http2_keep_alive_while_idle(true)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| err(e.to_string()))?;
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                _tls: tls,
                base: parsed.as_str().trim_end_matches('/').to_owned(),
                subscribe_post: AtomicBool::new(false),
            }),
            max_body: MAX_BODY,
        })
    }

    /// Reply bodies and single stream events over `limit` bytes fail the call with
    /// `BACKEND_BAD_RESPONSE` once that much is read (`--backend-max-message`, as for
    /// gRPC): a backend's endless body must not grow the gateway's memory without bound.
    pub(crate) fn max_message(mut self, limit: usize) -> Self {
        self.max_body = limit;
        self
    }
}

impl Backend for RestBackend {
    fn unary(
        &self,
        mut call: Call<UnaryRequest>,
    ) -> BoxFuture<'static, Result<Answer<Reply>, Error>> {
        let observed = self.shared.observe(&mut call);
        let shared = self.shared.clone();
        let max_body = self.max_body;
        async move { observed.unary(call_unary(shared, max_body, call).await) }.boxed()
    }

    fn stream(
        &self,
        mut call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>> {
        let observed = self.shared.observe(&mut call);
        let shared = self.shared.clone();
        let max_body = self.max_body;
        async move { observed.stream(call_stream(shared, max_body, call).await) }.boxed()
    }
}

impl Shared {
    /// The call's client span and status (`backend::observed::BackendCall`).
    fn observe<R: TypedRequest>(&self, call: &mut Call<R>) -> BackendCall {
        let op = call.request.op();
        let method = http_method(op.http_rule().method);
        let hop = Hop::Http {
            method: method.as_str(),
            base: &self.base,
        };
        BackendCall::start(op, hop, &mut call.trace)
    }
}

async fn call_unary(
    shared: Arc<Shared>,
    max_body: usize,
    mut call: Call<UnaryRequest>,
) -> Result<Answer<Reply>, Error> {
    let op = call.request.op();
    let (outgoing, headers) = prepare(&mut call, A2A_JSON)?;
    let method = http_method(op.http_rule().method);
    let response = shared
        .send(&method, &outgoing, headers, call.timeout())
        .await?;
    let status = response.status();
    if !status.is_success() {
        return Err(error_answer(response).await);
    }
    let extensions = response_extensions(response.headers());
    let content_type = content_type(response.headers());
    let (body, complete) = read_body(response, max_body).await?;
    if !complete {
        let what = format!("a body larger than {max_body} bytes (--backend-max-message)");
        return Err(bad_response(status, content_type, &body, &what, None));
    }
    let value = call.request.reply_from_json(&body).map_err(|e| {
        let what = format!("a body that is not a {} reply", op.name());
        bad_response(status, content_type.clone(), &body, &what, Some(&e))
    })?;
    Ok(Answer {
        value,
        status: Some(Status::Http(status.as_u16())),
        extensions,
    })
}

async fn call_stream(
    shared: Arc<Shared>,
    max_body: usize,
    mut call: Call<StreamRequest>,
) -> Result<Answer<EventStream>, Error> {
    let op = call.request.op();
    let timeout = call.timeout();
    let (outgoing, headers) = prepare(&mut call, EVENT_STREAM)?;
    // Only SubscribeToTask has a GET rule among the streams; see the module doc.
    let may_fall_back = op == Op::SubscribeToTask;
    let post_known = may_fall_back && shared.subscribe_post.load(Ordering::Relaxed);
    let method = if post_known {
        Method::POST
    } else {
        http_method(op.http_rule().method)
    };
    let mut response = shared
        .send(&method, &outgoing, headers.clone(), timeout)
        .await?;
    if may_fall_back && method == Method::GET && response.status() == StatusCode::METHOD_NOT_ALLOWED
    {
        drop(response);
        response = shared
            .send(&Method::POST, &outgoing, headers, timeout)
            .await?;
        if response.status().is_success() {
            tracing::info!(backend = %shared.base, "backend subscribes with POST; using POST from now on");
            shared.subscribe_post.store(true, Ordering::Relaxed);
        }
    }
    let status = response.status();
    if !status.is_success() {
        return Err(error_answer(response).await);
    }
    let content_type = content_type(response.headers());
    let is_event_stream = content_type.as_deref().is_none_or(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case(EVENT_STREAM))
    });
    if !is_event_stream {
        let (body, _) = read_body(response, MAX_ERROR_BODY).await?;
        let what = "a body that is not an event stream";
        return Err(bad_response(status, content_type, &body, what, None));
    }
    let extensions = response_extensions(response.headers());
    Ok(Answer {
        value: events(response, max_body),
        status: Some(Status::Http(status.as_u16())),
        extensions,
    })
}

fn http_method(method: HttpMethod) -> Method {
    match method {
        HttpMethod::Get => Method::GET,
        HttpMethod::Post => Method::POST,
        HttpMethod::Delete => Method::DELETE,
    }
}

// ---------------------------------------------------------------------------------------
// Requests

impl Shared {
    /// Sends one request; transport failures become gateway faults.
    async fn send(
        &self,
        method: &Method,
        outgoing: &Outgoing,
        headers: HeaderMap,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, Error> {
        let is_post = *method == Method::POST;
        let query = if is_post { "" } else { &outgoing.query };
        let url = format!("{}{}{query}", self.base, outgoing.path);
        let mut request = self.client.request(method.clone(), url).headers(headers);
        if is_post {
            request = request
                .header(CONTENT_TYPE, A2A_JSON)
                .body(outgoing.body.clone());
        }
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        request.send().await.map_err(|e| transport_error(&e))
    }
}

/// Lays out the call's request (its tenant moves into the path) and builds its headers
/// (the forwarded ones move into them, the trace context is written).
fn prepare<R: TypedRequest>(
    call: &mut Call<R>,
    accept: &'static str,
) -> Result<(Outgoing, HeaderMap), Error> {
    let mut headers = HeaderMap::with_capacity(call.forwarded.len() + 2);
    for (name, value) in call.forwarded.drain(..) {
        headers.append(name, value);
    }
    headers.insert(
        HeaderName::from_static(VERSION),
        HeaderValue::from_static(SUPPORTED_VERSION),
    );
    headers.insert(ACCEPT, HeaderValue::from_static(accept));
    if let Some(trace) = &call.trace {
        trace.write(&mut headers);
    }
    Ok((layout(&mut call.request).map_err(Error::unsent)?, headers))
}

// ---------------------------------------------------------------------------------------
// Answers

fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(CONTENT_TYPE)?;
    Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// Reads at most `limit` bytes of the body; `false` when more was left.
async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport_error(&e))? {
        if body.len() + chunk.len() > limit {
            body.extend_from_slice(&chunk[..limit - body.len()]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

/// A non-2xx answer as an error: an A2A error body through the error table, anything else
/// a bad response.
pub(crate) async fn error_answer(response: reqwest::Response) -> Error {
    let status = response.status();
    let content_type = content_type(response.headers());
    // Redirects are not followed (module doc); where one pointed tells people what to fix.
    let redirect = status
        .is_redirection()
        .then(|| response.headers().get(LOCATION))
        .flatten()
        .map(|to| String::from_utf8_lossy(to.as_bytes()).into_owned());
    let (body, complete) = match read_body(response, MAX_ERROR_BODY).await {
        Ok(read) => read,
        Err(e) => return e,
    };
    let parsed = if complete {
        serde_json::from_slice::<ErrorBody>(&body)
    } else {
        Err(serde::de::Error::custom("error body too large"))
    };
    match parsed {
        Ok(ErrorBody { error }) => error.into_error(Some(status)),
        Err(e) => {
            let what = match redirect {
                Some(to) => format!("a redirect to {to}, which the gateway does not follow"),
                None if body.is_empty() => "an empty body, not an A2A error".to_owned(),
                None => "a body that is not an A2A error".to_owned(),
            };
            bad_response(status, content_type, &body, &what, Some(&e))
        }
    }
}

/// An error body of the binding (spec 11.6); `code` repeats the HTTP status and is unused.
#[derive(Deserialize)]
struct ErrorBody {
    error: RpcStatus,
}

/// `google.rpc.Status` as JSON, with the gRPC code name in `status`.
#[derive(Deserialize)]
struct RpcStatus {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    details: Option<Vec<Value>>,
}

impl RpcStatus {
    /// Through the error table: `ErrorInfo.reason`, else the status name, else `http`.
    /// The status is `http`; an error event has none of its own (its stream's was a 2xx),
    /// so it is the one the binding gives its row (spec 11.6).
    fn into_error(self, http: Option<StatusCode>) -> Error {
        let by_name = self
            .status
            .as_deref()
            .and_then(grpc_code_named)
            .filter(|code| *code != Code::Ok)
            .map(ErrorKind::from_grpc);
        let fallback = by_name
            .or_else(|| http.map(|s| ErrorKind::from_http(s.as_u16())))
            .unwrap_or(ErrorKind::Internal);
        let message = self.message.unwrap_or_default();
        let error = A2aError::from_backend(fallback, &message, self.details.unwrap_or_default());
        // The current release's status: the agent's profile is not known.
        let status = http.map_or_else(|| error.kind.http(Profile::V1_0_1), |s| s.as_u16());
        Error::agent(error, Status::Http(status))
    }
}

/// The gRPC code with canonical name `name` (`NOT_FOUND` → `Code::NotFound`).
fn grpc_code_named(name: &str) -> Option<Code> {
    let wanted: String = name.chars().filter(|c| *c != '_').collect();
    (0..=16)
        .map(Code::from_i32)
        .find(|code| format!("{code:?}").eq_ignore_ascii_case(&wanted))
}

/// `BACKEND_BAD_RESPONSE`: the gateway could not use the backend's answer. The message
/// names the HTTP status; what was seen carries status, content type and the body's start.
fn bad_response(
    status: StatusCode,
    content_type: Option<String>,
    body: &[u8],
    what: &str,
    parse_error: Option<&serde_json::Error>,
) -> Error {
    let status_text = format!(
        "{} {}",
        status.as_str(),
        status.canonical_reason().unwrap_or_default()
    );
    let status_text = status_text.trim_end();
    tracing::warn!(
        status = status_text,
        ?content_type,
        "unusable backend answer: {what}"
    );
    let mut detail = String::from("the gateway could not parse the backend's answer");
    if let Some(e) = parse_error {
        detail.push_str(&format!(" ({e})"));
    }
    if !body.is_empty() {
        detail.push_str("; body: ");
        detail.push_str(&snippet(body));
    }
    let seen = Seen {
        http_status: Some(status),
        content_type,
        body_length: Some(body.len()),
        detail: Some(detail),
    };
    Error::seen(Fault::Unusable(format!("{status_text} with {what}")), seen)
}

/// The start of a body as text, for people.
fn snippet(body: &[u8]) -> String {
    let cut = &body[..body.len().min(SNIPPET)];
    let mut text = String::from_utf8_lossy(cut).into_owned();
    if cut.len() < body.len() {
        text.push('…');
    }
    text
}

/// A transport failure through the fault table; a request that could not be built is a
/// gateway bug, reported as such.
fn transport_error(error: &reqwest::Error) -> Error {
    match Fault::reqwest(error) {
        Some(fault) => fault.into(),
        None => {
            // The error names the agent's URL, with what the client put in it: logged
            // bounded, never told the client.
            let error = error.to_string();
            let error = crate::telemetry::untrusted::clip_message(&error);
            tracing::error!(%error, "cannot build the backend request");
            let message = "the gateway could not build the request to the agent";
            Error::unsent(A2aError::with_message(ErrorKind::Internal, message))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Streams

type Body = BoxStream<'static, reqwest::Result<Bytes>>;

/// The response body as `StreamResponse`s; the first error ends it.
pub(crate) fn events(response: reqwest::Response, max_body: usize) -> EventStream {
    struct State {
        /// `None` once the stream has ended (dropping the body cancels the request).
        body: Option<Body>,
        parser: SseParser,
        eof: bool,
    }
    let state = State {
        body: Some(response.bytes_stream().boxed()),
        parser: SseParser::new(max_body),
        eof: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            let body = state.body.as_mut()?;
            if let Some(event) = state.parser.next_event() {
                match decode_event(&event.event, &event.data) {
                    Some(Ok(item)) => return Some((Ok(item), state)),
                    Some(Err(error)) => {
                        state.body = None;
                        return Some((Err(error), state));
                    }
                    None => continue,
                }
            }
            if state.eof {
                return None;
            }
            let failure = match body.next().await {
                Some(Ok(chunk)) => match state.parser.feed(&chunk) {
                    Ok(()) => continue,
                    Err(e) => {
                        Fault::BadResponse(format!("backend sent an unusable event stream: {e}"))
                            .into()
                    }
                },
                Some(Err(e)) => transport_error(&e),
                None => {
                    state.parser.finish();
                    state.eof = true;
                    continue;
                }
            };
            state.body = None;
            return Some((Err(failure), state));
        }
    })
    .boxed()
}

/// One SSE event: `Some(Ok)` a frame, `Some(Err)` an error that ends the stream, `None` an
/// event type A2A does not use (ignored).
fn decode_event(event: &str, data: &str) -> Option<Result<StreamResponse, Error>> {
    match event {
        "message" => Some(serde_json::from_str(data).map_err(|e| {
            bad_event(
                "backend sent an event that is not a StreamResponse",
                &e,
                data,
            )
        })),
        "error" => Some(Err(match serde_json::from_str::<ErrorBody>(data) {
            Ok(ErrorBody { error }) => error.into_error(None),
            Err(e) => bad_event(
                "backend sent an error event that is not an A2A error",
                &e,
                data,
            ),
        })),
        other => {
            tracing::debug!(event = %clip(other), "ignoring backend SSE event");
            None
        }
    }
}

fn bad_event(what: &str, parse_error: &serde_json::Error, data: &str) -> Error {
    tracing::warn!(error = %parse_error, "unusable backend event: {what}");
    let seen = Seen {
        detail: Some(format!(
            "the gateway could not parse the backend's event; data: {}",
            snippet(data.as_bytes())
        )),
        ..Seen::default()
    };
    Error::seen(Fault::BadResponse(format!("{what}: {parse_error}")), seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_code_names() {
        assert_eq!(grpc_code_named("NOT_FOUND"), Some(Code::NotFound));
        assert_eq!(grpc_code_named("CANCELLED"), Some(Code::Cancelled));
        assert_eq!(grpc_code_named("DATA_LOSS"), Some(Code::DataLoss));
        assert_eq!(grpc_code_named("OK"), Some(Code::Ok));
        assert_eq!(grpc_code_named("NOPE"), None);
    }

    #[test]
    fn status_body_fallbacks() {
        let body = |json: &str| serde_json::from_str::<ErrorBody>(json).unwrap().error;
        let by_reason = body(
            r#"{"error":{"status":"FAILED_PRECONDITION","message":"m","details":[
                {"@type":"type.googleapis.com/google.rpc.ErrorInfo",
                 "reason":"TASK_NOT_CANCELABLE","domain":"a2a-protocol.org"}]}}"#,
        );
        let err = A2aError::from(by_reason.into_error(Some(StatusCode::BAD_REQUEST)));
        assert_eq!(err.kind, ErrorKind::TaskNotCancelable);
        assert_eq!(err.message, "m");
        let by_name = body(r#"{"error":{"status":"NOT_FOUND"}}"#);
        let err = A2aError::from(by_name.into_error(Some(StatusCode::BAD_REQUEST)));
        assert_eq!(err.kind, ErrorKind::TaskNotFound);
        assert_eq!(err.message, "Task not found");
        let by_http = body(r#"{"error":{"code":401,"message":"who?"}}"#);
        let err = by_http.into_error(Some(StatusCode::UNAUTHORIZED));
        assert_eq!(err.status(), Some(Status::Http(401)));
        let err = A2aError::from(err);
        assert_eq!(err.kind, ErrorKind::Unauthenticated);
    }

    #[test]
    fn error_events_and_bad_frames() {
        let err = decode_event(
            "error",
            r#"{"error":{"status":"NOT_FOUND","message":"gone"}}"#,
        )
        .unwrap()
        .unwrap_err();
        assert_eq!(err.status(), Some(Status::Http(404)));
        let err = A2aError::from(err);
        assert_eq!(
            (err.kind, err.message.as_str()),
            (ErrorKind::TaskNotFound, "gone")
        );
        let err = decode_event("message", "{not json").unwrap().unwrap_err();
        assert!(matches!(err.fault(), Some(Fault::BadResponse(_))));
        let err = A2aError::from(err);
        assert_eq!(err.kind, ErrorKind::Internal);
        assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE");
        assert!(decode_event("ping", "x").is_none());
    }

    #[tokio::test]
    async fn bodies_are_read_up_to_the_limit() {
        let response = |len| reqwest::Response::from(http::Response::new(vec![b'x'; len]));
        let (body, complete) = read_body(response(1024), 1024).await.unwrap();
        assert!(complete);
        assert_eq!(body.len(), 1024);
        let (body, complete) = read_body(response(1025), 1024).await.unwrap();
        assert!(!complete);
        assert_eq!(body.len(), 1024);
    }

    #[test]
    fn snippets_are_bounded() {
        let long = vec![b'x'; 2000];
        assert_eq!(snippet(&long).chars().count(), SNIPPET + 1);
        assert_eq!(snippet("é".as_bytes()), "é");
    }
}

//! The JSON-RPC 2.0 endpoint (spec 9): the body read within its limits, batches (`batch`) and
//! notifications, the envelope's checks in order, then each call through its stack
//! (`call::stack`: observe, decode, tenant, push check, admission, deadline, the backend)
//! and its reply, as JSON or SSE, in the call's dialect (`dialect`; the envelope's bytes
//! in `envelope`, streams in `sse`).
//!
//! The envelope is parsed with borrowed `RawValue`s: the id is echoed byte for byte (a
//! 30-digit integer keeps its digits) and params go straight into the protobuf type.
//!
//! A request's work is bounded whatever it holds: a batch has at most `max-batch-size`
//! members (counted before any is decoded) and its reply at most `max-batch-reply` bytes
//! of results; the body's bytes count against `global-max-body-bytes-in-flight` while it
//! is read and handled.

mod batch;

use std::borrow::Cow;
use std::future::{ready, Future, Ready};
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures::future::Either;
use futures::{stream, Stream};
use http::{HeaderValue, StatusCode};
use serde_json::value::RawValue;

use crate::front::call::observe::Watched;
use crate::front::call::{self, authenticate, Answer, Exchange, Layer, Wire};
use crate::front::dialect::Dialect;
use crate::front::envelope::{
    envelope_error, error_bytes, invalid_request, json_response, parse_error, read_body,
    sse_response, valid_id, BodyError, Envelope, Params,
};
use crate::front::limits::{Refusal, RouteLimits};
use crate::front::sse::{SseBody, Watch};
use crate::front::Gateway;
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, ErrorKind};
use crate::telemetry::access::CallRecord;
use crate::telemetry::untrusted::clip_message;

/// What handling one request element gave: the reply to send, if any.
enum Handled {
    /// A JSON-RPC response object, with the backend's activated extensions.
    Json(Vec<u8>, Option<HeaderValue>),
    /// An SSE stream.
    Stream(Body, Option<HeaderValue>),
    /// A call a limit refused, with its JSON-RPC error (empty for a notification).
    Refused(Box<Refusal>, Vec<u8>),
    /// A notification: no response.
    Nothing,
}

/// The request-wide facts every element of a batch shares.
struct Context<'a> {
    request: &'a http::request::Parts,
    /// The route's limits, checked before each call goes to the backend.
    limits: Option<&'a Arc<RouteLimits>>,
    /// The caller, as the request's head authenticated it (`None`: the route authenticates
    /// nobody).
    principal: Option<&'a crate::auth::Principal>,
}

/// Whether the request has one Content-Type and it names JSON: `application/json` or
/// `application/*+json`, with any parameters. A second one is refused: what the gateway
/// reads must be what a filter in front of it judged by.
fn is_json(headers: &http::HeaderMap) -> bool {
    let mut values = headers.get_all(http::header::CONTENT_TYPE).iter();
    let (content_type, None) = (values.next(), values.next()) else {
        return false;
    };
    let Some(essence) = content_type
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
    else {
        return false;
    };
    // Compared without lowering a copy: this runs on every call.
    let essence = essence.trim().as_bytes();
    let (kind, subtype) = essence.split_at(essence.len().min("application/".len()));
    kind.eq_ignore_ascii_case(b"application/")
        && (subtype.eq_ignore_ascii_case(b"json")
            || (subtype.len() > 5 && subtype[subtype.len() - 5..].eq_ignore_ascii_case(b"+json")))
}

/// `POST` handler of the JSON-RPC endpoint, under the route's `limits`. Every failure
/// becomes a JSON-RPC error.
pub async fn handle(
    State(gateway): State<Arc<Gateway>>,
    limits: Option<Arc<RouteLimits>>,
    request: http::Request<Body>,
) -> Response {
    // The request is taken whole: extracting `HeaderMap` and `Uri` would clone them.
    let (parts, body) = request.into_parts();
    // From the head on: a client that leaves while its body arrives is logged too.
    let record = CallRecord::start(gateway.route_metrics.name(), &parts, 0, None);
    // A browser sends a cross-site form post (text/plain, urlencoded, multipart) without a
    // CORS preflight; only JSON is a JSON-RPC request, so nothing else is read.
    if !is_json(&parts.headers) {
        let err = invalid_request("the Content-Type must be application/json");
        let mut response = rejected_response(&gateway, record, &err);
        *response.status_mut() = gateway
            .refusal_status
            .of(StatusCode::UNSUPPORTED_MEDIA_TYPE);
        return response;
    }
    // One set of credentials for the whole request, checked from the head before the body
    // is read: an unauthenticated client holds no share of the bytes in flight, gets no
    // `100 Continue`, has nothing parsed, and a batch is refused once, not per member.
    // The request's id is not known yet: the refusal answers under `null`.
    let principal = match &gateway.auth {
        None => None,
        // Boxed: its state inline would size every request's future, on routes without
        // authentication too (bytes per call, tests/it/cost_budget.rs).
        Some(auth) => match Box::pin(auth.authenticate(&parts)).await {
            // Boxed: held until the request is answered, and every request's future would
            // carry it inline.
            Ok(principal) => Some(Box::new(principal)),
            Err(failure) => {
                let refusal = authenticate::refusal(auth, &failure);
                return refused_request(&gateway, record, &refusal);
            }
        },
    };
    // Held until the request is answered: the body is kept that long.
    let mut charge = limits.as_ref().map(|limits| limits.body_charge());
    let expects_continue = parts
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let max = gateway.max_body;
    let read = read_body(body, max, expects_continue, charge.as_mut(), record);
    let (bytes, record) = match read.await {
        (Ok(bytes), record) => (bytes, record),
        (Err(BodyError::Invalid(err) | BodyError::OverLimit(err)), record) => {
            return rejected_response(&gateway, record, &err)
        }
        // Nobody reads the answer; the record, unanswered, logs the client's leaving.
        (Err(BodyError::ClientGone), _) => return StatusCode::BAD_REQUEST.into_response(),
        (Err(BodyError::TooLarge(err)), record) => {
            let mut response = rejected_response(&gateway, record, &err);
            // The rest of the body is not read, so the connection cannot carry another
            // request (HTTP/2 resets just the stream).
            if parts.version <= http::Version::HTTP_11 {
                let close = HeaderValue::from_static("close");
                response
                    .headers_mut()
                    .insert(http::header::CONNECTION, close);
            }
            return response;
        }
        (Err(BodyError::Refused(refusal)), record) => {
            return refused_request(&gateway, record, &refusal);
        }
    };
    let ctx = Context {
        request: &parts,
        limits: limits.as_ref(),
        principal: principal.as_deref(),
    };
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => batch::handle(&gateway, &ctx, &bytes, record).await,
        Some(b'{') => {
            let envelope = match Envelope::parse(&bytes) {
                Ok(envelope) => envelope,
                Err(e) => return rejected_response(&gateway, record, &envelope_error(&e)),
            };
            match handle_one(&gateway, &ctx, envelope, false, record).await {
                Handled::Json(body, ext) => json_response(body, ext),
                Handled::Stream(events, ext) => sse_response(events, ext),
                Handled::Refused(refusal, body) => {
                    refused_response(&refusal, body, gateway.refusal_status)
                }
                Handled::Nothing => StatusCode::NO_CONTENT.into_response(),
            }
        }
        _ => {
            let err = match serde_json::from_slice::<&RawValue>(&bytes) {
                Ok(_) => invalid_request("the request must be a JSON object or array"),
                Err(e) => parse_error(&e),
            };
            rejected_response(&gateway, record, &err)
        }
    }
}

/// One call, logged in `record`: the envelope's checks, the call's stack (`call::stack`)
/// and its reply. Its `CallRecord` is finished when the reply is made, or taken over by a
/// stream's body until the stream ends. Not an `async fn`: the envelope is consumed
/// before the call's future exists, which then holds only the `Exchange`.
fn handle_one<'a>(
    gateway: &'a Gateway,
    ctx: &Context<'a>,
    envelope: Envelope<'a>,
    in_batch: bool,
    mut record: CallRecord,
) -> Either<impl Future<Output = Handled> + Send + 'a, Ready<Handled>> {
    let started = Instant::now();
    record.id(envelope.id.as_deref());
    // Before the method is known, failures count as rejected requests.
    let mut reject = |id: Option<&str>, err: A2aError| {
        gateway.route_metrics.rejected(err.kind);
        record.failed(err.kind);
        let out = error_bytes(id, &err);
        record.sent(out.len());
        Either::Right(ready(Handled::Json(out, None)))
    };
    let name = match checked(&envelope) {
        Ok(name) => name,
        Err((id, err)) => return reject(id, err),
    };
    let dialect = Dialect::of(&name, gateway.legacy, ctx.request);
    // The reference SDK's order: method, then params, then version.
    let Some(op) = dialect.op(&name) else {
        return match envelope.id.as_deref() {
            Some(id) => reject(Some(id), A2aError::new(ErrorKind::MethodNotFound)),
            None => {
                record.answered();
                Either::Right(ready(Handled::Nothing))
            }
        };
    };
    let exchange = Exchange {
        gateway,
        head: ctx.request,
        limits: ctx.limits,
        wire: Wire::Json,
        id: envelope.id,
        op,
        dialect,
        in_batch,
        started,
        deadline: None,
        principal: ctx.principal.cloned(),
        owner: None,
        record,
    };
    Either::Left(run(exchange, envelope.params))
}

/// The envelope's members checked (spec 9): an id of a JSON-RPC type, `"jsonrpc":"2.0"`,
/// a method name, params that are an object. The method's name, or the error with the id
/// to answer it under.
fn checked<'e>(envelope: &'e Envelope<'_>) -> Result<Cow<'e, str>, (Option<&'e str>, A2aError)> {
    let id = match envelope.id.as_deref() {
        Some(id) if !valid_id(id) => {
            return Err((
                None,
                invalid_request("id must be a string, an integer or null"),
            ))
        }
        id => id,
    };
    if envelope.jsonrpc.as_deref() != Some("\"2.0\"") {
        return Err((id, invalid_request("jsonrpc must be \"2.0\"")));
    }
    let Some(name) = envelope
        .method
        .as_deref()
        .and_then(|m| serde_json::from_str::<Cow<str>>(m).ok())
    else {
        return Err((id, invalid_request("method must be a string")));
    };
    if let Some(Params::Text(text)) = &envelope.params {
        if !text.starts_with('{') {
            return Err((id, invalid_request("params must be an object")));
        }
    }
    Ok(name)
}

/// The call through its stack, and its reply.
async fn run(mut exchange: Exchange<'_>, params: Option<Params<'_>>) -> Handled {
    let answer = call::stack().call(&mut exchange, params).await;
    respond(exchange, answer)
}

/// The reply to what the stack answered, in the call's dialect, counted in its record.
fn respond<S>(mut x: Exchange<'_>, answer: Result<Answer<S>, A2aError>) -> Handled
where
    S: Stream<Item = Result<StreamResponse, A2aError>> + Send + Unpin + 'static,
{
    let Some(id) = x.id.take() else {
        return match answer {
            // A notification gets no JSON-RPC answer, but the HTTP status says why.
            Ok(Answer::Refused(refusal)) => Handled::Refused(refusal, Vec::new()),
            Err(err) => {
                let message = clip_message(&err.message);
                tracing::debug!(method = x.op.name(), %message, "notification failed");
                Handled::Nothing
            }
            Ok(_) => Handled::Nothing,
        };
    };
    let (out, extensions) = match answer {
        Ok(Answer::Json(out, extensions)) => (out, extensions),
        Ok(Answer::Stream(started)) => {
            let watch = Watched::new(Some(x.record), &x.gateway.route_metrics);
            let events = (Some(started.first), started.events);
            return sse(
                x.gateway,
                (&id, x.dialect),
                events,
                watch,
                started.extensions,
            );
        }
        // v0.3 clients read any answer to a stream call as SSE: a one-event stream.
        Ok(Answer::Unstarted(err, extensions)) if x.dialect != Dialect::V1_0 => {
            let watch = Watched::new(None, &x.gateway.route_metrics);
            let events = (None, stream::once(ready(Err(err))));
            return sse(x.gateway, (&id, x.dialect), events, watch, extensions);
        }
        Ok(Answer::Unstarted(err, extensions)) => {
            (x.dialect.error_bytes(Some(&id), &err), extensions)
        }
        Ok(Answer::Refused(refusal)) => {
            let body = refusal.body(Some(&id));
            x.record.sent(body.len());
            return Handled::Refused(refusal, body);
        }
        Ok(Answer::Skipped) => return Handled::Nothing,
        Err(err) => (x.dialect.error_bytes(Some(&id), &err), None),
    };
    x.record.sent(out.len());
    Handled::Json(out, extensions)
}

/// The SSE body of a stream call: `first`, then `events`, framed in `dialect`.
fn sse<S, W>(
    gateway: &Gateway,
    (id, dialect): (&str, Dialect),
    (first, events): (Option<Box<StreamResponse>>, S),
    watch: W,
    extensions: Option<HeaderValue>,
) -> Handled
where
    S: Stream<Item = Result<StreamResponse, A2aError>> + Send + Unpin + 'static,
    W: Watch + Send + Unpin + 'static,
{
    let body = SseBody::new(
        (id.into(), dialect),
        first,
        events,
        gateway.keepalive,
        watch,
    );
    Handled::Stream(Body::from_stream(body), extensions)
}

/// The HTTP status of a call the gateway refuses with a JSON-RPC error
/// (`--refusal-status`): the one that says why, or 200 as JSON-RPC servers answer every
/// error. Some SDK clients raise on a status other than 2xx before reading the body
/// (the reference SDK for Python: its user reads only "HTTP Error 429"); with `jsonrpc`
/// they show the error's code, reason and retry advice (docs/errors.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalStatus {
    /// 401, 403, 415, 429, 431 or 503, by what refused the call.
    #[default]
    Http,
    /// 200, the refusal told by the JSON-RPC error alone.
    Jsonrpc,
}

impl RefusalStatus {
    /// The status a refusal meaning `status` is answered with.
    fn of(self, status: StatusCode) -> StatusCode {
        match self {
            RefusalStatus::Http => status,
            RefusalStatus::Jsonrpc => StatusCode::OK,
        }
    }
}

/// The response to a request a limit or authentication refused: its status (as `policy`
/// says), `Retry-After`, `WWW-Authenticate`, and the JSON-RPC error `body` (empty for a
/// notification, whose refusal keeps its status: there is nothing else to tell it by).
/// CORS headers are added by the layer.
pub fn refused_response(refusal: &Refusal, body: Vec<u8>, policy: RefusalStatus) -> Response {
    let empty = body.is_empty();
    let mut response = json_response(body, None);
    *response.status_mut() = match empty {
        true => refusal.status,
        false => policy.of(refusal.status),
    };
    let headers = response.headers_mut();
    if empty {
        headers.remove(http::header::CONTENT_TYPE);
    }
    if let Some(seconds) = refusal.retry_after {
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    for challenge in &refusal.challenges {
        headers.append(http::header::WWW_AUTHENTICATE, challenge.clone());
    }
    response
}

/// The reply to a request refused as a whole before any call (its body over the bytes in
/// flight, a batch's credentials), counted as rejected and logged in its `record`.
fn refused_request(gateway: &Gateway, mut record: CallRecord, refusal: &Refusal) -> Response {
    gateway.route_metrics.rejected(refusal.error.kind);
    record.failed(refusal.error.kind);
    let out = refusal.body(None);
    record.sent(out.len());
    refused_response(refusal, out, gateway.refusal_status)
}

/// The reply to a request refused before any method was known, counted as rejected and
/// logged in its `record`.
fn rejected_response(gateway: &Gateway, mut record: CallRecord, err: &A2aError) -> Response {
    gateway.route_metrics.rejected(err.kind);
    record.failed(err.kind);
    let out = error_bytes(None, err);
    record.sent(out.len());
    json_response(out, None)
}

//! The JSON-RPC 2.0 endpoint (spec 9): the envelope's checks in order, batches and
//! notifications, version negotiation, dispatch to the backend, and the reply as JSON or
//! SSE (the envelope and the response writers live in `envelope`, streams in `sse`).
//!
//! The envelope is parsed with borrowed `RawValue`s: the id is echoed byte for byte (a
//! 30-digit integer keeps its digits) and params go straight into the protobuf type.
//!
//! A request's work is bounded whatever it holds: a batch has at most `max-batch-size`
//! members (counted before any is decoded) and its reply at most `max-batch-reply` bytes
//! of results; the body's bytes count against `global-max-body-bytes-in-flight` while it
//! is read and handled.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{HeaderValue, StatusCode};
use serde::de::{DeserializeSeed, IgnoredAny, SeqAccess, Visitor};
use serde_json::json;
use serde_json::value::RawValue;

use crate::backend::affinity::ids::{overlong, MAX_ID_BYTES};
use crate::backend::fault::Fault;
use crate::backend::{Call, Status};
use crate::front::envelope::{
    envelope_error, error_bytes, error_bytes_in, invalid_request, json_response, parse_error,
    read_body, sse_response, valid_id, write_error, write_response, BodyError, Envelope, Params,
};
use crate::front::limits::{CallKind, Permit, Refusal, RouteLimits};
use crate::front::sse::SseBody;
use crate::front::Gateway;
use crate::protocol::error::{A2aError, ErrorKind, GatewayFault};
use crate::protocol::legacy::{self, Dialect, Method};
use crate::protocol::ops::{Op, Reply, Request, StreamRequest, UnaryRequest};
use crate::protocol::params::{legacy_extensions, legacy_requested, negotiate_version};
use crate::push::pushed_url;
use crate::telemetry::access::CallRecord;
use crate::telemetry::untrusted::{clip, clip_message};
use crate::telemetry::{Meter, Outcome};

/// Batch members in flight at once.
const BATCH_CONCURRENCY: usize = 16;

/// What handling one request element gave: the reply to send, if any.
enum Handled {
    /// A JSON-RPC response object, with the backend's activated extensions.
    Json(Vec<u8>, Option<HeaderValue>),
    /// An SSE stream.
    Stream(Box<SseBody>, Option<HeaderValue>),
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
    // A browser sends a cross-site form post (text/plain, urlencoded, multipart) without a
    // CORS preflight; only JSON is a JSON-RPC request, so nothing else is read.
    if !is_json(&parts.headers) {
        let err = invalid_request("the Content-Type must be application/json");
        let mut response = rejected_response(&gateway, &parts, 0, &err);
        *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        return response;
    }
    // Held until the request is answered: the body is kept that long.
    let mut charge = limits.as_ref().map(|limits| limits.body_charge());
    let expects_continue = parts
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let bytes = match read_body(body, gateway.max_body, expects_continue, charge.as_mut()).await {
        Ok(bytes) => bytes,
        Err(BodyError::Invalid(err)) => return rejected_response(&gateway, &parts, 0, &err),
        Err(BodyError::TooLarge(err)) => {
            let mut response = rejected_response(&gateway, &parts, 0, &err);
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
        Err(BodyError::Refused(refusal)) => {
            let mut response = rejected_response(&gateway, &parts, 0, &refusal.error);
            *response.status_mut() = refusal.status;
            if let Some(seconds) = refusal.retry_after {
                let retry = HeaderValue::from(seconds);
                response
                    .headers_mut()
                    .insert(http::header::RETRY_AFTER, retry);
            }
            return response;
        }
    };
    let ctx = Context {
        request: &parts,
        limits: limits.as_ref(),
    };
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => handle_batch(&gateway, &ctx, &bytes).await,
        Some(b'{') => {
            let envelope = match Envelope::parse(&bytes) {
                Ok(envelope) => envelope,
                Err(e) => {
                    return rejected_response(&gateway, &parts, bytes.len(), &envelope_error(&e))
                }
            };
            match handle_one(&gateway, &ctx, envelope, false, bytes.len()).await {
                Handled::Json(body, ext) => json_response(body, ext),
                Handled::Stream(events, ext) => sse_response(Body::from_stream(*events), ext),
                Handled::Refused(refusal, body) => refused_response(&refusal, body),
                Handled::Nothing => StatusCode::NO_CONTENT.into_response(),
            }
        }
        _ => {
            let err = match serde_json::from_slice::<&RawValue>(&bytes) {
                Ok(_) => invalid_request("the request must be a JSON object or array"),
                Err(e) => parse_error(&e),
            };
            rejected_response(&gateway, &parts, bytes.len(), &err)
        }
    }
}

async fn handle_batch(gateway: &Gateway, ctx: &Context<'_>, bytes: &[u8]) -> Response {
    let max = gateway.batch.size;
    let over = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = BatchMembers { max, over: &over }
        .deserialize(&mut de)
        .and_then(|elements| de.end().map(|()| elements));
    let elements = match parsed {
        Ok(elements) => elements,
        Err(_) if over.get() => {
            let why = format!(
                "the batch has more than {max} members, the limit of this endpoint \
                 (max-batch-size); no member was called"
            );
            return rejected_response(gateway, ctx.request, bytes.len(), &invalid_request(&why));
        }
        Err(e) => return rejected_response(gateway, ctx.request, bytes.len(), &parse_error(&e)),
    };
    if elements.is_empty() {
        let err = invalid_request("empty batch");
        return rejected_response(gateway, ctx.request, bytes.len(), &err);
    }
    // Members run concurrently, but boundedly: one request must not open a backend call per
    // element at once. `buffered` keeps the answers in request order, and each is added to
    // the reply (or dropped) as it comes, so at most the bound and the members in flight
    // are held.
    // Collected first (at most `max-batch-size` futures): a lazy map here makes the
    // handler's future not `Send` for every lifetime, as axum needs.
    // Set once the reply is full: members not yet started are then answered without being
    // called, so a batch whose replies are large costs at most the bound and the members in
    // flight at that moment, not every member's reply.
    let full = AtomicBool::new(false);
    let members: Vec<_> = elements
        .iter()
        .map(|raw| batch_member(gateway, ctx, raw, &full))
        .collect();
    let mut answers = futures::stream::iter(members).buffered(BATCH_CONCURRENCY);
    let mut body = Vec::new();
    while let Some((id, member, made)) = answers.next().await {
        // A member a limit refused answers in the batch; the batch itself is answered.
        let (Handled::Json(mut response, _) | Handled::Refused(_, mut response)) = member else {
            continue;
        };
        if response.is_empty() {
            continue;
        }
        // From the first reply that does not fit on, replies are replaced by an error: the
        // client gets a prefix of results and knows which calls' results it lacks.
        let over = body.len() + response.len() + 2 > gateway.batch.reply;
        if made && (full.load(Relaxed) || over) {
            full.store(true, Relaxed);
            let made = Some(response.len());
            response = reply_too_large(id.as_deref(), made, gateway.batch.reply);
        }
        body.push(if body.is_empty() { b'[' } else { b',' });
        body.extend_from_slice(&response);
    }
    if full.load(Relaxed) {
        tracing::debug!(
            limit = gateway.batch.reply,
            "batch reply bound reached (max-batch-reply)"
        );
    }
    if body.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    body.push(b']');
    json_response(body, None)
}

/// The top-level array of a batch as its members' raw texts, at most `max` of them: the
/// first member past `max` is skipped, sets `over` and stops the parse, so a batch of
/// millions costs a scan of `max + 1` members and no more than `max` slices.
struct BatchMembers<'a> {
    max: usize,
    over: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for BatchMembers<'_> {
    type Value = Vec<&'de RawValue>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BatchMembers<'_> {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC batch")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while members.len() < self.max {
            match seq.next_element::<&'de RawValue>()? {
                Some(member) => members.push(member),
                None => return Ok(members),
            }
        }
        if seq.next_element::<IgnoredAny>()?.is_some() {
            self.over.set(true);
            return Err(serde::de::Error::custom("too many batch members"));
        }
        Ok(members)
    }
}

/// The error in place of a member's reply past the batch reply's bound: of the call made,
/// whose reply had `bytes`, or (`None`) of one not made because the reply was full.
fn reply_too_large(id: Option<&str>, bytes: Option<usize>, max: usize) -> Vec<u8> {
    let message = match bytes {
        Some(bytes) => format!(
            "the call was made, but its reply ({bytes} bytes) does not fit in the batch \
             reply's limit of {max} bytes (max-batch-reply); send it alone or in a smaller batch"
        ),
        None => format!(
            "the call was not made: the batch reply had reached its limit of {max} bytes \
             (max-batch-reply); send it alone or in a smaller batch"
        ),
    };
    let mut error = A2aError::gateway(GatewayFault::ReplyTooLarge, message);
    if let Some(info) = error.data.first_mut() {
        info["metadata"] = json!({"limit": "max-batch-reply", "value": max.to_string()});
    }
    let mut out = Vec::with_capacity(320);
    write_error(&mut out, id, &error);
    out
}

/// One batch member: its id (for an error in place of its reply), what handling it gave,
/// and whether that was a call (not an answer for a member the full reply left uncalled).
async fn batch_member(
    gateway: &Gateway,
    ctx: &Context<'_>,
    raw: &RawValue,
    full: &AtomicBool,
) -> (Option<Box<str>>, Handled, bool) {
    // A member answered with an error without a call: counted, logged, and its bytes.
    let answered = |id: Option<&str>, kind: ErrorKind, out: Vec<u8>| {
        gateway.metrics.rejected(kind);
        let mut record = CallRecord::start(ctx.request, raw.get().len(), id);
        record.failed(kind);
        record.sent(out.len());
        Handled::Json(out, None)
    };
    let rejected = |err: A2aError| answered(None, err.kind, error_bytes(None, &err));
    if !raw.get().starts_with('{') {
        let err = invalid_request("each batch element must be a JSON object");
        return (None, rejected(err), true);
    }
    match Envelope::parse(raw.get().as_bytes()) {
        Ok(envelope) => {
            let id = envelope
                .id
                .as_deref()
                .filter(|id| valid_id(id))
                .map(Box::from);
            if full.load(Relaxed) {
                let out = match envelope.id {
                    Some(_) => reply_too_large(id.as_deref(), None, gateway.batch.reply),
                    None => Vec::new(),
                };
                let handled = answered(id.as_deref(), ErrorKind::Internal, out);
                return (id, handled, false);
            }
            let handled = handle_one(gateway, ctx, envelope, true, raw.get().len()).await;
            (id, handled, true)
        }
        Err(e) => (None, rejected(envelope_error(&e)), true),
    }
}

/// One call of `bytes_in` bytes, with its access log line and server span (`CallRecord`:
/// finished when this returns, or taken over by a stream's body until the stream ends).
async fn handle_one(
    gateway: &Gateway,
    ctx: &Context<'_>,
    envelope: Envelope<'_>,
    in_batch: bool,
    bytes_in: usize,
) -> Handled {
    let started = Instant::now();
    let mut record = CallRecord::start(ctx.request, bytes_in, envelope.id.as_deref());
    // Before the method is known, failures count as rejected requests.
    let reject = |record: &mut CallRecord, id: Option<&str>, err: A2aError| {
        gateway.metrics.rejected(err.kind);
        record.failed(err.kind);
        let out = error_bytes(id, &err);
        record.sent(out.len());
        Handled::Json(out, None)
    };
    let id = match envelope.id.as_deref() {
        Some(id) if !valid_id(id) => {
            return reject(
                &mut record,
                None,
                invalid_request("id must be a string, an integer or null"),
            )
        }
        id => id,
    };
    if envelope.jsonrpc.as_deref() != Some("\"2.0\"") {
        return reject(&mut record, id, invalid_request("jsonrpc must be \"2.0\""));
    }
    let Some(name) = envelope
        .method
        .as_deref()
        .and_then(|m| serde_json::from_str::<Cow<str>>(m).ok())
    else {
        return reject(&mut record, id, invalid_request("method must be a string"));
    };
    let (params, decoded) = match envelope.params {
        Some(Params::Text(text)) => (Some(text), None),
        Some(Params::Decoded(request)) => (None, Some(request)),
        None => (None, None),
    };
    if params.as_deref().is_some_and(|p| !p.starts_with('{')) {
        return reject(&mut record, id, invalid_request("params must be an object"));
    }
    // A v0.3 client's call is served by a v1.0 operation (protocol/legacy.rs).
    let v03 = Method::from_name(&name).filter(|_| {
        gateway.legacy && legacy_requested(&ctx.request.headers, ctx.request.uri.query())
    });
    // The reference SDK's order: method, then params, then version.
    let Some(op) = v03.map(Method::op).or_else(|| Op::from_name(&name)) else {
        let err = A2aError::new(ErrorKind::MethodNotFound);
        return match id {
            Some(_) => reject(&mut record, id, err),
            None => Handled::Nothing,
        };
    };
    let version = v03.map_or(Dialect::V1_0, |_| Dialect::V0_3).label();
    tracing::debug!(a2a_version = version, method = %clip(&name), "call");
    let meter = Meter::start(&gateway.metrics, op, started).in_v03(v03);
    record.method(op, ctx.request, id);
    let refused = |record: &mut CallRecord, refusal: Refusal| {
        tracing::debug!(
            method = op.name(),
            limit = refusal.limit.name(),
            "call refused"
        );
        meter.record(Outcome::Error(refusal.error.kind));
        record.failed(refusal.error.kind);
        let body = id.map_or_else(Vec::new, |id| refusal.body(Some(id)));
        record.sent(body.len());
        Handled::Refused(Box::new(refusal), body)
    };
    // Notifications get no answer, not even an error.
    let fail = |record: &mut CallRecord, err: A2aError| {
        meter.record(Outcome::Error(err.kind));
        record.failed(err.kind);
        match id {
            Some(_) => {
                let out = error_bytes_in(id, &err, v03);
                record.sent(out.len());
                Handled::Json(out, None)
            }
            None => Handled::Nothing,
        }
    };
    // Params the envelope's parse decoded were decoded for this same v1.0 operation (it
    // read the same method name). One expression: a named result would keep its (large)
    // slot in this future.
    let params = params.as_deref();
    let mut request = match decoded.map_or_else(
        || v03.map_or_else(|| Request::decode(op, params), |m| m.decode(params)),
        |request| Ok(*request),
    ) {
        Ok(request) => request,
        Err(err) => return fail(&mut record, err),
    };
    if let Some(tenant) = &gateway.tenant {
        if let Err(err) = pin_tenant(&mut request, tenant) {
            return fail(&mut record, err);
        }
    }
    if let Some(length) = match &mut request {
        Request::Unary(request) => overlong(request),
        Request::Stream(request) => overlong(request),
    } {
        let why = format!("an id of {length} bytes is longer than the {MAX_ID_BYTES} allowed");
        return fail(&mut record, A2aError::invalid_params("", &why));
    }
    record.request(&request);
    if v03.is_none() {
        if let Err(err) = negotiate_version(&ctx.request.headers, ctx.request.uri.query()) {
            return fail(&mut record, err);
        }
    }
    // Last of the checks (it may ask DNS): a refused push URL never reaches the agent.
    // Boxed: only a call that carries a push URL pays for the resolver's (large) future.
    if let (Some(guard), Some((url, field))) = (&gateway.push, pushed_url(&request, v03.is_some()))
    {
        if let Err(err) = Box::pin(guard.check_pushed(url, field)).await {
            return fail(&mut record, err);
        }
    }
    let mut forwarded = gateway.forward.select(&ctx.request.headers);
    if v03.is_some() {
        legacy_extensions(&ctx.request.headers, &mut forwarded);
    }
    let trace = record.propagate(&mut forwarded);
    let request = match request {
        Request::Stream(_) if in_batch => {
            let why = format!("{} streams and cannot be part of a batch", op.name());
            return fail(&mut record, invalid_request(&why));
        }
        Request::Stream(request) => {
            let call = Call {
                request,
                forwarded,
                timeout: gateway.stream_timeout,
                trace,
            };
            // Boxed: the stream's start is a large future, and unary calls should not
            // carry its size (bytes per call, tests/it/cost_budget.rs). Streaming
            // notifications are not started: nobody would read them.
            let Some(id) = id else {
                return Handled::Nothing;
            };
            let permit = match ctx.limits.map(|l| l.admit(CallKind::Stream, 1)).transpose() {
                Ok(permit) => permit,
                Err(refusal) => return refused(&mut record, refusal),
            };
            let idle = ctx.limits.and_then(|l| l.stream_idle);
            return Box::pin(stream(
                gateway,
                id,
                call,
                &meter,
                (permit, idle),
                record,
                v03,
            ))
            .await;
        }
        Request::Unary(request) => request,
    };
    let call = Call {
        request,
        forwarded,
        timeout: gateway.unary_timeout,
        trace,
    };
    // Held until the answer is in: the call counts against the concurrency limits.
    let width = gateway.backend.width(&call.request);
    let _permit = match ctx
        .limits
        .map(|l| l.admit(CallKind::Unary, width))
        .transpose()
    {
        Ok(permit) => permit,
        Err(refusal) => return refused(&mut record, refusal),
    };
    let (answer, status) = unary(gateway, call).await;
    record.backend_status(status);
    match id {
        None => {
            match answer {
                Ok(_) => meter.record(Outcome::Ok),
                Err(err) => {
                    let message = clip_message(&err.message);
                    tracing::debug!(method = op.name(), %message, "notification failed");
                    meter.record(Outcome::Error(err.kind));
                    record.failed(err.kind);
                }
            }
            Handled::Nothing
        }
        Some(id) => match answer {
            Ok((reply, ext)) => {
                record.reply(&reply);
                // The response is written once, straight into the body's buffer.
                let mut out = Vec::with_capacity(reply.json_capacity() + id.len() + 40);
                let written = match (&reply, &gateway.card) {
                    (Reply::GetExtendedAgentCard(card), _) if v03.is_some() => {
                        match extended_card_v03(card, gateway, ctx.request) {
                            Ok(card) => write_response(&mut out, Some(id), |out| {
                                serde_json::to_writer(out, &card)
                            }),
                            Err(err) => return fail(&mut record, err),
                        }
                    }
                    (Reply::GetExtendedAgentCard(card), Some(service)) => {
                        write_response(&mut out, Some(id), |out| {
                            let card = serde_json::to_value(card)?;
                            serde_json::to_writer(out, &service.rewrite_extended(card, ctx.request))
                        })
                    }
                    _ => write_response(&mut out, Some(id), |out| match v03 {
                        None => reply.write_json(out),
                        Some(method) => method.write_result(out, |v1| reply.write_json(v1)),
                    }),
                };
                match written {
                    Ok(()) => {
                        meter.record(Outcome::Ok);
                        record.sent(out.len());
                        Handled::Json(out, ext)
                    }
                    Err(e) => fail(
                        &mut record,
                        Fault::BadResponse(format!("the reply cannot be encoded as JSON: {e}"))
                            .into(),
                    ),
                }
            }
            Err(err) => fail(&mut record, err),
        },
    }
}

/// The v0.3 form of an extended card (`agent/getAuthenticatedExtendedCard`): rewritten by
/// the route's card service, whose endpoint (the gateway's) serves v0.3.
fn extended_card_v03(
    card: &crate::proto::AgentCard,
    gateway: &Gateway,
    request: &http::request::Parts,
) -> Result<serde_json::Value, A2aError> {
    let card = serde_json::to_value(card)
        .map_err(|e| Fault::BadResponse(format!("the card cannot be encoded as JSON: {e}")))?;
    match &gateway.card {
        Some(service) => {
            let endpoint = service.endpoint_url(request);
            legacy::card(service.rewrite_extended(card, request), Some(&endpoint))
        }
        None => legacy::card(card, None),
    }
}

/// A route with a fixed tenant sets it on requests that name none and refuses requests
/// naming another: a route never leads to another tenant.
fn pin_tenant(request: &mut Request, tenant: &str) -> Result<(), A2aError> {
    let field = request.tenant_mut();
    if field.is_empty() {
        field.push_str(tenant);
    } else if field != tenant {
        let why = format!("this endpoint serves tenant {tenant:?} only");
        return Err(A2aError::invalid_params("tenant", &why));
    }
    Ok(())
}

/// Calls a unary operation within the deadline; returns the reply (or the client's error:
/// the one place a backend error becomes one), and the backend's status for the access log.
async fn unary(
    gateway: &Gateway,
    call: Call<UnaryRequest>,
) -> (Result<(Reply, Option<HeaderValue>), A2aError>, Option<u16>) {
    let pending = gateway.backend.unary(call);
    let answer = match gateway.unary_timeout {
        Some(limit) => tokio::time::timeout(limit, pending)
            .await
            .unwrap_or_else(|_| Err(Fault::deadline(limit).into())),
        None => pending.await,
    };
    match answer {
        Ok(answer) => (
            Ok((answer.value, answer.extensions)),
            answer.status.map(Status::number),
        ),
        Err(err) => {
            let status = err.status().map(Status::number);
            (Err(err.into()), status)
        }
    }
}

/// Starts a stream and waits for its first event (within the first-event deadline), so an
/// early error is a plain reply. A v0.3 call's early error is a one-event stream, as the
/// v0.3 endpoint answers it (v0.3 clients read any answer to a stream call as SSE).
async fn stream(
    gateway: &Gateway,
    id: &str,
    call: Call<StreamRequest>,
    meter: &Meter<'_>,
    (permit, idle): (Option<Permit>, Option<Duration>),
    mut record: CallRecord,
    v03: Option<Method>,
) -> Handled {
    let id: Box<str> = id.into();
    // The backend's status is the stream start's: a later error is the stream's end.
    let mut status = None;
    let first_event = async {
        let answer = gateway.backend.stream(call).await.map_err(|e| {
            status = e.status();
            (e, None)
        })?;
        status = answer.status;
        let mut events = answer.value;
        match events.next().await {
            Some(Ok(event)) => Ok((Some(event), events, answer.extensions)),
            Some(Err(err)) => Err((err, answer.extensions)),
            // An empty stream would leave the request without any answer (found by
            // fuzzing, fuzz/README.md): the backend broke the stream's contract.
            None => Err((
                Fault::BadResponse("the backend's stream ended before its first event".into())
                    .into(),
                answer.extensions,
            )),
        }
    };
    let started = match gateway.first_event_timeout {
        Some(limit) => match tokio::time::timeout(limit, first_event).await {
            Ok(started) => started,
            Err(_) => Err((Fault::deadline(limit).into(), None)),
        },
        None => first_event.await,
    };
    record.backend_status(status.map(Status::number));
    let (first, events, extensions) = match started {
        Ok(started) => started,
        Err((err, extensions)) => {
            meter.record(Outcome::Error(err.kind()));
            record.failed(err.kind());
            let Some(method) = v03 else {
                let out = error_bytes(Some(&id), &A2aError::from(err));
                record.sent(out.len());
                return Handled::Json(out, extensions);
            };
            // v0.3 clients read any answer to a stream call as SSE: a one-event stream.
            let events = futures::stream::once(async { Err(err) }).boxed();
            let body = sse_body(gateway, id.clone(), None, events).in_v03(method);
            return Handled::Stream(Box::new(body), extensions);
        }
    };
    meter.record(Outcome::Ok);
    let body = sse_body(gateway, id, first, events).limited(permit, idle);
    let mut body = match v03 {
        Some(method) => body.in_v03(method),
        None => body,
    };
    body.record(record);
    Handled::Stream(Box::new(body), extensions)
}

/// The SSE body of a started stream.
fn sse_body(
    gateway: &Gateway,
    id: Box<str>,
    first: Option<crate::proto::StreamResponse>,
    events: crate::backend::EventStream,
) -> SseBody {
    SseBody::new(
        id,
        first,
        events,
        gateway.keepalive,
        gateway.stream_timeout,
        gateway.lifecycle.closing(),
        gateway.metrics.stream_opened(),
    )
}

/// The response to a request a limit refused: the limit's status, `Retry-After`, and the
/// JSON-RPC error `body` (empty for a notification). CORS headers are added by the layer.
pub fn refused_response(refusal: &Refusal, body: Vec<u8>) -> Response {
    let empty = body.is_empty();
    let mut response = json_response(body, None);
    *response.status_mut() = refusal.status;
    let headers = response.headers_mut();
    if empty {
        headers.remove(http::header::CONTENT_TYPE);
    }
    if let Some(seconds) = refusal.retry_after {
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The reply to a request of `bytes_in` bytes refused before any method was known,
/// counted as rejected and logged.
fn rejected_response(
    gateway: &Gateway,
    request: &http::request::Parts,
    bytes_in: usize,
    err: &A2aError,
) -> Response {
    gateway.metrics.rejected(err.kind);
    let mut record = CallRecord::start(request, bytes_in, None);
    record.failed(err.kind);
    let out = error_bytes(None, err);
    record.sent(out.len());
    json_response(out, None)
}

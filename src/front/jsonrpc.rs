//! The JSON-RPC 2.0 endpoint (spec 9): envelope rules, batches and notifications, version
//! negotiation, dispatch to the backend, and the reply as JSON or SSE.
//!
//! The envelope is parsed with borrowed `RawValue`s: the id is echoed byte for byte (a
//! 30-digit integer keeps its digits) and params go straight into the protobuf type.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use http_body_util::BodyExt;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::backend::fault::Fault;
use crate::backend::Call;
use crate::front::sse::SseFrames;
use crate::front::Gateway;
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Op, Reply, Request, StreamRequest, UnaryRequest};
use crate::protocol::params::{negotiate_version, EXTENSIONS};
use crate::telemetry::{Meter, Outcome as Ended};

/// Past the limit, up to this much more body is read and discarded so the client gets
/// its JSON-RPC error instead of a reset connection.
const MAX_DRAIN: usize = 64 << 20;
/// Batch members in flight at once.
const BATCH_CONCURRENCY: usize = 16;

/// The request envelope. Fields are raw so that each rule can be checked separately and
/// an absent `id` (notification) is told apart from `"id": null`.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// What one request element turns into.
enum Outcome {
    /// A JSON-RPC response object, with the backend's activated extensions.
    Json(Vec<u8>, Option<HeaderValue>),
    /// An SSE stream.
    Stream(Box<SseFrames>, Option<HeaderValue>),
    /// A notification: no response.
    Nothing,
}

/// The request-wide facts every element of a batch shares.
struct Context<'a> {
    headers: &'a HeaderMap,
    query: Option<&'a str>,
}

/// `POST` handler of the JSON-RPC endpoint. Every failure becomes a JSON-RPC error.
pub async fn handle(State(gateway): State<Arc<Gateway>>, request: http::Request<Body>) -> Response {
    // The request is taken whole: extracting `HeaderMap` and `Uri` would clone them.
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, gateway.max_body).await {
        Ok(bytes) => bytes,
        Err(err) => return rejected_response(&gateway, &err),
    };
    let ctx = Context {
        headers: &parts.headers,
        query: parts.uri.query(),
    };
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => handle_batch(&gateway, &ctx, &bytes).await,
        Some(b'{') => {
            let envelope = match serde_json::from_slice::<Envelope>(&bytes) {
                Ok(envelope) => envelope,
                Err(e) => return rejected_response(&gateway, &envelope_error(&e)),
            };
            match handle_one(&gateway, &ctx, envelope, false).await {
                Outcome::Json(body, ext) => json_response(body, ext),
                Outcome::Stream(frames, ext) => sse_response(*frames, ext),
                Outcome::Nothing => StatusCode::NO_CONTENT.into_response(),
            }
        }
        _ => {
            let err = match serde_json::from_slice::<&RawValue>(&bytes) {
                Ok(_) => invalid_request("the request must be a JSON object or array"),
                Err(e) => parse_error(&e),
            };
            rejected_response(&gateway, &err)
        }
    }
}

async fn handle_batch(gateway: &Gateway, ctx: &Context<'_>, bytes: &[u8]) -> Response {
    let elements = match serde_json::from_slice::<Vec<&RawValue>>(bytes) {
        Ok(elements) => elements,
        Err(e) => return rejected_response(gateway, &parse_error(&e)),
    };
    if elements.is_empty() {
        let err = invalid_request("empty batch");
        return rejected_response(gateway, &err);
    }
    // Members run concurrently, but boundedly: one request must not open a backend call per
    // element at once. `buffered` keeps the answers in request order.
    let members: Vec<_> = elements
        .iter()
        .map(|raw| batch_member(gateway, ctx, raw))
        .collect();
    let outcomes: Vec<Outcome> = futures::stream::iter(members)
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await;
    let mut body = Vec::new();
    for outcome in outcomes {
        if let Outcome::Json(response, _) = outcome {
            body.push(if body.is_empty() { b'[' } else { b',' });
            body.extend_from_slice(&response);
        }
    }
    if body.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    body.push(b']');
    json_response(body, None)
}

async fn batch_member(gateway: &Gateway, ctx: &Context<'_>, raw: &RawValue) -> Outcome {
    if !raw.get().starts_with('{') {
        let err = invalid_request("each batch element must be a JSON object");
        gateway.metrics.rejected(err.kind);
        return Outcome::Json(error_bytes(None, &err), None);
    }
    match serde_json::from_str::<Envelope>(raw.get()) {
        Ok(envelope) => handle_one(gateway, ctx, envelope, true).await,
        Err(e) => {
            let err = envelope_error(&e);
            gateway.metrics.rejected(err.kind);
            Outcome::Json(error_bytes(None, &err), None)
        }
    }
}

async fn handle_one(
    gateway: &Gateway,
    ctx: &Context<'_>,
    envelope: Envelope<'_>,
    in_batch: bool,
) -> Outcome {
    let started = Instant::now();
    // Before the method is known, failures count as rejected requests.
    let reject = |id: Option<&RawValue>, err: A2aError| {
        gateway.metrics.rejected(err.kind);
        Outcome::Json(error_bytes(id, &err), None)
    };
    let id = match envelope.id {
        Some(id) if !valid_id(id) => {
            return reject(
                None,
                invalid_request("id must be a string, an integer or null"),
            )
        }
        id => id,
    };
    if envelope.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return reject(id, invalid_request("jsonrpc must be \"2.0\""));
    }
    let Some(name) = envelope
        .method
        .and_then(|m| serde_json::from_str::<Cow<str>>(m.get()).ok())
    else {
        return reject(id, invalid_request("method must be a string"));
    };
    if envelope.params.is_some_and(|p| !p.get().starts_with('{')) {
        return reject(id, invalid_request("params must be an object"));
    }
    // The reference SDK's order: method, then params, then version.
    let Some(op) = Op::from_name(&name) else {
        let err = A2aError::new(ErrorKind::MethodNotFound);
        return match id {
            Some(_) => reject(id, err),
            None => Outcome::Nothing,
        };
    };
    let meter = Meter::start(&gateway.metrics, op, started);
    // Notifications get no answer, not even an error.
    let fail = |err: A2aError| {
        meter.record(Ended::Error(err.kind));
        match id {
            Some(_) => Outcome::Json(error_bytes(id, &err), None),
            None => Outcome::Nothing,
        }
    };
    let request = match Request::decode(op, envelope.params) {
        Ok(request) => request,
        Err(err) => return fail(err),
    };
    if let Err(err) = negotiate_version(ctx.headers, ctx.query) {
        return fail(err);
    }
    let forwarded = gateway.forward.select(ctx.headers);
    let request = match request {
        Request::Stream(request) if in_batch => {
            let why = format!(
                "{} streams and cannot be part of a batch",
                request.op().name()
            );
            return fail(invalid_request(&why));
        }
        // Streaming notifications are not started: nobody would read them.
        Request::Stream(_) if id.is_none() => return Outcome::Nothing,
        Request::Stream(request) => {
            let call = Call {
                request,
                forwarded,
                timeout: gateway.stream_timeout,
            };
            // Boxed: the stream's start is a large future, and unary calls should not
            // carry its size (bytes per call, tests/cost_budget.rs).
            return match id {
                Some(id) => Box::pin(stream(gateway, id, call, &meter)).await,
                None => Outcome::Nothing,
            };
        }
        Request::Unary(request) => request,
    };
    let call = Call {
        request,
        forwarded,
        timeout: gateway.unary_timeout,
    };
    match id {
        None => {
            match unary(gateway, call).await {
                Ok(_) => meter.record(Ended::Ok),
                Err(err) => {
                    tracing::debug!(method = op.name(), %err, "notification failed");
                    meter.record(Ended::Error(err.kind));
                }
            }
            Outcome::Nothing
        }
        Some(id) => match unary(gateway, call).await {
            Ok((reply, ext)) => {
                // The response is written once, straight into the body's buffer.
                let mut out = Vec::with_capacity(reply.json_size_hint() + id.get().len() + 40);
                match write_response(&mut out, Some(id), |out| reply.write_json(out)) {
                    Ok(()) => {
                        meter.record(Ended::Ok);
                        Outcome::Json(out, ext)
                    }
                    Err(e) => fail(
                        Fault::BadResponse(format!("the reply cannot be encoded as JSON: {e}"))
                            .into(),
                    ),
                }
            }
            Err(err) => fail(err),
        },
    }
}

/// Calls a unary operation within the deadline; returns the reply.
async fn unary(
    gateway: &Gateway,
    call: Call<UnaryRequest>,
) -> Result<(Reply, Option<HeaderValue>), A2aError> {
    let pending = gateway.backend.unary(call);
    let answer = match gateway.unary_timeout {
        Some(limit) => tokio::time::timeout(limit, pending)
            .await
            .map_err(|_| Fault::deadline(limit))??,
        None => pending.await?,
    };
    Ok((answer.value, answer.extensions))
}

/// Starts a stream and waits for its first event (within the first-event deadline), so an
/// early error is a plain reply.
async fn stream(
    gateway: &Gateway,
    id: &RawValue,
    call: Call<StreamRequest>,
    meter: &Meter<'_>,
) -> Outcome {
    let id: Box<RawValue> = id.to_owned();
    let failed = |err: A2aError, extensions| {
        meter.record(Ended::Error(err.kind));
        Outcome::Json(error_bytes(Some(&id), &err), extensions)
    };
    let first_event = async {
        let answer = gateway.backend.stream(call).await.map_err(|e| (e, None))?;
        let mut events = answer.value;
        match events.next().await {
            Some(Ok(event)) => Ok((Some(event), events, answer.extensions)),
            Some(Err(err)) => Err((err, answer.extensions)),
            None => Ok((None, events, answer.extensions)),
        }
    };
    let started = match gateway.first_event_timeout {
        Some(limit) => match tokio::time::timeout(limit, first_event).await {
            Ok(started) => started,
            Err(_) => Err((Fault::deadline(limit).into(), None)),
        },
        None => first_event.await,
    };
    let (first, events, extensions) = match started {
        Ok(started) => started,
        Err((err, extensions)) => return failed(err, extensions),
    };
    meter.record(Ended::Ok);
    let frames = SseFrames::new(
        id,
        first,
        events,
        gateway.keepalive,
        gateway.stream_timeout,
        gateway.metrics.stream_opened(),
    );
    Outcome::Stream(Box::new(frames), extensions)
}

/// Appends `{"jsonrpc":"2.0","id":…,"result":…}`, the result written by `result`.
pub fn write_response(
    out: &mut Vec<u8>,
    id: Option<&RawValue>,
    result: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.map_or("null", RawValue::get).as_bytes());
    out.extend_from_slice(b",\"result\":");
    result(out)?;
    out.push(b'}');
    Ok(())
}

/// Appends `{"jsonrpc":"2.0","id":…,"error":{…}}`.
pub fn write_error(out: &mut Vec<u8>, id: Option<&RawValue>, err: &A2aError) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.map_or("null", RawValue::get).as_bytes());
    out.extend_from_slice(b",\"error\":");
    // A `Value` always serializes.
    let _ = serde_json::to_writer(&mut *out, &err.to_json());
    out.push(b'}');
}

/// The reply to a request refused before any method was known, counted as rejected.
fn rejected_response(gateway: &Gateway, err: &A2aError) -> Response {
    gateway.metrics.rejected(err.kind);
    json_response(error_bytes(None, err), None)
}

fn error_bytes(id: Option<&RawValue>, err: &A2aError) -> Vec<u8> {
    if err.kind == ErrorKind::Internal {
        tracing::warn!(%err, "request failed");
    }
    let mut out = Vec::with_capacity(128);
    write_error(&mut out, id, err);
    out
}

fn invalid_request(why: &str) -> A2aError {
    A2aError::invalid_request(why)
}

fn parse_error(e: &serde_json::Error) -> A2aError {
    A2aError::with_message(ErrorKind::ParseError, format!("Invalid JSON payload: {e}"))
}

/// Syntax errors are parse errors; a well-formed object that is no envelope (e.g. a
/// duplicated key) is an invalid request.
fn envelope_error(e: &serde_json::Error) -> A2aError {
    match e.classify() {
        serde_json::error::Category::Data => invalid_request(&e.to_string()),
        _ => parse_error(e),
    }
}

/// JSON-RPC ids are strings, integers or null; fractions, booleans, arrays and objects
/// are refused (the reference SDK does the same).
fn valid_id(id: &RawValue) -> bool {
    let text = id.get();
    match text.as_bytes().first() {
        Some(b'"') => true,
        Some(b'n') => text == "null",
        Some(b'-' | b'0'..=b'9') => !text.contains(['.', 'e', 'E']),
        _ => false,
    }
}

/// Reads the body up to `limit` bytes. A larger body is drained (bounded) and refused with
/// a JSON-RPC error naming the limit. A body that arrives in one piece is not copied.
async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, A2aError> {
    let mut first = Bytes::new();
    let mut rest = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| invalid_request(&format!("request body could not be read: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen <= limit {
            if first.is_empty() {
                first = data;
            } else {
                if rest.is_empty() {
                    rest.extend_from_slice(&first);
                }
                rest.extend_from_slice(&data);
            }
        } else if seen > limit.saturating_add(MAX_DRAIN) {
            break;
        }
    }
    if seen > limit {
        return Err(invalid_request(&format!(
            "request body exceeds the limit of {limit} bytes"
        )));
    }
    Ok(if rest.is_empty() {
        first
    } else {
        rest.freeze()
    })
}

fn json_response(body: Vec<u8>, extensions: Option<HeaderValue>) -> Response {
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(ext) = extensions {
        headers.insert(EXTENSIONS, ext);
    }
    response
}

fn sse_response(frames: SseFrames, extensions: Option<HeaderValue>) -> Response {
    let mut response = Response::new(Body::from_stream(frames));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(ext) = extensions {
        headers.insert(EXTENSIONS, ext);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_types() {
        let ok = ["\"a\"", "null", "1", "-7", "123456789012345678901234567890"];
        for id in ok {
            assert!(valid_id(&RawValue::from_string(id.into()).unwrap()), "{id}");
        }
        for id in ["1.5", "1e3", "true", "[]", "{}"] {
            assert!(
                !valid_id(&RawValue::from_string(id.into()).unwrap()),
                "{id}"
            );
        }
    }
}

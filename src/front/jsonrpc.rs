//! The JSON-RPC 2.0 endpoint (spec 9): the envelope's checks in order, batches and
//! notifications, version negotiation, dispatch to the backend, and the reply as JSON or
//! SSE (the envelope and the response writers live in `envelope`, streams in `sse`).
//!
//! The envelope is parsed with borrowed `RawValue`s: the id is echoed byte for byte (a
//! 30-digit integer keeps its digits) and params go straight into the protobuf type.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{HeaderValue, StatusCode};
use serde_json::value::RawValue;

use crate::backend::fault::Fault;
use crate::backend::Call;
use crate::front::envelope::{
    envelope_error, error_bytes, invalid_request, json_response, parse_error, read_body,
    sse_response, valid_id, write_response, Envelope,
};
use crate::front::sse::SseBody;
use crate::front::Gateway;
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Op, Reply, Request, StreamRequest, UnaryRequest};
use crate::protocol::params::negotiate_version;
use crate::telemetry::{Meter, Outcome};

/// Batch members in flight at once.
const BATCH_CONCURRENCY: usize = 16;

/// What handling one request element gave: the reply to send, if any.
enum Handled {
    /// A JSON-RPC response object, with the backend's activated extensions.
    Json(Vec<u8>, Option<HeaderValue>),
    /// An SSE stream.
    Stream(Box<SseBody>, Option<HeaderValue>),
    /// A notification: no response.
    Nothing,
}

/// The request-wide facts every element of a batch shares.
struct Context<'a> {
    request: &'a http::request::Parts,
}

/// `POST` handler of the JSON-RPC endpoint. Every failure becomes a JSON-RPC error.
pub async fn handle(State(gateway): State<Arc<Gateway>>, request: http::Request<Body>) -> Response {
    // The request is taken whole: extracting `HeaderMap` and `Uri` would clone them.
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, gateway.max_body).await {
        Ok(bytes) => bytes,
        Err(err) => return rejected_response(&gateway, &err),
    };
    let ctx = Context { request: &parts };
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => handle_batch(&gateway, &ctx, &bytes).await,
        Some(b'{') => {
            let envelope = match Envelope::parse(&bytes) {
                Ok(envelope) => envelope,
                Err(e) => return rejected_response(&gateway, &envelope_error(&e)),
            };
            match handle_one(&gateway, &ctx, envelope, false).await {
                Handled::Json(body, ext) => json_response(body, ext),
                Handled::Stream(events, ext) => sse_response(Body::from_stream(*events), ext),
                Handled::Nothing => StatusCode::NO_CONTENT.into_response(),
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
    let handled: Vec<Handled> = futures::stream::iter(members)
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await;
    let mut body = Vec::new();
    for member in handled {
        if let Handled::Json(response, _) = member {
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

async fn batch_member(gateway: &Gateway, ctx: &Context<'_>, raw: &RawValue) -> Handled {
    if !raw.get().starts_with('{') {
        let err = invalid_request("each batch element must be a JSON object");
        gateway.metrics.rejected(err.kind);
        return Handled::Json(error_bytes(None, &err), None);
    }
    match Envelope::parse(raw.get().as_bytes()) {
        Ok(envelope) => handle_one(gateway, ctx, envelope, true).await,
        Err(e) => {
            let err = envelope_error(&e);
            gateway.metrics.rejected(err.kind);
            Handled::Json(error_bytes(None, &err), None)
        }
    }
}

async fn handle_one(
    gateway: &Gateway,
    ctx: &Context<'_>,
    envelope: Envelope<'_>,
    in_batch: bool,
) -> Handled {
    let started = Instant::now();
    // Before the method is known, failures count as rejected requests.
    let reject = |id: Option<&str>, err: A2aError| {
        gateway.metrics.rejected(err.kind);
        Handled::Json(error_bytes(id, &err), None)
    };
    let id = match envelope.id.as_deref() {
        Some(id) if !valid_id(id) => {
            return reject(
                None,
                invalid_request("id must be a string, an integer or null"),
            )
        }
        id => id,
    };
    if envelope.jsonrpc.as_deref() != Some("\"2.0\"") {
        return reject(id, invalid_request("jsonrpc must be \"2.0\""));
    }
    let Some(name) = envelope
        .method
        .as_deref()
        .and_then(|m| serde_json::from_str::<Cow<str>>(m).ok())
    else {
        return reject(id, invalid_request("method must be a string"));
    };
    let params = envelope.params.as_deref();
    if params.is_some_and(|p| !p.starts_with('{')) {
        return reject(id, invalid_request("params must be an object"));
    }
    // The reference SDK's order: method, then params, then version.
    let Some(op) = Op::from_name(&name) else {
        let err = A2aError::new(ErrorKind::MethodNotFound);
        return match id {
            Some(_) => reject(id, err),
            None => Handled::Nothing,
        };
    };
    let meter = Meter::start(&gateway.metrics, op, started);
    // Notifications get no answer, not even an error.
    let fail = |err: A2aError| {
        meter.record(Outcome::Error(err.kind));
        match id {
            Some(_) => Handled::Json(error_bytes(id, &err), None),
            None => Handled::Nothing,
        }
    };
    let mut request = match Request::decode(op, params) {
        Ok(request) => request,
        Err(err) => return fail(err),
    };
    if let Some(tenant) = &gateway.tenant {
        if let Err(err) = pin_tenant(&mut request, tenant) {
            return fail(err);
        }
    }
    if let Err(err) = negotiate_version(&ctx.request.headers, ctx.request.uri.query()) {
        return fail(err);
    }
    let forwarded = gateway.forward.select(&ctx.request.headers);
    let request = match request {
        Request::Stream(_) if in_batch => {
            let why = format!("{} streams and cannot be part of a batch", op.name());
            return fail(invalid_request(&why));
        }
        Request::Stream(request) => {
            let call = Call {
                request,
                forwarded,
                timeout: gateway.stream_timeout,
            };
            // Boxed: the stream's start is a large future, and unary calls should not
            // carry its size (bytes per call, tests/cost_budget.rs). Streaming
            // notifications are not started: nobody would read them.
            return match id {
                Some(id) => Box::pin(stream(gateway, id, call, &meter)).await,
                None => Handled::Nothing,
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
                Ok(_) => meter.record(Outcome::Ok),
                Err(err) => {
                    tracing::debug!(method = op.name(), %err, "notification failed");
                    meter.record(Outcome::Error(err.kind));
                }
            }
            Handled::Nothing
        }
        Some(id) => match unary(gateway, call).await {
            Ok((reply, ext)) => {
                // The response is written once, straight into the body's buffer.
                let mut out = Vec::with_capacity(reply.json_size_hint() + id.len() + 40);
                let written = match (&reply, &gateway.card) {
                    (Reply::GetExtendedAgentCard(card), Some(service)) => {
                        write_response(&mut out, Some(id), |out| {
                            let card = serde_json::to_value(card)?;
                            serde_json::to_writer(out, &service.rewrite_extended(card, ctx.request))
                        })
                    }
                    _ => write_response(&mut out, Some(id), |out| reply.write_json(out)),
                };
                match written {
                    Ok(()) => {
                        meter.record(Outcome::Ok);
                        Handled::Json(out, ext)
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
    id: &str,
    call: Call<StreamRequest>,
    meter: &Meter<'_>,
) -> Handled {
    let id: Box<str> = id.into();
    let failed = |err: A2aError, extensions| {
        meter.record(Outcome::Error(err.kind));
        Handled::Json(error_bytes(Some(&id), &err), extensions)
    };
    let first_event = async {
        let answer = gateway.backend.stream(call).await.map_err(|e| (e, None))?;
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
    let (first, events, extensions) = match started {
        Ok(started) => started,
        Err((err, extensions)) => return failed(err, extensions),
    };
    meter.record(Outcome::Ok);
    let body = SseBody::new(
        id,
        first,
        events,
        gateway.keepalive,
        gateway.stream_timeout,
        gateway.lifecycle.closing(),
        gateway.metrics.stream_opened(),
    );
    Handled::Stream(Box::new(body), extensions)
}

/// The reply to a request refused before any method was known, counted as rejected.
fn rejected_response(gateway: &Gateway, err: &A2aError) -> Response {
    gateway.metrics.rejected(err.kind);
    json_response(error_bytes(None, err), None)
}

//! The edge stack: the tower-http layers every HTTP request passes through before it
//! reaches the routes (`server::Frontend`), assembled once in `stack`, one concern per
//! layer: sensitive headers, request ids, a trace span per request, panics.
//!
//! The request body limit is not a layer: it stays in the JSON-RPC handler's own reading
//! (`envelope::read_body`); `stack` says why.

use std::any::Any;
use std::cell::Cell;
use std::convert::Infallible;

use axum::body::Body;
use bytes::Bytes;
use http::header::SET_COOKIE;
use http::{HeaderName, HeaderValue, Request, Response};
use tower::ServiceBuilder;
use tower_http::catch_panic::{CatchPanic, CatchPanicLayer, ResponseForPanic};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::cors::{Cors, CorsLayer};
use tower_http::request_id::{
    MakeRequestId, PropagateRequestId, PropagateRequestIdLayer, RequestId, SetRequestId,
    SetRequestIdLayer,
};
use tower_http::sensitive_headers::{
    SetSensitiveRequestHeaders, SetSensitiveRequestHeadersLayer, SetSensitiveResponseHeaders,
    SetSensitiveResponseHeadersLayer,
};
use tower_http::trace::{
    DefaultOnBodyChunk, DefaultOnEos, DefaultOnFailure, DefaultOnRequest, DefaultOnResponse,
    MakeSpan, Trace, TraceLayer,
};

use crate::front::envelope::{json_response, write_error};
use crate::protocol::error::{A2aError, ErrorKind};

/// `S` (the routes) inside the edge stack, outermost layer first.
pub type Edge<S> = SetSensitiveRequestHeaders<
    SetRequestId<
        Trace<
            PropagateRequestId<SetSensitiveResponseHeaders<CatchPanic<S, PanicReply>>>,
            SharedClassifier<ServerErrorsAsFailures>,
            RequestSpan,
            DefaultOnRequest,
            DefaultOnResponse,
            DefaultOnBodyChunk,
            DefaultOnEos,
            DefaultOnFailure,
        >,
        NewRequestId,
    >,
>;

/// Wraps the routes in the edge stack. Requests pass the layers top to bottom.
pub fn stack<S>(routes: S, sensitive: impl IntoIterator<Item = HeaderName>) -> Edge<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    // No body-limit layer: `RequestBodyLimitLayer` answers a too-large Content-Length with
    // 413 without reading the body, so hyper closes the connection, and a chunked body over
    // the limit fails mid-read; the handler's own reading (`envelope::read_body`) gives the
    // JSON-RPC -32600 naming the limit and drains the rest so the connection stays usable.
    ServiceBuilder::new()
        // Credentials (`params::sensitive_names`, the table the forward policy marks
        // never-indexed by) are marked first, so no layer or log below can print them.
        .layer(SetSensitiveRequestHeadersLayer::new(sensitive))
        // Every request has an `x-request-id` before anything sees it: the span names it and
        // the forward policy sends the same id (the client's or a new one) to the backend.
        .layer(SetRequestIdLayer::x_request_id(NewRequestId))
        // One span per request (DEBUG: disabled by default, and then it costs a level check).
        .layer(TraceLayer::new_for_http().make_span_with(RequestSpan))
        // The client finds its request's id in the response, to quote it in reports.
        .layer(PropagateRequestIdLayer::x_request_id())
        // Should a response ever set a cookie, it is not logged either.
        .layer(SetSensitiveResponseHeadersLayer::new([SET_COOKIE]))
        // A bug in one request is that request's JSON-RPC -32603, not a dropped connection.
        .layer(CatchPanicLayer::custom(PanicReply))
        .service(routes)
}

/// `S` behind the CORS layer when CORS is configured (`front::cors`).
pub type MaybeCors<S> = tower::util::Either<Cors<S>, S>;

/// Puts the routes behind `cors`, if any, inside the edge stack (`stack(with_cors(…))`):
/// innermost, so preflights get their request id and span like every request, and are
/// answered by the layer before any route (or agent) sees them; without CORS configured
/// the routes are served as they are, without CORS headers.
pub fn with_cors<S>(routes: S, cors: Option<CorsLayer>) -> MaybeCors<S> {
    ServiceBuilder::new().option_layer(cors).service(routes)
}

/// The span of one request: method, path and request id (the query may carry secrets).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &Request<B>) -> tracing::Span {
        // The field values are evaluated only when the span is enabled.
        tracing::debug_span!(
            "request",
            method = %request.method(),
            path = request.uri().path(),
            request_id = request
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
        )
    }
}

/// New request ids: UUIDv4-shaped, from a random per-thread base whose last 48 bits are
/// XORed with a per-thread counter. Unique within a thread, random across threads and
/// processes, and without a system call for randomness per request.
#[derive(Clone, Copy, Debug, Default)]
pub struct NewRequestId;

impl MakeRequestId for NewRequestId {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        thread_local! {
            static NEXT: Cell<(u128, u64)> = Cell::new((uuid::Uuid::new_v4().as_u128(), 0));
        }
        let (base, count) = NEXT.get();
        NEXT.set((base, count.wrapping_add(1)));
        // The low 48 bits hold no version or variant bits, so the id stays a UUIDv4.
        let id = uuid::Uuid::from_u128(base ^ u128::from(count & 0xffff_ffff_ffff));
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        id.hyphenated().encode_lower(&mut text);
        // One allocation, shared (not copied) by the request and response headers.
        HeaderValue::from_maybe_shared(Bytes::from_owner(text))
            .ok()
            .map(RequestId::new)
    }
}

/// The reply to a request whose handling panicked: JSON-RPC -32603 (HTTP 200), the panic
/// logged with the request's span. The panic message stays in the log.
#[derive(Clone, Copy, Debug, Default)]
pub struct PanicReply;

impl ResponseForPanic for PanicReply {
    type ResponseBody = Body;

    fn response_for_panic(&mut self, panic: Box<dyn Any + Send + 'static>) -> Response<Body> {
        let message = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
            (Some(text), _) => text,
            (None, Some(text)) => text.as_str(),
            (None, None) => "(not a string)",
        };
        tracing::error!(panic = message, "request handler panicked");
        let err = A2aError::with_message(
            ErrorKind::Internal,
            "internal error in the gateway while handling the request",
        );
        let mut out = Vec::with_capacity(128);
        write_error(&mut out, None, &err);
        json_response(out, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_distinct_uuids_v4() {
        let request = Request::new(());
        let ids: Vec<String> = (0..1000)
            .map(|_| {
                let id = NewRequestId.make_request_id(&request).unwrap();
                id.header_value().to_str().unwrap().to_owned()
            })
            .collect();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        for id in &ids {
            let parsed = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(parsed.get_version_num(), 4, "{id}");
            assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122, "{id}");
        }
    }
}

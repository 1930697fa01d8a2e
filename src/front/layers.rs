//! The edge stack: the tower-http layers every HTTP request passes through before it
//! reaches the routes (`server::Frontend`), assembled once in `stack`, one concern per
//! layer: sensitive headers, request ids (a client's kept only when it is a plausible
//! id), a trace span per request, panics.
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
use tower::util::MapRequest;
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
use crate::telemetry::untrusted::clip;

/// The request id header (tower-http's `x_request_id` layers use the same name).
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// `S` (the routes) inside the edge stack, outermost layer first.
pub type Edge<S> = SetSensitiveRequestHeaders<
    MapRequest<
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
        fn(Request<Body>) -> Request<Body>,
    >,
>;

/// The longest client `x-request-id` kept.
pub(crate) const MAX_REQUEST_ID: usize = 128;

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
        // A client's request id goes into the log, the span and the agent's request: one
        // that is not a plausible id is dropped here, so the next layer makes a new one.
        .map_request(client_request_id as fn(Request<Body>) -> Request<Body>)
        // Every request has an `x-request-id` before anything sees it: the span names it and
        // the forward policy sends the same id (the client's or a new one) to the backend.
        .layer(SetRequestIdLayer::x_request_id(NewRequestId))
        // One span per request (DEBUG: disabled by default, and then it costs a level check).
        // A 5xx is an answer the gateway chose (a limit, a draining /readyz), already counted
        // and in the access log: at DEBUG, not an ERROR line per refusal.
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(RequestSpan)
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        // The client finds its request's id in the response, to quote it in reports.
        .layer(PropagateRequestIdLayer::x_request_id())
        // Should a response ever set a cookie, it is not logged either.
        .layer(SetSensitiveResponseHeadersLayer::new([SET_COOKIE]))
        // A bug in one request is that request's JSON-RPC -32603, not a dropped connection.
        .layer(CatchPanicLayer::custom(PanicReply))
        .service(routes)
}

/// `S` behind the CORS layer when CORS is configured (`front::cors`).
pub(crate) type MaybeCors<S> = tower::util::Either<Cors<S>, S>;

/// Puts the routes behind `cors`, if any, inside the edge stack (`stack(with_cors(…))`):
/// innermost, so preflights get their request id and span like every request, and are
/// answered by the layer before any route (or agent) sees them; without CORS configured
/// the routes are served as they are, without CORS headers.
pub(crate) fn with_cors<S>(routes: S, cors: Option<CorsLayer>) -> MaybeCors<S> {
    ServiceBuilder::new().option_layer(cors).service(routes)
}

/// Keeps a client's `x-request-id` only when it sent exactly one, of 1 to `MAX_REQUEST_ID`
/// bytes of `[A-Za-z0-9-_.:/+=@]` (UUIDs, trace ids, ULIDs and base64 fit); drops any other.
pub(crate) fn client_request_id<B>(mut request: Request<B>) -> Request<B> {
    let headers = request.headers_mut();
    let mut values = headers.get_all(X_REQUEST_ID).iter();
    let keep = match (values.next(), values.next()) {
        (None, _) => return request,
        (Some(one), None) => is_request_id(one.as_bytes()),
        (Some(_), Some(_)) => false,
    };
    if !keep {
        headers.remove(X_REQUEST_ID);
    } else if let Some(id) = headers.get_mut(X_REQUEST_ID) {
        never_indexed(id);
    }
    request
}

/// Marks a request id never-indexed (HPACK, RFC 7541 §6.2.3): it is new on every call, so
/// indexing it where it is echoed to an HTTP/2 client would make hyper's encoder search
/// and grow its table per response, and evict the fixed headers from it. The mark travels
/// with the value (`PropagateRequestId` echoes a clone); toward the agent, `params` marks
/// it the same way.
fn never_indexed(id: &mut HeaderValue) {
    id.set_sensitive(true);
}

fn is_request_id(id: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID).contains(&id.len())
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/+=@".contains(b))
}

/// The span of one request: method, path and request id (the query may carry secrets);
/// the path is the client's, so it is bounded and escaped.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &Request<B>) -> tracing::Span {
        // The field values are evaluated only when the span is enabled.
        tracing::debug_span!(
            "request",
            method = %request.method(),
            path = %clip(request.uri().path()),
            request_id = request
                .headers()
                .get(X_REQUEST_ID)
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
        let mut id = HeaderValue::from_maybe_shared(Bytes::from_owner(text)).ok()?;
        never_indexed(&mut id);
        Some(RequestId::new(id))
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
    fn only_one_plausible_client_request_id_is_kept() {
        let with = |values: &[&[u8]]| {
            let mut request = Request::new(());
            for v in values {
                let value = HeaderValue::from_bytes(v).unwrap();
                request.headers_mut().append(X_REQUEST_ID, value);
            }
            let kept = client_request_id(request);
            kept.headers()
                .get(X_REQUEST_ID)
                .map(|v| v.as_bytes().to_vec())
        };
        let at_limit = vec![b'a'; MAX_REQUEST_ID];
        for good in [&b"0f8e9c1a-44"[..], b"01HZX:trace/span+x=@y_z.", &at_limit] {
            assert_eq!(with(&[good]).as_deref(), Some(good));
        }
        let past_limit = vec![b'a'; MAX_REQUEST_ID + 1];
        for bad in [
            &b""[..],
            b"a b",
            b"id=1 code=0",
            b"caf\xc3\xa9",
            b"a\tb",
            b"\"x\"",
            &past_limit,
        ] {
            assert_eq!(with(&[bad]), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(with(&[b"one", b"two"]), None);
        assert_eq!(with(&[]), None);
    }

    #[test]
    fn request_ids_are_never_indexed() {
        let mut request = Request::new(());
        let made = NewRequestId.make_request_id(&request).unwrap();
        assert!(made.header_value().is_sensitive());
        let client = HeaderValue::from_static("client-id-1");
        request.headers_mut().insert(X_REQUEST_ID, client);
        let kept = client_request_id(request);
        assert!(kept.headers()[X_REQUEST_ID].is_sensitive());
    }

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

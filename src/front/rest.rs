//! The HTTP+JSON front (spec 11): each operation at its rule's method and path below the
//! route's `rest-path` (`path`, from the operation table), with or without a `/{tenant}`
//! segment; params from the body or the query (`request`); then the call through the same
//! stack as a JSON-RPC call (`call::stack`: authentication, limits, owner binding, the push
//! guard, deadlines, affinity, the access log, metrics and the span), in the `Rest`
//! dialect, which writes bare results, `google.rpc.Status` errors with the error table's
//! HTTP status (`status`) and SSE events of bare `StreamResponse`s (spec 11.7).
//!
//! Bodies are `application/a2a+json` or `application/json` (others: 415) of at most
//! `max-body` bytes (past it: 413), read as the JSON-RPC front reads them
//! (`envelope::read_body`). Failures before the call's operation is in the stack (a body or
//! query that cannot be read) are counted as rejected requests.

mod path;
mod request;
pub(crate) mod status;

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;
use http::header::{CONNECTION, CONTENT_TYPE};
use http::{HeaderValue, Method, StatusCode};

pub(crate) use self::path::{route, Matched, Routed};
use crate::front::call::observe::Watched;
use crate::front::call::{self, authenticate, Answer, Exchange, Layer, Wire};
use crate::front::dialect::Dialect;
use crate::front::envelope::{read_body, sse_response, BodyError, Params};
use crate::front::jsonrpc::{refused_response, RefusalStatus};
use crate::front::limits::{Refusal, RouteLimits};
use crate::front::sse::SseBody;
use crate::front::Gateway;
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, ErrorKind, Profile};
use crate::protocol::params::EXTENSIONS;
use crate::telemetry::access::CallRecord;

/// Media type of A2A JSON bodies (spec 11.1), which the front answers in.
const A2A_JSON: &str = "application/a2a+json";

/// Whether the request has one Content-Type and it is `application/a2a+json` or
/// `application/json` (with any parameters). A browser's cross-site form post is neither.
/// The push relay's callback takes the same types (what an agent's notification is sent as).
pub(crate) fn is_a2a_json(headers: &http::HeaderMap) -> bool {
    let mut values = headers.get_all(CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let essence = value
        .as_bytes()
        .split(|b| *b == b';')
        .next()
        .unwrap_or_default();
    let essence = essence.trim_ascii();
    essence.eq_ignore_ascii_case(A2A_JSON.as_bytes())
        || essence.eq_ignore_ascii_case(b"application/json")
}

/// Serves the call `matched` names under the route's `limits`. Every failure is a
/// `google.rpc.Status` body. Not an `async fn`: the request is taken apart before the
/// future exists, which then holds its head once, not the request too (bytes per call,
/// tests/it/cost_budget.rs).
pub fn handle(
    gateway: Arc<Gateway>,
    limits: Option<Arc<RouteLimits>>,
    matched: Matched,
    request: http::Request<Body>,
) -> impl Future<Output = Response> + Send {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    async move {
        // From the head on: a client that leaves while its body arrives is logged too.
        let record = CallRecord::start(gateway.route_metrics.name(), &parts, 0, None);
        let post = parts.method == Method::POST;
        if post && !is_a2a_json(&parts.headers) {
            let why = "the Content-Type must be application/a2a+json or application/json";
            let err = A2aError::invalid_request(why);
            return rejected(&gateway, record, &err, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        }
        // As on the JSON-RPC front: credentials are checked from the head, before the body.
        let principal = match &gateway.auth {
            None => None,
            Some(auth) => match Box::pin(auth.authenticate(&parts)).await {
                // Boxed while the body is read: inline, every call's future would carry it.
                Ok(principal) => Some(Box::new(principal)),
                Err(failure) => {
                    let refusal = authenticate::refusal(auth, &failure);
                    return refused(&gateway, record, &refusal);
                }
            },
        };
        // Held until the call is answered: the body is kept that long.
        let mut charge = limits.as_ref().map(|limits| limits.body_charge());
        // A GET or DELETE carries its params in the path and query; a body is not read.
        let (bytes, record) = match post {
            true => {
                let expects_continue = parts
                    .headers
                    .get(http::header::EXPECT)
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
                let max = gateway.max_body;
                let read = read_body(body, max, expects_continue, charge.as_mut(), record);
                match read.await {
                    (Ok(bytes), record) => (bytes, record),
                    (Err(BodyError::Invalid(err)), record) => {
                        return rejected(&gateway, record, &err, StatusCode::BAD_REQUEST)
                    }
                    (Err(BodyError::OverLimit(err)), record) => {
                        return rejected(&gateway, record, &err, StatusCode::PAYLOAD_TOO_LARGE)
                    }
                    // Nobody reads the answer; the record, unanswered, logs the client's
                    // leaving.
                    (Err(BodyError::ClientGone), _) => {
                        return StatusCode::BAD_REQUEST.into_response()
                    }
                    (Err(BodyError::TooLarge(err)), record) => {
                        let mut response =
                            rejected(&gateway, record, &err, StatusCode::PAYLOAD_TOO_LARGE);
                        // The rest of the body is not read, so the connection cannot carry
                        // another request (HTTP/2 resets just the stream).
                        if parts.version <= http::Version::HTTP_11 {
                            let close = HeaderValue::from_static("close");
                            response.headers_mut().insert(CONNECTION, close);
                        }
                        return response;
                    }
                    (Err(BodyError::Refused(refusal)), record) => {
                        return refused(&gateway, record, &refusal)
                    }
                }
            }
            false => (Bytes::new(), record),
        };
        let params = match request::params(&matched, post, parts.uri.query(), &bytes) {
            Ok(params) => params,
            Err(err) => {
                let status = status::http_status(err.kind, gateway.profile);
                return rejected(&gateway, record, &err, status);
            }
        };
        let op = matched.op;
        // Not held while the call runs: its future would carry it.
        drop(matched);
        let exchange = Exchange {
            gateway: &gateway,
            head: &parts,
            limits: limits.as_ref(),
            wire: Wire::Json,
            // Not a notification: every call is answered.
            id: Some(Cow::Borrowed("")),
            op,
            dialect: Dialect::Rest(gateway.profile),
            in_batch: false,
            started,
            deadline: None,
            principal: principal.map(|principal| *principal),
            owner: None,
            record,
        };
        run(exchange, params).await
    }
}

/// The call through its stack, and its reply.
async fn run(mut exchange: Exchange<'_>, params: Cow<'_, str>) -> Response {
    let answer = call::stack()
        .call(&mut exchange, Some(Params::Text(params)))
        .await;
    respond(exchange, answer)
}

/// The reply to what the stack answered, counted in the call's record.
fn respond<S>(mut x: Exchange<'_>, answer: Result<Answer<S>, A2aError>) -> Response
where
    S: Stream<Item = Result<StreamResponse, A2aError>> + Send + Unpin + 'static,
{
    let (status, out, extensions) = match answer {
        Ok(Answer::Json(out, extensions)) => (StatusCode::OK, out, extensions),
        Ok(Answer::Stream(started)) => {
            let watch = Watched::new(Some(x.record), &x.gateway.route_metrics);
            let body = SseBody::new(
                ("".into(), x.dialect),
                Some(started.first),
                started.events,
                x.gateway.keepalive,
                watch,
            );
            return sse_response(Body::from_stream(body), started.extensions);
        }
        Ok(Answer::Unstarted(err, extensions)) => {
            let status = status::http_status(err.kind, x.gateway.profile);
            (status, x.dialect.error_bytes(None, &err), extensions)
        }
        Ok(Answer::Refused(refusal)) => {
            let body = status::body(&refusal.error, refusal.status, x.gateway.profile);
            x.record.sent(body.len());
            // HTTP+JSON tells errors by their status: `refusal-status` is JSON-RPC's.
            return refused_response(&refusal, body, RefusalStatus::Http);
        }
        // Only a notification is skipped, and an HTTP+JSON call is none.
        Ok(Answer::Skipped) => return StatusCode::NO_CONTENT.into_response(),
        Err(err) => {
            let status = status::http_status(err.kind, x.gateway.profile);
            (status, x.dialect.error_bytes(None, &err), None)
        }
    };
    x.record.sent(out.len());
    let content_type = match status {
        StatusCode::OK => A2A_JSON,
        // As the reference SDK answers errors.
        _ => "application/json",
    };
    reply(status, out, content_type, extensions)
}

/// A response of `status` carrying `body` as `content_type`, with the backend's activated
/// extensions.
fn reply(
    status: StatusCode,
    body: Vec<u8>,
    content_type: &'static str,
    extensions: Option<HeaderValue>,
) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(ext) = extensions {
        headers.insert(EXTENSIONS, ext);
    }
    response
}

/// The reply to a request refused before its call entered the stack, answered with
/// `status`, counted as rejected and logged in its `record`.
fn rejected(
    gateway: &Gateway,
    mut record: CallRecord,
    err: &A2aError,
    status: StatusCode,
) -> Response {
    gateway.route_metrics.rejected(err.kind);
    record.failed(err.kind);
    let out = status::body(err, status, gateway.profile);
    record.sent(out.len());
    reply(status, out, "application/json", None)
}

/// The reply to a request a limit or authentication refused before its call entered the
/// stack, counted as rejected and logged in its `record`.
fn refused(gateway: &Gateway, mut record: CallRecord, refusal: &Refusal) -> Response {
    gateway.route_metrics.rejected(refusal.error.kind);
    record.failed(refusal.error.kind);
    let out = status::body(&refusal.error, refusal.status, gateway.profile);
    record.sent(out.len());
    refused_response(refusal, out, RefusalStatus::Http)
}

/// The answer to a path the front serves with a method it does not serve there, its body
/// in the route's `profile`.
/// The answer to a path longer than any operation's (414, naming the bound), counted and
/// logged as a rejected request.
pub(crate) fn path_too_long(
    gateway: &Gateway,
    request: &http::request::Parts,
    length: usize,
) -> Response {
    let why = format!(
        "the path below rest-path is {length} bytes, longer than the {} an operation's can be",
        path::MAX_PATH_BYTES
    );
    let err = A2aError::invalid_request(&why);
    let record = CallRecord::start(gateway.route_metrics.name(), request, 0, None);
    rejected(gateway, record, &err, StatusCode::URI_TOO_LONG)
}

pub(crate) fn wrong_method(allow: &str, profile: Profile) -> Response {
    let err = A2aError::a2a(
        ErrorKind::MethodNotFound,
        "this method is not served at this path",
    );
    let status = StatusCode::METHOD_NOT_ALLOWED;
    let body = status::body(&err, status, profile);
    let mut response = reply(status, body, "application/json", None);
    if let Ok(allow) = HeaderValue::from_str(allow) {
        response.headers_mut().insert(http::header::ALLOW, allow);
    }
    response
}

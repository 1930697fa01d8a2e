//! The parsers of what agents send: the HTTP+JSON binding's event streams and error
//! bodies, and gRPC statuses with their `google.rpc.Status` details. Whatever the bytes,
//! each ends in events or one defined error that makes a valid JSON-RPC error object.

use std::convert::Infallible;

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::check_error;
use crate::backend::grpc::status;
use crate::backend::rest::sse::{SseEvent, SseParser};
use crate::backend::rest::{error_answer, events, MAX_BODY};
use crate::protocol::details;

/// Line and event limits the SSE target runs with: one small enough for inputs to reach.
const SSE_LIMITS: [usize; 2] = [64, 1 << 20];

/// The `google.rpc` detail types `details` writes field by field, and one it does not.
const DETAIL_TYPES: &[&str] = &[
    "ErrorInfo",
    "BadRequest",
    "RetryInfo",
    "DebugInfo",
    "QuotaFailure",
    "PreconditionFailure",
    "RequestInfo",
    "ResourceInfo",
    "Help",
    "LocalizedMessage",
    "Status",
];

/// `sse` target: `body` as an HTTP+JSON agent's event stream. The parser's events do not
/// depend on where chunk boundaries fall (whole, byte by byte, three pieces); the
/// backend's event stream over it ends, with at most one error, as its last item.
pub fn sse(body: &[u8]) {
    for limit in SSE_LIMITS {
        let whole = parse(&[body], limit);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(parse(&bytes, limit), whole, "byte by byte, limit {limit}");
        // Two cuts that move with the input, so that every split point gets tried.
        let seed = body
            .iter()
            .fold(7usize, |h, &b| h.wrapping_mul(31) ^ usize::from(b));
        let first = seed % (body.len() + 1);
        let second = first + (seed >> 8) % (body.len() - first + 1);
        let pieces = [&body[..first], &body[first..second], &body[second..]];
        assert_eq!(
            parse(&pieces, limit),
            whole,
            "split at {first} and {second}"
        );
    }
    let chunks: Vec<Result<Bytes, Infallible>> = body
        .chunks(body.len().div_ceil(3).max(1))
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let response = http::Response::builder()
        .header("content-type", "text/event-stream")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .expect("a valid response");
    let items: Vec<_> = futures::executor::block_on(events(response.into(), MAX_BODY).collect());
    let count = items.len();
    for (i, item) in items.into_iter().enumerate() {
        if let Err(err) = item {
            assert_eq!(i + 1, count, "an error ends the stream");
            check_error(&err.into(), false);
        }
    }
}

/// The parser's events for `chunks`, and whether it refused the stream as too large.
fn parse(chunks: &[&[u8]], limit: usize) -> (Vec<SseEvent>, bool) {
    let mut parser = SseParser::new(limit);
    let mut events = Vec::new();
    for chunk in chunks {
        let fed = parser.feed(chunk);
        while let Some(event) = parser.next_event() {
            events.push(event);
        }
        if fed.is_err() {
            return (events, true);
        }
    }
    parser.finish();
    while let Some(event) = parser.next_event() {
        assert!(!event.data.is_empty(), "no empty events");
        events.push(event);
    }
    (events, false)
}

/// HTTP statuses of error answers, by the first byte of an `error_body` input.
const ERROR_STATUSES: [u16; 8] = [400, 401, 403, 404, 409, 429, 500, 503];

/// `error_body` target: the first byte picks the HTTP status and content type, the rest is
/// a non-2xx body of an HTTP+JSON agent. It becomes one valid JSON-RPC error.
pub fn error_body(data: &[u8]) {
    let (pick, body) = data.split_first().unwrap_or((&0, &[]));
    let status = ERROR_STATUSES[usize::from(pick % 8)];
    let content_type = match pick / 8 % 4 {
        0 => Some("application/json"),
        1 => Some("application/a2a+json"),
        2 => Some("text/html; charset=\u{fffd}"),
        _ => None,
    };
    let mut response = http::Response::new(reqwest::Body::from(body.to_vec()));
    *response.status_mut() = StatusCode::from_u16(status).expect("a valid status");
    if let Some(content_type) = content_type.and_then(|c| HeaderValue::from_str(c).ok()) {
        response.headers_mut().insert("content-type", content_type);
    }
    let err = futures::executor::block_on(error_answer(response.into()));
    // The agent's own details pass through as it sent them.
    check_error(&err.into(), false);
}

/// `status_details` target: the bytes as a serialized `google.rpc.Status`, as the value of
/// every `google.rpc` detail type, and as `grpc-status-details-bin` beside a status code
/// and message taken from the first bytes. Every detail becomes an object with `@type`.
pub fn status_details(data: &[u8]) {
    for detail in details::from_status_bytes(data) {
        assert!(detail["@type"].is_string(), "{detail}");
    }
    for name in DETAIL_TYPES {
        let type_url = format!("type.googleapis.com/google.rpc.{name}");
        let detail = details::any_to_json(&type_url, data);
        assert_eq!(detail["@type"], type_url.as_str(), "{detail}");
    }
    let (code, message) = match data {
        [code, rest @ ..] => (
            code.to_string(),
            rest.get(..rest.len().min(16)).unwrap_or(&[]),
        ),
        [] => ("2".to_owned(), &[][..]),
    };
    let encoded = [
        base64::engine::general_purpose::STANDARD.encode(data),
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(data),
    ];
    for details in encoded.iter().map(String::as_bytes).chain([message]) {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_str(&code).expect("digits"));
        if let Ok(message) = HeaderValue::from_bytes(message) {
            headers.insert("grpc-message", message);
        }
        if let Ok(details) = HeaderValue::from_bytes(details) {
            headers.insert("grpc-status-details-bin", details);
        }
        match status::check(&headers) {
            Some(Ok(())) => assert_eq!(code, "0"),
            Some(Err(err)) => check_error(&err.into(), true),
            None => panic!("grpc-status was sent"),
        }
    }
}

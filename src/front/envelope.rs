//! The JSON-RPC 2.0 envelope (spec 9): the request envelope and its rules (ids, parse
//! and invalid-request errors), the request body read within its limit, and the writers
//! of response objects and of the HTTP responses that carry them (JSON or SSE).
//!
//! Used by `jsonrpc.rs` (dispatch) and `sse.rs` (streams); it depends on neither.

use axum::body::Body;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue};
use http_body_util::BodyExt;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::params::EXTENSIONS;

/// Past the limit, up to this much more body is read and discarded so the client gets
/// its JSON-RPC error instead of a reset connection.
const MAX_DRAIN: usize = 64 << 20;

/// The request envelope. Fields are raw so that each rule can be checked separately and
/// an absent `id` (notification) is told apart from `"id": null`.
#[derive(Deserialize)]
pub struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    pub jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub params: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
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

/// A whole error response object; internal errors are logged, as the edge's unexpected
/// failures.
pub fn error_bytes(id: Option<&RawValue>, err: &A2aError) -> Vec<u8> {
    if err.kind == ErrorKind::Internal {
        tracing::warn!(%err, "request failed");
    }
    let mut out = Vec::with_capacity(128);
    write_error(&mut out, id, err);
    out
}

/// `-32600` with `why` as its message.
pub fn invalid_request(why: &str) -> A2aError {
    A2aError::invalid_request(why)
}

/// `-32700`: the bytes are not JSON.
pub fn parse_error(e: &serde_json::Error) -> A2aError {
    A2aError::with_message(ErrorKind::ParseError, format!("Invalid JSON payload: {e}"))
}

/// Syntax errors are parse errors; a well-formed object that is no envelope (e.g. a
/// duplicated key) is an invalid request.
pub fn envelope_error(e: &serde_json::Error) -> A2aError {
    match e.classify() {
        serde_json::error::Category::Data => invalid_request(&e.to_string()),
        _ => parse_error(e),
    }
}

/// JSON-RPC ids are strings, integers or null; fractions, booleans, arrays and objects
/// are refused (the reference SDK does the same).
pub fn valid_id(id: &RawValue) -> bool {
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
pub async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, A2aError> {
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

/// HTTP 200 `application/json` carrying one response object (or a batch's array), with
/// the backend's activated extensions.
pub fn json_response(body: Vec<u8>, extensions: Option<HeaderValue>) -> Response {
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

/// HTTP 200 `text/event-stream` carrying `events` (an SSE body), never cached or
/// buffered by proxies, with the backend's activated extensions.
pub fn sse_response(events: Body, extensions: Option<HeaderValue>) -> Response {
    let mut response = Response::new(events);
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

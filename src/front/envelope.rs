//! The JSON-RPC 2.0 envelope (spec 9): the request envelope and its rules (ids, parse
//! and invalid-request errors), the request body read within its limit, and the writers
//! of response objects and of the HTTP responses that carry them (JSON or SSE).
//!
//! Used by `jsonrpc.rs` (dispatch) and `dialect.rs` (results, errors and SSE events in a
//! call's version); it depends on neither (only on `limits`, which charges the body's
//! bytes).

use std::borrow::Cow;

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue};
use http_body_util::BodyExt;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::front::limits::{BodyCharge, Refusal};
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::json::nesting_exceeds;
use crate::protocol::ops::{Op, Request};
use crate::protocol::params::EXTENSIONS;
use crate::telemetry::access::CallRecord;
use crate::telemetry::untrusted::clip_message;

/// Past the limit, up to this much more body is read and discarded so the client gets its
/// JSON-RPC error on a connection that stays usable (a client still sending when the
/// connection closes sees a broken pipe, not the error); beyond it the connection is closed
/// (reading on would let one request keep a connection busy for as long as it sends).
const MAX_DRAIN: usize = 16 << 20;

/// Deepest request sonic-rs parses: its recursive skipping has large stack frames in debug
/// builds (about 35 levels overflowed a test thread's stack), and typical requests nest
/// less than 10 levels; deeper ones take serde_json.
const FAST_PATH_NESTING: usize = 16;

/// The request envelope: the raw JSON text of each member, so that each rule can be
/// checked separately and an absent `id` (notification) is told apart from `"id": null`.
pub struct Envelope<'a> {
    pub jsonrpc: Option<Cow<'a, str>>,
    pub id: Option<Cow<'a, str>>,
    pub method: Option<Cow<'a, str>>,
    pub params: Option<Params<'a>>,
}

/// The `params` member: its text, or the request it decodes to when the parse decoded it
/// on its way (`Envelope::parse`).
pub enum Params<'a> {
    Text(Cow<'a, str>),
    /// The request of the v1.0 operation `method` names (so `params` was an object).
    Decoded(Box<Request>),
}

impl<'a> Envelope<'a> {
    /// Parses a request object. sonic-rs does the scanning (SIMD: serde_json's byte-wise
    /// scan of a 16 KiB `params` was a fifth of such a call's instructions); whatever it
    /// refuses, serde_json parses again and decides, so the outcome and the error are
    /// serde_json's (the test below holds the two to the same verdicts). A member with
    /// escapes is copied by sonic-rs, one memcpy; the others are borrowed. sonic-rs skips
    /// values recursively, without a depth limit, so a request nested deeper than
    /// `FAST_PATH_NESTING` goes to serde_json, which skips iteratively.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        if let Some(envelope) = Envelope::parse_fast(bytes) {
            return Ok(envelope);
        }
        let members = serde_json::from_slice::<Members<&'a RawValue>>(bytes)?;
        Ok(members.into_envelope(|raw| Cow::Borrowed(raw.get())))
    }

    /// sonic-rs's parse, for requests it may see; `None` when it refuses. It gets text
    /// checked as UTF-8: it does not check the values it skips, and reading one back
    /// panicked on invalid bytes.
    ///
    /// When `method` (without escapes) names a v1.0 operation and `params` follow it, as
    /// clients write them, `params` are decoded into the operation's request in this same
    /// scan, exactly as `Request::decode`'s fast path decodes their text: skipping them
    /// first to find their end was a sixth of a 16 KiB call's JSON work. Whatever that
    /// decoding refuses refuses the fast parse, so the slow path decides and names the
    /// error as before. The nesting bound here (16) is below `decode_params`' (48).
    fn parse_fast(bytes: &'a [u8]) -> Option<Self> {
        if nesting_exceeds(bytes, FAST_PATH_NESTING) {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let Fast(envelope) = sonic_rs::from_str::<Fast<'a>>(text).ok()?;
        // sonic-rs does not check the hex digits of `\u` escapes in the values it skips: a
        // broken one made an echoed id that was not JSON, or a body that is not JSON pass as
        // a notification (found by fuzzing, fuzz/README.md).
        if !unicode_escapes_complete(bytes) {
            return None;
        }
        Some(envelope)
    }
}

/// The envelope as sonic-rs scans it: raw texts of the members (`LazyValue`s), but
/// `params` decoded when `method` came first and names a v1.0 operation.
struct Fast<'a>(Envelope<'a>);

/// A member name of the envelope; others are ignored (as `Members` ignores them).
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Fast<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FastVisitor)
    }
}

struct FastVisitor;

impl<'de> serde::de::Visitor<'de> for FastVisitor {
    type Value = Fast<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC request object")
    }

    /// Like `Members`' derived visitor: a repeated member is an error (the slow path then
    /// gives serde_json's verdict).
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let raw = |map: &mut A| Ok(map.next_value::<sonic_rs::LazyValue<'de>>()?.as_raw_cow());
        let mut envelope = Envelope {
            jsonrpc: None,
            id: None,
            method: None,
            params: None,
        };
        while let Some(member) = map.next_key::<Member>()? {
            let (slot, name) = match member {
                Member::Jsonrpc => (&mut envelope.jsonrpc, "jsonrpc"),
                Member::Id => (&mut envelope.id, "id"),
                Member::Method => (&mut envelope.method, "method"),
                Member::Params => {
                    if envelope.params.is_some() {
                        return Err(A::Error::duplicate_field("params"));
                    }
                    let op = envelope.method.as_deref().and_then(plain_op);
                    envelope.params = Some(match op {
                        Some(op) => Params::Decoded(Box::new(map.next_value_seed(op)?)),
                        None => Params::Text(raw(&mut map)?),
                    });
                    continue;
                }
                Member::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            if slot.is_some() {
                return Err(A::Error::duplicate_field(name));
            }
            *slot = Some(raw(&mut map)?);
        }
        Ok(Fast(envelope))
    }
}

/// The v1.0 operation a raw `method` text names, if it is a string without escapes (an
/// escaped name takes the slow path; v0.3 names are no operations).
fn plain_op(raw: &str) -> Option<Op> {
    let name = raw.strip_prefix('"')?.strip_suffix('"')?;
    if name.contains('\\') {
        return None;
    }
    Op::from_name(name)
}

/// Whether every `\u` escape in the JSON `text` has four hex digits (a backslash outside
/// strings is refused by the parser anyway).
fn unicode_escapes_complete(text: &[u8]) -> bool {
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'\\', &text[at..]) {
        let escape = at + found;
        match text.get(escape + 1) {
            Some(b'u') => {
                let hex = text.get(escape + 2..escape + 6);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                at = escape + 6;
            }
            Some(_) => at = escape + 2,
            None => return false,
        }
    }
    true
}

/// The envelope's members as one parser's raw values.
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
struct Members<T> {
    #[serde(default, deserialize_with = "present")]
    jsonrpc: Option<T>,
    #[serde(default, deserialize_with = "present")]
    id: Option<T>,
    #[serde(default, deserialize_with = "present")]
    method: Option<T>,
    #[serde(default, deserialize_with = "present")]
    params: Option<T>,
}

impl<T> Members<T> {
    fn into_envelope<'a>(self, text: impl Fn(T) -> Cow<'a, str>) -> Envelope<'a> {
        Envelope {
            jsonrpc: self.jsonrpc.map(&text),
            id: self.id.map(&text),
            method: self.method.map(&text),
            params: self.params.map(|raw| Params::Text(text(raw))),
        }
    }
}

/// A member that is present, even as `null`, is `Some`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Appends `{"jsonrpc":"2.0","id":…,"result":…}`, the result written by `result`.
pub fn write_response(
    out: &mut Vec<u8>,
    id: Option<&str>,
    result: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.unwrap_or("null").as_bytes());
    out.extend_from_slice(b",\"result\":");
    result(out)?;
    out.push(b'}');
    Ok(())
}

/// Appends `{"jsonrpc":"2.0","id":…,"error":{…}}`.
pub fn write_error(out: &mut Vec<u8>, id: Option<&str>, err: &A2aError) {
    write_error_object(out, id, &err.to_json());
}

/// `write_error` with the error `object` a call's dialect made of the error
/// (`front::dialect`).
pub fn write_error_object(out: &mut Vec<u8>, id: Option<&str>, object: &serde_json::Value) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.unwrap_or("null").as_bytes());
    out.extend_from_slice(b",\"error\":");
    // A `Value` always serializes.
    let _ = serde_json::to_writer(&mut *out, object);
    out.push(b'}');
}

/// A whole error response object; internal errors are logged, as the edge's unexpected
/// failures.
pub fn error_bytes(id: Option<&str>, err: &A2aError) -> Vec<u8> {
    error_bytes_as(id, err, &err.to_json())
}

/// `error_bytes` with the error `object` a call's dialect made of `err`.
pub fn error_bytes_as(id: Option<&str>, err: &A2aError, object: &serde_json::Value) -> Vec<u8> {
    warn_internal(err);
    let mut out = Vec::with_capacity(128);
    write_error_object(&mut out, id, object);
    out
}

/// Logs an internal error, one of the edge's unexpected failures, as it is answered.
pub fn warn_internal(err: &A2aError) {
    if err.kind == ErrorKind::Internal {
        tracing::warn!(code = err.kind.code(), error = %clip_message(&err.message), "request failed");
    }
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
pub fn valid_id(text: &str) -> bool {
    match text.as_bytes().first() {
        Some(b'"') => true,
        Some(b'n') => text == "null",
        Some(b'-' | b'0'..=b'9') => !text.contains(['.', 'e', 'E']),
        _ => false,
    }
}

/// The refusal of a request (or a gRPC message) past `max-body`, `limit` bytes.
pub fn over_max_body(limit: usize) -> A2aError {
    invalid_request(&format!(
        "request body exceeds the limit of {limit} bytes (max-body)"
    ))
}

/// Why a body was not read: an error to answer as JSON-RPC, the gateway's limit of body
/// bytes in flight, or the client gone.
pub enum BodyError {
    Invalid(A2aError),
    /// The client's connection or stream broke before the body's end (closed, reset): there
    /// is nobody to answer.
    ClientGone,
    /// Past the limit, drained: the connection stays usable.
    OverLimit(A2aError),
    /// Far past the limit: answered without reading on, and the connection is closed.
    TooLarge(A2aError),
    Refused(Box<Refusal>),
}

/// Reads the body up to `limit` bytes, charging what it holds to `charge` as it arrives (a
/// declared length reserves nothing: 16 requests announcing 4 MiB and sending a byte would
/// otherwise hold every other client's share). A body at most `MAX_DRAIN` past the limit is
/// drained (not held, not charged), so its connection stays usable, and refused with a
/// JSON-RPC error naming the limit; one declared or found to be larger is refused at once
/// (`TooLarge`), and so is a declared length past the limit when the client waits for
/// `100 Continue` before it sends (`expects_continue`): it has sent nothing yet. A body that
/// arrives in one piece is not copied. The bytes received so far are told to `record` as
/// they arrive, so a request whose client leaves mid-body is logged with them; the record
/// is handed back (moved, not borrowed: a borrowed record would keep its place in the
/// handler's future after the call took it, tests/it/cost_budget.rs).
pub async fn read_body(
    mut body: Body,
    limit: usize,
    expects_continue: bool,
    mut charge: Option<&mut BodyCharge>,
    mut record: CallRecord,
) -> (Result<Bytes, BodyError>, CallRecord) {
    let mut grow = |total: usize| match charge.as_mut() {
        Some(charge) => charge.grow_to(total.min(limit)).map_err(Box::new),
        None => Ok(()),
    };
    let too_large = || over_max_body(limit);
    let drained = limit.saturating_add(MAX_DRAIN);
    let refused_at_once = match expects_continue {
        true => limit,
        false => drained,
    };
    if body
        .size_hint()
        .exact()
        .is_some_and(|declared| declared > refused_at_once as u64)
    {
        return (Err(BodyError::TooLarge(too_large())), record);
    }
    let mut first = Bytes::new();
    let mut rest = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let data = match frame.map(|frame| frame.into_data()) {
            Ok(Ok(data)) => data,
            Ok(Err(_)) => continue,
            Err(e) if client_gone(&e) => return (Err(BodyError::ClientGone), record),
            Err(e) => {
                let why = format!("request body could not be read: {e}");
                return (Err(BodyError::Invalid(invalid_request(&why))), record);
            }
        };
        seen = seen.saturating_add(data.len());
        record.received(seen);
        if seen <= limit {
            if let Err(refusal) = grow(seen) {
                return (Err(BodyError::Refused(refusal)), record);
            }
            if first.is_empty() {
                first = data;
            } else {
                if rest.is_empty() {
                    rest.extend_from_slice(&first);
                }
                rest.extend_from_slice(&data);
            }
        } else if seen > drained {
            return (Err(BodyError::TooLarge(too_large())), record);
        }
    }
    if seen > limit {
        return (Err(BodyError::OverLimit(too_large())), record);
    }
    let bytes = match rest.is_empty() {
        true => first,
        false => rest.freeze(),
    };
    (Ok(bytes), record)
}

/// Whether a request body's error is its client's connection or stream breaking (hyper's
/// error: closed before the body's end, reset), not the gateway's own body deadline.
pub fn client_gone(err: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(err), |e| e.source())
        .any(|e| e.is::<hyper::Error>() || e.is::<h2::Error>())
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

    /// What a parser made of `params`, made comparable: text the fast parse may have
    /// decoded (a v1.0 method without escapes) is decoded as `Request::decode` decodes it.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Text(String),
        Decoded(Box<Request>),
        Refused(String),
    }

    /// What each parser makes of `bytes`: the members' raw texts and `params`, or `None`
    /// if refused.
    fn fast(bytes: &[u8]) -> Option<([Option<String>; 3], Option<Seen>)> {
        Envelope::parse_fast(bytes).map(seen)
    }

    fn reference(bytes: &[u8]) -> Option<([Option<String>; 3], Option<Seen>)> {
        let members = serde_json::from_slice::<Members<&RawValue>>(bytes).ok()?;
        Some(seen(members.into_envelope(|raw| Cow::Borrowed(raw.get()))))
    }

    fn seen(e: Envelope) -> ([Option<String>; 3], Option<Seen>) {
        let op = e.method.as_deref().and_then(plain_op);
        let params = e.params.map(|params| match (params, op) {
            (Params::Decoded(request), _) => Seen::Decoded(request),
            (Params::Text(text), Some(op)) => match Request::decode(op, Some(&text)) {
                Ok(request) => Seen::Decoded(Box::new(request)),
                Err(err) => Seen::Refused(err.to_string()),
            },
            (Params::Text(text), None) => Seen::Text(text.into_owned()),
        });
        let texts = [e.jsonrpc, e.id, e.method].map(|m| m.map(Cow::into_owned));
        (texts, params)
    }

    /// Whether the fast parse decoded `params` on its way.
    fn decoded(bytes: &[u8]) -> bool {
        Envelope::parse_fast(bytes).is_some_and(|e| matches!(e.params, Some(Params::Decoded(_))))
    }

    /// sonic-rs may refuse more than serde_json (serde_json then decides), never less, and
    /// what it accepts it must cut into the same raw texts.
    #[test]
    fn the_fast_envelope_accepts_only_what_serde_json_accepts() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let cases: Vec<Vec<u8>> = [
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}"#,
            r#" { "jsonrpc" : "2.0" , "id" : "a\"b" , "params" : { "x" : [ 1 , 2 ] } } "#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m","params":null}"#,
            r#"{"id":123456789012345678901234567890,"params":{"t":"esc \n \u00e9 \ud83d\ude00"}}"#,
            r#"{"p\u0061rams":{"a":1},"\u0069d":7}"#,
            r#"{"id":1,"id":2}"#,
            r#"{"params":{"t":"lone \ud800 surrogate"}}"#,
            r#"{"x":"lone \udc00","params":{}}"#,
            r#"{"x":"bad \x escape"}"#,
            r#"{"params":{"t":"bad \x escape"}}"#,
            "{\"x\":\"raw \u{1} control\"}",
            "{\"params\":{\"t\":\"raw \u{1f} control\"}}",
            r#"{"id":1} trailing"#,
            r#"{"id":1,}"#,
            r#"{"x":[1,2,]}"#,
            r#"{"x":NaN}"#,
            r#"{"x":01}"#,
            r#"{"x":1.}"#,
            r#"{"x":-}"#,
            r#"{"x":.5}"#,
            r#"{"x":1e400,"params":{"n":-0.0}}"#,
            r#"{"x":tru}"#,
            r#"{"jsonrpc":"2.0""id":1}"#,
            r#"{"id":1"#,
            r#"{}"#,
            r#"{"params":"#,
            r#"{"id":"\u001W","method":"GetTask"}"#,
            r#"{"id":"\u00e9\n","method":"GetTask"}"#,
            r#"{"Id":"\u001W","method":"GetTask"}"#,
            r#"{"x":"\\u001W","id":"\\\u00e9"}"#,
            // params after a v1.0 method are decoded in the scan: good, bad, not objects.
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a \" \u00e9"}]}}}"#,
            r#"{"method":"SendMessage","params":{"message":{"role":"ROLE_NOPE"}},"id":1}"#,
            r#"{"method":"GetTask","params":{"id":"t","historyLength":"7"}}"#,
            r#"{"method":"GetTask","params":{"id":"t","historyLength":1.5}}"#,
            r#"{"method":"GetTask","params":{"id":"t","unknownField":[1,{"a":2}]}}"#,
            r#"{"method":"GetTask","params":{"id":"t"},"params":{"id":"u"}}"#,
            r#"{"method":"GetTask","params":{"id":"t"},"method":"GetTask"}"#,
            r#"{"method":"GetTask","params":["t"]}"#,
            r#"{"method":"GetTask","params":null}"#,
            r#"{"method":"GetTask","params":"t"}"#,
            r#"{"method":"GetTask","params":{"id":"lone \ud800"}}"#,
            r#"{"method":"GetTask","params":{"id":"raw \u0001 escaped"}}"#,
            "{\"method\":\"GetTask\",\"params\":{\"id\":\"raw \u{1} control\"}}",
            r#"{"method":"GetTask","params":{"id":"t"} x}"#,
            r#"{"params":{"id":"t"},"method":"GetTask"}"#,
            r#"{"method":"Get\u0054ask","params":{"id":"t"}}"#,
            r#"{"method":"message/send","params":{"message":{}}}"#,
            r#"{"method":"NoSuchMethod","params":{"id":5}}"#,
            r#"{"method":7,"params":{"id":"t"}}"#,
            r#"{"method":"SubscribeToTask","params":{"id":"t","tenant":"a"}}"#,
        ]
        .iter()
        .map(|c| c.as_bytes().to_vec())
        .chain([
            format!(r#"{{"x":{deep},"id":1}}"#).into_bytes(),
            format!(r#"{{"params":{{"d":{deep}}}}}"#).into_bytes(),
            b"{\"x\":\"\xff\xfe\",\"id\":1}".to_vec(),
            b"{\"params\":{\"t\":\"\xc3\"}}".to_vec(),
            b"{\"id\":\"\xed\xa0\x80\"}".to_vec(),
        ])
        .collect();
        for bytes in &cases {
            let text = String::from_utf8_lossy(bytes);
            if let Some(fast) = fast(bytes) {
                assert_eq!(Some(fast), reference(bytes), "{text}");
            }
        }
        // The table holds both verdicts and both forms of params, so the comparison above
        // is not vacuous.
        assert!(fast(&cases[0]).is_some() && fast(&cases[4]).is_some());
        assert!(reference(&cases[5]).is_none() && reference(&cases[13]).is_none());
        assert!(decoded(&cases[30]) && decoded(&cases[41]) && decoded(&cases[49]));
        for refused in [31, 33, 35, 36, 37, 38, 39, 42, 43] {
            let text = String::from_utf8_lossy(&cases[refused]);
            assert!(fast(&cases[refused]).is_none(), "{text}");
        }
        for undecoded in [44, 45, 46, 47, 48] {
            let text = String::from_utf8_lossy(&cases[undecoded]);
            assert!(!decoded(&cases[undecoded]), "{text}");
        }
    }

    #[test]
    fn id_types() {
        let ok = ["\"a\"", "null", "1", "-7", "123456789012345678901234567890"];
        for id in ok {
            assert!(valid_id(id), "{id}");
        }
        for id in ["1.5", "1e3", "true", "[]", "{}"] {
            assert!(!valid_id(id), "{id}");
        }
    }
}

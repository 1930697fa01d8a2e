//! The one JSON codec: JSON-RPC `params` in (straight into the protobuf request type),
//! results, stream events and HTTP+JSON request bodies out. ProtoJSON through pbjson's
//! serde impls; sonic-rs does the byte work, serde_json only describes failures.

use crate::proto::{ListTasksResponse, RestoreNulls};
use crate::protocol::error::A2aError;
use serde::de::DeserializeSeed;

/// Deepest nesting of arrays and objects accepted in params. Both parsers recurse per
/// level (sonic-rs also when it skips unknown members, without a limit of its own: 100,000
/// nested brackets overflowed a worker's stack and aborted the process), so the depth is
/// checked before either sees the text. Protobuf decoders (prost, C++, Python) refuse
/// messages nested deeper than 100, and each JSON level inside a `Struct` is two protobuf
/// levels (`Value`, then `ListValue` or `Struct`): 48 is about the deepest an agent decodes.
pub const MAX_NESTING: usize = 48;

/// Proto field name → ProtoJSON name (`task_id` → `taskId`).
pub(crate) fn json_name(field: &str) -> String {
    json_name_bytes(field).map(char::from).collect()
}

/// Appends the ProtoJSON name of `field` to `out`, unquoted.
pub(crate) fn write_json_name(out: &mut Vec<u8>, field: &str) {
    out.extend(json_name_bytes(field));
}

/// Whether `name` is the ProtoJSON name of `field`, without writing it.
pub(crate) fn is_json_name(field: &str, name: &str) -> bool {
    json_name_bytes(field).eq(name.bytes())
}

/// The ProtoJSON name of a field (ASCII, snake case) byte by byte: `task_id` → `taskId`.
fn json_name_bytes(field: &str) -> impl Iterator<Item = u8> + '_ {
    let mut upper = false;
    field.bytes().filter_map(move |b| match (b, upper) {
        (b'_', _) => {
            upper = true;
            None
        }
        (b, true) => {
            upper = false;
            Some(b.to_ascii_uppercase())
        }
        (b, false) => Some(b),
    })
}

/// Decodes `params` text into the request `seed` makes of them (an `Op` makes its
/// operation's request). Errors name the failing field path.
pub fn decode_params<S, V>(seed: S, text: &str) -> Result<V, A2aError>
where
    S: Copy + for<'de> DeserializeSeed<'de, Value = V>,
{
    if nesting_exceeds(text.as_bytes(), MAX_NESTING) {
        let why = format!("arrays and objects nested deeper than {MAX_NESTING} levels");
        return Err(A2aError::invalid_params("", &why));
    }
    // Only to describe an error is the text decoded again, by serde_json with the field's
    // path; both refuse the same inputs (tested below), so the fast path never accepts
    // what the error path would reject.
    match decode_fast(seed, text) {
        Some(request) => Ok(request),
        None => decode_tracked(seed, text),
    }
}

/// Whether arrays and objects in the JSON `text` nest deeper than `limit`. Counting the
/// opening brackets (SIMD) bounds the depth; only a text with more of them than `limit` is
/// walked, byte by byte, skipping strings.
pub fn nesting_exceeds(text: &[u8], limit: usize) -> bool {
    let opening = memchr::memchr2_iter(b'[', b'{', text);
    if opening.take(limit + 1).count() <= limit {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// sonic-rs (SIMD string scanning, several times serde_json's speed on long texts), no
/// path tracking.
fn decode_fast<S, V>(seed: S, text: &str) -> Option<V>
where
    S: for<'de> DeserializeSeed<'de, Value = V>,
{
    let mut de = sonic_rs::Deserializer::from_str(text);
    let request = seed.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(request)
}

/// A request of type `T` from `params` at the deserializer's position, nulls restored:
/// what every decoding of params ends in (`Op` as a seed, for the text here and for the
/// JSON-RPC envelope's own scan in `front::envelope`).
pub fn params_from<'de, T, D>(deserializer: D) -> Result<T, D::Error>
where
    T: serde::de::DeserializeOwned + RestoreNulls,
    D: serde::Deserializer<'de>,
{
    let mut request = T::deserialize(deserializer)?;
    request.restore_nulls();
    Ok(request)
}

/// serde_json with the failing field's path in the error.
fn decode_tracked<S, V>(seed: S, text: &str) -> Result<V, A2aError>
where
    S: for<'de> DeserializeSeed<'de, Value = V>,
{
    let mut de = serde_json::Deserializer::from_str(text);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(&mut de, &mut track);
    let request = seed.deserialize(tracked).map_err(|e| {
        let path = track.path().to_string();
        // The path names the field; serde_json's "at line 1 column 30" adds nothing.
        let text = e.to_string();
        let description = match text.rfind(" at line ") {
            Some(at) => &text[..at],
            None => &text,
        };
        A2aError::invalid_params(&path, description)
    })?;
    de.end()
        .map_err(|e| A2aError::invalid_params("", &e.to_string()))?;
    Ok(request)
}

/// Appends `value` as JSON. sonic-rs, not serde_json: escaping a string byte by byte was
/// 40 % of the instructions of a 16 KiB call (benches/README.md).
pub fn write_json<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    sonic_rs::to_writer(out, value).map_err(serde::ser::Error::custom)
}

/// How a unary reply type reads and writes its JSON-RPC `result`.
///
/// Most types use their ProtoJSON form. Two deviate on purpose, as the reference SDK does:
/// `ListTasksResponse` prints its REQUIRED fields even when they hold defaults (pbjson would
/// drop `nextPageToken: ""`), and `google.protobuf.Empty` is `null`.
pub trait ResultJson: Sized {
    fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error>;
    fn read_result(body: &[u8]) -> Result<Self, serde_json::Error>;
}

macro_rules! protojson_result {
    ($($ty:ty),*) => {$(
        impl ResultJson for $ty {
            fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
                write_json(out, self)
            }
            fn read_result(body: &[u8]) -> Result<Self, serde_json::Error> {
                serde_json::from_slice(body)
            }
        }
    )*};
}
protojson_result!(
    crate::proto::SendMessageResponse,
    crate::proto::Task,
    crate::proto::TaskPushNotificationConfig,
    crate::proto::ListTaskPushNotificationConfigsResponse,
    crate::proto::AgentCard
);

impl ResultJson for ListTasksResponse {
    fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        use serde::ser::{SerializeStruct, Serializer};
        let mut ser = sonic_rs::Serializer::new(out);
        let mut write = || {
            let mut s = (&mut ser).serialize_struct("ListTasksResponse", 4)?;
            s.serialize_field("tasks", &self.tasks)?;
            s.serialize_field("nextPageToken", &self.next_page_token)?;
            s.serialize_field("pageSize", &self.page_size)?;
            s.serialize_field("totalSize", &self.total_size)?;
            s.end()
        };
        write().map_err(serde::ser::Error::custom)
    }
    fn read_result(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

impl ResultJson for ::pbjson_types::Empty {
    fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        out.extend_from_slice(b"null");
        Ok(())
    }
    fn read_result(body: &[u8]) -> Result<Self, serde_json::Error> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self {});
        }
        serde_json::from_slice(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_written_and_compared_alike() {
        assert_eq!(json_name("task_id"), "taskId");
        assert_eq!(json_name("history_length"), "historyLength");
        let mut out = b"x".to_vec();
        write_json_name(&mut out, "context_id");
        assert_eq!(out, b"xcontextId");
        assert!(is_json_name("task_id", "taskId"));
        assert!(is_json_name("id", "id"));
        for other in ["taskid", "task_id", "taskIdx", "task", ""] {
            assert!(!is_json_name("task_id", other), "{other}");
        }
    }
    use crate::protocol::ops::Op;

    #[test]
    fn nesting_is_measured_outside_strings() {
        let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
        assert!(!nesting_exceeds(nested(3).as_bytes(), 3));
        assert!(nesting_exceeds(nested(4).as_bytes(), 3));
        // Many brackets, shallow: walked, not refused.
        assert!(!nesting_exceeds(b"[[],[],[],[],[]]", 3));
        // Brackets in strings, escaped quotes included, do not count.
        assert!(!nesting_exceeds(br#"[["[[[[", "\"[[[["]]"#, 3));
        assert!(nesting_exceeds(br#"[["\\", [[]]]]"#, 3));
    }

    /// The sonic-rs fast path itself must accept exactly what serde_json accepts, and
    /// decode the same value, or a bad request would slip past the error path that names
    /// the field (or a good one would be refused).
    #[test]
    fn the_fast_path_accepts_what_serde_json_accepts() {
        let message = |part: &str| {
            format!(r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{part}]}}}}"#)
        };
        let cases = [
            message(r#"{"text":"plain"}"#),
            message(r#"{"text":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00"}"#),
            message(r#"{"text":"lone \ud800 surrogate"}"#),
            message(r#"{"text":"lone \udc00 trail"}"#),
            message(r#"{"text":"bad \x escape"}"#),
            message("{\"text\":\"raw \u{1} control\"}"),
            message(r#"{"text":"a","text":"b"}"#),
            message(r#"{"data":{"n":1e400}}"#),
            message(r#"{"data":{"n":-0.0,"big":123456789012345678901234567890}}"#),
            message(r#"{"data":{"a":[1,2,]}}"#),
            message(r#"{"data":{"a":NaN}}"#),
            message(r#"{"data":null}"#),
            message(r#"{"raw":"AAEC"}"#),
            message(r#"{"raw":"not base64!"}"#),
            message(r#"{"text":"x"} "#),
            r#"{"message":{}} trailing"#.to_owned(),
            r#"{"message":{"messageId":"m","role":"ROLE_NOPE","parts":[]}}"#.to_owned(),
            r#"{"configuration":{"historyLength":"7"}}"#.to_owned(),
            r#"{"configuration":{"historyLength":7.5}}"#.to_owned(),
            r#"{"configuration":{"historyLength":1e2}}"#.to_owned(),
            r#"{"configuration":{"historyLength":4294967296}}"#.to_owned(),
        ];
        for text in &cases {
            let fast = decode_fast(Op::SendMessage, text);
            let tracked = decode_tracked(Op::SendMessage, text).ok();
            assert_eq!(fast, tracked, "{text}");
        }
        // The table holds both kinds, so the comparison above is not vacuous.
        assert!(decode_fast(Op::SendMessage, &cases[0]).is_some());
        assert!(decode_fast(Op::SendMessage, &cases[11]).is_some());
        assert!(decode_fast(Op::SendMessage, &cases[15]).is_none());
        for text in [r#"{"id":"t","historyLength":-1}"#, r#"{"id":5}"#, "{}"] {
            let fast = decode_fast(Op::GetTask, text);
            let tracked = decode_tracked(Op::GetTask, text).ok();
            assert_eq!(fast, tracked, "{text}");
        }
    }
}

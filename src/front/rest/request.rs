//! An HTTP+JSON request's params as the ProtoJSON text of its operation's request: the body
//! of a `POST` rule (`body: "*"`), or the query parameters of a `GET`/`DELETE` rule (spec
//! 11.5, read through the request message's schema: booleans, repeated fields), with the
//! path's parameters and tenant bound over either. The text then decodes in the call's
//! `decode` layer exactly as JSON-RPC params do.
//!
//! The query is bounded (`MAX_QUERY_BYTES`, `MAX_QUERY_PARAMS`) before it is read.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::front::rest::path::Matched;
use crate::protocol::error::A2aError;
use crate::protocol::json::{is_json_name, write_json_name};
use crate::protocol::params::VERSION;
use crate::protocol::schema;

/// The longest query string read, in bytes.
pub(crate) const MAX_QUERY_BYTES: usize = 8 << 10;
/// The most query parameters read.
pub(crate) const MAX_QUERY_PARAMS: usize = 32;

/// The params text of `matched`'s call with `query` and `body`: the body's when it came
/// by `POST` (`post`), else the query's.
pub(crate) fn params<'b>(
    matched: &Matched,
    post: bool,
    query: Option<&str>,
    body: &'b [u8],
) -> Result<Cow<'b, str>, A2aError> {
    let members = match post {
        true => match body_text(body)? {
            // Most calls (SendMessage) have nothing to bind: their body is the params.
            text if matched.fields.is_empty() && matched.tenant.is_none() => return Ok(text),
            text => object(&text)?,
        },
        false => query_members(matched, query)?,
    };
    // Written as text straight away (a `GET` without a query builds no map at all); the
    // path's members are bound over the body's or query's, which skip them.
    let mut out = Vec::with_capacity(64);
    out.push(b'{');
    for (field, value) in &matched.fields {
        member(
            &mut out,
            |out| {
                out.push(b'"');
                write_json_name(out, field);
                out.push(b'"');
            },
            value,
        );
    }
    if let Some(tenant) = &matched.tenant {
        member(&mut out, |out| out.extend_from_slice(b"\"tenant\""), tenant);
    }
    let bound = |name: &str| {
        name == "tenant" && matched.tenant.is_some()
            || (matched.fields.iter()).any(|(field, _)| is_json_name(field, name))
    };
    for (name, value) in members.iter().filter(|(name, _)| !bound(name)) {
        member(&mut out, |out| write_str(out, name), value);
    }
    out.push(b'}');
    // Only JSON was written.
    Ok(Cow::Owned(String::from_utf8(out).unwrap_or_default()))
}

/// Appends `"name":value` (after a comma unless it is the first member).
fn member(out: &mut Vec<u8>, name: impl FnOnce(&mut Vec<u8>), value: &impl serde::Serialize) {
    if out.len() > 1 {
        out.push(b',');
    }
    name(out);
    out.push(b':');
    // A string, or a value parsed from JSON: both serialize.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Appends a JSON string.
fn write_str(out: &mut Vec<u8>, text: &str) {
    let _ = serde_json::to_writer(&mut *out, text);
}

/// The body as text; an empty body is `{}`.
fn body_text(body: &[u8]) -> Result<Cow<'_, str>, A2aError> {
    if body.is_empty() {
        return Ok(Cow::Borrowed("{}"));
    }
    std::str::from_utf8(body)
        .map(Cow::Borrowed)
        .map_err(|e| A2aError::invalid_request(&format!("the body is not UTF-8: {e}")))
}

/// The members of a body that must be a JSON object.
fn object(text: &str) -> Result<Map<String, Value>, A2aError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(members)) => Ok(members),
        Ok(_) => Err(A2aError::invalid_request("the body must be a JSON object")),
        Err(e) => Err(crate::front::envelope::parse_error(&e)),
    }
}

/// The query's parameters as members of the operation's request: a `bool` field's `true`
/// or `false` as a boolean, a repeated field's parameters as a list, others as strings
/// (ProtoJSON reads numbers, enums and timestamps from strings). `A2A-Version` is a service
/// parameter (spec 3.6.1), not a field; unknown parameters are ignored, as unknown fields
/// are (spec 5.7); a field holding a message cannot be a parameter (spec 11.5).
fn query_members(matched: &Matched, query: Option<&str>) -> Result<Map<String, Value>, A2aError> {
    let mut members = Map::new();
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return Ok(members);
    };
    if query.len() > MAX_QUERY_BYTES {
        let why = format!(
            "the query has {} bytes, more than the {MAX_QUERY_BYTES} read",
            query.len()
        );
        return Err(A2aError::invalid_request(&why));
    }
    let count = query.split('&').count();
    if count > MAX_QUERY_PARAMS {
        let why =
            format!("the query has {count} parameters, more than the {MAX_QUERY_PARAMS} read");
        return Err(A2aError::invalid_request(&why));
    }
    let message = schema::message(matched.op.request_message());
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if name.eq_ignore_ascii_case(VERSION) {
            continue;
        }
        let Some(field) = message.and_then(|m| m.field(&name)) else {
            continue;
        };
        if field.kind.message().is_some() {
            let why = "a message cannot be a query parameter (spec 11.5)";
            return Err(A2aError::invalid_params(&name, why));
        }
        let value = match (field.boolean, value.as_ref()) {
            (true, "true") => Value::Bool(true),
            (true, "false") => Value::Bool(false),
            _ => Value::from(value.into_owned()),
        };
        match (field.repeated, members.get_mut(name.as_ref())) {
            (true, Some(Value::Array(items))) => items.push(value),
            (true, None) => {
                members.insert(name.into_owned(), Value::Array(vec![value]));
            }
            (false, None) => {
                members.insert(name.into_owned(), value);
            }
            (_, Some(_)) => {
                return Err(A2aError::invalid_params(&name, "given more than once"));
            }
        }
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ops::Op;

    fn matched(op: Op, fields: &[(&'static str, &str)], tenant: Option<&str>) -> Matched {
        Matched {
            op,
            tenant: tenant.map(str::to_owned),
            fields: fields.iter().map(|(f, v)| (*f, (*v).to_owned())).collect(),
        }
    }

    fn json(text: Cow<'_, str>) -> Value {
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn query_parameters_take_their_fields_types() {
        let list = matched(Op::ListTasks, &[], Some("t"));
        let query = "contextId=c%201&pageSize=5&includeArtifacts=true&status=TASK_STATE_WORKING\
            &A2A-Version=1.0&unknown=x&statusTimestampAfter=2025-11-09T10%3A30%3A00Z";
        assert_eq!(
            json(params(&list, false, Some(query), b"").unwrap()),
            serde_json::json!({"contextId": "c 1", "pageSize": "5", "includeArtifacts": true,
                "status": "TASK_STATE_WORKING", "statusTimestampAfter": "2025-11-09T10:30:00Z",
                "tenant": "t"})
        );
        let get = matched(Op::GetTask, &[("id", "a")], None);
        let text = params(&get, false, Some("historyLength=2&id=other"), b"").unwrap();
        assert_eq!(
            json(text),
            serde_json::json!({"id": "a", "historyLength": "2"})
        );
        let err = params(&get, false, Some("historyLength=1&historyLength=2"), b"").unwrap_err();
        assert!(err.message.contains("historyLength"), "{}", err.message);
    }

    #[test]
    fn bodies_are_bound_under_the_path() {
        let send = matched(Op::SendMessage, &[], None);
        let body = br#"{"message":{"messageId":"m"}}"#;
        assert!(matches!(
            params(&send, true, None, body).unwrap(),
            Cow::Borrowed(_)
        ));
        assert_eq!(params(&send, true, None, b"").unwrap(), "{}");
        let cancel = matched(Op::CancelTask, &[("id", "path")], Some("t"));
        let text = params(&cancel, true, None, br#"{"id":"body","metadata":{"k":1}}"#).unwrap();
        assert_eq!(
            json(text),
            serde_json::json!({"id": "path", "metadata": {"k": 1}, "tenant": "t"})
        );
        assert!(params(&cancel, true, None, b"[1]").is_err());
        assert!(params(&cancel, true, None, b"{").is_err());
        assert!(params(&send, true, None, b"\xff").is_err());
    }

    /// The query's bounds, at the limit and one past.
    #[test]
    fn the_query_is_bounded() {
        let list = matched(Op::ListTasks, &[], None);
        let at: Vec<String> = (0..MAX_QUERY_PARAMS).map(|i| format!("x{i}=1")).collect();
        assert!(params(&list, false, Some(&at.join("&")), b"").is_ok());
        let past = vec!["x=1"; MAX_QUERY_PARAMS + 1].join("&");
        let err = params(&list, false, Some(&past), b"").unwrap_err();
        assert!(err.message.contains("parameters"), "{}", err.message);
        let long = format!("pageToken={}", "p".repeat(MAX_QUERY_BYTES - 10));
        assert_eq!(long.len(), MAX_QUERY_BYTES);
        assert!(params(&list, false, Some(&long), b"").is_ok());
        let err = params(&list, false, Some(&format!("{long}p")), b"").unwrap_err();
        assert!(err.message.contains("bytes"), "{}", err.message);
    }
}

//! Lays a typed request out on the HTTP+JSON binding from its operation-table rule: the
//! `/{tenant}` prefix, path parameters, query parameters (spec 11.5) and the POST body.
//! The encoding rules are described in the `rest` module doc.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::json::json_name;
use crate::protocol::ops::{HttpMethod, TypedRequest};

/// Everything but RFC 3986 unreserved characters (`ALPHA DIGIT - . _ ~`) is encoded, in
/// path segments and query components alike.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A request laid out on the binding: what goes after the base URL, and the body.
#[derive(Debug)]
pub struct Outgoing {
    /// `/{tenant}` prefix and the rule's path, parameters filled and encoded.
    pub path: String,
    /// `?…` with the remaining fields, for `GET`/`DELETE` (empty when none is set).
    pub query: String,
    /// The request without `tenant`, in ProtoJSON; the body of `POST`.
    pub body: Bytes,
}

/// Fills the operation's HTTP rule from the request (see the module doc).
/// The request's `tenant` is moved out: it travels as path prefix, not as a field.
pub fn layout(request: &mut impl TypedRequest) -> Result<Outgoing, A2aError> {
    let op = request.op();
    let rule = op.http_rule();
    let tenant = std::mem::take(request.tenant_mut());
    let body = request.to_json().map_err(|e| {
        A2aError::with_message(
            ErrorKind::Internal,
            format!("cannot encode the {} request as JSON: {e}", op.name()),
        )
    })?;
    let uses_fields = rule.path.contains('{') || rule.method != HttpMethod::Post;
    let mut fields = if uses_fields {
        serde_json::from_slice::<Fields>(&body)
            .map_err(|e| {
                A2aError::with_message(
                    ErrorKind::Internal,
                    format!("cannot read back the {} request: {e}", op.name()),
                )
            })?
            .0
    } else {
        Vec::new()
    };

    let mut path = String::with_capacity(rule.path.len() + tenant.len() + 40);
    if !tenant.is_empty() {
        path.push('/');
        push_segment(&mut path, "tenant", &tenant)?;
    }
    let mut rest = rule.path;
    while let Some((before, field, after)) = placeholder(rest) {
        path.push_str(before);
        let key = json_name(field);
        let value = match fields.iter().position(|(k, _)| *k == key) {
            Some(i) => fields.remove(i).1,
            None => Value::Null,
        };
        push_segment(&mut path, field, value.as_str().unwrap_or_default())?;
        rest = after;
    }
    path.push_str(rest);

    let query = if rule.method == HttpMethod::Post {
        String::new()
    } else {
        query_string(&fields)
    };
    Ok(Outgoing {
        path,
        query,
        body: Bytes::from(body),
    })
}

/// Splits `a/{field}b` into `("a/", "field", "b")`.
fn placeholder(template: &str) -> Option<(&str, &str, &str)> {
    let open = template.find('{')?;
    let len = template[open..].find('}')?;
    Some((
        &template[..open],
        &template[open + 1..open + len],
        &template[open + len + 1..],
    ))
}

/// Appends one encoded path segment; values a URL path cannot carry are refused.
fn push_segment(path: &mut String, field: &str, value: &str) -> Result<(), A2aError> {
    if matches!(value, "" | "." | "..") {
        let what = if value.is_empty() {
            "must not be empty".to_owned()
        } else {
            format!("must not be {value:?}")
        };
        return Err(A2aError::invalid_params(
            field,
            &format!("{what}: the HTTP+JSON binding carries it in the URL path"),
        ));
    }
    path.extend(utf8_percent_encode(value, COMPONENT));
    Ok(())
}

/// `?name=value&…` from ProtoJSON fields (spec 11.5); empty when nothing is left.
fn query_string(fields: &[(String, Value)]) -> String {
    let mut out = String::new();
    for (name, value) in fields {
        match value {
            Value::Array(items) => items.iter().for_each(|v| push_param(&mut out, name, v)),
            other => push_param(&mut out, name, other),
        }
    }
    out
}

fn push_param(out: &mut String, name: &str, value: &Value) {
    let text: Cow<'_, str> = match value {
        Value::String(s) => s.into(),
        Value::Number(n) => n.to_string().into(),
        Value::Bool(b) => if *b { "true" } else { "false" }.into(),
        Value::Null => return,
        Value::Object(_) | Value::Array(_) => {
            tracing::debug!(field = name, "nested value not sent as query parameter");
            return;
        }
    };
    out.push(if out.is_empty() { '?' } else { '&' });
    out.extend(utf8_percent_encode(name, COMPONENT));
    out.push('=');
    out.extend(utf8_percent_encode(&text, COMPONENT));
}

/// The top-level fields of a JSON object, in their order.
struct Fields(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::*;
    use crate::protocol::ops::{Op, UnaryRequest};

    fn layout_of(mut request: UnaryRequest) -> (String, String, String) {
        let out = layout(&mut request).unwrap();
        let body = String::from_utf8(out.body.to_vec()).unwrap();
        (out.path, out.query, body)
    }

    #[test]
    fn path_parameters_are_filled_and_encoded() {
        let (path, query, _) = layout_of(UnaryRequest::GetTaskPushNotificationConfig(
            GetTaskPushNotificationConfigRequest {
                tenant: "t/1".into(),
                task_id: "a b/?#%é".into(),
                id: "c:1".into(),
            },
        ));
        assert_eq!(
            path,
            "/t%2F1/tasks/a%20b%2F%3F%23%25%C3%A9/pushNotificationConfigs/c%3A1"
        );
        assert_eq!(query, "");
    }

    #[test]
    fn post_bodies_keep_path_fields_but_not_the_tenant() {
        let (path, query, body) = layout_of(UnaryRequest::CancelTask(CancelTaskRequest {
            tenant: "acme".into(),
            id: "t-1".into(),
            metadata: None,
        }));
        assert_eq!(path, "/acme/tasks/t-1:cancel");
        assert_eq!(query, "");
        assert_eq!(body, r#"{"id":"t-1"}"#);
    }

    #[test]
    fn query_parameters_follow_spec_11_5() {
        let (path, query, _) = layout_of(UnaryRequest::ListTasks(ListTasksRequest {
            context_id: "ctx 1".into(),
            status: TaskState::Working as i32,
            page_size: Some(0),
            page_token: "".into(),
            history_length: Some(3),
            status_timestamp_after: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 5_000_000,
            }),
            include_artifacts: Some(false),
            ..Default::default()
        }));
        assert_eq!(path, "/tasks");
        assert_eq!(
            query,
            "?contextId=ctx%201&status=TASK_STATE_WORKING&pageSize=0&historyLength=3\
             &statusTimestampAfter=2023-11-14T22%3A13%3A20.005Z&includeArtifacts=false"
        );
    }

    #[test]
    fn unusable_path_parameters_are_invalid_params() {
        for id in ["", ".", ".."] {
            let err = layout(&mut UnaryRequest::GetTask(GetTaskRequest {
                id: id.into(),
                ..Default::default()
            }))
            .unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidParams, "{id:?}");
            assert_eq!(err.data[1]["fieldViolations"][0]["field"], "id");
        }
        let err = layout(&mut UnaryRequest::GetExtendedAgentCard(
            GetExtendedAgentCardRequest {
                tenant: "..".into(),
            },
        ))
        .unwrap_err();
        assert_eq!(err.data[1]["fieldViolations"][0]["field"], "tenant");
    }

    #[test]
    fn every_rule_is_filled_without_leftover_placeholders() {
        for op in Op::ALL {
            let rule = op.http_rule();
            let mut rest = rule.path;
            while let Some((_, field, after)) = placeholder(rest) {
                assert!(
                    matches!(field, "id" | "task_id"),
                    "{op:?}: unknown path field {field}"
                );
                rest = after;
            }
            assert!(!rest.contains(['{', '}']), "{op:?}");
        }
    }
}

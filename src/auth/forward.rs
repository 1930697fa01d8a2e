//! Identity to the agent (`[auth.forward]`, issue 22 item 4): the headers that tell the agent
//! who calls, set by the gateway from the verified principal on every binding (gRPC metadata,
//! HTTP+JSON headers alike: both take the call's forwarded headers). A client's copy of
//! those names never reaches the agent, whoever calls (`ForwardPolicy` leaves them out), so
//! an agent may trust them as far as it trusts the gateway.
//!
//! Values: the principal's name; a claim's string as is, a number or boolean as its JSON
//! text, an array of those joined by single spaces (as `scope` is written); anything else
//! (objects, nulls, nested arrays) is not sent. A value is sent only when it is at most
//! `MAX_VALUE` bytes of printable ASCII without leading or trailing spaces, what both HTTP
//! fields and gRPC ASCII metadata carry unchanged; otherwise it is dropped (the caller is
//! still served: the agent sees no header) and counted.

use http::{HeaderName, HeaderValue};
use serde_json::Value;

use super::table::ForwardTable;
use super::Principal;
use crate::protocol::params::{owned, DEFAULT_FORWARDED};

/// The largest value sent in one identity header, in bytes.
pub const MAX_VALUE: usize = 1024;

/// The identity headers of one route.
#[derive(Clone, Debug, Default)]
pub struct CallerHeaders {
    /// `principal-header`.
    principal: Option<HeaderName>,
    /// `claims`: each header with the claim it carries.
    claims: Vec<(HeaderName, String)>,
}

/// A header `[auth.forward]` may not set; each names its key.
#[derive(Debug, thiserror::Error)]
pub enum CallerHeaderError {
    #[error("auth.forward.{0}: invalid header name {1:?}")]
    InvalidName(String, String),
    #[error("auth.forward.{0}: header {1:?} cannot carry the caller's identity: {2}")]
    Refused(String, String, &'static str),
    #[error("auth.forward.{0}: header {1:?} is named twice")]
    Twice(String, String),
}

impl CallerHeaders {
    /// The headers of `table`, each name checked.
    pub fn new(table: &ForwardTable) -> Result<CallerHeaders, CallerHeaderError> {
        let mut headers = CallerHeaders::default();
        if let Some(name) = &table.principal_header {
            headers.principal = Some(header_name("principal-header", name)?);
        }
        for (name, claim) in &table.claims {
            let key = format!("claims.{name}");
            let header = header_name(&key, name)?;
            if headers.names().any(|n| *n == header) {
                return Err(CallerHeaderError::Twice(key, name.clone()));
            }
            headers.claims.push((header, claim.clone()));
        }
        Ok(headers)
    }

    /// The header names the gateway sets: a client's copy is never forwarded.
    pub fn names(&self) -> impl Iterator<Item = &HeaderName> {
        self.principal
            .iter()
            .chain(self.claims.iter().map(|(n, _)| n))
    }

    /// Appends the identity headers of `principal` to `out`; returns how many values were
    /// dropped (unsendable, see the module).
    pub fn add(&self, principal: &Principal, out: &mut Vec<(HeaderName, HeaderValue)>) -> usize {
        let mut dropped = 0;
        let mut send = |name: &HeaderName, value: Option<HeaderValue>| match value {
            Some(value) => out.push((name.clone(), value)),
            None => dropped += 1,
        };
        // An anonymous caller has no name: no header says it has one.
        if let (Some(name), false) = (&self.principal, principal.name.is_empty()) {
            send(name, sendable(&principal.name));
        }
        let claims = principal.claims.as_deref();
        for (name, claim) in &self.claims {
            if let Some(value) = claims.and_then(|claims| claims.get(claim)) {
                send(name, claim_text(value).as_deref().and_then(sendable));
            }
        }
        dropped
    }
}

/// Why `lower` (a lowercase name) can carry neither the caller's identity nor its
/// credential, if it cannot: the gateway owns it, forwards or logs the client's own
/// (credentials, trace context, extensions, the request id), or gRPC reads it as binary.
pub fn reserved(lower: &str) -> Option<&'static str> {
    if let Some(why) = owned(lower) {
        return Some(why);
    }
    if DEFAULT_FORWARDED.contains(&lower) {
        return Some(
            "the gateway forwards or logs the client's (credentials, trace context, extensions, request id)",
        );
    }
    lower
        .ends_with("-bin")
        .then_some("gRPC reads a `-bin` name as binary metadata")
}

/// `name` as a header the gateway may set from the caller's identity: valid, not owned by
/// the gateway, not a header it forwards or manages by default, not gRPC binary metadata.
fn header_name(key: &str, name: &str) -> Result<HeaderName, CallerHeaderError> {
    let lower = name.trim().to_ascii_lowercase();
    let refused = |why| {
        Err(CallerHeaderError::Refused(
            key.to_owned(),
            name.to_owned(),
            why,
        ))
    };
    if let Some(why) = reserved(&lower) {
        return refused(why);
    }
    HeaderName::from_bytes(lower.as_bytes())
        .map_err(|_| CallerHeaderError::InvalidName(key.to_owned(), name.to_owned()))
}

/// A claim's value as header text, if it has one (see the module).
fn claim_text(value: &Value) -> Option<String> {
    let scalar = |value: &Value| match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    match value {
        Value::Array(items) => {
            let items: Option<Vec<String>> = items.iter().map(scalar).collect();
            Some(items?.join(" "))
        }
        value => scalar(value),
    }
}

/// `text` as a header value, if it is one every binding carries unchanged.
fn sendable(text: &str) -> Option<HeaderValue> {
    let bytes = text.as_bytes();
    let printable = bytes.iter().all(|b| (0x20..=0x7e).contains(b));
    let trimmed = bytes.first() != Some(&b' ') && bytes.last() != Some(&b' ');
    if bytes.is_empty() || bytes.len() > MAX_VALUE || !printable || !trimmed {
        return None;
    }
    HeaderValue::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scheme;
    use serde_json::json;
    use std::sync::Arc;

    fn table(principal: Option<&str>, claims: &[(&str, &str)]) -> ForwardTable {
        ForwardTable {
            principal_header: principal.map(str::to_owned),
            claims: claims
                .iter()
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect(),
            authorization: None,
        }
    }

    fn principal(name: &str, claims: Value) -> Principal {
        Principal {
            name: name.into(),
            scheme: Scheme::Jwt,
            claims: claims.as_object().cloned().map(Arc::new),
        }
    }

    fn shown(headers: &CallerHeaders, principal: &Principal) -> (Vec<String>, usize) {
        let mut out = Vec::new();
        let dropped = headers.add(principal, &mut out);
        let shown = out
            .iter()
            .map(|(n, v)| format!("{n}={}", v.to_str().unwrap()))
            .collect();
        (shown, dropped)
    }

    #[test]
    fn the_principal_and_its_claims_as_text() {
        let headers = CallerHeaders::new(&table(
            Some("X-Principal"),
            &[
                ("x-scope", "scope"),
                ("x-admin", "admin"),
                ("x-level", "level"),
                ("x-groups", "groups"),
                ("x-absent", "absent"),
            ],
        ))
        .unwrap();
        let alice = principal(
            "alice",
            json!({"scope": "a2a:read a2a:write", "admin": true, "level": 3,
                   "groups": ["ops", "billing", 7]}),
        );
        let (sent, dropped) = shown(&headers, &alice);
        // Claims in header-name order (the table is a sorted map).
        assert_eq!(
            sent,
            [
                "x-principal=alice",
                "x-admin=true",
                "x-groups=ops billing 7",
                "x-level=3",
                "x-scope=a2a:read a2a:write"
            ]
        );
        assert_eq!(dropped, 0);
        // An API key's principal has no claims; an anonymous one no name.
        let key = Principal {
            name: "svc-billing".into(),
            scheme: Scheme::ApiKey,
            claims: None,
        };
        assert_eq!(
            shown(&headers, &key),
            (vec!["x-principal=svc-billing".to_owned()], 0)
        );
        let anonymous = Principal {
            name: "".into(),
            scheme: Scheme::Anonymous,
            claims: None,
        };
        assert_eq!(shown(&headers, &anonymous), (vec![], 0));
    }

    #[test]
    fn unsendable_values_are_dropped_and_counted() {
        let headers = CallerHeaders::new(&table(
            Some("x-principal"),
            &[
                ("x-a", "object"),
                ("x-b", "nested"),
                ("x-c", "null"),
                ("x-d", "long"),
                ("x-e", "exact"),
                ("x-f", "unicode"),
                ("x-g", "newline"),
                ("x-h", "empty"),
            ],
        ))
        .unwrap();
        let at_limit = "v".repeat(MAX_VALUE);
        let caller = principal(
            "bob\r\nx-injected: 1",
            json!({"object": {"a": 1}, "nested": [["a"]], "null": null,
                   "long": "v".repeat(MAX_VALUE + 1), "exact": at_limit,
                   "unicode": "José", "newline": "a\nb", "empty": ""}),
        );
        let (sent, dropped) = shown(&headers, &caller);
        assert_eq!(sent, [format!("x-e={at_limit}")]);
        assert_eq!(dropped, 8);
        let padded = principal(" alice", json!({}));
        assert_eq!(shown(&headers, &padded), (vec![], 1));
    }

    #[test]
    fn names_that_cannot_carry_an_identity() {
        for bad in [
            "authorization",
            "Connection",
            ":path",
            "grpc-timeout",
            "host",
            "te",
            "a2a-version",
            "a2a-extensions",
            "traceparent",
            "x-request-id",
            "x-principal-bin",
            "proxy-authorization",
        ] {
            let e = CallerHeaders::new(&table(Some(bad), &[])).unwrap_err();
            assert!(matches!(e, CallerHeaderError::Refused(..)), "{bad}: {e}");
            assert!(
                e.to_string().starts_with("auth.forward.principal-header:"),
                "{e}"
            );
            let e = CallerHeaders::new(&table(None, &[(bad, "sub")])).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("auth.forward.claims.{bad}:")),
                "{e}"
            );
        }
        let e = CallerHeaders::new(&table(Some("x p"), &[])).unwrap_err();
        assert!(matches!(e, CallerHeaderError::InvalidName(..)), "{e}");
        let e = CallerHeaders::new(&table(Some("x-who"), &[("X-Who", "sub")])).unwrap_err();
        assert!(matches!(e, CallerHeaderError::Twice(..)), "{e}");
    }
}

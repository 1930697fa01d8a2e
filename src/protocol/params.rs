//! Service parameters (spec 3.2.6, 3.6, 9.2, 10.2): `A2A-Version` negotiation and the
//! request headers the gateway forwards to backends.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::protocol::error::{A2aError, ErrorKind};

/// The protocol version the gateway speaks and sends to every backend.
pub const SUPPORTED_VERSION: &str = "1.0";
/// `A2A-Version` (header, query parameter and, lowercased, gRPC metadata key).
pub const VERSION: &str = "a2a-version";
/// `A2A-Extensions` (header and, lowercased, gRPC metadata key).
pub const EXTENSIONS: &str = "a2a-extensions";

/// Headers forwarded by default: the service parameter for extensions, credentials,
/// trace context and request correlation.
pub const DEFAULT_FORWARDED: &[&str] = &[
    EXTENSIONS,
    "authorization",
    "traceparent",
    "tracestate",
    "x-request-id",
];

/// Request headers whose value is new on every call: correlation, trace context, the
/// remaining deadline.
const NEW_ON_EVERY_CALL: &[&str] = &["traceparent", "tracestate", "x-request-id", "grpc-timeout"];

/// Whether `name`'s value is new on every call: sent as an HPACK never-indexed literal,
/// since indexing it would evict the fixed headers from the backend connection's table and
/// make both ends search and update the table per call.
pub fn new_on_every_call(name: &HeaderName) -> bool {
    NEW_ON_EVERY_CALL.contains(&name.as_str())
}

/// Marks `value` never-indexed when `name` is new on every call (`new_on_every_call`).
pub fn never_index_per_call(name: &HeaderName, value: &mut HeaderValue) {
    if new_on_every_call(name) {
        value.set_sensitive(true);
    }
}

/// Hop-by-hop and framing headers that describe one connection, never the request
/// (RFC 9110 7.6.1); they are never forwarded, even when configured.
pub const NEVER_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "content-type",
    "accept-encoding",
    "content-encoding",
];

/// Checks the client's `A2A-Version` (header, else query parameter). Empty or missing
/// means 0.3 (spec 3.6.2); only major version 1 is served, minor versions are compatible.
/// Versions are matched by `Major.Minor` (spec 3.6), so a patch part is accepted as the
/// reference SDK accepts it: `1`, `1.x` and `1.x.y` (digits).
pub fn negotiate_version(headers: &HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
    let requested = requested_version(headers, query);
    let requested = if requested.is_empty() {
        "0.3"
    } else {
        requested.as_ref()
    };
    if served(requested) {
        Ok(())
    } else {
        Err(A2aError::a2a(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A version '{requested}' is not supported by this handler. Expected version '{SUPPORTED_VERSION}'."
            ),
        ))
    }
}

/// Whether the client speaks v0.3: `A2A-Version` (header, else query parameter) missing or
/// empty (spec 3.6.2: empty means 0.3), or `0.x` with x ≥ 3 (the reference SDK's v0.3
/// range, 0.3 ≤ v < 1.0).
pub fn legacy_requested(headers: &HeaderMap, query: Option<&str>) -> bool {
    let requested = requested_version(headers, query);
    let mut parts = requested.split('.');
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    requested.is_empty()
        || (parts.next() == Some("0")
            && parts
                .next()
                .is_some_and(|minor| digits(minor) && minor.parse::<u32>().is_ok_and(|m| m >= 3))
            && parts.clone().count() <= 1
            && parts.all(digits))
}

/// The requested version, trimmed: the header, else the query parameter, else empty.
fn requested_version<'a>(headers: &'a HeaderMap, query: Option<&str>) -> std::borrow::Cow<'a, str> {
    match headers.get(VERSION) {
        Some(value) => value.to_str().unwrap_or("?").trim().into(),
        None => {
            let from_query = query.and_then(version_from_query).unwrap_or_default();
            from_query.trim().to_owned().into()
        }
    }
}

/// `1`, `1.x` or `1.x.y`, each part ASCII digits.
fn served(version: &str) -> bool {
    let mut parts = version.split('.');
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    parts.next() == Some("1") && parts.clone().count() <= 2 && parts.all(digits)
}

fn version_from_query(query: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_encoding::percent_decode_str(key)
            .decode_utf8()
            .ok()?;
        key.eq_ignore_ascii_case(VERSION).then(|| {
            let value = value.replace('+', " ");
            percent_encoding::percent_decode_str(&value)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// v0.3's name of `A2A-Extensions` (v0.3 clients send both; older ones only this one).
pub const LEGACY_EXTENSIONS: &str = "x-a2a-extensions";

/// A v0.3 call's `X-A2A-Extensions` values, forwarded as `A2A-Extensions` when the call
/// names no `A2A-Extensions` of its own (the v1.0 backend knows only that name).
pub fn legacy_extensions(headers: &HeaderMap, forwarded: &mut Vec<(HeaderName, HeaderValue)>) {
    if headers.contains_key(EXTENSIONS) {
        return;
    }
    for value in headers.get_all(LEGACY_EXTENSIONS) {
        forwarded.push((HeaderName::from_static(EXTENSIONS), value.clone()));
    }
}

/// The backend's activated extensions (all `a2a-extensions` values, each possibly a
/// comma-separated list) as one `A2A-Extensions` response header value.
pub fn joined_extensions<'a>(values: impl Iterator<Item = &'a str>) -> Option<HeaderValue> {
    let joined = values.collect::<Vec<_>>().join(", ");
    (!joined.is_empty()).then(|| HeaderValue::from_str(&joined).ok())?
}

/// The `A2A-Extensions` header of an HTTP/2 or HTTP/1 backend response, all lines joined.
pub fn response_extensions(headers: &HeaderMap) -> Option<HeaderValue> {
    joined_extensions(
        headers
            .get_all(EXTENSIONS)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// Which request headers go to the backend.
#[derive(Clone, Debug)]
pub struct ForwardPolicy {
    /// Each forwarded name, and whether its value is new on every call (decided once).
    names: Vec<(HeaderName, bool)>,
}

/// A configured header that may not be forwarded.
#[derive(Debug, thiserror::Error)]
pub enum ForwardPolicyError {
    #[error("invalid header name {0:?}")]
    InvalidName(String),
    #[error("header {0:?} is hop-by-hop or framing and is never forwarded")]
    HopByHop(String),
}

impl ForwardPolicy {
    /// The default headers plus `extra` (validated).
    pub fn new<S: AsRef<str>>(extra: &[S]) -> Result<Self, ForwardPolicyError> {
        let mut names: Vec<HeaderName> = DEFAULT_FORWARDED
            .iter()
            .map(|n| HeaderName::from_static(n))
            .collect();
        for name in extra {
            let name = name.as_ref();
            let header = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| ForwardPolicyError::InvalidName(name.to_owned()))?;
            if NEVER_FORWARDED.contains(&header.as_str()) || header.as_str() == VERSION {
                return Err(ForwardPolicyError::HopByHop(name.to_owned()));
            }
            if !names.contains(&header) {
                names.push(header);
            }
        }
        let names = names
            .into_iter()
            .map(|name| {
                let per_call = new_on_every_call(&name);
                (name, per_call)
            })
            .collect();
        Ok(Self { names })
    }

    /// The forwarded headers of one request, in policy order, all values kept.
    pub fn select(&self, headers: &HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
        let mut out = Vec::new();
        for (name, per_call) in &self.names {
            for value in headers.get_all(name) {
                let mut value = value.clone();
                if *per_call {
                    value.set_sensitive(true);
                }
                out.push((name.clone(), value));
            }
        }
        out
    }
}

impl Default for ForwardPolicy {
    fn default() -> Self {
        Self::new::<&str>(&[]).expect("default forwarded headers are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(header: Option<&str>, query: Option<&str>) -> Result<(), ErrorKind> {
        let mut headers = HeaderMap::new();
        if let Some(v) = header {
            headers.insert(VERSION, HeaderValue::from_str(v).unwrap());
        }
        negotiate_version(&headers, query).map_err(|e| e.kind)
    }

    #[test]
    fn versions() {
        let accepted = ["1", "1.0", " 1.5 ", "1.0.0", "1.2.3", "1.10.200", "1.0.0 "];
        for version in accepted {
            assert_eq!(check(Some(version), None), Ok(()), "{version:?}");
        }
        let refused = [
            "",
            "0.3",
            "2.0",
            "10",
            "1.x",
            "1.",
            "1.0.",
            "1..0",
            "1.0.x",
            "1.0.0.0",
            "01.0",
            "1.0-rc1",
            "v1.0",
            "1,0",
            "1.0.0+build",
        ];
        for version in refused {
            let outcome = check(Some(version), None);
            assert_eq!(outcome, Err(ErrorKind::VersionNotSupported), "{version:?}");
        }
        assert_eq!(check(None, Some("x=1&A2A-Version=1.0")), Ok(()));
        assert_eq!(check(None, Some("a2a-version=1.1.0")), Ok(()));
        assert_eq!(
            check(None, Some("a2a-version=1.1.x")),
            Err(ErrorKind::VersionNotSupported)
        );
        assert_eq!(check(None, None), Err(ErrorKind::VersionNotSupported));
    }

    #[test]
    fn legacy_versions() {
        let legacy = |header: Option<&str>, query: Option<&str>| {
            let mut headers = HeaderMap::new();
            if let Some(v) = header {
                headers.insert(VERSION, HeaderValue::from_str(v).unwrap());
            }
            legacy_requested(&headers, query)
        };
        for version in ["", " ", "0.3", "0.3.0", " 0.3.1 ", "0.4", "0.10"] {
            assert!(legacy(Some(version), None), "{version:?}");
        }
        for version in [
            "1.0", "1", "0.2", "0.2.9", "0", "0.", "0.3.", "0.x", "0.3.0.0", "v0.3",
        ] {
            assert!(!legacy(Some(version), None), "{version:?}");
        }
        assert!(legacy(None, None));
        assert!(legacy(None, Some("a2a-version=0.3")));
        assert!(!legacy(None, Some("a2a-version=1.0")));
    }

    #[test]
    fn legacy_extension_headers_are_forwarded_under_the_v1_name() {
        let mut headers = HeaderMap::new();
        headers.append(LEGACY_EXTENSIONS, HeaderValue::from_static("urn:a"));
        headers.append(LEGACY_EXTENSIONS, HeaderValue::from_static("urn:b"));
        let mut forwarded = Vec::new();
        legacy_extensions(&headers, &mut forwarded);
        let values: Vec<_> = forwarded
            .iter()
            .map(|(n, v)| format!("{n}={}", v.to_str().unwrap()))
            .collect();
        assert_eq!(values, ["a2a-extensions=urn:a", "a2a-extensions=urn:b"]);
        // A call that names both sends the v1.0 header only (forwarded by the policy).
        headers.insert(EXTENSIONS, HeaderValue::from_static("urn:a"));
        let mut forwarded = Vec::new();
        legacy_extensions(&headers, &mut forwarded);
        assert!(forwarded.is_empty());
    }

    #[test]
    fn hop_by_hop_headers_are_refused() {
        assert!(ForwardPolicy::new(&["Connection"]).is_err());
        assert!(ForwardPolicy::new(&["x tenant"]).is_err());
        let policy = ForwardPolicy::new(&["X-Tenant"]).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-tenant", HeaderValue::from_static("t1"));
        headers.insert("connection", HeaderValue::from_static("close"));
        headers.append("a2a-extensions", HeaderValue::from_static("u1"));
        headers.append("a2a-extensions", HeaderValue::from_static("u2"));
        let names: Vec<_> = policy
            .select(&headers)
            .into_iter()
            .map(|(n, v)| format!("{n}={}", v.to_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            ["a2a-extensions=u1", "a2a-extensions=u2", "x-tenant=t1"]
        );
    }
}

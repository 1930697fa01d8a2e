//! Service parameters (spec 3.2.6, 3.6, 9.2, 10.2): `A2A-Version` negotiation and the
//! request headers the gateway forwards to backends.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::protocol::error::{A2aError, ErrorKind};

/// The protocol version the gateway speaks and sends to every backend.
pub(crate) const SUPPORTED_VERSION: &str = "1.0";
/// `A2A-Version` (header, query parameter and, lowercased, gRPC metadata key).
pub(crate) const VERSION: &str = "a2a-version";
/// `A2A-Extensions` (header and, lowercased, gRPC metadata key).
pub(crate) const EXTENSIONS: &str = "a2a-extensions";

/// Headers forwarded by default: the service parameter for extensions, credentials,
/// trace context and request correlation.
pub(crate) const DEFAULT_FORWARDED: &[&str] = &[
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
pub(crate) fn new_on_every_call(name: &HeaderName) -> bool {
    NEW_ON_EVERY_CALL.contains(&name.as_str())
}

/// Marks `value` never-indexed when `name` is new on every call (`new_on_every_call`).
pub(crate) fn never_index_per_call(name: &HeaderName, value: &mut HeaderValue) {
    if new_on_every_call(name) {
        value.set_sensitive(true);
    }
}

/// Request headers the gateway owns toward the agent, with why: a client's value never
/// replaces the gateway's, so no setting (`forward-header`, `set-header`, `remove-header`)
/// may name them, and `ForwardPolicy` refuses them at load. A name ending in `*` is a
/// prefix. `a2a-version` is owned because the gateway speaks 1.0 to every agent whatever
/// the client asked for (it negotiates the client's version itself); `host` because the
/// agent's authority is the backend URL's.
pub(crate) const OWNED: &[(&str, &str)] = &[
    ("grpc-*", "gRPC framing and deadline, set by the gateway"),
    ("te", "set by the gateway for gRPC trailers"),
    ("user-agent", "the gateway names itself to the agent"),
    ("content-type", "framing of the backend call"),
    ("content-length", "framing of the backend call"),
    ("content-encoding", "framing of the backend call"),
    ("accept-encoding", "framing of the backend call"),
    ("a2a-version", "the gateway speaks A2A 1.0 to every agent"),
    ("host", "the agent's authority is the backend URL's"),
    ("connection", "hop-by-hop (RFC 9110 7.6.1)"),
    ("keep-alive", "hop-by-hop (RFC 9110 7.6.1)"),
    ("proxy-*", "hop-by-hop: meant for the proxy, not the agent"),
    ("transfer-encoding", "hop-by-hop (RFC 9110 7.6.1)"),
    ("upgrade", "hop-by-hop (RFC 9110 7.6.1)"),
    ("trailer", "hop-by-hop (RFC 9110 7.6.1)"),
];

/// Why the gateway owns `name` (lowercase), if it does (`OWNED`); pseudo-headers (`:path`…)
/// are HTTP/2 framing and owned too.
pub(crate) fn owned(name: &str) -> Option<&'static str> {
    if name.starts_with(':') {
        return Some("a pseudo-header, HTTP/2 framing");
    }
    OWNED.iter().find_map(|(owned, why)| {
        let hit = match owned.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *owned,
        };
        hit.then_some(*why)
    })
}

/// Credentials: marked sensitive at the edge (no log or debug output shows them) and sent
/// to the agent as HPACK never-indexed literals, so no shared table on the way keeps them.
/// `--sensitive-header` adds to it.
pub(crate) const SENSITIVE: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

/// Checks the client's `A2A-Version` (header, else query parameter). Empty or missing
/// means 0.3 (spec 3.6.2); only major version 1 is served, minor versions are compatible.
/// Versions are matched by `Major.Minor` (spec 3.6), so a patch part is accepted as the
/// reference SDK accepts it: `1`, `1.x` and `1.x.y` (digits).
pub(crate) fn negotiate_version(headers: &HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
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
pub(crate) fn legacy_requested(headers: &HeaderMap, query: Option<&str>) -> bool {
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
    match headers.get(const { HeaderName::from_static(VERSION) }) {
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
pub(crate) const LEGACY_EXTENSIONS: &str = "x-a2a-extensions";

/// A v0.3 call's `X-A2A-Extensions` values, forwarded as `A2A-Extensions` when the call
/// names no `A2A-Extensions` of its own (the v1.0 backend knows only that name).
pub(crate) fn legacy_extensions(
    headers: &HeaderMap,
    forwarded: &mut Vec<(HeaderName, HeaderValue)>,
) {
    if headers.contains_key(const { HeaderName::from_static(EXTENSIONS) }) {
        return;
    }
    for value in headers.get_all(LEGACY_EXTENSIONS) {
        forwarded.push((HeaderName::from_static(EXTENSIONS), value.clone()));
    }
}

/// The backend's activated extensions (all `a2a-extensions` values, each possibly a
/// comma-separated list) as one `A2A-Extensions` response header value.
pub(crate) fn joined_extensions<'a>(values: impl Iterator<Item = &'a str>) -> Option<HeaderValue> {
    let joined = values.collect::<Vec<_>>().join(", ");
    (!joined.is_empty()).then(|| HeaderValue::from_str(&joined).ok())?
}

/// The `A2A-Extensions` header of an HTTP/2 or HTTP/1 backend response, all lines joined.
pub(crate) fn response_extensions(headers: &HeaderMap) -> Option<HeaderValue> {
    joined_extensions(
        headers
            .get_all(const { HeaderName::from_static(EXTENSIONS) })
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// One route's header settings, as configured (each named by its flag in errors).
#[derive(Clone, Copy, Debug, Default)]
pub struct HeaderRules<'a> {
    /// `--forward-header`: forwarded besides `DEFAULT_FORWARDED`.
    pub forward: &'a [String],
    /// `--set-header NAME=VALUE`: sent to the agent on every call, the client's dropped.
    pub set: &'a [String],
    /// `--remove-header`: never sent to the agent (also a default-forwarded name).
    pub remove: &'a [String],
    /// `--identity-header`: carries the caller's identity or tenant; on a fixed-tenant
    /// route the client's value is never forwarded (the route, not the client, says whose
    /// call it is).
    pub identity: &'a [String],
    /// `--sensitive-header`: credentials besides `SENSITIVE`.
    pub sensitive: &'a [String],
    /// The route pins a tenant (`--tenant`).
    pub fixed_tenant: bool,
    /// The headers the gateway sets from the caller's verified identity (`[auth.forward]`):
    /// a client's copy is never forwarded, and no other setting may name them.
    pub caller: &'a [HeaderName],
    /// Credentials the gateway consumes (the API key header, a verified `Authorization`
    /// when `[auth.forward] authorization = false`): never the client's to the agent.
    pub consumed: &'a [HeaderName],
}

/// Which request headers go to the backend, and which the route sets itself. Clones share
/// the lists; so do routes of the same rules (`Settings::load`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ForwardPolicy {
    /// Each forwarded name, and whether its value is sent never-indexed (new on every call,
    /// or a credential; decided once).
    names: std::sync::Arc<[(HeaderName, bool)]>,
    /// `set-header` values, sent on every call instead of the client's.
    set: std::sync::Arc<[(HeaderName, HeaderValue)]>,
}

/// A configured header that may not be used; each names its setting.
#[derive(Debug, thiserror::Error)]
pub enum ForwardPolicyError {
    /// A header name that HTTP does not allow: the flag and the name.
    #[error("--{0}: invalid header name {1:?}")]
    InvalidName(&'static str, String),
    /// A header the gateway itself sets or strips: the flag, the name and why.
    #[error("--{0}: header {1:?} is owned by the gateway ({2}) and cannot be configured")]
    Owned(&'static str, String, &'static str),
    /// The entry is not shown: it may carry a credential.
    #[error("--set-header: an entry of {0} bytes has no `=` (NAME=VALUE; the entry is not shown)")]
    SetNoValue(usize),
    /// The value is not shown: it may be a credential.
    #[error("--set-header: the value given for {0:?} is not a valid header value (not shown)")]
    SetValue(String),
    /// A header both set and removed.
    #[error("--set-header and --remove-header both name {0:?}")]
    SetAndRemoved(String),
    /// A header that `[auth.forward]` fills from the caller's identity: the flag and
    /// the name.
    #[error("--{0}: {1:?} is set by the gateway from the caller's identity ([auth.forward])")]
    Caller(&'static str, String),
}

impl ForwardPolicy {
    /// The default headers plus `extra` (validated), no other rule.
    pub fn new<S: AsRef<str>>(extra: &[S]) -> Result<Self, ForwardPolicyError> {
        let forward: Vec<String> = extra.iter().map(|s| s.as_ref().to_owned()).collect();
        Self::with_rules(&HeaderRules {
            forward: &forward,
            ..HeaderRules::default()
        })
    }

    /// The policy of `rules`, every name checked against `OWNED`.
    pub fn with_rules(rules: &HeaderRules<'_>) -> Result<Self, ForwardPolicyError> {
        let names_of = |flag, list: &[String]| -> Result<Vec<HeaderName>, ForwardPolicyError> {
            list.iter().map(|name| header_name(flag, name)).collect()
        };
        let extra = names_of("forward-header", rules.forward)?;
        let removed = names_of("remove-header", rules.remove)?;
        let identity = names_of("identity-header", rules.identity)?;
        let sensitive = names_of("sensitive-header", rules.sensitive)?;
        let is_sensitive =
            |name: &HeaderName| SENSITIVE.contains(&name.as_str()) || sensitive.contains(name);
        let mut set = Vec::with_capacity(rules.set.len());
        for pair in rules.set {
            let (name, value) = pair
                .split_once('=')
                .ok_or(ForwardPolicyError::SetNoValue(pair.len()))?;
            let name = header_name("set-header", name)?;
            let mut value = HeaderValue::from_str(value.trim())
                .map_err(|_| ForwardPolicyError::SetValue(name.to_string()))?;
            if removed.contains(&name) {
                return Err(ForwardPolicyError::SetAndRemoved(name.to_string()));
            }
            if rules.caller.contains(&name) {
                return Err(ForwardPolicyError::Caller("set-header", name.to_string()));
            }
            value.set_sensitive(is_sensitive(&name));
            set.push((name, value));
        }
        if let Some(name) = removed.iter().find(|name| rules.caller.contains(name)) {
            return Err(ForwardPolicyError::Caller(
                "remove-header",
                name.to_string(),
            ));
        }
        let mut names: Vec<HeaderName> = Vec::new();
        let defaults = DEFAULT_FORWARDED.iter().map(|n| HeaderName::from_static(n));
        for name in defaults.chain(extra) {
            let dropped = names.contains(&name)
                || removed.contains(&name)
                || set.iter().any(|(set, _)| *set == name)
                || (rules.fixed_tenant && identity.contains(&name))
                || rules.caller.contains(&name)
                || rules.consumed.contains(&name);
            if !dropped {
                names.push(name);
            }
        }
        let names = names
            .into_iter()
            .map(|name| {
                let never_indexed = new_on_every_call(&name) || is_sensitive(&name);
                (name, never_indexed)
            })
            .collect();
        Ok(Self {
            names,
            set: set.into(),
        })
    }

    /// The route's own headers (`set-header`), sent on every call to the agent, also on
    /// the calls the gateway makes of itself.
    pub(crate) fn set_headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.set
    }

    /// The forwarded headers of one request, in policy order, all values kept, then the
    /// route's own (`set-header`).
    pub(crate) fn select(&self, headers: &HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
        let mut out = Vec::with_capacity(self.set.len());
        for (name, never_indexed) in self.names.iter() {
            for value in headers.get_all(name) {
                let mut value = value.clone();
                if *never_indexed {
                    value.set_sensitive(true);
                }
                out.push((name.clone(), value));
            }
        }
        out.extend(self.set.iter().cloned());
        out
    }
}

/// `name` as a header name a setting (`flag`) may use: valid and not owned by the gateway.
fn header_name(flag: &'static str, name: &str) -> Result<HeaderName, ForwardPolicyError> {
    let trimmed = name.trim().to_ascii_lowercase();
    if let Some(why) = owned(&trimmed) {
        return Err(ForwardPolicyError::Owned(flag, name.to_owned(), why));
    }
    HeaderName::from_bytes(trimmed.as_bytes())
        .map_err(|_| ForwardPolicyError::InvalidName(flag, name.to_owned()))
}

/// The names marked sensitive at the edge: `SENSITIVE` plus `extra` (`--sensitive-header`,
/// checked by `ForwardPolicy::with_rules`; an invalid one is skipped here).
pub fn sensitive_names(extra: &[String]) -> Vec<HeaderName> {
    let extra = extra.iter().filter_map(|name| {
        HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes()).ok()
    });
    SENSITIVE
        .iter()
        .map(|name| HeaderName::from_static(name))
        .chain(extra)
        .collect()
}

impl Default for ForwardPolicy {
    fn default() -> Self {
        Self::new::<&str>(&[]).expect("default forwarded headers are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_set_header_never_shows_its_value() {
        for entry in [
            "authorization Bearer SECRET",
            "authorization=Bearer \u{1}SECRET",
        ] {
            let set = [entry.to_owned()];
            let rules = HeaderRules {
                set: &set,
                ..HeaderRules::default()
            };
            let err = ForwardPolicy::with_rules(&rules).unwrap_err().to_string();
            assert!(err.starts_with("--set-header"), "{err}");
            assert!(!err.contains("SECRET"), "{err}");
        }
    }

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
        assert_eq!(
            shown(&policy.select(&headers)),
            ["a2a-extensions=u1", "a2a-extensions=u2", "x-tenant=t1"]
        );
    }

    fn shown(forwarded: &[(HeaderName, HeaderValue)]) -> Vec<String> {
        forwarded
            .iter()
            .map(|(n, v)| format!("{n}={}", v.to_str().unwrap()))
            .collect()
    }

    /// Every row of `OWNED` is refused by every setting that names headers, a prefix row
    /// by a name under it, whatever the case; pseudo-headers too.
    #[test]
    fn every_owned_name_is_refused_by_every_setting() {
        let mut names: Vec<String> = OWNED
            .iter()
            .map(|(name, _)| name.replace('*', "anything"))
            .collect();
        names.extend([":path".into(), ":authority".into(), "GRPC-Timeout".into()]);
        for name in &names {
            let one = [name.clone()];
            let pair = [format!("{name}=v")];
            for rules in [
                HeaderRules {
                    forward: &one,
                    ..HeaderRules::default()
                },
                HeaderRules {
                    set: &pair,
                    ..HeaderRules::default()
                },
                HeaderRules {
                    remove: &one,
                    ..HeaderRules::default()
                },
                HeaderRules {
                    identity: &one,
                    ..HeaderRules::default()
                },
                HeaderRules {
                    sensitive: &one,
                    ..HeaderRules::default()
                },
            ] {
                let err = ForwardPolicy::with_rules(&rules).unwrap_err();
                assert!(
                    matches!(err, ForwardPolicyError::Owned(..)),
                    "{name}: {err}"
                );
                assert!(err.to_string().contains(name.as_str()), "{err}");
            }
        }
        for fine in ["x-tenant", "grpcx", "proxied-by", "tea", "authorization"] {
            ForwardPolicy::new(&[fine]).unwrap();
        }
    }

    #[test]
    fn routes_set_remove_and_keep_identity_from_clients_on_fixed_tenants() {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (forward, set) = (
            strings(&["x-tenant", "x-user"]),
            strings(&["x-route=billing"]),
        );
        let (remove, identity) = (strings(&["authorization"]), strings(&["x-tenant"]));
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-tenant", "evil"),
            ("x-user", "u1"),
            ("x-route", "forged"),
            ("authorization", "Bearer t"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        let rules = HeaderRules {
            forward: &forward,
            set: &set,
            remove: &remove,
            identity: &identity,
            ..HeaderRules::default()
        };
        let open = ForwardPolicy::with_rules(&rules).unwrap();
        assert_eq!(
            shown(&open.select(&headers)),
            ["x-tenant=evil", "x-user=u1", "x-route=billing"]
        );
        let fixed = HeaderRules {
            fixed_tenant: true,
            ..rules
        };
        let fixed = ForwardPolicy::with_rules(&fixed).unwrap();
        assert_eq!(
            shown(&fixed.select(&headers)),
            ["x-user=u1", "x-route=billing"]
        );
        let both = strings(&["x-route"]);
        let conflict = HeaderRules {
            remove: &both,
            ..rules
        };
        assert!(matches!(
            ForwardPolicy::with_rules(&conflict),
            Err(ForwardPolicyError::SetAndRemoved(_))
        ));
        for bad in ["x-route", "x-route=a\nb", "=v"] {
            let bad = strings(&[bad]);
            let rules = HeaderRules {
                set: &bad,
                ..HeaderRules::default()
            };
            assert!(ForwardPolicy::with_rules(&rules).is_err(), "{bad:?}");
        }
    }

    /// Credentials, default and configured, leave marked sensitive (HPACK never-indexed),
    /// as do per-call values; other headers do not.
    #[test]
    fn credentials_are_sent_never_indexed() {
        let (forward, sensitive) = (
            vec![
                "x-api-key".to_owned(),
                "x-secret".to_owned(),
                "x-plain".to_owned(),
            ],
            vec!["X-Secret".to_owned()],
        );
        let policy = ForwardPolicy::with_rules(&HeaderRules {
            forward: &forward,
            sensitive: &sensitive,
            ..HeaderRules::default()
        })
        .unwrap();
        let mut headers = HeaderMap::new();
        for name in [
            "authorization",
            "x-api-key",
            "x-secret",
            "x-plain",
            "x-request-id",
        ] {
            headers.insert(name, HeaderValue::from_static("v"));
        }
        let marked: Vec<_> = policy
            .select(&headers)
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.is_sensitive()))
            .collect();
        let expected = [
            ("authorization", true),
            ("x-request-id", true),
            ("x-api-key", true),
            ("x-secret", true),
            ("x-plain", false),
        ];
        let expected: Vec<_> = expected.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        assert_eq!(marked, expected);
        let edge = sensitive_names(&sensitive);
        assert!(edge.iter().any(|n| n == "x-secret") && edge.iter().any(|n| n == "cookie"));
    }

    /// The headers `[auth.forward]` sets never come from the client, even when another
    /// setting forwards them, and no setting may set or remove them; a consumed credential
    /// is not forwarded either.
    #[test]
    fn caller_headers_are_never_the_clients() {
        let caller = [HeaderName::from_static("x-principal")];
        let forward = vec!["X-Principal".to_owned(), "x-other".to_owned()];
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-principal", "forged"),
            ("x-other", "o"),
            ("authorization", "Bearer t"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        let rules = HeaderRules {
            forward: &forward,
            caller: &caller,
            ..HeaderRules::default()
        };
        let policy = ForwardPolicy::with_rules(&rules).unwrap();
        assert_eq!(
            shown(&policy.select(&headers)),
            ["authorization=Bearer t", "x-other=o"]
        );
        let consumed = [http::header::AUTHORIZATION];
        let quiet = HeaderRules {
            consumed: &consumed,
            ..rules
        };
        let policy = ForwardPolicy::with_rules(&quiet).unwrap();
        assert_eq!(shown(&policy.select(&headers)), ["x-other=o"]);
        let set = vec!["x-principal=fixed".to_owned()];
        let setting = HeaderRules { set: &set, ..rules };
        let err = ForwardPolicy::with_rules(&setting).unwrap_err().to_string();
        assert!(
            err.starts_with("--set-header:") && err.contains("x-principal"),
            "{err}"
        );
        let remove = vec!["x-principal".to_owned()];
        let removing = HeaderRules {
            remove: &remove,
            ..rules
        };
        let err = ForwardPolicy::with_rules(&removing)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--remove-header:"), "{err}");
    }
}

//! The origin the gateway is public at, for the card's interface URL and the catalog: the
//! route's `public_url` (checked at start), an `allowed_hosts` entry the request names, the
//! host a trusted proxy forwarded, or else the local address the connection reached — never
//! the request's own `Host` unchecked, which is the client's text (design principle 8: a
//! client cannot make the gateway advertise `evil.example`). Whether the configuration
//! vouches for the origin is kept too (`Origin::Vouched`: only such an origin is signed or
//! cached).
//!
//! Host validation: a request's `Host` (or `:authority`), and with `trust_forwarded` the
//! `Forwarded` (RFC 7239) or `X-Forwarded-Host`/`X-Forwarded-Proto` values, must each be a
//! plain URI authority (no user info, path or stray characters, a numeric port) and a
//! scheme of `http` or `https`. Forwarded headers are read from their end: each trusted
//! proxy appends one element, so the element `trusted_proxy_hops` from the end is the one
//! the outermost trusted proxy wrote, and anything before it is the client's own. An
//! invalid or missing forwarded value is ignored (the next source applies: `X-Forwarded-*`,
//! then `Host`); without any valid host there is no origin — the well-known answer is a
//! 400, never a card pointing somewhere a header made up. Without a forwarded scheme the
//! listener's own applies (`https` on a TLS listener).
//!
//! `allowed_hosts`, when set, lists the authorities (`host` or `host:port`, compared
//! exactly) the gateway answers for: the host a request names (forwarded or `Host`) must
//! be one of them, else the request is refused.

use std::net::SocketAddr;

use http::request::Parts;
use http::{header, HeaderMap, Uri};

use super::CardConfigError;
use crate::telemetry::untrusted::{has_credentials, without_credentials};
use crate::telemetry::ConnectionAddrs;

/// How a route finds its public origin; built once at start.
#[derive(Clone, Debug)]
pub(crate) struct Origins {
    /// Normalised: no trailing slash.
    public_url: Option<String>,
    /// With `trust_forwarded`: which element from the end of a forwarded header is read.
    forwarded_hops: Option<usize>,
    /// Lowercase authorities; empty: any host.
    allowed: Vec<String>,
    /// The scheme without a forwarded one: the listener's.
    scheme: &'static str,
    /// The host the route selects by, lowercased: without anything else configured, its
    /// card names it (with the port the client reached), as its requests must.
    route_host: Option<String>,
}

/// Any host, from `Host` only, over plain HTTP: what a bare frontend (tests) serves.
impl Default for Origins {
    fn default() -> Origins {
        Origins {
            public_url: None,
            forwarded_hops: None,
            allowed: Vec::new(),
            scheme: "http",
            route_host: None,
        }
    }
}

/// Where the settings of `Origins` come from.
pub(crate) struct OriginSettings<'a> {
    pub public_url: Option<&'a str>,
    pub trust_forwarded: bool,
    pub trusted_proxy_hops: usize,
    pub allowed_hosts: &'a [String],
    /// The listener serves TLS.
    pub tls: bool,
    /// The host the route selects by, if it does.
    pub route_host: Option<&'a str>,
}

/// The origin of a request's card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The configuration names it (the public URL, or an allowed host): it may be signed
    /// and its render kept.
    Vouched(String),
    /// Taken from the request with nothing to vouch for it.
    Named(String),
}

impl Origin {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Origin::Vouched(text) | Origin::Named(text) => text,
        }
    }
}

/// Why a request has no origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("the request names no valid Host")]
    NoHost,
    /// Without a configured origin the connection's local address is used; a request that
    /// came through no socket (in-process) has none.
    #[error("no public-url is configured and the request came through no listener, so the card's interface URL is unknown")]
    NoLocalAddress,
    /// The host is not quoted back: it is the client's text.
    #[error("the request's host is not one this gateway answers for (allowed-hosts)")]
    NotAllowed,
}

impl Origins {
    /// Checks the settings; the error names the setting.
    pub(crate) fn new(settings: &OriginSettings<'_>) -> Result<Origins, CardConfigError> {
        let public_url = settings.public_url.map(public_url).transpose()?;
        if settings.trusted_proxy_hops == 0 {
            return Err(CardConfigError::new(
                "trusted-proxy-hops",
                "must be at least 1",
            ));
        }
        let allowed = settings
            .allowed_hosts
            .iter()
            .map(|h| check_allowed_host(h).map_err(|e| CardConfigError::new("allowed-hosts", e)))
            .collect::<Result<_, _>>()?;
        Ok(Origins {
            public_url,
            forwarded_hops: settings
                .trust_forwarded
                .then_some(settings.trusted_proxy_hops),
            allowed,
            scheme: if settings.tls { "https" } else { "http" },
            route_host: settings.route_host.map(str::to_ascii_lowercase),
        })
    }

    /// The route's public URL, if configured.
    pub(crate) fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    /// Whether every origin a request is served is vouched for by the configuration, so
    /// that signing never signs a URL taken from the request.
    pub(crate) fn all_vouched(&self) -> bool {
        self.public_url.is_some() || !self.allowed.is_empty()
    }

    /// Whether the card depends on the request's host headers.
    pub(crate) fn request_dependent(&self) -> bool {
        self.public_url.is_none()
    }

    /// Whether forwarded headers are read.
    pub(crate) fn trusts_forwarded(&self) -> bool {
        self.forwarded_hops.is_some()
    }

    /// How many origins can be vouched for: the bound of a cache of renders.
    pub(crate) fn vouched_count(&self) -> usize {
        match self.public_url {
            Some(_) => 1,
            // Each allowed host under either scheme.
            None => 2 * self.allowed.len(),
        }
    }

    /// The allow-list check alone (every request of a route, not only cards).
    pub(crate) fn admit(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        match self.allowed.is_empty() {
            true => Ok(()),
            false => self.origin_of(uri, headers, None).map(drop),
        }
    }

    /// The origin `request` is served.
    pub(crate) fn origin(&self, request: &Parts) -> Result<Origin, Refusal> {
        let local = request.extensions.get::<ConnectionAddrs>().map(|c| c.local);
        self.origin_of(&request.uri, &request.headers, local)
    }

    fn origin_of(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        local: Option<SocketAddr>,
    ) -> Result<Origin, Refusal> {
        let (scheme, forwarded) = match self.forwarded_hops {
            Some(hops) => forwarded_origin(headers, hops),
            None => (None, None),
        };
        let host = forwarded
            .clone()
            .or_else(|| uri.authority().and_then(|a| valid_authority(a.as_str())))
            .or_else(|| {
                // Two Host fields name no one host (RFC 9110 7.2): which one a proxy in
                // front judged by is unknown, so neither is taken.
                let mut hosts = headers.get_all(header::HOST).iter();
                let (Some(host), None) = (hosts.next(), hosts.next()) else {
                    return None;
                };
                valid_authority(host.to_str().ok()?)
            });
        if !self.allowed.is_empty() {
            match &host {
                Some(host) if self.allowed.contains(host) => {}
                Some(_) => return Err(Refusal::NotAllowed),
                None => return Err(Refusal::NoHost),
            }
        }
        if let Some(url) = &self.public_url {
            return Ok(Origin::Vouched(url.clone()));
        }
        let scheme = scheme.unwrap_or(self.scheme);
        if !self.allowed.is_empty() {
            let host = host.ok_or(Refusal::NoHost)?;
            return Ok(Origin::Vouched(format!("{scheme}://{host}")));
        }
        // Nothing configured: a trusted proxy's forwarded host, else the route's host or the
        // address the client reached, at the port it reached (the Host was still checked
        // above: a request without a valid one is refused).
        host.ok_or(Refusal::NoHost)?;
        let host = match (forwarded, &self.route_host) {
            (Some(host), _) => host,
            (None, Some(route_host)) => {
                let port = local.ok_or(Refusal::NoLocalAddress)?.port();
                format!("{route_host}:{port}")
            }
            (None, None) => authority_of(local.ok_or(Refusal::NoLocalAddress)?),
        };
        Ok(Origin::Named(format!("{scheme}://{host}")))
    }
}

/// `addr` as a URI authority: an IPv4-mapped address as IPv4, IPv6 in brackets without a
/// zone (a zone is not valid in a URL's authority).
fn authority_of(addr: SocketAddr) -> String {
    SocketAddr::new(addr.ip().to_canonical(), addr.port()).to_string()
}

/// Checks and normalises the route's public URL: `http(s)://authority[/path]`.
fn public_url(text: &str) -> Result<String, CardConfigError> {
    check_public_url(text).map_err(|why| CardConfigError::new("public-url", why))
}

/// `public_url` for the configuration's own check (`settings`); the error
/// says why.
pub(crate) fn check_public_url(text: &str) -> Result<String, String> {
    let fail = |why: &str| format!("{:?}: {why}", without_credentials(text));
    if has_credentials(text) {
        return Err(fail("a user name or password cannot be part of it"));
    }
    let uri: http::Uri = text.parse().map_err(|_| fail("not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(fail("expected http:// or https://"));
    }
    let authority = uri.authority().ok_or_else(|| fail("no host"))?;
    if valid_authority(authority.as_str()).is_none() {
        return Err(fail("not a plain host[:port]"));
    }
    if uri.query().is_some() || text.contains('#') {
        return Err(fail("a query or fragment cannot be part of it"));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// One `allowed-hosts` entry, lowercased: a plain `host[:port]`.
pub(crate) fn check_allowed_host(text: &str) -> Result<String, String> {
    match valid_authority(text) {
        Some(host) if host == text.trim().to_ascii_lowercase() => Ok(host),
        _ => Err(format!("{text:?}: not a plain host[:port]")),
    }
}

/// `text` as a URI authority `host[:port]` (no user info, a numeric port), lowercased and
/// without the trailing dot of a fully qualified name (`gw.example.` is `gw.example`); none
/// if it is not one.
pub(crate) fn valid_authority(text: &str) -> Option<String> {
    let (host, port) = authority_parts(text)?;
    Some(format!("{host}{port}").to_ascii_lowercase())
}

/// `text` as a URI authority, borrowed: its host (without a fully qualified name's trailing
/// dot, its case as written) and its `:port` (empty without one); none if it is not a plain
/// `host[:port]`. Allocates nothing: every request's `Host` is checked with it.
pub(crate) fn authority_parts(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    // The last colon starts the port, unless it is inside an IPv6 literal's brackets.
    let (host, port) = match text.rfind(':') {
        Some(colon) if !text[colon..].contains(']') => text.split_at(colon),
        _ => (text, ""),
    };
    if let Some(digits) = port.strip_prefix(':') {
        let numeric = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        digits.parse::<u16>().ok().filter(|_| numeric)?;
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    valid_host(host).then_some((host, port))
}

/// A host as clients name one: an IPv6 literal in brackets, or dot-separated labels of
/// letters, digits and hyphens (a name or an IPv4 address). The URI syntax allows more
/// (`a,b`, `[zz]`, `a..b`), which no client reaches and a card must not name.
fn valid_host(host: &str) -> bool {
    if let Some(literal) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return literal.parse::<std::net::Ipv6Addr>().is_ok();
    }
    host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

/// `http` or `https`, in any case.
fn scheme(text: &str) -> Option<&'static str> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("https") {
        Some("https")
    } else if text.eq_ignore_ascii_case("http") {
        Some("http")
    } else {
        None
    }
}

/// The comma-separated elements of every line of a header, in order (commas inside
/// quoted strings do not split).
fn elements(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<Vec<&str>> {
    let mut all = Vec::new();
    for line in headers.get_all(name) {
        all.extend(split_unquoted(line.to_str().ok()?, ','));
    }
    Some(all)
}

/// `text` split at `separator` outside double-quoted strings, each piece trimmed.
fn split_unquoted(text: &str, separator: char) -> impl Iterator<Item = &str> {
    let mut quoted = false;
    let mut escaped = false;
    text.split(move |c: char| {
        match (escaped, quoted, c) {
            (true, _, _) => escaped = false,
            (false, true, '\\') => escaped = true,
            (false, _, '"') => quoted = !quoted,
            _ => {}
        }
        c == separator && !quoted
    })
    .map(str::trim)
}

/// The element `hops` from the end of a header's elements: what the outermost trusted
/// proxy appended. None when the header is absent, unreadable or shorter than `hops`.
fn trusted_element(
    headers: &HeaderMap,
    name: impl header::AsHeaderName,
    hops: usize,
) -> Option<&str> {
    let elements = elements(headers, name)?;
    let index = elements.len().checked_sub(hops)?;
    Some(elements[index]).filter(|e| !e.is_empty())
}

/// The `proto` and `host` of one `Forwarded` element; none if any of its pairs is
/// malformed or its `proto`/`host` invalid (the element is then ignored whole).
fn forwarded_element(element: &str) -> Option<(Option<&'static str>, Option<String>)> {
    let (mut proto, mut host) = (None, None);
    for pair in split_unquoted(element, ';').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=')?;
        let value = value.trim();
        let value = match value.strip_prefix('"') {
            Some(rest) => rest.strip_suffix('"')?,
            None => value,
        };
        // A parameter named twice makes the element malformed (RFC 7239 section 4).
        match name.trim().to_ascii_lowercase().as_str() {
            "proto" if proto.is_none() => proto = Some(scheme(value)?),
            "host" if host.is_none() => host = Some(valid_authority(value)?),
            "proto" | "host" => return None,
            _ => {}
        }
    }
    Some((proto, host))
}

/// Scheme and host from the trusted element of `Forwarded`, else from that of
/// `X-Forwarded-Proto` and `X-Forwarded-Host`; invalid values are ignored.
fn forwarded_origin(headers: &HeaderMap, hops: usize) -> (Option<&'static str>, Option<String>) {
    let (proto, host) = trusted_element(headers, header::FORWARDED, hops)
        .and_then(forwarded_element)
        .unwrap_or_default();
    let proto =
        proto.or_else(|| trusted_element(headers, "x-forwarded-proto", hops).and_then(scheme));
    let host = host
        .or_else(|| trusted_element(headers, "x-forwarded-host", hops).and_then(valid_authority));
    (proto, host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(trust_forwarded: bool, hops: usize, allowed: &[&str], tls: bool) -> Origins {
        let allowed: Vec<String> = allowed.iter().map(|h| h.to_string()).collect();
        Origins::new(&OriginSettings {
            public_url: None,
            trust_forwarded,
            trusted_proxy_hops: hops,
            allowed_hosts: &allowed,
            tls,
            route_host: None,
        })
        .unwrap()
    }

    fn request(headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::get("/.well-known/agent-card.json");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let builder = builder.extension(crate::telemetry::ConnectionAddrs::example());
        builder.body(()).unwrap().into_parts().0
    }

    type Headers<'a> = &'a [(&'a str, &'a str)];

    /// One row per header form: the headers, the trusted hops, the origin.
    #[test]
    fn forwarded_headers_are_read_from_the_trusted_end() {
        let host = ("host", "gw.internal:8080");
        let rows: &[(Headers, usize, &str)] = &[
            // Forwarded: the proxy's element after the client's forged one.
            (
                &[
                    host,
                    (
                        "forwarded",
                        "host=evil.example;proto=http, host=gw.example;proto=https",
                    ),
                ],
                1,
                "https://gw.example",
            ),
            // The same over two header lines.
            (
                &[
                    host,
                    ("forwarded", "host=evil.example"),
                    ("forwarded", "proto=https;host=gw.example"),
                ],
                1,
                "https://gw.example",
            ),
            // Two trusted hops: the second from the end; the last is the inner proxy's.
            (
                &[
                    host,
                    (
                        "forwarded",
                        "host=evil.example, host=gw.example;proto=https, host=lb.internal",
                    ),
                ],
                2,
                "https://gw.example",
            ),
            // Quoted values, a comma inside quotes, any case.
            (
                &[
                    host,
                    (
                        "forwarded",
                        "for=\"[::1],x\";Host=\"GW.example:8443\";PROTO=HTTPS",
                    ),
                ],
                1,
                "https://gw.example:8443",
            ),
            // Fewer elements than trusted hops: the client's element alone is never read.
            (
                &[host, ("forwarded", "host=evil.example;proto=https")],
                2,
                "http://10.1.2.3:8080",
            ),
            // A malformed trusted element is ignored whole (its valid proto too).
            (
                &[
                    host,
                    ("forwarded", "host=gw.example, proto=https;host=\"a@b\""),
                ],
                1,
                "http://10.1.2.3:8080",
            ),
            (
                &[host, ("forwarded", "proto=https;junk")],
                1,
                "http://10.1.2.3:8080",
            ),
            (
                &[host, ("forwarded", "proto=gopher;host=gw.example")],
                1,
                "http://10.1.2.3:8080",
            ),
            (
                &[host, ("forwarded", "host=\"gw.example")],
                1,
                "http://10.1.2.3:8080",
            ),
            // X-Forwarded-*: the last element of each, per header.
            (
                &[
                    host,
                    ("x-forwarded-host", "evil.example, gw.example"),
                    ("x-forwarded-proto", "http, https"),
                ],
                1,
                "https://gw.example",
            ),
            (
                &[
                    host,
                    ("x-forwarded-host", "evil.example"),
                    ("x-forwarded-host", "gw.example"),
                ],
                1,
                "http://gw.example",
            ),
            (
                &[
                    host,
                    ("x-forwarded-host", "evil.example, gw.example, lb"),
                    ("x-forwarded-proto", "https, http"),
                ],
                2,
                "https://gw.example",
            ),
            (
                &[host, ("x-forwarded-host", "evil.example, gw.example/x")],
                1,
                "http://10.1.2.3:8080",
            ),
            (
                &[host, ("x-forwarded-proto", "https, gopher")],
                1,
                "http://10.1.2.3:8080",
            ),
            // A Forwarded element without host: the host from X-Forwarded-Host.
            (
                &[
                    host,
                    ("forwarded", "proto=https"),
                    ("x-forwarded-host", "gw.example"),
                ],
                1,
                "https://gw.example",
            ),
            // Nothing forwarded.
            (&[host], 1, "http://10.1.2.3:8080"),
        ];
        for (headers, hops, expected) in rows {
            let origin = origins(true, *hops, &[], false)
                .origin(&request(headers))
                .unwrap();
            assert_eq!(
                origin,
                Origin::Named(expected.to_string()),
                "{headers:?} hops {hops}"
            );
        }
        // Untrusted: forwarded headers are never read.
        let forged = request(&[host, ("forwarded", "host=gw.example;proto=https")]);
        let origin = origins(false, 1, &[], false).origin(&forged).unwrap();
        assert_eq!(origin.as_str(), "http://10.1.2.3:8080");
    }

    /// Without a configured origin the connection's local address is named, in URL form.
    #[test]
    fn the_local_address_in_url_form() {
        let open = origins(false, 1, &[], false);
        for (local, expected) in [
            ("10.1.2.3:8080", "http://10.1.2.3:8080"),
            ("[::ffff:10.1.2.3]:8080", "http://10.1.2.3:8080"),
            ("[fe80::1%2]:8080", "http://[fe80::1]:8080"),
            ("[2001:db8::1]:443", "http://[2001:db8::1]:443"),
        ] {
            let mut parts = request(&[("host", "evil.example")]);
            let mut addrs = crate::telemetry::ConnectionAddrs::example();
            addrs.local = local.parse().unwrap();
            parts.extensions.insert(addrs);
            let origin = open.origin(&parts).unwrap();
            assert_eq!(origin, Origin::Named(expected.to_owned()), "{local}");
        }
        // A route that selects by host names its host, at the port the client reached.
        let hosted = Origins::new(&OriginSettings {
            public_url: None,
            trust_forwarded: false,
            trusted_proxy_hops: 1,
            allowed_hosts: &[],
            tls: true,
            route_host: Some("Billing.Example"),
        })
        .unwrap();
        let parts = request(&[("host", "billing.example:9443")]);
        let origin = hosted.origin(&parts).unwrap();
        assert_eq!(
            origin,
            Origin::Named("https://billing.example:8080".to_owned())
        );
        // In-process, without a connection: no origin rather than the Host's.
        let mut parts = request(&[("host", "gw.example")]);
        parts.extensions.clear();
        assert_eq!(open.origin(&parts), Err(Refusal::NoLocalAddress));
    }

    #[test]
    fn a_tls_listener_names_https() {
        let origin = origins(false, 1, &[], true).origin(&request(&[("host", "gw.example")]));
        assert_eq!(origin.unwrap().as_str(), "https://10.1.2.3:8080");
        // A trusted proxy's proto wins over the listener's.
        let proxied = request(&[("host", "gw.example"), ("x-forwarded-proto", "http")]);
        let origin = origins(true, 1, &[], true).origin(&proxied).unwrap();
        assert_eq!(origin.as_str(), "http://10.1.2.3:8080");
    }

    #[test]
    fn allowed_hosts_vouch_or_refuse() {
        let allow = origins(true, 1, &["gw.example", "gw.example:8443"], false);
        for (headers, expected) in [
            (
                &[("host", "gw.example")][..],
                Ok(Origin::Vouched("http://gw.example".into())),
            ),
            (
                &[("host", "GW.EXAMPLE:8443")],
                Ok(Origin::Vouched("http://gw.example:8443".into())),
            ),
            (&[("host", "gw.example:8080")], Err(Refusal::NotAllowed)),
            (&[("host", "evil.example")], Err(Refusal::NotAllowed)),
            (&[("host", "a@gw.example")], Err(Refusal::NoHost)),
            (&[], Err(Refusal::NoHost)),
            // The trusted forwarded host is the one checked.
            (
                &[("host", "gw.example"), ("x-forwarded-host", "evil.example")],
                Err(Refusal::NotAllowed),
            ),
            (
                &[
                    ("host", "pod:8080"),
                    ("x-forwarded-host", "evil.example, gw.example"),
                ],
                Ok(Origin::Vouched("http://gw.example".into())),
            ),
        ] {
            let parts = request(headers);
            assert_eq!(allow.origin(&parts), expected, "{headers:?}");
            assert_eq!(
                allow.admit(&parts.uri, &parts.headers),
                expected.map(drop),
                "{headers:?}"
            );
        }
        assert!(allow.all_vouched());
        assert_eq!(allow.vouched_count(), 4);
        let open = origins(false, 1, &[], false);
        assert!(!open.all_vouched());
        let parts = request(&[]);
        assert_eq!(open.admit(&parts.uri, &parts.headers), Ok(()));
    }

    #[test]
    fn settings_are_checked() {
        let error = |hops: usize, allowed: &[&str]| {
            let allowed: Vec<String> = allowed.iter().map(|h| h.to_string()).collect();
            Origins::new(&OriginSettings {
                public_url: None,
                trust_forwarded: true,
                trusted_proxy_hops: hops,
                allowed_hosts: &allowed,
                tls: false,
                route_host: None,
            })
            .err()
            .map(|e| e.to_string())
        };
        assert_eq!(error(1, &["gw.example", "10.0.0.1:443", "[::1]:80"]), None);
        assert!(error(0, &[])
            .unwrap()
            .starts_with("card.trusted-proxy-hops:"));
        for bad in [
            "https://gw.example",
            "gw.example/x",
            "u@gw.example",
            "gw.example:x",
            "",
        ] {
            let e = error(1, &[bad]).unwrap();
            assert!(e.starts_with("card.allowed-hosts:"), "{bad}: {e}");
        }
    }

    /// Hosts are what clients can name: labels of letters, digits and hyphens, or an IPv6
    /// literal; a trailing dot is the same host.
    #[test]
    fn hosts_are_names_or_addresses() {
        for (text, valid) in [
            ("gw.example", Some("gw.example")),
            ("GW.Example.:8443", Some("gw.example:8443")),
            ("10.0.0.1:80", Some("10.0.0.1:80")),
            ("[2001:db8::1]:443", Some("[2001:db8::1]:443")),
            ("[zz]", None),
            ("[zz]:80", None),
            ("a,b", None),
            ("a..", None),
            ("a..b", None),
            (".", None),
            ("a_b.example", None),
            (&"x".repeat(64), None),
        ] {
            assert_eq!(valid_authority(text).as_deref(), valid, "{text:?}");
        }
        // A parameter named twice makes a Forwarded element malformed.
        assert_eq!(forwarded_element("host=a;host=b"), None);
        assert_eq!(forwarded_element("proto=https;proto=http"), None);
        assert_eq!(
            forwarded_element("host=a;proto=https"),
            Some((Some("https"), Some("a".to_owned())))
        );
    }
}

//! The origin the gateway is public at, for the card's interface URL: the route's
//! `public_url` (checked at start), or what the request names.
//!
//! Host validation: a request's `Host` (or `:authority`), and with `trust_forwarded` the
//! `Forwarded` (RFC 7239, its first element: what the client used) or
//! `X-Forwarded-Host`/`X-Forwarded-Proto` values, must each be a plain URI authority (no
//! user info, path or stray characters, a numeric port) and a scheme of `http` or `https`.
//! An invalid forwarded value is ignored (the next source applies: `X-Forwarded-*`, then
//! `Host`, then `http`); without any valid host there is no origin — the well-known answer
//! is a 400, never a card pointing somewhere a header made up.

use http::request::Parts;
use http::{header, HeaderMap};

use super::CardConfigError;

/// The origin (`scheme://authority`) a request names; none without a valid host.
pub(crate) fn request_origin(request: &Parts, trust_forwarded: bool) -> Option<String> {
    let (scheme, host) = if trust_forwarded {
        forwarded_origin(&request.headers)
    } else {
        (None, None)
    };
    let host = host
        .or_else(|| {
            request
                .uri
                .authority()
                .and_then(|a| valid_authority(a.as_str()))
        })
        .or_else(|| first_value(&request.headers, header::HOST).and_then(valid_authority))?;
    Some(format!("{}://{host}", scheme.unwrap_or("http")))
}

/// `origin` (`scheme://authority`) with `host` in place of its host, its port kept.
pub(super) fn with_host(origin: &str, host: &str) -> String {
    let (scheme, authority) = origin.split_once("://").unwrap_or(("http", origin));
    match authority
        .parse::<http::uri::Authority>()
        .ok()
        .and_then(|a| a.port_u16())
    {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    }
}

/// Checks and normalises the route's public URL: `http(s)://authority[/path]`.
pub(super) fn public_url(text: &str) -> Result<String, CardConfigError> {
    check_public_url(text).map_err(|why| CardConfigError::new("public-url", why))
}

/// `public_url` for the configuration's own check (`config::Cli::validate`); the error
/// says why.
pub(crate) fn check_public_url(text: &str) -> Result<String, String> {
    let fail = |why: &str| format!("{text:?}: {why}");
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

/// `text` as a URI authority `host[:port]` (no user info, a numeric port), lowercased; none
/// if it is not one.
fn valid_authority(text: &str) -> Option<String> {
    let authority: http::uri::Authority = text.trim().parse().ok()?;
    let text = authority.as_str();
    if text.contains('@') || authority.host().is_empty() {
        return None;
    }
    // `Authority` accepts any characters after the host's colon.
    match &text[authority.host().len()..] {
        "" => {}
        port => port.strip_prefix(':')?.parse::<u16>().ok().map(drop)?,
    }
    Some(text.to_ascii_lowercase())
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

/// The first comma-separated element of a header's first line.
fn first_value(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    let value = headers.get(name)?.to_str().ok()?;
    value.split(',').next().map(str::trim)
}

/// Scheme and host from `Forwarded` (its first element), else from `X-Forwarded-Proto` and
/// `X-Forwarded-Host`; invalid values are ignored.
fn forwarded_origin(headers: &HeaderMap) -> (Option<&'static str>, Option<String>) {
    let (mut proto, mut host) = (None, None);
    for pair in first_value(headers, header::FORWARDED)
        .unwrap_or_default()
        .split(';')
    {
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        match name.trim().to_ascii_lowercase().as_str() {
            "proto" => proto = scheme(value),
            "host" => host = valid_authority(value),
            _ => {}
        }
    }
    let proto = proto.or_else(|| first_value(headers, "x-forwarded-proto").and_then(scheme));
    let host = host.or_else(|| first_value(headers, "x-forwarded-host").and_then(valid_authority));
    (proto, host)
}

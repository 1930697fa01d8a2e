//! CORS for browser clients (Fetch standard, "CORS protocol"): off unless origins are
//! configured; then tower-http's `CorsLayer` answers preflights itself (they never reach a
//! route or an agent) and marks the responses to allowed origins. Browsers may send the A2A
//! service parameters (`A2A-Version`, `A2A-Extensions`), `Authorization`, `Content-Type`
//! `x-request-id` and each route's API key header, and read `A2A-Extensions` (the
//! extensions the agent activated), `x-request-id` and `WWW-Authenticate` from responses.

use http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

use std::time::Duration;

/// What the CORS settings say (`cors-origin`, `cors-allow-header`, `cors-allow-method`,
/// `cors-max-age`).
#[derive(Clone, Copy, Debug)]
pub struct CorsSettings<'a> {
    pub origins: &'a [String],
    pub allow_headers: &'a [String],
    pub allow_methods: &'a [String],
    pub max_age: Duration,
}

/// A CORS setting refused, naming it and the value.
#[derive(Debug, thiserror::Error)]
#[error("--{0}: {1}")]
pub struct CorsError(&'static str, String);

/// Request headers every A2A browser client needs.
const ALLOWED: [&str; 5] = [
    "a2a-version",
    "a2a-extensions",
    "authorization",
    "content-type",
    "x-request-id",
];

/// Response headers browsers may read (`www-authenticate`: which credential a 401 asks for).
const EXPOSED: [&str; 3] = ["a2a-extensions", "x-request-id", "www-authenticate"];

/// The CORS layer `settings` configure; `None` without origins. The error names the
/// setting and the value it refuses.
pub fn layer(settings: &CorsSettings<'_>) -> Result<Option<CorsLayer>, CorsError> {
    if settings.origins.is_empty() {
        return Ok(None);
    }
    let origin = if settings.origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let origins = settings
            .origins
            .iter()
            .map(|o| origin(o))
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(origins)
    };
    let headers = ALLOWED
        .iter()
        .map(|h| h.to_string())
        .chain(settings.allow_headers.iter().cloned())
        .map(|h| {
            HeaderName::try_from(h.as_str())
                .map_err(|_| fail("cors-allow-header", &h, "is not a header name"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let methods = if settings.allow_methods.is_empty() {
        vec![Method::GET, Method::POST]
    } else {
        settings
            .allow_methods
            .iter()
            .map(|m| {
                Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                    .map_err(|_| fail("cors-allow-method", m, "is not an HTTP method"))
            })
            .collect::<Result<_, _>>()?
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(origin)
            .allow_headers(headers)
            .allow_methods(methods)
            .expose_headers(EXPOSED.map(HeaderName::from_static))
            .max_age(settings.max_age),
    ))
}

/// An origin as browsers send it: `scheme://host[:port]`, nothing after.
fn origin(text: &str) -> Result<HeaderValue, CorsError> {
    let bad = || fail("cors-origin", text, "must be scheme://host[:port] (or *)");
    let uri: http::Uri = text.parse().map_err(|_| bad())?;
    let bare = uri.scheme().is_some()
        && uri.host().is_some()
        && uri.path_and_query().is_none_or(|p| p.as_str() == "/")
        && !text.ends_with('/');
    if !bare {
        return Err(bad());
    }
    HeaderValue::from_str(text).map_err(|_| bad())
}

fn fail(setting: &'static str, value: &str, why: &str) -> CorsError {
    CorsError(setting, format!("{value:?} {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layer of settings as the flags `args` (`--cors-origin`, …) would give them.
    fn layer_of(args: &[&str]) -> Result<Option<CorsLayer>, CorsError> {
        let mut lists: [Vec<String>; 3] = Default::default();
        for pair in args.chunks(2) {
            let list = [
                "--cors-origin",
                "--cors-allow-header",
                "--cors-allow-method",
            ]
            .iter()
            .position(|flag| *flag == pair[0])
            .unwrap();
            lists[list].push(pair[1].to_owned());
        }
        layer(&CorsSettings {
            origins: &lists[0],
            allow_headers: &lists[1],
            allow_methods: &lists[2],
            max_age: Duration::from_secs(600),
        })
    }

    #[test]
    fn origins_headers_and_methods_are_checked() {
        assert!(layer_of(&[]).unwrap().is_none(), "off by default");
        let ok = [
            "--cors-origin",
            "https://app.example.com:8443",
            "--cors-origin",
            "*",
        ];
        assert!(layer_of(&ok).unwrap().is_some());
        for (args, flag) in [
            (
                &["--cors-origin", "https://app.example.com/"][..],
                "--cors-origin",
            ),
            (&["--cors-origin", "app.example.com"], "--cors-origin"),
            (&["--cors-origin", "https://a.example/x"], "--cors-origin"),
            (
                &["--cors-origin", "*", "--cors-allow-header", "bad header"],
                "--cors-allow-header",
            ),
            (
                &["--cors-origin", "*", "--cors-allow-method", "G E T"],
                "--cors-allow-method",
            ),
        ] {
            let err = layer_of(args).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{args:?}: {err}");
        }
    }
}

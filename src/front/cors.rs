//! CORS for browser clients (Fetch standard, "CORS protocol"): off unless origins are
//! configured; then tower-http's `CorsLayer` answers preflights itself (they never reach a
//! route or an agent) and marks the responses to allowed origins. Browsers may send the A2A
//! service parameters (`A2A-Version`, `A2A-Extensions`), `Authorization`, `Content-Type`
//! and `x-request-id`, and read `A2A-Extensions` (the extensions the agent activated) and
//! `x-request-id` from responses.

use http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::{Cli, ConfigError};

/// Request headers every A2A browser client needs.
const ALLOWED: [&str; 5] = [
    "a2a-version",
    "a2a-extensions",
    "authorization",
    "content-type",
    "x-request-id",
];

/// Response headers browsers may read.
const EXPOSED: [&str; 2] = ["a2a-extensions", "x-request-id"];

/// The CORS layer `cli` configures; `None` without --cors-origin. The error names the
/// flag and the value it refuses.
pub fn layer(cli: &Cli) -> Result<Option<CorsLayer>, ConfigError> {
    if cli.cors_origin.is_empty() {
        return Ok(None);
    }
    let origin = if cli.cors_origin.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let origins = cli
            .cors_origin
            .iter()
            .map(|o| origin(o))
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(origins)
    };
    let headers = ALLOWED
        .iter()
        .map(|h| h.to_string())
        .chain(cli.cors_allow_header.iter().cloned())
        .map(|h| {
            HeaderName::try_from(h.as_str())
                .map_err(|_| fail("cors-allow-header", &h, "is not a header name"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let methods = if cli.cors_allow_method.is_empty() {
        vec![Method::GET, Method::POST]
    } else {
        cli.cors_allow_method
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
            .max_age(cli.cors_max_age),
    ))
}

/// An origin as browsers send it: `scheme://host[:port]`, nothing after.
fn origin(text: &str) -> Result<HeaderValue, ConfigError> {
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

fn fail(flag: &'static str, value: &str, why: &str) -> ConfigError {
    ConfigError::Cors(flag, format!("{value:?} {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(
            ["a2a-gateway", "--backend", "http://a:1"]
                .iter()
                .chain(args),
        )
        .unwrap()
    }

    #[test]
    fn origins_headers_and_methods_are_checked() {
        assert!(layer(&cli(&[])).unwrap().is_none(), "off by default");
        let ok = [
            "--cors-origin",
            "https://app.example.com:8443",
            "--cors-origin",
            "*",
        ];
        assert!(layer(&cli(&ok)).unwrap().is_some());
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
            let err = layer(&cli(args)).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{args:?}: {err}");
        }
    }
}

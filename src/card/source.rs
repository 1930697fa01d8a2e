//! Where a route's agent card comes from, and one fetch from there: a file (read whole,
//! within `MAX_CARD_SIZE`), an HTTP(S) URL (conditional GET with the last `ETag`, body and
//! time bounded, the source's `max-age` reported) or the backend's GetExtendedAgentCard with
//! the configured `Authorization`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderName, HeaderValue, StatusCode};
use serde_json::Value;

use super::{CardConfigError, CardSettings, MAX_CARD_SIZE};
use crate::backend::{Backend, Call};
use crate::proto::GetExtendedAgentCardRequest;
use crate::protocol::ops::UnaryRequest;
use crate::telemetry::untrusted::{has_credentials, without_credentials};

/// A configured card source.
pub(super) enum Source {
    File(PathBuf),
    Url {
        client: reqwest::Client,
        url: reqwest::Url,
        credential: Option<Credential>,
    },
    Backend {
        backend: Arc<dyn Backend>,
        /// The route's fixed tenant, empty without one.
        tenant: String,
        credential: Option<Credential>,
        timeout: Duration,
    },
}

/// What one fetch brought.
pub(super) enum Fetched {
    Card {
        card: Value,
        /// The source's `ETag`, for the next conditional request.
        etag: Option<HeaderValue>,
        /// The source's `Cache-Control: max-age`.
        max_age: Option<Duration>,
    },
    /// The source answered 304 to our `If-None-Match`: the card we have is current.
    NotModified { max_age: Option<Duration> },
}

/// A fetch that brought no card.
#[derive(Debug, thiserror::Error)]
pub(super) enum FetchError {
    #[error("{0}: {1}")]
    File(PathBuf, std::io::Error),
    #[error("{}", with_causes(.0))]
    Http(#[from] reqwest::Error),
    #[error("HTTP status {0}")]
    Status(StatusCode),
    #[error("the card is larger than {MAX_CARD_SIZE} bytes")]
    TooLarge,
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("GetExtendedAgentCard failed: {error} ({})", error.kind().code())]
    Backend { error: crate::backend::Error },
    #[error("authorization file {0}: {1}")]
    Credential(PathBuf, String),
}

/// An error and its causes, `a: b: c`: reqwest's own message alone says only "error sending
/// request", not why.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// The `Authorization` value sent to a URL or backend source.
pub(super) enum Credential {
    /// Read from the environment at start.
    Fixed(HeaderValue),
    /// Read from this file at each fetch.
    File(PathBuf),
}

impl Credential {
    /// The credential of `settings`, checked now (the file must be readable at start).
    pub(super) fn from_settings(
        settings: &CardSettings,
    ) -> Result<Option<Credential>, CardConfigError> {
        match (&settings.authorization_env, &settings.authorization_file) {
            (Some(_), Some(_)) => Err(CardConfigError::new(
                "authorization-env",
                "give either authorization-env or authorization-file, not both",
            )),
            (Some(name), None) => {
                let text = std::env::var(name).map_err(|e| {
                    CardConfigError::new("authorization-env", format!("{name}: {e}"))
                })?;
                let value = header_value(&text).map_err(|e| {
                    CardConfigError::new("authorization-env", format!("{name}: {e}"))
                })?;
                Ok(Some(Credential::Fixed(value)))
            }
            (None, Some(path)) => {
                let credential = Credential::File(path.clone());
                credential
                    .value()
                    .map_err(|e| CardConfigError::new("authorization-file", e.to_string()))?;
                Ok(Some(credential))
            }
            (None, None) => Ok(None),
        }
    }

    /// The header value, sensitive so that no log or debug output shows it.
    fn value(&self) -> Result<HeaderValue, FetchError> {
        match self {
            Credential::Fixed(value) => Ok(value.clone()),
            Credential::File(path) => {
                let fail = |why: String| FetchError::Credential(path.clone(), why);
                crate::watched::note(path);
                let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
                header_value(&text).map_err(fail)
            }
        }
    }
}

/// A credential's text as a sensitive header value; the error never quotes the text.
fn header_value(text: &str) -> Result<HeaderValue, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty".to_owned());
    }
    let mut value = HeaderValue::from_str(text)
        .map_err(|_| "not a valid header value (control characters?)".to_owned())?;
    value.set_sensitive(true);
    Ok(value)
}

impl Source {
    /// The source named by `text` (`settings.source`), checked.
    pub(super) fn from_settings(
        text: &str,
        settings: &CardSettings,
        credential: Option<Credential>,
        backend: Option<Arc<dyn Backend>>,
        tenant: String,
        timeout: Duration,
    ) -> Result<Source, CardConfigError> {
        let fail = |reason: String| CardConfigError::new("source", reason);
        if text == super::BACKEND_CARD_SOURCE {
            let backend = backend
                .ok_or_else(|| fail("\"backend\" needs the route's backend client".into()))?;
            return Ok(Source::Backend {
                backend,
                tenant,
                credential,
                timeout,
            });
        }
        if text.starts_with("http://") || text.starts_with("https://") {
            if has_credentials(text) {
                return Err(fail(format!(
                    "{:?}: credentials in the URL are not supported (use authorization-env or authorization-file)",
                    without_credentials(text)
                )));
            }
            let url = reqwest::Url::parse(text).map_err(|e| fail(format!("{text:?}: {e}")))?;
            let client = reqwest::Client::builder()
                .timeout(timeout)
                .connect_timeout(timeout)
                // reqwest drops Authorization when a redirect leaves the origin.
                .redirect(reqwest::redirect::Policy::limited(3))
                .user_agent(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| fail(e.to_string()))?;
            return Ok(Source::Url {
                client,
                url,
                credential,
            });
        }
        if credential.is_some() {
            let key = match settings.authorization_env {
                Some(_) => "authorization-env",
                None => "authorization-file",
            };
            return Err(CardConfigError::new(
                key,
                "credentials are for URL and backend sources, not files",
            ));
        }
        Ok(Source::File(PathBuf::from(text)))
    }

    /// One fetch; `etag` is the validator of the card we hold from this source, if any.
    pub(super) async fn fetch(&self, etag: Option<&HeaderValue>) -> Result<Fetched, FetchError> {
        match self {
            Source::File(path) => Ok(Fetched::Card {
                card: read_file(path)?,
                etag: None,
                max_age: None,
            }),
            Source::Url {
                client,
                url,
                credential,
            } => fetch_url(client, url, credential.as_ref(), etag).await,
            Source::Backend {
                backend,
                tenant,
                credential,
                timeout,
            } => {
                let card = fetch_backend(backend.as_ref(), tenant, credential.as_ref(), *timeout);
                Ok(Fetched::Card {
                    card: card.await?,
                    etag: None,
                    max_age: None,
                })
            }
        }
    }
}

/// Reads a card file, refusing more than `MAX_CARD_SIZE` bytes.
pub(super) fn read_file(path: &Path) -> Result<Value, FetchError> {
    let fail = |e: std::io::Error| FetchError::File(path.to_owned(), e);
    crate::watched::note(path);
    let file = std::fs::File::open(path).map_err(fail)?;
    let mut bytes = Vec::new();
    file.take(MAX_CARD_SIZE as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() > MAX_CARD_SIZE {
        return Err(FetchError::TooLarge);
    }
    Ok(serde_json::from_slice(&bytes)?)
}

async fn fetch_url(
    client: &reqwest::Client,
    url: &reqwest::Url,
    credential: Option<&Credential>,
    etag: Option<&HeaderValue>,
) -> Result<Fetched, FetchError> {
    let mut request = client
        .get(url.clone())
        .header(header::ACCEPT, "application/json");
    if let Some(etag) = etag {
        request = request.header(header::IF_NONE_MATCH, etag);
    }
    if let Some(credential) = credential {
        request = request.header(header::AUTHORIZATION, credential.value()?);
    }
    let mut response = request.send().await?;
    let max_age = max_age(response.headers());
    if response.status() == StatusCode::NOT_MODIFIED && etag.is_some() {
        return Ok(Fetched::NotModified { max_age });
    }
    if !response.status().is_success() {
        return Err(FetchError::Status(response.status()));
    }
    let etag = response.headers().get(header::ETAG).cloned();
    let Some(body) = bounded_body(&mut response, MAX_CARD_SIZE).await? else {
        return Err(FetchError::TooLarge);
    };
    Ok(Fetched::Card {
        card: serde_json::from_slice(&body)?,
        etag,
        max_age,
    })
}

/// The body of `response` (card and JWKS fetches), read while it stays within `limit`
/// bytes; `None`: larger (announced or sent), and not read further.
pub(crate) async fn bounded_body(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// `Cache-Control: max-age` of a response (card and JWKS fetches); none when it may not be reused
/// (`no-cache`, `no-store`).
pub(crate) fn max_age(headers: &http::HeaderMap) -> Option<Duration> {
    let mut max_age = None;
    for value in headers.get_all(header::CACHE_CONTROL) {
        for directive in value.to_str().ok()?.split(',') {
            let directive = directive.trim().to_ascii_lowercase();
            if directive == "no-cache" || directive == "no-store" {
                return None;
            }
            if let Some(seconds) = directive.strip_prefix("max-age=") {
                max_age = seconds
                    .trim_matches('"')
                    .parse()
                    .ok()
                    .map(Duration::from_secs);
            }
        }
    }
    max_age
}

async fn fetch_backend(
    backend: &dyn Backend,
    tenant: &str,
    credential: Option<&Credential>,
    timeout: Duration,
) -> Result<Value, FetchError> {
    let mut forwarded: Vec<(HeaderName, HeaderValue)> = Vec::new();
    if let Some(credential) = credential {
        forwarded.push((header::AUTHORIZATION, credential.value()?));
    }
    let call = Call {
        request: UnaryRequest::GetExtendedAgentCard(GetExtendedAgentCardRequest {
            tenant: tenant.to_owned(),
        }),
        forwarded,
        deadline: Some(tokio::time::Instant::now() + timeout),
        trace: None,
    };
    let answer = backend
        .unary(call)
        .await
        .map_err(|error| FetchError::Backend { error })?;
    // The reply's own JSON writer gives the card's ProtoJSON, checked like any other card.
    let mut json = Vec::new();
    answer.value.write_json(&mut json)?;
    Ok(serde_json::from_slice(&json)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_of_cache_control() {
        let headers = |value: &'static str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
            headers
        };
        let age = |value| max_age(&headers(value));
        assert_eq!(age("public, max-age=600"), Some(Duration::from_secs(600)));
        assert_eq!(age("Max-Age=60"), Some(Duration::from_secs(60)));
        assert_eq!(age("max-age=60, no-cache"), None);
        assert_eq!(age("no-store"), None);
        assert_eq!(age("max-age=soon"), None);
        assert_eq!(max_age(&http::HeaderMap::new()), None);
    }

    #[test]
    fn credentials_are_sensitive_and_never_quoted() {
        let value = header_value("Bearer secret\n").unwrap();
        assert_eq!(value, "Bearer secret");
        assert!(value.is_sensitive());
        let err = header_value("Bearer \u{1}secret").unwrap_err();
        assert!(!err.contains("secret"), "{err}");
        assert!(header_value(" \n").is_err());
    }
}

//! Where one issuer's keys come from and how they stay current: a `jwks-file` read once at
//! load, or a JWKS URL (configured, or named by the issuer's OIDC discovery document)
//! fetched in the background, again after `Cache-Control: max-age` (held between
//! `refresh` and `MAX_REFRESH`), and on a token with an unknown `kid` at most once per
//! `refresh`, so that random kids cannot make the gateway hammer the issuer. A failed
//! fetch keeps the last good set; until the first set arrives, tokens are refused at once.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use http::{header, StatusCode};
use reqwest::Url;
use tokio_util::sync::CancellationToken;

use super::keys::{JwksError, KeySet, MAX_JWKS_SIZE};

/// Longest the keys are trusted without asking the issuer again.
const MAX_REFRESH: Duration = Duration::from_secs(24 * 3600);
/// Whole-fetch and connect bounds of one request to an issuer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest OIDC discovery document read.
const MAX_DISCOVERY_SIZE: usize = 64 * 1024;
/// First retry delay after a failed background fetch (doubling up to `refresh`).
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// One issuer's current keys and where they come from.
pub(super) struct KeyStore {
    /// The configured issuer, for logs.
    issuer: String,
    current: RwLock<Option<Arc<KeySet>>>,
    remote: Option<Remote>,
    refresh: Duration,
    /// Held while fetching: an unknown kid meanwhile is refused rather than held.
    fetch: tokio::sync::Mutex<FetchState>,
    started: AtomicBool,
    /// Ends the background refresh when the store goes (a reload's old route), rather than
    /// after its next sleep, which may be a day.
    stop: CancellationToken,
}

impl Drop for KeyStore {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct Remote {
    client: reqwest::Client,
    target: Target,
}

enum Target {
    Jwks(Url),
    /// The discovery document's URL; it names the JWKS.
    Discovery(Url),
}

#[derive(Default)]
struct FetchState {
    last_attempt: Option<Instant>,
    /// The JWKS URL the discovery document named (asked again after a failed fetch).
    discovered: Option<Url>,
}

/// A fetch that brought no key set.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("{0}")]
    Http(String),
    #[error("HTTP status {0}")]
    Status(StatusCode),
    #[error("the response is larger than {0} bytes")]
    TooLarge(usize),
    #[error("discovery document: {0}")]
    Discovery(String),
    #[error(transparent)]
    Jwks(#[from] JwksError),
}

impl From<reqwest::Error> for FetchError {
    fn from(error: reqwest::Error) -> FetchError {
        // The URL is configured or discovered, never the client's; still, say the cause only.
        let error = error.without_url();
        let mut text = error.to_string();
        let mut cause = std::error::Error::source(&error);
        while let Some(e) = cause {
            text.push_str(": ");
            text.push_str(&e.to_string());
            cause = e.source();
        }
        FetchError::Http(text)
    }
}

impl KeyStore {
    /// Keys read now from `path`; the error says what is wrong with the file.
    pub(super) fn from_file(issuer: &str, path: &Path) -> Result<KeyStore, String> {
        let bytes = read_bounded(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let set = KeySet::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(KeyStore::new(
            issuer,
            Some(Arc::new(set)),
            None,
            MAX_REFRESH,
        ))
    }

    /// Keys to fetch from `jwks` or, without it, through the issuer's OIDC discovery;
    /// the error names what is wrong with the URL.
    pub(super) fn remote(
        issuer: &str,
        jwks: Option<&str>,
        refresh: Duration,
    ) -> Result<KeyStore, String> {
        let target = match jwks {
            Some(url) => Target::Jwks(checked_url(url)?),
            None => {
                let base = checked_url(issuer)?;
                let document = format!(
                    "{}/.well-known/openid-configuration",
                    base.as_str().trim_end_matches('/')
                );
                Target::Discovery(checked_url(&document)?)
            }
        };
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            // A redirect could leave https or the vouched host: the URL is the contract.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        let remote = Remote { client, target };
        Ok(KeyStore::new(issuer, None, Some(remote), refresh))
    }

    fn new(
        issuer: &str,
        set: Option<Arc<KeySet>>,
        remote: Option<Remote>,
        refresh: Duration,
    ) -> KeyStore {
        KeyStore {
            issuer: issuer.to_owned(),
            current: RwLock::new(set),
            remote,
            refresh,
            fetch: tokio::sync::Mutex::new(FetchState::default()),
            started: AtomicBool::new(false),
            stop: CancellationToken::new(),
        }
    }

    /// The keys as last fetched; `None` until the first set arrives.
    pub(super) fn current(&self) -> Option<Arc<KeySet>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A fresh set for a token whose `kid` the current one lacks, unless the issuer was
    /// asked less than `refresh` ago, a fetch is under way (its set serves the next
    /// call; no call waits behind another's fetch), or the keys come from a file.
    pub(super) async fn refetch(&self) -> Option<Arc<KeySet>> {
        self.remote.as_ref()?;
        let mut state = self.fetch.try_lock().ok()?;
        if state
            .last_attempt
            .is_some_and(|at| at.elapsed() < self.refresh)
        {
            return None;
        }
        self.fetch_now(&mut state).await.ok()?;
        self.current()
    }

    /// Fetches and refreshes in the background until the store is dropped (once: a
    /// second call does nothing).
    pub(super) fn start(self: &Arc<Self>) {
        if self.remote.is_none() || self.started.swap(true, Ordering::Relaxed) {
            return;
        }
        tokio::spawn(refresh_loop(Arc::downgrade(self), self.stop.clone()));
    }

    /// One fetch now: on success the set is current and the wait until the next is
    /// returned.
    async fn fetch_now(&self, state: &mut FetchState) -> Result<Duration, FetchError> {
        let Some(remote) = &self.remote else {
            return Ok(MAX_REFRESH);
        };
        state.last_attempt = Some(Instant::now());
        let result = self.fetch_set(remote, state).await;
        if result.is_err() {
            state.discovered = None;
        }
        let (set, max_age) = result?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(set));
        Ok(max_age
            .unwrap_or(self.refresh)
            .clamp(self.refresh, MAX_REFRESH))
    }

    async fn fetch_set(
        &self,
        remote: &Remote,
        state: &mut FetchState,
    ) -> Result<(KeySet, Option<Duration>), FetchError> {
        let url = match (&remote.target, &state.discovered) {
            (Target::Jwks(url), _) | (Target::Discovery(_), Some(url)) => url.clone(),
            (Target::Discovery(document), None) => {
                let url = self.discover(&remote.client, document).await?;
                state.discovered = Some(url.clone());
                url
            }
        };
        let (bytes, max_age) = get(&remote.client, &url, MAX_JWKS_SIZE).await?;
        Ok((KeySet::parse(&bytes)?, max_age))
    }

    /// The JWKS URL of the discovery document, whose `issuer` must be the configured one.
    async fn discover(&self, client: &reqwest::Client, document: &Url) -> Result<Url, FetchError> {
        #[derive(serde::Deserialize)]
        struct Discovery {
            issuer: String,
            jwks_uri: String,
        }
        let (bytes, _) = get(client, document, MAX_DISCOVERY_SIZE).await?;
        let found: Discovery =
            serde_json::from_slice(&bytes).map_err(|e| FetchError::Discovery(e.to_string()))?;
        if found.issuer != self.issuer {
            return Err(FetchError::Discovery(
                "its `issuer` is not the configured issuer".to_owned(),
            ));
        }
        checked_url(&found.jwks_uri).map_err(FetchError::Discovery)
    }
}

async fn refresh_loop(store: Weak<KeyStore>, stop: CancellationToken) {
    let mut retry = FIRST_RETRY;
    loop {
        let Some(keys) = store.upgrade() else { return };
        let wait = {
            let mut state = keys.fetch.lock().await;
            match keys.fetch_now(&mut state).await {
                Ok(wait) => {
                    retry = FIRST_RETRY;
                    wait
                }
                Err(error) => {
                    tracing::warn!(issuer = %keys.issuer, %error, "jwks: fetch failed; the last good keys stay");
                    let wait = retry;
                    retry = (retry * 2).min(keys.refresh);
                    wait
                }
            }
        };
        drop(keys);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// GET `url`: its body (at most `limit` bytes) and `Cache-Control: max-age`.
async fn get(
    client: &reqwest::Client,
    url: &Url,
    limit: usize,
) -> Result<(Vec<u8>, Option<Duration>), FetchError> {
    let mut response = client
        .get(url.clone())
        .header(header::ACCEPT, "application/json")
        .send()
        .await?;
    if !response.status().is_success() {
        return Err(FetchError::Status(response.status()));
    }
    let max_age = crate::card::source::max_age(response.headers());
    let Some(body) = crate::card::source::bounded_body(&mut response, limit).await? else {
        return Err(FetchError::TooLarge(limit));
    };
    Ok((body, max_age))
}

/// `text` as a URL keys may be fetched from: https, or http to a loopback host (tests, a
/// local issuer); no credentials in it.
fn checked_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("{text:?}: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials in the URL are not supported".to_owned());
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(format!(
            "{text:?}: keys are fetched over https only (http only from a loopback host)"
        )),
    }
}

/// A key file's bytes, at most `MAX_JWKS_SIZE`.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    crate::watched::note(path);
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_JWKS_SIZE as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() > MAX_JWKS_SIZE {
        return Err(format!("larger than {MAX_JWKS_SIZE} bytes"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_urls_are_https_or_loopback_without_credentials() {
        for ok in [
            "https://login.example.com/jwks",
            "http://127.0.0.1:8080/jwks",
            "http://[::1]/jwks",
            "http://localhost/jwks",
        ] {
            assert!(checked_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://login.example.com/jwks",
            "http://10.0.0.1/jwks",
            "ftp://127.0.0.1/jwks",
            "https://user:secret@login.example.com/jwks",
            "not a url",
        ] {
            let err = checked_url(bad).unwrap_err();
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn discovery_document_is_below_the_issuer() {
        for issuer in ["https://login.example.com", "https://login.example.com/"] {
            let store = KeyStore::remote(issuer, None, Duration::from_secs(60)).unwrap();
            let Some(Remote {
                target: Target::Discovery(url),
                ..
            }) = &store.remote
            else {
                panic!("discovery expected");
            };
            assert_eq!(
                url.as_str(),
                "https://login.example.com/.well-known/openid-configuration"
            );
        }
    }
}

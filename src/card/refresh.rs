//! The background refresh of a route's card: fetch, check, store; on failure the last good
//! card stays and the failure is logged once per streak (warn for a source that fails, error
//! for a card that is invalid, info when it recovers). Until a first card is in, fetches
//! are retried sooner, from 1 s doubling up to the refresh interval.

use std::sync::Weak;
use std::time::Duration;

use http::HeaderValue;

use super::source::{FetchError, Fetched};
use super::CardService;

const FIRST_RETRY: Duration = Duration::from_secs(1);
/// A source's `max-age` is waited for at most this long, so a misconfigured year-long
/// `max-age` does not freeze the card.
const LONGEST_WAIT: Duration = Duration::from_secs(24 * 3600);

/// Refreshes `service` until it is dropped.
pub(super) async fn run(service: Weak<CardService>) {
    let mut delay = match service.upgrade() {
        // A file read at start is fresh; any other card (one kept over a reload,
        // `CardService::inherit`) is fetched again at once.
        Some(s) if s.source_is_file() => s.refresh,
        Some(_) => Duration::ZERO,
        None => return,
    };
    let mut refresh = Refresh::default();
    loop {
        tokio::time::sleep(delay).await;
        let Some(service) = service.upgrade() else {
            return;
        };
        delay = refresh.step(&service).await;
    }
}

/// What the refresh remembers between fetches.
#[derive(Default)]
struct Refresh {
    /// The source's validator of the current card.
    etag: Option<HeaderValue>,
    /// In a failure streak (already logged).
    failing: bool,
    /// The next retry's wait while there is no card; zero before the first failure.
    retry: Duration,
}

/// Why a refresh brought no new card.
enum Failure {
    Fetch(FetchError),
    Invalid(String),
}

impl Refresh {
    /// One fetch; returns the wait until the next.
    async fn step(&mut self, service: &CardService) -> Duration {
        let route = &service.route;
        match self.attempt(service).await {
            Ok(source_max_age) => {
                if self.failing {
                    tracing::info!(%route, "agent card source recovered");
                    self.failing = false;
                }
                let floor = source_max_age.unwrap_or_default().min(LONGEST_WAIT);
                service.refresh.max(floor)
            }
            Err(failure) => {
                (service.refresh_failures).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if !self.failing {
                    self.failing = true;
                    match failure {
                        Failure::Fetch(error) => {
                            tracing::warn!(%route, %error, "agent card source failed; the last good card stays")
                        }
                        Failure::Invalid(error) => {
                            tracing::error!(%route, %error, "agent card source gave an invalid card; the last good card stays")
                        }
                    }
                }
                if service.store.has_card() {
                    return service.refresh;
                }
                self.retry = match self.retry.is_zero() {
                    true => FIRST_RETRY,
                    false => self.retry * 2,
                }
                .min(service.refresh);
                service.store.set_retry_after(self.retry);
                self.retry
            }
        }
    }

    /// Fetches and stores a card; returns the source's `max-age`.
    async fn attempt(&mut self, service: &CardService) -> Result<Option<Duration>, Failure> {
        // `CardService::start` runs the refresh only for a route with a source.
        let Some(source) = &service.source else {
            return Ok(None);
        };
        let fetched = source.fetch(self.etag.as_ref()).await;
        let fetched = fetched.map_err(|e| match e {
            // The source answered, with something that is not a card.
            FetchError::Json(e) => Failure::Invalid(format!("not JSON: {e}")),
            e => Failure::Fetch(e),
        })?;
        match fetched {
            Fetched::NotModified { max_age } => Ok(max_age),
            Fetched::Card {
                card,
                etag,
                max_age,
            } => {
                let card = service.rewriter.check(card).map_err(Failure::Invalid)?;
                if service.store.update(card, &service.rewriter) {
                    tracing::info!(route = %service.route, "agent card updated");
                }
                self.etag = etag;
                Ok(max_age)
            }
        }
    }
}

//! The tokens the callback lately found held by their agent (`callback`), so a stream of
//! notifications does not cost the agent a lookup each. An entry is a SHA-256 digest of
//! the token (never the token: a dump of this memory gives no one a credential), trusted
//! for `push-token-cache-ttl`; at most `MAX_VERIFIED` entries, the oldest evicted first. A
//! Delete through the relaying route removes its token at once (`forget`); another replica
//! keeps trusting it until its entry expires. Shared by every serving thread of the process.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most tokens remembered: about 1 MB of digests and instants, far more than the
/// tasks an agent notifies about within one validity time.
pub(crate) const MAX_VERIFIED: usize = 10_000;

/// The longest `push-token-cache-ttl`: past it a deleted config's token would be trusted
/// for too long.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(600);

/// A token's digest.
type Digest = [u8; 32];

/// The verified tokens (see the module's doc).
pub(crate) struct Verified {
    /// How long a verification is trusted (zero: not at all, every post asks the agent).
    ttl: Duration,
    entries: Mutex<Entries>,
}

/// When each digest was verified, and the same in the order they were, oldest first (an
/// entry of `order` whose digest has been verified again since, or forgotten, is stale).
#[derive(Default)]
struct Entries {
    by_digest: HashMap<Digest, Instant>,
    order: VecDeque<(Digest, Instant)>,
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Verified(ttl {:?})", self.ttl)
    }
}

/// The digest an entry is kept under.
fn digest(token: &str) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    out
}

impl Verified {
    /// An empty cache whose entries are trusted for `ttl`.
    pub(crate) fn new(ttl: Duration) -> Verified {
        Verified {
            ttl,
            entries: Mutex::default(),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `token` was found held by its agent less than the validity time ago.
    pub(crate) fn fresh(&self, token: &str) -> bool {
        self.fresh_at(&digest(token), Instant::now())
    }

    /// Notes that `token` was just found held by its agent.
    pub(crate) fn insert(&self, token: &str) {
        self.insert_at(digest(token), Instant::now());
    }

    /// Forgets `token` (its config was deleted through this replica).
    pub(crate) fn forget(&self, token: &str) {
        self.entries().by_digest.remove(&digest(token));
    }

    fn fresh_at(&self, digest: &Digest, now: Instant) -> bool {
        let entries = self.entries();
        let verified = entries.by_digest.get(digest);
        verified.is_some_and(|at| now.saturating_duration_since(*at) < self.ttl)
    }

    fn insert_at(&self, digest: Digest, now: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries();
        let Entries { by_digest, order } = &mut *entries;
        // Oldest first: the expired, then, at the bound, the live ones (`order` holds stale
        // entries too, so it is bounded as well).
        while let Some(&(oldest, at)) = order.front() {
            let expired = now.saturating_duration_since(at) >= self.ttl;
            let full = by_digest.len() >= MAX_VERIFIED || order.len() >= 2 * MAX_VERIFIED;
            if !expired && !full {
                break;
            }
            order.pop_front();
            if by_digest.get(&oldest) == Some(&at) {
                by_digest.remove(&oldest);
            }
        }
        by_digest.insert(digest, now);
        order.push_back((digest, now));
    }

    /// How many tokens are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().by_digest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(30);

    fn token(n: usize) -> Digest {
        digest(&format!("token-{n}"))
    }

    #[test]
    fn a_token_is_trusted_for_the_validity_time_and_no_longer() {
        let verified = Verified::new(TTL);
        let start = Instant::now();
        assert!(!verified.fresh_at(&token(1), start), "never verified");
        verified.insert_at(token(1), start);
        assert!(verified.fresh_at(&token(1), start + TTL - Duration::from_millis(1)));
        assert!(
            !verified.fresh_at(&token(1), start + TTL),
            "expired at the TTL"
        );
        assert!(!verified.fresh_at(&token(2), start), "another token");
        // Verified again: trusted again.
        verified.insert_at(token(1), start + TTL);
        assert!(verified.fresh_at(&token(1), start + TTL));
    }

    #[test]
    fn a_forgotten_token_is_no_longer_trusted() {
        let verified = Verified::new(TTL);
        verified.insert("token-a");
        verified.insert("token-b");
        verified.forget("token-a");
        assert!(!verified.fresh("token-a"));
        assert!(verified.fresh("token-b"));
    }

    #[test]
    fn a_zero_ttl_remembers_nothing() {
        let verified = Verified::new(Duration::ZERO);
        verified.insert("token-a");
        assert!(!verified.fresh("token-a"));
        assert_eq!(verified.len(), 0);
    }

    #[test]
    fn at_the_bound_every_token_is_kept_and_past_it_the_oldest_goes() {
        let verified = Verified::new(TTL);
        let start = Instant::now();
        let at = |n: usize| start + Duration::from_micros(n as u64);
        for n in 0..MAX_VERIFIED {
            verified.insert_at(token(n), at(n));
        }
        assert_eq!(verified.len(), MAX_VERIFIED);
        let now = at(MAX_VERIFIED);
        assert!((0..MAX_VERIFIED).all(|n| verified.fresh_at(&token(n), now)));

        verified.insert_at(token(MAX_VERIFIED), now);
        assert_eq!(verified.len(), MAX_VERIFIED);
        assert!(!verified.fresh_at(&token(0), now), "the oldest evicted");
        assert!((1..=MAX_VERIFIED).all(|n| verified.fresh_at(&token(n), now)));
    }

    #[test]
    fn tokens_verified_again_and_again_stay_within_the_bound() {
        let verified = Verified::new(TTL);
        let start = Instant::now();
        // Re-verifying the same tokens leaves stale entries in the order: bounded too.
        for round in 0..5 {
            for n in 0..MAX_VERIFIED {
                let at = start + Duration::from_micros((round * MAX_VERIFIED + n) as u64);
                verified.insert_at(token(n), at);
            }
        }
        assert_eq!(verified.len(), MAX_VERIFIED);
        assert!(verified.entries().order.len() <= 2 * MAX_VERIFIED);
        let end = start + Duration::from_micros((5 * MAX_VERIFIED) as u64);
        assert!((0..MAX_VERIFIED).all(|n| verified.fresh_at(&token(n), end)));
    }
}

//! Verified tokens, so the hot path does not verify the same token on every call: keyed by
//! the token's SHA-256 (the token itself is never kept), each until the token's `exp` but
//! never longer than `MAX_AGE` (so a key the issuer removed stops working soon), at most
//! `MAX_ENTRIES` and `MAX_BYTES` of tokens (a token's claims, held decoded, grow with it:
//! ten thousand 8 KiB tokens of many small claims held 450 MiB); expired entries go first,
//! then any.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::auth::Principal;

/// Longest a verified token is trusted without verifying it again.
const MAX_AGE: Duration = Duration::from_secs(300);
/// Most tokens remembered per route.
const MAX_ENTRIES: usize = 10_000;
/// Most bytes of tokens remembered per route: their decoded claims take a few times this.
const MAX_BYTES: usize = 4 << 20;

pub(super) type Digest = [u8; 32];

/// The SHA-256 of a token.
pub(super) fn digest(token: &str) -> Digest {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[derive(Default)]
pub(super) struct TokenCache {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_digest: HashMap<Digest, Entry>,
    /// The sum of the entries' `size`s.
    bytes: usize,
}

struct Entry {
    principal: Principal,
    until: Instant,
    /// The token's length.
    size: usize,
}

impl Entries {
    fn remove(&mut self, digest: &Digest) {
        if let Some(entry) = self.by_digest.remove(digest) {
            self.bytes -= entry.size;
        }
    }

    /// Whether an entry of `size` more bytes fits.
    fn fits(&self, size: usize) -> bool {
        self.by_digest.len() < MAX_ENTRIES && self.bytes + size <= MAX_BYTES
    }
}

impl TokenCache {
    /// The principal of a token verified before and still trusted.
    pub(super) fn get(&self, digest: &Digest, now: Instant) -> Option<Principal> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.by_digest.get(digest) {
            Some(entry) if entry.until > now => Some(entry.principal.clone()),
            Some(_) => {
                entries.remove(digest);
                None
            }
            None => None,
        }
    }

    /// Remembers a verified token of `size` bytes for `remaining` (its time to `exp`),
    /// within `MAX_AGE`.
    pub(super) fn insert(
        &self,
        digest: Digest,
        principal: Principal,
        remaining: Duration,
        size: usize,
    ) {
        if remaining.is_zero() || size > MAX_BYTES {
            return;
        }
        let now = Instant::now();
        let until = now + remaining.min(MAX_AGE);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(&digest);
        if !entries.fits(size) {
            let Entries { by_digest, bytes } = &mut *entries;
            by_digest.retain(|_, entry| {
                let keep = entry.until > now;
                if !keep {
                    *bytes -= entry.size;
                }
                keep
            });
        }
        while !entries.fits(size) {
            let any = *entries
                .by_digest
                .keys()
                .next()
                .expect("a full cache has entries");
            entries.remove(&any);
        }
        entries.bytes += size;
        let entry = Entry {
            principal,
            until,
            size,
        };
        entries.by_digest.insert(digest, entry);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap().by_digest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scheme;

    fn principal(name: &str) -> Principal {
        Principal {
            name: name.into(),
            scheme: Scheme::Jwt,
            claims: None,
        }
    }

    #[test]
    fn entries_live_until_exp_within_max_age() {
        let cache = TokenCache::default();
        let now = Instant::now();
        cache.insert(
            digest("a"),
            principal("alice"),
            Duration::from_secs(3600),
            1,
        );
        cache.insert(digest("b"), principal("bob"), Duration::from_secs(10), 1);
        cache.insert(digest("c"), principal("carol"), Duration::ZERO, 1);
        assert_eq!(&*cache.get(&digest("a"), now).unwrap().name, "alice");
        assert!(cache.get(&digest("c"), now).is_none());
        // Past `exp`: gone. Past MAX_AGE: gone even though `exp` is later.
        assert!(cache
            .get(&digest("b"), now + Duration::from_secs(11))
            .is_none());
        assert!(cache
            .get(&digest("a"), now + MAX_AGE + Duration::from_secs(1))
            .is_none());
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn entries_are_bounded() {
        let cache = TokenCache::default();
        for i in 0..MAX_ENTRIES + 10 {
            cache.insert(digest(&i.to_string()), principal("p"), MAX_AGE, 1);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        // The newest is always kept.
        let last = (MAX_ENTRIES + 9).to_string();
        assert!(cache.get(&digest(&last), Instant::now()).is_some());
    }

    #[test]
    fn token_bytes_are_bounded() {
        let cache = TokenCache::default();
        let size = 8 << 10;
        let fit = MAX_BYTES / size;
        for i in 0..fit + 10 {
            cache.insert(digest(&i.to_string()), principal("p"), MAX_AGE, size);
        }
        assert_eq!(cache.len(), fit);
        assert!(cache.entries.lock().unwrap().bytes <= MAX_BYTES);
        let last = (fit + 9).to_string();
        assert!(cache.get(&digest(&last), Instant::now()).is_some());
        // The same token again replaces its entry, not adds to the bytes.
        cache.insert(digest(&last), principal("p"), MAX_AGE, size);
        assert_eq!(cache.entries.lock().unwrap().bytes, fit * size);
    }
}

//! Per-client limits of a route (issue 22 item 6): a call rate (governor's keyed GCRA) and
//! calls in flight (streams included), each per client. A client is its principal's name
//! once authentication named one, else its address (an IPv6 address by its /64, which one
//! host usually holds whole), so anonymous callers are limited one by one too.
//!
//! The keys are bounded (`client-limit-keys`): the rate's keys stay until their bucket is
//! full again, the in-flight keys while a call holds them. When a new client finds the
//! table full, the idle keys (whose bucket has been full again for an interval: a fresh key
//! would behave the same; governor's `retain_recent`) are dropped, at most once a second so a flood of new clients cannot make every call
//! sweep; if it is still full, the new client is refused (`429`, limit `client-limit-keys`)
//! while known clients keep being served. Concurrent first calls of new clients may pass
//! the bound by as many calls as are admitted at that instant.

use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::nanos::Nanos;
use governor::state::keyed::{DashMapStateStore, ShrinkableKeyedStateStore};
use governor::state::StateStore;
use governor::{Quota, RateLimiter};

use super::Limit;
use crate::auth::{Principal, Scheme};

/// Who a per-client limit counts: a principal (its scheme, a JWT's issuer, its name: an
/// API key "alice" and two issuers' subjects "alice" are three clients), or a client
/// address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClientKey {
    Principal(Scheme, Option<Box<str>>, Arc<str>),
    Address(IpAddr),
}

impl ClientKey {
    /// The key of a call by `principal` (`None` or anonymous: by its address `peer`).
    pub fn of(principal: Option<&Principal>, peer: Option<IpAddr>) -> ClientKey {
        match principal {
            Some(p) if p.scheme != Scheme::Anonymous => {
                let issuer = Some(p.issuer()).filter(|i| !i.is_empty()).map(Box::from);
                ClientKey::Principal(p.scheme, issuer, p.name.clone())
            }
            _ => ClientKey::Address(match peer.map(|ip| ip.to_canonical()) {
                Some(IpAddr::V6(v6)) => {
                    let bits = u128::from(v6) & !((1u128 << 64) - 1);
                    IpAddr::V6(bits.into())
                }
                Some(v4) => v4,
                None => IpAddr::from([0, 0, 0, 0]),
            }),
        }
    }
}

/// The rate limiter's map, shared with this module so it can tell a new key from a known one.
#[derive(Clone, Default)]
struct Keys(Arc<DashMapStateStore<ClientKey>>);

impl StateStore for Keys {
    type Key = ClientKey;

    fn measure_and_replace<T, F, E>(&self, key: &ClientKey, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        self.0.measure_and_replace(key, f)
    }
}

impl ShrinkableKeyedStateStore<ClientKey> for Keys {
    fn retain_recent(&self, drop_below: Nanos) {
        self.0.retain_recent(drop_below);
    }

    fn shrink_to_fit(&self) {
        self.0.shrink_to_fit();
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One route's per-client settings; `0` turns one off.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerClientSettings {
    pub rate_limit: f64,
    pub rate_burst: u32,
    pub max_concurrent: usize,
    /// The most clients tracked at once (at least 1 when a limit is on).
    pub max_keys: usize,
}

/// A call rate per client: the limiter and its map.
struct ClientRate {
    limiter: RateLimiter<ClientKey, Keys, DefaultClock>,
    keys: Keys,
    per_second: f64,
    burst: u32,
}

/// The per-client limits of a route. Principals and client addresses are tracked in tables
/// of their own (`table`), each of at most `max_keys`: addresses are cheap to have many of,
/// and must not crowd authenticated callers out.
pub struct PerClient {
    rates: Option<[ClientRate; 2]>,
    max_concurrent: usize,
    in_flight: [DashMap<ClientKey, usize>; 2],
    max_keys: usize,
    /// When the rate's keys were last swept (milliseconds since `base`, plus one).
    swept: AtomicU64,
    base: Instant,
}

/// The table of `key`'s client: 0 principals, 1 addresses.
fn table(key: &ClientKey) -> usize {
    usize::from(matches!(key, ClientKey::Address(_)))
}

/// Why a client's call was refused: the limit, what it says, how long to wait.
pub type ClientRefusal = (Limit, String, Duration);

impl PerClient {
    /// The limits of `settings`; `None` when both are off.
    pub fn new(settings: &PerClientSettings) -> Option<PerClient> {
        let rate = || {
            let per_second = settings.rate_limit;
            let burst = match settings.rate_burst {
                0 => per_second.ceil().max(1.0) as u32,
                burst => burst,
            };
            let period = Duration::from_secs_f64(1.0 / per_second).max(Duration::from_nanos(1));
            let quota = Quota::with_period(period)
                .expect("a positive period")
                .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
            let keys = Keys::default();
            ClientRate {
                limiter: RateLimiter::new(quota, keys.clone(), DefaultClock::default()),
                keys,
                per_second,
                burst,
            }
        };
        let rates = (settings.rate_limit > 0.0).then(|| [rate(), rate()]);
        (rates.is_some() || settings.max_concurrent > 0).then(|| PerClient {
            rates,
            max_concurrent: settings.max_concurrent,
            in_flight: Default::default(),
            max_keys: settings.max_keys.max(1),
            swept: AtomicU64::new(0),
            base: Instant::now(),
        })
    }

    /// Admits one call of `key`: a token of its rate, then a place among its calls in
    /// flight, given back by `release` (when `Ok(true)`).
    pub fn admit(&self, key: &ClientKey) -> Result<bool, ClientRefusal> {
        let table = table(key);
        if let Some(rate) = self.rates.as_ref().map(|rates| &rates[table]) {
            if !rate.keys.0.contains_key(key) && rate.keys.0.len() >= self.max_keys {
                self.sweep(self.rates.as_ref().expect("a rate is on"));
                if rate.keys.0.len() >= self.max_keys {
                    return Err(self.full());
                }
            }
            if let Err(not_until) = rate.limiter.check_key(key) {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let what = format!(
                    "{} call(s) per second per client (burst {}); retry in {wait:.1?}",
                    rate.per_second, rate.burst
                );
                return Err((Limit::ClientRate, what, wait));
            }
        }
        if self.max_concurrent == 0 {
            return Ok(false);
        }
        let in_flight = &self.in_flight[table];
        if !in_flight.contains_key(key) && in_flight.len() >= self.max_keys {
            return Err(self.full());
        }
        let mut calls = in_flight.entry(key.clone()).or_insert(0);
        if *calls >= self.max_concurrent {
            let what = format!("{} concurrent calls per client", self.max_concurrent);
            return Err((Limit::ClientConcurrent, what, Duration::from_secs(1)));
        }
        *calls += 1;
        Ok(true)
    }

    /// Gives back a place `admit` gave `key`; a client with no call left is forgotten.
    pub fn release(&self, key: &ClientKey) {
        let in_flight = &self.in_flight[table(key)];
        if let Some(mut calls) = in_flight.get_mut(key) {
            *calls = calls.saturating_sub(1);
        }
        in_flight.remove_if(key, |_, calls| *calls == 0);
    }

    /// Drops the rates' idle keys, unless that was done less than a second ago.
    fn sweep(&self, rates: &[ClientRate; 2]) {
        let now = self.base.elapsed().as_millis() as u64 + 1;
        let last = self.swept.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= 1000;
        if due
            && self
                .swept
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            for rate in rates {
                rate.limiter.retain_recent();
                rate.limiter.shrink_to_fit();
            }
        }
    }

    fn full(&self) -> ClientRefusal {
        let what = format!("{} clients tracked at once", self.max_keys);
        (Limit::ClientKeys, what, Duration::from_secs(1))
    }

    /// The configured limits as `/metrics` rows: (limit, value, in use).
    pub fn rows(&self) -> Vec<(Limit, f64, Option<u64>)> {
        let mut rows = Vec::new();
        let mut keys = self.in_flight.iter().map(DashMap::len).max().unwrap_or(0);
        if let Some(rates) = &self.rates {
            rows.push((Limit::ClientRate, rates[0].per_second, None));
            keys = (rates.iter().map(|rate| rate.keys.0.len())).fold(keys, usize::max);
        }
        if self.max_concurrent > 0 {
            rows.push((Limit::ClientConcurrent, self.max_concurrent as f64, None));
        }
        rows.push((Limit::ClientKeys, self.max_keys as f64, Some(keys as u64)));
        rows
    }

    /// Whether `limit` is one of these that is on.
    pub fn has(&self, limit: Limit) -> bool {
        match limit {
            Limit::ClientRate => self.rates.is_some(),
            Limit::ClientConcurrent => self.max_concurrent > 0,
            Limit::ClientKeys => true,
            _ => false,
        }
    }

    /// The configured value of `limit`, for a refusal's metadata.
    pub fn value(&self, limit: Limit) -> f64 {
        match limit {
            Limit::ClientRate => self.rates.as_ref().map_or(0.0, |r| r[0].per_second),
            Limit::ClientConcurrent => self.max_concurrent as f64,
            _ => self.max_keys as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> ClientKey {
        ClientKey::of(None, Some(text.parse().unwrap()))
    }

    #[test]
    fn a_client_is_its_principal_or_its_address() {
        let alice = Principal {
            name: "alice".into(),
            scheme: Scheme::ApiKey,
            claims: None,
        };
        let peer = Some("10.0.0.1".parse().unwrap());
        assert_eq!(
            ClientKey::of(Some(&alice), peer),
            ClientKey::Principal(Scheme::ApiKey, None, "alice".into())
        );
        // The same name under another scheme or issuer is another client.
        let issued = |iss: &str| Principal {
            scheme: Scheme::Jwt,
            claims: Some(Arc::new(
                serde_json::json!({ "iss": iss })
                    .as_object()
                    .unwrap()
                    .clone(),
            )),
            ..alice.clone()
        };
        let (one, other) = (issued("https://a"), issued("https://b"));
        let keys = [&alice, &one, &other].map(|p| ClientKey::of(Some(p), peer));
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2]);
        assert_eq!(ClientKey::of(Some(&issued("https://a")), peer), keys[1]);
        let anonymous = Principal {
            scheme: Scheme::Anonymous,
            name: "".into(),
            ..alice
        };
        assert_eq!(ClientKey::of(Some(&anonymous), peer), address("10.0.0.1"));
        assert_eq!(address("2001:db8::1"), address("2001:db8::ffff:1"));
        assert_ne!(address("2001:db8::1"), address("2001:db8:0:1::1"));
        assert_eq!(address("::ffff:10.0.0.1"), address("10.0.0.1"));
    }

    #[test]
    fn addresses_filling_their_table_leave_principals_theirs() {
        let limits = PerClient::new(&PerClientSettings {
            rate_limit: 0.001,
            rate_burst: 5,
            max_concurrent: 0,
            max_keys: 3,
        })
        .unwrap();
        for n in 1..=3 {
            assert_eq!(limits.admit(&address(&format!("10.0.0.{n}"))), Ok(false));
        }
        let refused = limits.admit(&address("10.0.0.4")).unwrap_err();
        assert_eq!(refused.0, Limit::ClientKeys);
        let alice = ClientKey::Principal(Scheme::ApiKey, None, "alice".into());
        assert_eq!(limits.admit(&alice), Ok(false), "a principal still gets in");
    }

    #[test]
    fn each_client_has_its_own_rate_and_concurrency() {
        let limits = PerClient::new(&PerClientSettings {
            rate_limit: 1.0,
            rate_burst: 2,
            max_concurrent: 1,
            max_keys: 10,
        })
        .unwrap();
        let (a, b) = (address("10.0.0.1"), address("10.0.0.2"));
        assert_eq!(limits.admit(&a), Ok(true));
        let busy = limits.admit(&a).unwrap_err();
        assert_eq!(busy.0, Limit::ClientConcurrent);
        limits.release(&a);
        assert_eq!(limits.in_flight[1].len(), 0, "an idle client is forgotten");
        let throttled = limits.admit(&a).unwrap_err();
        assert_eq!(throttled.0, Limit::ClientRate);
        assert!(throttled.2 <= Duration::from_secs(1));
        assert_eq!(
            limits.admit(&b),
            Ok(true),
            "another client is not throttled"
        );
    }

    #[test]
    fn a_full_table_drops_idle_keys_then_refuses_new_ones() {
        let limits = PerClient::new(&PerClientSettings {
            rate_limit: 1000.0,
            rate_burst: 1,
            max_concurrent: 0,
            max_keys: 2,
        })
        .unwrap();
        let (a, b, c) = (
            address("10.0.0.1"),
            address("10.0.0.2"),
            address("10.0.0.3"),
        );
        assert_eq!(limits.admit(&a), Ok(false));
        assert_eq!(limits.admit(&b), Ok(false));
        std::thread::sleep(Duration::from_millis(5));
        // a and b are idle (their buckets refilled): swept for c.
        assert_eq!(limits.admit(&c), Ok(false));
        assert_eq!(limits.rates.as_ref().unwrap()[1].keys.0.len(), 1);
        // Two busy clients and a third within the second: refused, the known ones served.
        limits.admit(&a).unwrap();
        let full = limits.admit(&b).unwrap_err();
        assert_eq!(full.0, Limit::ClientKeys);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(limits.admit(&c), Ok(false), "a known client is served");
    }
}

//! Sends relayed push notifications to the clients' webhooks (issue 23; spec 4.3.3 and
//! 13.2): `Deliverer` is the relay's `Outbox`. Every bound is the operator's:
//!
//! - Queues: the deliveries held at once, waiting or being sent, are bounded overall, in
//!   number (`--push-queue`) and in bytes (`--push-queue-bytes`), and per destination
//!   `host:port` (`--push-queue-per-destination`); past a bound `--push-drop` drops the
//!   oldest waiting deliveries or refuses the newest, and counts it.
//! - Order: one worker per destination sends one delivery at a time, oldest first, so the
//!   events of a task (one webhook, one destination) arrive in the order they came.
//! - Retries: connection failures, timeouts, 5xx and 429 are retried with exponential
//!   back-off and full jitter (429 after its `Retry-After` seconds, at most the back-off
//!   cap), up to `--push-max-attempts` and `--push-max-age`; a 3xx (never followed) and
//!   any other 4xx are final.
//! - Duplicates: the same event for the same webhook, seen among the last `RECENT`
//!   accepted, is dropped (the agent retried a post the relay had already taken).
//! - Shutdown (`shutdown`): nothing new is taken; what is held is sent within the grace,
//!   then what is left is dropped, counted and logged.
//! - Reload: the new deliverer takes over what waits (`adopt`); the replaced one finishes
//!   what it is sending, within its retries' bounds, and then ends (`retire`); a shutdown
//!   meanwhile gives it the same grace as the new one.
//!
//! Connections are made by `connect` (checked addresses only). The work runs on a thread
//! of its own, started at the first delivery, so a slow webhook costs the serving threads
//! nothing.

pub(crate) mod connect;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use super::outbox::{Delivery, Outbox, Refused};
use super::sign::{PushSigner, SIGNATURE_HEADER};
use super::{PushPolicy, Refusal};
use crate::telemetry::trace::DeliverySpan;
use crate::telemetry::untrusted::clipped;
use crate::telemetry::{DeliveryCounters, DeliveryMetrics, DeliveryOutcome, DropReason};
use connect::Lookup;
pub(crate) use connect::Timeouts;

/// Accepted deliveries whose event and webhook are remembered for duplicates: at about
/// 100 bytes each, under half a MiB.
const RECENT: usize = 4096;

/// Deliverers that reloads replaced and that still send (each a thread): past this, the
/// oldest one's deliveries are dropped (`replaced`).
const MAX_REPLACED_SENDING: usize = 4;

/// The most of a webhook's answer that is read (to reuse its connection); the rest is
/// not waited for.
const MAX_ANSWER: usize = 64 << 10;

/// The header the client's token travels in, as the A2A SDKs send it.
const TOKEN_HEADER: HeaderName = HeaderName::from_static("x-a2a-notification-token");

/// The media type of a push payload (spec 4.3.3).
const PAYLOAD_TYPE: HeaderValue = HeaderValue::from_static("application/a2a+json");

/// Which delivery a full queue drops (`--push-drop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PushDrop {
    /// The oldest waiting delivery of the destination (or, when the overall bound is
    /// reached, of all destinations) makes room for the new one.
    Oldest,
    /// The new delivery is refused.
    Newest,
}

/// Exponential back-off with full jitter: attempt `n` (from 1) waits a random time up to
/// `min(cap, base × 2^(n-1))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub(crate) base: Duration,
    pub(crate) cap: Duration,
}

impl Backoff {
    /// What the gateway uses: from half a second up to a minute.
    pub const DEFAULT: Backoff = Backoff {
        base: Duration::from_millis(500),
        cap: Duration::from_secs(60),
    };

    fn ceiling(self, attempt: u32) -> Duration {
        let doubled = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        doubled.min(self.cap)
    }

    fn wait(self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt).as_millis() as u64;
        let mut bytes = [0u8; 8];
        // The jitter needs no secrecy: without randomness, no wait beats a stampede.
        let random =
            match ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes) {
                Ok(()) => u64::from_le_bytes(bytes),
                Err(_) => 0,
            };
        Duration::from_millis(random % (ceiling + 1))
    }
}

/// How the gateway delivers push notifications: its bounds, retries, deadlines, the extra
/// CA and the signing key (`--push-*`).
#[derive(Clone, Debug)]
pub struct DeliverySettings {
    /// Deliveries held at once, waiting or being sent (at least 1).
    pub(crate) queue: usize,
    /// Of those, for one destination `host:port` (at least 1).
    pub(crate) per_destination: usize,
    /// The bytes of the notifications held at once (at least 1).
    pub(crate) queue_bytes: usize,
    pub(crate) drop: PushDrop,
    /// Attempts of one delivery, the first included (at least 1).
    pub(crate) max_attempts: u32,
    /// No retry starts later than this after the delivery was queued.
    pub(crate) max_age: Duration,
    pub(crate) timeouts: Timeouts,
    pub(crate) backoff: Backoff,
    /// TLS for `https` webhooks: the platform's roots and `--push-ca-file`'s.
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// Signs each delivery (`--push-sign-key`).
    pub(crate) signer: Option<Arc<PushSigner>>,
}

/// One route's way out: its URL policy, its client (checked resolution, its DNS server)
/// and its counters.
struct RouteOut {
    policy: PushPolicy,
    client: reqwest::Client,
    counters: Arc<DeliveryCounters>,
}

/// The deliveries a route may make, as `Deliverer::new` takes them.
pub(crate) struct DeliveryRoute {
    pub(crate) name: String,
    /// The route's push URL policy (`push-allow`, `push-allow-http`); the strict default
    /// where the route's guard is off.
    pub(crate) policy: PushPolicy,
    pub(crate) lookup: Lookup,
}

/// A delivery held, with when it was queued and its place in arrival order.
struct Held {
    delivery: Delivery,
    queued: Instant,
    seq: u64,
}

/// The deliveries of one destination: those waiting, the route of the one being sent, and
/// whether its worker runs.
#[derive(Default)]
struct Destination {
    waiting: VecDeque<Held>,
    sending: Option<Arc<str>>,
    worker: bool,
}

#[derive(Default)]
struct State {
    destinations: HashMap<String, Destination>,
    /// Deliveries held: waiting, or being sent.
    held: usize,
    /// Their notifications' bytes.
    bytes: usize,
    next_seq: u64,
    /// The keys (event and webhook) of the last `RECENT` accepted deliveries.
    recent: HashSet<[u8; 32]>,
    recent_order: VecDeque<[u8; 32]>,
    closed: bool,
    /// The deliverer a reload handed this one's waiting deliveries to (`adopt`): posts
    /// that reach this one after it closed go there.
    successor: Weak<Shared>,
}

struct Shared {
    settings: DeliverySettings,
    routes: HashMap<String, RouteOut>,
    state: Mutex<State>,
    /// Woken when the last held delivery is done.
    idle: tokio::sync::Notify,
    /// Cancelled when what is held must be dropped (the grace is over, or the
    /// `Deliverer` is gone): the workers stop and the thread ends.
    stop: CancellationToken,
    /// The delivery thread's runtime, started at the first delivery.
    runtime: OnceLock<tokio::runtime::Handle>,
    /// The deliverers reloads replaced (`adopt`), while they finish what they send: a
    /// shutdown gives them its grace too.
    retired: Mutex<Vec<Weak<Shared>>>,
}

/// Queues, sends and retries push deliveries (the relay's `Outbox`).
pub(crate) struct Deliverer {
    shared: Arc<Shared>,
}

impl Drop for Deliverer {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

impl Deliverer {
    /// A deliverer for `routes`, counting into `metrics` (which has a row for each).
    pub(crate) fn new(
        settings: DeliverySettings,
        routes: Vec<DeliveryRoute>,
        metrics: &DeliveryMetrics,
    ) -> Result<Deliverer, String> {
        let mut out = HashMap::with_capacity(routes.len());
        for route in routes {
            let client = connect::client(
                &route.policy,
                route.lookup,
                &settings.tls,
                settings.timeouts,
            )?;
            let counters = metrics.route(&route.name).unwrap_or_default();
            let policy = route.policy;
            out.insert(
                route.name,
                RouteOut {
                    policy,
                    client,
                    counters,
                },
            );
        }
        Ok(Deliverer {
            shared: Arc::new(Shared {
                settings,
                routes: out,
                state: Mutex::default(),
                idle: tokio::sync::Notify::new(),
                stop: CancellationToken::new(),
                runtime: OnceLock::new(),
                retired: Mutex::default(),
            }),
        })
    }

    /// Takes no more deliveries, sends what is held for up to `grace`, then drops what is
    /// left, counting and logging it; the same for the deliverers reloads replaced that
    /// are still sending.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        let retired: Vec<Arc<Shared>> = (self.shared.retired.lock())
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let all = std::iter::once(&self.shared).chain(&retired);
        futures::future::join_all(all.map(|shared| shared.shutdown(grace))).await;
    }

    /// A reload replaced this deliverer (after `adopt` took what waits): takes no more
    /// deliveries and sends what it holds, each within its retries' bounds; returns when
    /// nothing is held, or a shutdown stopped it.
    pub(crate) async fn retire(&self) {
        let shared = &self.shared;
        shared.lock().closed = true;
        tokio::select! {
            () = shared.flushed() => {}
            () = shared.stop.cancelled() => {}
        }
    }
}

impl Shared {
    /// Returns once nothing is held.
    async fn flushed(&self) {
        loop {
            let idle = self.idle.notified();
            if self.lock().held == 0 {
                return;
            }
            idle.await;
        }
    }

    /// `Deliverer::shutdown` of this deliverer alone.
    async fn shutdown(&self, grace: Duration) {
        let shared = self;
        shared.lock().closed = true;
        if tokio::time::timeout(grace, shared.flushed()).await.is_ok() {
            return;
        }
        let dropped = shared.drop_held(DropReason::Shutdown);
        tracing::warn!(
            dropped,
            ?grace,
            "push deliveries dropped at shutdown, not sent within the grace"
        );
    }

    /// Whether a deliverer still holds deliveries it has not dropped.
    fn sending(&self) -> bool {
        !self.stop.is_cancelled() && self.lock().held > 0
    }

    /// Stops the workers where they are and drops what is held, counting it under `reason`;
    /// returns how many were dropped.
    fn drop_held(&self, reason: DropReason) -> usize {
        let mut state = self.lock();
        // The workers stop where they are (their runtime ends with them).
        self.stop.cancel();
        let dropped = state.held;
        for destination in state.destinations.values_mut() {
            for held in destination.waiting.drain(..) {
                let counters = self.counters(&held.delivery.route);
                counters.queued(-1);
                counters.dropped(reason, 1);
            }
            if let Some(route) = destination.sending.take() {
                self.counters(&route).dropped(reason, 1);
            }
        }
        dropped
    }
}

/// A replaced deliverer that is still there and still sends.
fn still_sending(replaced: &Weak<Shared>) -> bool {
    replaced.upgrade().is_some_and(|shared| shared.sending())
}

impl Outbox for Deliverer {
    fn enqueue(&self, delivery: Delivery) -> Result<(), Refused> {
        self.queue(delivery, true)
    }
}

impl Deliverer {
    /// Takes over the deliveries `old` (the deliverer a reload replaced) holds waiting, in
    /// their order: each of a route this deliverer has is queued here (not a duplicate of
    /// itself: `old` had accepted it); one of a route that no longer relays is dropped and
    /// counted. What `old` is sending stays with it, to finish (`retire`); a shutdown
    /// before then gives it this deliverer's grace (as it does the ones `old` replaced).
    pub(crate) fn adopt(&self, old: &Deliverer) {
        {
            let mut retired = (self.shared.retired.lock()).unwrap_or_else(|e| e.into_inner());
            let older = (old.shared.retired.lock()).unwrap_or_else(|e| e.into_inner());
            // Those done sending need no grace.
            retired.retain(still_sending);
            retired.extend(older.iter().filter(|s| still_sending(s)).cloned());
            retired.push(Arc::downgrade(&old.shared));
            // Each replaced deliverer keeps a thread while a webhook holds its delivery (up to
            // `--push-max-age`): reloads in quick succession must not pile them up.
            let excess = retired.len().saturating_sub(MAX_REPLACED_SENDING);
            for shared in retired.drain(..excess).filter_map(|s| s.upgrade()) {
                let dropped = shared.drop_held(DropReason::Replaced);
                tracing::warn!(
                    dropped,
                    "push deliveries dropped: still being sent by a deliverer that {MAX_REPLACED_SENDING} later reloads replaced"
                );
            }
        }
        let (mut waiting, recent): (Vec<Held>, Vec<[u8; 32]>) = {
            let mut state = old.shared.lock();
            state.successor = Arc::downgrade(&self.shared);
            let recent = state.recent_order.iter().copied().collect();
            let mut waiting = Vec::new();
            for destination in state.destinations.values_mut() {
                waiting.extend(destination.waiting.drain(..));
            }
            state.held -= waiting.len();
            state.bytes -= waiting.iter().map(|h| h.delivery.body.len()).sum::<usize>();
            if state.held == 0 {
                old.shared.idle.notify_waiters();
            }
            (waiting, recent)
        };
        // What `old` accepted is known here too: an agent's repeat after the reload is
        // still a duplicate.
        {
            let mut state = self.shared.lock();
            for key in recent {
                if state.recent_order.len() < RECENT && state.recent.insert(key) {
                    state.recent_order.push_back(key);
                }
            }
        }
        if waiting.is_empty() {
            return;
        }
        waiting.sort_by_key(|held| held.seq);
        let (mut adopted, mut dropped) = (0, 0);
        for held in waiting {
            let old_counters = old.shared.counters(&held.delivery.route);
            old_counters.queued(-1);
            if !self.shared.routes.contains_key(&*held.delivery.route) {
                old_counters.dropped(DropReason::Shutdown, 1);
                dropped += 1;
                continue;
            }
            match self.queue(held.delivery, false) {
                Ok(()) => adopted += 1,
                Err(_) => dropped += 1,
            }
        }
        tracing::info!(
            adopted,
            dropped,
            "push deliveries waiting at a reload taken over by the new configuration"
        );
    }

    /// Queues `delivery` for its destination, within the queues' bounds; with `dedupe`, an
    /// event already accepted for the same webhook is dropped as a duplicate.
    fn queue(&self, delivery: Delivery, dedupe: bool) -> Result<(), Refused> {
        queue(&self.shared, delivery, dedupe)
    }
}

/// Queues `delivery` in `shared`, or, once a reload replaced it, in the deliverer that took
/// over (a post the callback began before the reload): what the agent posted is accepted,
/// not refused as if the gateway were stopping.
fn queue(shared: &Arc<Shared>, delivery: Delivery, dedupe: bool) -> Result<(), Refused> {
    let mut shared = shared.clone();
    loop {
        let state = shared.lock();
        if !state.closed {
            drop(state);
            return queue_open(&shared, delivery, dedupe);
        }
        match state.successor.upgrade() {
            Some(next) => {
                drop(state);
                shared = next;
            }
            None => {
                drop(state);
                shared
                    .counters(&delivery.route)
                    .dropped(DropReason::Shutdown, 1);
                return Err(Refused::Closed);
            }
        }
    }
}

/// `queue` into a deliverer that takes deliveries (unless it closed meanwhile).
fn queue_open(shared: &Arc<Shared>, delivery: Delivery, dedupe: bool) -> Result<(), Refused> {
    let counters = shared.counters(&delivery.route);
    let key = dedupe_key(&delivery);
    let destination = destination(&delivery.url);
    let mut state = shared.lock();
    if state.closed {
        counters.dropped(DropReason::Shutdown, 1);
        return Err(Refused::Closed);
    }
    let known = state.recent.contains(&key);
    if dedupe && known {
        counters.dropped(DropReason::Duplicate, 1);
        return Ok(());
    }
    let settings = &shared.settings;
    let size = delivery.body.len();
    if size > settings.queue_bytes {
        counters.dropped(DropReason::QueueFull, 1);
        return Err(Refused::Full);
    }
    loop {
        let here = state.destinations.get(&destination);
        let held_here = here.map_or(0, |d| d.waiting.len() + usize::from(d.sending.is_some()));
        let full_here = held_here >= settings.per_destination;
        let full = state.held >= settings.queue || state.bytes + size > settings.queue_bytes;
        if !full_here && !full {
            break;
        }
        let victim = match (settings.drop, full_here) {
            (PushDrop::Newest, _) => None,
            (PushDrop::Oldest, true) => state
                .destinations
                .get_mut(&destination)
                .and_then(|d| d.waiting.pop_front()),
            (PushDrop::Oldest, false) => oldest_waiting(&mut state),
        };
        let Some(victim) = victim else {
            // Nothing waits: all that is held is being sent.
            counters.dropped(DropReason::QueueFull, 1);
            return Err(Refused::Full);
        };
        state.held -= 1;
        state.bytes -= victim.delivery.body.len();
        let victim_counters = shared.counters(&victim.delivery.route);
        victim_counters.queued(-1);
        victim_counters.dropped(DropReason::QueueFull, 1);
    }
    if !known {
        if state.recent_order.len() == RECENT {
            if let Some(old) = state.recent_order.pop_front() {
                state.recent.remove(&old);
            }
        }
        state.recent.insert(key);
        state.recent_order.push_back(key);
    }
    let seq = state.next_seq;
    state.next_seq += 1;
    state.held += 1;
    state.bytes += size;
    counters.queued(1);
    let entry = state.destinations.entry(destination.clone()).or_default();
    entry.waiting.push_back(Held {
        delivery,
        queued: Instant::now(),
        seq,
    });
    let start = !entry.worker;
    entry.worker = true;
    drop(state);
    if start {
        let worker = work(shared.clone(), destination);
        shared.runtime().spawn(worker);
    }
    Ok(())
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counters(&self, route: &str) -> Arc<DeliveryCounters> {
        match self.routes.get(route) {
            Some(out) => out.counters.clone(),
            // The relay only hands deliveries of configured routes; a stray one is counted
            // nowhere rather than under a name the configuration does not know.
            None => Arc::default(),
        }
    }

    /// The delivery thread's runtime, started now if this is the first delivery.
    fn runtime(&self) -> &tokio::runtime::Handle {
        self.runtime.get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime starts");
            let handle = runtime.handle().clone();
            let stop = self.stop.clone();
            let spawned = std::thread::Builder::new()
                .name("push-delivery".into())
                .spawn(move || runtime.block_on(stop.cancelled_owned()));
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start the push delivery thread");
            }
            handle
        })
    }
}

/// The waiting delivery that came first, taken from its destination's queue.
fn oldest_waiting(state: &mut State) -> Option<Held> {
    let (_, destination) = state
        .destinations
        .iter_mut()
        .filter(|(_, d)| !d.waiting.is_empty())
        .min_by_key(|(_, d)| d.waiting.front().map_or(u64::MAX, |h| h.seq))?;
    destination.waiting.pop_front()
}

/// Where a delivery goes, for its queue: the URL's `host:port` (the URL as written when it
/// does not parse; it is refused when sent).
fn destination(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => format!(
            "{}:{}",
            parsed.host_str().unwrap_or_default(),
            parsed.port_or_known_default().unwrap_or_default()
        ),
        Err(_) => url.to_owned(),
    }
}

/// The event and the registration (webhook, token, authentication): one event goes once
/// to each config registered for it. Two callers' configs on one URL are two registrations:
/// keyed by the URL alone, one caller's config would silence the other's.
fn dedupe_key(delivery: &Delivery) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(&delivery.event_key);
    let authentication = delivery.authentication.as_ref();
    let (scheme, credentials) = authentication.map_or(("", ""), |(s, c)| (s, c));
    let token = delivery.token.as_deref();
    // The scheme as HTTP compares it: without case (RFC 9110 11.1).
    let scheme = scheme.to_ascii_lowercase();
    // Each part with its length (and the token's presence), so no two differ only in
    // where one part ends and the next begins.
    for part in [
        delivery.url.as_str(),
        token.unwrap_or(""),
        &scheme,
        credentials,
    ] {
        context.update(&(part.len() as u64).to_le_bytes());
        context.update(part.as_bytes());
    }
    context.update(&[
        u8::from(token.is_some()),
        u8::from(authentication.is_some()),
    ]);
    let mut key = [0u8; 32];
    key.copy_from_slice(context.finish().as_ref());
    key
}

/// One destination's worker: sends its deliveries one at a time, oldest first, until none
/// waits.
async fn work(shared: Arc<Shared>, destination: String) {
    loop {
        let held = {
            let mut state = shared.lock();
            let Some(place) = state.destinations.get_mut(&destination) else {
                return;
            };
            match place.waiting.pop_front() {
                Some(held) => {
                    place.sending = Some(held.delivery.route.clone());
                    held
                }
                None => {
                    state.destinations.remove(&destination);
                    return;
                }
            }
        };
        let counters = shared.counters(&held.delivery.route);
        counters.queued(-1);
        tokio::select! {
            () = deliver(&shared, &held) => {}
            // `shutdown` counts it.
            () = shared.stop.cancelled() => return,
        }
        let mut state = shared.lock();
        state.held -= 1;
        state.bytes -= held.delivery.body.len();
        if let Some(place) = state.destinations.get_mut(&destination) {
            place.sending = None;
        }
        if state.held == 0 {
            shared.idle.notify_waiters();
        }
    }
}

/// What one attempt came to.
enum Attempt {
    Done(DeliveryOutcome, Option<u16>),
    /// Worth another attempt: after this long if the webhook said (429 `Retry-After`).
    Retry(Option<Duration>, Option<u16>, &'static str),
}

/// Sends one delivery, retrying as the settings allow; counts and logs how it ended.
async fn deliver(shared: &Shared, held: &Held) {
    let delivery = &held.delivery;
    let settings = &shared.settings;
    let started = Instant::now();
    let out = shared.routes.get(&*delivery.route);
    let host = url::Url::parse(&delivery.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let span = DeliverySpan::start(delivery.traceparent.as_deref(), &host);
    let mut attempts = 0;
    let (outcome, status, last) = loop {
        attempts += 1;
        let attempt = match out {
            Some(out) => attempt(out, settings, span.as_ref(), delivery).await,
            None => Attempt::Done(DeliveryOutcome::Refused, None),
        };
        let (after, status, why) = match attempt {
            Attempt::Done(outcome, status) => break (outcome, status, ""),
            Attempt::Retry(after, status, why) => (after, status, why),
        };
        let wait = after
            .map(|after| after.min(settings.backoff.cap))
            .unwrap_or_else(|| settings.backoff.wait(attempts));
        let too_old = held.queued.elapsed() + wait > settings.max_age;
        if attempts >= settings.max_attempts || too_old {
            break (DeliveryOutcome::Exhausted, status, why);
        }
        if let Some(out) = out {
            out.counters.retried();
        }
        tokio::time::sleep(wait).await;
    };
    if let Some(out) = out {
        out.counters.delivered(outcome);
    }
    if let Some(span) = span {
        span.ended(outcome.name(), status, attempts);
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    tracing::info!(
        target: "a2a_gateway::push::delivery",
        route = %delivery.route,
        destination = %clipped(&host),
        task = %clipped(&delivery.task_id),
        outcome = outcome.name(),
        status = status.unwrap_or_default(),
        attempts,
        elapsed_ms,
        last_failure = last,
        traceparent = %clipped(delivery.traceparent.as_deref().unwrap_or_default()),
        "push delivery"
    );
}

/// One attempt: the URL checked, the request made, the answer judged.
async fn attempt(
    out: &RouteOut,
    settings: &DeliverySettings,
    span: Option<&DeliverySpan>,
    delivery: &Delivery,
) -> Attempt {
    if out.policy.check_static(&delivery.url).is_err() {
        return Attempt::Done(DeliveryOutcome::Refused, None);
    }
    let mut request = out
        .client
        .post(&delivery.url)
        .header(http::header::CONTENT_TYPE, PAYLOAD_TYPE);
    let mut headers = http::HeaderMap::new();
    if let Some(token) = &delivery.token {
        let Ok(value) = HeaderValue::try_from(token.as_str()) else {
            return Attempt::Done(DeliveryOutcome::Invalid, None);
        };
        headers.insert(TOKEN_HEADER, sensitive(value));
    }
    if let Some((scheme, credentials)) = &delivery.authentication {
        let Ok(value) = HeaderValue::try_from(format!("{scheme} {credentials}")) else {
            return Attempt::Done(DeliveryOutcome::Invalid, None);
        };
        headers.insert(http::header::AUTHORIZATION, sensitive(value));
    }
    if let Some(span) = span {
        span.write(&mut headers);
    }
    if let Some(signer) = &settings.signer {
        let jws = signer.sign(&delivery.body);
        if let Ok(value) = HeaderValue::try_from(jws) {
            headers.insert(HeaderName::from_static(SIGNATURE_HEADER), value);
        }
    }
    request = request.headers(headers).body(delivery.body.clone());
    let response = match tokio::time::timeout(settings.timeouts.response, request.send()).await {
        Err(_) => return Attempt::Retry(None, None, "no answer in time"),
        // A name that does not resolve now may later (DNS can fail for a while); one that
        // resolves inward is refused for good.
        Ok(Err(e)) => match connect::refusal_of(&e) {
            Some(Refusal::Unresolved { .. }) => {
                return Attempt::Retry(None, None, "name did not resolve")
            }
            Some(_) => return Attempt::Done(DeliveryOutcome::Refused, None),
            None => return transport_failure(&e),
        },
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let code = Some(status.as_u16());
    if status.is_success() {
        drain(response).await;
        return Attempt::Done(DeliveryOutcome::Delivered, code);
    }
    if status == http::StatusCode::TOO_MANY_REQUESTS {
        return Attempt::Retry(retry_after(response.headers()), code, "429");
    }
    if status.is_server_error() {
        return Attempt::Retry(None, code, "5xx");
    }
    if status.is_redirection() {
        return Attempt::Done(DeliveryOutcome::Redirected, code);
    }
    Attempt::Done(DeliveryOutcome::Rejected, code)
}

/// A failed request that reached no answer: worth another attempt.
fn transport_failure(error: &reqwest::Error) -> Attempt {
    let why = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "connection failed"
    };
    Attempt::Retry(None, None, why)
}

fn sensitive(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

/// Reads at most `MAX_ANSWER` bytes of a 2xx answer, so its connection can be reused.
async fn drain(mut response: reqwest::Response) {
    let mut read = 0;
    while let Ok(Some(chunk)) = response.chunk().await {
        read += chunk.len();
        if read > MAX_ANSWER {
            return;
        }
    }
}

/// A `Retry-After` of delta-seconds (an HTTP date is not honoured: the back-off applies).
fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: u64 = value.trim().parse().ok()?;
    Some(Duration::from_secs(seconds.min(24 * 3600)))
}

#[cfg(test)]
mod tests;

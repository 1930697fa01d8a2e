//! The `Backend` a worker calls a balanced route through: it picks an endpoint per call
//! (power of two choices on outstanding calls, or round-robin), records how the call went
//! in the endpoint's shared health, and sends a call that never reached the agent
//! (`BACKEND_UNAVAILABLE`: no connection, or refused before processing) once more to
//! another endpoint. A call that may have reached the agent is never sent again. A stream
//! stays on the endpoint it started on. Task affinity (`backend::affinity`) also calls
//! through here: it learns which endpoint answered (`unary_tagged`, `stream_tagged`) and
//! sends task-scoped calls to one named endpoint (`pinned`), never elsewhere.
//!
//! **Why not tower's `balance::p2c`.** It balances `tower::Service`s fed by a `Discover`
//! stream, behind `poll_ready(&mut self)`: our `Backend` would need a Service adapter with
//! request and response enums for unary calls and streams, a lock or `Buffer` task to share
//! the balancer between a worker's connections, and it still has no way to exclude one
//! endpoint for a retry, nor ejection state shared across workers. The selection itself is
//! ten lines (`Local::choose`); the rest is ours either way.
//!
//! **Cost.** A balanced route pays one copy of the request per call while it has more
//! than one endpoint (the `Backend` consumes its call, and the retry needs it again), a
//! boxed wrapper per stream (it holds the outstanding count), a clock read per call (to
//! tell a call dropped at its deadline from one whose client left), and a few atomic
//! operations. A route with one URL does not come here at all.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Balance, Endpoint, EndpointSet, EndpointTag, RouteEndpoints};
use crate::backend::fault::Fault;
use crate::backend::{Answer, Backend, Call, Error, EventStream};
use crate::protocol::ops::{Reply, StreamRequest, UnaryRequest};

/// A worker's view of a balanced route.
#[derive(Clone)]
pub struct Balanced(Arc<Worker>);

struct Worker {
    route: Arc<RouteEndpoints>,
    local: Mutex<Local>,
}

/// The worker's clients of the route's current endpoints.
struct Local {
    seen: watch::Receiver<EndpointSet>,
    picks: Vec<Pick>,
    /// Round-robin position.
    turn: usize,
    /// xorshift64 state for the power of two choices.
    random: u64,
}

/// One endpoint as this worker calls it.
#[derive(Clone)]
struct Pick {
    endpoint: Arc<Endpoint>,
    client: Arc<dyn Backend>,
    /// This worker's calls on it that have not finished (streams: until dropped).
    outstanding: Arc<AtomicUsize>,
}

impl Balanced {
    /// The route's balancer for the calling worker; clients are made as endpoints appear.
    pub fn new(route: Arc<RouteEndpoints>) -> Balanced {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let local = Local {
            seen: route.subscribe(),
            picks: Vec::new(),
            turn: 0,
            random: seed | 1,
        };
        let mut local = local;
        local.seen.mark_changed();
        Balanced(Arc::new(Worker {
            route,
            local: Mutex::new(local),
        }))
    }
}

impl Local {
    /// Follows the route's endpoint set: new endpoints get a client of this worker's,
    /// endpoints that left are dropped (calls still holding them finish).
    fn refresh(&mut self) {
        if !self.seen.has_changed().unwrap_or(false) {
            return;
        }
        let set = self.seen.borrow_and_update().clone();
        let mut picks = Vec::with_capacity(set.endpoints.len());
        for endpoint in set.endpoints.iter() {
            let kept = self
                .picks
                .iter()
                .find(|p| Arc::ptr_eq(&p.endpoint, endpoint));
            if let Some(kept) = kept {
                picks.push(kept.clone());
                continue;
            }
            match (endpoint.new_client)() {
                Ok(client) => picks.push(Pick {
                    endpoint: endpoint.clone(),
                    client,
                    outstanding: Arc::default(),
                }),
                Err(e) => {
                    tracing::error!(endpoint = %endpoint.label, error = %e, "cannot make a client for the endpoint")
                }
            }
        }
        self.picks = picks;
    }

    fn next_random(&mut self) -> usize {
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        x as usize
    }

    /// An endpoint for the next call, never `avoid`: among those not ejected, else (every
    /// one is ejected) among all, rather than failing a call that might succeed.
    fn choose(&mut self, balance: Balance, avoid: Option<&Arc<Endpoint>>) -> Option<Pick> {
        self.refresh();
        // Drawn before the picks are borrowed; cheap enough to draw for every policy.
        let (first, second) = (self.next_random(), self.next_random());
        self.turn = self.turn.wrapping_add(1);
        let (turn, picks) = (self.turn, &self.picks);
        let allowed = |p: &Pick| avoid.is_none_or(|a| !Arc::ptr_eq(a, &p.endpoint));
        let healthy = |p: &Pick| allowed(p) && !p.endpoint.health.is_ejected();
        let mut eligible: &dyn Fn(&Pick) -> bool = &healthy;
        let mut count = picks.iter().filter(|p| eligible(p)).count();
        if count == 0 {
            eligible = &allowed;
            count = picks.iter().filter(|p| eligible(p)).count();
        }
        // The n-th eligible pick, counted without collecting them (no allocation).
        let nth = |n: usize| picks.iter().filter(|p| eligible(p)).nth(n);
        let chosen = match (count, balance) {
            (0, _) => None,
            (1, _) => nth(0),
            (_, Balance::RoundRobin) => nth(turn % count),
            (_, Balance::P2c) => {
                // Two distinct endpoints: the second is drawn among the others.
                let a = first % count;
                let b = (a + 1 + second % (count - 1)) % count;
                let (a, b) = (nth(a)?, nth(b)?);
                let load = |p: &Pick| p.outstanding.load(Relaxed);
                Some(if load(b) < load(a) { b } else { a })
            }
        };
        chosen.cloned()
    }
}

impl Worker {
    fn choose(&self, avoid: Option<&Arc<Endpoint>>) -> (Option<Pick>, bool) {
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        let pick = local.choose(self.route.policy().balance, avoid);
        let others = local.picks.len() > 1;
        (pick, others)
    }

    /// The endpoint for a call, and whether another one exists to retry on. Before the
    /// route's name has first been resolved, waits for that (at most the connect timeout).
    async fn first(&self) -> Result<(Pick, bool), Error> {
        if let (Some(pick), others) = self.choose(None) {
            return Ok((pick, others));
        }
        let mut seen = self.route.subscribe();
        if !seen.borrow().resolved {
            let wait = self.route.policy().connect_timeout;
            let _ = tokio::time::timeout(wait, seen.wait_for(|s| s.resolved)).await;
            if let (Some(pick), others) = self.choose(None) {
                return Ok((pick, others));
            }
        }
        let why = if seen.borrow().resolved {
            "no endpoint: the backend name resolves to no address"
        } else {
            "no endpoint: the backend name is not resolved yet"
        };
        Err(Fault::Connect(why.into()).into())
    }

    /// The endpoint tagged `tag`, if the route has it. Before the route's name has first
    /// been resolved, waits for that (at most the connect timeout).
    async fn tagged(&self, tag: EndpointTag) -> Option<Pick> {
        let find = || {
            let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
            local.refresh();
            local.picks.iter().find(|p| p.endpoint.tag == tag).cloned()
        };
        if let Some(pick) = find() {
            return Some(pick);
        }
        let mut seen = self.route.subscribe();
        if seen.borrow().resolved {
            return None;
        }
        let wait = self.route.policy().connect_timeout;
        let _ = tokio::time::timeout(wait, seen.wait_for(|s| s.resolved)).await;
        find()
    }

    /// Every endpoint of the route (after a first resolution, as `tagged`).
    async fn every(&self) -> Vec<Pick> {
        let all = || {
            let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
            local.refresh();
            local.picks.clone()
        };
        let mut seen = self.route.subscribe();
        if !seen.borrow().resolved {
            let wait = self.route.policy().connect_timeout;
            let _ = tokio::time::timeout(wait, seen.wait_for(|s| s.resolved)).await;
        }
        all()
    }
}

/// One call on one endpoint: counted as outstanding until dropped, and judged once. A
/// unary call's deadline is enforced by the front, which drops the call when it passes:
/// a call dropped unfinished after its deadline counts as a `Fault::Deadline`; one
/// dropped earlier (the client went away) counts as nothing.
struct Attempt<'a> {
    route: &'a RouteEndpoints,
    endpoint: &'a Endpoint,
    outstanding: &'a AtomicUsize,
    started: Instant,
    deadline: Option<Instant>,
    judged: bool,
}

impl<'a> Attempt<'a> {
    fn start(route: &'a RouteEndpoints, pick: &'a Pick, deadline: Option<Instant>) -> Self {
        pick.endpoint.health.called();
        pick.outstanding.fetch_add(1, Relaxed);
        Attempt {
            route,
            endpoint: &pick.endpoint,
            outstanding: &pick.outstanding,
            started: Instant::now(),
            deadline,
            judged: false,
        }
    }

    fn judge<T>(&mut self, result: &Result<T, Error>) {
        self.judged = true;
        let fault = result.as_ref().err().and_then(Error::fault);
        self.route.observe(self.endpoint, fault);
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        self.outstanding.fetch_sub(1, Relaxed);
        // Every attempt, judged or given up (a deadline, a client gone), so a slow
        // endpoint's waits show.
        self.endpoint.health.latency.observe(self.started.elapsed());
        // Late against the front's own deadline (not a clock started here, after the
        // front's): the front drops the call at `at`, however long it took to get here.
        let late = self.deadline.is_some_and(|at| Instant::now() >= at);
        if !self.judged && late {
            let fault = Fault::Deadline("no answer by the call's deadline".into());
            self.route.observe(self.endpoint, Some(&fault));
        }
    }
}

/// Holds a stream's place among its endpoint's outstanding calls until dropped.
struct Outstanding(Arc<AtomicUsize>);

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Whether the call certainly never reached the agent.
fn unreached(err: &Error) -> bool {
    err.fault().is_some_and(Fault::unreached)
}

impl Worker {
    async fn unary_on(
        &self,
        pick: &Pick,
        call: Call<UnaryRequest>,
    ) -> Result<Answer<Reply>, Error> {
        let mut attempt = Attempt::start(&self.route, pick, call.deadline);
        let result = pick.client.unary(call).await;
        attempt.judge(&result);
        result
    }

    async fn stream_on(
        &self,
        pick: &Pick,
        call: Call<StreamRequest>,
    ) -> Result<Answer<EventStream>, Error> {
        let result = {
            // The first-event deadline is the front's too, but a stream's start has no
            // deadline of its own here: a late start is not judged.
            let mut attempt = Attempt::start(&self.route, pick, None);
            let result = pick.client.stream(call).await;
            attempt.judge(&result);
            result
        };
        let answer = result?;
        // The stream counts as outstanding while open, and the fault that ends it, if
        // any, counts against its endpoint too.
        pick.outstanding.fetch_add(1, Relaxed);
        let outstanding = Outstanding(pick.outstanding.clone());
        let route = self.route.clone();
        let endpoint = pick.endpoint.clone();
        let events = answer.value.map(move |event| {
            let _held = &outstanding;
            if let Err(err) = &event {
                route.observe(&endpoint, err.fault());
            }
            event
        });
        Ok(Answer {
            value: events.boxed(),
            status: answer.status,
            extensions: answer.extensions,
        })
    }
}

/// One endpoint of the route, for calls that must reach it and no other (the task they
/// name lives there): no retry elsewhere, even when it is ejected.
pub struct Pinned {
    worker: Arc<Worker>,
    pick: Pick,
}

impl Pinned {
    /// The tag of the endpoint.
    pub fn tag(&self) -> EndpointTag {
        self.pick.endpoint.tag
    }

    pub async fn unary(&self, call: Call<UnaryRequest>) -> Result<Answer<Reply>, Error> {
        self.worker.unary_on(&self.pick, call).await
    }

    pub async fn stream(&self, call: Call<StreamRequest>) -> Result<Answer<EventStream>, Error> {
        self.worker.stream_on(&self.pick, call).await
    }
}

impl Balanced {
    /// The endpoint tagged `tag`; `None` when the route has no such endpoint (any more).
    pub async fn pinned(&self, tag: EndpointTag) -> Option<Pinned> {
        let pick = self.0.tagged(tag).await?;
        Some(Pinned {
            worker: self.0.clone(),
            pick,
        })
    }

    /// How many endpoints the route has now (what `every` would return, at least one).
    pub fn width(&self) -> usize {
        self.0.route.endpoint_count().max(1)
    }

    /// Every endpoint of the route now.
    pub async fn every(&self) -> Vec<Pinned> {
        let picks = self.0.every().await;
        let worker = &self.0;
        picks
            .into_iter()
            .map(|pick| Pinned {
                worker: worker.clone(),
                pick,
            })
            .collect()
    }

    /// A balanced unary call, and the endpoint that answered.
    pub async fn unary_tagged(
        &self,
        call: Call<UnaryRequest>,
    ) -> Result<(EndpointTag, Answer<Reply>), Error> {
        self.tagged(call).await
    }

    /// A balanced stream, and the endpoint it runs on.
    pub async fn stream_tagged(
        &self,
        call: Call<StreamRequest>,
    ) -> Result<(EndpointTag, Answer<EventStream>), Error> {
        self.tagged(call).await
    }

    /// A call of either kind on the chosen endpoint, sent once more to another endpoint
    /// when it never reached the first (the spare copy is made only while there is another).
    async fn tagged<R: CallKind>(&self, call: Call<R>) -> Result<(EndpointTag, R::Answer), Error> {
        let worker = &self.0;
        let (pick, others) = worker.first().await?;
        let spare = others.then(|| call.clone());
        let err = match R::on(worker, &pick, call).await {
            Err(err) if unreached(&err) => err,
            done => return done.map(|answer| (pick.endpoint.tag, answer)),
        };
        match (spare, worker.choose(Some(&pick.endpoint)).0) {
            (Some(call), Some(other)) => {
                let answer = R::on(worker, &other, call).await?;
                Ok((other.endpoint.tag, answer))
            }
            _ => Err(err),
        }
    }
}

/// The two kinds of call, so that choosing, the spare copy and the retry are written once.
trait CallKind: Clone + Send + 'static {
    type Answer;
    fn on<'a>(
        worker: &'a Worker,
        pick: &'a Pick,
        call: Call<Self>,
    ) -> impl std::future::Future<Output = Result<Self::Answer, Error>> + Send + 'a;
}

impl CallKind for UnaryRequest {
    type Answer = Answer<Reply>;
    fn on<'a>(
        worker: &'a Worker,
        pick: &'a Pick,
        call: Call<Self>,
    ) -> impl std::future::Future<Output = Result<Self::Answer, Error>> + Send + 'a {
        worker.unary_on(pick, call)
    }
}

impl CallKind for StreamRequest {
    type Answer = Answer<EventStream>;
    fn on<'a>(
        worker: &'a Worker,
        pick: &'a Pick,
        call: Call<Self>,
    ) -> impl std::future::Future<Output = Result<Self::Answer, Error>> + Send + 'a {
        worker.stream_on(pick, call)
    }
}

impl Backend for Balanced {
    fn unary(&self, call: Call<UnaryRequest>) -> BoxFuture<'static, Result<Answer<Reply>, Error>> {
        let this = self.clone();
        async move { Ok(this.unary_tagged(call).await?.1) }.boxed()
    }

    fn stream(
        &self,
        call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>> {
        let this = self.clone();
        async move { Ok(this.stream_tagged(call).await?.1) }.boxed()
    }
}

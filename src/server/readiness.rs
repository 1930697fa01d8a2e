//! `/readyz`'s view of the agents: whether each route's backend can take calls, by the
//! route's own check (`AgentCheck`; `route::readiness` says how agents are probed).
//!
//! Checks run on the runtime that built the routes (the main one, never a worker's) and
//! their result is kept for `readiness-cache`: every probe within that time, on any worker
//! or listener, gets the same answer, and concurrent probes share one check, so a probe
//! storm never reaches the agents.
//!
//! Every change of a route's readiness is logged with its reason (`route not ready`,
//! `route ready again`): only the admin listener's `/readyz` names routes and reasons.
//!
//! Whether the routes' readiness makes the gateway's `/readyz` fail is the process's
//! `ReadinessMode`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;

/// Which routes must be ready for the gateway's `/readyz` to answer 200
/// (`--readiness`). Whatever the mode, a route whose agent is down answers its clients
/// with `BACKEND_UNAVAILABLE`; the mode decides only whether the pod leaves the Service.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadinessMode {
    /// Ready while the process serves (not draining); no agent is asked. Every replica
    /// fronts the same agents, so an agent's failure is no reason to prefer another one.
    #[default]
    Process,
    /// Ready while at least one route is.
    AnyRoute,
    /// Ready while every route is.
    AllRoutes,
}

impl ReadinessMode {
    /// Whether `/readyz` must know the routes' readiness to answer.
    pub fn asks_routes(self) -> bool {
        self != ReadinessMode::Process
    }

    /// Whether the gateway is ready when `ready` says, per route, which are.
    pub fn is_ready(self, mut ready: impl Iterator<Item = bool>) -> bool {
        match self {
            ReadinessMode::Process => true,
            ReadinessMode::AnyRoute => ready.any(|r| r),
            ReadinessMode::AllRoutes => ready.all(|r| r),
        }
    }
}

/// How one route's agent is checked (`route::readiness` makes them).
pub trait AgentCheck: Send + Sync {
    /// Whether the agent can take calls now, each endpoint checked within `timeout`; the
    /// error says why not.
    fn check(&self, timeout: Duration) -> BoxFuture<'_, Result<(), String>>;
}

/// The readiness of every route, checked at most once per cache period.
pub struct Readiness {
    /// Which routes the gateway's readiness needs.
    mode: ReadinessMode,
    /// Each route's name and check; routes to the same agent share one (`route`), which
    /// runs once for all of them.
    routes: Vec<(String, Arc<dyn AgentCheck>)>,
    /// How long a finished check answers probes.
    cache: Duration,
    /// Bounds the check of one endpoint (connecting included).
    timeout: Duration,
    /// Where checks run: the runtime that built the routes.
    runtime: tokio::runtime::Handle,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The latest report and when it was made.
    last: Option<(Instant, Arc<Report>)>,
    /// The check under way, which every probe meanwhile waits for.
    running: Option<Shared<BoxFuture<'static, Arc<Report>>>>,
}

/// One check's outcome: each route and, when it is not ready, why (in route order).
#[derive(Debug)]
pub struct Report {
    pub routes: Vec<(String, Result<(), String>)>,
}

impl Readiness {
    /// Checks of `routes`, run on the current runtime, judged by `mode`.
    pub fn new(
        mode: ReadinessMode,
        routes: Vec<(String, Arc<dyn AgentCheck>)>,
        cache: Duration,
        timeout: Duration,
    ) -> Readiness {
        Readiness {
            mode,
            routes,
            cache,
            timeout,
            runtime: tokio::runtime::Handle::current(),
            state: Mutex::default(),
        }
    }

    /// Which routes the gateway's readiness needs.
    pub fn mode(&self) -> ReadinessMode {
        self.mode
    }

    /// The latest report if it is younger than the cache period, else the one of a check
    /// started now (or already under way).
    pub async fn report(self: &Arc<Self>) -> Arc<Report> {
        let running = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, report)) = &state.last {
                if at.elapsed() < self.cache {
                    return report.clone();
                }
            }
            match &state.running {
                Some(running) => running.clone(),
                None => {
                    let this = self.clone();
                    let task = self.runtime.spawn(async move { this.check().await });
                    let this = self.clone();
                    let running = task
                        .map(move |done| done.unwrap_or_else(|_| this.cut_short()))
                        .boxed()
                        .shared();
                    state.running = Some(running.clone());
                    running
                }
            }
        };
        running.await
    }

    /// The report of a check that ended without one (its runtime shut down, or it
    /// panicked); the next probe checks anew.
    fn cut_short(&self) -> Arc<Report> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).running = None;
        let why = || Err("the readiness check was cut short".to_owned());
        let routes = self
            .routes
            .iter()
            .map(|(name, _)| (name.clone(), why()))
            .collect();
        Arc::new(Report { routes })
    }

    /// Checks every route at once, each shared check once; records the report and logs
    /// each change of a route.
    async fn check(&self) -> Arc<Report> {
        let mut distinct: Vec<&Arc<dyn AgentCheck>> = Vec::new();
        let mut of_route = Vec::with_capacity(self.routes.len());
        // By address: a shared check is one allocation.
        let mut seen = std::collections::HashMap::new();
        for (_, check) in &self.routes {
            let at = *seen
                .entry(Arc::as_ptr(check).cast::<()>() as usize)
                .or_insert_with(|| {
                    distinct.push(check);
                    distinct.len() - 1
                });
            of_route.push(at);
        }
        let checks = distinct.iter().map(|check| check.check(self.timeout));
        let results = futures::future::join_all(checks).await;
        let report = Arc::new(Report {
            routes: (self.routes.iter().zip(of_route))
                .map(|((name, _), at)| (name.clone(), results[at].clone()))
                .collect(),
        });
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let before = state.last.as_ref().map(|(_, report)| report.clone());
        for (i, (route, result)) in report.routes.iter().enumerate() {
            let was = before.as_ref().map_or(&Ok(()), |b| &b.routes[i].1);
            log_change(route, was, result);
        }
        state.last = Some((Instant::now(), report.clone()));
        state.running = None;
        report
    }
}

/// Logs a route's change of readiness, with the reason on every change: public listeners'
/// `/readyz` says only ready or not (`routing::Surface`), so without an admin listener the
/// log is where an operator reads why. A route that stays not ready for another reason is
/// logged again.
fn log_change(route: &str, was: &Result<(), String>, now: &Result<(), String>) {
    match (was, now) {
        (Ok(()), Err(why)) => tracing::warn!(%route, %why, "route not ready"),
        (Err(was), Err(why)) if was != why => {
            tracing::warn!(%route, %why, %was, "route not ready")
        }
        (Err(was), Ok(())) => tracing::info!(%route, %was, "route ready again"),
        _ => {}
    }
}

//! Reload without restart. On SIGHUP, or when a file the configuration was read from
//! changes (`--watch-config`: the config file, keys, CA bundles, certificates, a card file;
//! polled, so a ConfigMap's symlink swap counts), the configuration is loaded and checked
//! in full and every route built; then every worker builds its frontend from it and all
//! swap together (`server::workers::Rebuilds`). A configuration that fails any of it is
//! refused with one log line and `a2a_gateway_config_reloads_total{outcome="refused"}`,
//! and the running one keeps serving. Calls and streams in flight finish on the routes
//! they started on (each holds its own); new requests, kept-alive connections' too, get the
//! new ones. Settings only taken at start (`settings::FixedAtStart`) are named and keep
//! their values.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use super::Routes;
use crate::server::workers::Rebuilds;
use crate::server::Served;
use crate::settings::{FixedAtStart, Settings};
use crate::telemetry::{Metrics, ReloadOutcome};
use crate::watched::{self, Fingerprint};

/// How often the watched files are read for a change. A mounted ConfigMap takes up to a
/// minute to change anyway; reading a few small files costs next to nothing.
const WATCH_POLL: Duration = Duration::from_secs(2);

/// What a reload needs to know about the running gateway.
pub struct Reloader {
    /// The command line, read again with the files it names.
    pub args: Vec<OsString>,
    /// The `--demo` agent's address.
    pub demo_backend: Option<String>,
    /// The routes serving now (the process flushes their push deliveries at its end).
    pub running: Arc<std::sync::Mutex<Arc<Routes>>>,
    /// The running values of the settings a reload cannot change.
    pub fixed: FixedAtStart,
    /// The gRPC listener's address: the cards of reloaded routes name its port, whatever
    /// `grpc-listen` the new file says (the socket stays).
    pub grpc_listen: Option<std::net::SocketAddr>,
    /// The files the running configuration was read from.
    pub files: Vec<PathBuf>,
    /// The workers, which swap to new routes together.
    pub rebuilds: Rebuilds,
    /// The admin listener's routes, when there is one.
    pub admin: Option<watch::Sender<Served>>,
    /// Where reloads are counted.
    pub metrics: Arc<Metrics>,
}

impl Reloader {
    /// Reloads on SIGHUP, and when `watch_files`, on a change of the files; runs until the
    /// process ends. SIGHUP is taken from here on (its default would end the process).
    pub async fn run(mut self, watch_files: bool) {
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(hangup) => Some(hangup),
            Err(e) => {
                tracing::warn!(error = %e, "cannot take SIGHUP: reloads only on file changes");
                None
            }
        };
        let mut seen = Fingerprint::of(&self.files);
        let mut poll = tokio::time::interval(WATCH_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let why = tokio::select! {
                Some(()) = async { hangup.as_mut()?.recv().await } => "SIGHUP",
                _ = poll.tick(), if watch_files => {
                    if Fingerprint::of(&self.files) == seen {
                        continue;
                    }
                    "a configuration file changed"
                }
            };
            seen = self.reload(why).await;
        }
    }

    /// One reload; returns the fingerprint of the files it read, as they were before it
    /// read them when they are the same files, so a change made while loading is seen.
    async fn reload(&mut self, why: &'static str) -> Fingerprint {
        let started = Instant::now();
        let before = Fingerprint::of(&self.files);
        let (args, demo) = (self.args.clone(), self.demo_backend.clone());
        // The push delivery counters go on from the running routes' (never back at a reload).
        let push_counters = self.running().push_counters();
        let grpc_listen = self.grpc_listen;
        // Loading reads files and may take seconds for thousands of routes: not on the
        // thread that accepts connections.
        let loaded = tokio::task::spawn_blocking(move || {
            let (settings, files) = watched::collect(|| Settings::load(args));
            let built = settings
                .map_err(|e| e.to_string())
                .and_then(|mut settings| {
                    settings.process.grpc_listen = grpc_listen;
                    let routes = Routes::reloaded(&settings, demo.as_deref(), &push_counters)
                        .map_err(|e| e.to_string())?;
                    Ok((settings, routes))
                });
            (built, files)
        })
        .await;
        let (built, files) = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                self.refused(why, &format!("loading stopped: {e}"));
                return before;
            }
        };
        let seen = match files == self.files {
            true => before,
            false => Fingerprint::of(&files),
        };
        self.files = files;
        let (settings, routes) = match built {
            Ok(built) => built,
            Err(e) => {
                self.refused(why, &e);
                return seen;
            }
        };
        let running = self.running();
        let routes = Arc::new(routes.succeeding(&running));
        routes.start_cards();
        routes.start_auth();
        if let Err(e) = self.rebuilds.swap(routes.clone()).await {
            self.refused(why, &e);
            return seen;
        }
        if let Some(admin) = &self.admin {
            match routes.admin_frontend(&self.metrics) {
                Ok(frontend) => {
                    admin.send_replace(Served::new(frontend));
                }
                Err(e) => tracing::warn!(error = %e, "the admin listener keeps its routes"),
            }
        }
        let fixed = self.fixed.changed_in(&settings.process.fixed);
        if !fixed.is_empty() {
            tracing::warn!(
                settings = ?fixed,
                "configuration reloaded without these settings: they take effect at a restart"
            );
        }
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = routes.clone();
        let (added, removed) = differences(&running, &routes);
        // What waits for webhooks goes on in the new deliverer; the replaced one finishes
        // what it is sending, takes no more, then goes (a shutdown meanwhile gives it the
        // new one's grace: `Deliverer::adopt`).
        routes.adopt_push(&running);
        tokio::spawn(running.retire_push());
        self.metrics.config_loaded(Some(ReloadOutcome::Applied));
        tracing::info!(
            %why,
            routes = routes.names().count(),
            ?added,
            ?removed,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "configuration reloaded"
        );
        seen
    }

    fn running(&self) -> Arc<Routes> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn refused(&self, why: &str, error: &str) {
        self.metrics.config_loaded(Some(ReloadOutcome::Refused));
        tracing::error!(
            %why,
            error,
            "configuration reload refused: the running configuration still serves"
        );
    }
}

/// The route names `new` has and `old` has not, and the other way round.
fn differences(old: &Routes, new: &Routes) -> (Vec<String>, Vec<String>) {
    let names = |routes: &Routes| -> std::collections::BTreeSet<String> {
        routes.names().map(str::to_owned).collect()
    };
    let (old, new) = (names(old), names(new));
    (
        new.difference(&old).cloned().collect(),
        old.difference(&new).cloned().collect(),
    )
}

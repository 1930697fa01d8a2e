//! The binary's serving threads. Each worker is one thread with a single-threaded tokio
//! runtime and its own backend client (its own HTTP/2 connection): a connection is handed
//! to one worker and every task of its calls (the HTTP/1.1 connection, the backend
//! connection) runs on that thread. On a shared multi-threaded runtime most calls woke a
//! task on the other thread at least once; those wake-ups were a large part of the
//! gateway's CPU per call (benches/README.md).
//!
//! One acceptor on the main runtime deals connections out round-robin, so keep-alive
//! clients spread evenly over the workers. What must be learnt once per backend (the
//! keepalive backoff) is shared through the one `route::Routes` every worker builds from.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::clients::ClientLimits;
use super::tls::ServerTls;
use super::{accept_failed, serve_connections, Frontend, Served};
use crate::telemetry::{access, Metrics};

/// Running workers, each fed connections by the acceptor.
pub struct Workers {
    inboxes: Vec<mpsc::UnboundedSender<std::net::TcpStream>>,
    finished: Vec<oneshot::Receiver<()>>,
    rebuilds: Rebuilds,
}

/// Asks every worker to serve a new set of routes (a reload).
#[derive(Clone)]
pub struct Rebuilds(Vec<mpsc::UnboundedSender<Rebuild>>);

/// One worker's part of a reload: build its frontend from `template`, say whether it
/// could, then swap it in when `commit` says so (every worker could).
struct Rebuild {
    template: Arc<dyn Frontends>,
    built: oneshot::Sender<Result<(), String>>,
    commit: oneshot::Receiver<()>,
}

impl Rebuilds {
    /// Has every worker build its frontend of `template`; only when all have, each swaps
    /// it in (for requests arriving from then on), so no worker serves other routes than
    /// the rest. Returns the first worker's error otherwise, and nothing changes.
    pub async fn swap(&self, template: Arc<dyn Frontends>) -> Result<(), String> {
        let mut commits = Vec::with_capacity(self.0.len());
        let mut built = Vec::with_capacity(self.0.len());
        for worker in &self.0 {
            let (built_tx, built_rx) = oneshot::channel();
            let (commit, commit_rx) = oneshot::channel();
            let rebuild = Rebuild {
                template: template.clone(),
                built: built_tx,
                commit: commit_rx,
            };
            worker
                .send(rebuild)
                .map_err(|_| "a worker has stopped".to_owned())?;
            commits.push(commit);
            built.push(built_rx);
        }
        for worker in built {
            worker
                .await
                .map_err(|_| "a worker has stopped".to_owned())??;
        }
        for commit in commits {
            let _ = commit.send(());
        }
        Ok(())
    }
}

/// What the workers serve: each builds a `Frontend` of its own on its runtime (`route`'s
/// `Routes`), behind the listener's TLS and client bounds.
pub trait Frontends: Send + Sync + 'static {
    /// One worker's routes, with backend clients of its own, sharing `metrics`.
    fn worker_frontend(&self, metrics: &Arc<Metrics>) -> Result<Frontend, String>;
    /// The listener's HTTPS, when configured.
    fn tls(&self) -> Option<&ServerTls>;
    /// What each client connection may hold, and for how long.
    fn client_limits(&self) -> ClientLimits;
}

impl Workers {
    /// Starts `count` workers serving the routes of `template`, with shared `metrics`,
    /// over its TLS when configured (whose certificate reloading starts here too); each
    /// drains for at most `grace` at shutdown. Returns once each has built its backend
    /// clients, or the first error (a configuration a client refuses).
    pub fn start(
        template: &Arc<impl Frontends>,
        metrics: &Arc<Metrics>,
        count: usize,
        grace: Duration,
    ) -> Result<Workers, String> {
        if let Some(tls) = template.tls() {
            tls.watch()
                .map_err(|e| format!("cannot start the TLS reload thread: {e}"))?;
            metrics.serving_certificate(Box::new(tls.not_after()));
        }
        let mut workers = Workers {
            inboxes: Vec::with_capacity(count),
            finished: Vec::with_capacity(count),
            rebuilds: Rebuilds(Vec::with_capacity(count)),
        };
        for index in 0..count.max(1) {
            let (inbox, connections) = mpsc::unbounded_channel();
            let (rebuild_tx, rebuilds) = mpsc::unbounded_channel();
            let (ready_tx, ready) = std::sync::mpsc::channel();
            let (finished_tx, finished) = oneshot::channel();
            let (template, metrics) = (template.clone(), metrics.clone());
            std::thread::Builder::new()
                .name(format!("a2a-worker-{index}"))
                .spawn(move || {
                    let channels = (connections, rebuilds);
                    run_worker(template, &metrics, channels, ready_tx, grace);
                    let _ = finished_tx.send(());
                })
                .map_err(|e| format!("cannot start a worker thread: {e}"))?;
            ready
                .recv()
                .map_err(|_| "a worker thread stopped while starting".to_owned())??;
            workers.inboxes.push(inbox);
            workers.finished.push(finished);
            workers.rebuilds.0.push(rebuild_tx);
        }
        Ok(workers)
    }

    /// What reloads the workers' routes while they serve.
    pub fn rebuilds(&self) -> Rebuilds {
        self.rebuilds.clone()
    }

    /// Accepts connections on `listener` (and `grpc`, `--grpc-listen`, served alike: by the
    /// same workers and their current routes, so a reload holds for both) and hands them
    /// out until `shutdown` resolves; then waits until every worker has drained its
    /// connections (bounded by the grace period), while this runtime keeps serving anything
    /// else it runs (the demo agent).
    pub async fn serve(
        self,
        listener: TcpListener,
        grpc: Option<TcpListener>,
        shutdown: impl Future<Output = ()>,
    ) {
        let Workers {
            inboxes, finished, ..
        } = self;
        let mut shutdown = std::pin::pin!(shutdown);
        let mut next = 0usize;
        let grpc_accept = || async {
            match &grpc {
                Some(grpc) => grpc.accept().await,
                None => std::future::pending().await,
            }
        };
        loop {
            let stream = tokio::select! {
                accepted = grpc_accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        accept_failed(&e).await;
                        continue;
                    }
                },
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        accept_failed(&e).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            // A stream leaves this runtime's reactor and joins the worker's.
            let Ok(stream) = stream.into_std() else {
                continue;
            };
            let mut stream = Some(stream);
            for _ in 0..inboxes.len() {
                next = (next + 1) % inboxes.len();
                match stream.take().map(|s| inboxes[next].send(s)) {
                    Some(Err(mpsc::error::SendError(back))) => stream = Some(back),
                    _ => break,
                }
            }
            if stream.is_some() {
                tracing::error!("no worker is running; connection closed");
            }
        }
        drop(listener);
        drop(grpc);
        drop(inboxes);
        for worker in finished {
            let _ = worker.await;
        }
    }
}

/// One worker thread's life: its runtime, its gateway (reported through `ready`), then
/// the connections it is handed until the acceptor stops.
fn run_worker(
    template: Arc<impl Frontends>,
    metrics: &Arc<Metrics>,
    (connections, rebuilds): (
        mpsc::UnboundedReceiver<std::net::TcpStream>,
        mpsc::UnboundedReceiver<Rebuild>,
    ),
    ready: std::sync::mpsc::Sender<Result<(), String>>,
    grace: Duration,
) {
    // Access lines are written when the thread is about to wait for work, after the
    // replies went out: their formatting costs no call latency.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(access::write_deferred)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot start a worker runtime: {e}")));
            return;
        }
    };
    access::defer_lines();
    runtime.block_on(async {
        // Built on this runtime, so the backend clients' tasks run here too.
        let frontend = match template.worker_frontend(metrics) {
            Ok(frontend) => frontend,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        metrics.count_tasks_of(tokio::runtime::Handle::current());
        let _ = ready.send(Ok(()));
        let (tls, limits) = (template.tls().cloned(), template.client_limits());
        // Not kept: after a reload, the first routes (their cards, their key refreshes)
        // must be freed.
        drop(template);
        let (swap, served) = watch::channel(Served::new(frontend));
        let rebuilding = tokio::spawn(rebuild(rebuilds, metrics.clone(), swap));
        let incoming = UnboundedReceiverStream::new(connections).map(TcpStream::from_std);
        serve_connections(incoming, served, grace, tls, limits).await;
        rebuilding.abort();
    });
    // Whatever still runs (the idle backend connection) is dropped, not awaited.
    runtime.shutdown_timeout(Duration::from_millis(100));
    // Before the worker is reported finished: the process writes the log out after that.
    access::stop_deferring();
}

/// A worker's reloads: each frontend built on this thread's runtime (its backend clients
/// run here), swapped in once every worker has built its own.
async fn rebuild(
    mut rebuilds: mpsc::UnboundedReceiver<Rebuild>,
    metrics: Arc<Metrics>,
    swap: watch::Sender<Served>,
) {
    while let Some(rebuild) = rebuilds.recv().await {
        match rebuild.template.worker_frontend(&metrics) {
            Ok(frontend) => {
                let _ = rebuild.built.send(Ok(()));
                if rebuild.commit.await.is_ok() {
                    swap.send_replace(Served::new(frontend));
                }
            }
            Err(e) => {
                let _ = rebuild.built.send(Err(e));
            }
        }
    }
}

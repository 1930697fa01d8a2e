//! HTTP serving: the router (JSON-RPC endpoint, health), listeners with TCP_NODELAY,
//! and graceful shutdown with a bounded grace period.

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::Router;
use http::header::CONTENT_TYPE;
use tokio::net::TcpListener;

use crate::backend::{grpc::GrpcBackend, rest::RestBackend, Backend};
use crate::config::{optional, Binding, Cli, ConfigError};
use crate::front::{jsonrpc, Gateway};

/// The gateway's routes. Other methods on the JSON-RPC path get 405 with `Allow: POST`.
pub fn router(gateway: Arc<Gateway>, jsonrpc_path: &str) -> Router {
    Router::new()
        .route(jsonrpc_path, post(jsonrpc::handle))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(|| async { "ready\n" }))
        .route("/metrics", get(metrics))
        .with_state(gateway)
}

/// Prometheus scrape endpoint.
async fn metrics(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        gateway.metrics.render(),
    )
}

/// A backend could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Grpc(#[from] crate::backend::grpc::GrpcConfigError),
    #[error(transparent)]
    Rest(#[from] crate::backend::rest::RestConfigError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The shared state for a validated configuration and a backend URL.
pub fn gateway(cli: &Cli, backend_url: &str) -> Result<Arc<Gateway>, BackendError> {
    let forward = cli.validate()?;
    let ca = match &cli.backend_ca {
        Some(path) => Some(read_ca(path)?),
        None => None,
    };
    let ca = ca.as_deref();
    let backend: Arc<dyn Backend> = match cli.binding {
        Binding::Grpc => Arc::new(GrpcBackend::new(backend_url, cli.connect_timeout, ca)?),
        Binding::HttpJson => Arc::new(RestBackend::new(backend_url, cli.connect_timeout, ca)?),
    };
    Ok(Arc::new(Gateway {
        backend,
        forward,
        unary_timeout: optional(cli.timeout),
        stream_timeout: optional(cli.stream_timeout),
        keepalive: cli.keepalive,
        max_body: cli.max_body,
        metrics: Arc::default(),
    }))
}

/// Reads a PEM bundle and checks it holds at least one certificate, so a bad file is a
/// startup error rather than a failure of every call.
fn read_ca(path: &std::path::Path) -> Result<Vec<u8>, ConfigError> {
    let fail = |why: String| ConfigError::BackendCa(path.to_owned(), why);
    let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certificates) if !certificates.is_empty() => Ok(pem),
        Ok(_) => Err(fail("no PEM certificate in the file".into())),
        Err(e) => Err(fail(e.to_string())),
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets in-flight requests
/// finish for at most `grace` (open streams would otherwise hold the process forever).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let listener = listener.tap_io(|tcp| {
        // Small JSON replies and SSE frames must not wait for Nagle's algorithm.
        let _ = tcp.set_nodelay(true);
    });
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        let _ = stop_rx.await;
    });
    let mut server = std::pin::pin!(server.into_future());
    tokio::select! {
        result = &mut server => return result,
        () = shutdown => {}
    }
    tracing::info!(?grace, "shutting down: draining in-flight requests");
    let _ = stop_tx.send(());
    match tokio::time::timeout(grace, server).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!("grace period over; closing remaining connections");
            Ok(())
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

//! `grpc.health.v1.Health` for the gRPC front, answered by the gateway itself: the server
//! (`""`) and `lf.a2a.v1.A2AService` are SERVING until the gateway drains, then
//! NOT_SERVING, as `/readyz` says (with its default `process` mode); any other service is
//! NOT_FOUND. The agents' own health is `/readyz`'s business (`--readiness`). `Watch`
//! sends the status, and NOT_SERVING when the gateway closes its streams; at most
//! `MAX_WATCHES` are open at once in the process (each holds a stream for as long as its
//! client likes), past which `Watch` is RESOURCE_EXHAUSTED.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::lifecycle::Lifecycle;

/// The `Watch` streams open at once, across the process.
const MAX_WATCHES: usize = 1024;
static WATCHES: AtomicUsize = AtomicUsize::new(0);

/// One open `Watch`, counted until its stream is dropped.
struct Watching;

impl Watching {
    fn start() -> Option<Watching> {
        let taken = WATCHES.fetch_update(Relaxed, Relaxed, |open| {
            (open < MAX_WATCHES).then_some(open + 1)
        });
        taken.ok().map(|_| Watching)
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        WATCHES.fetch_sub(1, Relaxed);
    }
}

/// The path prefix of the health service's methods.
pub(crate) const HEALTH_PATH: &str = "/grpc.health.v1.Health/";

/// The health service of a gateway whose life is `lifecycle`.
pub(crate) fn service(lifecycle: Arc<Lifecycle>) -> HealthServer<GatewayHealth> {
    HealthServer::new(GatewayHealth { lifecycle })
}

/// The gateway's health, read from its life.
pub(crate) struct GatewayHealth {
    lifecycle: Arc<Lifecycle>,
}

impl GatewayHealth {
    /// The status of `service`; `None` for a service the gateway does not serve.
    fn status(&self, service: &str) -> Option<ServingStatus> {
        if !matches!(service, "" | "lf.a2a.v1.A2AService") {
            return None;
        }
        Some(match self.lifecycle.is_ready() {
            true => ServingStatus::Serving,
            false => ServingStatus::NotServing,
        })
    }
}

fn response(status: ServingStatus) -> HealthCheckResponse {
    HealthCheckResponse {
        status: status as i32,
    }
}

#[tonic::async_trait]
impl Health for GatewayHealth {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        match self.status(&request.get_ref().service) {
            Some(status) => Ok(Response::new(response(status))),
            None => Err(Status::not_found("the gateway serves no such service")),
        }
    }

    type WatchStream = BoxStream<'static, Result<HealthCheckResponse, Status>>;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let now = self
            .status(&request.get_ref().service)
            .unwrap_or(ServingStatus::ServiceUnknown);
        let Some(watching) = Watching::start() else {
            let why = format!("{MAX_WATCHES} health watches are open: use Check");
            return Err(Status::resource_exhausted(why));
        };
        let closing = self.lifecycle.closing();
        let closed = futures::stream::once(async move {
            closing.await;
            drop(watching);
            Ok(response(ServingStatus::NotServing))
        });
        let events = futures::stream::once(async move { Ok(response(now)) }).chain(closed);
        Ok(Response::new(events.boxed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MAX_WATCHES` watches are served at once; one more is refused until one ends.
    #[tokio::test]
    async fn watches_are_bounded() {
        let health = GatewayHealth {
            lifecycle: Arc::default(),
        };
        let watch = || health.watch(Request::new(HealthCheckRequest::default()));
        let mut open = Vec::new();
        for _ in 0..MAX_WATCHES {
            open.push(watch().await.unwrap());
        }
        let refused = watch().await.err().unwrap();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        open.pop();
        let again = watch().await.unwrap();
        drop(again);
        drop(open);
        assert!(watch().await.is_ok());
    }
}

//! A one-backend route's call latency (`a2a_gateway_backend_call_duration_seconds`): its
//! backend wrapped so that each call is timed, a unary call to its answer, a stream to its
//! start, calls given up (dropped) included. Balanced routes time each endpoint's attempts
//! instead (`endpoints::balance`).

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::backend::{Answer, Backend, Call, Error, EventStream};
use crate::protocol::ops::{Reply, StreamRequest, UnaryRequest};
use crate::telemetry::BackendLatency;

/// `inner`, its calls timed into `latency` (shared by every worker's client).
pub struct Timed {
    pub inner: Arc<dyn Backend>,
    pub latency: Arc<BackendLatency>,
}

/// Records the time since `started` when dropped: when the call answered or was given up.
struct Timer {
    latency: Arc<BackendLatency>,
    started: Instant,
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.latency.observe(self.started.elapsed());
    }
}

impl Timed {
    fn timer(&self) -> Timer {
        Timer {
            latency: self.latency.clone(),
            started: Instant::now(),
        }
    }
}

impl Backend for Timed {
    fn unary(&self, call: Call<UnaryRequest>) -> BoxFuture<'static, Result<Answer<Reply>, Error>> {
        let (timer, answer) = (self.timer(), self.inner.unary(call));
        async move {
            let _timer = timer;
            answer.await
        }
        .boxed()
    }

    fn stream(
        &self,
        call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>> {
        let (timer, started) = (self.timer(), self.inner.stream(call));
        async move {
            let _timer = timer;
            started.await
        }
        .boxed()
    }

    fn width(&self, request: &UnaryRequest) -> usize {
        self.inner.width(request)
    }
}

//! What the gateway talks to: a backend takes one typed request and answers with a typed
//! unary `Reply` or a stream of `StreamResponse` and the status it came with, or an
//! `Error`: the agent's (mapped through the error table, with its status) or a typed
//! `fault::Fault` of the gateway's own path. The front alone makes JSON of it.
//! Implementations: `grpc` (on h2) and `rest` (HTTP+JSON); `endpoints` spreads a route's
//! calls over many of them (pods behind a DNS name, or a list of URLs); `affinity` sends
//! each task-scoped call to the endpoint that holds the task.

pub mod affinity;
pub mod endpoints;
pub(crate) mod error;
pub(crate) mod fault;
pub mod grpc;
pub(crate) mod observed;
pub mod rest;
pub(crate) mod timed;

use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use tokio::time::Instant;

pub use self::error::{Error, Status};
use crate::proto::StreamResponse;
use crate::protocol::ops::{Reply, StreamRequest, UnaryRequest};
use crate::telemetry::trace::TraceContext;

/// One backend call: the typed request plus what travels beside it. Cloned only to send a
/// call that never reached the agent to another endpoint (`endpoints::balance`).
#[derive(Clone, Debug)]
pub struct Call<R> {
    /// The typed A2A request (`UnaryRequest` or `StreamRequest`).
    pub request: R,
    /// Request headers selected by the forward policy (lowercase names).
    pub forwarded: Vec<(HeaderName, HeaderValue)>,
    /// When the front drops the call (it enforces this); the backend is told the time left
    /// (`timeout`, sent as `grpc-timeout`). One instant for the whole call, so whatever the
    /// backend measures (time left, whether a dropped call was late) agrees with the front.
    pub deadline: Option<Instant>,
    /// The trace context the call continues (`None` with traces off): the backend starts
    /// its client span under it and writes the span's as `traceparent` in the outgoing head.
    pub trace: Option<Box<TraceContext>>,
}

impl<R> Call<R> {
    /// The time left until the deadline, for the backend (`None`: no deadline).
    pub fn timeout(&self) -> Option<Duration> {
        self.deadline
            .map(|at| at.saturating_duration_since(Instant::now()))
    }
}

/// A successful backend answer, the status it came with and the extensions the backend
/// reports as activated.
pub struct Answer<T> {
    /// The reply, or the stream of events.
    pub value: T,
    /// The backend's status (OK, or the HTTP+JSON binding's 2xx), for the access log;
    /// `None` for an answer the gateway made alone (a listing no endpoint had more of).
    pub status: Option<Status>,
    /// The backend's `A2A-Extensions` response parameter, passed on to the client.
    pub extensions: Option<HeaderValue>,
}

/// Events of a streaming operation, in backend order; an `Err` ends the stream.
pub type EventStream = BoxStream<'static, Result<StreamResponse, Error>>;

/// A backend binding.
pub trait Backend: Send + Sync + 'static {
    /// Performs a unary operation.
    fn unary(&self, call: Call<UnaryRequest>) -> BoxFuture<'static, Result<Answer<Reply>, Error>>;
    /// Starts a streaming operation; dropping the stream cancels the backend call.
    fn stream(
        &self,
        call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>>;
    /// How many backend calls `request` makes at once, as the concurrency limits charge
    /// it (`front::limits`): one, but a call asked of every endpoint counts each.
    fn width(&self, _request: &UnaryRequest) -> usize {
        1
    }
}

//! The call as a stack: what happens to one JSON-RPC call once the envelope named its
//! method, one concern per layer and file, assembled in `stack` with why each sits where
//! it does. Authentication and authorization join there as two more layers; each layer
//! sees the request head (`Exchange::head`).
//!
//! The layers are plain generic wrappers, not tower `Service`s: a `Service` must name its
//! future (boxed, or a hand-written future per layer), while an `async fn` per layer nests
//! the layers' states into one future, boxed once as the handler's. Each layer is a
//! zero-sized type and takes the call by `&mut`, and the typed request (about 500 bytes)
//! travels boxed, so a layer adds a few words to that future, not a copy of the request
//! (bytes per call, tests/it/cost_budget.rs).
//!
//! A stream's events pass through the layers as a generic stream (`Layer::Events`): the
//! deadline and the permit wrap it without another box, and the SSE body frames it.

pub mod admit;
pub mod authenticate;
pub mod authorize;
pub mod deadline;
pub mod decode;
pub mod invoke;
pub mod observe;
pub mod owner;
pub mod push;
pub mod tenant;

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::Stream;
use http::HeaderValue;

use crate::front::dialect::Dialect;
use crate::front::limits::{Refusal, RouteLimits};
use crate::front::Gateway;
use crate::proto::StreamResponse;
use crate::protocol::error::A2aError;
use crate::protocol::ops::Op;
use crate::telemetry::access::CallRecord;

/// The layers of a call, outermost first.
pub fn stack() -> impl for<'p> Layer<Option<crate::front::envelope::Params<'p>>> {
    // Outermost: every outcome below, refusals included, is counted, logged and traced.
    observe::Observe(
        // Before any params are decoded: an unauthenticated caller costs the head's check.
        authenticate::Authenticate(
            // The dialect reads params into the typed request every layer below works on.
            decode::Decode(
                // Before the other checks: a request for another tenant goes no further.
                tenant::Tenant(
                    // Once the caller and the tenant are known: the rules may name either;
                    // a refused call costs no permit.
                    authorize::Authorize(
                        // Once the caller is known and allowed: another caller's task
                        // looks unknown.
                        owner::Owner(
                            // The last check, and the only slow one (it may ask DNS): a
                            // refused push URL never reaches the agent, and costs no permit;
                            // a relaying route seals the config once nothing else refuses it.
                            push::PushCheck(
                                // Only checked requests take a share of the limits.
                                admit::Admit(
                                    // Inside admission: a call's time is the agent's, not
                                    // the queue's.
                                    deadline::Deadline(invoke::Invoke),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
}

/// The front a call came through: how `invoke` writes its unary reply, and whether a call
/// without a JSON-RPC id is answered at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// JSON-RPC or HTTP+JSON: a reply in the call's dialect (`Dialect::Rest` for
    /// HTTP+JSON); a JSON-RPC call without an id is a notification, answered by nothing.
    Json,
    /// gRPC: the reply's protobuf message; every call is answered.
    Grpc,
}

/// One call as the layers see it.
pub struct Exchange<'a> {
    pub gateway: &'a Gateway,
    /// The HTTP request's head (headers, URI, the client's address).
    pub head: &'a http::request::Parts,
    /// The route's limits (`None`: none configured).
    pub limits: Option<&'a Arc<RouteLimits>>,
    /// The front the call came through.
    pub wire: Wire,
    /// The JSON-RPC id, as sent (`None`: a notification, or not a JSON-RPC call).
    pub id: Option<Cow<'a, str>>,
    pub op: Op,
    pub dialect: Dialect,
    /// Whether the call is a batch member (a stream cannot be one).
    pub in_batch: bool,
    /// When the call's handling began.
    pub started: Instant,
    /// The deadline the agent is given (`deadline` sets it).
    pub deadline: Option<tokio::time::Instant>,
    /// Who calls, once authentication found out (`None`: the route authenticates nobody).
    pub principal: Option<crate::auth::Principal>,
    /// The caller's owner tags on a `task-owner` route (`owner` sets them, `invoke` seals
    /// the replies with them). Boxed: most routes have none, and every call carries this.
    pub owner: Option<Box<crate::auth::owner::Caller>>,
    /// The call's access log line and server span.
    pub record: CallRecord,
}

impl Exchange<'_> {
    /// The front the call came through.
    pub fn binding(&self) -> crate::protocol::binding::Binding {
        match self.wire {
            Wire::Grpc => crate::protocol::binding::Binding::Grpc,
            Wire::Json => self.dialect.binding(),
        }
    }

    /// Whether the client waits for an answer: every gRPC call, a JSON-RPC call with an id.
    pub fn answered(&self) -> bool {
        self.id.is_some() || self.wire != Wire::Json
    }
}

/// A layer: handles the call with `input`, usually by calling the layer inside it.
pub trait Layer<In> {
    /// A streaming call's events.
    type Events: Stream<Item = Result<StreamResponse, A2aError>> + Send + Unpin + 'static;

    fn call(
        &self,
        exchange: &mut Exchange<'_>,
        input: In,
    ) -> impl Future<Output = Result<Answer<Self::Events>, A2aError>> + Send;
}

/// What the stack made of a call, short of a plain error.
pub enum Answer<S> {
    /// The response object of a unary call (empty for a notification), with the
    /// backend's activated extensions.
    Json(Vec<u8>, Option<HeaderValue>),
    /// A stream whose first event arrived.
    Stream(Started<S>),
    /// A stream that failed before its first event, with the backend's extensions (a v0.3
    /// client reads it as a one-event stream).
    Unstarted(A2aError, Option<HeaderValue>),
    /// A limit or the route's `allow` rules refused the call.
    Refused(Box<Refusal>),
    /// A streaming notification: not started, since nobody would read it.
    Skipped,
}

/// A started stream: its first event and the rest.
pub struct Started<S> {
    /// Boxed: the answer passes every layer, and most answers are not streams.
    pub first: Box<StreamResponse>,
    pub events: S,
    pub extensions: Option<HeaderValue>,
}

impl<S> Answer<S> {
    /// The same answer with `f` applied to a stream's events.
    pub fn map_events<T>(self, f: impl FnOnce(S) -> T) -> Answer<T> {
        match self {
            Answer::Json(out, extensions) => Answer::Json(out, extensions),
            Answer::Stream(started) => Answer::Stream(Started {
                first: started.first,
                events: f(started.events),
                extensions: started.extensions,
            }),
            Answer::Unstarted(err, extensions) => Answer::Unstarted(err, extensions),
            Answer::Refused(refusal) => Answer::Refused(refusal),
            Answer::Skipped => Answer::Skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stack costs its call's future nothing of its own: each layer is zero-sized,
    /// so adding one adds only its state while the call is in it.
    #[test]
    fn the_layers_are_zero_sized() {
        assert_eq!(std::mem::size_of_val(&stack()), 0);
    }
}

//! Admit: the route's and the gateway's limits (`front/limits.rs`). A unary call holds its
//! permit until answered, a stream until its body ends (`Held`). A stream is not admitted
//! in a batch, and a streaming notification is not started at all.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};

use crate::front::call::{Answer, Exchange, Layer};
use crate::front::limits::{CallKind, ClientKey, Permit};
use crate::protocol::error::A2aError;
use crate::protocol::ops::Request;
use crate::telemetry::ConnectionAddrs;

/// Admits the call under the limits before the layer inside.
pub struct Admit<L>(pub L);

impl<L: Layer<Box<Request>> + Sync> Layer<Box<Request>> for Admit<L> {
    type Events = Held<L::Events>;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        request: Box<Request>,
    ) -> Result<Answer<Self::Events>, A2aError> {
        let (kind, width) = match &*request {
            Request::Stream(_) if x.in_batch => {
                let why = format!("{} streams and cannot be part of a batch", x.op.name());
                return Err(A2aError::invalid_request(&why));
            }
            Request::Stream(_) if !x.answered() => return Ok(Answer::Skipped),
            Request::Stream(_) => (CallKind::Stream, 1),
            Request::Unary(request) => (CallKind::Unary, x.gateway.backend.width(request)),
        };
        // The client, for per-client limits: its principal, or its address.
        let who = || {
            let peer = x
                .head
                .extensions
                .get::<ConnectionAddrs>()
                .map(|a| a.client.ip());
            ClientKey::of(x.principal.as_ref(), peer)
        };
        let permit = match x.limits.map(|l| l.admit(kind, width, who)).transpose() {
            Ok(permit) => permit,
            Err(refusal) => return Ok(Answer::Refused(Box::new(refusal))),
        };
        let answer = self.0.call(x, request).await?;
        Ok(answer.map_events(|events| Held {
            events,
            _permit: permit,
        }))
    }
}

/// A stream's events, holding its place under the limits until dropped.
pub struct Held<S> {
    events: S,
    _permit: Option<Permit>,
}

impl<S: Stream + Unpin> Stream for Held<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.events.poll_next_unpin(cx)
    }
}

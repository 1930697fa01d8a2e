//! The SSE body of a streaming call: one SSE event per backend event, its `data:` a whole
//! JSON-RPC response carrying the request id (spec 9.4.2) in the call's dialect, plus
//! keepalive comments while idle. It only frames: the stream's bounds (deadline, idle,
//! shutdown) and its permit are wrappers of the events (`call/deadline.rs`,
//! `call/admit.rs`), its access line and metrics an observer (`call/observe.rs`).
//!
//! Events that are already waiting leave in one chunk (one write), while a lone event is
//! never held back. An error ends the stream with one error event (`Dialect`).
//! ("Frame" is kept for HTTP/2 frames; an SSE event is an event.)

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::time::{sleep, Instant, Sleep};

use crate::front::dialect::Dialect;
use crate::proto::StreamResponse;
use crate::protocol::error::A2aError;

/// Past this many buffered bytes a chunk is sent even if more events are ready.
const MAX_CHUNK: usize = 64 * 1024;
const KEEPALIVE_COMMENT: &[u8] = b": keepalive\n\n";

/// What a body tells about the stream it frames.
pub trait Watch {
    /// An event was written.
    fn event(&mut self, event: &StreamResponse);
    /// The final error event was written.
    fn error(&mut self, err: &A2aError);
    /// The events ended without an error.
    fn ended(&mut self);
    /// A chunk of `bytes` holding `events` SSE events (0: a keepalive comment) was sent.
    fn sent(&mut self, bytes: usize, events: u64);
}

/// The SSE body of one streaming call: `first` (already received), then `events`, in
/// `dialect`, told to `watch`.
pub struct SseBody<S, W> {
    id: Box<str>,
    dialect: Dialect,
    first: Option<Box<StreamResponse>>,
    events: S,
    keepalive: Pin<Box<Sleep>>,
    period: Duration,
    done: bool,
    watch: W,
}

impl<S, W> SseBody<S, W>
where
    S: Stream<Item = Result<StreamResponse, A2aError>> + Unpin,
    W: Watch,
{
    /// A body with a keepalive comment after each `keepalive` without an event.
    pub fn new(
        (id, dialect): (Box<str>, Dialect),
        first: Option<Box<StreamResponse>>,
        events: S,
        keepalive: Duration,
        watch: W,
    ) -> Self {
        Self {
            id,
            dialect,
            first,
            events,
            keepalive: Box::pin(sleep(keepalive)),
            period: keepalive,
            done: false,
            watch,
        }
    }

    /// Appends `event`, or (it cannot be written) the error that ends the stream.
    fn push_event(&mut self, buf: &mut Vec<u8>, event: &StreamResponse) {
        match self.dialect.write_event(buf, &self.id, event) {
            Ok(()) => self.watch.event(event),
            Err(err) => self.push_error(buf, &err),
        }
    }

    /// Appends the error event that ends the stream.
    fn push_error(&mut self, buf: &mut Vec<u8>, err: &A2aError) {
        self.watch.error(err);
        self.dialect.write_error_event(buf, &self.id, err);
        self.done = true;
    }
}

impl<S, W> Stream for SseBody<S, W>
where
    S: Stream<Item = Result<StreamResponse, A2aError>> + Unpin,
    W: Watch + Unpin,
{
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut buf = Vec::new();
        let mut written = 0;
        if let Some(first) = this.first.take() {
            this.push_event(&mut buf, &first);
            written += 1;
        }
        while !this.done && buf.len() < MAX_CHUNK {
            match this.events.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(event))) => this.push_event(&mut buf, &event),
                Poll::Ready(Some(Err(err))) => this.push_error(&mut buf, &err),
                Poll::Ready(None) => {
                    this.watch.ended();
                    this.done = true;
                    break;
                }
                Poll::Pending => break,
            }
            written += 1;
        }
        if !buf.is_empty() {
            this.watch.sent(buf.len(), written);
            this.keepalive.as_mut().reset(Instant::now() + this.period);
            return Poll::Ready(Some(Ok(Bytes::from(buf))));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if this.keepalive.as_mut().poll(cx).is_ready() {
            this.keepalive.as_mut().reset(Instant::now() + this.period);
            this.watch.sent(KEEPALIVE_COMMENT.len(), 0);
            return Poll::Ready(Some(Ok(Bytes::from_static(KEEPALIVE_COMMENT))));
        }
        Poll::Pending
    }
}

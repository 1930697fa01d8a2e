//! A backend event stream → SSE frames, each `data:` a whole JSON-RPC response carrying
//! the request id (spec 9.4.2), plus keepalive comments while idle.
//!
//! Frames that are already waiting leave in one chunk (one write), while a lone frame is
//! never held back. An error ends the stream with one `event: error` frame (as the
//! reference SDK frames it); so does the stream deadline, when one is configured.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::value::RawValue;
use tokio::time::{sleep, Instant, Sleep};

use crate::backend::fault::Fault;
use crate::backend::EventStream;
use crate::front::jsonrpc::{write_error, write_response};
use crate::proto::StreamResponse;
use crate::protocol::error::A2aError;
use crate::telemetry::StreamGuard;

/// Past this many buffered bytes a chunk is sent even if more frames are ready.
const MAX_CHUNK: usize = 64 * 1024;
const KEEPALIVE_FRAME: &[u8] = b": keepalive\n\n";

/// The SSE body of one streaming call.
pub struct SseFrames {
    id: Box<RawValue>,
    first: Option<StreamResponse>,
    events: EventStream,
    keepalive: Pin<Box<Sleep>>,
    period: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    done: bool,
    /// Counts the stream as open until dropped, and its frames.
    meter: StreamGuard,
}

impl SseFrames {
    /// Frames for `first` (already received) and the rest of `events`.
    pub fn new(
        id: Box<RawValue>,
        first: Option<StreamResponse>,
        events: EventStream,
        keepalive: Duration,
        deadline: Option<Duration>,
        meter: StreamGuard,
    ) -> Self {
        Self {
            id,
            first,
            events,
            keepalive: Box::pin(sleep(keepalive)),
            period: keepalive,
            deadline: deadline.map(|d| Box::pin(sleep(d))),
            done: false,
            meter,
        }
    }

    fn push_event(&self, buf: &mut Vec<u8>, event: &StreamResponse) -> bool {
        buf.extend_from_slice(b"data: ");
        let start = buf.len();
        match write_response(buf, Some(&self.id), |out| {
            crate::protocol::json::write_json(out, event)
        }) {
            Ok(()) => {
                buf.extend_from_slice(b"\n\n");
                true
            }
            Err(e) => {
                buf.truncate(start - b"data: ".len());
                let err =
                    Fault::BadResponse(format!("an event cannot be encoded as JSON: {e}")).into();
                self.push_error(buf, &err);
                false
            }
        }
    }

    fn push_error(&self, buf: &mut Vec<u8>, err: &A2aError) {
        buf.extend_from_slice(b"event: error\ndata: ");
        write_error(buf, Some(&self.id), err);
        buf.extend_from_slice(b"\n\n");
    }
}

impl Stream for SseFrames {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut buf = Vec::new();
        let mut frames = 0;
        if let Some(first) = this.first.take() {
            this.done |= !this.push_event(&mut buf, &first);
            frames += 1;
        }
        while !this.done && buf.len() < MAX_CHUNK {
            match this.events.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(event))) => {
                    this.done |= !this.push_event(&mut buf, &event);
                    frames += 1;
                }
                Poll::Ready(Some(Err(err))) => {
                    this.push_error(&mut buf, &err);
                    this.done = true;
                    frames += 1;
                }
                Poll::Ready(None) => this.done = true,
                Poll::Pending => break,
            }
        }
        if !this.done {
            if let Some(deadline) = this.deadline.as_mut() {
                if deadline.as_mut().poll(cx).is_ready() {
                    let err = Fault::Deadline("the stream's deadline passed".into()).into();
                    this.push_error(&mut buf, &err);
                    this.done = true;
                    frames += 1;
                }
            }
        }
        if !buf.is_empty() {
            this.meter.frames(frames);
            this.keepalive.as_mut().reset(Instant::now() + this.period);
            return Poll::Ready(Some(Ok(Bytes::from(buf))));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if this.keepalive.as_mut().poll(cx).is_ready() {
            this.keepalive.as_mut().reset(Instant::now() + this.period);
            return Poll::Ready(Some(Ok(Bytes::from_static(KEEPALIVE_FRAME))));
        }
        Poll::Pending
    }
}

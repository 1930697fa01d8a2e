//! A backend event stream → the SSE body: one SSE event per backend event, its `data:` a
//! whole JSON-RPC response carrying the request id (spec 9.4.2), plus keepalive comments
//! while idle.
//!
//! Events that are already waiting leave in one chunk (one write), while a lone event is
//! never held back. An error ends the stream with one `event: error` event (as the
//! reference SDK writes it); so do the stream deadline, when one is configured, and the
//! gateway's shutdown once its grace period is over (`lifecycle`).
//! ("Frame" is kept for HTTP/2 frames; an SSE event is an event.)

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::time::{sleep, Instant, Sleep};
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::backend::fault::Fault;
use crate::backend::EventStream;
use crate::front::envelope::{write_error_in, write_response};
use crate::front::limits::Permit;
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, GatewayFault};
use crate::protocol::legacy::Method;
use crate::telemetry::access::CallRecord;
use crate::telemetry::StreamGuard;

/// Past this many buffered bytes a chunk is sent even if more events are ready.
const MAX_CHUNK: usize = 64 * 1024;
const KEEPALIVE_COMMENT: &[u8] = b": keepalive\n\n";

/// The SSE body of one streaming call.
pub struct SseBody {
    id: Box<str>,
    first: Option<StreamResponse>,
    events: EventStream,
    keepalive: Pin<Box<Sleep>>,
    period: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    /// Resolves when the gateway shuts down with this stream still open.
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
    done: bool,
    /// Counts the stream as open until dropped, and its events.
    meter: StreamGuard,
    /// Holds the stream's place under its route's concurrency limits until dropped.
    _permit: Option<Permit>,
    /// The stream idle timeout (`front::limits`) and when it passes without an event.
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
    /// The call's access log line and server span, finished when the body is dropped.
    record: Option<CallRecord>,
    /// A v0.3 call's method: events and errors are written in v0.3 (`in_v03`).
    v03: Option<Method>,
}

impl SseBody {
    /// The body for `first` (already received) and the rest of `events`.
    pub fn new(
        id: Box<str>,
        first: Option<StreamResponse>,
        events: EventStream,
        keepalive: Duration,
        deadline: Option<Duration>,
        closing: WaitForCancellationFutureOwned,
        meter: StreamGuard,
    ) -> Self {
        Self {
            id,
            first,
            events,
            keepalive: Box::pin(sleep(keepalive)),
            period: keepalive,
            deadline: deadline.map(|d| Box::pin(sleep(d))),
            closing: Box::pin(closing),
            done: false,
            meter,
            _permit: None,
            idle: None,
            record: None,
            v03: None,
        }
    }

    /// Holds `permit` while the stream is open, and ends the stream with a final error
    /// event once the backend sends no event for `idle`.
    pub fn limited(mut self, permit: Option<Permit>, idle: Option<Duration>) -> Self {
        self._permit = permit;
        self.idle = idle.map(|d| (d, Box::pin(sleep(d))));
        self
    }

    /// Hands the call's record to the body: its events are counted, and the line written
    /// and the span ended when the stream ends.
    pub fn record(&mut self, record: CallRecord) {
        self.record = Some(record);
    }

    /// Records a sent event, or the error that replaced it.
    fn observe(&mut self, event: Result<&StreamResponse, &A2aError>) {
        if let Some(record) = &mut self.record {
            match event {
                Ok(event) => record.event(event),
                Err(err) => record.error_event(err),
            }
        }
    }

    /// The body of a v0.3 call (`method`): results through the v0.3 mapping table, and
    /// errors as plain `data:` events, as the v0.3 endpoint of the reference SDK writes them.
    pub fn in_v03(mut self, method: Method) -> Self {
        self.v03 = Some(method);
        self
    }

    fn push_event(&mut self, buf: &mut Vec<u8>, event: &StreamResponse) -> bool {
        buf.extend_from_slice(b"data: ");
        let start = buf.len();
        let v1 = |out: &mut Vec<u8>| crate::protocol::json::write_json(out, event);
        match write_response(buf, Some(&self.id), |out| match self.v03 {
            None => v1(out),
            Some(method) => method.write_result(out, v1),
        }) {
            Ok(()) => {
                buf.extend_from_slice(b"\n\n");
                self.observe(Ok(event));
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

    fn push_error(&mut self, buf: &mut Vec<u8>, err: &A2aError) {
        self.observe(Err(err));
        let event = match self.v03 {
            None => &b"event: error\ndata: "[..],
            Some(_) => b"data: ",
        };
        buf.extend_from_slice(event);
        write_error_in(buf, Some(&self.id), err, self.v03);
        buf.extend_from_slice(b"\n\n");
    }
}

impl Stream for SseBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut buf = Vec::new();
        let mut written = 0;
        let mut received = false;
        if let Some(first) = this.first.take() {
            this.done |= !this.push_event(&mut buf, &first);
            written += 1;
        }
        while !this.done && buf.len() < MAX_CHUNK {
            match this.events.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(event))) => {
                    this.done |= !this.push_event(&mut buf, &event);
                    written += 1;
                    received = true;
                }
                Poll::Ready(Some(Err(err))) => {
                    this.push_error(&mut buf, &A2aError::from(err));
                    this.done = true;
                    written += 1;
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
                    written += 1;
                }
            }
        }
        if let (false, Some((limit, idle))) = (this.done, this.idle.as_mut()) {
            if received {
                idle.as_mut().reset(Instant::now() + *limit);
            } else if idle.as_mut().poll(cx).is_ready() {
                // Ending here drops the backend stream with the body: the call is cancelled.
                let why = format!("no event from the agent for {limit:?} (stream-idle-timeout)");
                this.push_error(&mut buf, &Fault::Deadline(why).into());
                this.done = true;
                written += 1;
            }
        }
        if !this.done && this.closing.as_mut().poll(cx).is_ready() {
            let err = A2aError::gateway(
                GatewayFault::ShuttingDown,
                "the gateway is shutting down; subscribe to the task again to go on",
            );
            this.push_error(&mut buf, &err);
            this.done = true;
            written += 1;
        }
        if let Some(record) = &mut this.record {
            record.sent(buf.len());
        }
        if !buf.is_empty() {
            this.meter.events(written);
            this.keepalive.as_mut().reset(Instant::now() + this.period);
            return Poll::Ready(Some(Ok(Bytes::from(buf))));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if this.keepalive.as_mut().poll(cx).is_ready() {
            this.keepalive.as_mut().reset(Instant::now() + this.period);
            if let Some(record) = &mut this.record {
                record.sent(KEEPALIVE_COMMENT.len());
            }
            return Poll::Ready(Some(Ok(Bytes::from_static(KEEPALIVE_COMMENT))));
        }
        Poll::Pending
    }
}

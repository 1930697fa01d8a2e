//! Deadline: a unary call's deadline, a stream's first event's, and the bounds of an open
//! stream (`Bounded`: its whole deadline, the idle timeout of `front::limits`, and the
//! gateway's shutdown), each ending the stream with a final error event. The agent is
//! told the deadline enforced here (`Exchange::deadline`, its `grpc-timeout`): the route's,
//! or the client's own when its front set an earlier one there.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::{sleep, timeout, Instant, Sleep};
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::backend::fault::Fault;
use crate::front::call::{Answer, Exchange, Layer};
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, GatewayFault};
use crate::protocol::ops::Request;

/// A stream that never pauses has its deadline and the shutdown checked after this many
/// events (timers are polled once per pause otherwise, as often as before they wrapped
/// the events).
const CHECK_EVERY: u8 = 32;

/// Bounds the layer inside in time, and the stream it answers.
pub struct Deadline<L>(pub L);

impl<L: Layer<Box<Request>> + Sync> Layer<Box<Request>> for Deadline<L> {
    type Events = Bounded<L::Events>;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        request: Box<Request>,
    ) -> Result<Answer<Self::Events>, A2aError> {
        let gateway = x.gateway;
        let streams = matches!(*request, Request::Stream(_));
        // A stream's start is bounded by its first event's deadline, so that an early error
        // is a plain reply; the whole stream by its own.
        let (limit, whole) = match streams {
            true => (gateway.first_event_timeout, gateway.stream_timeout),
            false => (gateway.unary_timeout, gateway.unary_timeout),
        };
        // A deadline the client gave (gRPC's `grpc-timeout`, set by its front) bounds the
        // call too, and the agent is told the earlier of the two.
        let (limit, whole) = match x.deadline {
            None => (limit, whole),
            Some(client) => {
                let client = client.saturating_duration_since(Instant::now());
                let earliest =
                    |bound: Option<Duration>| Some(bound.map_or(client, |b| b.min(client)));
                (earliest(limit), earliest(whole))
            }
        };
        x.deadline = whole.map(|whole| Instant::now() + whole);
        // Already passed (a client's `grpc-timeout` of 0, or shorter than the call took to
        // get here): the agent is not asked.
        if limit.is_some_and(|limit| limit.is_zero()) {
            return Err(Fault::deadline(Duration::ZERO).into());
        }
        let answer = match limit {
            Some(limit) => match timeout(limit, self.0.call(x, request)).await {
                Ok(answer) => {
                    answer.map_err(|e| deadline_passed(x.deadline, limit).unwrap_or(e))?
                }
                Err(_) if streams => Answer::Unstarted(Fault::deadline(limit).into(), None),
                Err(_) => return Err(Fault::deadline(limit).into()),
            },
            None => self.0.call(x, request).await?,
        };
        let idle = x.limits.and_then(|limits| limits.stream_idle);
        let closing = gateway.lifecycle.closing();
        Ok(answer.map_events(|events| Bounded::new(events, whole, idle, closing)))
    }
}

/// The deadline's error, when `deadline` has passed: the agent, told the same deadline, may
/// give up first, and a call whose deadline passed fails as the deadline's, whoever
/// noticed it.
fn deadline_passed(deadline: Option<Instant>, limit: Duration) -> Option<A2aError> {
    deadline
        .filter(|at| Instant::now() >= *at)
        .map(|_| Fault::deadline(limit).into())
}

/// A stream's events within its bounds: past one, a final error event, then the end.
pub struct Bounded<S> {
    events: S,
    deadline: Option<Pin<Box<Sleep>>>,
    /// The idle timeout, and when it passes without an event.
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
    /// Resolves when the gateway shuts down with this stream still open.
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Events let through since the bounds were last checked.
    unchecked: u8,
    ended: bool,
}

impl<S> Bounded<S> {
    fn new(
        events: S,
        deadline: Option<Duration>,
        idle: Option<Duration>,
        closing: WaitForCancellationFutureOwned,
    ) -> Self {
        Bounded {
            events,
            deadline: deadline.map(|d| Box::pin(sleep(d))),
            idle: idle.map(|d| (d, Box::pin(sleep(d)))),
            closing: Box::pin(closing),
            unchecked: 0,
            ended: false,
        }
    }

    /// The error of a bound that passes whether or not events arrive: the deadline, the
    /// shutdown.
    fn passed(&mut self, cx: &mut Context<'_>) -> Option<A2aError> {
        if let Some(deadline) = self.deadline.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                return Some(Fault::Deadline("the stream's deadline passed".into()).into());
            }
        }
        if self.closing.as_mut().poll(cx).is_ready() {
            return Some(A2aError::gateway(
                GatewayFault::ShuttingDown,
                "the gateway is shutting down; subscribe to the task again to go on",
            ));
        }
        None
    }

    /// The error of the idle timeout, once no event came for that long.
    fn idled(&mut self, cx: &mut Context<'_>) -> Option<A2aError> {
        let (limit, idle) = self.idle.as_mut()?;
        // Ending here drops the backend stream with the body: the call is cancelled.
        idle.as_mut().poll(cx).is_ready().then(|| {
            let why = format!("no event from the agent for {limit:?} (stream-idle-timeout)");
            Fault::Deadline(why).into()
        })
    }
}

impl<S> Stream for Bounded<S>
where
    S: Stream<Item = Result<StreamResponse, A2aError>> + Unpin,
{
    type Item = Result<StreamResponse, A2aError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        // Events that wait are sent before a bound is checked, as they were received
        // first; a stream that never pauses is checked every `CHECK_EVERY` events.
        let mut passed = None;
        if this.unchecked >= CHECK_EVERY {
            this.unchecked = 0;
            passed = this.passed(cx);
        }
        if passed.is_none() {
            match this.events.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(event))) => {
                    if let Some((limit, idle)) = this.idle.as_mut() {
                        idle.as_mut().reset(Instant::now() + *limit);
                    }
                    this.unchecked += 1;
                    return Poll::Ready(Some(Ok(event)));
                }
                Poll::Ready(other) => {
                    this.ended = true;
                    return Poll::Ready(other);
                }
                Poll::Pending => {
                    this.unchecked = 0;
                    passed = this.passed(cx).or_else(|| this.idled(cx));
                }
            }
        }
        match passed {
            Some(err) => {
                this.ended = true;
                Poll::Ready(Some(Err(err)))
            }
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::Lifecycle;

    /// Collects `bounded` to its end: the events it let through, and its last error.
    async fn run<S>(bounded: Bounded<S>) -> (usize, Option<A2aError>)
    where
        S: Stream<Item = Result<StreamResponse, A2aError>> + Unpin,
    {
        let items: Vec<_> = bounded.collect().await;
        let events = items.iter().filter(|item| item.is_ok()).count();
        (events, items.into_iter().find_map(Result::err))
    }

    #[tokio::test]
    async fn a_stream_that_keeps_sending_still_ends_at_its_deadline() {
        // Ready at every poll, forever, with a yield so the timer can fire.
        let events = futures::stream::unfold((), |()| async {
            tokio::task::yield_now().await;
            Some((Ok(StreamResponse::default()), ()))
        })
        .boxed();
        let closing = Lifecycle::default().closing();
        let deadline = Some(Duration::from_millis(20));
        let (events, err) = run(Bounded::new(events, deadline, None, closing)).await;
        assert!(events > 0);
        let err = err.expect("the deadline's error event");
        assert!(err.message.contains("deadline"), "{}", err.message);
    }

    #[tokio::test]
    async fn a_stream_that_never_pauses_still_ends_at_its_deadline() {
        // Ready at every poll; the reader yields between events so time goes on.
        let events = futures::stream::repeat_with(|| Ok(StreamResponse::default())).boxed();
        let closing = Lifecycle::default().closing();
        let deadline = Some(Duration::from_millis(20));
        let mut bounded = Bounded::new(events, deadline, None, closing);
        let mut events = 0;
        let err = loop {
            match bounded.next().await {
                Some(Ok(_)) => events += 1,
                Some(Err(err)) => break err,
                None => panic!("the stream ended without the deadline's error"),
            }
            tokio::task::yield_now().await;
        };
        assert!(events >= CHECK_EVERY.into(), "{events}");
        assert!(err.message.contains("deadline"), "{}", err.message);
        assert!(bounded.next().await.is_none());
    }

    #[tokio::test]
    async fn an_idle_stream_ends_after_its_idle_timeout() {
        let events = futures::stream::iter([Ok(StreamResponse::default())])
            .chain(futures::stream::pending())
            .boxed();
        let closing = Lifecycle::default().closing();
        let idle = Some(Duration::from_millis(20));
        let (events, err) = run(Bounded::new(events, None, idle, closing)).await;
        assert_eq!(events, 1);
        let err = err.expect("the idle timeout's error event");
        assert!(
            err.message.contains("stream-idle-timeout"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn the_gateway_closing_ends_an_open_stream() {
        let lifecycle = Lifecycle::default();
        let events = futures::stream::pending().boxed();
        let bounded = Bounded::new(events, None, None, lifecycle.closing());
        lifecycle.close_streams();
        let (events, err) = run(bounded).await;
        assert_eq!(events, 0);
        let shutting_down = A2aError::gateway(GatewayFault::ShuttingDown, "");
        assert_eq!(err.map(|e| e.kind), Some(shutting_down.kind));
    }
}

//! Invoke, the innermost layer: the backend call. The forwarded headers (the route's
//! policy, the dialect's, the server span's context), the call itself (`unary`,
//! `stream`), and a unary reply written in the call's dialect.

use futures::{FutureExt, StreamExt};
use http::HeaderValue;

use crate::backend::fault::Fault;
use crate::backend::{Backend, Call, EventStream};
use crate::front::call::{Answer, Exchange, Layer, Started};
use crate::protocol::error::A2aError;
use crate::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};

/// Calls the backend.
pub struct Invoke;

impl Layer<Box<Request>> for Invoke {
    type Events = EventStream;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        request: Box<Request>,
    ) -> Result<Answer<EventStream>, A2aError> {
        let gateway = x.gateway;
        let mut forwarded = gateway.forward.select(&x.head.headers);
        x.dialect.forward(x.head, &mut forwarded);
        x.record.request(&request);
        x.record.propagate(&mut forwarded);
        let timeout = x.deadline;
        match *request {
            Request::Unary(request) => {
                let call = Call {
                    request,
                    forwarded,
                    timeout,
                };
                let (reply, extensions) = unary(&*gateway.backend, call).await?;
                let Some(id) = x.id.as_deref() else {
                    return Ok(Answer::Json(Vec::new(), extensions));
                };
                x.record.reply(&reply);
                let card = gateway.card.as_deref();
                let out = x.dialect.reply_bytes(id, &reply, card, x.head)?;
                Ok(Answer::Json(out, extensions))
            }
            Request::Stream(request) => {
                let call = Call {
                    request,
                    forwarded,
                    timeout,
                };
                // Boxed: the stream's start is a large future, and unary calls should not
                // carry its size (bytes per call, tests/it/cost_budget.rs).
                Ok(Box::pin(stream(&*gateway.backend, call)).await)
            }
        }
    }
}

/// A unary call's reply and the backend's activated extensions. Not an `async fn`: the
/// call moves into the backend's future at once, not into this one.
fn unary(
    backend: &dyn Backend,
    call: Call<UnaryRequest>,
) -> impl std::future::Future<Output = Result<(Reply, Option<HeaderValue>), A2aError>> {
    backend
        .unary(call)
        .map(|answer| answer.map(|answer| (answer.value, answer.extensions)))
}

/// Starts a stream and waits for its first event, so an early error is a plain reply.
async fn stream(backend: &dyn Backend, call: Call<StreamRequest>) -> Answer<EventStream> {
    let answer = match backend.stream(call).await {
        Ok(answer) => answer,
        Err(err) => return Answer::Unstarted(err, None),
    };
    let mut events = answer.value;
    match events.next().await {
        Some(Ok(first)) => Answer::Stream(Started {
            first: Box::new(first),

            events,
            extensions: answer.extensions,
        }),
        Some(Err(err)) => Answer::Unstarted(err, answer.extensions),
        // An empty stream would leave the request without any answer (found by fuzzing,
        // fuzz/README.md): the backend broke the stream's contract.
        None => Answer::Unstarted(
            Fault::BadResponse("the backend's stream ended before its first event".into()).into(),
            answer.extensions,
        ),
    }
}

//! One backend call as the traces see it (`BackendCall`): its client span, with the status
//! the backend answered with and how the call ended, read from the returned values. Both
//! backends wrap every call in one.

use futures::StreamExt;

use crate::backend::{Answer, Error, EventStream, Status};
use crate::protocol::ops::Op;
use crate::telemetry::trace::{ClientSpan, Hop, TraceContext};

/// One backend call: its client span, when traces are on.
pub struct BackendCall {
    span: Option<Box<ClientSpan>>,
}

/// Records how a call ended on its span: the status, and the error's row and message.
fn answered(span: &mut ClientSpan, result: Result<Option<Status>, &Error>) {
    match result {
        Ok(status) => span.answered(status.map(Status::number), None),
        Err(err) => {
            let message = err.to_string();
            let status = err.status().map(|s| s.number());
            span.answered(status, Some((err.kind(), &message)));
        }
    }
}

impl BackendCall {
    /// A call of `op` over `hop`; with traces on, its span's context replaces the call's
    /// `trace`, for the outgoing head (`trace::ClientSpan::start`).
    pub fn start(op: Op, hop: Hop<'_>, trace: &mut Option<Box<TraceContext>>) -> Self {
        BackendCall {
            span: ClientSpan::start(op, hop, trace).map(Box::new),
        }
    }

    /// A unary call's result, recorded.
    pub fn unary<T>(mut self, result: Result<Answer<T>, Error>) -> Result<Answer<T>, Error> {
        if let Some(span) = &mut self.span {
            answered(span, result.as_ref().map(|answer| answer.status));
        }
        result
    }

    /// A stream's start, recorded; its span (if any) lasts until the stream ends.
    pub fn stream(
        mut self,
        result: Result<Answer<EventStream>, Error>,
    ) -> Result<Answer<EventStream>, Error> {
        let Some(mut span) = self.span.take() else {
            return result;
        };
        answered(&mut span, result.as_ref().map(|answer| answer.status));
        let mut answer = result?;
        answer.value = answer
            .value
            .map(move |event| {
                match &event {
                    Ok(_) => span.event(),
                    Err(err) => answered(&mut span, Err(err)),
                }
                event
            })
            .boxed();
        Ok(answer)
    }
}

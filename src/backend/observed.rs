//! One backend call as the access log and the traces see it (`BackendCall`): its client
//! span, and the status the backend answered with, left for the call's access log line
//! (`telemetry::access`). Both backends wrap every call in one.

use futures::StreamExt;
use http::{HeaderName, HeaderValue};

use crate::backend::fault;
use crate::backend::{Answer, EventStream};
use crate::protocol::error::A2aError;
use crate::protocol::ops::Op;
use crate::telemetry::access::leave_backend_status;
use crate::telemetry::trace::{ClientSpan, Hop};

/// The status a backend answered with, as the error table reads it: for an agent's error
/// its gRPC code or HTTP status, `None` when the gateway's path to the agent failed.
pub fn backend_status(result: Result<(), &A2aError>, http: bool) -> Option<u16> {
    match result {
        Ok(()) => Some(if http { 200 } else { 0 }),
        Err(err) if fault::reported(err).is_some() => None,
        Err(err) if http => Some(err.kind.http()),
        Err(err) => Some(err.kind.grpc() as u16),
    }
}

/// One backend call: its client span and the status it answered with.
pub struct BackendCall {
    span: Option<Box<ClientSpan>>,
    http: bool,
}

impl BackendCall {
    /// A call of `op` over `hop`; with traces on, its span's context replaces the forwarded
    /// `traceparent` (`trace::ClientSpan::start`).
    pub fn start(op: Op, hop: Hop<'_>, forwarded: &mut Vec<(HeaderName, HeaderValue)>) -> Self {
        let http = matches!(hop, Hop::Http { .. });
        BackendCall {
            span: ClientSpan::start(op, hop, forwarded).map(Box::new),
            http,
        }
    }

    fn answered(&mut self, result: Result<(), &A2aError>) {
        let status = backend_status(result, self.http);
        leave_backend_status(status);
        if let Some(span) = &mut self.span {
            span.answered(result, status);
        }
    }

    /// A unary call's result, recorded.
    pub fn unary<T>(mut self, result: Result<T, A2aError>) -> Result<T, A2aError> {
        self.answered(result.as_ref().map(|_| ()));
        result
    }

    /// A stream's start, recorded; its span (if any) lasts until the stream ends.
    pub fn stream(
        mut self,
        result: Result<Answer<EventStream>, A2aError>,
    ) -> Result<Answer<EventStream>, A2aError> {
        self.answered(result.as_ref().map(|_| ()));
        let Some(mut span) = self.span.take() else {
            return result;
        };
        let http = self.http;
        let mut answer = result?;
        answer.value = answer
            .value
            .map(move |event| {
                match &event {
                    Ok(_) => span.event(),
                    Err(err) => span.answered(Err(err), backend_status(Err(err), http)),
                }
                event
            })
            .boxed();
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fault::Fault;
    use crate::protocol::error::ErrorKind;

    #[test]
    fn backend_status_by_binding() {
        let agent = A2aError::new(ErrorKind::TaskNotFound);
        let fault: A2aError = Fault::Connect("refused".into()).into();
        assert_eq!(backend_status(Ok(()), false), Some(0));
        assert_eq!(backend_status(Ok(()), true), Some(200));
        assert_eq!(backend_status(Err(&agent), false), Some(5), "NOT_FOUND");
        assert_eq!(backend_status(Err(&agent), true), Some(404));
        assert_eq!(backend_status(Err(&fault), false), None, "never reached");
        assert_eq!(backend_status(Err(&fault), true), None);
    }
}

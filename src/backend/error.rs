//! What a backend call fails with, typed until the front writes it: the agent's error with
//! the status it came with, a fault of the gateway's own path (`fault::Fault`), or a call
//! the gateway did not send. Retry and ejection (`endpoints`), the access log and the
//! client span (`observed`) read these values; only the front turns one into a JSON-RPC
//! error (`From<Error> for A2aError`), through the error table and the fault table.

use http::StatusCode;
use serde_json::{json, Value};
use tonic::Code;

use super::fault::Fault;
use crate::protocol::error::{A2aError, ErrorKind};

/// `google.rpc.DebugInfo`, where the gateway quotes an answer it could not use.
const DEBUG_INFO: &str = "type.googleapis.com/google.rpc.DebugInfo";

/// The status a backend answered with: a gRPC code or an HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// A gRPC backend's status code.
    Grpc(Code),
    /// An HTTP+JSON backend's HTTP status.
    Http(u16),
}

impl Status {
    /// The number the access log and the client span write: the gRPC code or HTTP status.
    pub(crate) fn number(self) -> u16 {
        match self {
            Status::Grpc(code) => code as u16,
            Status::Http(status) => status,
        }
    }
}

/// A failed backend call. Every variant is boxed: errors are rare, and each call's future
/// holds a `Result` of this (bytes per call, tests/it/cost_budget.rs).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The agent answered with an error.
    #[error("{}", .0.error.message)]
    Agent(Box<AgentError>),
    /// The gateway's path to the agent failed: nothing usable came back.
    #[error("{}", .0.fault)]
    Fault(Box<Failure>),
    /// The gateway did not send the call: the request cannot be carried on this binding,
    /// or names an id the gateway did not issue. The error says why.
    #[error("{}", .0.message)]
    Unsent(Box<A2aError>),
}

/// An agent's error: what the error table made of it (by `ErrorInfo.reason`, else the
/// status), and the status it came with.
#[derive(Debug)]
pub struct AgentError {
    pub error: A2aError,
    pub status: Status,
}

/// A fault of the gateway's path, and what the gateway saw of an answer it could not use.
#[derive(Debug)]
pub struct Failure {
    pub fault: Fault,
    pub seen: Seen,
}

/// What people need to see of an unusable answer: it becomes the fault's
/// `ErrorInfo.metadata` (`httpStatus`, `contentType`, `bodyLength`) and a
/// `google.rpc.DebugInfo` (`detail`).
#[derive(Debug, Default)]
pub struct Seen {
    pub http_status: Option<StatusCode>,
    pub content_type: Option<String>,
    pub body_length: Option<usize>,
    pub detail: Option<String>,
}

impl Error {
    /// The agent's `error`, answered with `status`.
    pub fn agent(error: A2aError, status: Status) -> Error {
        Error::Agent(Box::new(AgentError { error, status }))
    }

    /// A fault, with what was seen of the answer.
    pub(crate) fn seen(fault: Fault, seen: Seen) -> Error {
        Error::Fault(Box::new(Failure { fault, seen }))
    }

    /// A call the gateway did not send, and why.
    pub(crate) fn unsent(error: A2aError) -> Error {
        Error::Unsent(Box::new(error))
    }

    /// The fault of the gateway's path, if this is one: what retry and ejection judge.
    /// An agent's error says nothing about the path, whatever its details claim.
    pub(crate) fn fault(&self) -> Option<&Fault> {
        match self {
            Error::Fault(failure) => Some(&failure.fault),
            Error::Agent(_) | Error::Unsent(_) => None,
        }
    }

    /// The status the backend answered with: `None` when it was not reached or its
    /// answer was unusable.
    pub(crate) fn status(&self) -> Option<Status> {
        match self {
            Error::Agent(agent) => Some(agent.status),
            Error::Fault(_) | Error::Unsent(_) => None,
        }
    }

    /// The error table's row the client will get (a fault's is `Internal`, as
    /// `A2aError::gateway` makes it).
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            Error::Agent(agent) => agent.error.kind,
            Error::Fault(_) => ErrorKind::Internal,
            Error::Unsent(error) => error.kind,
        }
    }
}

impl From<Fault> for Error {
    fn from(fault: Fault) -> Error {
        Error::seen(fault, Seen::default())
    }
}

impl From<Error> for A2aError {
    /// The one conversion to the client's error, made by the front as it writes the reply.
    fn from(err: Error) -> A2aError {
        match err {
            Error::Agent(agent) => agent.error,
            Error::Unsent(error) => *error,
            Error::Fault(failure) => failure.into_a2a(),
        }
    }
}

impl Failure {
    /// The fault's row (`Fault::gateway_fault`), with what was seen in its details.
    fn into_a2a(self) -> A2aError {
        let Failure { fault, seen } = self;
        let mut error = A2aError::gateway(fault.gateway_fault(), fault.to_string());
        let mut metadata = serde_json::Map::new();
        if let Some(status) = seen.http_status {
            metadata.insert("httpStatus".into(), json!(status.as_str()));
        }
        if let Some(content_type) = seen.content_type {
            metadata.insert("contentType".into(), json!(content_type));
        }
        if let Some(length) = seen.body_length {
            metadata.insert("bodyLength".into(), json!(length.to_string()));
        }
        if let (false, Some(info)) = (metadata.is_empty(), error.data.first_mut()) {
            info["metadata"] = Value::Object(metadata);
        }
        if let Some(detail) = seen.detail {
            error
                .data
                .push(json!({"@type": DEBUG_INFO, "detail": detail}));
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_becomes_its_client_error() {
        let agent = Error::agent(
            A2aError::new(ErrorKind::TaskNotFound),
            Status::Grpc(Code::NotFound),
        );
        assert_eq!(
            (agent.fault(), agent.status()),
            (None, Some(Status::Grpc(Code::NotFound)))
        );
        assert_eq!(A2aError::from(agent).kind, ErrorKind::TaskNotFound);

        let unsent = Error::unsent(A2aError::invalid_params("id", "empty"));
        assert_eq!((unsent.fault(), unsent.status()), (None, None));
        assert_eq!(unsent.kind(), ErrorKind::InvalidParams);

        let seen = Seen {
            http_status: Some(StatusCode::BAD_GATEWAY),
            body_length: Some(0),
            detail: Some("d".into()),
            ..Seen::default()
        };
        let fault = Error::seen(Fault::BadResponse("x".into()), seen);
        assert!(matches!(fault.fault(), Some(Fault::BadResponse(_))));
        assert_eq!((fault.status(), fault.kind()), (None, ErrorKind::Internal));
        let message = fault.to_string();
        let err = A2aError::from(fault);
        assert_eq!(err.message, message);
        assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE");
        assert_eq!(err.data[0]["metadata"]["httpStatus"], "502");
        assert_eq!(err.data[0]["metadata"]["bodyLength"], "0");
        assert!(err.data[0]["metadata"].get("contentType").is_none());
        assert_eq!(err.data[1]["@type"], DEBUG_INFO);
    }

    #[test]
    fn statuses_are_numbers() {
        assert_eq!(Status::Grpc(Code::NotFound).number(), 5);
        assert_eq!(Status::Http(404).number(), 404);
    }
}

//! THE error table (spec 3.3.2, 5.4, 9.5): each error kind once, with its JSON-RPC code,
//! gRPC status, HTTP status, `ErrorInfo.reason` and standard message.
//!
//! Backend errors map by `ErrorInfo.reason` (domain `a2a-protocol.org`) first, because SDKs
//! disagree on status codes (FAILED_PRECONDITION alone covers five A2A errors). Only when
//! no such detail is present does the status decide, through the rows marked `by status`.
//! UNAUTHENTICATED and PERMISSION_DENIED have no code in the A2A spec; we follow the
//! official Go SDK's precedent (-31401, -31403). The reasons of the standard JSON-RPC rows
//! are the reference SDK's (a2a-sdk `utils/errors.py`); it reports method-not-found as
//! NOT_FOUND + `METHOD_NOT_FOUND`, which the status alone would misread as TaskNotFound.

use serde_json::{json, Value};
use tonic::Code;

/// `ErrorInfo.domain` of A2A errors (spec 10.6).
pub(crate) const A2A_DOMAIN: &str = "a2a-protocol.org";
/// `ErrorInfo.domain` of errors the gateway itself raises, so clients can tell them apart.
pub(crate) const GATEWAY_DOMAIN: &str = "a2a-gateway";

macro_rules! error_table {
    ($(
        $(#[$doc:meta])*
        $kind:ident: $code:literal, $grpc:ident, $http:literal, $reason:expr, $by_status:literal, $message:literal;
    )*) => {
        /// One row of the error table.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorKind { $( $(#[$doc])* $kind, )* }

        impl ErrorKind {
            /// Every row, in table order.
            pub const ALL: &'static [ErrorKind] = &[ $( ErrorKind::$kind, )* ];

            /// The JSON-RPC error code.
            pub fn code(self) -> i32 { match self { $( ErrorKind::$kind => $code, )* } }
            /// The gRPC status code of this error.
            pub fn grpc(self) -> Code { match self { $( ErrorKind::$kind => Code::$grpc, )* } }
            /// The HTTP status of this error.
            pub fn http(self) -> u16 { match self { $( ErrorKind::$kind => $http, )* } }
            /// `ErrorInfo.reason` (domain `a2a-protocol.org`), where one is defined.
            pub fn reason(self) -> Option<&'static str> { match self { $( ErrorKind::$kind => $reason, )* } }
            /// Whether this row is chosen for its gRPC/HTTP status when no reason is given.
            pub fn by_status(self) -> bool { match self { $( ErrorKind::$kind => $by_status, )* } }
            /// The standard message (spec 9.5), used when the backend gives none.
            pub(crate) fn message(self) -> &'static str { match self { $( ErrorKind::$kind => $message, )* } }
        }
    };
}

error_table! {
    // kind: JSON-RPC code, gRPC status, HTTP status, ErrorInfo reason, by status, standard message
    /// The body is not valid JSON.
    ParseError: -32700, InvalidArgument, 400, None, false, "Invalid JSON payload";
    /// The body is JSON but not a JSON-RPC request object.
    InvalidRequest: -32600, InvalidArgument, 400, Some("INVALID_REQUEST"), false, "Request payload validation error";
    /// The method names no A2A operation.
    MethodNotFound: -32601, Unimplemented, 501, Some("METHOD_NOT_FOUND"), true, "Method not found";
    /// The params do not decode into the operation's request, or a value is refused.
    InvalidParams: -32602, InvalidArgument, 400, Some("INVALID_PARAMS"), true, "Invalid parameters";
    /// The agent failed, or the gateway's path to it did (an `ErrorInfo` of domain
    /// `a2a-gateway` says which).
    Internal: -32603, Internal, 500, Some("INTERNAL_ERROR"), true, "Internal error";
    /// No such task, or none the caller may see.
    TaskNotFound: -32001, NotFound, 404, Some("TASK_NOT_FOUND"), true, "Task not found";
    /// The task is in a state that cannot be canceled.
    TaskNotCancelable: -32002, FailedPrecondition, 400, Some("TASK_NOT_CANCELABLE"), false,
        "Task cannot be canceled";
    /// The agent does not support push notifications.
    PushNotificationNotSupported: -32003, FailedPrecondition, 400, Some("PUSH_NOTIFICATION_NOT_SUPPORTED"), false,
        "Push Notification is not supported";
    /// The agent does not support the operation.
    UnsupportedOperation: -32004, FailedPrecondition, 400, Some("UNSUPPORTED_OPERATION"), false,
        "This operation is not supported";
    /// A part's media type is not one the agent accepts.
    ContentTypeNotSupported: -32005, InvalidArgument, 400, Some("CONTENT_TYPE_NOT_SUPPORTED"), false,
        "Incompatible content types";
    /// The agent's reply does not follow the protocol.
    InvalidAgentResponse: -32006, Internal, 500, Some("INVALID_AGENT_RESPONSE"), false,
        "Invalid agent response";
    /// The agent has no extended card.
    ExtendedAgentCardNotConfigured: -32007, FailedPrecondition, 400, Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED"), false,
        "Authenticated Extended Card is not configured";
    /// The agent requires an extension the client did not declare.
    ExtensionSupportRequired: -32008, FailedPrecondition, 400, Some("EXTENSION_SUPPORT_REQUIRED"), false,
        "Extension support required";
    /// The agent does not support the client's protocol version.
    VersionNotSupported: -32009, FailedPrecondition, 400, Some("VERSION_NOT_SUPPORTED"), false,
        "Version not supported";
    /// The call carries no valid credentials.
    Unauthenticated: -31401, Unauthenticated, 401, None, true, "Unauthenticated";
    /// The caller may not make this call.
    PermissionDenied: -31403, PermissionDenied, 403, None, true, "Permission denied";
}

impl ErrorKind {
    /// The A2A error an `ErrorInfo.reason` of domain `a2a-protocol.org` names.
    pub(crate) fn from_reason(reason: &str) -> Option<ErrorKind> {
        ErrorKind::ALL
            .iter()
            .copied()
            .find(|k| k.reason() == Some(reason))
    }

    /// The row for a gRPC status when no reason decides; unlisted codes are internal errors.
    pub(crate) fn from_grpc(code: Code) -> ErrorKind {
        ErrorKind::ALL
            .iter()
            .copied()
            .find(|k| k.by_status() && k.grpc() == code)
            .unwrap_or(ErrorKind::Internal)
    }

    /// The row for an HTTP status when neither reason nor status name decides.
    pub(crate) fn from_http(status: u16) -> ErrorKind {
        ErrorKind::ALL
            .iter()
            .copied()
            .find(|k| k.by_status() && k.http() == status)
            .unwrap_or(ErrorKind::Internal)
    }
}

/// Faults of the gateway's own path to the backend; reported as -32603 with an
/// `ErrorInfo` of domain `a2a-gateway` so they are not mistaken for agent errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GatewayFault {
    BackendUnavailable,
    BackendConnectionReset,
    BackendDeadlineExceeded,
    BackendBadResponse,
    /// The gateway is stopping; the client should call again (elsewhere).
    ShuttingDown,
    /// A call rate limit (`front::limits`) refused the call: call again later.
    RateLimited,
    /// A concurrency limit (`front::limits`) refused the call: call again later.
    Overloaded,
    /// The request's header fields are larger than the route allows.
    HeadersTooLarge,
    /// A batch member's reply did not fit in the batch reply's bound (`max-batch-reply`):
    /// the call was made, its result is not sent.
    ReplyTooLarge,
}

impl GatewayFault {
    /// The `ErrorInfo.reason` of this fault.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            GatewayFault::BackendUnavailable => "BACKEND_UNAVAILABLE",
            GatewayFault::BackendConnectionReset => "BACKEND_CONNECTION_RESET",
            GatewayFault::BackendDeadlineExceeded => "BACKEND_DEADLINE_EXCEEDED",
            GatewayFault::BackendBadResponse => "BACKEND_BAD_RESPONSE",
            GatewayFault::ShuttingDown => "GATEWAY_SHUTTING_DOWN",
            GatewayFault::RateLimited => "GATEWAY_RATE_LIMITED",
            GatewayFault::Overloaded => "GATEWAY_OVERLOADED",
            GatewayFault::HeadersTooLarge => "GATEWAY_HEADERS_TOO_LARGE",
            GatewayFault::ReplyTooLarge => "GATEWAY_REPLY_TOO_LARGE",
        }
    }

    /// The wait a client is advised before calling again (a `RetryInfo` detail), where
    /// the same call may succeed later and the wait does not depend on the refusal: the
    /// limits' own refusals know theirs (`front::limits`).
    fn retry_after(self) -> Option<std::time::Duration> {
        match self {
            // An agent restarting, or another endpoint or replica taking over.
            GatewayFault::BackendUnavailable => Some(std::time::Duration::from_secs(1)),
            // Another replica serves it now.
            GatewayFault::ShuttingDown => Some(std::time::Duration::ZERO),
            _ => None,
        }
    }
}

/// An error on its way to the client: the table row, a message, and the details that
/// become `error.data` (each a ProtoJSON `Any` object with `@type`).
#[derive(Clone, Debug, PartialEq)]
pub struct A2aError {
    /// The error table row: JSON-RPC code, gRPC and HTTP status, reason.
    pub kind: ErrorKind,
    /// The message the client reads (the backend's, or the row's standard one).
    pub message: String,
    /// The details sent as `error.data`, each a ProtoJSON `Any` object with `@type`.
    pub data: Vec<Value>,
}

impl A2aError {
    /// An error of `kind` with its standard message and no details.
    pub fn new(kind: ErrorKind) -> Self {
        Self {
            kind,
            message: kind.message().to_owned(),
            data: Vec::new(),
        }
    }

    /// An error with a specific message.
    pub(crate) fn with_message(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            data: Vec::new(),
        }
    }

    /// -32602 naming the failing field: an `ErrorInfo` (`INVALID_PARAMS`, with the
    /// reference SDK's `parseError` metadata) and a `google.rpc.BadRequest`.
    pub(crate) fn invalid_params(field: &str, description: &str) -> Self {
        let field = if field == "." { "" } else { field };
        let problem = if field.is_empty() {
            description.to_owned()
        } else {
            format!("{field}: {description}")
        };
        let kind = ErrorKind::InvalidParams;
        Self {
            kind,
            message: format!("Invalid parameters: {problem}"),
            data: vec![
                with_metadata(
                    error_info(kind.reason().unwrap_or_default(), A2A_DOMAIN),
                    "parseError",
                    &problem,
                ),
                json!({
                    "@type": crate::protocol::details::BAD_REQUEST,
                    "fieldViolations": [{"field": field, "description": description}],
                }),
            ],
        }
    }

    /// -32600 saying what is wrong with the envelope, with an `ErrorInfo` as the
    /// reference SDK sends one.
    pub(crate) fn invalid_request(why: &str) -> Self {
        let kind = ErrorKind::InvalidRequest;
        Self {
            kind,
            message: format!("{}: {why}", kind.message()),
            data: vec![with_metadata(
                error_info(kind.reason().unwrap_or_default(), A2A_DOMAIN),
                "parseError",
                why,
            )],
        }
    }

    /// An A2A error raised by the gateway itself (e.g. version negotiation).
    pub(crate) fn a2a(kind: ErrorKind, message: impl Into<String>) -> Self {
        let mut data = Vec::new();
        if let Some(reason) = kind.reason() {
            data.push(error_info(reason, A2A_DOMAIN));
        }
        Self {
            kind,
            message: message.into(),
            data,
        }
    }

    /// A fault of the gateway's path to the backend (-32603, domain `a2a-gateway`).
    pub(crate) fn gateway(fault: GatewayFault, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Internal,
            message: message.into(),
            data: match fault.retry_after() {
                None => vec![error_info(fault.reason(), GATEWAY_DOMAIN)],
                Some(wait) => vec![
                    error_info(fault.reason(), GATEWAY_DOMAIN),
                    crate::protocol::details::retry_info(wait),
                ],
            },
        }
    }

    /// Builds the client-facing error from a backend's answer: the row is chosen by the
    /// first `ErrorInfo` of domain `a2a-protocol.org` among `data`, else by `fallback`.
    pub(crate) fn from_backend(fallback: ErrorKind, message: &str, data: Vec<Value>) -> Self {
        let kind = data
            .iter()
            .find_map(|d| {
                let is_info = d.get("@type")?.as_str()? == crate::protocol::details::ERROR_INFO;
                let in_domain = d.get("domain")?.as_str()? == A2A_DOMAIN;
                if is_info && in_domain {
                    ErrorKind::from_reason(d.get("reason")?.as_str()?)
                } else {
                    None
                }
            })
            .unwrap_or(fallback);
        let message = if message.is_empty() {
            kind.message().to_owned()
        } else {
            message.to_owned()
        };
        Self {
            kind,
            message,
            data,
        }
    }

    /// The JSON-RPC `error` object.
    pub(crate) fn to_json(&self) -> Value {
        let mut obj = json!({"code": self.kind.code(), "message": self.message});
        if !self.data.is_empty() {
            obj["data"] = Value::Array(self.data.clone());
        }
        obj
    }
}

fn error_info(reason: &str, domain: &str) -> Value {
    json!({"@type": crate::protocol::details::ERROR_INFO, "reason": reason, "domain": domain})
}

fn with_metadata(mut info: Value, key: &str, value: &str) -> Value {
    info["metadata"] = json!({ key: value });
    info
}

impl std::fmt::Display for A2aError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.kind.code())
    }
}

impl std::error::Error for A2aError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_maps_both_ways() {
        for &kind in ErrorKind::ALL {
            if let Some(reason) = kind.reason() {
                assert_eq!(ErrorKind::from_reason(reason), Some(kind), "{kind:?}");
                let data = vec![error_info(reason, A2A_DOMAIN)];
                // The reason decides, whatever the status says.
                let err = A2aError::from_backend(ErrorKind::Internal, "m", data);
                assert_eq!((err.kind, err.kind.code()), (kind, kind.code()));
            }
            if kind.by_status() {
                assert_eq!(ErrorKind::from_grpc(kind.grpc()), kind, "{kind:?}");
                assert_eq!(ErrorKind::from_http(kind.http()), kind, "{kind:?}");
            } else {
                assert_ne!(
                    ErrorKind::from_grpc(kind.grpc()),
                    kind,
                    "{kind:?} needs a reason"
                );
            }
        }
    }

    #[test]
    fn codes_reasons_and_status_rows_are_unique() {
        let all = ErrorKind::ALL;
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.code(), b.code(), "{a:?} {b:?}");
                assert!(
                    a.reason().is_none() || a.reason() != b.reason(),
                    "{a:?} {b:?}"
                );
                if a.by_status() && b.by_status() {
                    assert_ne!(a.grpc(), b.grpc(), "{a:?} {b:?}");
                    assert_ne!(a.http(), b.http(), "{a:?} {b:?}");
                }
            }
        }
    }

    #[test]
    fn spec_5_4_rows() {
        use ErrorKind::*;
        let rows = [
            (TaskNotFound, -32001, Code::NotFound, 404),
            (TaskNotCancelable, -32002, Code::FailedPrecondition, 400),
            (
                PushNotificationNotSupported,
                -32003,
                Code::FailedPrecondition,
                400,
            ),
            (UnsupportedOperation, -32004, Code::FailedPrecondition, 400),
            (ContentTypeNotSupported, -32005, Code::InvalidArgument, 400),
            (InvalidAgentResponse, -32006, Code::Internal, 500),
            (
                ExtendedAgentCardNotConfigured,
                -32007,
                Code::FailedPrecondition,
                400,
            ),
            (
                ExtensionSupportRequired,
                -32008,
                Code::FailedPrecondition,
                400,
            ),
            (VersionNotSupported, -32009, Code::FailedPrecondition, 400),
        ];
        for (kind, code, grpc, http) in rows {
            assert_eq!((kind.code(), kind.grpc(), kind.http()), (code, grpc, http));
        }
        assert_eq!(ErrorKind::from_grpc(Code::Unavailable), ErrorKind::Internal);
        assert_eq!(
            ErrorKind::from_grpc(Code::FailedPrecondition),
            ErrorKind::Internal
        );
        assert_eq!(ErrorKind::from_http(502), ErrorKind::Internal);
    }

    #[test]
    fn other_domains_do_not_decide() {
        let data = vec![error_info("TASK_NOT_FOUND", "example.com")];
        let err = A2aError::from_backend(ErrorKind::Internal, "", data);
        assert_eq!(err.kind, ErrorKind::Internal);
        assert_eq!(err.message, "Internal error");
    }
}

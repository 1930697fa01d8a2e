//! THE error table (spec 3.3.2, 5.4, 9.5): each error kind once, with its JSON-RPC code,
//! its gRPC status and HTTP status under each conformance profile (`Profile`: the 1.0.0
//! and 1.0.1 releases disagree on six of them), `ErrorInfo.reason` and standard message.
//!
//! Backend errors map by `ErrorInfo.reason` (domain `a2a-protocol.org`) first, because SDKs
//! disagree on status codes (FAILED_PRECONDITION alone covers five A2A errors). Only when
//! no such detail is present does the status decide, through the statuses a row reads
//! (`read_grpc`, `read_http`): those of either profile that name that row alone, so the
//! reading is the same whichever profile the agent follows.
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
        $kind:ident: $code:literal, [$grpc0:ident, $grpc1:ident], [$http0:literal, $http1:literal],
            $reason:expr, [$read_grpc:expr, $read_http:expr], $message:literal;
    )*) => {
        /// One row of the error table.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorKind { $( $(#[$doc])* $kind, )* }

        impl ErrorKind {
            /// Every row, in table order.
            pub const ALL: &'static [ErrorKind] = &[ $( ErrorKind::$kind, )* ];

            /// The JSON-RPC error code.
            pub fn code(self) -> i32 { match self { $( ErrorKind::$kind => $code, )* } }
            /// The gRPC status code of this error under `profile`.
            pub fn grpc(self, profile: Profile) -> Code {
                match (self, profile) {
                    $(
                        (ErrorKind::$kind, Profile::V1_0_0) => Code::$grpc0,
                        (ErrorKind::$kind, Profile::V1_0_1) => Code::$grpc1,
                    )*
                }
            }
            /// The HTTP status of this error under `profile`.
            pub fn http(self, profile: Profile) -> u16 {
                match (self, profile) {
                    $(
                        (ErrorKind::$kind, Profile::V1_0_0) => $http0,
                        (ErrorKind::$kind, Profile::V1_0_1) => $http1,
                    )*
                }
            }
            /// `ErrorInfo.reason` (domain `a2a-protocol.org`), where one is defined.
            pub fn reason(self) -> Option<&'static str> { match self { $( ErrorKind::$kind => $reason, )* } }
            /// The gRPC status read as this row when an agent's error gives no reason.
            pub fn read_grpc(self) -> Option<Code> { match self { $( ErrorKind::$kind => $read_grpc, )* } }
            /// The HTTP status read as this row when an agent's error gives neither reason
            /// nor status name.
            pub fn read_http(self) -> Option<u16> { match self { $( ErrorKind::$kind => $read_http, )* } }
            /// The standard message (spec 9.5), used when the backend gives none.
            pub(crate) fn message(self) -> &'static str { match self { $( ErrorKind::$kind => $message, )* } }
        }
    };
}

/// The specification release whose error mappings a route's fronts write (`spec-profile`):
/// the 1.0.1 patch release changed some gRPC codes and HTTP statuses of spec §5.4 without a
/// version bump, so clients and agents built against either exist.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Specification 1.0.0.
    V1_0_0,
    /// Specification 1.0.1, whose table the reference SDK follows.
    #[default]
    V1_0_1,
}

impl Profile {
    /// Both profiles, oldest first.
    pub const ALL: [Profile; 2] = [Profile::V1_0_0, Profile::V1_0_1];

    /// The release as configured and documented (`1.0.0`, `1.0.1`).
    pub fn name(self) -> &'static str {
        match self {
            Profile::V1_0_0 => "1.0.0",
            Profile::V1_0_1 => "1.0.1",
        }
    }

    /// The profile named `name`, as `spec-profile` takes it.
    pub fn from_name(name: &str) -> Result<Profile, String> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| format!("{name:?} is not a profile: 1.0.0 or 1.0.1"))
    }
}

error_table! {
    // kind: JSON-RPC code, gRPC status [1.0.0, 1.0.1], HTTP status [1.0.0, 1.0.1], ErrorInfo
    // reason, [gRPC, HTTP] status read as this row without a reason, standard message.
    // A status only 1.0.0 gave a row is read as it where no other row has it: 409 and 415
    // are; 1.0.0's UNIMPLEMENTED stays method-not-found (four rows had it), and 502 is what
    // any proxy says.
    /// The body is not valid JSON.
    ParseError: -32700, [InvalidArgument, InvalidArgument], [400, 400], None, [None, None],
        "Invalid JSON payload";
    /// The body is JSON but not a JSON-RPC request object.
    InvalidRequest: -32600, [InvalidArgument, InvalidArgument], [400, 400], Some("INVALID_REQUEST"),
        [None, None], "Request payload validation error";
    /// The method names no A2A operation.
    MethodNotFound: -32601, [Unimplemented, Unimplemented], [501, 501], Some("METHOD_NOT_FOUND"),
        [Some(Code::Unimplemented), Some(501)], "Method not found";
    /// The params do not decode into the operation's request, or a value is refused.
    InvalidParams: -32602, [InvalidArgument, InvalidArgument], [400, 400], Some("INVALID_PARAMS"),
        [Some(Code::InvalidArgument), Some(400)], "Invalid parameters";
    /// The agent failed, or the gateway's path to it did (an `ErrorInfo` of domain
    /// `a2a-gateway` says which).
    Internal: -32603, [Internal, Internal], [500, 500], Some("INTERNAL_ERROR"),
        [Some(Code::Internal), Some(500)], "Internal error";
    /// No such task, or none the caller may see.
    TaskNotFound: -32001, [NotFound, NotFound], [404, 404], Some("TASK_NOT_FOUND"),
        [Some(Code::NotFound), Some(404)], "Task not found";
    /// The task is in a state that cannot be canceled.
    TaskNotCancelable: -32002, [FailedPrecondition, FailedPrecondition], [409, 400],
        Some("TASK_NOT_CANCELABLE"), [None, Some(409)], "Task cannot be canceled";
    /// The agent does not support push notifications.
    PushNotificationNotSupported: -32003, [Unimplemented, FailedPrecondition], [400, 400],
        Some("PUSH_NOTIFICATION_NOT_SUPPORTED"), [None, None], "Push Notification is not supported";
    /// The agent does not support the operation.
    UnsupportedOperation: -32004, [Unimplemented, FailedPrecondition], [400, 400],
        Some("UNSUPPORTED_OPERATION"), [None, None], "This operation is not supported";
    /// A part's media type is not one the agent accepts.
    ContentTypeNotSupported: -32005, [InvalidArgument, InvalidArgument], [415, 400],
        Some("CONTENT_TYPE_NOT_SUPPORTED"), [None, Some(415)], "Incompatible content types";
    /// The agent's reply does not follow the protocol.
    InvalidAgentResponse: -32006, [Internal, Internal], [502, 500], Some("INVALID_AGENT_RESPONSE"),
        [None, None], "Invalid agent response";
    /// The agent has no extended card.
    ExtendedAgentCardNotConfigured: -32007, [FailedPrecondition, FailedPrecondition], [400, 400],
        Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED"), [None, None],
        "Authenticated Extended Card is not configured";
    /// The agent requires an extension the client did not declare.
    ExtensionSupportRequired: -32008, [FailedPrecondition, FailedPrecondition], [400, 400],
        Some("EXTENSION_SUPPORT_REQUIRED"), [None, None], "Extension support required";
    /// The agent does not support the client's protocol version.
    VersionNotSupported: -32009, [Unimplemented, FailedPrecondition], [400, 400],
        Some("VERSION_NOT_SUPPORTED"), [None, None], "Version not supported";
    /// The call carries no valid credentials.
    Unauthenticated: -31401, [Unauthenticated, Unauthenticated], [401, 401], None,
        [Some(Code::Unauthenticated), Some(401)], "Unauthenticated";
    /// The caller may not make this call.
    PermissionDenied: -31403, [PermissionDenied, PermissionDenied], [403, 403], None,
        [Some(Code::PermissionDenied), Some(403)], "Permission denied";
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
            .find(|k| k.read_grpc() == Some(code))
            .unwrap_or(ErrorKind::Internal)
    }

    /// The row for an HTTP status when neither reason nor status name decides.
    pub(crate) fn from_http(status: u16) -> ErrorKind {
        ErrorKind::ALL
            .iter()
            .copied()
            .find(|k| k.read_http() == Some(status))
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
            for profile in Profile::ALL {
                let (grpc, http) = (kind.grpc(profile), kind.http(profile));
                // A status read as a row is that row's in some profile, and reads back.
                let grpc_read = kind.read_grpc() == Some(grpc);
                assert_eq!(ErrorKind::from_grpc(grpc) == kind, grpc_read, "{kind:?}");
                let http_read = kind.read_http() == Some(http);
                assert_eq!(ErrorKind::from_http(http) == kind, http_read, "{kind:?}");
            }
            if let Some(code) = kind.read_grpc() {
                assert!(Profile::ALL.iter().any(|&p| kind.grpc(p) == code));
                assert_eq!(ErrorKind::from_grpc(code), kind, "{kind:?}");
            }
            if let Some(status) = kind.read_http() {
                assert!(Profile::ALL.iter().any(|&p| kind.http(p) == status));
                assert_eq!(ErrorKind::from_http(status), kind, "{kind:?}");
            }
        }
    }

    /// A status only 1.0.0 gave a row is read as that row only where no other row has it
    /// in either profile.
    #[test]
    fn statuses_of_1_0_0_are_read_only_where_unambiguous() {
        for &kind in ErrorKind::ALL {
            let others = || ErrorKind::ALL.iter().filter(move |&&o| o != kind);
            if let Some(s) = kind
                .read_http()
                .filter(|&s| s != kind.http(Profile::V1_0_1))
            {
                assert!(others().all(|o| Profile::ALL.iter().all(|&p| o.http(p) != s)));
            }
            if let Some(c) = kind
                .read_grpc()
                .filter(|&c| c != kind.grpc(Profile::V1_0_1))
            {
                assert!(others().all(|o| Profile::ALL.iter().all(|&p| o.grpc(p) != c)));
            }
        }
    }

    /// The rows the 1.0.1 patch release changed (spec §5.4 of each release); all others
    /// are the same in both.
    #[test]
    fn the_profiles_differ_where_1_0_1_changed_the_table() {
        use ErrorKind::*;
        use Profile::*;
        let changed_http = [
            (TaskNotCancelable, 409, 400),
            (ContentTypeNotSupported, 415, 400),
            (InvalidAgentResponse, 502, 500),
        ];
        let changed_grpc = [
            PushNotificationNotSupported,
            UnsupportedOperation,
            VersionNotSupported,
        ];
        for &kind in ErrorKind::ALL {
            match changed_http.iter().find(|(k, ..)| *k == kind) {
                Some(&(_, old, new)) => {
                    assert_eq!((kind.http(V1_0_0), kind.http(V1_0_1)), (old, new))
                }
                None => assert_eq!(kind.http(V1_0_0), kind.http(V1_0_1), "{kind:?}"),
            }
            if changed_grpc.contains(&kind) {
                assert_eq!(kind.grpc(V1_0_0), Code::Unimplemented);
                assert_eq!(kind.grpc(V1_0_1), Code::FailedPrecondition);
            } else {
                assert_eq!(kind.grpc(V1_0_0), kind.grpc(V1_0_1), "{kind:?}");
            }
        }
        assert_eq!(ErrorKind::from_http(409), TaskNotCancelable);
        assert_eq!(ErrorKind::from_http(415), ContentTypeNotSupported);
        assert_eq!(ErrorKind::from_grpc(Code::Unimplemented), MethodNotFound);
    }

    #[test]
    fn profiles_are_named_as_configured() {
        for profile in Profile::ALL {
            assert_eq!(Profile::from_name(profile.name()), Ok(profile));
        }
        assert!(Profile::from_name("1.0").is_err());
        assert_eq!(Profile::default(), Profile::V1_0_1);
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
                if a.read_grpc().is_some() {
                    assert_ne!(a.read_grpc(), b.read_grpc(), "{a:?} {b:?}");
                }
                if a.read_http().is_some() {
                    assert_ne!(a.read_http(), b.read_http(), "{a:?} {b:?}");
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
            let profile = Profile::V1_0_1;
            assert_eq!(
                (kind.code(), kind.grpc(profile), kind.http(profile)),
                (code, grpc, http)
            );
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

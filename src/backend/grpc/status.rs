//! The gRPC status of a reply (`grpc-status`, `grpc-message`, `grpc-status-details-bin`),
//! decoded from the backend's header block without any path that can panic: whatever the
//! backend sends becomes a defined error. The status maps through the error table (by
//! `ErrorInfo.reason` first); a status code that is not a number is a bad response;
//! details that are not base64 are replaced by a gateway detail saying so, while the
//! status itself still maps.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use http::{HeaderMap, HeaderName};
use serde_json::json;
use tonic::Code;

use crate::backend::error::Seen;
use crate::backend::fault::Fault;
use crate::backend::{Error, Status};
use crate::protocol::details;
use crate::protocol::error::{A2aError, ErrorKind, GatewayFault, GATEWAY_DOMAIN};

const STATUS: HeaderName = HeaderName::from_static("grpc-status");
const MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// gRPC's binary headers are base64, padded or not (gRPC over HTTP/2, "Custom-Metadata").
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The status in `headers`: `None` when there is no `grpc-status`, `Ok` for OK, else the
/// agent's error (or a bad response).
pub fn check(headers: &HeaderMap) -> Option<Result<(), Error>> {
    let value = headers.get(STATUS)?;
    Some(match code(value.as_bytes()) {
        Err(fault) => Err(fault.into()),
        Ok(Code::Ok) => Ok(()),
        Ok(code) => Err(error(code, headers)),
    })
}

/// A status code: a 32-bit number; numbers gRPC does not define are UNKNOWN (as the gRPC
/// spec says); anything else is not a status.
fn code(value: &[u8]) -> Result<Code, Fault> {
    let number = std::str::from_utf8(value)
        .ok()
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<i32>().ok());
    match number {
        Some(number) => Ok(Code::from_i32(number)),
        None => {
            let shown = String::from_utf8_lossy(&value[..value.len().min(32)]).into_owned();
            Err(Fault::BadResponse(format!(
                "grpc-status {shown:?} is not a status code"
            )))
        }
    }
}

/// The agent's error for a non-OK `code`: message and details from the headers.
fn error(code: Code, headers: &HeaderMap) -> Error {
    let message = headers
        .get(MESSAGE)
        .map(|m| {
            percent_encoding::percent_decode(m.as_bytes())
                .decode_utf8_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let data = match headers.get(DETAILS) {
        None => Vec::new(),
        Some(encoded) => match BASE64.decode(encoded.as_bytes()) {
            Ok(bytes) => details::from_status_bytes(&bytes),
            Err(e) => vec![json!({
                "@type": details::ERROR_INFO,
                "reason": GatewayFault::BackendBadResponse.reason(),
                "domain": GATEWAY_DOMAIN,
                "metadata": {
                    "header": DETAILS.as_str(),
                    "problem": format!("not base64: {e}"),
                },
            })],
        },
    };
    let error = A2aError::from_backend(ErrorKind::from_grpc(code), &message, data);
    Error::agent(error, Status::Grpc(code))
}

/// A reply without `grpc-status` by its HTTP status: the gRPC spec's mapping where it
/// gives a code A2A has its own error for (401, 403, 404), else `BACKEND_BAD_RESPONSE`.
pub fn from_http(status: http::StatusCode) -> Error {
    let code = match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    let message = format!(
        "the backend answered HTTP {} without a gRPC status",
        status.as_u16()
    );
    let kind = ErrorKind::from_grpc(code);
    if kind != ErrorKind::Internal {
        let error = A2aError::from_backend(kind, &message, Vec::new());
        return Error::agent(error, Status::Grpc(code));
    }
    // No agent wrote this (a proxy's 502 page, a web server): as on the HTTP+JSON binding
    // it is the gateway's BACKEND_BAD_RESPONSE with the HTTP status, not a bare -32603
    // that clients and balancing would take for the agent's own internal error.
    let seen = Seen {
        http_status: Some(status),
        ..Seen::default()
    };
    Error::seen(Fault::BadResponse(message), seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use prost::Message as _;

    fn headers(pairs: &[(HeaderName, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    /// The client's error of a status that is one.
    fn client(checked: Option<Result<(), Error>>) -> A2aError {
        A2aError::from(checked.unwrap().unwrap_err())
    }

    #[test]
    fn codes() {
        assert!(check(&HeaderMap::new()).is_none());
        assert!(matches!(check(&headers(&[(STATUS, b"0")])), Some(Ok(()))));
        let not_found = client(check(&headers(&[(STATUS, b"5")])));
        assert_eq!(not_found.kind, ErrorKind::TaskNotFound);
        for unknown in [&b"17"[..], b"2147483647", b"2"] {
            let err = client(check(&headers(&[(STATUS, unknown)])));
            assert_eq!(err.kind, ErrorKind::Internal, "{unknown:?}");
            assert!(err.data.is_empty(), "an agent error, not a fault");
        }
        for garbage in [&b"abc"[..], b"", b"-1", b" 5", b"99999999999"] {
            let err = client(check(&headers(&[(STATUS, garbage)])));
            assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE", "{garbage:?}");
        }
    }

    #[test]
    fn http_statuses_without_a_grpc_status() {
        let err = A2aError::from(from_http(http::StatusCode::UNAUTHORIZED));
        assert_eq!(err.kind, ErrorKind::Unauthenticated);
        assert!(err.data.is_empty(), "mapped as gRPC says, not a fault");
        for status in [400, 429, 500, 502, 503, 504] {
            let err = A2aError::from(from_http(http::StatusCode::from_u16(status).unwrap()));
            assert_eq!(err.kind, ErrorKind::Internal);
            assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE", "{status}");
            assert_eq!(err.data[0]["metadata"]["httpStatus"], status.to_string());
        }
    }

    #[test]
    fn messages_are_percent_decoded() {
        let err = client(check(&headers(&[
            (STATUS, b"5"),
            (MESSAGE, b"no %E2%9C%93 task%zz"),
        ])));
        assert_eq!(err.message, "no \u{2713} task%zz");
    }

    #[test]
    fn details_decode_and_garbage_is_reported_not_fatal() {
        let info = tonic_types::pb::ErrorInfo {
            reason: "TASK_NOT_CANCELABLE".into(),
            domain: "a2a-protocol.org".into(),
            metadata: Default::default(),
        };
        let status = tonic_types::pb::Status {
            code: 9,
            message: "m".into(),
            details: vec![prost_types::Any {
                type_url: details::ERROR_INFO.into(),
                value: info.encode_to_vec(),
            }],
        };
        let encoded =
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(status.encode_to_vec());
        let err = client(check(&headers(&[
            (STATUS, b"9"),
            (DETAILS, encoded.as_bytes()),
        ])));
        assert_eq!(err.kind, ErrorKind::TaskNotCancelable);
        assert_eq!(err.data[0]["reason"], "TASK_NOT_CANCELABLE");

        let err = client(check(&headers(&[
            (STATUS, b"5"),
            (DETAILS, b"!!not base64!!"),
        ])));
        assert_eq!(err.kind, ErrorKind::TaskNotFound, "the status still maps");
        assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE");
        assert_eq!(err.data[0]["metadata"]["header"], DETAILS.as_str());
    }
}

//! The HTTP+JSON front's errors (spec 11.6): the `google.rpc.Status` JSON body
//! (`{"error":{"code","status","message","details"}}`, the shape `backend/rest.rs` reads)
//! and the HTTP status of each error row.

use http::StatusCode;
use tonic::Code;

use crate::protocol::error::{A2aError, ErrorKind, Profile};

/// The HTTP status the front answers an error of `kind` with: the error table's column
/// of the route's `profile` (`spec-profile`). Every error status of the front (bodies and
/// SSE error events) is chosen here.
pub(crate) fn http_status(kind: ErrorKind, profile: Profile) -> StatusCode {
    StatusCode::from_u16(kind.http(profile)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The `google.rpc.Status` body of `err` answered with `status`: `code` repeats the HTTP
/// status, `status` names the error row's gRPC code, `details` are the error's details
/// (ProtoJSON `Any` objects, an `ErrorInfo` among them for A2A errors).
pub(crate) fn body(err: &A2aError, status: StatusCode, profile: Profile) -> Vec<u8> {
    let body = serde_json::json!({ "error": {
        "code": status.as_u16(),
        "status": code_name(err.kind.grpc(profile)),
        "message": err.message,
        "details": err.data,
    }});
    // A `Value` always serializes.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The canonical name of a gRPC code (`NotFound` → `NOT_FOUND`), as `google.rpc.Status`
/// JSON carries it.
fn code_name(code: Code) -> String {
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_are_canonical() {
        assert_eq!(code_name(Code::Ok), "OK");
        assert_eq!(code_name(Code::NotFound), "NOT_FOUND");
        assert_eq!(code_name(Code::FailedPrecondition), "FAILED_PRECONDITION");
        assert_eq!(code_name(Code::Unauthenticated), "UNAUTHENTICATED");
    }

    /// Every row's body carries its status, code name and reason, as the REST backend
    /// reads them back.
    #[test]
    fn every_row_has_a_status_body() {
        for (&kind, profile) in ErrorKind::ALL
            .iter()
            .flat_map(|k| Profile::ALL.map(|p| (k, p)))
        {
            let err = A2aError::a2a(kind, "m");
            let status = http_status(kind, profile);
            assert_eq!(status.as_u16(), kind.http(profile), "{kind:?}");
            let body = body(&err, status, profile);
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"]["code"], kind.http(profile), "{kind:?}");
            assert_eq!(body["error"]["status"], code_name(kind.grpc(profile)));
            assert_eq!(body["error"]["message"], "m");
            let reason = &body["error"]["details"][0]["reason"];
            assert_eq!(reason.as_str(), kind.reason(), "{kind:?}");
        }
    }
}

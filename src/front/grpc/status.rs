//! The gRPC front's statuses: an `A2aError` as its row's gRPC code in the route's profile,
//! its message, and its `error.data` as `google.rpc.Status` details
//! (`grpc-status-details-bin`, spec 10.6). A refusal keeps what HTTP said in gRPC's terms:
//! 401 → UNAUTHENTICATED (with its challenges as `www-authenticate` metadata), 403 →
//! PERMISSION_DENIED, a limit → RESOURCE_EXHAUSTED (with `retry-after` metadata). A fault of
//! the gateway's path that a gRPC client acts on by its code is given that code:
//! UNAVAILABLE for an unreachable agent or a stopping gateway, DEADLINE_EXCEEDED for a
//! deadline; its `ErrorInfo` (domain `a2a-gateway`) says which all the same.

use serde_json::Value;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use crate::front::limits::{Refusal, RefusedBy};
use crate::protocol::details::{self, ERROR_INFO};
use crate::protocol::error::{A2aError, GatewayFault, Profile, GATEWAY_DOMAIN};

/// The status of `err` in `profile`.
pub(crate) fn of_error(err: &A2aError, profile: Profile) -> Status {
    let code = fault_code(&err.data).unwrap_or_else(|| err.kind.grpc(profile));
    with_details(code, err, MetadataMap::new())
}

/// The status of a call the gateway refused.
pub(crate) fn of_refusal(refusal: &Refusal, profile: Profile) -> Status {
    let mut metadata = MetadataMap::new();
    for challenge in &refusal.challenges {
        if let Ok(value) = MetadataValue::try_from(challenge.as_bytes()) {
            metadata.append("www-authenticate", value);
        }
    }
    if let Some(seconds) = refusal.retry_after {
        metadata.insert("retry-after", MetadataValue::from(seconds));
    }
    let code = match refusal.by {
        // As the same reason is coded where it is an error: an overloaded gateway is
        // UNAVAILABLE (HTTP's 503), a rate or size limit RESOURCE_EXHAUSTED.
        RefusedBy::Limit(_) => fault_code(&refusal.error.data).unwrap_or(Code::ResourceExhausted),
        RefusedBy::Authentication | RefusedBy::Authorization => refusal.error.kind.grpc(profile),
    };
    with_details(code, &refusal.error, metadata)
}

fn with_details(code: Code, err: &A2aError, metadata: MetadataMap) -> Status {
    let details = details::to_status_bytes(code as i32, &err.message, &err.data);
    Status::with_details_and_metadata(code, err.message.clone(), details.into(), metadata)
}

/// The code of a gateway fault a gRPC client tells by its code, from its `ErrorInfo`.
fn fault_code(data: &[Value]) -> Option<Code> {
    let reason = data.iter().find_map(|d| {
        let is_info = d.get("@type")?.as_str()? == ERROR_INFO;
        let ours = d.get("domain")?.as_str()? == GATEWAY_DOMAIN;
        (is_info && ours)
            .then(|| d.get("reason")?.as_str())
            .flatten()
    })?;
    let unavailable = [
        GatewayFault::BackendUnavailable,
        GatewayFault::ShuttingDown,
        GatewayFault::Overloaded,
    ];
    if unavailable.iter().any(|f| f.reason() == reason) {
        Some(Code::Unavailable)
    } else if reason == GatewayFault::BackendDeadlineExceeded.reason() {
        Some(Code::DeadlineExceeded)
    } else if reason == GatewayFault::RateLimited.reason() {
        Some(Code::ResourceExhausted)
    } else {
        None
    }
}

//! Authorize: the route's `allow` rules (`auth::rules`) decide whether the caller may make
//! this call, for this tenant. A refused call gets HTTP 403 and a JSON-RPC error whose
//! `ErrorInfo` (`PERMISSION_DENIED`, domain `a2a-gateway`) names what no rule granted; it
//! never reaches the agent.

use http::StatusCode;
use serde_json::json;

use crate::auth::rules::{Caller, Denied};
use crate::front::call::{Answer, Exchange, Layer};
use crate::front::limits::{Refusal, RefusedBy};
use crate::protocol::details::ERROR_INFO;
use crate::protocol::error::{A2aError, ErrorKind, GATEWAY_DOMAIN};
use crate::protocol::ops::{Op, Request};

/// Lets through to the layer inside only the calls a rule allows.
pub struct Authorize<L>(pub L);

impl<L: Layer<Box<Request>> + Sync> Layer<Box<Request>> for Authorize<L> {
    type Events = L::Events;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        request: Box<Request>,
    ) -> Result<Answer<L::Events>, A2aError> {
        if let Some(rules) = &x.gateway.allow {
            let caller = Caller {
                principal: x.principal.as_ref(),
                op: x.op,
                tenant: request.tenant(),
            };
            if let Err(denied) = rules.check(&caller) {
                return Ok(Answer::Refused(Box::new(refusal(x.op, &denied))));
            }
        }
        self.0.call(x, request).await
    }
}

/// The 403 of a call no rule allows. It names the method and the fields no rule matched,
/// never the caller's name, claims or tenant.
fn refusal(op: Op, denied: &Denied) -> Refusal {
    let missing: Vec<_> = denied.missing.iter().map(|f| f.as_str()).collect();
    let missing = missing.join(",");
    let message = format!(
        "permission denied: no allow rule of this route lets this caller call {} (not matched: {missing}); the call did not reach the agent",
        op.name()
    );
    let info = json!({
        "@type": ERROR_INFO,
        "reason": "PERMISSION_DENIED",
        "domain": GATEWAY_DOMAIN,
        "metadata": {"method": op.name(), "missing": missing},
    });
    Refusal {
        by: RefusedBy::Authorization,
        status: StatusCode::FORBIDDEN,
        retry_after: None,
        challenges: Vec::new(),
        error: A2aError {
            kind: ErrorKind::PermissionDenied,
            message,
            data: vec![info],
        },
    }
}

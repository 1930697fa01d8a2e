//! Authenticate: the route's authentication (`auth::Authenticator`) reads the request head
//! and sets the call's principal, or refuses the call with 401, `WWW-Authenticate` and a
//! JSON-RPC error (`UNAUTHENTICATED`, domain `a2a-gateway`) that says what is wrong without
//! the credential; a refused call reaches no layer below. A route without authentication
//! passes through untouched. The JSON-RPC front authenticates a request's head once,
//! before it reads the body (`jsonrpc::handle`), so its calls (a batch's members too)
//! arrive with their principal set and this layer only records it; a call that arrives
//! without one is authenticated here.

use std::future::Future;

use futures::future::Either;
use serde_json::json;

use crate::auth::authenticator::{AuthFailure, Authenticator};
use crate::front::call::{Answer, Exchange, Layer};
use crate::front::limits::{Refusal, RefusedBy};
use crate::protocol::details::ERROR_INFO;
use crate::protocol::error::{A2aError, ErrorKind, GATEWAY_DOMAIN};

/// Authenticates the call before the layer inside.
pub struct Authenticate<L>(pub L);

impl<In: Send, L: Layer<In> + Sync> Layer<In> for Authenticate<L> {
    type Events = L::Events;

    /// Not an `async fn`: a call that needs no authentication (none configured, or its
    /// batch's done) is the inner layer's future itself, so a route without
    /// authentication carries none of this layer's state (bytes per call,
    /// tests/it/cost_budget.rs); an authenticated call pays one allocation for it.
    fn call(
        &self,
        x: &mut Exchange<'_>,
        input: In,
    ) -> impl Future<Output = Result<Answer<L::Events>, A2aError>> + Send {
        let gateway = x.gateway;
        let auth = match (&gateway.auth, &x.principal) {
            (Some(auth), None) => auth,
            (_, principal) => {
                if let Some(principal) = principal {
                    x.record.principal(principal);
                }
                return Either::Right(self.0.call(x, input));
            }
        };
        Either::Left(Box::pin(async move {
            match auth.authenticate(x.head).await {
                Ok(principal) => {
                    x.record.principal(&principal);
                    x.principal = Some(principal);
                }
                Err(failure) => return Ok(Answer::Refused(Box::new(refusal(auth, &failure)))),
            }
            self.0.call(x, input).await
        }))
    }
}

/// The refusal of a call whose credentials failed: 401, a challenge per scheme, and an
/// `ErrorInfo` whose metadata names the failed scheme and why.
pub fn refusal(auth: &Authenticator, failure: &AuthFailure) -> Refusal {
    let message = format!(
        "{}: {}; the call did not reach the agent",
        ErrorKind::Unauthenticated.message(),
        failure.why
    );
    let mut error = A2aError::a2a(ErrorKind::Unauthenticated, message);
    error.data.push(json!({
        "@type": ERROR_INFO,
        "reason": "UNAUTHENTICATED",
        "domain": GATEWAY_DOMAIN,
        "metadata": {
            "scheme": failure.scheme_label(),
            "why": failure.why,
            "accepted": auth.schemes(),
        },
    }));
    Refusal {
        by: RefusedBy::Authentication,
        status: http::StatusCode::UNAUTHORIZED,
        retry_after: None,
        challenges: auth.challenges(failure),
        error,
    }
}

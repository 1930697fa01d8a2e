//! Push check: a push config the request gives the agent must pass the route's push guard
//! (`push/guard.rs`), so a refused URL never reaches the agent; on a relaying route it is
//! then replaced by the gateway's callback and a sealed token (`push/relay.rs`), whose
//! replies `invoke` shows the client as it registered them. Where a relay is configured, a
//! Delete goes on only for a config the caller may touch (`invoke::deletable`), after which
//! the relay's callback stops trusting its token (`push::relay::verified`), and a config
//! for an existing task only when it replaces none it may not (`invoke::creatable`); whose
//! those are, `invoke::Keeper` says.

use crate::front::call::invoke::{creatable, deletable, Keeper};
use crate::front::call::{Answer, Exchange, Layer};
use crate::proto::DeleteTaskPushNotificationConfigRequest;
use crate::protocol::error::A2aError;
use crate::protocol::ops::{Request, UnaryRequest};
use crate::telemetry::PushRegistration;

/// Checks the request's push URL, if any, and relays it, before the layer inside.
pub struct PushCheck<L>(pub L);

impl<L: Layer<Box<Request>> + Sync> Layer<Box<Request>> for PushCheck<L> {
    type Events = L::Events;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        mut request: Box<Request>,
    ) -> Result<Answer<L::Events>, A2aError> {
        if x.dialect.pushed_url(&request).is_some() {
            // Boxed: only a call that carries a push URL pays for the check's future (the
            // resolver's is large).
            Box::pin(check(x, &mut request)).await?;
            if let Some(keeper) = Keeper::of(x.gateway) {
                // Boxed too: only a registration where a relay is configured asks the agent
                // first.
                Box::pin(creatable(x, &keeper, &request)).await?;
            }
        }
        if let (
            Some(keeper),
            Request::Unary(UnaryRequest::DeleteTaskPushNotificationConfig(delete)),
        ) = (Keeper::of(x.gateway), &*request)
        {
            // Boxed too: only a Delete where a relay is configured pays for asking the agent
            // (and every other call's future stays as small as it was).
            let delete = delete.clone();
            return Box::pin(self.delete(x, keeper, delete, request)).await;
        }
        self.0.call(x, request).await
    }
}

impl<L: Layer<Box<Request>> + Sync> PushCheck<L> {
    /// A Delete where a relay is configured: on only for a config the caller may touch
    /// (`invoke::deletable`); then the relay's callback stops trusting its token here at
    /// once, whatever the agent answered (a failed Delete only costs the next post a
    /// lookup).
    async fn delete(
        &self,
        x: &mut Exchange<'_>,
        keeper: Keeper<'_>,
        delete: DeleteTaskPushNotificationConfigRequest,
        request: Box<Request>,
    ) -> Result<Answer<L::Events>, A2aError> {
        let token = deletable(x, &keeper, &delete).await?;
        let answer = self.0.call(x, request).await;
        if let Some(relay) = &x.gateway.relay {
            relay.settings.verified.forget(&token);
        }
        answer
    }
}

/// Checks the push config `request` carries, and seals it on a relaying route.
async fn check(x: &Exchange<'_>, request: &mut Request) -> Result<(), A2aError> {
    let Some((url, field)) = x.dialect.pushed_url(request) else {
        return Ok(());
    };
    let (gateway, metrics) = (x.gateway, &x.gateway.route_metrics);
    let mut outcome = PushRegistration::Passed;
    if let Some(guard) = &gateway.push {
        if let Err(refusal) = guard.check_pushed(url, field).await {
            metrics.push_registration(PushRegistration::Refused);
            return Err(refusal);
        }
        outcome = PushRegistration::Guarded;
    }
    if let Some(relay) = &gateway.relay {
        let owner = crate::push::seal::owner_digest(x.principal.as_ref());
        if let Err(refusal) = relay.seal_in(request, &owner, field) {
            metrics.push_registration(PushRegistration::Refused);
            return Err(refusal);
        }
        outcome = PushRegistration::Relayed;
    }
    metrics.push_registration(outcome);
    Ok(())
}

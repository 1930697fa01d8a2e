//! Push check: a push URL the request gives the agent must pass the route's push guard
//! (`push/guard.rs`), so a refused URL never reaches the agent.

use crate::front::call::{Answer, Exchange, Layer};
use crate::protocol::error::A2aError;
use crate::protocol::ops::Request;

/// Checks the request's push URL, if any, before the layer inside.
pub struct PushCheck<L>(pub L);

impl<L: Layer<Box<Request>> + Sync> Layer<Box<Request>> for PushCheck<L> {
    type Events = L::Events;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        request: Box<Request>,
    ) -> Result<Answer<L::Events>, A2aError> {
        if let (Some(guard), Some((url, field))) = (&x.gateway.push, x.dialect.pushed_url(&request))
        {
            // Boxed: only a call that carries a push URL pays for the resolver's (large)
            // future.
            Box::pin(guard.check_pushed(url, field)).await?;
        }
        self.0.call(x, request).await
    }
}

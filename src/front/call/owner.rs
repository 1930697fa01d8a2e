//! Owner: on a `task-owner` route, every task and context id a call names must be one the
//! gateway sealed for its caller (`auth::owner`); the seal comes off here, and a call
//! naming any other id is answered as an unknown task without reaching the agent. The
//! caller's tags are kept in `Exchange::owner`: the replies' ids are sealed with them in
//! `invoke`, where the typed reply is.

use crate::front::call::{Answer, Exchange, Layer};
use crate::protocol::error::A2aError;
use crate::protocol::ops::Request;

/// Checks and opens the request's ids for the layer inside.
pub struct Owner<L>(pub L);

impl<L: Layer<Box<Request>> + Sync> Layer<Box<Request>> for Owner<L> {
    type Events = L::Events;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        mut request: Box<Request>,
    ) -> Result<Answer<L::Events>, A2aError> {
        if let Some(keys) = &x.gateway.owner {
            let caller = keys.caller(x.principal.as_ref());
            caller.restore_in(&mut request)?;
            x.owner = Some(Box::new(caller));
        }
        self.0.call(x, request).await
    }
}

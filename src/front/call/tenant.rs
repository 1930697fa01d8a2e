//! Tenant: a route with a fixed tenant sets it on requests that name none and refuses
//! requests naming another, so a route never leads to another tenant.

use crate::front::call::{Answer, Exchange, Layer};
use crate::protocol::error::A2aError;
use crate::protocol::ops::Request;

/// Pins the route's tenant on the request for the layer inside.
pub struct Tenant<L>(pub L);

impl<L: Layer<Box<Request>> + Sync> Layer<Box<Request>> for Tenant<L> {
    type Events = L::Events;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        mut request: Box<Request>,
    ) -> Result<Answer<L::Events>, A2aError> {
        if let Some(tenant) = &x.gateway.tenant {
            pin_tenant(&mut request, tenant)?;
        }
        self.0.call(x, request).await
    }
}

fn pin_tenant(request: &mut Request, tenant: &str) -> Result<(), A2aError> {
    let field = request.tenant_mut();
    if field.is_empty() {
        field.push_str(tenant);
    } else if field != tenant {
        let why = format!("this endpoint serves tenant {tenant:?} only");
        return Err(A2aError::invalid_params("tenant", &why));
    }
    Ok(())
}

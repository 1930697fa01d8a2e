//! Decode: the call's params, in its dialect, into the typed request every layer inside
//! works on; ids past the bound and a version the gateway does not serve are refused with
//! it (the reference SDK's order: method, then params, then version).

use crate::backend::affinity::ids::{overlong, MAX_ID_BYTES};
use crate::front::call::{Answer, Exchange, Layer};
use crate::front::envelope::Params;
use crate::protocol::error::A2aError;
use crate::protocol::ops::Request;

/// Decodes the params for the layer inside.
pub struct Decode<L>(pub L);

impl<'p, L: Layer<Box<Request>> + Sync> Layer<Option<Params<'p>>> for Decode<L> {
    type Events = L::Events;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        params: Option<Params<'p>>,
    ) -> Result<Answer<L::Events>, A2aError> {
        // Params the envelope's scan decoded were decoded for this same v1.0 operation
        // (it read the same method name). Others are boxed too: the request then travels
        // the layers as one pointer.
        let mut request = match params {
            Some(Params::Decoded(request)) => request,
            Some(Params::Text(text)) => Box::new(x.dialect.decode(x.op, Some(&text))?),
            None => Box::new(x.dialect.decode(x.op, None)?),
        };
        if let Some(length) = match &mut *request {
            Request::Unary(request) => overlong(request),
            Request::Stream(request) => overlong(request),
        } {
            let why = format!("an id of {length} bytes is longer than the {MAX_ID_BYTES} allowed");
            return Err(A2aError::invalid_params("", &why));
        }
        x.dialect.negotiate(x.head)?;
        self.0.call(x, request).await
    }
}

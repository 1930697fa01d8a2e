//! Decode: the call's params, in its dialect, into the typed request every layer inside
//! works on; ids, the tenant and a page token past their bounds and a version the gateway
//! does not serve are refused with it (the reference SDK's order: method, then params,
//! then version). The tenant and the page token become parts of an agent's URL and of
//! gRPC metadata, whose size the agent and its clients bound.

use crate::backend::affinity::ids::{overlong, MAX_ID_BYTES};
use crate::backend::affinity::list::MAX_TOKEN_CHARS;
use crate::front::call::{Answer, Exchange, Layer};
use crate::front::envelope::Params;
use crate::protocol::error::A2aError;
use crate::protocol::ops::{Request, UnaryRequest};

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
        let tenant = request.tenant().len();
        if tenant > MAX_ID_BYTES {
            let why =
                format!("a tenant of {tenant} bytes is longer than the {MAX_ID_BYTES} allowed");
            return Err(A2aError::invalid_params("tenant", &why));
        }
        if let Request::Unary(UnaryRequest::ListTasks(list)) = &*request {
            let token = list.page_token.len();
            // The bound of the tokens the gateway seals itself (affinity): 64 KiB of one made
            // an agent URL no HTTP client builds.
            if token > MAX_TOKEN_CHARS {
                let why = format!(
                    "the page token of {token} bytes is longer than {MAX_TOKEN_CHARS} characters"
                );
                return Err(A2aError::invalid_params("pageToken", &why));
            }
        }
        x.dialect.negotiate(x.head)?;
        self.0.call(x, request).await
    }
}

//! Bearer JWTs: the `[[auth.jwt]]` issuers, their keys (JWKS) and the verification of a
//! token into a principal.
//!
//! Not built yet: a route with `[[auth.jwt]]` is refused at load (`JwtAuth::new`).

use std::sync::Arc;

use super::table::JwtIssuerTable;
use super::Principal;

/// The issuers of one route and their keys.
pub struct JwtAuth {
    /// No value exists until verification is built.
    never: std::convert::Infallible,
}

/// Why a bearer token was refused: said to the client, never echoing the token.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JwtRefusal(pub std::borrow::Cow<'static, str>);

impl JwtAuth {
    /// Checks the issuer tables (no network): an error names the key.
    pub fn new(tables: &[JwtIssuerTable], principal_claim: &str) -> Result<Arc<JwtAuth>, String> {
        let _ = (tables, principal_claim);
        Err("jwt: bearer tokens are not supported yet".to_owned())
    }

    /// Starts fetching and refreshing the issuers' keys in the background.
    pub fn start(self: &Arc<Self>) {
        match self.never {}
    }

    /// The principal a token proves, or why it proves nothing.
    pub async fn verify(&self, token: &str) -> Result<Principal, JwtRefusal> {
        let _ = token;
        match self.never {}
    }
}

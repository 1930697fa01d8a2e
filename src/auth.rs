//! Who calls: the principal a call is made by, as the route's authentication found it
//! (issue 22, `authenticator`: API keys in `api_key`, bearer JWTs in `jwt`, client
//! certificates in `mtls`), and the config
//! tables that say how (`table`). Authentication, authorization
//! and caller-bound tasks join the call stack (`front::call`) as layers that read and set
//! `Exchange::principal`.

pub mod api_key;
pub(crate) mod authenticator;
pub(crate) mod forward;
pub mod jwt;
pub(crate) mod mtls;
pub mod owner;
pub(crate) mod rules;
pub mod table;

use std::sync::Arc;

/// How a principal proved who it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// A verified JWT bearer token.
    Jwt,
    /// A configured API key.
    ApiKey,
    /// The verified client certificate of the TLS connection.
    Mtls,
    /// No credentials, on a route that lets anonymous callers in.
    Anonymous,
}

impl Scheme {
    /// The scheme's name in metrics labels and the access log.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scheme::Jwt => "jwt",
            Scheme::ApiKey => "api-key",
            Scheme::Mtls => "mtls",
            Scheme::Anonymous => "anonymous",
        }
    }
}

/// The caller of one call. Cheap to clone: what it holds is shared.
#[derive(Clone, Debug)]
pub struct Principal {
    /// The caller's name: the JWT's principal claim (qualified by nothing: issuers are
    /// configured, not chosen by the caller), the API key's name, the certificate's identity,
    /// or, for an anonymous caller, empty.
    pub name: Arc<str>,
    /// How the caller proved who it is.
    pub scheme: Scheme,
    /// A JWT's verified claims (`None` for other schemes).
    pub claims: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

impl Principal {
    /// The verified issuer of a JWT principal (its `iss`), empty for other schemes: names are
    /// unique within an issuer, so a caller is its scheme, issuer and name.
    pub(crate) fn issuer(&self) -> &str {
        let iss = self.claims.as_ref().and_then(|claims| claims.get("iss"));
        iss.and_then(serde_json::Value::as_str).unwrap_or("")
    }
}

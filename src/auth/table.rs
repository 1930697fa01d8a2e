//! The config file's `[auth]` and `[[allow]]` tables (`[route.auth]`, `[[route.allow]]` per
//! route), as written: `settings` checks them and builds what the call stack uses. Each key
//! of `[auth]` is every route's default, and a route's own key (a whole sub-table such as
//! `api-keys`) replaces it (`AuthTable::over`), so a route that sets one key keeps the
//! others' schemes; a route's `[[route.allow]]` rules replace the top-level list. Keys are
//! kebab-case, unknown keys are errors naming the route and key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::units::duration_text;

/// `[auth]`: how a route's callers authenticate.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct AuthTable {
    /// Calls without credentials are let in (as the anonymous principal). A route with
    /// any scheme configured refuses them otherwise (unset: false).
    pub(crate) anonymous: Option<bool>,
    /// The JWT claim that names the principal (default `sub`).
    pub(crate) principal_claim: Option<String>,
    /// `[[auth.jwt]]`: the trusted issuers of bearer tokens.
    #[serde(default)]
    pub(crate) jwt: Vec<JwtIssuerTable>,
    /// `[auth.api-keys]`.
    pub(crate) api_keys: Option<ApiKeysTable>,
    /// `[auth.mtls]`: the verified client certificate names the principal.
    pub(crate) mtls: Option<MtlsTable>,
    /// `[auth.forward]`: what the agent is told about the caller.
    pub(crate) forward: Option<ForwardTable>,
    /// Whether the route's agent card is served to anyone (unset: true, as discovery
    /// needs); false: only to callers that authenticate as the route's calls do (401
    /// otherwise), and the catalog leaves it out.
    pub(crate) public_card: Option<bool>,
}

impl AuthTable {
    /// This route's table over the top-level `top`: each key the route gives wins, the
    /// others are `top`'s.
    pub(crate) fn over(self, top: &AuthTable) -> AuthTable {
        AuthTable {
            anonymous: self.anonymous.or(top.anonymous),
            principal_claim: self.principal_claim.or_else(|| top.principal_claim.clone()),
            jwt: match self.jwt.is_empty() {
                true => top.jwt.clone(),
                false => self.jwt,
            },
            api_keys: self.api_keys.or_else(|| top.api_keys.clone()),
            mtls: self.mtls.or_else(|| top.mtls.clone()),
            forward: self.forward.or_else(|| top.forward.clone()),
            public_card: self.public_card.or(top.public_card),
        }
    }

    /// Whether callers without credentials are let in.
    pub(crate) fn lets_anonymous_in(&self) -> bool {
        self.anonymous == Some(true)
    }

    /// Whether a way to authenticate is configured.
    pub(crate) fn has_scheme(&self) -> bool {
        !self.jwt.is_empty() || self.api_keys.is_some() || self.mtls.is_some()
    }

    /// Whether any key is written (the table is not absent).
    pub(crate) fn is_written(&self) -> bool {
        self.has_scheme()
            || self.anonymous.is_some()
            || self.principal_claim.is_some()
            || self.forward.is_some()
            || self.public_card.is_some()
    }
}

/// One `[[auth.jwt]]` issuer.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JwtIssuerTable {
    /// The `iss` tokens must carry; with neither `jwks-url` nor `jwks-file`, its OIDC
    /// discovery document (`/.well-known/openid-configuration`) names the JWKS.
    pub issuer: String,
    /// Accepted `aud` values (at least one must match).
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Accepted `alg` values (default RS256, ES256, EdDSA); `none` and HMAC are refused.
    pub algorithms: Option<Vec<String>>,
    /// Tolerated clock difference for `exp`/`nbf` (default 60s).
    #[serde(default, deserialize_with = "duration_text")]
    pub clock_skew: Option<Duration>,
    /// The URL of the issuer's JWKS, instead of OIDC discovery; not with `jwks-file`.
    pub jwks_url: Option<String>,
    /// A file holding the issuer's JWKS, instead of fetching it; not with `jwks-url`.
    pub jwks_file: Option<PathBuf>,
    /// Least interval between two fetches of the JWKS (an unknown `kid` asks again at most
    /// this often; default 5m, and the JWKS's own `Cache-Control: max-age` when longer).
    #[serde(default, deserialize_with = "duration_text")]
    pub refresh: Option<Duration>,
}

/// `[auth.api-keys]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct ApiKeysTable {
    /// One `NAME SHA256-HEX` per line.
    pub(crate) file: Option<PathBuf>,
    /// Environment variable holding the same lines.
    pub(crate) env: Option<String>,
    /// The request header carrying the key (default `x-api-key`); consumed by the
    /// gateway, never forwarded to the agent.
    pub(crate) header: Option<String>,
}

/// `[auth.mtls]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct MtlsTable {
    /// Which identity of the certificate names the principal: `uri` (a SPIFFE ID), `dns`
    /// or `subject` (default `uri`).
    pub(crate) identity: Option<String>,
}

/// `[auth.forward]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct ForwardTable {
    /// Header carrying the principal's name to the agent.
    pub(crate) principal_header: Option<String>,
    /// Headers carrying chosen claims: header name → claim name.
    #[serde(default)]
    pub(crate) claims: BTreeMap<String, String>,
    /// Whether the client's `Authorization` still goes to the agent (default true; false:
    /// never, verified or not).
    pub(crate) authorization: Option<bool>,
}

/// One `[[allow]]` rule: a call must match one rule when any exists. Every field given
/// must match; an absent field matches anything.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct AllowRule {
    /// Principal names; a trailing `*` matches any rest.
    pub(crate) principals: Option<Vec<String>>,
    /// Claim name → required value (a space-separated claim such as `scope` matches when
    /// it holds the value; an array claim when it contains it).
    pub(crate) claims: Option<BTreeMap<String, String>>,
    /// Authentication schemes (`jwt`, `api-key`, `mtls`, `anonymous`).
    pub(crate) schemes: Option<Vec<String>>,
    /// Method names (v1.0 names, e.g. `SendMessage`, `GetExtendedAgentCard`).
    pub(crate) methods: Option<Vec<String>>,
    /// Tenants.
    pub(crate) tenants: Option<Vec<String>>,
}

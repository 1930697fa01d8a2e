//! One route's authentication, built once from its `[auth]` table (`Authenticator::new`)
//! and shared by every worker: which credential a call presents, whether it proves a
//! principal, and what a refusal tells the client (`WWW-Authenticate` challenges). The
//! call stack's `authenticate` layer asks it; `/metrics` shows its counts.
//!
//! Which credential decides: a call presents at most one of a bearer token (with
//! `[[auth.jwt]]`) and an API key (with `[auth.api-keys]`), both is refused; without
//! either, the connection's verified client certificate (with `[auth.mtls]`); without
//! any, the call is anonymous when `anonymous = true`, else refused. A credential that
//! fails is refused even when anonymous calls are allowed: a caller is never downgraded.
//! Headers of schemes the route does not configure are not read (they may be meant for
//! the agent).

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::api_key::{ApiKeys, ApiKeysError};
use super::jwt::JwtAuth;
use super::mtls::{Identity, PeerIdentity};
use super::table::AuthTable;
use super::{Principal, Scheme};
use crate::telemetry::AuthRow;

/// The API key header when `[auth.api-keys] header` names none.
pub const DEFAULT_KEY_HEADER: &str = "x-api-key";

/// `realm` of the `Bearer` challenge.
const REALM: &str = "a2a-gateway";

/// A route's `[auth]` table that cannot be used; says which key, never a credential.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error(transparent)]
    ApiKeys(#[from] ApiKeysError),
    #[error("auth: no scheme (`jwt`, `api-keys` or `mtls`), so every caller would be let in; say `anonymous = true` if that is meant")]
    NoScheme,
    #[error("auth.api-keys header: {0:?} is not a header name")]
    KeyHeader(String),
    #[error("auth.api-keys header: {0:?} cannot carry a key: {1}")]
    ReservedKeyHeader(String, &'static str),
    #[error("auth.jwt: {0}")]
    Jwt(String),
    #[error("auth.mtls identity: {0}")]
    Identity(String),
    #[error("auth.mtls: the listener asks clients for no certificate (set --tls-cert and --tls-client-ca)")]
    NoClientCertificates,
}

/// Why a call's credentials prove nothing: told to the client, never echoing them.
#[derive(Debug)]
pub struct AuthFailure {
    /// The scheme of the credential that failed; `None`: no (single) credential.
    pub scheme: Option<Scheme>,
    /// No credential at all (and anonymous calls are not taken).
    pub missing: bool,
    pub why: Cow<'static, str>,
}

impl AuthFailure {
    fn of(scheme: Scheme, why: impl Into<Cow<'static, str>>) -> AuthFailure {
        AuthFailure {
            scheme: Some(scheme),
            missing: false,
            why: why.into(),
        }
    }

    /// The failure's label in metrics and the refusal's metadata.
    pub fn scheme_label(&self) -> &'static str {
        self.scheme.map_or("none", Scheme::as_str)
    }
}

/// How one authentication ended, as `/metrics` counts it.
#[derive(Clone, Copy)]
enum Outcome {
    Ok,
    Invalid,
    Missing,
}

/// Metrics labels of the outcomes, in `Outcome`'s order.
const OUTCOMES: [&str; 3] = ["ok", "invalid", "missing"];

/// Metrics rows: the four schemes in `Scheme`'s order, then `none` (no single credential).
const SCHEME_LABELS: [&str; 5] = ["jwt", "api-key", "mtls", "anonymous", "none"];

/// A route's authentication.
pub struct Authenticator {
    anonymous: bool,
    /// Whether the route's card is served without authentication.
    public_card: bool,
    /// The API keys and the header that carries them.
    api_keys: Option<(HeaderName, ApiKeys)>,
    jwt: Option<Arc<JwtAuth>>,
    /// Which name of a verified client certificate is the principal.
    mtls: Option<Identity>,
    /// One challenge per configured scheme, for a call without credentials.
    challenges: Vec<HeaderValue>,
    /// The anonymous principal's name (empty), shared by every anonymous call.
    nobody: Arc<str>,
    /// Authentications by scheme label and outcome.
    counts: [[AtomicU64; OUTCOMES.len()]; SCHEME_LABELS.len()],
}

impl Authenticator {
    /// The authentication `table` configures; `None` without `[auth]`, or with only
    /// `anonymous = true` (then calls carry no principal). A table that names no scheme
    /// and does not let anonymous callers in is an error: it would let everyone in while
    /// saying otherwise. Files are read and issuers checked now; nothing is fetched until
    /// `start`. `client_certificates`: the listener verifies client certificates, which
    /// `[auth.mtls]` needs.
    pub fn new(
        table: &AuthTable,
        client_certificates: bool,
    ) -> Result<Option<Arc<Authenticator>>, AuthConfigError> {
        if !table.has_scheme() {
            return match table.is_written() && !table.lets_anonymous_in() {
                true => Err(AuthConfigError::NoScheme),
                false => Ok(None),
            };
        }
        let mut challenges = Vec::new();
        let jwt = match table.jwt.as_slice() {
            [] => None,
            issuers => {
                let claim = table.principal_claim.as_deref().unwrap_or("sub");
                challenges.push(bearer_challenge(None));
                Some(JwtAuth::new(issuers, claim).map_err(AuthConfigError::Jwt)?)
            }
        };
        let api_keys = match &table.api_keys {
            None => None,
            Some(keys) => {
                let name = keys.header.as_deref().unwrap_or(DEFAULT_KEY_HEADER);
                let lower = name.trim().to_ascii_lowercase();
                if let Some(why) = super::forward::reserved(&lower) {
                    return Err(AuthConfigError::ReservedKeyHeader(name.to_owned(), why));
                }
                let header = HeaderName::from_bytes(lower.as_bytes())
                    .map_err(|_| AuthConfigError::KeyHeader(name.to_owned()))?;
                let challenge = format!("ApiKey header=\"{header}\"");
                challenges
                    .push(HeaderValue::try_from(challenge).expect("a header name is a value"));
                let loaded = ApiKeys::load(keys.file.as_deref(), keys.env.as_deref())?;
                Some((header, loaded))
            }
        };
        let mtls = match &table.mtls {
            None => None,
            Some(_) if !client_certificates => return Err(AuthConfigError::NoClientCertificates),
            Some(mtls) => {
                challenges.push(HeaderValue::from_static("MutualTLS"));
                Some(Identity::parse(mtls.identity.as_deref()).map_err(AuthConfigError::Identity)?)
            }
        };
        Ok(Some(Arc::new(Authenticator {
            anonymous: table.lets_anonymous_in(),
            public_card: table.public_card != Some(false),
            api_keys,
            jwt,
            mtls,
            challenges,
            nobody: Arc::from(""),
            counts: Default::default(),
        })))
    }

    /// Whether callers without credentials are let in (`anonymous = true`).
    pub fn lets_anonymous_in(&self) -> bool {
        self.anonymous
    }

    /// Whether the route's card is served to anyone (`public-card`, default true).
    pub fn card_is_public(&self) -> bool {
        self.public_card
    }

    /// Starts what authenticates in the background (the JWT issuers' key refreshes), on
    /// the current runtime.
    pub fn start(&self) {
        if let Some(jwt) = &self.jwt {
            jwt.start();
        }
    }

    /// The header carrying API keys, if the route takes them: the gateway consumes it, so
    /// it never goes to the agent.
    pub fn key_header(&self) -> Option<&HeaderName> {
        self.api_keys.as_ref().map(|(header, _)| header)
    }

    /// The principal the request `head` proves, or why it proves none; counted.
    pub async fn authenticate(
        &self,
        head: &http::request::Parts,
    ) -> Result<Principal, AuthFailure> {
        let result = self.check(head).await;
        let (scheme, outcome) = match &result {
            Ok(principal) => (Some(principal.scheme), Outcome::Ok),
            Err(failure) if failure.missing => (None, Outcome::Missing),
            Err(failure) => (failure.scheme, Outcome::Invalid),
        };
        let row = match scheme {
            Some(scheme) => scheme as usize,
            None => SCHEME_LABELS.len() - 1,
        };
        self.counts[row][outcome as usize].fetch_add(1, Relaxed);
        result
    }

    async fn check(&self, head: &http::request::Parts) -> Result<Principal, AuthFailure> {
        let headers = &head.headers;
        let bearer = match &self.jwt {
            Some(_) => single(headers, &http::header::AUTHORIZATION, Scheme::Jwt)?,
            None => None,
        };
        let key = match &self.api_keys {
            Some((header, _)) => single(headers, header, Scheme::ApiKey)?,
            None => None,
        };
        match (bearer, key, &self.jwt, &self.api_keys) {
            (Some(_), Some(_), ..) => Err(AuthFailure {
                scheme: None,
                missing: false,
                why: "more than one credential: send a bearer token or an API key".into(),
            }),
            (Some(value), None, Some(jwt), _) => verify_bearer(jwt, value).await,
            (None, Some(value), _, Some((_, keys))) => match keys.verify(value.as_bytes()) {
                Ok(name) => Ok(Principal {
                    name,
                    scheme: Scheme::ApiKey,
                    claims: None,
                }),
                Err(refusal) => Err(AuthFailure::of(Scheme::ApiKey, refusal.why())),
            },
            _ => self.without_credential(head.extensions.get::<Arc<PeerIdentity>>()),
        }
    }

    /// A call that sent no credential: the principal its connection's verified client
    /// certificate names (`peer`), else the anonymous one, where either is taken.
    fn without_credential(
        &self,
        peer: Option<&Arc<PeerIdentity>>,
    ) -> Result<Principal, AuthFailure> {
        if let (Some(identity), Some(peer)) = (self.mtls, peer) {
            return certificate(peer, identity);
        }
        if self.anonymous {
            return Ok(Principal {
                name: self.nobody.clone(),
                scheme: Scheme::Anonymous,
                claims: None,
            });
        }
        Err(AuthFailure {
            scheme: None,
            missing: true,
            why: MISSING.into(),
        })
    }

    /// The `WWW-Authenticate` challenges of a refusal for `failure`: one per configured
    /// scheme; a failed bearer token's says why (RFC 6750 3.1).
    pub fn challenges(&self, failure: &AuthFailure) -> Vec<HeaderValue> {
        let mut challenges = self.challenges.clone();
        if failure.scheme == Some(Scheme::Jwt) && self.jwt.is_some() {
            challenges[0] = bearer_challenge(Some(&failure.why));
        }
        challenges
    }

    /// The schemes this route takes, for a refusal's metadata (`jwt api-key`).
    pub fn schemes(&self) -> String {
        let jwt = self.jwt.as_ref().map(|_| Scheme::Jwt.as_str());
        let keys = self.api_keys.as_ref().map(|_| Scheme::ApiKey.as_str());
        let mtls = self.mtls.map(|_| Scheme::Mtls.as_str());
        let anonymous = self.anonymous.then_some(Scheme::Anonymous.as_str());
        let names: Vec<_> = [jwt, keys, mtls, anonymous].into_iter().flatten().collect();
        names.join(" ")
    }

    /// The counts of `/metrics` for `route`, those not zero.
    pub fn counts<'a>(&self, route: &'a str) -> Vec<AuthRow<'a>> {
        let mut rows = Vec::new();
        for (scheme, row) in SCHEME_LABELS.iter().zip(&self.counts) {
            for (result, count) in OUTCOMES.iter().zip(row) {
                let count = count.load(Relaxed);
                if count > 0 {
                    rows.push(AuthRow {
                        route,
                        scheme,
                        result,
                        count,
                    });
                }
            }
        }
        rows
    }
}

/// The principal a verified client certificate names by `identity`.
fn certificate(peer: &PeerIdentity, identity: Identity) -> Result<Principal, AuthFailure> {
    match peer.name(identity) {
        Some(name) => Ok(Principal {
            name: name.clone(),
            scheme: Scheme::Mtls,
            claims: None,
        }),
        None => Err(AuthFailure::of(
            Scheme::Mtls,
            format!("the client certificate has no {}", identity.label()),
        )),
    }
}

/// Why a call without credentials is refused.
const MISSING: &str = "no credential: this route does not take anonymous calls";

/// The one value of `header`, if sent; two are refused (which would count?).
fn single<'h>(
    headers: &'h HeaderMap,
    header: &HeaderName,
    scheme: Scheme,
) -> Result<Option<&'h HeaderValue>, AuthFailure> {
    let mut values = headers.get_all(header).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => Ok(Some(value)),
        (Some(_), Some(_)) => Err(AuthFailure::of(
            scheme,
            format!("the {header} header is sent more than once"),
        )),
    }
}

/// The principal of an `Authorization: Bearer` token.
async fn verify_bearer(jwt: &JwtAuth, value: &HeaderValue) -> Result<Principal, AuthFailure> {
    let fail = |why: &'static str| Err(AuthFailure::of(Scheme::Jwt, why));
    let Some((scheme, token)) = value.to_str().ok().and_then(|v| v.split_once(' ')) else {
        return fail("the Authorization header is not `Bearer <token>`");
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return fail("the Authorization header is not `Bearer <token>`");
    }
    let token = token.trim();
    if token.is_empty() {
        return fail("the bearer token is empty");
    }
    // `verify` bounds the token's size, before any decoding.
    jwt.verify(token)
        .await
        .map_err(|refusal| AuthFailure::of(Scheme::Jwt, refusal.to_string()))
}

/// The `Bearer` challenge, with `error="invalid_token"` and its description when a token
/// failed. The description keeps only what a quoted-string may hold (RFC 6750 3).
fn bearer_challenge(failed: Option<&str>) -> HeaderValue {
    let mut challenge = format!("Bearer realm=\"{REALM}\"");
    if let Some(why) = failed {
        let why: String = why
            .chars()
            .take(200)
            .map(|c| match c {
                ' '..='~' if c != '"' && c != '\\' => c,
                _ => '?',
            })
            .collect();
        challenge.push_str(&format!(
            ", error=\"invalid_token\", error_description=\"{why}\""
        ));
    }
    HeaderValue::try_from(challenge).expect("visible ASCII is a header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scheme_counts_under_its_own_label() {
        for scheme in [Scheme::Jwt, Scheme::ApiKey, Scheme::Mtls, Scheme::Anonymous] {
            assert_eq!(SCHEME_LABELS[scheme as usize], scheme.as_str());
        }
        assert_eq!(SCHEME_LABELS[SCHEME_LABELS.len() - 1], "none");
    }

    #[test]
    fn a_table_without_a_scheme_is_refused_unless_it_lets_everyone_in() {
        let table = |anonymous, forward| AuthTable {
            anonymous,
            forward,
            ..AuthTable::default()
        };
        let forward = Some(crate::auth::table::ForwardTable::default());
        for refused in [table(Some(false), None), table(None, forward)] {
            let result = Authenticator::new(&refused, false);
            assert!(
                matches!(result, Err(AuthConfigError::NoScheme)),
                "{refused:?}"
            );
        }
        assert!(Authenticator::new(&table(Some(true), None), false)
            .unwrap()
            .is_none());
        assert!(Authenticator::new(&AuthTable::default(), false)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_key_cannot_travel_in_a_header_the_gateway_logs_forwards_or_owns() {
        for header in [
            "x-request-id",
            "authorization",
            "traceparent",
            "host",
            "te",
            ":path",
        ] {
            let table = AuthTable {
                api_keys: Some(crate::auth::table::ApiKeysTable {
                    header: Some(header.to_owned()),
                    env: Some("A2A_GATEWAY_UNSET_TEST_KEYS".to_owned()),
                    ..Default::default()
                }),
                ..AuthTable::default()
            };
            let result = Authenticator::new(&table, false);
            assert!(
                matches!(result, Err(AuthConfigError::ReservedKeyHeader(..))),
                "{header}"
            );
        }
    }

    #[test]
    fn a_bearer_challenge_says_why_in_a_quoted_string_only() {
        let plain = bearer_challenge(None);
        assert_eq!(plain, "Bearer realm=\"a2a-gateway\"");
        let why = "bad \"sig\" \\ \u{7}é";
        let failed = bearer_challenge(Some(why));
        assert_eq!(
            failed,
            "Bearer realm=\"a2a-gateway\", error=\"invalid_token\", \
             error_description=\"bad ?sig? ? ??\""
        );
    }
}

//! Bearer JWTs: the `[[auth.jwt]]` issuers, their keys (JWKS) and the verification of a
//! token into a principal.
//!
//! A token is at most `MAX_TOKEN_SIZE` bytes. Its issuer is chosen by its `iss`, read
//! unverified, among the configured ones; everything else is then checked with that
//! issuer's settings and keys (`issuer`): an accepted asymmetric `alg` (never `none`, never
//! HMAC), the key named by `kid` whose type and `alg` fit, the signature, `iss`, `aud`,
//! `exp` (required), `nbf` and `iat` within the clock skew. Keys come from `store`
//! (file, URL or OIDC discovery, refreshed in the background); verified tokens are
//! remembered in `cache` until their `exp`. Verification uses `jsonwebtoken` 9 on `ring`,
//! the crypto rustls already uses here (its 10+ releases need the RustCrypto `rsa` crate
//! or aws-lc built from C).

mod cache;
mod issuer;
mod keys;
mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::Algorithm;
use serde::Deserialize;
use serde_json::{Map, Value};

use self::cache::TokenCache;
use self::issuer::Issuer;
use self::keys::Lookup;
use super::table::JwtIssuerTable;
use super::{Principal, Scheme};

pub use self::keys::MAX_JWKS_SIZE;

/// Longest bearer token considered (larger ones are refused before any decoding).
pub const MAX_TOKEN_SIZE: usize = 8 * 1024;

/// The issuers of one route and their keys.
pub struct JwtAuth {
    issuers: Vec<Issuer>,
    principal_claim: Box<str>,
    cache: TokenCache,
    /// Signatures checked so far (cache misses that got as far as a key).
    signature_checks: AtomicU64,
}

/// Why a bearer token was refused: said to the client, never echoing the token or any
/// part of it.
#[derive(Debug, thiserror::Error)]
pub enum JwtRefusal {
    /// Longer than `MAX_TOKEN_SIZE` bytes; refused before it is parsed.
    #[error("the bearer token is larger than {MAX_TOKEN_SIZE} bytes")]
    TooLarge,
    /// Not three base64url parts of JSON, or a claim missing or of the wrong type: which.
    #[error("the bearer token is malformed: {0}")]
    Malformed(&'static str),
    /// An `alg` the issuer does not accept (`none` and HMAC never are).
    #[error("the bearer token's algorithm is not accepted: {0}")]
    Algorithm(&'static str),
    /// No configured issuer has the token's `iss`.
    #[error("the bearer token's issuer is not trusted")]
    UnknownIssuer,
    /// The issuer's keys have not been fetched yet.
    #[error("the issuer's keys are not available yet")]
    NoKeys,
    /// No key of the issuer's JWKS matches the token's `kid` and `alg`.
    #[error("the bearer token's key is not one of the issuer's keys")]
    UnknownKey,
    /// The signature does not verify with the issuer's key.
    #[error("the bearer token's signature does not verify")]
    BadSignature,
    /// `exp` is past, beyond the allowed clock skew.
    #[error("the bearer token has expired")]
    Expired,
    /// `nbf` is ahead, beyond the allowed clock skew.
    #[error("the bearer token is not valid yet")]
    NotYetValid,
    /// None of the token's `aud` values is configured for the issuer.
    #[error("the bearer token's audience is not accepted")]
    BadAudience,
    /// The principal claim (named) is missing, empty or not a string.
    #[error("the bearer token has no non-empty string claim `{0}` naming the caller")]
    NoPrincipal(Box<str>),
}

impl JwtRefusal {
    /// A short, fixed label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            JwtRefusal::TooLarge => "too-large",
            JwtRefusal::Malformed(_) => "malformed",
            JwtRefusal::Algorithm(_) => "bad-algorithm",
            JwtRefusal::UnknownIssuer => "unknown-issuer",
            JwtRefusal::NoKeys => "no-keys",
            JwtRefusal::UnknownKey => "unknown-key",
            JwtRefusal::BadSignature => "bad-signature",
            JwtRefusal::Expired => "expired",
            JwtRefusal::NotYetValid => "not-yet-valid",
            JwtRefusal::BadAudience => "bad-audience",
            JwtRefusal::NoPrincipal(_) => "no-principal",
        }
    }
}

impl JwtAuth {
    /// Checks the issuer tables and reads `jwks-file`s (no network): an error names the
    /// key (`auth.jwt[0].jwks-file: …`).
    pub fn new(tables: &[JwtIssuerTable], principal_claim: &str) -> Result<Arc<JwtAuth>, String> {
        if principal_claim.is_empty() {
            return Err("auth.principal-claim: must not be empty".to_owned());
        }
        let mut issuers: Vec<Issuer> = Vec::with_capacity(tables.len());
        for (index, table) in tables.iter().enumerate() {
            if issuers.iter().any(|i| i.iss == table.issuer) {
                return Err(format!(
                    "auth.jwt[{index}].issuer: {:?} is configured twice",
                    table.issuer
                ));
            }
            issuers.push(Issuer::new(index, table)?);
        }
        Ok(Arc::new(JwtAuth {
            issuers,
            principal_claim: principal_claim.into(),
            cache: TokenCache::default(),
            signature_checks: AtomicU64::new(0),
        }))
    }

    /// Starts fetching and refreshing the issuers' keys in the background (until this
    /// `JwtAuth` is dropped). Needs a Tokio runtime.
    pub fn start(self: &Arc<Self>) {
        for issuer in &self.issuers {
            issuer.keys.start();
        }
    }

    /// Signatures checked so far: a cached token costs none.
    pub fn signature_checks(&self) -> u64 {
        self.signature_checks.load(Ordering::Relaxed)
    }

    /// The principal a token proves, or why it proves nothing.
    pub async fn verify(&self, token: &str) -> Result<Principal, JwtRefusal> {
        if token.len() > MAX_TOKEN_SIZE {
            return Err(JwtRefusal::TooLarge);
        }
        let digest = cache::digest(token);
        if let Some(principal) = self.cache.get(&digest, Instant::now()) {
            return Ok(principal);
        }
        let peek = Peek::of(token)?;
        let issuer = self
            .issuers
            .iter()
            .find(|i| i.iss == peek.iss)
            .ok_or(JwtRefusal::UnknownIssuer)?;
        let validation = issuer
            .validation(peek.alg)
            .ok_or(JwtRefusal::Algorithm("not one of the issuer's algorithms"))?;
        let mut set = issuer.keys.current().ok_or(JwtRefusal::NoKeys)?;
        if let Lookup::Unknown = set.find(peek.kid.as_deref(), peek.alg) {
            // A key the issuer may have added since: ask again, at most once per `refresh`.
            set = issuer.keys.refetch().await.ok_or(JwtRefusal::UnknownKey)?;
        }
        let key = match set.find(peek.kid.as_deref(), peek.alg) {
            Lookup::Found(key) => key,
            Lookup::WrongAlgorithm => {
                return Err(JwtRefusal::Algorithm("not an algorithm of the named key"))
            }
            Lookup::Unknown | Lookup::Ambiguous => return Err(JwtRefusal::UnknownKey),
        };
        self.signature_checks.fetch_add(1, Ordering::Relaxed);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, validation)
            .map_err(refusal)?
            .claims;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        check_time_claims(&claims, now.as_secs() + issuer.clock_skew)?;
        let name = match claims.get(&*self.principal_claim) {
            Some(Value::String(name)) if !name.is_empty() => Arc::<str>::from(name.as_str()),
            _ => return Err(JwtRefusal::NoPrincipal(self.principal_claim.clone())),
        };
        // `exp` is present and numeric: the validation requires it.
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let principal = Principal {
            name,
            scheme: Scheme::Jwt,
            claims: Some(Arc::new(claims)),
        };
        let remaining = Duration::from_secs(exp).saturating_sub(now);
        self.cache
            .insert(digest, principal.clone(), remaining, token.len());
        Ok(principal)
    }
}

/// What the token says before it is verified: enough to choose the issuer and key.
struct Peek {
    alg: Algorithm,
    kid: Option<String>,
    iss: String,
}

impl Peek {
    fn of(token: &str) -> Result<Peek, JwtRefusal> {
        #[derive(Deserialize)]
        struct Header {
            alg: String,
            kid: Option<String>,
            crit: Option<Value>,
        }
        #[derive(Deserialize)]
        struct Claims {
            iss: Option<String>,
        }
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtRefusal::Malformed("not three dot-separated parts"));
        };
        let header: Header = json_part(header).ok_or(JwtRefusal::Malformed("bad header"))?;
        let claims: Claims = json_part(claims).ok_or(JwtRefusal::Malformed("bad claims"))?;
        if header.crit.is_some() {
            return Err(JwtRefusal::Malformed(
                "critical header extensions are not supported",
            ));
        }
        if header.alg.eq_ignore_ascii_case("none") {
            return Err(JwtRefusal::Algorithm("unsigned tokens (none) are refused"));
        }
        let alg = header
            .alg
            .parse()
            .map_err(|_| JwtRefusal::Algorithm("unknown algorithm"))?;
        if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(JwtRefusal::Algorithm("HMAC tokens are refused"));
        }
        let iss = claims.iss.ok_or(JwtRefusal::Malformed("no iss claim"))?;
        Ok(Peek {
            alg,
            kid: header.kid,
            iss,
        })
    }
}

/// One base64url part of a token as JSON.
fn json_part<T: serde::de::DeserializeOwned>(part: &str) -> Option<T> {
    let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `iat`, when present, must be a number no later than `latest` (now plus the skew); `nbf`,
/// when present, a number (`jsonwebtoken` compares a numeric one, and skips any other).
fn check_time_claims(claims: &Map<String, Value>, latest: u64) -> Result<(), JwtRefusal> {
    if claims.get("nbf").is_some_and(|nbf| !nbf.is_number()) {
        return Err(JwtRefusal::Malformed("nbf is not a number"));
    }
    match claims.get("iat") {
        None => Ok(()),
        Some(iat) => match iat.as_f64() {
            Some(iat) if iat <= latest as f64 => Ok(()),
            Some(_) => Err(JwtRefusal::NotYetValid),
            None => Err(JwtRefusal::Malformed("iat is not a number")),
        },
    }
}

/// What a failed `jsonwebtoken` verification means to the client.
fn refusal(error: jsonwebtoken::errors::Error) -> JwtRefusal {
    match error.into_kind() {
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::Crypto(_) => JwtRefusal::BadSignature,
        ErrorKind::ExpiredSignature => JwtRefusal::Expired,
        ErrorKind::ImmatureSignature => JwtRefusal::NotYetValid,
        ErrorKind::InvalidAudience => JwtRefusal::BadAudience,
        ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => JwtRefusal::BadAudience,
        ErrorKind::MissingRequiredClaim(claim) if claim == "exp" => {
            JwtRefusal::Malformed("no numeric exp claim")
        }
        ErrorKind::InvalidIssuer => JwtRefusal::UnknownIssuer,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            JwtRefusal::Algorithm("not an algorithm of the named key")
        }
        _ => JwtRefusal::Malformed("the claims are not valid JSON claims"),
    }
}

#[cfg(test)]
mod tests;

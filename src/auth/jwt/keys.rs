//! One issuer's JSON Web Key Set (RFC 7517) as the verifier holds it: its signing keys,
//! each with the algorithms it may verify. Keys the gateway cannot or must not use
//! (encryption keys, symmetric `oct` keys, unknown types or curves) are skipped, so one odd
//! key does not cost the issuer its whole set; a set with no usable key, or more than
//! `MAX_KEYS`, is refused (the last good set stays).

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

/// Most keys one JWKS may hold: issuers publish a handful (current, next, previous).
pub(crate) const MAX_KEYS: usize = 64;

/// Largest JWKS document read, from a file or the network.
pub const MAX_JWKS_SIZE: usize = 256 * 1024;

const RSA: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// One usable verification key.
pub(super) struct Key {
    kid: Option<Box<str>>,
    /// What it verifies: its JWK `alg` when it names one, else every algorithm of its type
    /// and curve.
    algorithms: Vec<Algorithm>,
    pub(super) key: DecodingKey,
}

/// An issuer's usable keys.
pub(super) struct KeySet {
    keys: Vec<Key>,
}

/// A JWKS that gives no key set.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JwksError {
    #[error("not a JWKS (a JSON object with a `keys` array): {0}")]
    Json(#[from] serde_json::Error),
    #[error("more than {MAX_KEYS} keys")]
    TooManyKeys,
    #[error("no usable signing key (RSA, EC P-256/P-384 or Ed25519)")]
    NoUsableKey,
}

/// What a token's `kid` and `alg` find in a set.
pub(super) enum Lookup<'a> {
    Found(&'a Key),
    /// No key has the token's `kid` (or, without a `kid`, none verifies its `alg`).
    Unknown,
    /// The key exists but does not verify the token's `alg`.
    WrongAlgorithm,
    /// Several keys the token names (no `kid`, or one the set gives several keys) verify
    /// its `alg`: trying each would multiply the work one forged token causes.
    Ambiguous,
}

impl KeySet {
    /// The usable keys of a JWKS document.
    pub(super) fn parse(bytes: &[u8]) -> Result<KeySet, JwksError> {
        #[derive(Deserialize)]
        struct Document {
            keys: Vec<serde_json::Value>,
        }
        let document: Document = serde_json::from_slice(bytes)?;
        if document.keys.len() > MAX_KEYS {
            return Err(JwksError::TooManyKeys);
        }
        let keys: Vec<Key> = document.keys.into_iter().filter_map(usable).collect();
        if keys.is_empty() {
            return Err(JwksError::NoUsableKey);
        }
        Ok(KeySet { keys })
    }

    /// The one key the token's `kid` (any key, without one) names that verifies its `alg`:
    /// a set may give one `kid` to keys of several types, and the token's `alg` picks.
    pub(super) fn find(&self, kid: Option<&str>, alg: Algorithm) -> Lookup<'_> {
        let named = |key: &&Key| kid.is_none_or(|kid| key.kid.as_deref() == Some(kid));
        let mut fitting = (self.keys.iter().filter(named)).filter(|k| k.algorithms.contains(&alg));
        match (fitting.next(), fitting.next()) {
            (Some(key), None) => Lookup::Found(key),
            (Some(_), Some(_)) => Lookup::Ambiguous,
            (None, _) if kid.is_some() && self.keys.iter().any(|key| named(&key)) => {
                Lookup::WrongAlgorithm
            }
            (None, _) => Lookup::Unknown,
        }
    }
}

/// The key of one JWK entry, if the gateway may verify signatures with it.
fn usable(value: serde_json::Value) -> Option<Key> {
    let jwk: Jwk = serde_json::from_value(value).ok()?;
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let of_type: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => RSA.to_vec(),
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        // Symmetric keys never verify here: a published key is no secret.
        AlgorithmParameters::OctetKey(_) | AlgorithmParameters::OctetKeyPair(_) => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => of_type,
        Some(named) => {
            let alg = signing_algorithm(named)?;
            of_type.contains(&alg).then(|| vec![alg])?
        }
    };
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.map(String::into_boxed_str),
        algorithms,
        key,
    })
}

/// The signature algorithm a JWK `alg` names (none for HMAC and encryption algorithms).
fn signing_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        KeyAlgorithm::HS256
        | KeyAlgorithm::HS384
        | KeyAlgorithm::HS512
        | KeyAlgorithm::RSA1_5
        | KeyAlgorithm::RSA_OAEP
        | KeyAlgorithm::RSA_OAEP_256 => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // A P-256 public point and an Ed25519 public key (any valid encoding will do: nothing
    // is verified with them here).
    const EC: &str = r#"{"kty":"EC","crv":"P-256","kid":"ec","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#;
    const ED: &str = r#"{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;

    fn set(keys: &[&str]) -> Result<KeySet, JwksError> {
        KeySet::parse(format!(r#"{{"keys":[{}]}}"#, keys.join(",")).as_bytes())
    }

    #[test]
    fn keys_are_found_by_kid_and_algorithm() {
        let set = set(&[EC, ED]).unwrap();
        assert!(matches!(
            set.find(Some("ec"), Algorithm::ES256),
            Lookup::Found(_)
        ));
        assert!(matches!(
            set.find(Some("ec"), Algorithm::RS256),
            Lookup::WrongAlgorithm
        ));
        assert!(matches!(
            set.find(Some("nope"), Algorithm::ES256),
            Lookup::Unknown
        ));
        // Without a kid: the one key of the algorithm, else nothing.
        assert!(matches!(set.find(None, Algorithm::EdDSA), Lookup::Found(_)));
        assert!(matches!(set.find(None, Algorithm::RS256), Lookup::Unknown));
        let two = set_of_two_ec();
        assert!(matches!(
            two.find(None, Algorithm::ES256),
            Lookup::Ambiguous
        ));
        // One kid on keys of two types: the token's algorithm picks; twice the same type
        // is ambiguous.
        let shared = self::set(&[EC, &ED.replace(r#""kid":"ed""#, r#""kid":"ec""#)]).unwrap();
        for alg in [Algorithm::ES256, Algorithm::EdDSA] {
            assert!(
                matches!(shared.find(Some("ec"), alg), Lookup::Found(_)),
                "{alg:?}"
            );
        }
        assert!(matches!(
            shared.find(Some("ec"), Algorithm::RS256),
            Lookup::WrongAlgorithm
        ));
        let twice = self::set(&[EC, &EC.replace("f83O", "g83O")]).unwrap();
        assert!(matches!(
            twice.find(Some("ec"), Algorithm::ES256),
            Lookup::Ambiguous
        ));
    }

    fn set_of_two_ec() -> KeySet {
        set(&[EC, &EC.replace(r#""kid":"ec""#, r#""kid":"ec2""#)]).unwrap()
    }

    #[test]
    fn unusable_keys_are_skipped_and_hmac_never_verifies() {
        let oct = r#"{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}"#;
        let enc = EC.replace(r#""kid":"ec""#, r#""kid":"enc","use":"enc""#);
        let hs = EC.replace(r#""kid":"ec""#, r#""kid":"hs","alg":"HS256""#);
        let odd = r#"{"kty":"XYZ","kid":"odd"}"#;
        let set = set(&[oct, &enc, &hs, odd, ED]).unwrap();
        for kid in ["hmac", "enc", "hs", "odd"] {
            assert!(matches!(
                set.find(Some(kid), Algorithm::HS256),
                Lookup::Unknown
            ));
        }
        assert!(matches!(
            set.find(Some("ed"), Algorithm::EdDSA),
            Lookup::Found(_)
        ));
        // A key's own `alg` narrows what it verifies.
        let es = EC.replace(r#""kid":"ec""#, r#""kid":"ec","alg":"ES256""#);
        let set = self::set(&[&es]).unwrap();
        assert!(matches!(
            set.find(Some("ec"), Algorithm::ES256),
            Lookup::Found(_)
        ));
    }

    #[test]
    fn bad_sets_are_refused() {
        assert!(matches!(set(&[]), Err(JwksError::NoUsableKey)));
        assert!(matches!(KeySet::parse(b"[1]"), Err(JwksError::Json(_))));
        let many = vec![ED; MAX_KEYS + 1];
        assert!(matches!(set(&many), Err(JwksError::TooManyKeys)));
        assert!(set(&vec![ED; MAX_KEYS]).is_ok());
    }
}

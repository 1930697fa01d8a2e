//! Signed push deliveries (`--push-sign-key`): each delivery carries a JWS over its body
//! with the payload detached (RFC 7515 appendix F) in `X-A2A-Signature`, and the gateway
//! publishes the public key as a JWK Set at `/.well-known/jwks.json`, so a webhook can tell
//! that a notification came through this gateway and was not altered.
//!
//! The header is `BASE64URL(protected) ".." BASE64URL(signature)`; the signing input is
//! `BASE64URL(protected) "." BASE64URL(body)`, as for an attached JWS, so a receiver puts
//! `BASE64URL(body)` between the dots and verifies with any JOSE library. `protected` is
//! `{"alg","kid","typ":"JOSE"}`; `kid` is the key's RFC 7638 thumbprint, the same on every
//! replica that holds the key. Keys: PEM PKCS#8, EC P-256 (ES256, the raw 64-byte `r||s`
//! of RFC 7518 §3.4) or Ed25519 (EdDSA, RFC 8037).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;

/// The header a signed delivery carries its detached JWS in.
pub(crate) const SIGNATURE_HEADER: &str = "x-a2a-signature";

/// Where the gateway serves the public key of `--push-sign-key`.
pub(crate) const JWKS_PATH: &str = "/.well-known/jwks.json";

/// A `--push-sign-key` that cannot sign.
#[derive(Debug, thiserror::Error)]
#[error("--push-sign-key: {0}")]
pub struct PushSignKeyError(String);

enum Key {
    Es256(EcdsaKeyPair),
    EdDsa(Ed25519KeyPair),
}

/// Signs delivery bodies with one key, and shows its public half.
pub struct PushSigner {
    key: Key,
    rng: SystemRandom,
    /// `BASE64URL(protected)`, the same for every signature.
    protected: String,
    /// The JWK Set served at `JWKS_PATH`.
    jwks: bytes::Bytes,
}

impl std::fmt::Debug for PushSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PushSigner")
    }
}

impl PushSigner {
    /// The signer of a PEM PKCS#8 private key, EC P-256 or Ed25519.
    pub fn from_pem(pem: &[u8]) -> Result<PushSigner, PushSignKeyError> {
        let fail = |why: &str| PushSignKeyError(why.to_owned());
        let der = match PrivateKeyDer::from_pem_slice(pem) {
            Ok(PrivateKeyDer::Pkcs8(der)) => der,
            Ok(_) => {
                return Err(fail(
                    "not a PKCS#8 key (`openssl pkcs8 -topk8 -nocrypt` converts one)",
                ))
            }
            Err(_) => return Err(fail("no unencrypted PEM private key in the file")),
        };
        let der = der.secret_pkcs8_der();
        let rng = SystemRandom::new();
        let (key, jwk) = if let Ok(pair) =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
        {
            // An uncompressed point: 0x04, then x and y of 32 bytes each.
            let point = pair.public_key().as_ref();
            let (x, y) = (&point[1..33], &point[33..65]);
            let jwk = Jwk::Ec {
                x: URL_SAFE_NO_PAD.encode(x),
                y: URL_SAFE_NO_PAD.encode(y),
            };
            (Key::Es256(pair), jwk)
        } else if let Ok(pair) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
            let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
            (Key::EdDsa(pair), Jwk::Okp { x })
        } else {
            return Err(fail("not an EC P-256 or Ed25519 key"));
        };
        let alg = match key {
            Key::Es256(_) => "ES256",
            Key::EdDsa(_) => "EdDSA",
        };
        let kid = jwk.thumbprint();
        let protected = serde_json::json!({ "alg": alg, "kid": kid, "typ": "JOSE" });
        let mut public = jwk.members();
        public.insert("kid".into(), kid.into());
        public.insert("alg".into(), alg.into());
        public.insert("use".into(), "sig".into());
        let jwks = serde_json::json!({ "keys": [public] }).to_string();
        Ok(PushSigner {
            key,
            rng,
            protected: URL_SAFE_NO_PAD.encode(protected.to_string()),
            jwks: jwks.into(),
        })
    }

    /// The detached JWS of `body`: `protected..signature`.
    pub fn sign(&self, body: &[u8]) -> String {
        let mut input = String::with_capacity(self.protected.len() + 1 + body.len() * 4 / 3 + 4);
        input.push_str(&self.protected);
        input.push('.');
        URL_SAFE_NO_PAD.encode_string(body, &mut input);
        let signature = match &self.key {
            // ring fails only when its random source does, which the process cannot do without.
            Key::Es256(pair) => pair
                .sign(&self.rng, input.as_bytes())
                .expect("the system's random source works")
                .as_ref()
                .to_vec(),
            Key::EdDsa(pair) => pair.sign(input.as_bytes()).as_ref().to_vec(),
        };
        format!("{}..{}", self.protected, URL_SAFE_NO_PAD.encode(signature))
    }

    /// The JWK Set of the public key, as served at `JWKS_PATH`.
    pub fn jwks(&self) -> bytes::Bytes {
        self.jwks.clone()
    }
}

/// A public key as a JWK, without `kid`, `alg` and `use`.
enum Jwk {
    Ec { x: String, y: String },
    Okp { x: String },
}

impl Jwk {
    fn members(&self) -> serde_json::Map<String, serde_json::Value> {
        let value = match self {
            Jwk::Ec { x, y } => serde_json::json!({ "crv": "P-256", "kty": "EC", "x": x, "y": y }),
            Jwk::Okp { x } => serde_json::json!({ "crv": "Ed25519", "kty": "OKP", "x": x }),
        };
        match value {
            serde_json::Value::Object(members) => members,
            _ => unreachable!("a JSON object literal"),
        }
    }

    /// RFC 7638: SHA-256 of the required members in lexicographic order, no whitespace
    /// (what `serde_json` writes for `members`, whose map is ordered).
    fn thumbprint(&self) -> String {
        let canonical = serde_json::Value::Object(self.members()).to_string();
        let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
        URL_SAFE_NO_PAD.encode(digest.as_ref())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A detached JWS of `body` checked with the JWK Set as a receiver would: the body
    /// put back between the dots, the key read from the set by `kid`.
    pub(crate) fn verify(jwks: &[u8], jws: &str, body: &[u8]) -> bool {
        let (protected, signature) = jws.split_once("..").unwrap();
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(protected).unwrap()).unwrap();
        let set: serde_json::Value = serde_json::from_slice(jwks).unwrap();
        let key = set["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kid"] == header["kid"])
            .unwrap();
        let token = format!("{protected}.{}.{signature}", URL_SAFE_NO_PAD.encode(body));
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(key.clone()).unwrap();
        let decoding = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
        let alg = match header["alg"].as_str().unwrap() {
            "ES256" => jsonwebtoken::Algorithm::ES256,
            "EdDSA" => jsonwebtoken::Algorithm::EdDSA,
            other => panic!("{other}"),
        };
        let (message, signature) = token.rsplit_once('.').unwrap();
        jsonwebtoken::crypto::verify(signature, message.as_bytes(), &decoding, alg).unwrap()
    }

    fn pem_of(pkcs8: &[u8]) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(pkcs8);
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n").into_bytes()
    }

    pub(crate) fn ec_pem() -> Vec<u8> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        pem_of(pkcs8.as_ref())
    }

    #[test]
    fn signatures_of_both_kinds_verify_with_the_served_set_and_fail_for_another_body() {
        let rng = SystemRandom::new();
        let ed = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        for pem in [ec_pem(), pem_of(ed.as_ref())] {
            let signer = PushSigner::from_pem(&pem).unwrap();
            let body = br#"{"statusUpdate":{"taskId":"t-1"}}"#;
            let jws = signer.sign(body);
            assert!(verify(&signer.jwks(), &jws, body), "{jws}");
            assert!(!verify(
                &signer.jwks(),
                &jws,
                br#"{"statusUpdate":{"taskId":"t-2"}}"#
            ));
        }
    }

    #[test]
    fn the_kid_is_the_rfc7638_thumbprint() {
        // RFC 7638 section 3.1's example is RSA; this is the same computation on RFC 8037
        // appendix A.3's Ed25519 key, whose thumbprint that appendix gives.
        let jwk = Jwk::Okp {
            x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo".into(),
        };
        assert_eq!(
            jwk.thumbprint(),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn keys_that_cannot_sign_are_named() {
        for (pem, why) in [
            (
                &b"nothing"[..],
                "no unencrypted PEM private key in the file",
            ),
            (
                b"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n",
                "not a PKCS#8 key",
            ),
            (
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                "not an EC P-256 or Ed25519 key",
            ),
        ] {
            let err = PushSigner::from_pem(pem).unwrap_err().to_string();
            assert!(err.starts_with(&format!("--push-sign-key: {why}")), "{err}");
        }
    }
}

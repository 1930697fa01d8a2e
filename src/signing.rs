//! Agent card signing (A2A §8.4): a detached JWS over the card's canonical form.
//!
//! The gateway rewrites a card's `supportedInterfaces`, which invalidates the agent's own
//! signatures; a route may re-sign the rewritten card with a configured key instead.
//!
//! What is signed ([`signing_payload`]): the card without its top-level `signatures`, with
//! the defaults of implicit-presence fields removed as §8.4.1 rule 1 asks (fields that are
//! `REQUIRED`, carry proto3 `optional`, or are message-typed stay even when empty/default),
//! then canonicalised with RFC 8785 (JCS). The default removal walks the card with the
//! compiled proto schema (`protocol::schema`: fields, presence, nested messages); the one
//! fact the descriptor lacks, the normative `REQUIRED` marks, is the table `REQUIRED` here.
//! Members the schema does not know (unknown fields, `Struct` contents) are signed as they are.
//!
//! The signature is RFC 7515 with the payload detached: `protected` is the base64url of
//! `{"alg","typ":"JOSE","kid","jku"?}`, the signing input is `protected "." b64url(payload)`,
//! ES256 signatures are the raw 64-byte `r||s` (RFC 7518 §3.4), RS256 is RSASSA-PKCS1-v1_5.
//!
//! Keys: PEM, PKCS#8 for both kinds, SEC1 `EC PRIVATE KEY` (wrapped into PKCS#8 here, since
//! the P-256 algorithm identifier is fixed, so `openssl ecparam -genkey` output works as is),
//! and PKCS#1 `RSA PRIVATE KEY`. RSA keys must have 2048 to 8192 bits (ring's limits).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use serde::Serialize;
use serde_json::Value;

use crate::protocol::schema::{self, Kind, Presence};

/// RFC 8785 (JCS) canonical form of a JSON value.
pub(crate) fn canonical_json(value: &serde_json::Value) -> Vec<u8> {
    // A `Value` holds only finite numbers and UTF-8 keys and a Vec cannot fail to take
    // bytes, so the canonicalizer has nothing to reject here.
    serde_json_canonicalizer::to_vec(value).expect("a serde_json::Value always has a JCS form")
}

/// The bytes a card signature covers: the card without `signatures`, defaults removed
/// per §8.4.1, in JCS form.
pub fn signing_payload(card: &Value) -> Vec<u8> {
    let mut card = card.clone();
    if let Value::Object(members) = &mut card {
        members.remove("signatures");
    }
    let schema = schema::message("AgentCard").expect("proto/a2a.proto declares AgentCard");
    strip_defaults(&mut card, schema);
    canonical_json(&card)
}

/// Why a card signing key was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The file holds no PEM private key: the PEM reader's reason.
    #[error(
        "no PEM private key found ({0}); expected \"PRIVATE KEY\" (PKCS#8), \
         \"EC PRIVATE KEY\" (SEC1) or \"RSA PRIVATE KEY\" (PKCS#1)"
    )]
    NotPem(String),
    /// The key is encrypted (PKCS#8 `ENCRYPTED PRIVATE KEY`).
    #[error(
        "the key is encrypted; card signing needs an unencrypted key \
         (openssl pkcs8 -in KEY -nocrypt -out PLAIN)"
    )]
    Encrypted,
    /// A key type other than EC P-256 and RSA: which.
    #[error("unsupported key type: {0}; card signing takes EC P-256 (ES256) or RSA (RS256) keys")]
    UnsupportedKey(String),
    /// An RSA key below 2048 bits.
    #[error("RSA key too small: card signing needs at least 2048 bits")]
    RsaTooSmall,
    /// An RSA key above 8192 bits.
    #[error("RSA key too large: card signing takes at most 8192 bits")]
    RsaTooLarge,
    /// The key's structure is refused by ring.
    #[error("invalid {kind} private key: {reason}")]
    InvalidKey {
        /// The key's type (`EC P-256`, `RSA`) or its container (`PKCS#8`).
        kind: &'static str,
        /// ring's reason.
        reason: String,
    },
    /// The key id (`kid`) is empty.
    #[error("the key id (kid) must not be empty")]
    EmptyKid,
}

/// A card signing key: ES256 (P-256) or RS256 (RSA ≥ 2048 bits), chosen by the key's type.
pub struct CardSigner {
    key: Key,
    /// base64url of the protected header, fixed per key.
    protected: String,
    rng: SystemRandom,
}

enum Key {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

/// The protected header in the member order of the spec's example (§8.4.2).
#[derive(Serialize)]
struct Header<'a> {
    alg: &'static str,
    typ: &'static str,
    kid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    jku: Option<&'a str>,
}

impl std::fmt::Debug for CardSigner {
    // The key pairs hold private material: show only what identifies the signer.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardSigner")
            .field("alg", &self.algorithm())
            .field("protected", &self.protected)
            .finish_non_exhaustive()
    }
}

impl CardSigner {
    /// Reads a PEM private key (PKCS#8 for both; also SEC1 "EC PRIVATE KEY" and PKCS#1
    /// "RSA PRIVATE KEY"), `kid` goes into the protected header, `jku` too when given.
    pub fn from_pem(pem: &[u8], kid: &str, jku: Option<&str>) -> Result<CardSigner, SignError> {
        if kid.is_empty() {
            return Err(SignError::EmptyKid);
        }
        let der = PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
            // The PEM reader skips sections it does not know, so an encrypted key reads as
            // "no key": say what it is instead.
            if contains(pem, b"-----BEGIN ENCRYPTED PRIVATE KEY-----") {
                SignError::Encrypted
            } else {
                SignError::NotPem(e.to_string())
            }
        })?;
        let key = match der {
            PrivateKeyDer::Pkcs8(der) => key_from_pkcs8(der.secret_pkcs8_der())?,
            PrivateKeyDer::Sec1(der) => key_from_sec1(der.secret_sec1_der())?,
            PrivateKeyDer::Pkcs1(der) => RsaKeyPair::from_der(der.secret_pkcs1_der())
                .map(Key::Rs256)
                .map_err(rsa_rejected)?,
            _ => return Err(SignError::UnsupportedKey("unknown PEM key format".into())),
        };
        let header = Header {
            alg: key.algorithm(),
            typ: "JOSE",
            kid,
            jku,
        };
        let header = serde_json::to_vec(&header).expect("the header is plain strings");
        Ok(CardSigner {
            key,
            protected: URL_SAFE_NO_PAD.encode(header),
            rng: SystemRandom::new(),
        })
    }

    /// The JWS algorithm name ("ES256" / "RS256").
    pub(crate) fn algorithm(&self) -> &'static str {
        self.key.algorithm()
    }

    /// Signs `card` (its top-level `signatures` member, if present, is excluded from the
    /// signed content) and returns one `AgentCardSignature` as ProtoJSON:
    /// `{"protected": "<b64url header>", "signature": "<b64url sig>"}`.
    ///
    /// # Panics
    /// Only if the operating system's random source fails (ECDSA nonces and RSA blinding
    /// need it); no card content can make signing fail.
    pub fn sign(&self, card: &serde_json::Value) -> serde_json::Value {
        let payload = URL_SAFE_NO_PAD.encode(signing_payload(card));
        let input = format!("{}.{payload}", self.protected);
        let signature = match &self.key {
            Key::Es256(key) => key
                .sign(&self.rng, input.as_bytes())
                .expect("the system random source failed")
                .as_ref()
                .to_vec(),
            Key::Rs256(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(
                    &RSA_PKCS1_SHA256,
                    &self.rng,
                    input.as_bytes(),
                    &mut signature,
                )
                .expect("the system random source failed");
                signature
            }
        };
        serde_json::json!({
            "protected": self.protected,
            "signature": URL_SAFE_NO_PAD.encode(signature),
        })
    }
}

impl Key {
    fn algorithm(&self) -> &'static str {
        match self {
            Key::Es256(_) => "ES256",
            Key::Rs256(_) => "RS256",
        }
    }
}

// Object identifiers (DER content bytes) of the key algorithms this module tells apart.
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// Picks the algorithm from the PKCS#8 AlgorithmIdentifier, so a wrong key type gets a
/// message naming it rather than ring's generic rejection.
fn key_from_pkcs8(der: &[u8]) -> Result<Key, SignError> {
    let rng = SystemRandom::new();
    match pkcs8_algorithm(der) {
        Some((OID_EC_PUBLIC_KEY, Some(OID_P256))) => {
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
                .map(Key::Es256)
                .map_err(|e| SignError::InvalidKey {
                    kind: "EC P-256",
                    reason: e.to_string(),
                })
        }
        Some((OID_EC_PUBLIC_KEY, curve)) => Err(SignError::UnsupportedKey(format!(
            "EC key on curve {} (only P-256 is supported)",
            curve.map_or("(none)", curve_name)
        ))),
        Some((OID_RSA, _)) => RsaKeyPair::from_pkcs8(der)
            .map(Key::Rs256)
            .map_err(rsa_rejected),
        Some((oid, _)) => Err(SignError::UnsupportedKey(algorithm_name(oid))),
        None => Err(SignError::InvalidKey {
            kind: "PKCS#8",
            reason: "not a PKCS#8 PrivateKeyInfo structure".into(),
        }),
    }
}

/// SEC1 `ECPrivateKey` → PKCS#8 `PrivateKeyInfo` with the fixed P-256 algorithm identifier;
/// ring compares the curve named inside the SEC1 key (if any) with it and rejects others.
fn key_from_sec1(sec1: &[u8]) -> Result<Key, SignError> {
    if let Some(curve) = sec1_curve(sec1).filter(|&curve| curve != OID_P256) {
        return Err(SignError::UnsupportedKey(format!(
            "EC key on curve {} (only P-256 is supported)",
            curve_name(curve)
        )));
    }
    let algorithm = [der(0x06, OID_EC_PUBLIC_KEY), der(0x06, OID_P256)].concat();
    let info = [der(0x02, &[0]), der(0x30, &algorithm), der(0x04, sec1)].concat();
    let pkcs8 = der(0x30, &info);
    EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &pkcs8,
        &SystemRandom::new(),
    )
    .map(Key::Es256)
    .map_err(|e| SignError::InvalidKey {
        kind: "SEC1 EC",
        reason: e.to_string(),
    })
}

fn rsa_rejected(e: ring::error::KeyRejected) -> SignError {
    // ring tells why only through the fixed text of its Display.
    match e.to_string().as_str() {
        "TooSmall" => SignError::RsaTooSmall,
        "TooLarge" => SignError::RsaTooLarge,
        _ => SignError::InvalidKey {
            kind: "RSA",
            reason: e.to_string(),
        },
    }
}

fn curve_name(oid: &[u8]) -> &'static str {
    match oid {
        [0x2b, 0x81, 0x04, 0x00, 0x22] => "P-384",
        [0x2b, 0x81, 0x04, 0x00, 0x23] => "P-521",
        [0x2b, 0x81, 0x04, 0x00, 0x0a] => "secp256k1",
        _ => "(unknown)",
    }
}

fn algorithm_name(oid: &[u8]) -> String {
    match oid {
        [0x2b, 0x65, 0x70] => "Ed25519".into(),
        [0x2b, 0x65, 0x71] => "Ed448".into(),
        [0x2b, 0x65, 0x6e] => "X25519".into(),
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a] => "RSA-PSS".into(),
        [0x2a, 0x86, 0x48, 0xce, 0x38, 0x04, 0x01] => "DSA".into(),
        other => format!("algorithm OID {}", hex(other)),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// One DER element: `(tag, content, rest)`. Lengths up to 2 bytes cover every key kept here.
fn der_next(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 2 || rest.len() < n {
            return None;
        }
        let (len, rest) = rest.split_at(n);
        (
            len.iter().fold(0, |acc, &b| (acc << 8) | usize::from(b)),
            rest,
        )
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// DER encoding of one element; lengths up to 64 KiB (a SEC1 key is ~120 bytes).
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let len = content.len();
    let mut out = vec![tag];
    match len {
        0..0x80 => out.push(len as u8),
        0x80..0x100 => out.extend([0x81, len as u8]),
        _ => out.extend([0x82, (len >> 8) as u8, len as u8]),
    }
    out.extend_from_slice(content);
    out
}

/// `PrivateKeyInfo ::= SEQUENCE { version, AlgorithmIdentifier { OID, params }, ... }`:
/// the algorithm OID and, when the parameters are an OID (a named curve), that too.
fn pkcs8_algorithm(der: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (0x30, info, _) = der_next(der)? else {
        return None;
    };
    let (0x02, _, rest) = der_next(info)? else {
        return None;
    };
    let (0x30, algorithm, _) = der_next(rest)? else {
        return None;
    };
    let (0x06, oid, params) = der_next(algorithm)? else {
        return None;
    };
    let curve = match der_next(params) {
        Some((0x06, curve, _)) => Some(curve),
        _ => None,
    };
    Some((oid, curve))
}

/// `ECPrivateKey ::= SEQUENCE { version, privateKey, [0] parameters OPTIONAL, ... }`:
/// the named curve, when the key states one.
fn sec1_curve(der: &[u8]) -> Option<&[u8]> {
    let (0x30, key, _) = der_next(der)? else {
        return None;
    };
    let (0x02, _, rest) = der_next(key)? else {
        return None;
    };
    let (0x04, _, rest) = der_next(rest)? else {
        return None;
    };
    let (0xa0, parameters, _) = der_next(rest)? else {
        return None;
    };
    match der_next(parameters)? {
        (0x06, curve, _) => Some(curve),
        _ => None,
    }
}

/// Removes the default values §8.4.1 rule 1 asks to omit from `value`, a `message` as
/// ProtoJSON. `null` is ProtoJSON for "not set", so it goes whatever the field's presence.
fn strip_defaults(value: &mut Value, message: &schema::Message) {
    let Value::Object(members) = value else {
        return;
    };
    members.retain(|name, value| {
        let Some(field) = message.field(name) else {
            return true;
        };
        if value.is_null() {
            return false;
        }
        if let Some(inner) = field.kind.message() {
            match (&field.kind, &mut *value) {
                (Kind::Message(_), value) => strip_defaults(value, inner),
                // A list's items or a map's values, whichever JSON the field holds.
                (_, Value::Array(items)) => items
                    .iter_mut()
                    .for_each(|item| strip_defaults(item, inner)),
                (_, Value::Object(map)) => map
                    .values_mut()
                    .for_each(|item| strip_defaults(item, inner)),
                _ => {}
            }
        }
        keeps_default(message, field) || !is_default(value)
    });
}

/// Whether a field stays even when it holds its default: `REQUIRED` fields, and fields with
/// explicit presence (proto3 `optional`, messages, oneof members).
fn keeps_default(message: &schema::Message, field: &schema::Field) -> bool {
    field.presence == Presence::Explicit
        || REQUIRED.iter().any(|(name, fields)| {
            *name == message.name && fields.contains(&field.json_name.as_str())
        })
}

fn is_default(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(members) => members.is_empty(),
    }
}

/// The fields of the messages an AgentCard holds that the normative a2a.proto marks
/// `[(google.api.field_behavior) = REQUIRED]` (the gateway's copy in proto/ drops the
/// annotations), by message; §8.4.1 keeps them even when default. Everything else about
/// the card's fields comes from the compiled schema (`protocol::schema`).
const REQUIRED: &[(&str, &[&str])] = &[
    (
        "AgentCard",
        &[
            "name",
            "description",
            "supportedInterfaces",
            "version",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "skills",
        ],
    ),
    (
        "AgentInterface",
        &["url", "protocolBinding", "protocolVersion"],
    ),
    ("AgentProvider", &["url", "organization"]),
    ("AgentSkill", &["id", "name", "description", "tags"]),
    ("APIKeySecurityScheme", &["location", "name"]),
    ("HTTPAuthSecurityScheme", &["scheme"]),
    ("OAuth2SecurityScheme", &["flows"]),
    ("OpenIdConnectSecurityScheme", &["openIdConnectUrl"]),
    (
        "AuthorizationCodeOAuthFlow",
        &["authorizationUrl", "tokenUrl", "scopes"],
    ),
    ("ClientCredentialsOAuthFlow", &["tokenUrl", "scopes"]),
    (
        "DeviceCodeOAuthFlow",
        &["deviceAuthorizationUrl", "tokenUrl", "scopes"],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{
        KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
    };
    use serde_json::json;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/card-signing/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn jcs(text: &str) -> String {
        String::from_utf8(canonical_json(&serde_json::from_str(text).unwrap())).unwrap()
    }

    #[test]
    fn jcs_rfc8785_sample_object() {
        // RFC 8785 §3.2.2 input and §3.2.3/§3.2.4 output.
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        assert_eq!(
            jcs(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn jcs_rfc8785_property_sorting() {
        // RFC 8785 §3.2.3: sorted by UTF-16 code units, so the emoji (a surrogate pair,
        // D83D) sorts before U+FB33 although its code point is larger.
        let input = r#"{
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\ud83d\ude00": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let canonical = jcs(input);
        let order: Vec<&str> = canonical
            .split("\":\"")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap())
            .collect();
        assert_eq!(
            order,
            [
                "Carriage Return",
                "One",
                "Control",
                "Latin Small Letter O With Diaeresis",
                "Euro Sign",
                "Emoji: Grinning Face",
                "Hebrew Letter Dalet With Dagesh"
            ]
        );
    }

    #[test]
    fn jcs_rfc8785_number_table() {
        // RFC 8785 Appendix B (NaN and Infinity have no serde_json::Value).
        let table: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for &(bits, want) in table {
            let value = Value::from(f64::from_bits(bits));
            let got = String::from_utf8(canonical_json(&value)).unwrap();
            assert_eq!(got, want, "{bits:016x}");
        }
        // Integers are IEEE doubles in JCS too: 2^53 + 1 is not representable.
        assert_eq!(jcs("9007199254740993"), "9007199254740992");
        assert_eq!(jcs("[1.0, -0.0, 100]"), "[1,0,100]");
    }

    #[test]
    fn defaults_are_removed_as_the_spec_example_shows() {
        // §8.4.1's example: REQUIRED fields stay even when empty, explicitly set optional
        // booleans stay, the empty repeated `extensions` goes.
        let card = json!({
            "name": "Example Agent",
            "description": "",
            "capabilities": {"streaming": false, "pushNotifications": false, "extensions": []},
            "skills": []
        });
        assert_eq!(
            String::from_utf8(signing_payload(&card)).unwrap(),
            r#"{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}"#
        );
    }

    #[test]
    fn defaults_removed_in_nested_messages_only_where_the_schema_says() {
        let card = json!({
            "name": "n",
            "supportedInterfaces": [{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": ""}],
            "iconUrl": "",
            "documentationUrl": null,
            "capabilities": {"extensions": [{"uri": "x", "required": false, "description": "", "params": {"empty": "", "zero": 0, "none": {}}}]},
            "securitySchemes": {"b": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": ""}}},
            "securityRequirements": [{"schemes": {"b": {"list": []}}}],
            "skills": [{"id": "s", "name": "", "description": "", "tags": [], "examples": []}],
            "futureField": "",
            "signatures": [{"protected": "x", "signature": "y"}]
        });
        let want = json!({
            "name": "n",
            "supportedInterfaces": [{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "iconUrl": "",
            "capabilities": {"extensions": [{"uri": "x", "params": {"empty": "", "zero": 0, "none": {}}}]},
            "securitySchemes": {"b": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
            "securityRequirements": [{"schemes": {"b": {}}}],
            "skills": [{"id": "s", "name": "", "description": "", "tags": []}],
            "futureField": ""
        });
        assert_eq!(signing_payload(&card), canonical_json(&want));
    }

    fn verify(signer: &CardSigner, card: &Value, signature: &Value) -> bool {
        let protected = signature["protected"].as_str().unwrap();
        let sig = URL_SAFE_NO_PAD
            .decode(signature["signature"].as_str().unwrap())
            .unwrap();
        let input = format!(
            "{protected}.{}",
            URL_SAFE_NO_PAD.encode(signing_payload(card))
        );
        let ok = match &signer.key {
            Key::Es256(key) => {
                assert_eq!(sig.len(), 64, "ES256 is raw r||s");
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key().as_ref())
                    .verify(input.as_bytes(), &sig)
            }
            Key::Rs256(key) => {
                UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key().as_ref())
                    .verify(input.as_bytes(), &sig)
            }
        };
        ok.is_ok()
    }

    fn card() -> Value {
        json!({
            "name": "Route Planner ✈",
            "description": "plans routes",
            "version": "1.2.0",
            "supportedInterfaces": [{"url": "https://gw.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "route", "name": "Route", "description": "d", "tags": ["maps"]}],
            "signatures": [{"protected": "b2xk", "signature": "b2xk"}]
        })
    }

    #[test]
    fn sign_and_verify_every_key_format() {
        let generated = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .unwrap()
            .serialize_pem();
        let keys = [
            (generated.into_bytes(), "ES256"),
            (fixture("p256.sec1.pem"), "ES256"),
            (fixture("rsa2048.pkcs8.pem"), "RS256"),
            (fixture("rsa2048.pkcs1.pem"), "RS256"),
        ];
        for (pem, alg) in keys {
            let signer =
                CardSigner::from_pem(&pem, "key-1", Some("https://gw.example/jwks.json")).unwrap();
            assert_eq!(signer.algorithm(), alg);
            let signature = signer.sign(&card());
            assert_eq!(signature.as_object().unwrap().len(), 2);
            let header: Value = serde_json::from_slice(
                &URL_SAFE_NO_PAD
                    .decode(signature["protected"].as_str().unwrap())
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(
                header,
                json!({"alg": alg, "typ": "JOSE", "kid": "key-1", "jku": "https://gw.example/jwks.json"})
            );
            assert!(verify(&signer, &card(), &signature), "{alg}");

            let mut tampered = card();
            tampered["skills"][0]["tags"][0] = json!("mapz");
            assert!(!verify(&signer, &tampered, &signature), "{alg} tampered");
        }
    }

    #[test]
    fn jku_is_left_out_when_not_given() {
        let signer = CardSigner::from_pem(&fixture("p256.sec1.pem"), "k", None).unwrap();
        let protected = signer.sign(&card())["protected"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            URL_SAFE_NO_PAD.decode(protected).unwrap(),
            br#"{"alg":"ES256","typ":"JOSE","kid":"k"}"#
        );
    }

    #[test]
    fn signatures_member_is_not_signed() {
        let signer = CardSigner::from_pem(&fixture("p256.sec1.pem"), "k", None).unwrap();
        let signature = signer.sign(&card());
        let mut without = card();
        without.as_object_mut().unwrap().remove("signatures");
        assert_eq!(signing_payload(&without), signing_payload(&card()));
        // The served card carries the new signature next to (or instead of) old ones.
        let mut served = card();
        served["signatures"] = json!([signature.clone()]);
        assert!(verify(&signer, &served, &signature));
        assert!(verify(&signer, &without, &signature));
    }

    fn error(pem: &[u8]) -> SignError {
        CardSigner::from_pem(pem, "k", None).unwrap_err()
    }

    #[test]
    fn unusable_keys_are_refused_with_a_reason() {
        let cert = rcgen::generate_simple_self_signed(["a.test".to_owned()]).unwrap();
        assert!(matches!(
            error(cert.cert.pem().as_bytes()),
            SignError::NotPem(_)
        ));
        assert!(matches!(error(b"not a key at all"), SignError::NotPem(_)));
        let e = error(&fixture("ed25519.pkcs8.pem"));
        assert!(
            matches!(&e, SignError::UnsupportedKey(kind) if kind == "Ed25519"),
            "{e}"
        );
        let e = error(&fixture("p384.pkcs8.pem"));
        assert!(e.to_string().contains("P-384"), "{e}");
        assert!(matches!(
            error(&fixture("rsa1024.pkcs8.pem")),
            SignError::RsaTooSmall
        ));
        let encrypted =
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMAA=\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert!(matches!(error(encrypted), SignError::Encrypted));
        assert!(matches!(
            CardSigner::from_pem(&fixture("p256.sec1.pem"), "", None),
            Err(SignError::EmptyKid)
        ));
        let e = error(&fixture("p384.sec1.pem"));
        assert!(e.to_string().contains("P-384"), "{e}");
    }

    #[test]
    fn required_marks_name_fields_the_card_holds() {
        // Every message reachable from AgentCard, walked through the compiled schema.
        let mut todo = vec![schema::message("AgentCard").unwrap()];
        let mut reached = std::collections::BTreeSet::new();
        while let Some(message) = todo.pop() {
            if reached.insert(message.name.as_str()) {
                todo.extend(message.fields.iter().filter_map(|f| f.kind.message()));
            }
        }
        for (name, fields) in REQUIRED {
            assert!(reached.contains(name), "{name} is not in the card");
            let message = schema::message(name).unwrap();
            for field in *fields {
                assert!(message.field(field).is_some(), "{name}.{field}");
            }
        }
        // 20 messages and AgentCardSignature (whose `signatures` member is not signed).
        assert_eq!(reached.len(), 21, "{reached:?}");
    }
}

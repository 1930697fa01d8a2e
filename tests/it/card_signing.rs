//! Agent card signatures checked by another implementation: the reference SDK's verifier
//! (`a2a.utils.signing` of a2a-sdk 1.3.0: its own JCS, PyJWT and `cryptography`), run by
//! `tests/peers/verify_card.py` in the provisioned test venv. Keys are fresh (rcgen) or the
//! openssl-made fixtures in `tests/fixtures/card-signing/`.

use crate::harness::peer;

use std::path::Path;

use a2a_gateway::signing::{signing_payload, CardSigner};
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/card-signing")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn p256() -> String {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .unwrap()
        .serialize_pem()
}

/// A card as the gateway would serve it: nested messages, unicode (keys too, so the
/// UTF-16 key order matters), numbers in a `Struct`, and an old signature of the agent.
fn card() -> Value {
    json!({
        "name": "Route Planner ✈",
        "description": "Plans routes 🚀 across \"zones\"\nwith tabs\tand control \u{000f} chars",
        "version": "2.1.0",
        "supportedInterfaces": [
            {"url": "https://gateway.example/a2a/route", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "provider": {"organization": "Exämple Geo", "url": "https://geo.example"},
        "documentationUrl": "https://geo.example/docs",
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "extensions": [{
                "uri": "https://geo.example/ext/units/v1",
                "description": "units",
                "required": true,
                "params": {
                    "€": "euro", "ö": "o-umlaut", "😀": "emoji", "z": 1, "a": -7,
                    "ratio": 0.1, "big": 9007199254740993_u64, "tiny": 1e-7, "huge": 1e21,
                    "nested": {"list": [1, 2.5, "three", true], "flag": false}
                }
            }]
        },
        "securitySchemes": {
            "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                "tokenUrl": "https://geo.example/token", "scopes": {"route:read": "read routes"}
            }}}}
        },
        "securityRequirements": [{"schemes": {"oauth": {"list": ["route:read"]}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{
            "id": "route", "name": "Route", "description": "Plans a route", "tags": ["maps", "travel"],
            "examples": ["Paris → Zürich"]
        }],
        "iconUrl": "https://geo.example/icon.png",
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c3RhbGU"}]
    })
}

/// The card as served after signing: the agent's old signature kept next to the new one.
fn signed(signer: &CardSigner, card: &Value) -> Value {
    let mut served = card.clone();
    let signature = signer.sign(card);
    served["signatures"].as_array_mut().unwrap().push(signature);
    served
}

#[test]
fn the_reference_sdk_accepts_gateway_signatures_and_rejects_tampering() {
    let ec = p256();
    let other_ec = p256();
    let rsa = fixture("rsa2048.pkcs1.pem");
    let sec1 = fixture("p256.sec1.pem");
    let es256 = CardSigner::from_pem(
        ec.as_bytes(),
        "gw-ec",
        Some("https://gateway.example/jwks.json"),
    )
    .unwrap();
    let rs256 = CardSigner::from_pem(rsa.as_bytes(), "gw-rsa", None).unwrap();
    let es256_sec1 = CardSigner::from_pem(sec1.as_bytes(), "gw-sec1", None).unwrap();
    // Signed with a key the verifier does not hold under that kid.
    let impostor = CardSigner::from_pem(other_ec.as_bytes(), "gw-ec", None).unwrap();

    let mut tampered = signed(&es256, &card());
    tampered["capabilities"]["extensions"][0]["params"]["nested"]["list"][1] = json!(2.25);
    let mut tampered_rsa = signed(&rs256, &card());
    tampered_rsa["supportedInterfaces"][0]["url"] = json!("https://evil.example/a2a");

    let cards = [
        signed(&es256, &card()),
        signed(&rs256, &card()),
        signed(&es256_sec1, &card()),
        tampered,
        tampered_rsa,
        signed(&impostor, &card()),
    ];
    let result = peer::sdk_verify(
        &[("gw-ec", &ec), ("gw-rsa", &rsa), ("gw-sec1", &sec1)],
        &cards,
    );

    // Both sides canonicalise the untampered card to the same bytes (checked first: a
    // difference here explains a rejection below).
    let ours = String::from_utf8(signing_payload(&card())).unwrap();
    assert_eq!(result.payloads[0], ours);
    assert!(ours.contains(r#""big":9007199254740992,"#), "{ours}");
    assert!(ours.contains(r#""huge":1e+21,"#), "{ours}");
    assert!(ours.contains(r#""€":"euro","😀":"emoji""#), "{ours}");

    let invalid = "invalid: No valid signature found";
    assert_eq!(
        result.verdicts,
        ["valid", "valid", "valid", invalid, invalid, invalid]
    );
}

/// Where a2a-sdk 1.3.0 departs from §8.4.1: it drops *every* empty string, list and object
/// and every `null` (REQUIRED fields too, and inside `Struct`s), while the spec keeps
/// REQUIRED fields, explicitly present ones and `Struct` contents. The gateway follows the spec, so a card with such values
/// verifies with spec-conformant clients but not with this SDK version. This pins the
/// difference: when the SDK changes, this test says so.
#[test]
fn sdk_1_3_drops_empty_values_the_spec_keeps() {
    let ec = p256();
    let signer = CardSigner::from_pem(ec.as_bytes(), "gw-ec", None).unwrap();
    let mut card = card();
    // A bearer requirement without scopes: `{"list": []}` → spec `{}`, SDK drops the
    // requirement entirely.
    card["securityRequirements"] = json!([{"schemes": {"oauth": {"list": []}}}]);
    // A null in an extension's `params` list: JSON the agent chose, signed as it is.
    let mut with_null = self::card();
    with_null["capabilities"]["extensions"][0]["params"]["nested"]["list"] = json!([1, null]);
    let result = peer::sdk_verify(
        &[("gw-ec", &ec)],
        &[signed(&signer, &card), signed(&signer, &with_null)],
    );
    let ours = String::from_utf8(signing_payload(&card)).unwrap();
    let ours_null = String::from_utf8(signing_payload(&with_null)).unwrap();
    assert!(ours_null.contains(r#""list":[1,null]"#), "{ours_null}");
    assert!(
        result.payloads[1].contains(r#""list":[1]"#),
        "{}",
        result.payloads[1]
    );
    assert!(
        ours.contains(r#""securityRequirements":[{"schemes":{"oauth":{}}}]"#),
        "{ours}"
    );
    assert!(
        !result.payloads[0].contains("securityRequirements"),
        "{}",
        result.payloads[0]
    );
    assert_eq!(result.verdicts, ["invalid: No valid signature found"; 2]);
}

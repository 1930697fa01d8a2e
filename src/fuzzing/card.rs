//! The agent card as a route serves it, and the signing canonicalisation.
//!
//! `card` runs the real path of a file source: the card file is read and checked when the
//! route's card service is made, then served for a request (`respond`) and rewritten as an
//! extended card (`rewrite_extended`). Whatever the card and the request's host headers,
//! a served card leads clients to the gateway: its first interface is the gateway's
//! JSON-RPC endpoint, the agent's signatures are gone, and a re-signed card's signature
//! verifies over the card as served.

use std::path::PathBuf;
use std::sync::OnceLock;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use http::StatusCode;
use http_body_util::BodyExt;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED,
    ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde_json::Value;

use crate::card::{
    CardService, CardSettings, Enforced, RouteCard, SecurityPolicy, SignaturePolicy,
};
use crate::protocol::binding::Binding;
use crate::signing::{canonical_json, signing_payload, CardSigner};

/// The host a re-signing route without a public URL allows.
const ALLOWED: &str = "gateway.example";

/// The route's JSON-RPC path.
const PATH: &str = "/agents/fuzz/a2a/jsonrpc";

/// The gateway's signing key (P-256): PEM and public key, made once.
fn key() -> &'static (String, Vec<u8>) {
    static KEY: OnceLock<(String, Vec<u8>)> = OnceLock::new();
    KEY.get_or_init(|| {
        let rng = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("a key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("the key just made");
        let pem = pem("PRIVATE KEY", pkcs8.as_ref());
        (pem, pair.public_key().as_ref().to_vec())
    })
}

fn pem(label: &str, der: &[u8]) -> String {
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        STANDARD.encode(der)
    )
}

/// A file under the temporary directory, unique to this thread, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, contents: &[u8]) -> Scratch {
        let path = std::env::temp_dir().join(format!(
            "a2a-fuzz-{}-{:?}-{name}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, contents).expect("a writable temporary directory");
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `card` target. Byte 0 chooses the route's card settings (bits: 0-1 signature policy,
/// 2 keep-interfaces, 3 a skills filter, 4 a fixed tenant and authentication (API keys and
/// mutual TLS declared, merged with the agent's schemes), 5 a public URL, 6 trusted
/// forwarded headers, 7 the HTTP+JSON binding); the bytes up to the first newline are the
/// request's `Host` (or, when trusted, `Forwarded`) header; the rest is the card file.
pub fn card(data: &[u8]) {
    let (knobs, rest) = data.split_first().unwrap_or((&0, &[]));
    let (host, card) = match rest.iter().position(|&b| b == b'\n') {
        Some(end) => (&rest[..end], &rest[end + 1..]),
        None => (ALLOWED.as_bytes(), rest),
    };
    let bit = |n: u8| knobs & (1 << n) != 0;
    let policy = match knobs & 3 {
        1 => SignaturePolicy::Resign,
        2 => SignaturePolicy::Preserve,
        _ => SignaturePolicy::Strip,
    };
    let key_file = Scratch::new("key.pem", key().0.as_bytes());
    let card_file = Scratch::new("card.json", card);
    let resign = policy == SignaturePolicy::Resign;
    let settings = CardSettings {
        source: Some(card_file.0.to_string_lossy().into_owned()),
        keep_interfaces: bit(2),
        signatures: Some(policy),
        sign_key: resign.then(|| key_file.0.clone()),
        sign_kid: resign.then(|| "fuzz-key".to_owned()),
        skills: bit(3).then(|| vec!["demo".to_owned(), String::new()]),
        security: bit(4).then_some(SecurityPolicy::Merge),
        ..Default::default()
    };
    let route = RouteCard {
        // The v1.0 form: the dual-format card for v0.3 clients adds members its signature
        // does not cover (see the README's "v0.3 clients"), so the property below is
        // about the v1.0 card.
        legacy: false,
        route: "fuzz".to_owned(),
        jsonrpc_path: PATH.to_owned(),
        card_path: "/agents/fuzz/.well-known/agent-card.json".to_owned(),
        public_url: bit(5).then(|| "https://gw.example/base".to_owned()),
        trust_forwarded: bit(6),
        trusted_proxy_hops: 1,
        // Signing needs vouched URLs: without a public URL, the one allowed host.
        allowed_hosts: match resign && !bit(5) {
            true => vec![ALLOWED.to_owned()],
            false => Vec::new(),
        },
        tls: false,
        host: None,
        fixed_tenant: bit(4).then(|| "acme".to_owned()),
        enforced: Enforced {
            api_key_header: bit(4).then(|| "x-api-key".to_owned()),
            mtls: bit(4),
            ..Enforced::default()
        },
        binding: if bit(7) {
            Binding::HttpJson
        } else {
            Binding::Grpc
        },
        // The gRPC front and its listener's port ride on the binding's knob: both are the
        // route's shape.
        fronts: match bit(7) {
            true => vec![Binding::JsonRpc, Binding::Grpc],
            false => vec![Binding::JsonRpc],
        },
        rest_path: "/a2a/rest".to_owned(),
        grpc_port: bit(7).then_some(50051),
    };
    // A card or settings the route refuses is a start-up error, not a finding.
    let Ok(service) = CardService::new(&settings, route, None) else {
        return;
    };
    let mut request = http::Request::get("/agents/fuzz/.well-known/agent-card.json");
    let header = if bit(6) { "forwarded" } else { "host" };
    if let Ok(value) = http::HeaderValue::from_bytes(host) {
        request = request.header(header, value);
    }
    let (parts, ()) = request.body(()).expect("a valid request").into_parts();
    let response = service.respond(&parts);
    let status = response.status();
    let body = futures::executor::block_on(response.into_body().collect())
        .expect("card bodies do not fail")
        .to_bytes();
    let source: Value = serde_json::from_slice(card).expect("the service read this card");
    match status {
        StatusCode::OK => {
            let served: Value = serde_json::from_slice(&body).expect("a served card is JSON");
            check_served(&served, &source, policy);
            if resign {
                let url = served["supportedInterfaces"][0]["url"].as_str();
                let vouched = ["https://gw.example/base/", &format!("://{ALLOWED}/")];
                assert!(
                    url.is_some_and(|u| vouched.iter().any(|v| u.contains(v))),
                    "a signed card names only a vouched origin: {url:?}"
                );
            }
        }
        // No public URL and no usable host: the card's URL cannot be known.
        StatusCode::BAD_REQUEST => assert!(!bit(5), "a public URL needs no host"),
        other => panic!("HTTP {other} for a card that was read at start"),
    }
    let extended = service.rewrite_extended(source.clone(), &parts);
    if policy != SignaturePolicy::Preserve {
        check_served(&extended, &source, policy);
    }
}

/// What every served card holds, given the source card and the signature policy.
fn check_served(served: &Value, source: &Value, policy: SignaturePolicy) {
    if policy == SignaturePolicy::Preserve {
        assert_eq!(served, source, "preserve serves the card unchanged");
        return;
    }
    let first = &served["supportedInterfaces"][0];
    assert_eq!(first["protocolBinding"], "JSONRPC", "{served}");
    let url = first["url"].as_str().expect("the gateway's URL");
    assert!(url.ends_with(PATH), "the gateway's endpoint first: {url}");
    let signatures = served.get("signatures");
    if policy == SignaturePolicy::Strip {
        assert!(signatures.is_none(), "the agent's signatures are removed");
        return;
    }
    let signature = &signatures.expect("a re-signed card")[0];
    let protected = signature["protected"].as_str().expect("protected");
    let input = format!(
        "{protected}.{}",
        URL_SAFE_NO_PAD.encode(signing_payload(served))
    );
    let bytes = URL_SAFE_NO_PAD
        .decode(signature["signature"].as_str().expect("signature"))
        .expect("base64url");
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &key().1)
        .verify(input.as_bytes(), &bytes)
        .expect("the gateway's signature verifies over the card as served");
}

/// `signing` target: the bytes as a PEM key (raw and armoured in each label the signer
/// reads, reaching its DER parser), and, when they are JSON, as a card to canonicalise:
/// the canonical form is JSON and a fixed point.
pub fn signing(data: &[u8]) {
    let _ = CardSigner::from_pem(data, "kid", None);
    for label in ["PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"] {
        let _ = CardSigner::from_pem(pem(label, data).as_bytes(), "kid", Some("https://k"));
    }
    let Ok(card) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let canonical = canonical_json(&card);
    let reparsed: Value = serde_json::from_slice(&canonical).expect("JCS output is JSON");
    assert_eq!(canonical_json(&reparsed), canonical, "JCS is a fixed point");
    let payload = signing_payload(&card);
    let reparsed: Value = serde_json::from_slice(&payload).expect("the payload is JSON");
    assert_eq!(
        signing_payload(&reparsed),
        payload,
        "the payload is a fixed point"
    );
}

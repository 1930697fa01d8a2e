//! Bearer JWTs at the wire: a route with `[[auth.jwt]]` in front of a test issuer
//! (`harness::issuer`, its keys fetched from its JWKS URL). Tokens signed by the issuer's
//! RS256, ES256 and EdDSA keys reach the agent as their `sub`; expired, not yet valid,
//! wrong-audience, wrong-issuer, `alg: none`, key-confusion (HS256 with the RSA public key),
//! unknown-`kid`, tampered and oversized tokens get 401 with a `Bearer` challenge and a
//! JSON-RPC error that never repeats the token, and the agent sees none of them.

use crate::harness;

use a2a_gateway::auth::jwt::MAX_TOKEN_SIZE;
use harness::issuer::{self, Issuer, AUDIENCE};
use harness::*;
use serde_json::{json, Value};

/// The JSON-RPC URL of a gateway whose route trusts `issuer`.
async fn gateway(issuer: &Issuer, backend: &str) -> String {
    let file = format!(
        "backend = \"{backend}\"\n[[auth.jwt]]\nissuer = \"{}\"\naudiences = [\"{AUDIENCE}\"]\n\
         jwks-url = \"{}\"\n",
        issuer.url,
        issuer.jwks_url()
    );
    let origin = serve_on_workers(&[], Some(&file)).await;
    format!("{origin}/a2a/jsonrpc")
}

async fn get_task(url: &str, id: u32, token: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let body = request(json!(id), "GetTask", json!({"id": format!("t-{id}")}));
    let bearer = format!("Bearer {token}");
    post_with(
        url,
        body,
        &[("a2a-version", "1.0"), ("authorization", &bearer)],
    )
    .await
}

/// The payload of `token` replaced by `claims`, its signature kept.
fn tampered(token: &str, claims: &Value) -> String {
    use base64::Engine;
    let parts: Vec<&str> = token.split('.').collect();
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{}.{payload}.{}", parts[0], parts[2])
}

#[tokio::test]
async fn issuer_signed_tokens_reach_the_agent_and_every_forgery_is_refused_before_it() {
    let issuer = Issuer::start().await;
    let (backend, url) = harness::task_backend().await;
    let jsonrpc = gateway(&issuer, &url).await;

    // Until the first JWKS arrives, tokens are refused at once (not held).
    let claims = issuer.claims("alice");
    let first = issuer.mint(&claims, "rsa-1", "RS256");
    let started = std::time::Instant::now();
    while issuer.jwks_requests() == 0 || get_task(&jsonrpc, 99, &first).await.0 != 200 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "no keys in 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let before = backend.calls();

    // Each of the issuer's algorithms: the agent is called.
    for (n, (kid, alg)) in [("rsa-1", "RS256"), ("ec-1", "ES256"), ("ed-1", "EdDSA")]
        .into_iter()
        .enumerate()
    {
        let token = issuer.mint(&claims, kid, alg);
        let (status, _, body) = get_task(&jsonrpc, n as u32, &token).await;
        assert_eq!(status, 200, "{alg}: {body}");
        assert!(body.contains(&format!("\"t-{n}\"")), "{alg}: {body}");
    }
    assert_eq!(backend.calls(), before + 3);

    let now = issuer::now();
    let with = |patch: Value| {
        let mut claims = issuer.claims("mallory");
        for (key, value) in patch.as_object().unwrap() {
            claims[key] = value.clone();
        }
        claims
    };
    let valid = issuer.mint(&claims, "rsa-1", "RS256");
    // A key of the issuer's that its JWKS does not publish.
    issuer.add_key("rsa-2", "RS256");
    let forged: Vec<(&str, String)> = vec![
        (
            "expired",
            issuer.mint(&with(json!({"exp": now - 3600})), "rsa-1", "RS256"),
        ),
        (
            "not yet valid",
            issuer.mint(&with(json!({"nbf": now + 3600})), "rsa-1", "RS256"),
        ),
        (
            "wrong audience",
            issuer.mint(&with(json!({"aud": "someone-else"})), "ec-1", "ES256"),
        ),
        (
            "wrong issuer",
            issuer.mint(
                &with(json!({"iss": "https://evil.example"})),
                "ec-1",
                "ES256",
            ),
        ),
        (
            "alg none",
            issuer::unsigned(&json!({"alg": "none", "typ": "JWT"}), &claims, b""),
        ),
        (
            "key confusion",
            issuer::hmac(&claims, "rsa-1", &issuer.rsa_public_key("rsa-1")),
        ),
        ("unknown kid", issuer.mint(&claims, "rsa-2", "RS256")),
        ("tampered", tampered(&valid, &with(json!({"sub": "root"})))),
        ("oversized", "a".repeat(MAX_TOKEN_SIZE + 1)),
        ("not a JWT", "opaque-token".to_owned()),
    ];
    for (n, (what, token)) in forged.iter().enumerate() {
        let (status, headers, body) = get_task(&jsonrpc, 100 + n as u32, token).await;
        assert_eq!(status, 401, "{what}: {body}");
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.starts_with("Bearer ") && challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        let reply: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            reply["error"]["data"][0]["reason"], "UNAUTHENTICATED",
            "{what}"
        );
        // No part of the token comes back (its signature is the longest part).
        let signature = token.rsplit('.').next().unwrap();
        if signature.len() >= 8 {
            assert!(!body.contains(signature), "{what} echoed: {body}");
            assert!(!challenge.contains(signature), "{what} echoed: {challenge}");
        }
    }
    assert_eq!(
        backend.calls(),
        before + 3,
        "a forged token reached the agent"
    );
}

//! Bearer JWT verification (`a2a_gateway::auth::jwt::JwtAuth`) against a real issuer over
//! a socket (`harness::issuer`): RS256, ES256 and EdDSA tokens verify; expired, early,
//! wrong-audience, wrong-issuer, unsigned, key-confusion, tampered, oversized and
//! unknown-key tokens are refused, saying why without the token; keys come from a URL,
//! OIDC discovery or a file, are fetched again for an unknown `kid` at most once per
//! interval, survive the issuer's outage, and rotate; verified tokens are cached until
//! their `exp`. `check-config` names a bad `jwks-file`.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::auth::jwt::{JwtAuth, MAX_JWKS_SIZE, MAX_TOKEN_SIZE};
use a2a_gateway::auth::table::JwtIssuerTable;
use a2a_gateway::auth::Scheme;
use serde_json::{json, Value};

use crate::harness::issuer::{self, Issuer};
use crate::harness::process::{OutputWithin, TempFile, BIN, EXITS_WITHIN};

/// A started verifier for `tables`.
fn started(tables: &[JwtIssuerTable]) -> Arc<JwtAuth> {
    let auth = JwtAuth::new(tables, "sub").unwrap();
    auth.start();
    auth
}

/// Waits until `auth` has the issuer's keys (a fresh token verifies).
async fn keys_arrive(auth: &JwtAuth, issuer: &Issuer) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let token = issuer.mint(&issuer.claims("probe"), "ed-1", "EdDSA");
    loop {
        match auth.verify(&token).await {
            Ok(_) => return,
            Err(e) if e.kind() == "no-keys" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("the keys did not arrive: {e}"),
        }
    }
}

/// Why `token` is refused (its `kind()`), checking the message quotes no part of it.
async fn refused(auth: &JwtAuth, token: &str) -> &'static str {
    let refusal = auth.verify(token).await.expect_err("refused");
    let text = refusal.to_string();
    for part in token.split('.').filter(|p| p.len() >= 8) {
        assert!(!text.contains(part), "{text}");
    }
    refusal.kind()
}

#[tokio::test]
async fn rs256_es256_and_eddsa_tokens_verify() {
    let issuer = Issuer::start().await;
    let auth = started(&[issuer.table()]);
    keys_arrive(&auth, &issuer).await;
    for (kid, alg) in [("rsa-1", "RS256"), ("ec-1", "ES256"), ("ed-1", "EdDSA")] {
        let claims = issuer.claims(&format!("alice-{alg}"));
        let principal = auth.verify(&issuer.mint(&claims, kid, alg)).await.unwrap();
        assert_eq!(&*principal.name, format!("alice-{alg}"));
        assert_eq!(principal.scheme, Scheme::Jwt);
        let kept = principal.claims.unwrap();
        assert_eq!(kept["aud"], issuer::AUDIENCE);
        assert_eq!(kept["iss"], issuer.url.as_str());
    }
    // Any of several audiences, `aud` as a list.
    let mut claims = issuer.claims("bob");
    claims["aud"] = json!(["other", issuer::AUDIENCE]);
    assert!(auth
        .verify(&issuer.mint(&claims, "ec-1", "ES256"))
        .await
        .is_ok());
}

#[tokio::test]
async fn bad_tokens_are_refused_with_the_reason() {
    let issuer = Issuer::start().await;
    let auth = started(&[issuer.table()]);
    keys_arrive(&auth, &issuer).await;
    let now = issuer::now();
    let with = |changes: Value| {
        let mut claims = issuer.claims("mallory");
        for (k, v) in changes.as_object().unwrap() {
            match v {
                Value::Null => claims.as_object_mut().unwrap().remove(k),
                v => claims.as_object_mut().unwrap().insert(k.clone(), v.clone()),
            };
        }
        claims
    };
    let rs = |claims: Value| issuer.mint(&claims, "rsa-1", "RS256");
    let cases = [
        (rs(with(json!({"exp": now - 120}))), "expired"),
        (rs(with(json!({"exp": null}))), "malformed"),
        (rs(with(json!({"exp": "tomorrow"}))), "malformed"),
        (rs(with(json!({"nbf": now + 300}))), "not-yet-valid"),
        (rs(with(json!({"iat": now + 300}))), "not-yet-valid"),
        (rs(with(json!({"aud": "someone-else"}))), "bad-audience"),
        (rs(with(json!({"aud": null}))), "bad-audience"),
        (
            rs(with(json!({"iss": "https://evil.example"}))),
            "unknown-issuer",
        ),
        (rs(with(json!({"iss": null}))), "malformed"),
        (rs(with(json!({"sub": null}))), "no-principal"),
        (rs(with(json!({"sub": 42}))), "no-principal"),
        (rs(with(json!({"sub": ""}))), "no-principal"),
        // The key's type does not do the header's algorithm.
        (
            issuer.mint(&with(json!({})), "ec-1", "RS256"),
            "bad-algorithm",
        ),
        // Accepted by no issuer here (the default list).
        (
            issuer.mint(&with(json!({})), "rsa-1", "PS256"),
            "bad-algorithm",
        ),
    ];
    for (token, kind) in cases {
        assert_eq!(refused(&auth, &token).await, kind, "{token}");
    }
}

#[tokio::test]
async fn forged_tokens_are_refused_before_or_by_the_signature() {
    let issuer = Issuer::start().await;
    let auth = started(&[issuer.table()]);
    keys_arrive(&auth, &issuer).await;
    let claims = issuer.claims("mallory");
    let checks = auth.signature_checks();
    // Unsigned, in any spelling.
    for alg in ["none", "None", "NONE"] {
        let header = json!({"alg": alg, "typ": "JWT"});
        let token = issuer::unsigned(&header, &claims, b"");
        assert_eq!(refused(&auth, &token).await, "bad-algorithm");
    }
    // Key confusion: HS256 with the issuer's RSA public key as the secret.
    let public = issuer.rsa_public_key("rsa-1");
    let token = issuer::hmac(&claims, "rsa-1", &public);
    assert_eq!(refused(&auth, &token).await, "bad-algorithm");
    let jwk_n = issuer.jwks_document();
    assert_eq!(
        refused(&auth, &issuer::hmac(&claims, "rsa-1", jwk_n.as_bytes())).await,
        "bad-algorithm"
    );
    assert_eq!(
        auth.signature_checks(),
        checks,
        "no key was ever used for them"
    );
    // Tampered payload: a valid token's signature over other claims.
    let good = issuer.mint(&issuer.claims("alice"), "ec-1", "ES256");
    let forged = issuer.mint(&issuer.claims("admin"), "ec-1", "ES256");
    let (head, rest) = good.split_once('.').unwrap();
    let signature = rest.rsplit_once('.').unwrap().1;
    let payload = forged.split('.').nth(1).unwrap();
    let tampered = format!("{head}.{payload}.{signature}");
    assert_eq!(refused(&auth, &tampered).await, "bad-signature");
    // A key of the same type the issuer never published.
    issuer.add_key("rogue", "ES256");
    let rogue = issuer.mint(&issuer.claims("admin"), "rogue", "ES256");
    let renamed = rogue.replacen(
        rogue.split('.').next().unwrap(),
        good.split('.').next().unwrap(),
        1,
    );
    assert_eq!(refused(&auth, &renamed).await, "bad-signature");
    // Keys the token brings along (`jwk`) or points to (`jku`, `x5u`) are never used or
    // fetched: the issuer's own key does not verify the attacker's signature.
    let attacker = Issuer::start().await;
    let header = json!({"alg": "ES256", "kid": "ec-1", "jku": attacker.jwks_url(),
        "x5u": attacker.jwks_url(),
        "jwk": serde_json::from_str::<Value>(&attacker.jwks_document()).unwrap()["keys"][0]});
    let token = attacker.mint_with(&header, &issuer.claims("admin"), "ec-1");
    assert_eq!(refused(&auth, &token).await, "bad-signature");
    assert_eq!(attacker.jwks_requests(), 0);
    assert!(auth.verify(&good).await.is_ok());
}

#[tokio::test]
async fn the_token_size_limit_is_exact() {
    let issuer = Issuer::start().await;
    let auth = started(&[issuer.table()]);
    keys_arrive(&auth, &issuer).await;
    let sized = |pad: usize| {
        let mut claims = issuer.claims("alice");
        claims["pad"] = "x".repeat(pad).into();
        issuer.mint(&claims, "ed-1", "EdDSA")
    };
    // The largest token within the limit (base64 lengths skip one residue mod 4).
    let bare = sized(0).len();
    let mut pad = (MAX_TOKEN_SIZE - bare) * 3 / 4;
    while sized(pad + 1).len() <= MAX_TOKEN_SIZE {
        pad += 1;
    }
    let largest = sized(pad);
    assert!(largest.len() >= MAX_TOKEN_SIZE - 1, "{}", largest.len());
    assert!(auth.verify(&largest).await.is_ok());
    let over = sized(pad + 1);
    assert!(over.len() > MAX_TOKEN_SIZE);
    assert_eq!(refused(&auth, &over).await, "too-large");
    let huge = sized(1 << 20);
    assert_eq!(refused(&auth, &huge).await, "too-large");
}

#[tokio::test]
async fn an_unknown_kid_fetches_again_at_most_once_per_interval_and_rotation_works() {
    let issuer = Issuer::start().await;
    // Without a short max-age the background would refetch every second.
    issuer.set_max_age(Some(3600));
    let auth = started(&[issuer.table()]);
    keys_arrive(&auth, &issuer).await;
    assert_eq!(issuer.jwks_requests(), 1);
    issuer.add_key("next", "ES256");
    let next = issuer.mint(&issuer.claims("alice"), "next", "ES256");
    // Within the 1s interval of the first fetch: refused without asking.
    assert_eq!(refused(&auth, &next).await, "unknown-key");
    assert_eq!(issuer.jwks_requests(), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // One fetch, still unknown.
    assert_eq!(refused(&auth, &next).await, "unknown-key");
    assert_eq!(issuer.jwks_requests(), 2);
    // A storm of random kids, concurrent: at most one more fetch.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let storm = (0..200).map(|i| {
        let claims = issuer.claims("attacker");
        let token = issuer.mint(&claims, "ec-1", "ES256");
        let header = json!({"alg": "ES256", "kid": format!("random-{i}")});
        let rest = token.split_once('.').unwrap().1;
        let forged = issuer::unsigned(&header, &claims, b"sig");
        let head = forged.split('.').next().unwrap();
        let token = format!("{head}.{rest}");
        let auth = auth.clone();
        async move { auth.verify(&token).await }
    });
    let results = futures::future::join_all(storm).await;
    assert!(results
        .iter()
        .all(|r| r.as_ref().is_err_and(|e| e.kind() == "unknown-key")));
    assert_eq!(issuer.jwks_requests(), 3, "one fetch for the whole storm");
    // Rotation: the new key is published, then found by the next refetch.
    issuer.publish("next");
    issuer.withdraw("ec-1");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(&*auth.verify(&next).await.unwrap().name, "alice");
    assert_eq!(issuer.jwks_requests(), 4);
    let old = issuer.mint(&issuer.claims("bob"), "ec-1", "ES256");
    assert_eq!(refused(&auth, &old).await, "unknown-key");
}

#[tokio::test]
async fn the_last_good_keys_stay_while_the_issuer_is_down() {
    let issuer = Issuer::start().await;
    let auth = started(&[issuer.table()]);
    keys_arrive(&auth, &issuer).await;
    issuer.set_down(true);
    let before = issuer.jwks_requests();
    // The background refreshes every second (no max-age) and fails.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(issuer.jwks_requests() > before, "it kept asking");
    let token = issuer.mint(&issuer.claims("carol"), "rsa-1", "RS256");
    assert_eq!(&*auth.verify(&token).await.unwrap().name, "carol");
    // An unknown kid while down: the failed refetch changes nothing.
    issuer.add_key("next", "EdDSA");
    let next = issuer.mint(&issuer.claims("dave"), "next", "EdDSA");
    assert_eq!(refused(&auth, &next).await, "unknown-key");
    let token = issuer.mint(&issuer.claims("erin"), "ec-1", "ES256");
    assert!(auth.verify(&token).await.is_ok());
}

#[tokio::test]
async fn until_the_first_keys_arrive_tokens_are_refused_at_once() {
    let issuer = Issuer::start().await;
    issuer.set_down(true);
    let auth = started(&[issuer.table()]);
    let token = issuer.mint(&issuer.claims("alice"), "rsa-1", "RS256");
    for _ in 0..3 {
        let started = Instant::now();
        assert_eq!(refused(&auth, &token).await, "no-keys");
        assert!(started.elapsed() < Duration::from_millis(200));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    issuer.set_down(false);
    keys_arrive(&auth, &issuer).await;
    assert!(auth.verify(&token).await.is_ok());
}

#[tokio::test]
async fn oidc_discovery_names_the_keys_and_its_issuer_must_match() {
    let issuer = Issuer::start().await;
    let table = JwtIssuerTable {
        jwks_url: None,
        ..issuer.table()
    };
    let auth = started(std::slice::from_ref(&table));
    keys_arrive(&auth, &issuer).await;
    assert!(issuer.discovery_requests() >= 1);

    let liar = Issuer::start().await;
    liar.claim_issuer("https://login.example.com");
    let table = JwtIssuerTable {
        jwks_url: None,
        ..liar.table()
    };
    let auth = started(&[table]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(liar.discovery_requests() >= 1);
    assert_eq!(liar.jwks_requests(), 0, "a lying document is not followed");
    let token = liar.mint(&liar.claims("alice"), "rsa-1", "RS256");
    assert_eq!(refused(&auth, &token).await, "no-keys");
}

#[tokio::test]
async fn a_jwks_larger_than_the_limit_is_refused() {
    let issuer = Issuer::start().await;
    issuer.set_jwks_size(Some(MAX_JWKS_SIZE));
    let auth = started(&[issuer.table()]);
    keys_arrive(&auth, &issuer).await;

    let issuer = Issuer::start().await;
    issuer.set_jwks_size(Some(MAX_JWKS_SIZE + 1));
    let auth = started(&[issuer.table()]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(issuer.jwks_requests() >= 1);
    let token = issuer.mint(&issuer.claims("alice"), "rsa-1", "RS256");
    assert_eq!(refused(&auth, &token).await, "no-keys");
}

#[tokio::test]
async fn verified_tokens_are_cached_until_their_exp() {
    let issuer = Issuer::start().await;
    let table = JwtIssuerTable {
        clock_skew: Some(Duration::ZERO),
        ..issuer.table()
    };
    let auth = started(&[table]);
    keys_arrive(&auth, &issuer).await;
    let token = issuer.mint(&issuer.claims("alice"), "rsa-1", "RS256");
    let checks = auth.signature_checks();
    for _ in 0..100 {
        assert_eq!(&*auth.verify(&token).await.unwrap().name, "alice");
    }
    assert_eq!(
        auth.signature_checks(),
        checks + 1,
        "one verification, 99 hits"
    );
    // A token about to expire: cached, then refused once its `exp` passed.
    let mut claims = issuer.claims("brief");
    claims["exp"] = (issuer::now() + 2).into();
    let brief = issuer.mint(&claims, "ec-1", "ES256");
    assert!(auth.verify(&brief).await.is_ok());
    assert!(auth.verify(&brief).await.is_ok());
    assert_eq!(auth.signature_checks(), checks + 2);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert_eq!(refused(&auth, &brief).await, "expired");
}

#[tokio::test]
async fn keys_from_a_file_need_no_network() {
    let issuer = Issuer::start().await;
    let file = TempFile::new("json", &issuer.jwks_document());
    let table = JwtIssuerTable {
        jwks_url: None,
        jwks_file: Some(file.path().into()),
        ..issuer.table()
    };
    // Not started: the file was read at load.
    let auth = JwtAuth::new(&[table], "sub").unwrap();
    let token = issuer.mint(&issuer.claims("alice"), "ec-1", "ES256");
    assert_eq!(&*auth.verify(&token).await.unwrap().name, "alice");
    assert_eq!(issuer.jwks_requests(), 0);
    // A file key never refetches.
    issuer.add_key("next", "ES256");
    let next = issuer.mint(&issuer.claims("alice"), "next", "ES256");
    assert_eq!(refused(&auth, &next).await, "unknown-key");
    assert_eq!(issuer.jwks_requests(), 0);
}

/// `check-config` names the key of a bad JWT table, and says what is wrong with the file.
#[test]
fn check_config_names_the_jwt_key_at_fault() {
    let missing = format!("{}/absent-jwks.json", std::env::temp_dir().display());
    let not_jwks = TempFile::new("json", "{\"keys\": 1}");
    let route =
        "[[route]]\nname = \"billing\"\npath = \"/billing\"\nbackend = \"http://127.0.0.1:1\"\n";
    let cases = [
        (
            format!("jwks-file = {missing:?}"),
            format!("auth.jwt[0].jwks-file: {missing}: No such file"),
        ),
        (
            format!("jwks-file = {:?}", not_jwks.path()),
            format!("auth.jwt[0].jwks-file: {}: not a JWKS", not_jwks.path()),
        ),
        (
            "jwks-url = \"http://login.example.com/jwks\"".to_owned(),
            "auth.jwt[0].jwks-url: ".to_owned(),
        ),
        (
            "algorithms = [\"HS256\"]".to_owned(),
            "auth.jwt[0].algorithms: \"HS256\" is refused".to_owned(),
        ),
    ];
    for (key, expected) in cases {
        let text =
            format!("{route}[[route.auth.jwt]]\nissuer = \"https://login.example.com\"\n{key}\n");
        let config = TempFile::new("toml", &text);
        let out = Command::new(BIN)
            .args(["check-config", config.path()])
            .output_within(EXITS_WITHIN);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&expected), "{expected}: {stderr}");
        assert!(stderr.contains("billing"), "names the route: {stderr}");
    }
}

#[tokio::test]
async fn a_dropped_verifier_stops_asking_the_issuer() {
    let issuer = Issuer::start().await;
    let auth = started(&[issuer.table()]);
    auth.start();
    keys_arrive(&auth, &issuer).await;
    // The background asks every second (no max-age), once however often started.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let asked = issuer.jwks_requests();
    assert!((2..=4).contains(&asked), "{asked}");
    drop(auth);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(issuer.jwks_requests(), asked);
}

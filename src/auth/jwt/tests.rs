//! Refusals before any key is used: shape, size, algorithm and issuer (signed tokens are
//! tested against a real issuer in `tests/it/jwt.rs`).

use super::*;

fn part(json: &str) -> String {
    URL_SAFE_NO_PAD.encode(json)
}

fn token(header: &str, claims: &str) -> String {
    format!("{}.{}.c2lnbmF0dXJl", part(header), part(claims))
}

fn auth() -> Arc<JwtAuth> {
    let table = JwtIssuerTable {
        issuer: "https://issuer.example".into(),
        jwks_url: Some("https://issuer.example/jwks".into()),
        ..JwtIssuerTable::default()
    };
    JwtAuth::new(&[table], "sub").unwrap()
}

const CLAIMS: &str = r#"{"iss":"https://issuer.example","sub":"alice","exp":4000000000}"#;

#[tokio::test]
async fn refusals_before_any_key_say_why_without_the_token() {
    let auth = auth();
    let cases = [
        ("x".repeat(MAX_TOKEN_SIZE + 1), "too-large"),
        ("a.b".to_owned(), "malformed"),
        (
            format!("{}.x", token(r#"{"alg":"RS256"}"#, CLAIMS)),
            "malformed",
        ),
        ("!!.??.sig".to_owned(), "malformed"),
        (
            token(r#"{"alg":"RS256","crit":["exp"]}"#, CLAIMS),
            "malformed",
        ),
        (
            token(r#"{"alg":"RS256"}"#, r#"{"sub":"alice"}"#),
            "malformed",
        ),
        (token(r#"{"alg":"none"}"#, CLAIMS), "bad-algorithm"),
        (token(r#"{"alg":"HS256"}"#, CLAIMS), "bad-algorithm"),
        (token(r#"{"alg":"XY999"}"#, CLAIMS), "bad-algorithm"),
        (token(r#"{"alg":"PS256"}"#, CLAIMS), "bad-algorithm"),
        (
            token(r#"{"alg":"RS256"}"#, r#"{"iss":"https://evil.example"}"#),
            "unknown-issuer",
        ),
        // Not started: no keys yet, refused at once rather than held.
        (token(r#"{"alg":"RS256","kid":"k"}"#, CLAIMS), "no-keys"),
    ];
    for (token, kind) in cases {
        let refusal = auth.verify(&token).await.unwrap_err();
        assert_eq!(refusal.kind(), kind, "{refusal}");
        let text = refusal.to_string();
        assert!(!text.contains("alice") && !text.contains("evil"), "{text}");
    }
    assert_eq!(auth.signature_checks(), 0);
}

#[test]
fn issuers_and_principal_claim_are_checked() {
    let table = JwtIssuerTable {
        issuer: "https://issuer.example".into(),
        ..JwtIssuerTable::default()
    };
    let err = JwtAuth::new(&[table.clone(), table.clone()], "sub")
        .err()
        .unwrap();
    assert!(err.starts_with("auth.jwt[1].issuer: "), "{err}");
    let err = JwtAuth::new(&[table], "").err().unwrap();
    assert!(err.starts_with("auth.principal-claim: "), "{err}");
}

#[test]
fn iat_in_the_future_is_not_yet_valid_and_times_are_numbers() {
    let claims = |iat: Value| Map::from_iter([("iat".to_owned(), iat)]);
    assert!(check_time_claims(&Map::new(), 100).is_ok());
    assert!(check_time_claims(&claims(100.into()), 100).is_ok());
    assert!(matches!(
        check_time_claims(&claims(101.into()), 100),
        Err(JwtRefusal::NotYetValid)
    ));
    assert!(matches!(
        check_time_claims(&claims("soon".into()), 100),
        Err(JwtRefusal::Malformed(_))
    ));
    let nbf = |nbf: Value| Map::from_iter([("nbf".to_owned(), nbf)]);
    assert!(
        check_time_claims(&nbf(100.into()), 100).is_ok(),
        "compared by the crate"
    );
    assert!(matches!(
        check_time_claims(&nbf("x".into()), 100),
        Err(JwtRefusal::Malformed(_))
    ));
}

//! A test token issuer for the JWT suites: an axum server on `127.0.0.1:0` serving its OIDC
//! discovery document and its JWKS (with a chosen `Cache-Control: max-age`), keys it can
//! add, publish, withdraw and rotate, an outage switch, a count of each document's
//! requests, and `mint` to sign tokens with real RS256, ES256 and EdDSA keys (ring), plus
//! the hostile ones (`unsigned`, `hmac`) no key of it signs.

mod rsa_keys;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_gateway::auth::table::JwtIssuerTable;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use http::{header, StatusCode};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The audience the suites' tokens carry and their issuers accept.
pub const AUDIENCE: &str = "a2a-gateway";

/// A signing key of the issuer.
enum Signer {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

struct Key {
    signer: Signer,
    jwk: Value,
    published: bool,
}

#[derive(Default)]
struct Inner {
    keys: Mutex<BTreeMap<String, Key>>,
    /// Which fixed RSA key the next RSA key takes.
    rsa_used: AtomicUsize,
    jwks_requests: AtomicUsize,
    discovery_requests: AtomicUsize,
    down: AtomicBool,
    max_age: Mutex<Option<u64>>,
    /// The JWKS body's exact size, reached with a `padding` member (none: unpadded).
    jwks_size: Mutex<Option<usize>>,
    /// The `issuer` the discovery document claims (the real one unless a test lies).
    claimed_issuer: Mutex<Option<String>>,
    url: String,
}

/// A running issuer; stops when dropped.
pub struct Issuer {
    /// `http://127.0.0.1:port`: the `iss` of its tokens.
    pub url: String,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl Issuer {
    /// An issuer publishing `rsa-1` (RS256), `ec-1` (ES256) and `ed-1` (EdDSA).
    pub async fn start() -> Issuer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let inner = Arc::new(Inner {
            url: url.clone(),
            ..Inner::default()
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        let issuer = Issuer { url, inner, task };
        for (kid, alg) in [("rsa-1", "RS256"), ("ec-1", "ES256"), ("ed-1", "EdDSA")] {
            issuer.add_key(kid, alg);
            issuer.publish(kid);
        }
        issuer
    }

    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.url)
    }

    /// An issuer table for this issuer: its JWKS URL, `AUDIENCE`, a 1s refresh.
    pub fn table(&self) -> JwtIssuerTable {
        JwtIssuerTable {
            issuer: self.url.clone(),
            audiences: vec![AUDIENCE.to_owned()],
            jwks_url: Some(self.jwks_url()),
            refresh: Some(Duration::from_secs(1)),
            ..JwtIssuerTable::default()
        }
    }

    /// A new key (not published yet) for `alg`: RS256 (two at most), ES256 or EdDSA.
    pub fn add_key(&self, kid: &str, alg: &str) {
        let rng = SystemRandom::new();
        let (signer, params) = match alg {
            "RS256" => {
                let index = self.inner.rsa_used.fetch_add(1, Ordering::Relaxed);
                let der = STANDARD.decode(rsa_keys::RSA_KEYS[index]).unwrap();
                let pair = RsaKeyPair::from_der(&der).unwrap();
                let public = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(pair.public());
                let params = json!({"kty": "RSA", "n": b64(&public.n), "e": b64(&public.e)});
                (Signer::Rsa(pair), params)
            }
            "ES256" => {
                let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
                let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
                let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
                // An uncompressed point: 0x04, x, y.
                let point = pair.public_key().as_ref();
                let params = json!({"kty": "EC", "crv": "P-256",
                    "x": b64(&point[1..33]), "y": b64(&point[33..])});
                (Signer::Ec(pair), params)
            }
            "EdDSA" => {
                let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
                let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
                let params =
                    json!({"kty": "OKP", "crv": "Ed25519", "x": b64(pair.public_key().as_ref())});
                (Signer::Ed(pair), params)
            }
            other => panic!("the test issuer has no {other} keys"),
        };
        let mut jwk = params;
        jwk["kid"] = kid.into();
        jwk["alg"] = alg.into();
        jwk["use"] = "sig".into();
        let key = Key {
            signer,
            jwk,
            published: false,
        };
        self.inner.keys.lock().unwrap().insert(kid.to_owned(), key);
    }

    /// The JWKS serves `kid` from now on.
    pub fn publish(&self, kid: &str) {
        self.inner
            .keys
            .lock()
            .unwrap()
            .get_mut(kid)
            .unwrap()
            .published = true;
    }

    /// The JWKS no longer serves `kid` (it can still sign).
    pub fn withdraw(&self, kid: &str) {
        self.inner
            .keys
            .lock()
            .unwrap()
            .get_mut(kid)
            .unwrap()
            .published = false;
    }

    /// While down, both documents answer 503.
    pub fn set_down(&self, down: bool) {
        self.inner.down.store(down, Ordering::SeqCst);
    }

    /// The JWKS's `Cache-Control: max-age` (none by default).
    pub fn set_max_age(&self, seconds: Option<u64>) {
        *self.inner.max_age.lock().unwrap() = seconds;
    }

    /// The JWKS body is padded to exactly `size` bytes.
    pub fn set_jwks_size(&self, size: Option<usize>) {
        *self.inner.jwks_size.lock().unwrap() = size;
    }

    /// The JWKS as served now.
    pub fn jwks_document(&self) -> String {
        self.inner.document()
    }

    /// The `issuer` the discovery document claims instead of the real one.
    pub fn claim_issuer(&self, issuer: &str) {
        *self.inner.claimed_issuer.lock().unwrap() = Some(issuer.to_owned());
    }

    pub fn jwks_requests(&self) -> usize {
        self.inner.jwks_requests.load(Ordering::SeqCst)
    }

    pub fn discovery_requests(&self) -> usize {
        self.inner.discovery_requests.load(Ordering::SeqCst)
    }

    /// Claims this issuer's tokens carry for `sub`, valid for ten minutes.
    pub fn claims(&self, sub: &str) -> Value {
        let now = now();
        json!({"iss": self.url, "sub": sub, "aud": AUDIENCE, "iat": now, "exp": now + 600})
    }

    /// A token with `claims`, signed by key `kid` and saying `alg` in its header (which
    /// need not be the key's: the signature is the key's own algorithm).
    pub fn mint(&self, claims: &Value, kid: &str, alg: &str) -> String {
        self.mint_with(&json!({"alg": alg, "kid": kid, "typ": "JWT"}), claims, kid)
    }

    /// A token with `header` as given, signed by key `kid`.
    pub fn mint_with(&self, header: &Value, claims: &Value, kid: &str) -> String {
        let input = signing_input(header, claims);
        let keys = self.inner.keys.lock().unwrap();
        let signature = match &keys[kid].signer {
            Signer::Rsa(pair) => {
                let mut out = vec![0; pair.public().modulus_len()];
                let rng = SystemRandom::new();
                pair.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut out,
                )
                .unwrap();
                out
            }
            Signer::Ec(pair) => {
                let rng = SystemRandom::new();
                pair.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec()
            }
            Signer::Ed(pair) => pair.sign(input.as_bytes()).as_ref().to_vec(),
        };
        format!("{input}.{}", b64(&signature))
    }

    /// The public key bytes of RSA key `kid` (what a key-confusion attacker uses as an
    /// HMAC secret).
    pub fn rsa_public_key(&self, kid: &str) -> Vec<u8> {
        match &self.inner.keys.lock().unwrap()[kid].signer {
            Signer::Rsa(pair) => pair.public().as_ref().to_vec(),
            _ => panic!("{kid} is not an RSA key"),
        }
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A token with `header` and `claims` and the given raw signature (empty for `alg: none`).
pub fn unsigned(header: &Value, claims: &Value, signature: &[u8]) -> String {
    format!("{}.{}", signing_input(header, claims), b64(signature))
}

/// An HS256 token whose HMAC secret is `secret`.
pub fn hmac(claims: &Value, kid: &str, secret: &[u8]) -> String {
    let header = json!({"alg": "HS256", "kid": kid, "typ": "JWT"});
    let input = signing_input(&header, claims);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", b64(tag.as_ref()))
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Inner {
    fn document(&self) -> String {
        let keys: Vec<Value> = (self.keys.lock().unwrap().values())
            .filter(|k| k.published)
            .map(|k| k.jwk.clone())
            .collect();
        let Some(size) = *self.jwks_size.lock().unwrap() else {
            return json!({ "keys": keys }).to_string();
        };
        let bare = json!({ "keys": keys, "padding": "" }).to_string();
        let padding = "x".repeat(size.checked_sub(bare.len()).expect("size too small"));
        json!({ "keys": keys, "padding": padding }).to_string()
    }
}

async fn discovery(State(inner): State<Arc<Inner>>) -> Response {
    inner.discovery_requests.fetch_add(1, Ordering::SeqCst);
    if inner.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let claimed = inner.claimed_issuer.lock().unwrap().clone();
    let issuer = claimed.unwrap_or_else(|| inner.url.clone());
    let jwks_uri = format!("{}/jwks", inner.url);
    let document = json!({"issuer": issuer, "jwks_uri": jwks_uri}).to_string();
    ([(header::CONTENT_TYPE, "application/json")], document).into_response()
}

async fn jwks(State(inner): State<Arc<Inner>>) -> Response {
    inner.jwks_requests.fetch_add(1, Ordering::SeqCst);
    if inner.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        inner.document(),
    )
        .into_response();
    if let Some(age) = *inner.max_age.lock().unwrap() {
        let value = format!("public, max-age={age}").parse().unwrap();
        response.headers_mut().insert(header::CACHE_CONTROL, value);
    }
    response
}

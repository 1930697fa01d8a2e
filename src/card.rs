//! Agent cards (spec 8): each route serves, at `<route prefix>/.well-known/agent-card.json`,
//! its agent's card rewritten so that the first interface is the gateway's own JSON-RPC
//! endpoint — a gRPC-only agent has no card a JSON-RPC client could use.
//!
//! - `source`: where the card comes from (a file, an HTTP(S) URL, the backend's
//!   GetExtendedAgentCard), one fetch at a time, with the body and time bounded;
//! - `refresh`: the background task that fetches, validates and stores it, keeps the last
//!   good card on failure and logs once per failure streak;
//! - `rewrite`: the edits (interfaces, tenant, skills, signatures);
//! - `origin`: the origin the gateway is public at, from the route or the request (host
//!   validation, trusted forwarded headers);
//! - `store`: the current card, its rendered bytes per public URL and the HTTP answer
//!   (strong ETag, `Cache-Control`, 304, HEAD; spec 8.6).
//!
//! What the gateway corrects in a card (each logged once per route), and why:
//! - `supportedInterfaces`: the gateway's JSON-RPC endpoint first; the agent's own
//!   interfaces only with `keep-interfaces` (they name addresses clients usually cannot or
//!   should not reach). The v0.3 members naming the agent's address (`url`,
//!   `preferredTransport`, `additionalInterfaces`) follow the same rule: left in, a v0.3
//!   client would go around the gateway.
//! - v0.3 clients (route `legacy`): a request without `A2A-Version` is served the
//!   dual-format card, one with `0.3` the v0.3 card, their v0.3 members naming the gateway
//!   (`rewrite::CardForm`, `protocol/legacy/card.rs`, README "v0.3 clients").
//! - `skills`: with `card.skills`, the skills filtered away are not advertised.
//! - `signatures`: a rewritten card no longer matches the agent's signatures; they are
//!   stripped, or replaced by the gateway's own (`resign`). `preserve` serves the card as
//!   the source has it, and then it must already name the gateway.
//!
//! What is kept, because the route honours it: `capabilities.streaming` (the gateway serves
//! SSE), `pushNotifications` (configs are forwarded; the agent delivers to the client
//! directly), `extendedAgentCard` (forwarded, and rewritten by `rewrite_extended`),
//! `extensions` (`A2A-Extensions` is forwarded both ways) and, on a route that
//! authenticates nobody, the security schemes (`Authorization` is forwarded; whether other
//! credentials reach the agent is the route's forward policy, which a card cannot express).
//! One scheme the gateway can never pass on is mutual TLS: TLS ends at the gateway. Such a
//! card is served unchanged (dropping the requirement would tell clients no credential is
//! needed) with a warning in the log.
//! - `security`: on a route that authenticates, the card declares what the gateway
//!   enforces, replacing or merged with the agent's schemes (`card.security`).

pub(crate) mod origin;
mod refresh;
mod rewrite;
mod security;
pub(crate) mod source;
mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use serde::Deserialize;
use serde_json::Value;

use crate::backend::Backend;
use crate::protocol::binding::Binding;
use crate::units::duration_text;
use rewrite::{Rewriter, Treatment};
pub(crate) use security::Enforced;
pub use security::SecurityPolicy;
use source::{Credential, Source};
use store::Store;

/// The card `source` naming the backend's GetExtendedAgentCard.
pub(crate) const BACKEND_CARD_SOURCE: &str = "backend";

/// The largest card accepted from a source (file, URL body).
pub const MAX_CARD_SIZE: usize = 1 << 20;

/// A route as the API catalog lists it (`CardService::listing`).
pub(crate) struct Listing {
    /// The card's public URL.
    pub(crate) card: String,
    /// Each front the route enables, in the card's order, and its URL.
    pub(crate) fronts: Vec<(Binding, String)>,
}

const DEFAULT_REFRESH: Duration = Duration::from_secs(300);
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(300);
const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Per-route card settings, from the TOML table `[route.card]` (and the one-route CLI flags
/// mapped onto it). Durations are written as elsewhere (`"5m"`, `"30s"`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CardSettings {
    /// Where the card comes from: a file path, an `http://`/`https://` URL, or the word
    /// `backend` (the agent's GetExtendedAgentCard over the route's backend binding — an
    /// explicit opt-in because it may publish more than the public card). `None`: the route
    /// serves no card.
    pub source: Option<String>,
    /// Interval of the background refresh (default 5m). A URL source's own
    /// `Cache-Control: max-age` is a lower bound of the next refresh.
    #[serde(default, deserialize_with = "duration_text")]
    pub refresh: Option<Duration>,
    /// `Cache-Control: max-age` of the served card (default 300s).
    #[serde(default, deserialize_with = "duration_text")]
    pub max_age: Option<Duration>,
    /// Deadline of one fetch from a URL or the backend, body included (default 10s).
    #[serde(default, deserialize_with = "duration_text")]
    pub fetch_timeout: Option<Duration>,
    /// Keep the agent's own interfaces after the gateway's.
    #[serde(default)]
    pub keep_interfaces: bool,
    /// What becomes of the card's signatures (default `strip`).
    pub signatures: Option<SignaturePolicy>,
    /// PEM private key the gateway signs with (`signatures = "resign"`).
    pub sign_key: Option<PathBuf>,
    /// `kid` of the gateway's signatures (required with `resign`).
    pub sign_kid: Option<String>,
    /// `jku` of the gateway's signatures: the URL of the JWKS holding the public key.
    pub sign_jku: Option<String>,
    /// Keep only the skills with these ids (useful with `source = "backend"`).
    pub skills: Option<Vec<String>>,
    /// Environment variable holding the `Authorization` header value sent to a URL or
    /// backend source (read at start). Never logged.
    pub authorization_env: Option<String>,
    /// File holding the `Authorization` header value sent to a URL or backend source,
    /// read again at each fetch so rotated secrets are picked up. Never logged.
    pub authorization_file: Option<PathBuf>,
    /// On a route that authenticates: what becomes of the agent's `securitySchemes` and
    /// `securityRequirements` (default `replace`: the card declares what the gateway
    /// enforces; `merge`; `agent`: served as the agent's card says). An error on a route
    /// that authenticates nobody.
    pub security: Option<SecurityPolicy>,
}

/// What becomes of the signatures of the agent's card (spec 8.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignaturePolicy {
    /// Remove them: the rewritten card would not verify against them.
    #[default]
    Strip,
    /// Replace them by one signature of the gateway's key over the rewritten card.
    Resign,
    /// Serve the card without any rewriting, signatures intact; the card must already
    /// name this gateway's JSON-RPC URL.
    Preserve,
}

/// What the card module must know about its route.
pub struct RouteCard {
    /// Route name, for logs and error messages.
    pub route: String,
    /// Full public path of the route's JSON-RPC endpoint, e.g. `/agents/billing/a2a/jsonrpc`.
    pub jsonrpc_path: String,
    /// Full public path of the route's card, e.g. `/agents/billing/.well-known/agent-card.json`.
    pub card_path: String,
    /// Base URL the gateway's root is public at (`https://agents.example.com`,
    /// `https://x.example/gw`); the interface URL is this plus `jsonrpc_path`.
    pub public_url: Option<String>,
    /// Without `public_url`: take scheme and host from `Forwarded` or
    /// `X-Forwarded-Proto`/`X-Forwarded-Host` only if true; else `Host` and the listener's
    /// scheme.
    pub trust_forwarded: bool,
    /// With `trust_forwarded`: the element this far from the end of a forwarded header is
    /// the one read (each trusted proxy appends one).
    pub trusted_proxy_hops: usize,
    /// The hosts (`host[:port]`) requests may name; empty: any.
    pub allowed_hosts: Vec<String>,
    /// The listener serves TLS: interfaces taken from the request are `https://`.
    pub tls: bool,
    /// The host the route selects by (`host`), if it does.
    pub host: Option<String>,
    /// The tenant the route injects; then the gateway's interface carries no tenant.
    pub fixed_tenant: Option<String>,
    /// The backend's binding.
    pub binding: Binding,
    /// The route's fronts, in the order its card lists the gateway's interfaces.
    pub fronts: Vec<Binding>,
    /// Full public path of the route's HTTP+JSON front, e.g. `/agents/billing/a2a/rest`.
    pub rest_path: String,
    /// The port of the gRPC front's own listener (`--grpc-listen`), which its card
    /// interface names; `None`: the public origin's.
    pub grpc_port: Option<u16>,
    /// The route serves v0.3 clients: clients naming no version get the dual-format card,
    /// clients naming 0.3 the v0.3 card (README "v0.3 clients").
    pub legacy: bool,
    /// What the route's authentication enforces, which its card declares.
    pub enforced: Enforced,
}

/// A card setting that cannot be served; the message names the key.
#[derive(Debug, thiserror::Error)]
#[error("card.{key}: {reason}")]
pub struct CardConfigError {
    key: &'static str,
    reason: String,
}

impl CardConfigError {
    fn new(key: &'static str, reason: impl Into<String>) -> Self {
        CardConfigError {
            key,
            reason: reason.into(),
        }
    }
}

/// One route's agent card: its source, refresh, rewriting and HTTP answers, and the
/// rewriting of the extended cards GetExtendedAgentCard returns (every route has one, with
/// or without a card source of its own). Shared by all serving threads.
pub struct CardService {
    route: String,
    card_path: String,
    /// None: the route serves no well-known card.
    source: Option<Source>,
    rewriter: Rewriter,
    store: Store,
    refresh: Duration,
    /// Refreshes that failed (fetch or check) since the start (`/metrics`).
    refresh_failures: std::sync::atomic::AtomicU64,
}

impl CardService {
    /// Checks `settings` for `route`; a file source is read (and its card checked) now, so a
    /// bad file fails the start. Without `settings.source` the service only rewrites
    /// extended cards and checks hosts. `backend` is the route's backend client, used by
    /// `source = "backend"`; it must be usable on the runtime `start` runs on.
    pub fn new(
        settings: &CardSettings,
        route: RouteCard,
        backend: Option<Arc<dyn Backend>>,
    ) -> Result<CardService, CardConfigError> {
        let refresh = positive("refresh", settings.refresh, DEFAULT_REFRESH)?;
        let max_age = settings.max_age.unwrap_or(DEFAULT_MAX_AGE);
        let fetch_timeout = positive(
            "fetch-timeout",
            settings.fetch_timeout,
            DEFAULT_FETCH_TIMEOUT,
        )?;
        let treatment = Treatment::from_settings(settings)?;
        let rewriter = Rewriter::new(settings, &route, treatment)?;
        let credential = Credential::from_settings(settings)?;
        let tenant = route.fixed_tenant.clone().unwrap_or_default();
        let source = match settings.source.as_deref() {
            Some(text) => Some(Source::from_settings(
                text,
                settings,
                credential,
                backend,
                tenant,
                fetch_timeout,
            )?),
            None => None,
        };
        let vouched = rewriter.origins().vouched_count();
        let store = Store::new(max_age, rewriter.vary(), vouched);
        let service = CardService {
            route: route.route,
            card_path: route.card_path,
            source,
            rewriter,
            store,
            refresh,
            refresh_failures: Default::default(),
        };
        if let Some(Source::File(path)) = &service.source {
            let card = source::read_file(path)
                .map_err(|e| CardConfigError::new("source", e.to_string()))?;
            let card = service
                .rewriter
                .check(card)
                .map_err(|e| CardConfigError::new("source", format!("{}: {e}", path.display())))?;
            service.store.update(card, &service.rewriter);
        }
        Ok(service)
    }

    /// Serves the card of `running` (this route's service before a reload), checked
    /// and rewritten by this service's settings, until this service's own first fetch,
    /// which `start` makes at once: a reload leaves no moment where the card answers 503.
    pub(crate) fn inherit(&self, running: &CardService) {
        if self.source.is_none() || self.store.has_card() {
            return;
        }
        let Some(card) = running.store.source_card() else {
            return;
        };
        if let Ok(card) = self.rewriter.check(serde_json::Value::Object(card)) {
            self.store.update(card, &self.rewriter);
        }
    }

    fn source_is_file(&self) -> bool {
        matches!(self.source, Some(Source::File(_)))
    }

    /// Starts the background fetch and refresh on the current tokio runtime; it ends when
    /// the service is dropped.
    pub fn start(self: &Arc<Self>) {
        if self.source.is_some() {
            tokio::spawn(refresh::run(Arc::downgrade(self)));
        }
    }

    /// Whether the route serves a well-known card (it has a source).
    pub(crate) fn serves_card(&self) -> bool {
        self.source.is_some()
    }

    /// The `allowed-hosts` check of every request of the route: the refusal says why.
    pub(crate) fn admit(&self, uri: &http::Uri, headers: &http::HeaderMap) -> Result<(), String> {
        let origins = self.rewriter.origins();
        origins.admit(uri, headers).map_err(|r| r.to_string())
    }

    /// Card answers served from a kept render and rendered anew since the start, and the
    /// renders kept now (`/metrics`).
    pub(crate) fn renders(&self) -> (u64, u64, usize) {
        self.store.renders()
    }

    /// Refreshes of the card that failed since the start: the source unreachable or its
    /// card invalid (`/metrics`).
    pub fn refresh_failures(&self) -> u64 {
        self.refresh_failures
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Answers GET or HEAD of the well-known card: 200 `application/json` with a strong
    /// ETag and `Cache-Control: max-age`, 304 on a matching `If-None-Match`, no body for
    /// HEAD; 503 with `Retry-After` until a first good card is in; 400 when the public URL
    /// of the card cannot be known (no `public_url` and no valid `Host`).
    pub fn respond(&self, request: &http::request::Parts) -> http::Response<Body> {
        self.store.respond(&self.route, &self.rewriter, request)
    }

    /// This route in the catalog for `request`: its card's public URL and the URLs of its
    /// fronts, as the card served there lists them (`origin::Origins`: a host route's names
    /// its host).
    pub(crate) fn listing(&self, request: &http::request::Parts) -> Option<Listing> {
        let origin = self.rewriter.origin(request)?;
        let scheme = origin
            .split_once("://")
            .map_or("http", |(scheme, _)| scheme);
        let fronts = (self.rewriter.front_urls(&origin).into_iter())
            .map(|(binding, url)| match binding {
                // A link's target is a URI: the gRPC front's `host:port` (the card's form)
                // as the origin it is served at.
                Binding::Grpc => (binding, format!("{scheme}://{url}")),
                _ => (binding, url),
            })
            .collect();
        Some(Listing {
            card: format!("{origin}{}", self.card_path),
            fronts,
        })
    }

    /// Rewrites an extended card returned by GetExtendedAgentCard through this route: the
    /// same interface and signature treatment and skills filter as the public card, never
    /// cached (it depends on the caller's credentials). Without a known origin the
    /// gateway's interface URLs are its fronts' paths, relative references that resolve
    /// against the URL the client called (the gRPC front, which has none, is left out).
    pub fn rewrite_extended(&self, card: Value, request: &http::request::Parts) -> Value {
        let Value::Object(card) = card else {
            return card;
        };
        let origin = self.rewriter.interface_origin(request);
        let origin = origin.as_ref().map_or("", |origin| origin.as_str());
        self.rewriter.render(&self.rewriter.prepare(card), origin)
    }

    /// The gateway's JSON-RPC endpoint as the extended card names it for `request`.
    pub(crate) fn endpoint_url(&self, request: &http::request::Parts) -> String {
        match self.rewriter.interface_url(request) {
            Ok(url) => url.as_str().to_owned(),
            Err(_) => self.rewriter.jsonrpc_path().to_owned(),
        }
    }
}

fn positive(
    key: &'static str,
    value: Option<Duration>,
    default: Duration,
) -> Result<Duration, CardConfigError> {
    match value {
        Some(d) if d.is_zero() => Err(CardConfigError::new(key, "must be greater than 0")),
        Some(d) => Ok(d),
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{header, Method, StatusCode};
    use http_body_util::BodyExt;
    use serde_json::json;

    fn route(public_url: Option<&str>) -> RouteCard {
        RouteCard {
            route: "billing".to_owned(),
            jsonrpc_path: "/billing/a2a/jsonrpc".to_owned(),
            card_path: "/.well-known/agent-card.json".to_owned(),
            public_url: public_url.map(str::to_owned),
            trust_forwarded: false,
            trusted_proxy_hops: 1,
            allowed_hosts: Vec::new(),
            tls: false,
            host: None,
            fixed_tenant: None,
            binding: Binding::Grpc,
            legacy: false,
            enforced: Enforced::default(),
            fronts: vec![Binding::JsonRpc],
            rest_path: "/a2a/rest".to_owned(),
            grpc_port: None,
        }
    }

    /// A card file in a directory of its own; removed when dropped.
    struct CardFile(PathBuf);

    impl CardFile {
        fn new(name: &str, card: &Value) -> CardFile {
            let dir = std::env::temp_dir().join(format!("a2a-card-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("card.json");
            std::fs::write(&path, serde_json::to_vec(card).unwrap()).unwrap();
            CardFile(path)
        }

        fn settings(&self) -> CardSettings {
            CardSettings {
                source: Some(self.0.to_str().unwrap().to_owned()),
                ..Default::default()
            }
        }
    }

    impl Drop for CardFile {
        fn drop(&mut self) {
            std::fs::remove_dir_all(self.0.parent().unwrap()).ok();
        }
    }

    fn card() -> Value {
        json!({"name": "Billing", "version": "1", "capabilities": {}, "skills": []})
    }

    fn request(method: Method, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut builder = http::Request::builder()
            .method(method)
            .uri("/billing/.well-known/agent-card.json");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let builder = builder.extension(crate::telemetry::ConnectionAddrs::example());
        builder.body(()).unwrap().into_parts().0
    }

    async fn body(response: http::Response<Body>) -> Vec<u8> {
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn get_head_and_conditional_requests() {
        let file = CardFile::new("respond", &card());
        let service = CardService::new(&file.settings(), route(None), None).unwrap();
        let host = [("host", "gw.example")];

        let response = service.respond(&request(Method::GET, &host));
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(headers[header::CACHE_CONTROL], "max-age=300");
        assert_eq!(headers[header::VARY], "host");
        let etag = headers[header::ETAG].to_str().unwrap().to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() > 40,
            "{etag}"
        );
        let bytes = body(response).await;
        let served: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            served["supportedInterfaces"][0]["url"],
            "http://10.1.2.3:8080/billing/a2a/jsonrpc"
        );
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        use base64::Engine;
        let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
        assert_eq!(
            etag,
            format!("\"{expected}\""),
            "the ETag is over the served bytes"
        );

        let head = service.respond(&request(Method::HEAD, &host));
        assert_eq!(head.status(), StatusCode::OK);
        assert_eq!(head.headers()[header::ETAG], etag.as_str());
        assert_eq!(
            head.headers()[header::CONTENT_LENGTH],
            bytes.len().to_string().as_str()
        );
        assert!(body(head).await.is_empty());

        for matching in [etag.clone(), format!("\"other\", W/{etag}"), "*".to_owned()] {
            let conditional = [host[0], ("if-none-match", matching.as_str())];
            let response = service.respond(&request(Method::GET, &conditional));
            assert_eq!(response.status(), StatusCode::NOT_MODIFIED, "{matching}");
            assert_eq!(response.headers()[header::ETAG], etag.as_str());
            assert!(body(response).await.is_empty());
        }
        let stale = [host[0], ("if-none-match", "\"other\"")];
        assert_eq!(
            service.respond(&request(Method::GET, &stale)).status(),
            StatusCode::OK
        );

        // Another Host changes nothing: the card names the address the client reached.
        let other = service.respond(&request(Method::GET, &[("host", "other.example")]));
        assert_eq!(other.headers()[header::ETAG], etag.as_str());
        let again = service.respond(&request(Method::GET, &host));
        assert_eq!(again.headers()[header::ETAG], etag.as_str());

        let no_host = service.respond(&request(Method::GET, &[]));
        assert_eq!(no_host.status(), StatusCode::BAD_REQUEST);
        let error: Value = serde_json::from_slice(&body(no_host).await).unwrap();
        assert!(error["error"].as_str().unwrap().contains("Host"), "{error}");
    }

    #[tokio::test]
    async fn unavailable_until_a_first_card() {
        let settings = CardSettings {
            source: Some("http://127.0.0.1:9/card.json".to_owned()),
            max_age: Some(Duration::from_secs(60)),
            ..Default::default()
        };
        let service = CardService::new(&settings, route(Some("https://gw.example")), None).unwrap();
        for method in [Method::GET, Method::HEAD] {
            let response = service.respond(&request(method.clone(), &[]));
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(response.headers()[header::RETRY_AFTER], "1");
            assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
            assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
            let bytes = body(response).await;
            if method == Method::GET {
                let error: Value = serde_json::from_slice(&bytes).unwrap();
                assert!(
                    error["error"].as_str().unwrap().contains("billing"),
                    "{error}"
                );
            } else {
                assert!(bytes.is_empty());
            }
        }
    }

    #[test]
    fn start_errors_name_the_key() {
        let error = |settings: CardSettings| {
            CardService::new(&settings, route(Some("https://gw.example")), None)
                .err()
                .unwrap()
                .to_string()
        };
        let source = |s: &str| CardSettings {
            source: Some(s.to_owned()),
            ..Default::default()
        };
        assert!(error(source("/nonexistent/card.json")).starts_with("card.source:"));
        assert!(error(source("backend")).starts_with("card.source:"));
        assert!(error(source("https://u:p@cards.example/c.json")).starts_with("card.source:"));
        let invalid = CardFile::new("invalid", &json!({"name": "x", "skills": 3}));
        let e = error(invalid.settings());
        assert!(
            e.starts_with("card.source:") && e.contains("AgentCard"),
            "{e}"
        );
        let zero = CardSettings {
            refresh: Some(Duration::ZERO),
            ..source("https://cards.example/c.json")
        };
        assert!(error(zero).starts_with("card.refresh:"));
        let both = CardSettings {
            authorization_env: Some("PATH".to_owned()),
            authorization_file: Some("/dev/null".into()),
            ..source("backend")
        };
        assert!(error(both).starts_with("card.authorization-env:"));
        let unreadable = CardSettings {
            authorization_file: Some("/nonexistent/token".into()),
            ..source("https://cards.example/c.json")
        };
        assert!(error(unreadable).starts_with("card.authorization-file:"));
        let file = CardFile::new("credential", &card());
        let credential_for_file = CardSettings {
            authorization_env: Some("PATH".to_owned()),
            ..file.settings()
        };
        assert!(error(credential_for_file).starts_with("card.authorization-env:"));
        // A static card served unchanged must name the gateway.
        let preserve = CardSettings {
            signatures: Some(SignaturePolicy::Preserve),
            ..file.settings()
        };
        let e = error(preserve);
        assert!(
            e.starts_with("card.source:") && e.contains("do not name this gateway"),
            "{e}"
        );
    }

    #[test]
    fn settings_from_toml() {
        let settings: CardSettings = toml::from_str(
            "source = \"backend\"\nrefresh = \"2m\"\nmax-age = \"30s\"\nkeep-interfaces = true\n\
             signatures = \"preserve\"\nskills = [\"a\"]\nauthorization-file = \"/run/token\"\n",
        )
        .unwrap();
        assert_eq!(settings.refresh, Some(Duration::from_secs(120)));
        assert_eq!(settings.max_age, Some(Duration::from_secs(30)));
        assert_eq!(settings.signatures, Some(SignaturePolicy::Preserve));
        assert!(settings.keep_interfaces);
        let error = toml::from_str::<CardSettings>("sourse = \"x\"").unwrap_err();
        assert!(error.to_string().contains("sourse"), "{error}");
        assert!(toml::from_str::<CardSettings>("refresh = \"soon\"").is_err());
    }
}

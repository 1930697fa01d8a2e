//! A route's current card and its HTTP answer (spec 8.6). The card's rendered bytes are
//! kept per interface URL the configuration vouches for (the public URL, or each allowed
//! host), so serving a card is a lookup; a card for a URL only the request names is
//! rendered for that request and not kept, so varying `Host` cannot churn the cache (nor
//! is such a card ever signed: signing needs vouched URLs). A new card replaces them all,
//! and the strong ETag is a hash of the exact bytes, so it changes whenever they do.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Body;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use serde_json::{Map, Value};

use super::origin::Origin;
use super::rewrite::{CardForm, Prepared, Rewriter};

/// The card forms (`CardForm`) a URL may be rendered in.
const FORMS: usize = 3;

/// The current card, once one was obtained.
pub(super) struct Store {
    current: RwLock<Option<Arc<Current>>>,
    /// Whole seconds until the next fetch while there is no card: the 503's `Retry-After`.
    retry_after: AtomicU64,
    cache_control: HeaderValue,
    vary: Option<HeaderValue>,
    /// Renders kept per card: every vouched URL in every form.
    capacity: usize,
    /// Answers served from a kept render, and rendered anew (`/metrics`).
    hits: AtomicU64,
    misses: AtomicU64,
}

struct Current {
    /// The card as the source had it, to tell a changed card from the same one.
    source: Map<String, Value>,
    prepared: Prepared,
    rendered: Mutex<Vec<(RenderKey, Arc<Rendered>)>>,
}

/// What a rendered card depends on: the interface URL and the form.
type RenderKey = (String, CardForm);

struct Rendered {
    body: Bytes,
    etag: HeaderValue,
}

impl Store {
    /// `vouched`: how many interface URLs the configuration vouches for.
    pub(super) fn new(max_age: Duration, vary: Option<HeaderValue>, vouched: usize) -> Store {
        Store {
            capacity: vouched * FORMS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            current: RwLock::new(None),
            retry_after: AtomicU64::new(1),
            cache_control: HeaderValue::from_str(&format!("max-age={}", max_age.as_secs()))
                .expect("digits are a valid header value"),
            vary,
        }
    }

    pub(super) fn has_card(&self) -> bool {
        self.current().is_some()
    }

    /// The current card as its source gave it.
    pub(super) fn source_card(&self) -> Option<Map<String, Value>> {
        self.current().map(|current| current.source.clone())
    }

    /// The wait announced to clients while there is no card.
    pub(super) fn set_retry_after(&self, delay: Duration) {
        self.retry_after
            .store(delay.as_secs_f64().ceil().max(1.0) as u64, Relaxed);
    }

    /// Makes a checked card current unless it equals the current one (whose rendered bytes
    /// then stay); true if it changed.
    pub(super) fn update(&self, card: Map<String, Value>, rewriter: &Rewriter) -> bool {
        if self.current().is_some_and(|c| c.source == card) {
            return false;
        }
        let prepared = rewriter.prepare(card.clone());
        let current = Current {
            source: card,
            prepared,
            rendered: Mutex::default(),
        };
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(current));
        true
    }

    fn current(&self) -> Option<Arc<Current>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The answer to GET or HEAD of the card.
    pub(super) fn respond(
        &self,
        route: &str,
        rewriter: &Rewriter,
        request: &Parts,
    ) -> Response<Body> {
        let Some(current) = self.current() else {
            let message = format!("the agent card of route {route:?} is not available yet");
            let mut response = error(request, StatusCode::SERVICE_UNAVAILABLE, &message);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, self.retry_after.load(Relaxed).into());
            return response;
        };
        let origin = match rewriter.interface_origin(request) {
            Ok(origin) => origin,
            Err(refusal) => {
                return error(request, StatusCode::BAD_REQUEST, &refusal.to_string());
            }
        };
        let form = rewriter.form(request);
        let rendered = match origin {
            Origin::Vouched(origin) => self.kept(&current, rewriter, (origin, form)),
            Origin::Named(origin) => {
                self.misses.fetch_add(1, Relaxed);
                Arc::new(render(rewriter, &current.prepared, &origin, form))
            }
        };
        let mut response = if none_match(&request.headers, &rendered.etag) {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        } else {
            let mut response = body(request, rendered.body.clone());
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        };
        let headers = response.headers_mut();
        headers.insert(header::ETAG, rendered.etag.clone());
        headers.insert(header::CACHE_CONTROL, self.cache_control.clone());
        if let Some(vary) = &self.vary {
            headers.insert(header::VARY, vary.clone());
        }
        response
    }
}

impl Store {
    /// The card rendered for a vouched origin in its form, kept or rendered now and kept.
    fn kept(&self, current: &Current, rewriter: &Rewriter, key: RenderKey) -> Arc<Rendered> {
        let cached = current
            .cache()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, r)| r.clone());
        if let Some(rendered) = cached {
            self.hits.fetch_add(1, Relaxed);
            return rendered;
        }
        self.misses.fetch_add(1, Relaxed);
        // Rendered outside the lock: signing may take a while, and two threads rendering
        // the same URL at once only waste one render.
        let rendered = Arc::new(render(rewriter, &current.prepared, &key.0, key.1));
        let mut cache = current.cache();
        // Only a new card's first renders fill it: the vouched keys are as many as the
        // capacity; the check keeps the bound whatever a route's configuration says.
        if cache.len() >= self.capacity.max(1) {
            cache.remove(0);
        }
        cache.push((key, rendered.clone()));
        rendered
    }

    /// Answers served from a kept render and rendered anew since the start, and the
    /// renders kept now.
    pub(super) fn renders(&self) -> (u64, u64, usize) {
        let kept = self.current().map_or(0, |c| c.cache().len());
        (self.hits.load(Relaxed), self.misses.load(Relaxed), kept)
    }
}

impl Current {
    fn cache(&self) -> std::sync::MutexGuard<'_, Vec<(RenderKey, Arc<Rendered>)>> {
        self.rendered.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The card rendered for `origin` in `form`, with its ETag.
fn render(rewriter: &Rewriter, prepared: &Prepared, origin: &str, form: CardForm) -> Rendered {
    let card = rewriter.render_form(prepared, origin, form);
    let body = Bytes::from(serde_json::to_vec(&card).expect("a JSON value always serializes"));
    Rendered {
        etag: etag(&body),
        body,
    }
}

/// A strong ETag: the SHA-256 of the bytes, base64url, quoted.
fn etag(body: &[u8]) -> HeaderValue {
    let digest = ring::digest::digest(&ring::digest::SHA256, body);
    let tag = format!("\"{}\"", URL_SAFE_NO_PAD.encode(digest.as_ref()));
    HeaderValue::from_str(&tag).expect("base64url is a valid header value")
}

/// Whether `If-None-Match` matches `etag`: `*`, or one of its tags by weak comparison
/// (RFC 9110 13.1.2).
fn none_match(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .any(|tag| {
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).as_bytes() == etag.as_bytes()
        })
}

/// A 200 carrying `bytes`, or only their length for HEAD.
fn body(request: &Parts, bytes: Bytes) -> Response<Body> {
    if request.method == Method::HEAD {
        let mut response = Response::new(Body::empty());
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, bytes.len().into());
        response
    } else {
        Response::new(Body::from(bytes))
    }
}

/// `{"error": message}` with `status`, never cached.
fn error(request: &Parts, status: StatusCode, message: &str) -> Response<Body> {
    let json = serde_json::to_vec(&serde_json::json!({ "error": message }))
        .expect("a JSON value always serializes");
    let mut response = body(request, Bytes::from(json));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::rewrite::Treatment;
    use crate::card::{CardSettings, RouteCard};
    use crate::protocol::binding::Binding;

    fn store(allowed: &[&str]) -> (Store, Rewriter) {
        let route = RouteCard {
            route: "r".to_owned(),
            jsonrpc_path: "/a2a".to_owned(),
            card_path: "/.well-known/agent-card.json".to_owned(),
            public_url: None,
            trust_forwarded: false,
            trusted_proxy_hops: 1,
            allowed_hosts: allowed.iter().map(|h| h.to_string()).collect(),
            tls: false,
            host: None,
            fixed_tenant: None,
            binding: Binding::Grpc,
            legacy: true,
            enforced: Default::default(),
            fronts: vec![Binding::JsonRpc],
            rest_path: "/a2a/rest".to_owned(),
            grpc_port: None,
        };
        let settings = CardSettings::default();
        let rewriter = Rewriter::new(&settings, &route, Treatment::Strip).unwrap();
        let store = Store::new(
            Duration::from_secs(1),
            rewriter.vary(),
            rewriter.origins().vouched_count(),
        );
        let card = serde_json::json!({"name": "n"});
        assert!(store.update(card.as_object().unwrap().clone(), &rewriter));
        assert!(
            !store.update(card.as_object().unwrap().clone(), &rewriter),
            "same card"
        );
        (store, rewriter)
    }

    fn get(store: &Store, rewriter: &Rewriter, headers: &[(&str, &str)]) -> Response<Body> {
        let mut request = http::Request::get("/");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.extension(crate::telemetry::ConnectionAddrs::example());
        store.respond("r", rewriter, &request.body(()).unwrap().into_parts().0)
    }

    #[test]
    fn hosts_only_the_request_names_are_never_kept() {
        let (store, rewriter) = store(&[]);
        let first = get(&store, &rewriter, &[("host", "h0.example")]);
        for n in 0..1000 {
            let host = format!("h{n}.example");
            let response = get(&store, &rewriter, &[("host", &host)]);
            assert_eq!(response.status(), StatusCode::OK);
        }
        assert!(store.current().unwrap().cache().is_empty());
        assert_eq!(store.renders(), (0, 1001, 0));
        // The same bytes each time all the same.
        let again = get(&store, &rewriter, &[("host", "h0.example")]);
        assert_eq!(again.headers()[header::ETAG], first.headers()[header::ETAG]);
    }

    #[test]
    fn vouched_renders_are_kept_and_bounded() {
        let (store, rewriter) = store(&["a.example", "b.example"]);
        let etag = |headers: &[(&str, &str)]| {
            let response = get(&store, &rewriter, headers);
            assert_eq!(response.status(), StatusCode::OK, "{headers:?}");
            response.headers()[header::ETAG].clone()
        };
        let first = etag(&[("host", "a.example")]);
        assert_eq!(etag(&[("host", "a.example")]), first);
        assert_eq!(store.renders(), (1, 1, 1));
        // Every vouched URL in every form: 2 hosts, one scheme here, 3 forms.
        for host in ["a.example", "b.example"] {
            etag(&[("host", host)]);
            etag(&[("host", host), ("a2a-version", "0.3")]);
            etag(&[("host", host), ("a2a-version", "1.0")]);
        }
        let kept = store.current().unwrap().cache().len();
        assert_eq!(kept, 6);
        let (hits, misses, _) = store.renders();
        assert_eq!((hits, misses), (2, 6));
        // 1000 other hosts are refused and keep nothing.
        for n in 0..1000 {
            let host = format!("h{n}.example");
            let response = get(&store, &rewriter, &[("host", &host)]);
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        }
        assert_eq!(store.current().unwrap().cache().len(), kept);
        assert_eq!(store.renders(), (hits, misses, kept));
    }
}

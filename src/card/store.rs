//! A route's current card and its HTTP answer (spec 8.6). The card's rendered bytes are
//! kept per interface URL (a few: one with a public URL, one per host clients use
//! otherwise), so serving a card is a lookup; a new card replaces them all, and the strong
//! ETag is a hash of the exact bytes, so it changes whenever they do.

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

use super::rewrite::{CardForm, Prepared, Rewriter};

/// Rendered cards kept per current card; past this, the oldest is dropped (requests naming
/// ever new hosts only cost a render each).
const RENDERED: usize = 8;

/// The current card, once one was obtained.
pub(super) struct Store {
    current: RwLock<Option<Arc<Current>>>,
    /// Whole seconds until the next fetch while there is no card: the 503's `Retry-After`.
    retry_after: AtomicU64,
    cache_control: HeaderValue,
    vary: Option<HeaderValue>,
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
    pub(super) fn new(max_age: Duration, vary: Option<HeaderValue>) -> Store {
        Store {
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
        let Some(url) = rewriter.interface_url(request) else {
            let message = "the request names no valid Host, so the card's interface URL is unknown";
            return error(request, StatusCode::BAD_REQUEST, message);
        };
        let rendered = current.rendered(rewriter, (url, rewriter.form(request)));
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

impl Current {
    /// The card rendered for `url` in its form, from the cache or rendered now.
    fn rendered(&self, rewriter: &Rewriter, key: RenderKey) -> Arc<Rendered> {
        let cached = self
            .cache()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, r)| r.clone());
        if let Some(rendered) = cached {
            return rendered;
        }
        // Rendered outside the lock: signing may take a while, and two threads rendering
        // the same URL at once only waste one render.
        let card = rewriter.render_form(&self.prepared, &key.0, key.1);
        let body = Bytes::from(serde_json::to_vec(&card).expect("a JSON value always serializes"));
        let rendered = Arc::new(Rendered {
            etag: etag(&body),
            body,
        });
        let mut cache = self.cache();
        if cache.len() == RENDERED {
            cache.remove(0);
        }
        cache.push((key, rendered.clone()));
        rendered
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Vec<(RenderKey, Arc<Rendered>)>> {
        self.rendered.lock().unwrap_or_else(|e| e.into_inner())
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
    use crate::config::Binding;

    #[test]
    fn rendered_cards_are_bounded_and_reused() {
        let route = RouteCard {
            route: "r".to_owned(),
            jsonrpc_path: "/a2a".to_owned(),
            card_path: "/.well-known/agent-card.json".to_owned(),
            public_url: None,
            trust_forwarded: false,
            fixed_tenant: None,
            binding: Binding::Grpc,
            legacy: false,
        };
        let settings = CardSettings::default();
        let rewriter = Rewriter::new(&settings, &route, Treatment::Strip).unwrap();
        let store = Store::new(Duration::from_secs(1), rewriter.vary());
        let card = serde_json::json!({"name": "n"});
        assert!(store.update(card.as_object().unwrap().clone(), &rewriter));
        assert!(
            !store.update(card.as_object().unwrap().clone(), &rewriter),
            "same card"
        );
        let etag = |host: &str| {
            let request = http::Request::get("/")
                .header("host", host)
                .body(())
                .unwrap();
            let response = store.respond("r", &rewriter, &request.into_parts().0);
            response.headers()[header::ETAG].clone()
        };
        let first = etag("h0.example");
        let current = store.current().unwrap();
        let rendered = |host: &str| {
            let cache = current.cache();
            cache
                .iter()
                .find(|((url, _), _)| url.contains(host))
                .map(|(_, r)| r.clone())
        };
        let first_render = rendered("//h0.example/").unwrap();
        for n in 1..3 * RENDERED {
            etag(&format!("h{n}.example"));
        }
        assert_eq!(current.cache().len(), RENDERED);
        assert!(
            rendered("//h0.example/").is_none(),
            "the oldest was dropped"
        );
        assert_eq!(etag("h0.example"), first, "rendered again: the same bytes");
        let again = rendered("//h0.example/").unwrap();
        assert!(!Arc::ptr_eq(&first_render, &again));
        etag("h0.example");
        assert!(
            Arc::ptr_eq(&again, &rendered("//h0.example/").unwrap()),
            "reused"
        );
    }
}

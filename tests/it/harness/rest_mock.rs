//! A mock HTTP+JSON A2A agent for `rest_backend.rs`: an axum server on `127.0.0.1:0` that
//! records every request (method, raw path and query, headers, body) and answers with
//! whatever the test's responder returns, including chunked SSE bodies, bodies that break
//! off mid-way, and bodies whose end the test can observe.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use futures::StreamExt;
use http::{HeaderMap, StatusCode};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One request as the mock received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// The raw (still percent-encoded) path.
    pub path: String,
    /// The raw query, without `?`.
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn body_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

type Responder = dyn Fn(&Recorded) -> Response + Send + Sync;

struct Inner {
    requests: Mutex<Vec<Recorded>>,
    responder: Box<Responder>,
}

/// A running mock agent; stops when dropped.
pub struct MockAgent {
    /// `http://127.0.0.1:port` (no trailing slash).
    pub url: String,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl MockAgent {
    pub async fn start(responder: impl Fn(&Recorded) -> Response + Send + Sync + 'static) -> Self {
        Self::start_at("127.0.0.1:0".parse().unwrap(), responder).await
    }

    /// Serves on `addr` (e.g. one pod's loopback address).
    pub async fn start_at(
        addr: std::net::SocketAddr,
        responder: impl Fn(&Recorded) -> Response + Send + Sync + 'static,
    ) -> Self {
        let inner = Arc::new(Inner {
            requests: Mutex::new(Vec::new()),
            responder: Box::new(responder),
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener = TcpListener::bind(addr).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, inner, task }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// The only request so far.
    pub fn single(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "expected one request: {requests:#?}");
        requests.into_iter().next().unwrap()
    }

    pub fn clear(&self) {
        self.inner.requests.lock().unwrap().clear();
    }
}

impl Drop for MockAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let recorded = Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers,
        body,
    };
    let response = (inner.responder)(&recorded);
    inner.requests.lock().unwrap().push(recorded);
    response
}

/// A response with `status`, `content-type` and body.
pub fn answer(status: u16, content_type: &str, body: impl Into<Body>) -> Response {
    let mut builder = Response::builder().status(StatusCode::from_u16(status).unwrap());
    if !content_type.is_empty() {
        builder = builder.header("content-type", content_type);
    }
    builder.body(body.into()).unwrap()
}

/// A 200 `application/a2a+json` answer.
pub fn ok_json(body: &str) -> Response {
    answer(200, "application/a2a+json", body.to_owned())
}

/// An A2A error body (spec 11.6) with the reference SDK's content type.
pub fn error_json(status: u16, body: serde_json::Value) -> Response {
    answer(status, "application/json", body.to_string())
}

/// A `text/event-stream` answer sent as separate chunks, a short pause before each, so
/// the client sees the chunk boundaries.
pub fn sse_chunks(chunks: Vec<Vec<u8>>) -> Response {
    let stream = futures::stream::iter(chunks).then(|chunk| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok::<_, Infallible>(Bytes::from(chunk))
    });
    answer(200, "text/event-stream", Body::from_stream(stream))
}

/// A body that sends `first` and then breaks the connection.
pub fn broken_body(status: u16, content_type: &str, first: &'static [u8]) -> Response {
    let stream = futures::stream::iter([
        Ok(Bytes::from_static(first)),
        Err(std::io::Error::other("mock agent breaks the connection")),
    ])
    .then(|item| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        item
    });
    answer(status, content_type, Body::from_stream(stream))
}

/// An event stream that sends `first` and then stays open; `dropped` is notified when the
/// server drops the body (the client went away).
pub fn endless_sse(first: &'static [u8], dropped: Arc<tokio::sync::Notify>) -> Response {
    struct Guard(Arc<tokio::sync::Notify>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.notify_one();
        }
    }
    let guard = Guard(dropped);
    let stream =
        futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from_static(first)) })
            .chain(futures::stream::pending())
            .map(move |item| {
                let _keep = &guard;
                item
            });
    answer(200, "text/event-stream", Body::from_stream(stream))
}

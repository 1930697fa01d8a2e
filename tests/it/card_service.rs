//! The card service against real sources on 127.0.0.1: an HTTP card source (an axum server
//! whose card can change, turn invalid or go away, and which honours `If-None-Match`), a
//! card file, and a gRPC agent (the demo agent behind an `Authorization` check) reached
//! through the real `GrpcBackend`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::backend::grpc::{GrpcBackend, GrpcSettings};
use a2a_gateway::backend::Backend;
use a2a_gateway::card::{CardService, CardSettings, RouteCard, MAX_CARD_SIZE};
use a2a_gateway::demo::DemoAgent;
use a2a_gateway::proto::a2a_service_server::A2aServiceServer;
use a2a_gateway::protocol::binding::Binding;
use axum::body::Body;
use axum::extract::State;
use http::{header, HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::harness::own_process::in_own_process;

const REFRESH: Duration = Duration::from_millis(200);
const INTERFACE: &str = "https://gw.example/billing/a2a/jsonrpc";

/// What the card source serves and what it saw.
#[derive(Default)]
struct SourceState {
    body: Mutex<Vec<u8>>,
    /// Answer 500 instead of the card.
    failing: AtomicBool,
    /// Send the body chunked, without `Content-Length`.
    chunked: AtomicBool,
    /// `Cache-Control` of the answers.
    cache_control: Mutex<Option<&'static str>>,
    requests: AtomicUsize,
    not_modified: AtomicUsize,
    authorization: Mutex<Vec<String>>,
}

/// An HTTP card source on 127.0.0.1; `stop` takes it down.
struct CardSource {
    state: Arc<SourceState>,
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl CardSource {
    async fn start(card: &Value) -> CardSource {
        let state = Arc::new(SourceState::default());
        state.set(card);
        let app = axum::Router::new()
            .route("/card.json", axum::routing::get(serve_card))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        CardSource {
            state,
            addr,
            stop: Some(stop),
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/card.json", self.addr)
    }

    /// Closes the listener and every connection.
    async fn stop(&mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        (&mut self.task).await.unwrap();
    }
}

impl SourceState {
    fn set(&self, card: &Value) {
        self.set_bytes(serde_json::to_vec(card).unwrap());
    }

    fn set_bytes(&self, body: Vec<u8>) {
        *self.body.lock().unwrap() = body;
    }
}

async fn serve_card(
    State(state): State<Arc<SourceState>>,
    headers: HeaderMap,
) -> http::Response<Body> {
    state.requests.fetch_add(1, SeqCst);
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.to_str().unwrap().to_owned();
        state.authorization.lock().unwrap().push(value);
    }
    let mut response = http::Response::builder();
    if let Some(cache_control) = *state.cache_control.lock().unwrap() {
        response = response.header(header::CACHE_CONTROL, cache_control);
    }
    if state.failing.load(SeqCst) {
        return response.status(500).body(Body::empty()).unwrap();
    }
    let body = state.body.lock().unwrap().clone();
    let digest = ring::digest::digest(&ring::digest::SHA256, &body);
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let etag = format!("\"{hex}\"");
    let response = response.header(header::ETAG, &etag);
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v == etag.as_str())
    {
        state.not_modified.fetch_add(1, SeqCst);
        return response.status(304).body(Body::empty()).unwrap();
    }
    let body = if state.chunked.load(SeqCst) {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            body.chunks(64 << 10).map(|c| Ok(c.to_vec())).collect();
        Body::from_stream(futures::stream::iter(chunks))
    } else {
        Body::from(body)
    };
    response
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .unwrap()
}

fn card(version: &str) -> Value {
    json!({
        "name": "Billing",
        "description": "Bills and refunds",
        "version": version,
        "supportedInterfaces": [
            {"url": "billing.internal:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "pay", "name": "Pay", "description": "Pays", "tags": ["money"]}]
    })
}

fn route(binding: Binding) -> RouteCard {
    RouteCard {
        route: "billing".to_owned(),
        jsonrpc_path: "/billing/a2a/jsonrpc".to_owned(),
        card_path: "/.well-known/agent-card.json".to_owned(),
        public_url: Some("https://gw.example".to_owned()),
        trust_forwarded: false,
        trusted_proxy_hops: 1,
        allowed_hosts: Vec::new(),
        tls: false,
        host: None,
        fixed_tenant: None,
        binding,
        legacy: false,
        enforced: Default::default(),
        fronts: vec![Binding::JsonRpc],
        rest_path: "/a2a/rest".to_owned(),
        grpc_port: None,
    }
}

fn settings(source: &str) -> CardSettings {
    CardSettings {
        source: Some(source.to_owned()),
        refresh: Some(REFRESH),
        ..Default::default()
    }
}

fn started(service: CardService) -> Arc<CardService> {
    let service = Arc::new(service);
    service.start();
    service
}

/// GET of the card: status, headers, body.
async fn get(service: &CardService) -> (StatusCode, HeaderMap, Vec<u8>) {
    let request = http::Request::get("/billing/.well-known/agent-card.json")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let response = service.respond(&request);
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes().to_vec();
    (parts.status, parts.headers, body)
}

/// The served card, if one is served.
async fn served(service: &CardService) -> Option<Value> {
    let (status, _, body) = get(service).await;
    (status == StatusCode::OK).then(|| serde_json::from_slice(&body).unwrap())
}

/// Waits until the served card's `version` is `version`.
async fn until_version(service: &CardService, version: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(card) = served(service).await {
            if card["version"] == version {
                return card;
            }
        }
        assert!(Instant::now() < deadline, "version {version} never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn url_source_served_refreshed_and_kept_when_down() {
    let mut source = CardSource::start(&card("1")).await;
    source.state.failing.store(true, SeqCst);
    let service =
        started(CardService::new(&settings(&source.url()), route(Binding::Grpc), None).unwrap());

    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, headers, body) = get(&service).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.contains_key(header::RETRY_AFTER));
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert!(error["error"].is_string(), "{error}");

    source.state.failing.store(false, SeqCst);
    let first = until_version(&service, "1").await;
    assert_eq!(
        first["supportedInterfaces"],
        json!([{"url": INTERFACE, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    let (_, headers, _) = get(&service).await;
    let etag = headers[header::ETAG].clone();

    // Unchanged: the gateway asks conditionally and the source answers 304.
    let deadline = Instant::now() + Duration::from_secs(5);
    while source.state.not_modified.load(SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no conditional refresh");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(get(&service).await.1[header::ETAG], etag);

    source.state.set(&card("2"));
    until_version(&service, "2").await;
    let (_, headers, _) = get(&service).await;
    assert_ne!(headers[header::ETAG], etag, "new bytes, new ETag");

    source.stop().await;
    tokio::time::sleep(REFRESH * 4).await;
    let kept = served(&service).await.expect("the last good card stays");
    assert_eq!(kept["version"], "2");
}

#[tokio::test]
async fn invalid_cards_are_not_served() {
    let source = CardSource::start(&json!({"name": "Billing", "skills": "none"})).await;
    let service =
        started(CardService::new(&settings(&source.url()), route(Binding::Grpc), None).unwrap());
    tokio::time::sleep(REFRESH * 3).await;
    assert_eq!(get(&service).await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert!(source.state.requests.load(SeqCst) >= 2, "retried");

    source.state.set(&card("1"));
    until_version(&service, "1").await;
    source.state.set_bytes(b"<html>not a card</html>".to_vec());
    let requests = source.state.requests.load(SeqCst);
    tokio::time::sleep(REFRESH * 3).await;
    assert!(source.state.requests.load(SeqCst) > requests);
    assert_eq!(served(&service).await.unwrap()["version"], "1");
    source.state.set(&json!({"name": ""}));
    tokio::time::sleep(REFRESH * 3).await;
    assert_eq!(served(&service).await.unwrap()["version"], "1");
}

#[tokio::test]
async fn the_sources_max_age_delays_the_next_refresh() {
    let source = CardSource::start(&card("1")).await;
    *source.state.cache_control.lock().unwrap() = Some("public, max-age=3600");
    let service =
        started(CardService::new(&settings(&source.url()), route(Binding::Grpc), None).unwrap());
    until_version(&service, "1").await;
    tokio::time::sleep(REFRESH * 4).await;
    assert_eq!(source.state.requests.load(SeqCst), 1);
}

/// A valid card of exactly `size` bytes of JSON.
fn card_of_size(version: &str, size: usize) -> Vec<u8> {
    let mut card = card(version);
    let base = serde_json::to_vec(&card).unwrap().len();
    card["description"] = json!("d".repeat(size - base + "Bills and refunds".len()));
    let bytes = serde_json::to_vec(&card).unwrap();
    assert_eq!(bytes.len(), size);
    bytes
}

#[tokio::test]
async fn body_limit_at_the_edge() {
    let source = CardSource::start(&card("0")).await;
    source.state.set_bytes(card_of_size("1", MAX_CARD_SIZE));
    let service =
        started(CardService::new(&settings(&source.url()), route(Binding::Grpc), None).unwrap());
    until_version(&service, "1").await;

    // One byte more, with Content-Length and chunked: refused, the last good card stays.
    source.state.set_bytes(card_of_size("2", MAX_CARD_SIZE + 1));
    let requests = source.state.requests.load(SeqCst);
    tokio::time::sleep(REFRESH * 3).await;
    source.state.chunked.store(true, SeqCst);
    tokio::time::sleep(REFRESH * 3).await;
    assert!(source.state.requests.load(SeqCst) >= requests + 4);
    assert_eq!(served(&service).await.unwrap()["version"], "1");

    // Chunked and within the limit: accepted.
    source.state.set_bytes(card_of_size("3", MAX_CARD_SIZE));
    until_version(&service, "3").await;
}

#[tokio::test]
async fn url_source_credentials_are_read_at_each_fetch() {
    let dir = TempDir::new("credential");
    let token = dir.0.join("token");
    std::fs::write(&token, "Bearer one\n").unwrap();
    let source = CardSource::start(&card("1")).await;
    let settings = CardSettings {
        authorization_file: Some(token.clone()),
        ..settings(&source.url())
    };
    let service = started(CardService::new(&settings, route(Binding::Grpc), None).unwrap());
    until_version(&service, "1").await;
    std::fs::write(&token, "Bearer two").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !source
        .state
        .authorization
        .lock()
        .unwrap()
        .contains(&"Bearer two".to_owned())
    {
        assert!(Instant::now() < deadline, "rotated credential never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(source.state.authorization.lock().unwrap()[0], "Bearer one");
}

/// A directory of its own under the system's temporary directory; removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("a2a-card-service-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

#[tokio::test]
async fn file_source_is_served_at_once_and_reread() {
    let dir = TempDir::new("file");
    let path = dir.0.join("card.json");
    std::fs::write(&path, serde_json::to_vec(&card("1")).unwrap()).unwrap();
    let service = CardService::new(
        &settings(path.to_str().unwrap()),
        route(Binding::Grpc),
        None,
    )
    .unwrap();
    assert_eq!(
        served(&service).await.unwrap()["version"],
        "1",
        "no 503 for a file"
    );
    let service = started(service);

    std::fs::write(&path, serde_json::to_vec(&card("2")).unwrap()).unwrap();
    until_version(&service, "2").await;
    std::fs::write(&path, b"{\"name\": \"Billing\", \"version\": ").unwrap();
    tokio::time::sleep(REFRESH * 3).await;
    assert_eq!(served(&service).await.unwrap()["version"], "2");
    std::fs::remove_file(&path).unwrap();
    tokio::time::sleep(REFRESH * 3).await;
    assert_eq!(served(&service).await.unwrap()["version"], "2");
}

/// The demo agent over gRPC on 127.0.0.1, answering only calls with `authorization`.
async fn guarded_agent(authorization: &'static str) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let check = move |request: tonic::Request<()>| match request.metadata().get("authorization") {
        Some(value) if value == authorization => Ok(request),
        _ => Err(tonic::Status::unauthenticated("who are you?")),
    };
    let service = A2aServiceServer::with_interceptor(DemoAgent::default(), check);
    let server = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);
    addr
}

/// In a process of its own, whose environment holds the credentials (setting variables in
/// the shared test process would race every thread that reads its environment).
#[tokio::test]
async fn backend_source_with_authorization() {
    let credentials = [
        ("A2A_CARD_TEST_TOKEN", "Bearer card-reader"),
        ("A2A_CARD_TEST_WRONG_TOKEN", "Bearer someone-else"),
    ];
    if !in_own_process(
        module_path!(),
        "backend_source_with_authorization",
        &credentials,
    ) {
        return;
    }
    let addr = guarded_agent("Bearer card-reader").await;
    let backend: Arc<dyn Backend> = Arc::new(
        GrpcBackend::new(&format!("http://{addr}"), &GrpcSettings::default(), None).unwrap(),
    );

    let settings = CardSettings {
        authorization_env: Some("A2A_CARD_TEST_TOKEN".to_owned()),
        skills: Some(vec!["demo".to_owned()]),
        ..settings("backend")
    };
    let service =
        started(CardService::new(&settings, route(Binding::Grpc), Some(backend.clone())).unwrap());
    let deadline = Instant::now() + Duration::from_secs(5);
    let card = loop {
        if let Some(card) = served(&service).await {
            break card;
        }
        assert!(Instant::now() < deadline, "the backend's card never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(card["name"], "a2a-gateway demo agent");
    assert_eq!(card["supportedInterfaces"][0]["url"], INTERFACE);
    assert_eq!(card["skills"][0]["id"], "demo");

    // Without the right credential the agent refuses, and no card is ever served.
    let wrong = CardSettings {
        authorization_env: Some("A2A_CARD_TEST_WRONG_TOKEN".to_owned()),
        ..settings.clone()
    };
    let refused = started(CardService::new(&wrong, route(Binding::Grpc), Some(backend)).unwrap());
    tokio::time::sleep(REFRESH * 3).await;
    assert_eq!(get(&refused).await.0, StatusCode::SERVICE_UNAVAILABLE);

    // An extended card fetched through the route gets the same treatment, per request.
    let request = http::Request::get("/billing/a2a/jsonrpc")
        .header("host", "ignored.example")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let mut extended = card.clone();
    extended["supportedInterfaces"] =
        json!([{"url": "agent:1", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]);
    extended["skills"] = json!([{"id": "demo"}, {"id": "secret"}]);
    let rewritten = service.rewrite_extended(extended, &request);
    assert_eq!(rewritten["supportedInterfaces"][0]["url"], INTERFACE);
    assert_eq!(
        rewritten["supportedInterfaces"].as_array().unwrap().len(),
        1
    );
    assert_eq!(rewritten["skills"], json!([{"id": "demo"}]));
}

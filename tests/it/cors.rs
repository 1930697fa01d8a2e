//! CORS at the wire (`front::cors`): off by default (no CORS headers, preflights go
//! unanswered as CORS); with origins configured, preflights from an allowed origin are
//! answered by the gateway itself, never reaching the agent, allowing the A2A headers, and
//! simple requests expose `A2A-Extensions` and `x-request-id`; a refused origin gets no
//! allowance.

use crate::harness;

use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::proto::TaskState;
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use a2a_gateway::route::Routes;
use a2a_gateway::settings::Settings;
use harness::*;
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::json;

const APP: &str = "https://app.example.com";
const OTHER: &str = "https://evil.example.net";

/// A backend answering GetTask, and the gateway of `args` in front of it; returns the
/// backend and the JSON-RPC endpoint.
async fn setup(args: &[&str]) -> (TestBackend, String) {
    setup_file(args, None).await
}

/// As `setup`, with a config file holding `file`.
async fn setup_file(args: &[&str], file: Option<&str>) -> (TestBackend, String) {
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(r)) => {
            Answer::Reply(Reply::GetTask(task(&r.id, TaskState::Working)))
        }
        _ => Answer::Error(tonic::Status::unimplemented("GetTask only")),
    });
    let url = format!("http://{}", backend.spawn().await);
    let file = file.map(|text| harness::process::TempFile::new("toml", text));
    let mut argv = vec!["a2a-gateway", "--backend", &url];
    argv.extend_from_slice(args);
    if let Some(file) = &file {
        argv.extend(["--config", file.path()]);
    }
    let config = Settings::load(argv).unwrap();
    let template = Routes::new(&config, None).unwrap();
    let frontend = template.frontend(&Arc::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = a2a_gateway::server::serve(
        listener,
        frontend,
        std::future::pending(),
        Duration::from_secs(1),
    );
    tokio::spawn(serving);
    (backend, format!("http://{addr}/a2a/jsonrpc"))
}

/// A browser's preflight for a JSON-RPC POST with the A2A headers, from `origin`.
async fn preflight(url: &str, origin: &str) -> (u16, HeaderMap) {
    let response = client()
        .request(Method::OPTIONS, url)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "a2a-version,a2a-extensions,authorization,content-type",
        )
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.headers().clone())
}

/// A JSON-RPC call from a page of `origin`.
async fn call(url: &str, origin: &str) -> (u16, HeaderMap, String) {
    let body = request(json!(1), "GetTask", json!({"id": "t-1"}));
    post_with(
        url,
        body,
        &[
            ("origin", origin),
            ("a2a-version", "1.0"),
            ("a2a-extensions", "https://example.com/ext/v1"),
        ],
    )
    .await
}

fn cors_headers(headers: &HeaderMap) -> Vec<String> {
    headers
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|k| k.starts_with("access-control-"))
        .collect()
}

fn listed(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .collect()
}

#[tokio::test]
async fn cors_is_off_by_default() {
    let (backend, url) = setup(&[]).await;
    let (status, headers) = preflight(&url, APP).await;
    assert_eq!(status, 405, "no CORS: the endpoint takes POST only");
    assert!(cors_headers(&headers).is_empty(), "{headers:?}");
    let (status, headers, text) = call(&url, APP).await;
    assert_eq!(status, 200, "{text}");
    assert!(cors_headers(&headers).is_empty(), "{headers:?}");
    assert!(!headers.contains_key("vary"), "{headers:?}");
    assert_eq!(backend.calls(), 1);
}

#[tokio::test]
async fn an_allowed_origin_gets_its_preflight_answered_by_the_gateway() {
    let (backend, url) = setup(&[
        "--cors-origin",
        APP,
        "--cors-origin",
        "http://localhost:3000",
    ])
    .await;
    let (status, headers) = preflight(&url, APP).await;
    assert_eq!(status, 200);
    assert_eq!(headers["access-control-allow-origin"], APP);
    let methods = listed(&headers, "access-control-allow-methods");
    assert!(methods.contains(&"post".to_owned()), "{methods:?}");
    let allowed = listed(&headers, "access-control-allow-headers");
    for header in [
        "a2a-version",
        "a2a-extensions",
        "authorization",
        "content-type",
    ] {
        assert!(
            allowed.contains(&header.to_owned()),
            "{header} in {allowed:?}"
        );
    }
    assert_eq!(headers["access-control-max-age"], "600");
    assert!(
        headers.contains_key("x-request-id"),
        "preflights pass the edge stack"
    );
    assert_eq!(backend.calls(), 0, "a preflight never reaches the agent");

    let (status, headers, text) = call(&url, APP).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["access-control-allow-origin"], APP);
    let exposed = listed(&headers, "access-control-expose-headers");
    for header in ["a2a-extensions", "x-request-id"] {
        assert!(
            exposed.contains(&header.to_owned()),
            "{header} in {exposed:?}"
        );
    }
    assert_eq!(headers["a2a-extensions"], "https://example.com/ext/v1");
    assert_eq!(backend.calls(), 1);
}

#[tokio::test]
async fn a_refused_origin_gets_no_allowance() {
    let (backend, url) = setup(&["--cors-origin", APP]).await;
    let (status, headers) = preflight(&url, OTHER).await;
    assert_eq!(status, 200, "tower-http answers every preflight");
    assert!(
        !headers.contains_key("access-control-allow-origin"),
        "{headers:?}"
    );
    assert_eq!(backend.calls(), 0, "a preflight never reaches the agent");
    // The browser would not let the page read this answer: no allowance for its origin.
    let (status, headers, _) = call(&url, OTHER).await;
    assert_eq!(status, 200);
    assert!(
        !headers.contains_key("access-control-allow-origin"),
        "{headers:?}"
    );
}

#[tokio::test]
async fn any_origin_and_more_headers_and_methods_can_be_allowed() {
    let args = [
        "--cors-origin",
        "*",
        "--cors-allow-header",
        "x-tenant",
        "--cors-allow-method",
        "post",
    ];
    let (backend, url) = setup(&args).await;
    let (status, headers) = preflight(&url, OTHER).await;
    assert_eq!(status, 200);
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert_eq!(listed(&headers, "access-control-allow-methods"), ["post"]);
    assert!(listed(&headers, "access-control-allow-headers").contains(&"x-tenant".to_owned()));
    assert_eq!(backend.calls(), 0);
}

#[tokio::test]
async fn a_limit_refusal_carries_the_cors_allowance() {
    let args = [
        "--cors-origin",
        APP,
        "--rate-limit",
        "1",
        "--rate-burst",
        "1",
    ];
    let (backend, url) = setup(&args).await;
    assert_eq!(call(&url, APP).await.0, 200);
    let (status, headers, text) = call(&url, APP).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(
        headers["access-control-allow-origin"], APP,
        "the page can read why"
    );
    assert_eq!(backend.calls(), 1);
}

#[tokio::test]
async fn cors_settings_come_from_the_config_file_too() {
    let file = format!("cors-origin = [\"{APP}\"]\ncors-max-age = \"1m\"\n");
    let (backend, url) = setup_file(&[], Some(&file)).await;
    let (status, headers) = preflight(&url, APP).await;
    assert_eq!(status, 200);
    assert_eq!(headers["access-control-allow-origin"], APP);
    assert_eq!(headers["access-control-max-age"], "60");
    assert_eq!(backend.calls(), 0);
}

/// A browser on a route that takes API keys: its preflight allows the route's key header,
/// and the page can read which credential a 401 asks for.
#[tokio::test]
async fn a_browser_may_send_the_routes_api_key_and_read_the_challenge() {
    let keys = harness::process::TempFile::new("keys", &format!("alice {}\n", "0".repeat(64)));
    let file = format!(
        "[auth.api-keys]\nheader = \"x-agent-key\"\nfile = \"{}\"\n",
        keys.path()
    );
    let (backend, url) = setup_file(&["--cors-origin", APP], Some(&file)).await;
    let (status, headers) = preflight(&url, APP).await;
    assert_eq!(status, 200);
    let allowed = listed(&headers, "access-control-allow-headers");
    assert!(allowed.contains(&"x-agent-key".to_owned()), "{allowed:?}");
    let (status, headers, text) = call(&url, APP).await;
    assert_eq!(status, 401, "{text}");
    assert_eq!(headers["access-control-allow-origin"], APP);
    let exposed = listed(&headers, "access-control-expose-headers");
    assert!(
        exposed.contains(&"www-authenticate".to_owned()),
        "{exposed:?}"
    );
    assert_eq!(backend.calls(), 0);
}

//! Limits at the wire (`front::limits`), each at its limit: N concurrent unary calls or
//! streams pass and one more gets 503 + `Retry-After` + a JSON-RPC error naming the limit,
//! while the backend counts no call for it; a rate's burst passes, the next call gets 429,
//! and the bucket refills; header fields at the limit pass and one byte over get 431; a
//! stream the agent leaves quiet ends with a final error event and the agent sees the
//! cancel; routes keep their own counters and share the global ones; `/metrics` shows it
//! all. The gateway is built from flags and a TOML file as the binary builds it, and
//! served on two worker threads, whose counters must be shared.

use crate::harness;

use std::time::{Duration, Instant};

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use a2a_gateway::settings::Settings;
use harness::process::TempFile;
use harness::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a slow backend holds each call.
const HOLD: Duration = Duration::from_secs(3);

/// The gateway of `args` (and the TOML `file`, if any) on two workers; returns its origin.
async fn serve(args: &[&str], file: Option<&str>) -> String {
    serve_on_workers(args, file).await
}

/// A backend whose unary calls take `HOLD` and whose streams send one event and hang.
async fn slow_backend() -> (TestBackend, String) {
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(r)) => Answer::After(
            HOLD,
            Box::new(Answer::Reply(Reply::GetTask(task(
                &r.id,
                TaskState::Working,
            )))),
        ),
        _ => Answer::Stream(vec![
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Hang,
        ]),
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

/// A POST that runs on its own (a call held in flight).
fn spawn_post(
    url: &str,
    body: String,
) -> tokio::task::JoinHandle<(u16, reqwest::header::HeaderMap, String)> {
    let url = url.to_owned();
    tokio::spawn(async move { post(&url, body).await })
}

fn get_task(id: u32) -> String {
    request(json!(id), "GetTask", json!({"id": format!("t-{id}")}))
}

fn stream_request() -> String {
    request(json!(1), "SendStreamingMessage", message_params("go"))
}

/// Waits (at most 5 s) until the backend has seen `n` calls.
async fn seen(backend: &TestBackend, n: usize) {
    let started = Instant::now();
    while backend.calls() < n {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "backend saw {}",
            backend.calls()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Checks a refusal: status, `Retry-After`, and the JSON-RPC error naming `limit`.
fn assert_refused(
    (status, headers, body): &(u16, reqwest::header::HeaderMap, String),
    expected: (u16, &str, &str),
) -> Value {
    let (code, reason, limit) = expected;
    assert_eq!(*status, code, "{body}");
    if code != 431 {
        let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=2).contains(&retry), "{retry}");
    }
    let body: Value = serde_json::from_str(body).unwrap();
    let error = &body["error"];
    assert_eq!(error["code"], -32603, "{body}");
    assert_eq!(error["data"][0]["reason"], reason, "{body}");
    assert_eq!(error["data"][0]["domain"], "a2a-gateway", "{body}");
    assert_eq!(error["data"][0]["metadata"]["limit"], limit, "{body}");
    assert!(error["message"].as_str().unwrap().contains(limit), "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_calls_at_the_limit() {
    let (backend, url) = slow_backend().await;
    let origin = serve(&["--backend", &url, "--max-concurrent-calls", "2"], None).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    // Each call on its own connection, dealt round-robin to the two workers: with counters
    // per worker, the third call would pass.
    let held: Vec<_> = (1..=2)
        .map(|id| spawn_post(&endpoint, get_task(id)))
        .collect();
    seen(&backend, 2).await;
    let refused = post(&endpoint, get_task(3)).await;
    let body = assert_refused(
        &refused,
        (503, "GATEWAY_OVERLOADED", "max-concurrent-calls"),
    );
    assert_eq!(body["id"], 3, "the call's id is echoed");
    assert_eq!(body["error"]["data"][0]["metadata"]["value"], "2");
    for call in held {
        let (status, _, text) = call.await.unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("\"result\""), "{text}");
    }
    assert_eq!(
        backend.calls(),
        2,
        "the refused call never reached the agent"
    );
    // The permits are back: the next call passes.
    let (status, _, text) = post(&endpoint, get_task(4)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(backend.calls(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_members_over_the_limit_are_refused_in_the_batch() {
    let (backend, url) = slow_backend().await;
    let origin = serve(&["--backend", &url, "--max-concurrent-calls", "1"], None).await;
    let batch = format!("[{},{}]", get_task(1), get_task(2));
    let (status, _, text) = post(&format!("{origin}/a2a/jsonrpc"), batch).await;
    assert_eq!(status, 200, "{text}");
    let answers: Vec<Value> = serde_json::from_str(&text).unwrap();
    let refused: Vec<_> = answers
        .iter()
        .filter(|a| a.get("error").is_some())
        .collect();
    assert_eq!((answers.len(), refused.len()), (2, 1), "{text}");
    assert_eq!(
        refused[0]["error"]["data"][0]["reason"],
        "GATEWAY_OVERLOADED"
    );
    assert_eq!(backend.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_at_the_limit() {
    let (backend, url) = slow_backend().await;
    let origin = serve(&["--backend", &url, "--max-concurrent-streams", "2"], None).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    let (_, mut first) = SseReader::open(&endpoint, stream_request()).await;
    let (_, mut second) = SseReader::open(&endpoint, stream_request()).await;
    assert!(first.data().await.is_some() && second.data().await.is_some());
    let refused = post(&endpoint, stream_request()).await;
    assert_refused(
        &refused,
        (503, "GATEWAY_OVERLOADED", "max-concurrent-streams"),
    );
    assert_eq!(
        backend.calls(),
        2,
        "the refused stream never reached the agent"
    );
    // Unary calls have their own limit (none here).
    let (status, _, text) = post(&endpoint, get_task(9)).await;
    assert_eq!(status, 200, "{text}");
    // A stream that ends gives its place back.
    drop(first);
    let metrics = format!("{origin}/metrics");
    let freed = "a2a_gateway_limit_in_use{route=\"default\",limit=\"max-concurrent-streams\"} 1\n";
    let started = Instant::now();
    while !client()
        .get(&metrics)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .contains(freed)
    {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the stream's place is not freed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, mut third) = SseReader::open(&endpoint, stream_request()).await;
    assert!(third.data().await.is_some());
    assert_eq!(backend.calls(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_passes_its_burst_then_refills() {
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(r)) => {
            Answer::Reply(Reply::GetTask(task(&r.id, TaskState::Working)))
        }
        _ => Answer::Error(tonic::Status::unimplemented("GetTask only")),
    });
    let url = format!("http://{}", backend.spawn().await);
    // One token per 2 s: the burst and the refused call fit well within it.
    let args = [
        "--backend",
        &url,
        "--rate-limit",
        "0.5",
        "--rate-burst",
        "3",
    ];
    let origin = serve(&args, None).await;
    let endpoint = format!("{origin}/a2a/jsonrpc");
    for id in 1..=3 {
        let (status, _, text) = post(&endpoint, get_task(id)).await;
        assert_eq!(status, 200, "call {id} of the burst: {text}");
    }
    let refused = post(&endpoint, get_task(4)).await;
    assert_refused(&refused, (429, "GATEWAY_RATE_LIMITED", "rate-limit"));
    // A notification gets no JSON-RPC answer, but the HTTP status still says why.
    let notification = r#"{"jsonrpc":"2.0","method":"GetTask","params":{"id":"t-1"}}"#;
    let (status, headers, text) = post(&endpoint, notification).await;
    assert_eq!((status, text.as_str()), (429, ""));
    assert!(headers.contains_key("retry-after"));
    assert_eq!(backend.calls(), 3);
    // A token is back after 2 s, and only one.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, _, text) = post(&endpoint, get_task(5)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(post(&endpoint, get_task(6)).await.0, 429);
    assert_eq!(backend.calls(), 4);
}

/// A raw HTTP/1.1 POST with exactly `headers`; returns the status and the body.
async fn raw_post(origin: &str, headers: &[(&str, String)], body: &str) -> (u16, String) {
    let addr = origin.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = "POST /a2a/jsonrpc HTTP/1.1\r\n".to_owned();
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    // A refused head may be answered, and the connection closed, before the body is
    // written: the answer is read all the same.
    let written = stream.write_all(head.as_bytes()).await;
    if written.is_ok() {
        let _ = stream.write_all(body.as_bytes()).await;
    }
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let response = String::from_utf8(response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_fields_at_the_limit_pass_and_one_byte_over_is_refused() {
    header_fields_are_bounded_at(600, &["--max-header-size", "600"]).await;
}

/// Without a setting, header fields are bounded at 64 KiB; `0` leaves only hyper's bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_fields_are_bounded_by_default() {
    header_fields_are_bounded_at(64 << 10, &[]).await;
    let (backend, url) = slow_backend().await;
    let origin = serve(&["--backend", &url, "--max-header-size", "0"], None).await;
    let big = "b".repeat(70_000);
    let body = get_task(1);
    let headers = [
        ("host", "gateway.test".to_owned()),
        ("content-type", "application/json".to_owned()),
        ("content-length", body.len().to_string()),
        ("connection", "close".to_owned()),
        ("a2a-version", "1.0".to_owned()),
        ("x-big", big),
    ];
    let (status, text) = raw_post(&origin, &headers, &body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(backend.calls(), 1);
}

/// A route with `flags` takes header fields of exactly `LIMIT` bytes and refuses one byte
/// more; far above, the listener refuses the head itself over HTTP/1.1 and HTTP/2.
async fn header_fields_are_bounded_at(limit: usize, flags: &[&str]) {
    let (backend, url) = slow_backend().await;
    let mut all = vec!["--backend", &url];
    all.extend_from_slice(flags);
    let origin = serve(&all, None).await;
    let body = get_task(1);
    // The request's header fields, padded so that they count exactly `LIMIT + over`.
    let headers = |over: usize| {
        let mut headers = vec![
            ("host", "gateway.test".to_owned()),
            ("content-type", "application/json".to_owned()),
            ("a2a-version", "1.0".to_owned()),
            ("x-request-id", "limits-test".to_owned()),
            ("connection", "close".to_owned()),
            ("content-length", body.len().to_string()),
        ];
        let size =
            |h: &[(&str, String)]| -> usize { h.iter().map(|(n, v)| n.len() + v.len() + 32).sum() };
        let pad = limit + over - size(&headers) - "x-pad".len() - 32;
        headers.push(("x-pad", "p".repeat(pad)));
        assert_eq!(size(&headers), limit + over);
        headers
    };
    let (status, text) = raw_post(&origin, &headers(0), &body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(backend.calls(), 1);
    let (status, text) = raw_post(&origin, &headers(1), &body).await;
    let refused = (status, reqwest::header::HeaderMap::new(), text);
    let setting = "max-header-size";
    assert_refused(&refused, (431, "GATEWAY_HEADERS_TOO_LARGE", setting));
    assert_eq!(
        backend.calls(),
        1,
        "the refused call never reached the agent"
    );
    // Far above every route's limit, the listener refuses the head itself, over HTTP/1.1
    // and HTTP/2 alike.
    let huge = "h".repeat(limit + 16 * 1024);
    let huge_head = [
        ("host", "gateway.test".to_owned()),
        ("x-huge", huge.clone()),
    ];
    let (status, _) = raw_post(&origin, &huge_head, &body).await;
    assert_eq!(status, 431);
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let response = h2
        .post(format!("{origin}/a2a/jsonrpc"))
        .header("content-type", "application/json")
        .header("x-huge", huge)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 431);
    assert_eq!(backend.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_stream_ends_with_an_error_event_and_the_agent_sees_the_cancel() {
    let pause = Duration::from_millis(200);
    let backend = TestBackend::new(move |_| {
        // Events closer together than the idle timeout keep the stream open.
        Answer::Stream(vec![
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Sleep(pause),
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Sleep(pause),
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Hang,
        ])
    });
    let url = format!("http://{}", backend.spawn().await);
    let origin = serve(&["--backend", &url, "--stream-idle-timeout", "600ms"], None).await;
    let (_, mut events) = SseReader::open(&format!("{origin}/a2a/jsonrpc"), stream_request()).await;
    for _ in 0..3 {
        let event = events.data().await.unwrap();
        assert!(event.get("result").is_some(), "{event}");
    }
    let quiet = Instant::now();
    let frame = tokio::time::timeout(Duration::from_secs(3), events.frame())
        .await
        .expect("no final event within 3 s")
        .unwrap();
    let waited = quiet.elapsed();
    assert!(frame.starts_with("event: error\n"), "{frame}");
    let data: Value = serde_json::from_str(frame.split_once("data: ").unwrap().1).unwrap();
    assert_eq!(data["id"], 1);
    assert_eq!(
        data["error"]["data"][0]["reason"],
        "BACKEND_DEADLINE_EXCEEDED"
    );
    let message = data["error"]["message"].as_str().unwrap();
    assert!(message.contains("stream-idle-timeout"), "{message}");
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    assert!(
        events.frame().await.is_none(),
        "the error event is the last"
    );
    let started = Instant::now();
    while backend.cancelled.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the agent saw no cancel"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two routes with a limit of one call each, under a global limit of two.
fn two_routes(backend: &str) -> String {
    format!(
        r#"
        max-concurrent-calls = 1
        global-max-concurrent-calls = 2
        global-rate-limit = 1000

        [[route]]
        name = "a"
        path = "/a"
        backend = "{backend}"

        [[route]]
        name = "b"
        path = "/b"
        backend = "{backend}"
        "#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_have_their_own_limits_under_the_global_ones() {
    let (backend, url) = slow_backend().await;
    let origin = serve(&[], Some(&two_routes(&url))).await;
    let (a, b) = (
        format!("{origin}/a/a2a/jsonrpc"),
        format!("{origin}/b/a2a/jsonrpc"),
    );
    let held_a = spawn_post(&a, get_task(1));
    seen(&backend, 1).await;
    // Route a is full; route b has its own count.
    let refused = post(&a, get_task(2)).await;
    assert_refused(
        &refused,
        (503, "GATEWAY_OVERLOADED", "max-concurrent-calls"),
    );
    let held_b = spawn_post(&b, get_task(3));
    seen(&backend, 2).await;
    let metrics = client()
        .get(format!("{origin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "a2a_gateway_limit{limit=\"global-max-concurrent-calls\"} 2\n",
        "a2a_gateway_limit_in_use{limit=\"global-max-concurrent-calls\"} 2\n",
        "a2a_gateway_limit{limit=\"global-rate-limit\"} 1000\n",
        "a2a_gateway_limit{limit=\"global-rate-burst\"} 1000\n",
        "a2a_gateway_limit{route=\"a\",limit=\"max-concurrent-calls\"} 1\n",
        "a2a_gateway_limit_in_use{route=\"a\",limit=\"max-concurrent-calls\"} 1\n",
        "a2a_gateway_limit_in_use{route=\"b\",limit=\"max-concurrent-calls\"} 1\n",
        "a2a_gateway_limit_rejections_total{route=\"a\",limit=\"max-concurrent-calls\"} 1\n",
        "a2a_gateway_limit_rejections_total{route=\"b\",limit=\"max-concurrent-calls\"} 0\n",
        "a2a_gateway_limit_rejections_total{route=\"a\",limit=\"global-max-concurrent-calls\"} 0\n",
        "a2a_gateway_requests_total{route=\"a\",method=\"GetTask\",code=\"-32603\"} 1\n",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert_eq!(held_a.await.unwrap().0, 200);
    assert_eq!(held_b.await.unwrap().0, 200);
    assert_eq!(backend.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_limit_holds_across_routes() {
    let (backend, url) = slow_backend().await;
    let file = two_routes(&url).replace(
        "global-max-concurrent-calls = 2",
        "global-max-concurrent-calls = 1",
    );
    let origin = serve(&[], Some(&file)).await;
    let held = spawn_post(&format!("{origin}/a/a2a/jsonrpc"), get_task(1));
    seen(&backend, 1).await;
    let refused = post(&format!("{origin}/b/a2a/jsonrpc"), get_task(2)).await;
    let limit = "global-max-concurrent-calls";
    let body = assert_refused(&refused, (503, "GATEWAY_OVERLOADED", limit));
    assert_eq!(body["error"]["data"][0]["metadata"]["route"], "b");
    assert_eq!(held.await.unwrap().0, 200);
    assert_eq!(backend.calls(), 1);
    let metrics = client()
        .get(format!("{origin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line =
        "a2a_gateway_limit_rejections_total{route=\"b\",limit=\"global-max-concurrent-calls\"} 1\n";
    assert!(metrics.contains(line), "{metrics}");
    assert!(metrics
        .contains("a2a_gateway_limit_in_use{route=\"b\",limit=\"max-concurrent-calls\"} 0\n"));
}

#[test]
fn limit_settings_are_checked_where_they_are_written() {
    let load = |args: &[&str], file: &str| {
        let file = TempFile::new("toml", file);
        let mut argv = vec!["a2a-gateway", "--config", file.path()];
        argv.extend_from_slice(args);
        Settings::load(argv).map(|_| ()).map_err(|e| e.to_string())
    };
    let backend = "backend = \"http://a:1\"\n";
    let err = load(&["--rate-burst", "5"], backend).unwrap_err();
    assert!(err.contains("--rate-limit: a burst needs a rate"), "{err}");
    let err = load(&["--global-rate-limit=-1"], backend).unwrap_err();
    assert!(err.contains("--global-rate-limit"), "{err}");
    let route = "[[route]]\nname = \"r\"\npath = \"/r\"\nbackend = \"http://a:1\"\n";
    load(
        &[],
        &format!("{route}max-concurrent-streams = 3\nstream-idle-timeout = \"1m\"\n"),
    )
    .unwrap();
    let err = load(&[], &format!("{route}global-max-concurrent-calls = 3\n")).unwrap_err();
    assert!(
        err.contains("route[0].global-max-concurrent-calls"),
        "global only: {err}"
    );
    let err = load(&[], &format!("{route}max-header-size = \"lots\"\n")).unwrap_err();
    assert!(err.contains("max-header-size"), "{err}");
}

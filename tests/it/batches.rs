//! The bounds on one request, at the wire, each at its limit and one past it: a batch of
//! `max-batch-size` members is answered and one more member (notifications count) is
//! refused whole before any member reaches the agent; a batch reply stops growing at
//! `max-batch-reply` (later members get `GATEWAY_REPLY_TOO_LARGE` with their ids); request
//! bodies held at once are bounded by `global-max-body-bytes-in-flight`; a hostile 4 MB
//! batch of tiny members is refused at once with little memory, and one call at
//! `max-body` holds a bounded multiple of it; an unfiltered `ListTasks`
//! over N endpoints is charged N against the concurrent-calls limit.

use crate::harness;

use std::time::{Duration, Instant};

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use harness::own_process::in_own_process;
use harness::*;
use serde_json::{json, Value};

/// The gateway of `args`, served on two workers; returns its JSON-RPC URL.
async fn serve(args: &[&str]) -> String {
    format!("{}/a2a/jsonrpc", serve_on_workers(args, None).await)
}

/// A backend answering `GetTask` at once, and holding it 3 s when the id is `slow`;
/// `SendMessage` is held 3 s; `ListTasks` answers one task.
async fn backend() -> (TestBackend, String) {
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(r)) if r.id == "slow" => Answer::After(
            Duration::from_secs(3),
            Box::new(Answer::Reply(Reply::GetTask(task(
                &r.id,
                TaskState::Working,
            )))),
        ),
        Request::Unary(UnaryRequest::GetTask(r)) => {
            Answer::Reply(Reply::GetTask(task(&r.id, TaskState::Working)))
        }
        Request::Unary(UnaryRequest::SendMessage(_)) => Answer::After(
            Duration::from_secs(3),
            Box::new(Answer::Reply(Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Task(task(
                    "t-9",
                    TaskState::Working,
                ))),
            }))),
        ),
        Request::Unary(UnaryRequest::ListTasks(_)) => {
            Answer::Reply(Reply::ListTasks(ListTasksResponse {
                tasks: vec![task("t-1", TaskState::Completed)],
                ..Default::default()
            }))
        }
        other => panic!("unexpected {other:?}"),
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

fn get_task(id: usize) -> String {
    request(json!(id), "GetTask", json!({"id": format!("t-{id}")}))
}

fn batch(members: usize) -> String {
    format!(
        "[{}]",
        (0..members).map(get_task).collect::<Vec<_>>().join(",")
    )
}

/// The one error of a refused batch: `-32600`, id `null`, naming the setting.
fn assert_batch_refused(text: &str) {
    let reply: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(reply.is_object(), "one error, not an array: {text}");
    assert_eq!(reply["error"]["code"], -32600, "{text}");
    assert_eq!(reply["id"], Value::Null, "{text}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("max-batch-size"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_at_the_limit_is_answered_and_one_more_member_is_refused_whole() {
    let (agent, backend_url) = backend().await;
    let url = serve(&["--backend", &backend_url, "--max-batch-size", "5"]).await;
    let (status, _, text) = post(&url, batch(5)).await;
    assert_eq!(status, 200, "{text}");
    let answers: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(answers.len(), 5, "{text}");
    assert!(answers.iter().all(|a| a.get("result").is_some()), "{text}");
    assert_eq!(agent.calls(), 5);

    let (_, _, text) = post(&url, batch(6)).await;
    assert_batch_refused(&text);
    // Notifications count as members too, though they get no answer.
    let notification = r#"{"jsonrpc":"2.0","method":"GetTask","params":{"id":"n"}}"#;
    let (_, _, text) = post(&url, format!("[{}]", [notification; 6].join(","))).await;
    assert_batch_refused(&text);
    // Members that are not even requests are counted, not decoded.
    let (_, _, text) = post(&url, format!("[{}]", ["1"; 6].join(","))).await;
    assert_batch_refused(&text);
    assert_eq!(
        agent.calls(),
        5,
        "no member of a refused batch reached the agent"
    );

    // The default is 100.
    let url = serve(&["--backend", &backend_url]).await;
    let (_, _, text) = post(&url, batch(100)).await;
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&text).unwrap().len(),
        100
    );
    let (_, _, text) = post(&url, batch(101)).await;
    assert_batch_refused(&text);
    assert_eq!(agent.calls(), 105);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_reply_stops_at_its_bound() {
    let (_agent, backend_url) = backend().await;
    // One member's reply, to size the bound in whole members.
    let url = serve(&["--backend", &backend_url]).await;
    let (_, _, one) = post(&url, batch(1)).await;
    let member = one.len() - 2; // without the brackets
    let bound = 3 * (member + 1) + 1;
    let url = serve(&[
        "--backend",
        &backend_url,
        "--max-batch-reply",
        &bound.to_string(),
    ])
    .await;
    let (status, _, text) = post(&url, batch(3)).await;
    assert_eq!(status, 200);
    let answers: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(
        answers.iter().all(|a| a.get("result").is_some()),
        "3 members fit: {text}"
    );
    let (_, _, text) = post(&url, batch(10)).await;
    let answers: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(answers.len(), 10, "every member is answered: {text}");
    let cut: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["data"][0]["reason"] == "GATEWAY_REPLY_TOO_LARGE")
        .collect();
    assert!(cut.len() >= 7, "{text}");
    assert!(cut
        .iter()
        .all(|a| a["error"]["code"] == -32603 && a["id"].is_number()));
    assert!(
        text.len() < bound + 10 * 400,
        "reply {} bytes for a bound of {bound}",
        text.len()
    );
}

/// Once a batch's reply is full, members not yet started are answered without being
/// called: 100 members of which 3 fit cost the agent at most those, the one that did not
/// fit, and the 16 that run at once, not 100 calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_past_a_full_reply_are_not_called() {
    let (agent, backend_url) = backend().await;
    let url = serve(&["--backend", &backend_url]).await;
    let (_, _, one) = post(&url, batch(1)).await;
    let bound = 3 * (one.len() - 1) + 1;
    let url = serve(&[
        "--backend",
        &backend_url,
        "--max-batch-reply",
        &bound.to_string(),
    ])
    .await;
    let before = agent.calls();
    let (status, _, text) = post(&url, batch(100)).await;
    assert_eq!(status, 200);
    let answers: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(answers.len(), 100, "every member is answered");
    let called = agent.calls() - before;
    assert!(called <= 3 + 1 + 16, "{called} members called");
    let not_made = answers
        .iter()
        .filter(|a| {
            a["error"]["data"][0]["reason"] == "GATEWAY_REPLY_TOO_LARGE"
                && a["error"]["message"].as_str().unwrap().contains("not made")
        })
        .count();
    assert_eq!(not_made, 100 - called, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_bytes_in_flight_are_bounded() {
    let (agent, backend_url) = backend().await;
    let url = serve(&[
        "--backend",
        &backend_url,
        "--global-max-body-bytes-in-flight",
        "1024",
    ])
    .await;
    let call = get_task(1);
    let at_limit = format!("{call}{}", " ".repeat(1024 - call.len()));
    let (status, _, text) = post(&url, at_limit.clone()).await;
    assert_eq!(status, 200, "a body of exactly the limit: {text}");
    let (status, _, text) = post(&url, format!("{at_limit} ")).await;
    assert_eq!(status, 503, "one byte past: {text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reply["error"]["data"][0]["reason"], "GATEWAY_OVERLOADED");
    assert_eq!(
        reply["error"]["data"][0]["metadata"]["limit"],
        "global-max-body-bytes-in-flight"
    );

    // A body held in flight (a slow call) counts until its call ends.
    let slow = request(json!(2), "GetTask", json!({"id": "slow"}));
    let held = tokio::spawn({
        let (url, body) = (url.clone(), format!("{slow}{}", " ".repeat(600)));
        async move { post(&url, body).await }
    });
    while agent.calls() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, _, _) = post(&url, format!("{call}{}", " ".repeat(500))).await;
    assert_eq!(status, 503, "600 + 500 bytes do not fit in 1024");
    assert_eq!(held.await.unwrap().0, 200);
    let (status, _, _) = post(&url, format!("{call}{}", " ".repeat(500))).await;
    assert_eq!(status, 200, "free again once the held call ended");
}

/// What a call at `max-body` (4 MiB) may add to the test process's peak RSS: ten times
/// the body (measured 25–27 MiB, about six times, on the system allocator; the release
/// binary's mimalloc keeps more of it resident).
const BOUND_KIB: u64 = 40 << 10;

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// In a process of its own: the peak RSS is the process's (the in-process gateway's), which
/// other tests would raise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_batch_of_tiny_members_costs_little() {
    let test = "a_hostile_batch_of_tiny_members_costs_little";
    if !in_own_process(module_path!(), test, &[]) {
        return;
    }
    let (agent, backend_url) = backend().await;
    let url = serve(&["--backend", &backend_url]).await;
    // Two million members in 4 MB (the default max-body): `[{},{},…]`.
    let members = (4 << 20) / 3 - 1;
    let body = format!("[{}{{}}]", "{},".repeat(members - 1));
    assert!(body.len() <= 4 << 20);
    let before = peak_rss_kib();
    let started = Instant::now();
    let (status, _, text) = post(&url, body).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{text}");
    assert_batch_refused(&text);
    let grown = peak_rss_kib().saturating_sub(before);
    println!("hostile batch: refused in {took:?}, peak RSS +{grown} KiB");
    assert!(took < Duration::from_secs(2), "{took:?}");
    // The test process holds the 4 MB body itself (and reqwest's copy); the gateway adds
    // little to that.
    assert!(grown < 32 << 10, "peak RSS grew {grown} KiB");
    assert_eq!(agent.calls(), 0);
    let (status, _, _) = post(&url, get_task(1)).await;
    assert_eq!(status, 200, "the next call is served");
}

/// In a process of its own: one call at `max-body` (4 MiB, the default) of text echoed by
/// the agent holds a bounded multiple of its body at its peak, here in the whole process:
/// the gateway (body, params, protobuf request, reply, its JSON), the agent (request and
/// reply) and the client (the body sent and the reply read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_at_max_body_holds_a_bounded_multiple_of_it() {
    let test = "a_call_at_max_body_holds_a_bounded_multiple_of_it";
    if !in_own_process(module_path!(), test, &[]) {
        return;
    }
    let agent = TestBackend::new(echo_message);
    let url = serve(&["--backend", &format!("http://{}", agent.spawn().await)]).await;
    let (status, _, _) = post(
        &url,
        request(json!(1), "SendMessage", message_params("warm")),
    )
    .await;
    assert_eq!(status, 200);
    const MAX_BODY: usize = 4 << 20;
    let empty = request(json!(1), "SendMessage", message_params("")).to_string();
    let text = "x".repeat(MAX_BODY - empty.len());
    let body = request(json!(1), "SendMessage", message_params(&text));
    assert_eq!(body.len(), MAX_BODY);
    drop(text);
    let before = peak_rss_kib();
    let (status, _, reply) = post(&url, body).await;
    assert_eq!(status, 200);
    assert!(
        reply.len() > MAX_BODY - 1024,
        "the text echoed: {} B",
        reply.len()
    );
    drop(reply);
    let grown = peak_rss_kib().saturating_sub(before);
    println!("a call of {MAX_BODY} B: peak RSS +{grown} KiB");
    assert!(grown < BOUND_KIB, "peak RSS grew {grown} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_list_is_charged_once_per_endpoint() {
    let mut agents = Vec::new();
    let mut args: Vec<String> = Vec::new();
    for _ in 0..3 {
        let (agent, url) = backend().await;
        args.extend(["--backend".to_owned(), url]);
        agents.push(agent);
    }
    args.extend(
        [
            "--affinity",
            "task",
            "--affinity-key",
            "test affinity key, 32 bytes long",
            "--global-max-concurrent-calls",
            "3",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let url = serve(&args).await;
    let list = request(json!(1), "ListTasks", json!({}));
    let (status, _, text) = post(&url, list.clone()).await;
    assert_eq!(status, 200, "3 endpoints fit a limit of 3: {text}");

    // With one unary call in flight, a fan-out over 3 endpoints does not fit.
    let slow = request(json!(2), "SendMessage", message_params("hold"));
    let held = tokio::spawn({
        let url = url.clone();
        async move { post(&url, slow).await }
    });
    let seen = |agents: &[TestBackend]| agents.iter().map(TestBackend::calls).sum::<usize>();
    let started = Instant::now();
    while seen(&agents) < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the held call never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, _, text) = post(&url, list.clone()).await;
    assert_eq!(status, 503, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        reply["error"]["data"][0]["metadata"]["limit"],
        "global-max-concurrent-calls"
    );
    // A filtered list goes to one endpoint and is charged one: it fits beside the held call.
    let filtered = request(json!(3), "ListTasks", json!({"contextId": "ctx-1"}));
    let (status, _, text) = post(&url, filtered).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(held.await.unwrap().0, 200);
}

/// A declared length reserves nothing: a connection that announces a body and sends one
/// byte holds one byte of the budget, not its announcement, so a few such connections
/// cannot lock every other client out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announced_body_holds_only_what_arrived() {
    use tokio::io::AsyncWriteExt;
    let (_agent, backend_url) = backend().await;
    let url = serve(&[
        "--backend",
        &backend_url,
        "--global-max-body-bytes-in-flight",
        "1024",
    ])
    .await;
    let addr = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = "POST /a2a/jsonrpc HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
                    a2a-version: 1.0\r\ncontent-length: 1000\r\n\r\n{";
        stream.write_all(head.as_bytes()).await.unwrap();
        idle.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let call = get_task(1);
    let (status, _, text) = post(&url, format!("{call}{}", " ".repeat(900 - call.len()))).await;
    assert_eq!(
        status, 200,
        "4 announced bodies of 1000 bytes hold 4 bytes: {text}"
    );
}

/// A body declared far past `max-body` (or just past it by a client that waits for
/// `100 Continue`) is refused before it is read (no `100 Continue`, no draining), and its
/// connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_far_past_the_limit_is_refused_at_once() {
    let (agent, backend_url) = backend().await;
    let url = serve(&["--backend", &backend_url]).await;
    let addr = url.trim_start_matches("http://").split('/').next().unwrap();
    let rows = [
        (10_000_000_000u64, ""),
        ((4 << 20) + 1, "expect: 100-continue\r\n"),
    ];
    for (length, expect) in rows {
        refused_at_once(addr, length, expect).await;
    }
    assert_eq!(agent.calls(), 0);
}

async fn refused_at_once(addr: &str, length: u64, expect: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /a2a/jsonrpc HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
         a2a-version: 1.0\r\n{expect}content-length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "{length}: no answer within 5 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(started.elapsed() < Duration::from_secs(2), "{answer}");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("connection: close"), "{answer}");
    assert!(
        answer.contains("-32600") && answer.contains("max-body"),
        "{answer}"
    );
}

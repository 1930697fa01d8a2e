//! Agents with many pods, on real sockets: gRPC test backends ("pods", each on a runtime
//! the test can kill) and HTTP+JSON mock agents behind one `dns:///` name served by the
//! test DNS server (`common/dns.rs`), and behind a static list of URLs. The gateway is
//! built from flags as the binary builds it (`Settings::load`, `route::Routes`), so
//! `/readyz` and `/metrics` are the binary's.
//!
//! Every limit at its limit: traffic within ±20 % of an even share over 900 calls; no
//! failed unary call once a pod is dead (the connect failure is retried elsewhere); the
//! calls that reached a pod before it died fail and are not repeated; ejections last the
//! configured back-off, then twice that.

use crate::harness;
use crate::harness::rest_mock;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::proto::{part, send_message_response, SendMessageResponse, TaskState};
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use a2a_gateway::route::Routes;
use a2a_gateway::settings::Settings;
use futures::StreamExt;
use harness::dns::TestDns;
use harness::pods::{ips, pod_addresses, Pod};
use harness::{
    message_params, request, scheme_tests, Answer, Scheme, SseReader, Step, TestBackend,
};
use serde_json::Value;

/// How long a "slow" call takes at a pod, and how long a stream waits before its second
/// event: long enough to kill the pod while they are under way.
const SLOW: Duration = Duration::from_secs(2);

/// The gateway of `args` (flags after the program name) on 127.0.0.1:0: its base URL.
async fn gateway(args: &[&str]) -> String {
    let config =
        Settings::load(std::iter::once("a2a-gateway").chain(args.iter().copied())).unwrap();
    let template = Routes::new(&config, None).unwrap();
    harness::serve_frontend(template.frontend(&Arc::default()).unwrap()).await
}

/// The gateway of `args` and its admin listener (whose `/readyz` says why a route is not
/// ready; the main one's only that it is not): both base URLs.
async fn gateway_with_admin(args: &[&str]) -> (String, String) {
    let config =
        Settings::load(std::iter::once("a2a-gateway").chain(args.iter().copied())).unwrap();
    let template = Routes::new(&config, None).unwrap();
    let metrics = Arc::default();
    let main = harness::serve_frontend(template.frontend(&metrics).unwrap()).await;
    let admin = harness::serve_frontend(template.admin_frontend(&metrics).unwrap()).await;
    (main, admin)
}

fn text_of(request: &Request) -> String {
    let message = match request {
        Request::Unary(UnaryRequest::SendMessage(send)) => send.message.as_ref(),
        Request::Stream(StreamRequest::SendStreamingMessage(send)) => send.message.as_ref(),
        _ => None,
    };
    let part = message.and_then(|m| m.parts.first());
    match part.and_then(|p| p.content.as_ref()) {
        Some(part::Content::Text(text)) => text.clone(),
        _ => String::new(),
    }
}

/// Pod `index`: SendMessage answers a task named after the pod (after `SLOW` for the text
/// "slow"); a stream sends a working event, waits `SLOW`, sends a completed event.
fn pod_backend(index: usize) -> TestBackend {
    TestBackend::new(move |request| {
        let pod = format!("pod-{index}");
        match request {
            Request::Unary(UnaryRequest::SendMessage(_)) => {
                let reply = Answer::Reply(Reply::SendMessage(SendMessageResponse {
                    payload: Some(send_message_response::Payload::Task(harness::task(
                        &pod,
                        TaskState::Completed,
                    ))),
                }));
                if text_of(request) == "slow" {
                    Answer::After(SLOW, Box::new(reply))
                } else {
                    reply
                }
            }
            Request::Stream(_) => Answer::Stream(vec![
                Step::Event(harness::status_update(&pod, TaskState::Working)),
                Step::Sleep(SLOW),
                Step::Event(harness::status_update(&pod, TaskState::Completed)),
            ]),
            _ => Answer::Error(tonic::Status::unimplemented("not in this test")),
        }
    })
}

fn send_body(text: &str) -> String {
    request(1.into(), "SendMessage", message_params(text))
}

/// Sends `n` SendMessage calls, four at a time; returns the error objects of those that
/// failed.
async fn send_many(url: &str, n: usize) -> Vec<Value> {
    let body = send_body("hello");
    let replies: Vec<Value> = futures::stream::iter(0..n)
        .map(|_| harness::rpc(url, &body))
        .buffer_unordered(4)
        .collect()
        .await;
    replies
        .into_iter()
        .filter_map(|reply| reply.get("error").cloned())
        .collect()
}

/// Calls seen by each pod since `before`.
fn delta(pods: &[&Pod], before: &[usize]) -> Vec<usize> {
    pods.iter()
        .zip(before)
        .map(|(p, b)| p.calls() - b)
        .collect()
}

fn counts(pods: &[&Pod]) -> Vec<usize> {
    pods.iter().map(|p| p.calls()).collect()
}

/// Each count is within ±20 % of an even share of `total`.
fn assert_spread(counts: &[usize], total: usize) {
    assert_eq!(counts.iter().sum::<usize>(), total, "{counts:?}");
    let fair = total as f64 / counts.len() as f64;
    for count in counts {
        let off = (*count as f64 - fair).abs() / fair;
        assert!(off <= 0.2, "uneven spread {counts:?} of {total}");
    }
}

fn reason(error: &Value) -> &str {
    error["data"][0]["reason"].as_str().unwrap_or_default()
}

async fn metrics(base: &str) -> String {
    reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `/readyz`: status and body.
async fn readyz(base: &str) -> (u16, String) {
    let response = reqwest::get(format!("{base}/readyz")).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Waits (at most `limit`) until `/metrics` holds `line`; returns when it did.
async fn await_metric(base: &str, line: &str, limit: Duration) -> Instant {
    let started = Instant::now();
    loop {
        if metrics(base).await.contains(line) {
            return Instant::now();
        }
        assert!(started.elapsed() < limit, "no {line:?} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Opens streams until one runs on pod `on` and one elsewhere; returns (pod, stream).
async fn streams_on_and_off(url: &str, on: usize) -> Vec<(String, SseReader)> {
    let body = request(1.into(), "SendStreamingMessage", message_params("stream"));
    let mut streams = Vec::new();
    for _ in 0..30 {
        let (_, mut reader) = SseReader::open(url, body.clone()).await;
        let first = reader.data().await.unwrap();
        let pod = first["result"]["statusUpdate"]["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        streams.push((pod, reader));
        let target = format!("pod-{on}");
        let on_target = streams.iter().any(|(p, _)| *p == target);
        let elsewhere = streams.iter().any(|(p, _)| *p != target);
        if on_target && elsewhere {
            return streams;
        }
    }
    panic!("30 streams and not one on pod {on} and one elsewhere");
}

/// Slow calls seen by a pod.
fn slow_calls(pod: &Pod) -> usize {
    let seen = pod.backend.seen.lock().unwrap();
    seen.iter()
        .filter(|s| text_of(&s.request) == "slow")
        .count()
}

/// Kills pod 1 of `pods` while streams and slow calls are under way on every pod: its
/// streams end with an error frame and its slow calls fail (not repeated elsewhere),
/// everything else finishes; then no call fails.
async fn kill_pod_one(url: &str, pods: &mut [Pod]) {
    let streams = streams_on_and_off(url, 1).await;
    let slow: Vec<_> = (0..6)
        .map(|_| {
            let (url, body) = (url.to_owned(), send_body("slow"));
            tokio::spawn(async move { harness::rpc(&url, &body).await })
        })
        .collect();
    let started = Instant::now();
    while pods.iter().map(slow_calls).sum::<usize>() < 6 {
        assert!(
            started.elapsed() < SLOW / 2,
            "the slow calls did not arrive"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let slow_on_one = slow_calls(&pods[1]);
    pods[1].kill();

    for (pod, mut reader) in streams {
        let next = reader.data().await.unwrap();
        if pod == "pod-1" {
            assert_eq!(reason(&next["error"]), "BACKEND_CONNECTION_RESET", "{next}");
        } else {
            let state = &next["result"]["statusUpdate"]["status"]["state"];
            assert_eq!(state, "TASK_STATE_COMPLETED", "{next}");
        }
        assert!(reader.data().await.is_none(), "the stream ends");
    }
    let mut failed = 0;
    for call in slow {
        let reply = call.await.unwrap();
        if let Some(error) = reply.get("error") {
            assert_eq!(reason(error), "BACKEND_CONNECTION_RESET", "{reply}");
            failed += 1;
        }
    }
    assert_eq!(failed, slow_on_one, "exactly pod 1's slow calls failed");
    let elsewhere: usize = [&pods[0], &pods[2]].iter().map(|p| slow_calls(p)).sum();
    assert_eq!(
        elsewhere + slow_on_one,
        6,
        "no call that reached pod 1 was sent again"
    );

    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = counts(&[&pods[0], &pods[2]]);
    let errors = send_many(url, 300).await;
    assert!(
        errors.is_empty(),
        "calls failed after pod 1 died: {errors:?}"
    );
    let after = delta(&[&pods[0], &pods[2]], &before);
    assert_eq!(after.iter().sum::<usize>(), 300, "{after:?}");
}

scheme_tests!(pods_behind_a_dns_name);

/// Three pods behind one name: an even spread; one dies (see `kill_pod_one`); a fourth
/// appears in the name's answer and gets its share.
async fn pods_behind_a_dns_name(scheme: Scheme) {
    let addrs = pod_addresses(4);
    let mut pods = Vec::new();
    for (i, addr) in addrs.iter().take(3).enumerate() {
        pods.push(Pod::start(pod_backend(i), scheme, *addr).await);
    }
    let dns = TestDns::start(harness::POD_NAME, &ips(&addrs[..3])).await;
    let backend = format!("dns:///{}:{}", harness::POD_NAME, addrs[0].port());
    let resolver = dns.addr.to_string();
    let mut args = vec![
        "--backend",
        &backend,
        "--backend-resolver",
        &resolver,
        "--backend-resolve-interval",
        "200ms",
        "--eject-backoff",
        "60s",
    ];
    let ca = scheme.ca_flags();
    if scheme == Scheme::Https {
        args.push("--backend-tls");
        args.extend(ca.iter().map(String::as_str));
    }
    let base = gateway(&args).await;
    let url = format!("{base}/a2a/jsonrpc");

    let all: Vec<&Pod> = pods.iter().collect();
    let before = counts(&all);
    assert!(send_many(&url, 900).await.is_empty());
    assert_spread(&delta(&all, &before), 900);

    kill_pod_one(&url, &mut pods).await;
    let metrics_text = metrics(&base).await;
    let dead = format!("endpoint=\"{}\"}} 1", addrs[1]);
    assert!(
        metrics_text.contains(&format!(
            "a2a_gateway_endpoint_ejections_total{{route=\"default\",{dead}"
        )),
        "{metrics_text}"
    );

    // The name now answers pods 0, 2 and a new pod 3.
    pods.push(Pod::start(pod_backend(3), scheme, addrs[3]).await);
    dns.set(&ips(&[addrs[0], addrs[2], addrs[3]]));
    let started = Instant::now();
    while pods[3].calls() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "pod 3 got no call"
        );
        assert!(send_many(&url, 20).await.is_empty());
    }
    let live = [&pods[0], &pods[2], &pods[3]];
    let before = counts(&live);
    assert!(send_many(&url, 900).await.is_empty());
    assert_spread(&delta(&live, &before), 900);
    let text = metrics(&base).await;
    for line in [
        "a2a_gateway_route_endpoints{route=\"default\",state=\"healthy\"} 3\n".to_owned(),
        "a2a_gateway_route_endpoints{route=\"default\",state=\"ejected\"} 0\n".to_owned(),
        format!(
            "a2a_gateway_endpoint_calls_total{{route=\"default\",endpoint=\"{}\"}}",
            addrs[3]
        ),
        // Backend latency by the pod's resolved address.
        format!(
            "a2a_gateway_backend_call_duration_seconds_count{{route=\"default\",endpoint=\"{}\"}}",
            addrs[3]
        ),
    ] {
        assert!(text.contains(&line), "{line} in {text}");
    }
}

/// Three pods as a list of URLs: the same spread and the same death.
#[tokio::test]
async fn pods_in_a_list() {
    let mut pods = Vec::new();
    for i in 0..3 {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        pods.push(Pod::start(pod_backend(i), Scheme::Http, any).await);
    }
    let urls: Vec<String> = pods.iter().map(|p| format!("http://{}", p.addr)).collect();
    let mut args = Vec::new();
    for url in &urls {
        args.extend(["--backend", url.as_str()]);
    }
    let base = gateway(&args).await;
    let url = format!("{base}/a2a/jsonrpc");
    let all: Vec<&Pod> = pods.iter().collect();
    let before = counts(&all);
    assert!(send_many(&url, 900).await.is_empty());
    assert_spread(&delta(&all, &before), 900);
    kill_pod_one(&url, &mut pods).await;
}

/// Round-robin takes turns exactly.
#[tokio::test]
async fn round_robin_takes_turns() {
    let mut pods = Vec::new();
    for i in 0..3 {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        pods.push(Pod::start(pod_backend(i), Scheme::Http, any).await);
    }
    let urls: Vec<String> = pods.iter().map(|p| format!("http://{}", p.addr)).collect();
    let mut args = vec!["--balance", "round-robin"];
    for url in &urls {
        args.extend(["--backend", url.as_str()]);
    }
    let url = format!("{}/a2a/jsonrpc", gateway(&args).await);
    for _ in 0..30 {
        harness::rpc(&url, &send_body("hello")).await;
    }
    assert_eq!(counts(&pods.iter().collect::<Vec<_>>()), [10, 10, 10]);
}

/// Three HTTP+JSON agents behind a name (with a base path) and as a list.
#[tokio::test]
async fn http_json_pods_share_the_calls() {
    let addrs = pod_addresses(3);
    let task = r#"{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}"#;
    let mut agents = Vec::new();
    for addr in &addrs {
        agents.push(rest_mock::MockAgent::start_at(*addr, move |_| rest_mock::ok_json(task)).await);
    }
    let dns = TestDns::start(harness::POD_NAME, &ips(&addrs)).await;
    let port = addrs[0].port();
    let backend = format!("dns:///{}:{port}/a2a", harness::POD_NAME);
    let resolver = dns.addr.to_string();
    let by_name = gateway(&[
        "--binding",
        "HTTP+JSON",
        "--backend",
        &backend,
        "--backend-resolver",
        &resolver,
    ])
    .await;
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}/a2a")).collect();
    let mut args = vec!["--binding", "HTTP+JSON"];
    for url in &urls {
        args.extend(["--backend", url.as_str()]);
    }
    let by_list = gateway(&args).await;
    let body = request(1.into(), "GetTask", serde_json::json!({"id": "t-1"}));
    for (base, host) in [
        (by_name, format!("{}:{port}", harness::POD_NAME)),
        (by_list, String::new()),
    ] {
        for agent in &agents {
            agent.clear();
        }
        let url = format!("{base}/a2a/jsonrpc");
        let replies: Vec<Value> = futures::stream::iter(0..900)
            .map(|_| harness::rpc(&url, &body))
            .buffer_unordered(4)
            .collect()
            .await;
        assert!(
            replies.iter().all(|r| r["result"]["id"] == "t-1"),
            "{:?}",
            replies[0]
        );
        let seen: Vec<usize> = agents.iter().map(|a| a.requests().len()).collect();
        assert_spread(&seen, 900);
        let one = agents[0].requests().remove(0);
        assert_eq!(one.path, "/a2a/tasks/t-1");
        if !host.is_empty() {
            assert_eq!(
                one.header("host"),
                Some(host.as_str()),
                "the DNS name, not the pod's address"
            );
        }
    }
}

/// `/readyz` is 503 once every endpoint is ejected (the admin listener says so, the main
/// one only that it is not ready), 200 again once one connects.
#[tokio::test]
async fn readiness_follows_the_endpoints() {
    let addrs = pod_addresses(2);
    let mut pods = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        pods.push(Pod::start(pod_backend(i), Scheme::Http, *addr).await);
    }
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    let (base, admin) = gateway_with_admin(&[
        "--backend",
        &urls[0],
        "--backend",
        &urls[1],
        "--eject-backoff",
        "300ms",
        "--readiness",
        "all-routes",
    ])
    .await;
    let url = format!("{base}/a2a/jsonrpc");
    assert_eq!(readyz(&base).await, (200, "ready\n".to_owned()));
    assert!(send_many(&url, 10).await.is_empty());

    for pod in &mut pods {
        pod.kill();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The call tries one pod, then the other: both are ejected.
    let reply = harness::rpc(&url, &send_body("hello")).await;
    assert_eq!(reason(&reply["error"]), "BACKEND_UNAVAILABLE", "{reply}");
    let (status, why) = readyz(&admin).await;
    assert_eq!(status, 503);
    assert!(
        why.contains("route \"default\" has no connectable endpoint"),
        "{why}"
    );
    assert_eq!(readyz(&base).await, (503, "not ready\n".to_owned()));
    assert!(metrics(&base)
        .await
        .contains("a2a_gateway_route_endpoints{route=\"default\",state=\"ejected\"} 2\n"));

    // Still down after the first back-off: the probe fails and the ejection goes on.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(readyz(&base).await.0, 503);

    let revived = Pod::start(pod_backend(0), Scheme::Http, addrs[0]).await;
    let started = Instant::now();
    while readyz(&base).await.0 != 200 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "not ready again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(send_many(&url, 10).await.is_empty());
    assert_eq!(revived.calls(), 10);
}

/// `eject-after` deadline faults in a row eject a pod for `eject-backoff`, the next
/// ejection lasts twice as long; calls that reached it are never sent again. The backoff
/// (1 s) leaves a loaded machine's debug gateway time for the eight calls made while the
/// pod is out (at 500 ms, under load, they could outlast it), and the deadline (300 ms)
/// time for each of them.
#[tokio::test]
async fn deadline_faults_in_a_row_eject_with_a_growing_backoff() {
    let slow = TestBackend::new(|_| {
        Answer::After(
            Duration::from_secs(1),
            Box::new(Answer::Error(tonic::Status::unavailable("late anyway"))),
        )
    });
    let slow_addr = slow.spawn().await;
    let fast = pod_backend(0);
    let fast_addr = fast.spawn().await;
    let (slow_url, fast_url) = (format!("http://{slow_addr}"), format!("http://{fast_addr}"));
    let base = gateway(&[
        "--backend",
        &slow_url,
        "--backend",
        &fast_url,
        "--balance",
        "round-robin",
        "--timeout",
        "300ms",
        "--eject-after",
        "3",
        "--eject-backoff",
        "1s",
    ])
    .await;
    let url = format!("{base}/a2a/jsonrpc");
    let ejected = "a2a_gateway_route_endpoints{route=\"default\",state=\"ejected\"} 1\n";
    let healthy = "a2a_gateway_route_endpoints{route=\"default\",state=\"healthy\"} 2\n";

    let mut backoffs = Vec::new();
    for round in 1..=2 {
        let mut deadlines = 0;
        let mut sent = 0;
        while !metrics(&base).await.contains(ejected) {
            sent += 1;
            assert!(
                sent <= 6,
                "round {round}: not ejected after 3 deadlines in a row"
            );
            let reply = harness::rpc(&url, &send_body("hello")).await;
            if let Some(error) = reply.get("error") {
                assert_eq!(reason(error), "BACKEND_DEADLINE_EXCEEDED", "{reply}");
                deadlines += 1;
            }
        }
        assert_eq!(deadlines, 3, "round {round}");
        let ejected_at = Instant::now();
        // Ejected: every call goes to the fast pod.
        let (slow_before, fast_before) = (slow.calls(), fast.calls());
        assert!(send_many(&url, 8).await.is_empty());
        assert_eq!((slow.calls(), fast.calls()), (slow_before, fast_before + 8));
        let back = await_metric(&base, healthy, Duration::from_secs(6)).await;
        backoffs.push(back - ejected_at);
    }
    assert!(backoffs[0] >= Duration::from_millis(950), "{backoffs:?}");
    assert!(backoffs[1] >= Duration::from_millis(1950), "{backoffs:?}");
    assert!(backoffs[1] < Duration::from_millis(3000), "{backoffs:?}");
    assert!(metrics(&base).await.contains(&format!(
        "a2a_gateway_endpoint_ejections_total{{route=\"default\",endpoint=\"{slow_url}\"}} 2\n"
    )));
    // Every call is counted once: none that reached the slow pod was sent again.
    let calls = metrics(&base).await;
    let count = |url: &str| {
        let prefix =
            format!("a2a_gateway_endpoint_calls_total{{route=\"default\",endpoint=\"{url}\"}} ");
        calls
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    assert_eq!(count(&slow_url), slow.calls());
    assert_eq!(count(&fast_url), fast.calls());
}

/// A pod's connection failure asks DNS again within about a second, even with a long
/// resolve interval, and a pod the name no longer answers leaves the route.
#[tokio::test]
async fn a_connection_failure_resolves_the_name_again_soon() {
    let addrs = pod_addresses(2);
    let mut pods = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        pods.push(Pod::start(pod_backend(i), Scheme::Http, *addr).await);
    }
    let dns = TestDns::start(harness::POD_NAME, &ips(&addrs)).await;
    let backend = format!("dns:///{}:{}", harness::POD_NAME, addrs[0].port());
    let resolver = dns.addr.to_string();
    let base = gateway(&[
        "--backend",
        &backend,
        "--backend-resolver",
        &resolver,
        "--backend-resolve-interval",
        "1h",
    ])
    .await;
    let url = format!("{base}/a2a/jsonrpc");
    assert!(send_many(&url, 10).await.is_empty());
    let queries = dns.queries();
    dns.set(&ips(&addrs[..1]));
    pods[1].kill();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(send_many(&url, 20).await.is_empty());
    let started = Instant::now();
    // Resolved again: one endpoint, none ejected (the dead one left the set).
    await_metric(
        &base,
        "a2a_gateway_route_endpoints{route=\"default\",state=\"ejected\"} 0\n",
        Duration::from_secs(2),
    )
    .await;
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert!(dns.queries() > queries);
    let healthy = "a2a_gateway_route_endpoints{route=\"default\",state=\"healthy\"} 1\n";
    assert!(metrics(&base).await.contains(healthy));
    let text = metrics(&base).await;
    assert!(!text.contains(&addrs[1].to_string()), "pod 1 left: {text}");
}

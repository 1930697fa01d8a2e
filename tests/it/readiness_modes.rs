//! `--readiness` with the real binary: three gRPC routes, their agents pods the test kills
//! (`harness::pods`). Under every mode the routes whose agents live serve without one
//! failed call while another agent dies, and the dead route answers its clients with
//! `BACKEND_UNAVAILABLE` within the connect timeout; only what `/readyz` answers differs:
//!
//! | mode | one agent of three down | every agent down |
//! |---|---|---|
//! | `process` (the default) | 200 | 200 |
//! | `any-route` | 200 | 503 |
//! | `all-routes` | 503 | 503 |
//!
//! Whatever the mode, the admin listener's `/readyz` names the route that is not ready
//! (`?verbose`: JSON listing every route) and `a2a_gateway_route_ready` says it per route.

use crate::harness;

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::proto::{send_message_response, SendMessageResponse, TaskState};
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use harness::pods::Pod;
use harness::process::{start_with, Running, TempFile, BIN};
use harness::{free_listen_address, message_params, request, Answer, Scheme, TestBackend};
use serde_json::{json, Value};

/// The routes' `connect-timeout`: a dead route's calls must be answered within it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The routes, each in front of its own agent.
const ROUTES: [&str; 3] = ["alpha", "beta", "gamma"];

/// How `--readiness` is given to the binary: not at all (the default), by the file's key,
/// or by the flag.
#[derive(Clone, Copy)]
enum Given {
    Default,
    File(&'static str),
    Flag(&'static str),
}

/// What `/readyz` answers with one agent down, and with every agent down.
struct Expected {
    one_down: u16,
    all_down: u16,
}

/// A pod answering SendMessage with a completed task.
fn agent() -> TestBackend {
    TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::SendMessage(_)) => {
            Answer::Reply(Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Task(harness::task(
                    "t-1",
                    TaskState::Completed,
                ))),
            }))
        }
        _ => Answer::Error(tonic::Status::unimplemented("not in this test")),
    })
}

/// The binary in front of three pods, one route each, with an admin listener.
struct Gateway {
    _process: Running,
    _config: TempFile,
    main: String,
    admin: String,
    pods: Vec<Pod>,
}

impl Gateway {
    async fn start(given: Given) -> Gateway {
        let mut pods = Vec::new();
        for _ in ROUTES {
            let any = "127.0.0.1:0".parse().unwrap();
            pods.push(Pod::start(agent(), Scheme::Http, any).await);
        }
        let mut config = format!(
            "readiness-cache = \"50ms\"\nconnect-timeout = \"{}ms\"\n",
            CONNECT_TIMEOUT.as_millis()
        );
        if let Given::File(mode) = given {
            config.push_str(&format!("readiness = \"{mode}\"\n"));
        }
        for (route, pod) in ROUTES.iter().zip(&pods) {
            config.push_str(&format!(
                "\n[[route]]\nname = \"{route}\"\npath = \"/{route}\"\nbackend = \"http://{}\"\n",
                pod.addr
            ));
        }
        let config = TempFile::new("toml", &config);
        let admin = free_listen_address();
        let mut args = vec!["--config", config.path(), "--admin-listen", &admin];
        if let Given::Flag(mode) = given {
            args.extend(["--readiness", mode]);
        }
        let process = start_with(&args, &[], Stdio::null()).await;
        Gateway {
            main: process.origin().to_owned(),
            _process: process,
            _config: config,
            admin: format!("http://{admin}"),
            pods,
        }
    }

    fn url(&self, route: &str) -> String {
        format!("{}/{route}/a2a/jsonrpc", self.main)
    }

    /// The admin listener's `/readyz?verbose` once it says `route`'s readiness is `ready`
    /// (within 2 s): status and JSON.
    async fn await_route(&self, route: &str, ready: bool) -> (u16, Value) {
        let started = Instant::now();
        loop {
            let (status, body) = get(&self.admin, "/readyz?verbose").await;
            let report: Value = serde_json::from_str(&body).unwrap();
            let listed = report["routes"].as_array().unwrap();
            if listed
                .iter()
                .any(|r| r["route"] == route && r["ready"] == ready)
            {
                return (status, report);
            }
            assert!(started.elapsed() < Duration::from_secs(2), "{report}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// `GET base + path`: status and body.
async fn get(base: &str, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("{base}{path}")).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Calls to a route whose agent is down: unary and streaming, each answered with the
/// JSON-RPC error `BACKEND_UNAVAILABLE` within the connect timeout.
async fn assert_answers_unavailable(url: &str) {
    for method in ["SendMessage", "SendStreamingMessage", "SendMessage"] {
        let started = Instant::now();
        let reply = harness::rpc(url, &request(json!(7), method, message_params("hi"))).await;
        let took = started.elapsed();
        assert_eq!(reply["error"]["code"], -32603, "{method}: {reply}");
        assert_eq!(
            reply["error"]["data"][0]["reason"], "BACKEND_UNAVAILABLE",
            "{method}: {reply}"
        );
        assert!(took < CONNECT_TIMEOUT, "{method} answered after {took:?}");
    }
}

/// Calls `url` four at a time until `stop`: counts the calls and the failed ones.
fn load(url: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let calls = Arc::new(AtomicUsize::new(0));
        let body = request(json!(1), "SendMessage", message_params("hi"));
        let callers = (0..4).map(|_| {
            let (url, body, stop, calls) = (url.clone(), body.clone(), stop.clone(), calls.clone());
            async move {
                let mut failed = Vec::new();
                while !stop.load(Relaxed) {
                    let (status, _, text) = harness::post(&url, body.clone()).await;
                    calls.fetch_add(1, Relaxed);
                    let reply: Value = serde_json::from_str(&text).unwrap_or_default();
                    if status != 200 || reply["result"]["task"]["id"] != "t-1" {
                        failed.push(format!("{status} {text}"));
                    }
                }
                failed
            }
        });
        let failed = futures::future::join_all(callers).await.concat();
        (calls.load(Relaxed), failed)
    })
}

/// One agent killed under load, then the others: the live routes serve throughout, the
/// dead ones answer at once, and `/readyz`, the admin listener and the gauge say what
/// `expected` and the module's table say.
async fn three_routes_one_agent_killed(given: Given, expected: Expected) {
    let mut gateway = Gateway::start(given).await;
    assert_eq!(get(&gateway.main, "/readyz").await, (200, "ready\n".into()));
    assert_eq!(
        get(&gateway.admin, "/readyz").await,
        (200, "ready\n".into())
    );

    let stop = Arc::new(AtomicBool::new(false));
    let loads: Vec<_> = ROUTES[..2]
        .iter()
        .map(|route| load(gateway.url(route), stop.clone()))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    gateway.pods[2].kill();
    // Down, not dying: a call racing the kill may have been sent on the connection the
    // kill cuts (`BACKEND_CONNECTION_RESET`, agent_faults' `killed_mid_unary`).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_answers_unavailable(&gateway.url("gamma")).await;

    let (status, report) = gateway.await_route("gamma", false).await;
    assert_eq!(status, expected.one_down, "{report}");
    for (i, route) in ROUTES.iter().enumerate() {
        let listed = &report["routes"][i];
        assert_eq!(listed["route"], *route, "{report}");
        assert_eq!(listed["ready"], i < 2, "{report}");
    }
    // The pods offer no health service: a connect decides, and once it has failed the
    // next check asks for the health service again (`readiness`), with another reason.
    let refused = [
        format!("cannot connect to {}: ", gateway.pods[2].addr),
        "backend unreachable: ".to_owned(),
    ];
    let why = report["routes"][2]["why"].as_str().unwrap();
    assert!(refused.iter().any(|r| why.starts_with(r)), "{report}");
    let (status, body) = get(&gateway.admin, "/readyz").await;
    assert_eq!(status, expected.one_down);
    let lines = match status {
        200 => body.strip_prefix("ready\n").unwrap_or_default(),
        _ => &body,
    };
    let why = lines
        .strip_prefix("route \"gamma\" is not ready: ")
        .unwrap_or_default();
    assert!(
        refused.iter().any(|r| why.starts_with(r)) && why.lines().count() == 1,
        "{body}"
    );
    let public = match expected.one_down {
        200 => "ready\n",
        _ => "not ready\n",
    };
    assert_eq!(
        get(&gateway.main, "/readyz").await,
        (expected.one_down, public.to_owned())
    );
    let (_, metrics) = get(&gateway.admin, "/metrics").await;
    for (route, ready) in [("alpha", 1), ("beta", 1), ("gamma", 0)] {
        let line = format!("a2a_gateway_route_ready{{route=\"{route}\"}} {ready}\n");
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
    // The dead route still answers at once after the checks have seen it down.
    assert_answers_unavailable(&gateway.url("gamma")).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    stop.store(true, Relaxed);
    for (route, load) in ROUTES.iter().zip(loads) {
        let (calls, failed) = load.await.unwrap();
        assert!(
            failed.is_empty(),
            "{route}: {} failed: {failed:?}",
            failed.len()
        );
        assert!(calls >= 20, "{route}: only {calls} calls");
    }

    for pod in &mut gateway.pods {
        pod.kill();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for route in ROUTES {
        assert_answers_unavailable(&gateway.url(route)).await;
    }
    let (status, report) = gateway.await_route("beta", false).await;
    assert!(
        (report["routes"].as_array().unwrap().iter()).all(|r| r["ready"] == false),
        "{report}"
    );
    assert_eq!(status, expected.all_down, "{report}");
    let public = match expected.all_down {
        200 => "ready\n",
        _ => "not ready\n",
    };
    assert_eq!(
        get(&gateway.main, "/readyz").await,
        (expected.all_down, public.to_owned())
    );
}

/// The default, `process`: the pod stays ready whatever the agents do.
#[tokio::test]
async fn by_default_the_pod_stays_ready_while_agents_die() {
    let expected = Expected {
        one_down: 200,
        all_down: 200,
    };
    three_routes_one_agent_killed(Given::Default, expected).await;
}

/// `any-route` (the file's key): ready while one route is.
#[tokio::test]
async fn any_route_is_ready_while_one_route_is() {
    let expected = Expected {
        one_down: 200,
        all_down: 503,
    };
    three_routes_one_agent_killed(Given::File("any-route"), expected).await;
}

/// `all-routes` (the flag): not ready once one route is not.
#[tokio::test]
async fn all_routes_is_not_ready_once_one_route_is_not() {
    let expected = Expected {
        one_down: 503,
        all_down: 503,
    };
    three_routes_one_agent_killed(Given::Flag("all-routes"), expected).await;
}

/// In `process` mode the main listener's `/readyz` asks no agent: it answers at once even
/// when an agent would hold its check for the whole readiness timeout.
#[tokio::test]
async fn in_process_mode_readyz_asks_no_agent() {
    let url = harness::silent_agent().await;
    let args = ["--backend", &url, "--readiness-timeout", "2s"];
    let gateway = start_with(&args, &[], Stdio::null()).await;
    let started = Instant::now();
    assert_eq!(
        get(gateway.origin(), "/readyz").await,
        (200, "ready\n".to_owned())
    );
    let took = started.elapsed();
    assert!(took < Duration::from_millis(500), "answered after {took:?}");
}

/// A bad mode is refused at start, naming the flag or the file's key and the modes there
/// are; `/readyz?verbose` is JSON on the admin listener only.
#[tokio::test]
async fn a_bad_mode_is_refused_and_verbose_is_for_the_admin_listener() {
    let listen = free_listen_address();
    let out = std::process::Command::new(BIN)
        .args(["--demo", "--listen", &listen, "--readiness", "some-routes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value 'some-routes' for '--readiness <READINESS>'")
            && stderr.contains("[possible values: process, any-route, all-routes]"),
        "{stderr}"
    );
    let file = TempFile::new("toml", "backend = \"http://a:1\"\nreadiness = \"all\"\n");
    let out = std::process::Command::new(BIN)
        .args(["--listen", &listen, "--config", file.path()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("readiness") && stderr.contains("line 2") && stderr.contains("any-route"),
        "{stderr}"
    );

    let admin = free_listen_address();
    let env = [("A2A_GATEWAY_READINESS", "any-route")];
    let gateway = start_with(&["--demo", "--admin-listen", &admin], &env, Stdio::null()).await;
    let (status, body) = get(&format!("http://{admin}"), "/readyz?verbose").await;
    assert_eq!(status, 200);
    let report: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        report,
        json!({"status": "ready", "mode": "any-route",
               "routes": [{"route": "default", "ready": true}]})
    );
    assert_eq!(
        get(gateway.origin(), "/readyz?verbose").await,
        (200, "ready\n".to_owned()),
        "the public listener names no route"
    );
}

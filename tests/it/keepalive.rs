//! Backend keepalive against a real gRPC server's ping policy: the reference SDK's agent
//! (`tests/peers/agent.py`) served by grpcio, i.e. grpc C-core, which answers pings more
//! frequent than `grpc.http2.min_ping_interval_without_data_ms` (default 5 minutes) with
//! a strike and, after `grpc.http2.max_ping_strikes` (default 2), with GOAWAY
//! `ENHANCE_YOUR_CALM` "too_many_pings". The gateway binary runs as users run it, so its
//! log can be read.
//!
//! The server's window is scaled from C-core's 5 minutes down to 2 s (strikes stay 2) so
//! the suite stays fast; the gateway's `--backend-keepalive` is scaled alike: 2.5 s is
//! above the window as the 5-minute default is against the 5-minute server default.

use crate::harness;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use harness::peer::Peer;
use harness::process::{start_with, Running};
use harness::*;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

/// C-core's ping policy scaled down: 2 s instead of 5 minutes, two strikes (its default).
const SERVER_POLICY: &[(&str, &str)] = &[
    ("A2A_TEST_MIN_PING_MS", "2000"),
    ("A2A_TEST_MAX_PING_STRIKES", "2"),
];

/// What the gateway logs (once) when it backs off.
const DOUBLED: &str = "keepalive interval doubled";

/// The gateway binary with its log (stderr, JSON lines) in a file; killed when dropped.
struct Gateway {
    process: Running,
    log: PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Gateway {
    /// Starts the binary in front of `backend` with `flags`; returns once it serves.
    async fn start(name: &str, backend: &str, flags: &[&str]) -> Gateway {
        Gateway::start_workers(name, backend, flags, 1).await
    }

    /// `start` with `workers` serving threads (each has its own backend connection).
    async fn start_workers(name: &str, backend: &str, flags: &[&str], workers: u8) -> Gateway {
        let log =
            std::env::temp_dir().join(format!("a2a-keepalive-{}-{name}.log", std::process::id()));
        let workers = workers.to_string();
        let mut args = vec!["--backend", backend, "--workers", &workers];
        args.extend(["--keepalive", "1s", "--log-format", "json"]);
        args.extend_from_slice(flags);
        let stderr = std::fs::File::create(&log).unwrap().into();
        let process = start_with(&args, &[("RUST_LOG", "info")], stderr).await;
        Gateway { process, log }
    }

    fn log_lines(&self, containing: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .filter(|l| l.contains(containing))
            .map(str::to_owned)
            .collect()
    }

    /// A task of the agent that waits for input: open, but nothing happens on it.
    async fn waiting_task(&self) -> String {
        let params = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
                                        "role": "ROLE_USER", "parts": [{"text": "input"}]}});
        let reply = rpc(&self.process.1, &request(json!(1), "SendMessage", params)).await;
        let task = &reply["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{reply}"
        );
        task["id"].as_str().unwrap().to_owned()
    }

    /// Subscribes to `task`; checks the first event (the task) and returns the frames
    /// that follow, as they arrive (the channel closes at the end of the stream).
    async fn subscribe(&self, task: &str) -> UnboundedReceiver<String> {
        let body = request(json!(2), "SubscribeToTask", json!({"id": task}));
        let (headers, mut sse) = SseReader::open(&self.process.1, body).await;
        assert_eq!(headers["content-type"], "text/event-stream");
        let first = sse.data().await.expect("the subscription's first event");
        assert_eq!(first["result"]["task"]["id"], task, "{first}");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(frame) = sse.frame().await {
                if tx.send(frame).is_err() {
                    return;
                }
            }
        });
        rx
    }

    /// Cancels `task`; its subscription must deliver the canceled status, then end.
    async fn cancel_and_see_it(&self, task: &str, frames: &mut UnboundedReceiver<String>) {
        let reply = rpc(
            &self.process.1,
            &request(json!(3), "CancelTask", json!({"id": task})),
        )
        .await;
        assert_eq!(
            reply["result"]["status"]["state"], "TASK_STATE_CANCELED",
            "{reply}"
        );
        let event = loop {
            let frame = next(frames)
                .await
                .expect("the stream ended before the cancel");
            if !frame.starts_with(':') {
                break data(&frame);
            }
        };
        assert_eq!(event["id"], 2, "{event}");
        let update = &event["result"]["statusUpdate"];
        assert_eq!(update["taskId"], task, "{event}");
        assert_eq!(update["status"]["state"], "TASK_STATE_CANCELED", "{event}");
        while let Some(frame) = next(frames).await {
            assert!(frame.starts_with(':'), "after the final event: {frame}");
        }
    }
}

/// The next frame (`None`: the stream ended); 5 s at most.
async fn next(frames: &mut UnboundedReceiver<String>) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(5), frames.recv())
        .await
        .expect("no frame, no keepalive comment and no end within 5 s")
}

fn data(frame: &str) -> Value {
    let line = frame
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no data line in {frame:?}"));
    serde_json::from_str(line).unwrap()
}

/// How a quiet stream's wait ended.
enum Quiet {
    /// Only keepalive comments for the whole time (this many).
    Stayed(usize),
    /// Another frame (or the end, `None`) after this long.
    Broken(Duration, Option<String>),
}

/// Reads `frames` for `time`, expecting only SSE keepalive comments.
async fn stay_quiet(frames: &mut UnboundedReceiver<String>, time: Duration) -> Quiet {
    let started = Instant::now();
    let mut comments = 0;
    loop {
        match tokio::time::timeout_at((started + time).into(), frames.recv()).await {
            Err(_) => return Quiet::Stayed(comments),
            Ok(Some(frame)) if frame.starts_with(':') => comments += 1,
            Ok(other) => return Quiet::Broken(started.elapsed(), other),
        }
    }
}

#[tokio::test]
async fn a_quiet_stream_survives_the_servers_ping_policy() {
    let peer = Peer::start_with_env(SERVER_POLICY);
    let gateway = Gateway::start("quiet", &peer.grpc, &["--backend-keepalive", "2500ms"]).await;
    let task = gateway.waiting_task().await;
    let mut frames = gateway.subscribe(&task).await;
    // Six server windows without a byte of data from the agent: the gateway pings about
    // every 2.5 s, which the server's 2 s policy allows.
    match stay_quiet(&mut frames, Duration::from_secs(12)).await {
        Quiet::Stayed(comments) => assert!(comments >= 10, "{comments} keepalive comments"),
        Quiet::Broken(after, frame) => panic!("the quiet stream broke after {after:?}: {frame:?}"),
    }
    gateway.cancel_and_see_it(&task, &mut frames).await;
    assert_eq!(gateway.log_lines("too_many_pings"), Vec::<String>::new());
}

#[tokio::test]
async fn too_many_pings_doubles_the_interval_until_the_server_accepts_it() {
    let peer = Peer::start_with_env(SERVER_POLICY);
    // 300 ms: the server's third strike comes after about 1.2 s of quiet.
    // One worker: one backend connection, whose keepalive the test follows.
    let gateway = Gateway::start("backoff", &peer.grpc, &["--backend-keepalive", "300ms"]).await;
    let task = gateway.waiting_task().await;
    // Each stream lasts until the server sends GOAWAY too_many_pings, at most 8 s (four
    // server windows): 300 ms → 600 ms → 1.2 s are punished, 2.4 s is not.
    let mut cut_after = Vec::new();
    let mut frames = loop {
        assert!(
            cut_after.len() < 6,
            "the interval never became acceptable: streams cut after {cut_after:?}"
        );
        let mut frames = gateway.subscribe(&task).await;
        match stay_quiet(&mut frames, Duration::from_secs(8)).await {
            Quiet::Stayed(_) => break frames,
            Quiet::Broken(after, Some(frame)) => {
                // C-core ends the calls of the connection it closes with UNAVAILABLE
                // "Too many pings" (no details: the status table's fallback, -32603).
                let (event, _) = frame.split_once('\n').unwrap();
                assert_eq!(event, "event: error", "{frame}");
                assert_eq!(
                    data(&frame),
                    json!({"jsonrpc": "2.0", "id": 2,
                           "error": {"code": -32603, "message": "Too many pings"}}),
                    "after {after:?}"
                );
                assert!(
                    next(&mut frames).await.is_none(),
                    "nothing after the error frame"
                );
                cut_after.push(after);
            }
            Quiet::Broken(after, None) => {
                panic!("the stream ended without a frame after {after:?}")
            }
        }
    };
    // Several GOAWAYs, each stream lasting longer than the one before (the doubling), ...
    assert!(cut_after.len() >= 2, "streams cut after {cut_after:?}");
    assert!(
        cut_after.windows(2).all(|w| w[1] > w[0]),
        "streams cut after {cut_after:?}: the interval did not grow"
    );
    // ... yet one warning, naming the first doubled interval.
    let warnings = gateway.log_lines(DOUBLED);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("WARN"), "{}", warnings[0]);
    assert!(warnings[0].contains("600ms"), "{}", warnings[0]);
    // The stream that survived is still open and working.
    gateway.cancel_and_see_it(&task, &mut frames).await;
}

#[tokio::test]
async fn the_doubling_is_logged_once_per_backend_whatever_the_workers() {
    let peer = Peer::start_with_env(SERVER_POLICY);
    let gateway =
        Gateway::start_workers("workers", &peer.grpc, &["--backend-keepalive", "300ms"], 2).await;
    let task = gateway.waiting_task().await;
    // Two streams on two client connections: one on each worker's backend connection.
    let (mut one, mut two) = tokio::join!(gateway.subscribe(&task), gateway.subscribe(&task));
    let quiet = Duration::from_secs(5);
    let (one, two) = tokio::join!(stay_quiet(&mut one, quiet), stay_quiet(&mut two, quiet));
    assert!(
        matches!(one, Quiet::Broken(_, Some(_))),
        "the first stream was not cut"
    );
    assert!(
        matches!(two, Quiet::Broken(_, Some(_))),
        "the second stream was not cut"
    );
    let warnings = gateway.log_lines(DOUBLED);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
}

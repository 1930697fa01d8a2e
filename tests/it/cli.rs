//! The `a2a-gateway` binary as users run it: flags, startup errors, a backend that is down
//! at start, graceful shutdown, and `--demo` answering every operation over real sockets.

use crate::harness;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use harness::process::*;
use harness::*;
use serde_json::{json, Value};

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output_within(EXITS_WITHIN)
}

#[test]
fn help_explains_every_flag() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--listen",
        "--backend",
        "--binding",
        "--jsonrpc-path",
        "--demo",
        "--timeout",
        "--stream-timeout",
        "--keepalive",
        "--connect-timeout",
        "--backend-keepalive",
        "--backend-ca",
        "--max-body",
        "--forward-header",
        "--shutdown-grace",
        "--drain-delay",
        "--card",
        "--public-url",
        "--tenant",
        "--log-format",
        "--workers",
        "--config",
    ] {
        assert!(help.contains(flag), "--help does not explain {flag}");
    }
}

#[test]
fn version_names_the_release_and_the_commit() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    let version = env!("CARGO_PKG_VERSION");
    let commit = env!("A2A_GATEWAY_COMMIT");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("a2a-gateway {version} (commit {commit})")
    );
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The checkout's own commit, unless the build was told another.
    if std::env::var_os("A2A_GATEWAY_COMMIT").is_none() {
        let head = Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(repo)
            .output()
            .unwrap();
        if head.status.success() {
            assert_eq!(String::from_utf8_lossy(&head.stdout).trim(), commit);
        }
    }
    // Image tags follow the version: the release itself, or what follows it.
    let tag = Command::new(repo.join("scripts/image-tag"))
        .output()
        .unwrap();
    assert!(tag.status.success(), "{tag:?}");
    let tag = String::from_utf8_lossy(&tag.stdout).trim().to_owned();
    assert!(
        tag == version || tag.starts_with(&format!("{version}-g{commit}")),
        "{tag}"
    );
}

#[test]
fn bad_flags_give_one_line_and_exit_code_2() {
    for args in [
        vec!["--bogus"],
        vec![],
        vec!["--backend", "ftp://x"],
        vec!["--backend", "http://x:1", "--binding", "SOAP"],
        vec!["--backend", "http://x:1", "--timeout", "soon"],
        // Past the longest duration (366 days): refused at load, not an overflow per call.
        vec![
            "--backend",
            "http://x:1",
            "--timeout",
            "18446744073709551615s",
        ],
        vec!["--backend", "http://x:1", "--client-idle-timeout", "367d"],
        // Below the shortest (1ms): a typo that would fail every call at once.
        vec!["--backend", "http://x:1", "--timeout", "1ns"],
        vec!["--backend", "http://x:1", "--stream-timeout", "999us"],
        // Below the lowest rate (1e-6 calls per second): refused, not a panic at start.
        vec!["--backend", "http://x:1", "--client-rate-limit", "1e-20"],
        vec!["--backend", "http://x:1", "--rate-limit", "0.0000009"],
        vec!["--backend", "http://x:1", "--backend-keepalive", "0"],
        vec!["--backend", "http://x:1", "--jsonrpc-path", "rpc"],
        // The gateway calls agents over gRPC or HTTP+JSON; JSON-RPC is a front only.
        vec!["--backend", "http://x:1", "--binding", "JSONRPC"],
        vec![
            "--backend",
            "http://x:1",
            "--fronts",
            "JSONRPC,HTTP+JSON,REST",
        ],
        vec!["--backend", "http://x:1", "--fronts", "SOAP"],
        vec!["--backend", "http://x:1", "--fronts", ""],
        vec!["--backend", "http://x:1", "--rest-path", "rest"],
        vec!["--backend", "http://x:1", "--rest-path", "/rest/"],
        vec!["--backend", "http://x:1", "--rest-path", "/a2a/jsonrpc"],
        vec!["--backend", "http://x:1", "--forward-header", "Connection"],
        vec!["--backend", "http://x:1", "--max-body", "0"],
        vec!["--backend", "http://x:1", "--max-batch-reply", "0"],
        vec!["--backend", "http://x:1", "--backend-max-message", "0"],
        vec!["--backend", "http://x:1", "--listen", "nowhere"],
        vec![
            "--backend",
            "https://x:1",
            "--listen",
            "127.0.0.1:0",
            "--backend-ca",
            "/no/such/ca.pem",
        ],
        vec![
            "--backend",
            "https://x:1",
            "--listen",
            "127.0.0.1:0",
            "--backend-ca",
            "Cargo.toml",
        ],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("a2a-gateway: error: "),
            "{args:?}: {stderr}"
        );
    }
}

/// `check-config` passes on every example in `deploy/` (the credential one names comes
/// from the environment, as in a deployment).
#[test]
fn every_example_config_loads() {
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut seen = 0;
    for entry in std::fs::read_dir(deploy).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = Command::new(BIN)
                .args(["check-config", path.to_str().unwrap()])
                .env("SEARCH_CARD_TOKEN", "Bearer example")
                .output_within(EXITS_WITHIN);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{}: {stderr}", path.display());
            seen += 1;
        }
    }
    assert!(seen > 0, "no example config found in deploy/");
}

#[test]
fn a_bad_config_file_is_one_line_naming_the_key() {
    let path = std::env::temp_dir().join(format!("a2a-bad-config-{}.toml", std::process::id()));
    std::fs::write(&path, "backend = \"http://a:1\"\ntimeot = \"5s\"\n").unwrap();
    let out = run(&["--config", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("key `timeot`"), "{stderr}");
}

#[test]
fn an_address_in_use_is_one_line_and_exit_code_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(&["--backend", "http://127.0.0.1:1", "--listen", &addr]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[tokio::test]
async fn a_backend_down_at_start_is_not_fatal() {
    let backend = format!("http://{}", free_listen_address());
    let gateway = start(&["--backend", &backend]).await;
    let reply = rpc(
        &gateway.1,
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}"#,
    )
    .await;
    assert_eq!(reply["error"]["code"], -32603);
    assert_eq!(reply["error"]["data"][0]["reason"], "BACKEND_UNAVAILABLE");
}

#[tokio::test]
async fn sigterm_shuts_down_cleanly() {
    let mut gateway = start(&["--demo", "--drain-delay", "0"]).await;
    gateway.terminate();
    let status = gateway
        .exit_within(Duration::from_secs(5), "no exit after SIGTERM")
        .await;
    assert!(status.success(), "{status:?}");
}

/// A rollout's SIGTERM: `/readyz` turns 503 at once while everything is still served for
/// the drain delay (new connections too); then a stream still open after the grace period
/// gets a final error frame telling the client the gateway is shutting down, and the
/// process exits 0.
#[tokio::test]
async fn sigterm_drains_then_ends_open_streams_with_a_final_frame() {
    let mut gateway = start(&["--demo", "--drain-delay", "1s", "--shutdown-grace", "1s"]).await;
    let url = gateway.1.clone();
    let origin = url.trim_end_matches("/a2a/jsonrpc").to_owned();
    let ready = |origin: String| async move {
        client()
            .get(format!("{origin}/readyz"))
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(ready(origin.clone()).await, 200);
    let (_, mut sse) = SseReader::open(
        &url,
        request(json!(1), "SendStreamingMessage", message_params("slow")),
    )
    .await;
    assert!(sse.data().await.is_some(), "first frame");
    let signalled = Instant::now();
    gateway.terminate();
    // Draining: not ready, still serving, new connections included.
    let started = Instant::now();
    while ready(origin.clone()).await != 503 {
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "/readyz still 200"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let reply = rpc(
        &url,
        &request(json!(2), "SendMessage", message_params("hello")),
    )
    .await;
    assert!(reply["result"].is_object(), "{reply}");
    // The open stream goes on, then ends with the final frame.
    let last = loop {
        let frame = sse
            .data()
            .await
            .expect("the stream ended without a final frame");
        if frame.get("error").is_some() {
            break frame;
        }
    };
    assert_eq!(last["id"], 1, "{last}");
    assert_eq!(last["error"]["code"], -32603, "{last}");
    assert_eq!(
        last["error"]["data"][0]["reason"], "GATEWAY_SHUTTING_DOWN",
        "{last}"
    );
    let ended = signalled.elapsed();
    assert!(
        ended >= Duration::from_millis(1900),
        "ended after {ended:?}, before drain + grace"
    );
    assert!(sse.data().await.is_none(), "nothing after the final frame");
    let status = gateway
        .exit_within(Duration::from_secs(3), "no exit after the final frame")
        .await;
    assert!(status.success(), "{status:?}");
}

/// Someone at a terminal is not kept waiting: a Ctrl-C during the drain delay after SIGTERM
/// cuts it short, and one during the grace period (a 30 s stream in flight, 60 s of grace)
/// ends the process at once, with the exit code of an interrupt (130).
#[tokio::test]
async fn ctrl_c_cuts_the_drain_delay_and_the_grace_period() {
    // The drain shows once the gateway listens for the Ctrl-C that may follow: /readyz
    // answers 503 in the drain delay; after it, new connections are refused.
    let draining = |origin: String| async move {
        let started = Instant::now();
        loop {
            let ready = client().get(format!("{origin}/readyz")).send().await;
            if ready.map_or(true, |r| r.status() == 503) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "no drain");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let mut gateway = start(&["--demo", "--drain-delay", "60s"]).await;
    gateway.terminate();
    draining(gateway.origin().to_owned()).await;
    gateway.interrupt();
    let status = gateway
        .exit_within(
            Duration::from_secs(5),
            "Ctrl-C did not cut the 60 s drain delay",
        )
        .await;
    assert!(status.success(), "{status:?}");

    let mut gateway = start(&["--demo", "--drain-delay", "0", "--shutdown-grace", "60s"]).await;
    let (_, mut sse) = SseReader::open(
        &gateway.1,
        request(json!(1), "SendStreamingMessage", message_params("slow")),
    )
    .await;
    assert!(sse.data().await.is_some(), "first frame");
    gateway.interrupt();
    draining(gateway.origin().to_owned()).await;
    // The stream goes on (its next frame comes), the process with it.
    assert!(
        sse.data().await.is_some(),
        "the stream goes on in the grace period"
    );
    assert!(gateway.running(), "the grace period holds the process");
    gateway.interrupt();
    let status = gateway
        .exit_within(
            Duration::from_secs(5),
            "a second Ctrl-C did not end the grace period",
        )
        .await;
    assert_eq!(status.code(), Some(130), "{status:?}");
}

#[tokio::test]
async fn sigterm_lets_an_open_stream_finish_and_refuses_new_connections() {
    let mut gateway = start(&["--demo", "--workers", "2", "--drain-delay", "0"]).await;
    let url = gateway.1.clone();
    let (_, mut sse) = SseReader::open(
        &url,
        request(json!(1), "SendStreamingMessage", message_params("stream")),
    )
    .await;
    assert!(sse.data().await.is_some(), "first frame");
    gateway.terminate();
    // The demo stream's remaining frames arrive over the next ~200 ms, within the grace.
    let mut frames = 1;
    while let Some(frame) = sse.data().await {
        assert_eq!(frame["id"], 1, "{frame}");
        frames += 1;
    }
    assert_eq!(frames, 6, "every frame of the stream after SIGTERM");
    let status = gateway
        .exit_within(Duration::from_secs(5), "no exit after the stream ended")
        .await;
    assert!(status.success(), "{status:?}");
    assert!(client()
        .get(url.replace("/a2a/jsonrpc", "/healthz"))
        .send()
        .await
        .is_err());
}

#[tokio::test]
async fn workers_share_one_set_of_metrics() {
    let gateway = start(&["--demo", "--workers", "3"]).await;
    let send = request(json!(1), "SendMessage", message_params("hello"));
    // Each call on its own connection: the acceptor deals them out over the three workers.
    for _ in 0..6 {
        let reply = rpc(&gateway.1, &send).await;
        assert_eq!(result(&reply)["message"]["parts"][0]["text"], "echo: hello");
    }
    let metrics = client()
        .get(gateway.1.replace("/a2a/jsonrpc", "/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "a2a_gateway_requests_total{route=\"default\",method=\"SendMessage\",code=\"0\"} 6\n"
        ),
        "{metrics}"
    );
}

#[test]
fn workers_come_from_the_flag_the_environment_or_the_config_file() {
    let load = |args: &[&str]| {
        a2a_gateway::settings::Settings::load(
            std::iter::once("a2a-gateway").chain(args.iter().copied()),
        )
        .unwrap()
        .process
    };
    assert_eq!(load(&["--demo", "--workers", "3"]).workers, 3);
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(load(&["--demo"]).workers, cpus);
    let path = std::env::temp_dir().join(format!("a2a-workers-{}.toml", std::process::id()));
    std::fs::write(&path, "workers = 5\n").unwrap();
    let process = load(&["--demo", "--config", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(process.workers, 5);
    let out = run(&["--demo", "--workers", "many"]);
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(BIN)
        .arg("--demo")
        .env("A2A_GATEWAY_WORKERS", "many")
        .output_within(EXITS_WITHIN);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("--workers"));
}

/// Durations and sizes as people write them (`1m30s`, `500ms`, `2h`, `16Mi`, `1.5MiB`) read
/// the same from flags, the file's keys and its `[[route]]` and `[route.card]` tables; a bad
/// one is one line naming the flag or the key.
#[test]
fn durations_and_sizes_read_as_people_write_them() {
    let file = TempFile::new(
        "toml",
        "timeout = \"1m30s\"\nmax-body = \"16Mi\"\nreadiness-cache = \"500ms\"\n\n\
         [[route]]\nname = \"r\"\npath = \"/r\"\nbackend = \"http://a:1\"\n\
         connect-timeout = \"2h\"\n[route.card]\nrefresh = \"1h 30m\"\n",
    );
    let argv = ["a2a-gateway", "--config", file.path()];
    let flags = ["--drain-delay", "1m30s", "--backend-max-message", "1.5MiB"];
    let settings = a2a_gateway::settings::Settings::load(argv.into_iter().chain(flags)).unwrap();
    let (process, route) = (&settings.process, &settings.routes[0]);
    assert_eq!(route.unary_timeout, Some(Duration::from_secs(90)));
    assert_eq!(route.max_body, 16 << 20);
    assert_eq!(route.client.connect_timeout, Duration::from_secs(7200));
    assert_eq!(route.client.max_message, 3 << 19);
    assert_eq!(route.card.refresh, Some(Duration::from_secs(5400)));
    assert_eq!(process.readiness_cache, Duration::from_millis(500));
    assert_eq!(process.drain_delay, Duration::from_secs(90));

    let out = run(&["--demo", "--timeout", "1m30x"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--timeout") && stderr.contains("\"1m30x\""),
        "{stderr}"
    );
    let file = TempFile::new(
        "toml",
        "backend = \"http://a:1\"\nmax-body = \"16 parsecs\"\n",
    );
    let out = run(&["--config", file.path()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("max-body"), "{stderr}");
}

fn result(reply: &Value) -> &Value {
    reply
        .get("result")
        .unwrap_or_else(|| panic!("not a result: {reply}"))
}

#[tokio::test]
async fn demo_answers_every_operation() {
    let gateway = start(&["--demo", "--push-allow", "hooks.example"]).await;
    let url = gateway.1.as_str();
    let send = |text: &str| request(json!(1), "SendMessage", message_params(text));

    let reply = rpc(url, &send("hello")).await;
    assert_eq!(result(&reply)["message"]["parts"][0]["text"], "echo: hello");

    let reply = rpc(url, &send("task")).await;
    let done = &result(&reply)["task"];
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "done: task");
    let done_id = done["id"].as_str().unwrap().to_owned();

    let (_, mut sse) = SseReader::open(
        url,
        request(json!(2), "SendStreamingMessage", message_params("stream")),
    )
    .await;
    let mut kinds = Vec::new();
    while let Some(frame) = sse.data().await {
        assert_eq!(frame["id"], 2);
        kinds.push(
            result(&frame)
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .clone(),
        );
    }
    assert_eq!(
        kinds,
        [
            "task",
            "statusUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "statusUpdate"
        ]
    );

    let reply = rpc(url, &send("input")).await;
    let waiting = &result(&reply)["task"];
    assert_eq!(waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let follow_up = json!({"message": {"messageId": "m-2", "role": "ROLE_USER", "taskId": waiting["id"], "parts": [{"text": "more"}]}});
    let reply = rpc(url, &request(json!(3), "SendMessage", follow_up)).await;
    assert_eq!(
        result(&reply)["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    let reply = rpc(url, &send("slow")).await;
    let slow_id = result(&reply)["task"]["id"].as_str().unwrap().to_owned();
    let (_, mut watch) = SseReader::open(
        url,
        request(json!(4), "SubscribeToTask", json!({"id": slow_id})),
    )
    .await;
    assert_eq!(
        result(&watch.data().await.unwrap())["task"]["id"],
        slow_id.as_str()
    );
    let reply = rpc(
        url,
        &request(json!(5), "CancelTask", json!({"id": slow_id})),
    )
    .await;
    assert_eq!(result(&reply)["status"]["state"], "TASK_STATE_CANCELED");
    let mut last = Value::Null;
    while let Some(frame) = watch.data().await {
        last = frame;
    }
    assert_eq!(
        result(&last)["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    let reply = rpc(
        url,
        &request(json!(6), "CancelTask", json!({"id": slow_id})),
    )
    .await;
    assert_eq!(reply["error"]["code"], -32002, "{reply}");

    let reply = rpc(
        url,
        &request(
            json!(7),
            "GetTask",
            json!({"id": done_id, "historyLength": 1}),
        ),
    )
    .await;
    assert_eq!(result(&reply)["history"].as_array().unwrap().len(), 1);
    let reply = rpc(url, &request(json!(8), "GetTask", json!({"id": "missing"}))).await;
    assert_eq!(reply["error"]["code"], -32001);
    let reply = rpc(
        url,
        &request(
            json!(9),
            "ListTasks",
            json!({"status": "TASK_STATE_COMPLETED", "pageSize": 2}),
        ),
    )
    .await;
    assert_eq!(result(&reply)["pageSize"], 2);
    assert_eq!(result(&reply)["tasks"].as_array().unwrap().len(), 2);
    assert!(!result(&reply)["nextPageToken"].as_str().unwrap().is_empty());

    let config =
        json!({"taskId": done_id, "id": "c1", "url": "https://hooks.example/a2a", "token": "t"});
    let reply = rpc(
        url,
        &request(
            json!(10),
            "CreateTaskPushNotificationConfig",
            config.clone(),
        ),
    )
    .await;
    assert_eq!(result(&reply), &config);
    let ids = json!({"taskId": done_id, "id": "c1"});
    let reply = rpc(
        url,
        &request(json!(11), "GetTaskPushNotificationConfig", ids.clone()),
    )
    .await;
    assert_eq!(result(&reply), &config);
    let reply = rpc(
        url,
        &request(
            json!(12),
            "ListTaskPushNotificationConfigs",
            json!({"taskId": done_id}),
        ),
    )
    .await;
    assert_eq!(result(&reply)["configs"], json!([config]));
    let reply = rpc(
        url,
        &request(json!(13), "DeleteTaskPushNotificationConfig", ids),
    )
    .await;
    assert_eq!(result(&reply), &Value::Null);
    let reply = rpc(
        url,
        &request(
            json!(14),
            "ListTaskPushNotificationConfigs",
            json!({"taskId": done_id}),
        ),
    )
    .await;
    assert_eq!(result(&reply), &json!({}));

    let reply = rpc(
        url,
        r#"{"jsonrpc":"2.0","id":15,"method":"GetExtendedAgentCard"}"#,
    )
    .await;
    assert_eq!(result(&reply)["name"], "a2a-gateway demo agent");
}

#[tokio::test]
async fn credentials_never_reach_the_log_even_at_trace_level() {
    let log_path = std::env::temp_dir().join(format!("a2a-gateway-log-{}.txt", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    let mut gateway = start_with(
        &["--demo", "--workers", "1", "--drain-delay", "0"],
        &[("RUST_LOG", "trace")],
        Stdio::from(log),
    )
    .await;
    let url = gateway.1.clone();
    let secret = [
        ("authorization", "Bearer SECRET-TOKEN-123"),
        ("proxy-authorization", "Basic SECRET-TOKEN-123"),
        ("cookie", "session=SECRET-TOKEN-123"),
        ("x-request-id", "log-test-id-1"),
        ("a2a-version", "1.0"),
    ];
    let send = |text: &str| request(json!(1), "SendMessage", message_params(text));
    for body in [send("hello"), send("fail"), "{".to_owned()] {
        let (status, _, text) = post_with(&url, body, &secret).await;
        assert_eq!(status, 200, "{text}");
    }
    let stream = request(json!(2), "SendStreamingMessage", message_params("stream"));
    let (status, _, text) = post_with(&url, stream, &secret).await;
    assert_eq!(status, 200, "{text}");
    gateway.terminate();
    gateway
        .exit_within(Duration::from_secs(10), "gateway did not stop")
        .await;
    let log = std::fs::read_to_string(&log_path).unwrap();
    let _ = std::fs::remove_file(&log_path);
    // The log is really at trace level and has the request span with its id.
    assert!(
        log.contains("TRACE"),
        "no trace output: {}",
        &log[..log.len().min(2000)]
    );
    assert!(log.contains("log-test-id-1"), "no request span with the id");
    let leaks: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("SECRET-TOKEN-123"))
        .collect();
    assert!(
        leaks.is_empty(),
        "credentials in the log:\n{}",
        leaks.join("\n")
    );
}

/// Re-signing without a configured origin would sign whatever host a client names: the
/// start fails, naming both settings that would vouch for the origin.
#[test]
fn resigning_needs_a_public_url_or_allowed_hosts() {
    let key = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/card-signing/p256.sec1.pem"
    );
    let card = "https://cards.example/c.json";
    let out = run(&[
        "--backend",
        "http://127.0.0.1:9",
        "--listen",
        "127.0.0.1:0",
        "--card",
        card,
        "--card-sign-key",
        key,
        "--card-sign-kid",
        "k",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("public-url") && stderr.contains("allowed-hosts"),
        "{stderr}"
    );
    for bad in [
        ["--allowed-hosts", "https://gw.example"],
        ["--trusted-proxy-hops", "0"],
    ] {
        let out = run(&["--backend", "http://127.0.0.1:9", bad[0], bad[1]]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(bad[0]), "{bad:?}: {stderr}");
    }
}

/// A URL with a user name or password is refused at load, from a flag or the file, and
/// the error shows it without them.
#[test]
fn urls_with_credentials_are_refused_without_showing_them() {
    const SECRET: &str = "s3cret-pw";
    let file = TempFile::new(
        "toml",
        &format!(
            "[[route]]\nname = \"a\"\npath = \"/a\"\nbackend = \"https://agent:{SECRET}@agent.example:443\"\n"
        ),
    );
    let backend_in_list = format!("http://u:{SECRET}@b:2");
    let flags: Vec<Vec<String>> = vec![
        vec!["--backend".into(), format!("http://user:{SECRET}@agent:1")],
        vec!["--backend".into(), format!("https://{SECRET}@agent:1")],
        vec![
            "--backend".into(),
            format!("dns:///u:{SECRET}@agents.ns:50051"),
        ],
        vec![
            "--backend".into(),
            "http://a:1".into(),
            "--backend".into(),
            backend_in_list,
        ],
        vec![
            "--backend".into(),
            "http://a:1".into(),
            "--public-url".into(),
            format!("https://u:{SECRET}@gw.example"),
        ],
        vec![
            "--backend".into(),
            "http://a:1".into(),
            "--card".into(),
            format!("https://u:{SECRET}@cards.example/card.json"),
        ],
        vec!["--config".into(), file.path().into()],
    ];
    for args in flags {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--listen", "127.0.0.1:0"]);
        let out = run(&all);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains(SECRET), "{args:?}: {stderr}");
        assert!(stderr.contains("***@"), "{args:?}: {stderr}");
    }
}

/// A task id the demo agent does not know gets its -32001 with a bounded echo of the id: the
/// agent's whole-id `grpc-message` and error details used to overflow the HTTP/2 header
/// block (at 40 KB), which the gateway then reported as a bad backend answer.
#[tokio::test]
async fn the_demo_answers_an_unknown_huge_id_with_a_small_error() {
    let gateway = start(&["--demo"]).await;
    let id = "q".repeat(1024);
    let reply = rpc(&gateway.1, &request(json!(1), "GetTask", json!({"id": id}))).await;
    let error = &reply["error"];
    assert_eq!(error["code"], -32001, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(&"q".repeat(64)), "{message}");
    assert!(message.len() < 200, "{message}");
    assert!(reply.to_string().len() < 2000, "{reply}");
}

/// `check-config` whose reader stops early (`| head -1`) ends its listing there, not in a
/// panic: 3,000 routes list more than a pipe holds.
#[test]
fn check_config_ends_quietly_when_its_reader_stops() {
    use std::io::Read as _;
    let path = std::env::temp_dir().join(format!("a2a-many-{}.toml", std::process::id()));
    let routes: String = (0..3000)
        .map(|i| {
            format!(
                "[[route]]\nname = \"r{i}\"\npath = \"/r{i}\"\nbackend = \"http://127.0.0.1:1\"\n"
            )
        })
        .collect();
    std::fs::write(&path, routes).unwrap();
    let mut child = Command::new(BIN)
        .args(["check-config", path.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The reader is gone: the rest of the listing meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    std::fs::remove_file(&path).ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

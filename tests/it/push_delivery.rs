//! Push delivery as the gateway process shows it: the JWK Set of `--push-sign-key` at
//! `/.well-known/jwks.json` (the docs' Python receiver verifies a delivery's signature
//! with it, fetched from the gateway), the delivery counters at `/metrics`, and the
//! `--push-*` bounds at their limit and one past. What a webhook receives is tested with
//! real webhooks in `src/push/deliver/tests.rs`.

use std::process::{Command, Stdio};

use a2a_gateway::push::sign::PushSigner;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;

use crate::harness::peer;
use crate::harness::process::{start, TempFile, BIN};

fn p256() -> rcgen::KeyPair {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap()
}

#[tokio::test]
async fn the_signing_keys_jwk_set_is_served_with_its_thumbprint_as_kid() {
    let key = p256();
    let pem = TempFile::new("pem", &key.serialize_pem());
    let gateway = start(&["--demo", "--push-sign-key", pem.path()]).await;
    let url = format!("{}/.well-known/jwks.json", gateway.origin());
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/jwk-set+json"
    );
    let set: Value = response.json().await.unwrap();
    let keys = set["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    let jwk = &keys[0];
    // The public point, read by rcgen: 0x04, x, y.
    let point = key.public_key_raw();
    assert_eq!(jwk["kty"], "EC");
    assert_eq!(jwk["crv"], "P-256");
    assert_eq!(jwk["alg"], "ES256");
    assert_eq!(jwk["use"], "sig");
    assert_eq!(jwk["x"], URL_SAFE_NO_PAD.encode(&point[1..33]));
    assert_eq!(jwk["y"], URL_SAFE_NO_PAD.encode(&point[33..65]));
    // RFC 7638: the required members, sorted, no whitespace.
    let canonical = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        jwk["x"].as_str().unwrap(),
        jwk["y"].as_str().unwrap()
    );
    let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
    assert_eq!(jwk["kid"], URL_SAFE_NO_PAD.encode(digest.as_ref()));
    let post = reqwest::Client::new().post(&url).send().await.unwrap();
    assert_eq!(post.status(), 405);
}

#[tokio::test]
async fn without_a_signing_key_there_is_no_jwk_set() {
    let gateway = start(&["--demo"]).await;
    let url = format!("{}/.well-known/jwks.json", gateway.origin());
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 404);
}

/// The Python receiver of docs/push-delivery.md, as written there.
fn receiver_example() -> String {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/push-delivery.md"),
    )
    .unwrap();
    let start = page.find("```python\n").unwrap() + "```python\n".len();
    let end = start + page[start..].find("```").unwrap();
    page[start..end].to_owned()
}

#[tokio::test]
async fn the_documented_receiver_verifies_a_signature_with_the_served_set() {
    let key = p256();
    let pem = key.serialize_pem();
    let file = TempFile::new("pem", &pem);
    let gateway = start(&["--demo", "--push-sign-key", file.path()]).await;
    // What the gateway signs each delivery with: its key, its signer.
    let signer = PushSigner::from_pem(pem.as_bytes()).unwrap();
    let body = br#"{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}"#;
    let signature = signer.sign(body);
    let example = receiver_example().replace("https://gateway.example.com", gateway.origin());
    let script = format!(
        "{example}\nimport sys\nbody = sys.stdin.buffer.read()\n\
         print(verified(body, sys.argv[1]), verified(body + b' ', sys.argv[1]))\n"
    );
    let python = peer::python();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(python)
            .args(["-c", &script, &signature])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), body).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "True False");
}

#[tokio::test]
async fn every_relaying_route_shows_its_delivery_counters() {
    let key = TempFile::new(
        "key",
        &base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
    );
    let relaying = [
        "--demo",
        "--push",
        "relay",
        "--push-callback-url",
        "https://gateway.example/a2a/push",
        "--push-key-file",
        key.path(),
    ];
    // A route that does not relay has no delivery series: thousands of routes would
    // make /metrics megabytes of zeros.
    let guarded = start(&["--demo"]).await;
    let url = format!("{}/metrics", guarded.origin());
    let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
    assert!(
        !text.contains("a2a_gateway_push_deliveries_total{"),
        "{text}"
    );
    let gateway = start(&relaying).await;
    let url = format!("{}/metrics", gateway.origin());
    let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
    for series in [
        "a2a_gateway_push_deliveries_total{route=\"default\",outcome=\"delivered\"} 0",
        "a2a_gateway_push_deliveries_total{route=\"default\",outcome=\"exhausted\"} 0",
        "a2a_gateway_push_delivery_retries_total{route=\"default\"} 0",
        "a2a_gateway_push_delivery_drops_total{route=\"default\",reason=\"queue_full\"} 0",
        "a2a_gateway_push_queue_depth{route=\"default\"} 0",
    ] {
        assert!(text.lines().any(|line| line == series), "{series}\n{text}");
    }
}

/// Starts the gateway with `args` and returns its error, if it refuses them.
fn refused(args: &[&str]) -> Option<String> {
    let output = Command::new(BIN)
        .args(["--demo", "--listen", "127.0.0.1:0", "--drain-delay", "0s"])
        .args(args)
        .arg("check-config")
        .arg("/dev/null")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    (!output.status.success()).then_some(stderr)
}

#[test]
fn the_push_bounds_are_at_least_one_and_the_deadlines_above_zero() {
    for flag in [
        "--push-queue",
        "--push-queue-per-destination",
        "--push-max-attempts",
    ] {
        assert_eq!(refused(&[flag, "1"]), None, "{flag}");
        let why = refused(&[flag, "0"]).unwrap();
        assert!(
            why.ends_with(&format!("{flag}: must be at least 1")),
            "{why}"
        );
    }
    for flag in [
        "--push-max-age",
        "--push-connect-timeout",
        "--push-response-timeout",
        "--push-delivery-timeout",
    ] {
        assert_eq!(refused(&[flag, "1ms"]), None, "{flag}");
        let why = refused(&[flag, "0s"]).unwrap();
        assert!(
            why.ends_with(&format!("{flag}: must be more than 0")),
            "{why}"
        );
    }
    let why = refused(&["--push-drop", "middle"]).unwrap();
    assert!(why.contains("--push-drop"), "{why}");
}

#[test]
fn unusable_push_files_stop_the_start_naming_the_flag() {
    let rsa = TempFile::new(
        "pem",
        &rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
            .unwrap()
            .serialize_pem()
            .replace("PRIVATE KEY", "RSA PRIVATE KEY"),
    );
    let why = refused(&["--push-sign-key", rsa.path()]).unwrap();
    assert!(why.contains("--push-sign-key: not a PKCS#8 key"), "{why}");
    let why = refused(&["--push-sign-key", "/nonexistent/key.pem"]).unwrap();
    assert!(
        why.contains("--push-sign-key: /nonexistent/key.pem"),
        "{why}"
    );
    let empty = TempFile::new("pem", "");
    let why = refused(&["--push-ca-file", empty.path()]).unwrap();
    assert!(
        why.contains("--push-ca-file: no certificate in the file"),
        "{why}"
    );
    // An Ed25519 key signs too.
    let ed = TempFile::new(
        "pem",
        &rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
            .unwrap()
            .serialize_pem(),
    );
    assert_eq!(refused(&["--push-sign-key", ed.path()]), None);
}

/// A reload (SIGHUP) loses neither a count nor a notification: the delivery counters go on
/// from where they were, and the delivery being sent at the reload, held by the webhook
/// well past `--shutdown-grace`, is still delivered and counted.
#[tokio::test]
async fn a_reload_keeps_the_delivery_counts_and_the_delivery_being_sent() {
    use crate::harness::{client, metrics_text, push_config_agent, request, rpc, status_update};
    use a2a_gateway::protocol::ops::{Request, UnaryRequest};
    use serde_json::json;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    // Holds the push configs it is given, as the relay's callback asks.
    let agent = push_config_agent(Default::default());
    let agent_url = format!("http://{}", agent.spawn().await);
    // The webhook answers at once, but its second request only once released.
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<()>();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post({
            let release = release.clone();
            move || {
                let (release, seen_tx, count) = (release.clone(), seen_tx.clone(), count.clone());
                async move {
                    let _ = seen_tx.send(());
                    if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                        let _permit = release.acquire().await;
                    }
                    "ok"
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let key = TempFile::new(
        "key",
        &base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
    );
    let gateway = start(&[
        "--backend",
        &agent_url,
        "--push",
        "relay",
        "--push-allow-http",
        "--push-allow",
        "127.0.0.1",
        "--push-callback-url",
        "https://gateway.example/a2a/push",
        "--push-key-file",
        key.path(),
        "--shutdown-grace",
        "1s",
    ])
    .await;
    let origin = gateway.origin().to_owned();
    let config = json!({"taskId": "t-1", "id": "cfg-1", "url": hook});
    let created = rpc(
        &gateway.1,
        &request(json!(1), "CreateTaskPushNotificationConfig", config),
    )
    .await;
    assert!(created["result"].is_object(), "{created}");
    let Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(sealed)) =
        agent.last().request
    else {
        panic!("not a push config");
    };
    let post = |state| {
        let event = serde_json::to_vec(&status_update("t-1", state)).unwrap();
        client()
            .post(format!("{origin}/a2a/push"))
            .header("content-type", "application/json")
            .header("x-a2a-notification-token", &sealed.token)
            .body(event)
            .send()
    };
    let delivered = |origin: String| async move {
        let text = metrics_text(&origin).await;
        let series = "a2a_gateway_push_deliveries_total{route=\"default\",outcome=\"delivered\"} ";
        text.lines()
            .find_map(|line| line.strip_prefix(series))
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let until_delivered = |n: u64| {
        let origin = origin.clone();
        async move {
            let started = Instant::now();
            while delivered(origin.clone()).await != n {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "not {n} delivered"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };

    use a2a_gateway::proto::TaskState;
    assert_eq!(post(TaskState::Working).await.unwrap().status(), 204);
    seen.recv().await;
    until_delivered(1).await;
    // The second is being sent, held by the webhook, when the reload comes.
    assert_eq!(post(TaskState::Completed).await.unwrap().status(), 204);
    seen.recv().await;
    let pid = rustix::process::Pid::from_raw(gateway.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    let reloaded = "a2a_gateway_config_reloads_total{outcome=\"applied\"} 1\n";
    let started = Instant::now();
    while !metrics_text(&origin).await.contains(reloaded) {
        assert!(started.elapsed() < Duration::from_secs(30), "no reload");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(delivered(origin.clone()).await, 1, "the count goes on");
    // Past the grace (1 s) the replaced deliverer used to drop what it was sending.
    tokio::time::sleep(Duration::from_secs(2)).await;
    release.add_permits(1);
    until_delivered(2).await;
    let text = metrics_text(&origin).await;
    let dropped =
        "a2a_gateway_push_delivery_drops_total{route=\"default\",reason=\"shutdown\"} 0\n";
    assert!(text.contains(dropped), "{text}");
}

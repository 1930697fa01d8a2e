//! What the two SDK clients (the reference a2a-sdk for Python, `tests/peers/client_refusals.py`,
//! and @a2a-js/sdk, `tests/peers/js/client_refusals.mjs`) show their user when the gateway
//! refuses a call, under each `--refusal-status`; docs/errors.md has the table this holds.
//! The Python client raises on an HTTP status other than 2xx before it reads the body, so
//! with `http` its user reads only "HTTP Error 429"; with `jsonrpc` the error's message
//! (the limit, the wait) and its `ErrorInfo` metadata reach them. The JS client reads the
//! JSON-RPC error under any status.

use crate::harness;

use std::path::PathBuf;
use std::process::Command;

use harness::peer;
use harness::process::*;
use harness::*;

/// The SDK clients, provisioned once (cached under the target dir).
struct Clients {
    python: PathBuf,
    node_script: PathBuf,
}

impl Clients {
    fn provision() -> Clients {
        let from_card = peer::provision("provision_js.sh");
        Clients {
            python: peer::python(),
            node_script: from_card.with_file_name("client_refusals.mjs"),
        }
    }

    /// Each SDK's line for the last of `calls` SendMessage calls to the agent at `base`.
    async fn last_lines(&self, base: &str, calls: usize) -> [String; 2] {
        let peers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
        let mut python = Command::new(&self.python);
        python
            .arg(peers.join("client_refusals.py"))
            .current_dir(&peers);
        let mut node = Command::new("node");
        node.arg(&self.node_script);
        let mut lines = [python, node].map(|mut command| {
            command.arg(base).arg(calls.to_string());
            tokio::task::spawn_blocking(move || command.output_within(SDK_CLIENT_WITHIN))
        });
        let mut out = [String::new(), String::new()];
        for (i, run) in lines.iter_mut().enumerate() {
            let output = run.await.unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            out[i] = stdout.lines().last().unwrap_or_default().to_owned();
        }
        out
    }
}

/// Asserts `line` has every one of `wanted` and none of `unwanted`.
fn shows(sdk: &str, line: &str, wanted: &[&str], unwanted: &[&str]) {
    for text in wanted {
        assert!(line.contains(text), "{sdk} should show {text:?}: {line}");
    }
    for text in unwanted {
        assert!(
            !line.contains(text),
            "{sdk} should not show {text:?}: {line}"
        );
    }
}

#[tokio::test]
async fn each_refusal_as_the_sdk_clients_show_it() {
    let clients = tokio::task::spawn_blocking(Clients::provision)
        .await
        .unwrap();
    let keys = TempFile::new("keys", &format!("alice {}\n", key_digest_hex(b"k1")));
    let auth = TempFile::new(
        "toml",
        &format!("[auth.api-keys]\nfile = \"{}\"\n", keys.path()),
    );
    // The card of an agent that is down: the demo's, served from a file.
    let demo = start(&["--demo"]).await;
    let card = client()
        .get(format!("{}/.well-known/agent-card.json", demo.origin()))
        .header("a2a-version", "1.0")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    drop(demo);
    let card = TempFile::new("json", &card);
    let down = ClosedPort::new();
    let down = format!("http://127.0.0.1:{}", down.port());

    for policy in ["http", "jsonrpc"] {
        let with = |args: &[&str]| -> Vec<String> {
            let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            all.extend(["--refusal-status".into(), policy.into()]);
            all
        };
        let http = policy == "http";

        // A rate limit: the second call is refused (429 under `http`).
        let args = with(&["--demo", "--rate-limit", "0.01", "--rate-burst", "1"]);
        let gateway = start(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
        let [python, js] = clients.last_lines(gateway.origin(), 2).await;
        let (limit, metadata) = ("(rate-limit)", "'limit': 'rate-limit'");
        match http {
            true => shows("python", &python, &["HTTP Error 429"], &[limit]),
            false => shows("python", &python, &["InternalError", limit, metadata], &[]),
        }
        shows(
            "js",
            &js,
            &[limit, "GATEWAY_RATE_LIMITED", "RetryInfo"],
            &[],
        );

        // No credential on a route that takes API keys (401 under `http`).
        let args = with(&["--demo", "--config", auth.path()]);
        let gateway = start(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
        let [python, js] = clients.last_lines(gateway.origin(), 1).await;
        match http {
            true => shows("python", &python, &["HTTP Error 401"], &["anonymous"]),
            false => shows("python", &python, &["-31401", "anonymous calls"], &[]),
        }
        shows("js", &js, &["UNAUTHENTICATED", "anonymous calls"], &[]);

        // The agent is down: a JSON-RPC error under 200 whatever the policy.
        let args = with(&["--backend", &down, "--card", card.path()]);
        let gateway = start(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
        let [python, js] = clients.last_lines(gateway.origin(), 1).await;
        shows(
            "python",
            &python,
            &["InternalError", "backend unreachable"],
            &[],
        );
        shows("js", &js, &["BACKEND_UNAVAILABLE", "RetryInfo", "1s"], &[]);
    }
}

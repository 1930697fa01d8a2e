//! The reference-SDK peer (`tests/peers/agent.py`, a2a-sdk 1.3.0) as a test fixture: the
//! pinned venv is provisioned on first use (cached under `target/`), the agent serves gRPC,
//! HTTP+JSON and its own JSON-RPC binding, and is killed when the fixture drops. Missing
//! Python or packages fail the test with the provisioning error, one line that says how to
//! get them; nothing passes silently.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The errors agent.py raises on request (`error:<name>`), one per A2A error it can be
/// made to raise.
pub const AGENT_ERRORS: &[&str] = &[
    "TaskNotFound",
    "TaskNotCancelable",
    "PushNotificationNotSupported",
    "UnsupportedOperation",
    "ContentTypeNotSupported",
    "InvalidAgentResponse",
    "ExtendedAgentCardNotConfigured",
    "ExtensionSupportRequired",
    "VersionNotSupported",
    "InvalidParams",
    "InternalError",
];

/// A running reference agent.
pub struct Peer {
    child: Child,
    /// gRPC backend URL (`http://127.0.0.1:P`).
    pub grpc: String,
    /// HTTP+JSON backend URL (`http://127.0.0.1:P/rest`).
    pub rest: String,
    /// The agent's own JSON-RPC endpoint.
    pub jsonrpc: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// Runs a provisioning script of tests/peers/ and returns the one path it prints. Its progress
/// goes to this test's stderr; a failure is the script's one `error:` line, which says what is
/// missing and how to get it (scripts/test provisions everything).
pub fn provision(script: &str) -> PathBuf {
    let out = Command::new("bash")
        .arg(peers_dir().join(script))
        .output()
        .unwrap_or_else(|e| panic!("cannot run tests/peers/{script}: {e}"));
    let progress = String::from_utf8_lossy(&out.stderr);
    eprint!("{progress}");
    if !out.status.success() {
        match progress.lines().last() {
            Some(error) => panic!("{error}"),
            None => panic!("tests/peers/{script} failed and said nothing"),
        }
    }
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The venv's python, provisioning it if needed (serialised across processes by flock).
pub fn python() -> PathBuf {
    provision("provision.sh")
}

impl Peer {
    /// Starts the agent on free loopback ports and waits for its READY line.
    pub fn start() -> Peer {
        Peer::start_with_env(&[])
    }

    /// `start` with extra environment variables (e.g. agent.py's `A2A_TEST_MIN_PING_MS`).
    pub fn start_with_env(env: &[(&str, &str)]) -> Peer {
        let mut child = Command::new(python())
            .arg(peers_dir().join("agent.py"))
            .args(["--grpc-port", "0", "--http-port", "0"])
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("interop: cannot start tests/peers/agent.py");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.starts_with("READY ") => line,
            other => {
                let _ = child.kill();
                panic!("interop: agent.py did not get ready: {other:?}");
            }
        };
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("interop: no {key}= in {line:?}"))
                .to_owned()
        };
        let http = field("http");
        Peer {
            grpc: format!("http://{}", field("grpc")),
            rest: format!("http://{http}{}", field("rest")),
            jsonrpc: format!("http://{http}{}", field("jsonrpc")),
            child,
        }
    }
}

/// The SDK verifier's answers, per card.
pub struct Verdicts {
    /// `valid` or `invalid: <reason>`.
    pub verdicts: Vec<String>,
    /// The SDK's canonical payload of each card.
    pub payloads: Vec<String>,
}

/// Runs the SDK's card signature verifier (`tests/peers/verify_card.py`) over `cards` with the public halves of `keys` (kid → PEM).
pub fn sdk_verify(keys: &[(&str, &str)], cards: &[serde_json::Value]) -> Verdicts {
    let keys: serde_json::Map<String, serde_json::Value> = keys
        .iter()
        .map(|(kid, pem)| (kid.to_string(), serde_json::json!(pem)))
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/verify_card.py");
    let mut child = Command::new(python())
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot start tests/peers/verify_card.py");
    let request = serde_json::json!({"keys": keys, "cards": cards});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "verify_card.py failed (its error is above)"
    );
    let out: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let strings = |key: &str| -> Vec<String> {
        out[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    Verdicts {
        verdicts: strings("verdicts"),
        payloads: strings("payloads"),
    }
}

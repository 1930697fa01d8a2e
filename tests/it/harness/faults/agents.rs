//! The agents as OS processes: `scripted_agent.py` in one of its modes, and the
//! reference SDK agent (`tests/peers/agent.py`) on ports of our choosing, so that it can
//! be SIGKILLed and started again where the gateway expects it. Both are killed when
//! dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::harness::process::TempFile;
use crate::harness::{peer, test_pki};

/// The reference SDK venv's python (provisioned once per test process); the scripted
/// agents need only its standard library.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(peer::python)
}

/// Starts `command` and waits (on a blocking thread) for its `READY ...` line.
async fn ready(mut command: Command, what: &str) -> Result<(Child, String), String> {
    let what = what.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.starts_with("READY ") => Ok((child, line)),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{what} did not get ready: {other:?}"))
            }
        }
    })
    .await
    .unwrap()
}

/// `key=value` of a READY line.
fn field(line: &str, key: &str) -> Result<String, String> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .map(str::to_owned)
        .ok_or_else(|| format!("no {key}= in {line:?}"))
}

fn port_of(address: &str) -> u16 {
    address.rsplit(':').next().unwrap().parse().unwrap()
}

/// A running `scripted_agent.py`.
pub struct Scripted {
    child: Child,
    pub port: u16,
}

impl Scripted {
    pub async fn start(mode: &str) -> Result<Scripted, String> {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/harness/faults/scripted_agent.py");
        let mut command = Command::new(python());
        command.arg(script).arg(mode);
        if mode == "tls" {
            let (cert, key) = identity();
            command.args(["--cert", cert.path(), "--key", key.path()]);
        }
        let (child, line) = ready(command, &format!("scripted_agent.py {mode}")).await?;
        let port = field(&line, "port")?.parse().map_err(|e| format!("{e}"))?;
        Ok(Scripted { child, port })
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test CA's server certificate and key in files, for the `tls` mode.
fn identity() -> &'static (TempFile, TempFile) {
    static FILES: OnceLock<(TempFile, TempFile)> = OnceLock::new();
    FILES.get_or_init(|| {
        let pki = test_pki();
        (
            TempFile::new("pem", &pki.cert_pem),
            TempFile::new("pem", &pki.key_pem),
        )
    })
}

/// A running reference SDK agent.
pub struct SdkAgent {
    child: Child,
    /// gRPC backend URL (`http://127.0.0.1:P`).
    pub grpc: String,
    /// HTTP+JSON backend URL (`http://127.0.0.1:P/rest`).
    pub rest: String,
    ports: (u16, u16),
}

impl SdkAgent {
    /// Starts the agent on these ports (0: free ones).
    pub async fn start(grpc_port: u16, http_port: u16) -> Result<SdkAgent, String> {
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/agent.py");
        let mut command = Command::new(python());
        command.arg(agent).args([
            "--grpc-port",
            &grpc_port.to_string(),
            "--http-port",
            &http_port.to_string(),
        ]);
        let (child, line) = ready(command, "tests/peers/agent.py").await?;
        let (grpc, http) = (field(&line, "grpc")?, field(&line, "http")?);
        Ok(SdkAgent {
            child,
            rest: format!("http://{http}{}", field(&line, "rest")?),
            ports: (port_of(&grpc), port_of(&http)),
            grpc: format!("http://{grpc}"),
        })
    }

    /// The gRPC and HTTP ports it listens on.
    pub fn ports(&self) -> (u16, u16) {
        self.ports
    }

    /// SIGKILL (what `Child::kill` sends on Unix): no clean shutdown, the kernel closes
    /// its sockets.
    pub fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SdkAgent {
    fn drop(&mut self) {
        self.sigkill();
    }
}

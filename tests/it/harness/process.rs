//! The gateway binary as a child process: started on a free loopback port, waited for
//! until it serves, killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{await_serving, free_listen_address};

pub const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

/// A running gateway process, killed when dropped.
pub struct Running(pub Child, pub String);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// Sends SIGTERM, as Kubernetes does to stop a pod.
    pub fn terminate(&self) {
        let pid = self.0.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
    }

    /// The exit status, which must come within `limit`.
    pub async fn exit_within(&mut self, limit: Duration, why: &str) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < limit, "{why}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn start(args: &[&str]) -> Running {
    start_with(args, &[], Stdio::null()).await
}

/// Starts the binary with extra environment variables and `stderr` (its log) sent where
/// the caller says.
pub async fn start_with(args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Running {
    let listen = free_listen_address();
    let child = Command::new(BIN)
        .args(args)
        .args(["--listen", &listen])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let running = Running(child, format!("http://{listen}/a2a/jsonrpc"));
    await_serving(&listen).await;
    running
}

/// A file (a config, a card) in the temporary directory, removed when dropped.
pub struct TempFile(std::path::PathBuf);

impl TempFile {
    /// A fresh file ending in `.{extension}` holding `text`.
    pub fn new(extension: &str, text: &str) -> TempFile {
        static FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("a2a-test-{}-{n}.{extension}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// A child process run to its end within a time bound: a binary that hangs (a start that
/// should have failed, a peer that waits forever) fails its test instead of stalling it.
pub trait OutputWithin {
    /// The process's status and output, which must come within `limit`; past it the
    /// process is killed and the test fails, showing what it wrote so far.
    fn output_within(&mut self, limit: Duration) -> std::process::Output;
}

impl OutputWithin for Command {
    fn output_within(&mut self, limit: Duration) -> std::process::Output {
        let mut child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = String::from_utf8_lossy(&stderr.join().unwrap()).into_owned();
                panic!("{self:?} did not end within {limit:?}; its stderr: {stderr}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        std::process::Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        }
    }
}

/// How long a run of the gateway binary that is expected to end may take.
pub const EXITS_WITHIN: Duration = Duration::from_secs(30);

/// How long one run of a reference-SDK client script may take.
pub const SDK_CLIENT_WITHIN: Duration = Duration::from_secs(120);

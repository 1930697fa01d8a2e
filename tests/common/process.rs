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

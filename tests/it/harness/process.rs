//! The gateway binary as a child process, the one way the suites run it: `spawn` starts
//! it, `Running` is the process (killed when dropped) and its JSON-RPC endpoint. `start`
//! serves on a free loopback port and waits until it serves; `Watched::start` serves on a
//! port the gateway picks itself, keeps its JSON log in a file and bounds its memory, for
//! the case runners (hostile backends, failing agents) that run many gateways at once.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::calls::healthz;
use super::vitals::{open_fds, status_kib};
use super::{await_serving, free_listen_address};

pub const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

/// A running gateway process, killed when dropped: the process, and its JSON-RPC endpoint
/// (`http://127.0.0.1:PORT/a2a/jsonrpc`; empty when the caller serves something else).
pub struct Running(pub Child, pub String);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> &str {
        self.1.trim_end_matches("/a2a/jsonrpc")
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }

    /// Sends SIGTERM, as Kubernetes does to stop a pod.
    pub fn terminate(&self) {
        self.signal(rustix::process::Signal::TERM);
    }

    /// Sends SIGINT, as Ctrl-C at a terminal does.
    pub fn interrupt(&self) {
        self.signal(rustix::process::Signal::INT);
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.0.id() as i32).expect("a child's pid is > 0");
        rustix::process::kill_process(pid, signal).expect("a signal to the gateway");
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

/// Starts the binary serving on `listen` with `args`, extra environment variables and its
/// log sent to `stderr`; does not wait for it to serve. The endpoint is plain HTTP's.
pub fn spawn(args: &[&str], listen: &str, env: &[(&str, &str)], stderr: Stdio) -> Running {
    let child = Command::new(BIN)
        .args(args)
        .args(["--listen", listen])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    Running(child, format!("http://{listen}/a2a/jsonrpc"))
}

pub async fn start(args: &[&str]) -> Running {
    start_with(args, &[], Stdio::null()).await
}

/// Starts the binary with extra environment variables and `stderr` (its log) sent where
/// the caller says.
pub async fn start_with(args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Running {
    let listen = free_listen_address();
    let running = spawn(args, &listen, env, stderr);
    await_serving(&listen).await;
    running
}

/// RSS at which the watchdog kills a watched gateway, so a memory bomb cannot take the
/// machine (or the other cases running in parallel) with it; the case then fails.
const KILL_AT_KIB: u64 = 768 << 10;

/// A gateway process of a case runner: its JSON log kept in a file (removed when dropped)
/// and its memory watched (killed above `KILL_AT_KIB`).
pub struct Watched {
    pub process: Running,
    log: PathBuf,
    /// Highest VmHWM seen by the watchdog (KiB) and whether it had to kill the process.
    peak_kib: Arc<AtomicU64>,
    killed: Arc<AtomicBool>,
    watchdog: tokio::task::JoinHandle<()>,
}

impl Watched {
    /// Starts the binary with `args`, listening on a port it picks itself (a port picked
    /// here could be taken by a case running in parallel before the gateway binds it);
    /// returns once its log names the port and `/healthz` answers there.
    pub async fn start(args: &[&str], log_name: &str) -> Watched {
        let log =
            std::env::temp_dir().join(format!("a2a-watched-{}/{log_name}.log", std::process::id()));
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let mut args = args.to_vec();
        args.extend(["--log-format", "json"]);
        let env = [
            // Warnings, and the one info line that names the address.
            ("RUST_LOG", "warn,a2a_gateway=info"),
            // A panic's backtrace would be symbolized (~150 MiB of debug info in RSS).
            ("RUST_BACKTRACE", "0"),
        ];
        let stderr = std::fs::File::create(&log).unwrap().into();
        let mut process = spawn(&args, "127.0.0.1:0", &env, stderr);
        process.1.clear();
        let pid = process.pid();
        let peak_kib = Arc::new(AtomicU64::new(0));
        let killed = Arc::new(AtomicBool::new(false));
        let watchdog = tokio::spawn(watch_memory(pid, peak_kib.clone(), killed.clone()));
        let mut watched = Watched {
            process,
            log,
            peak_kib,
            killed,
            watchdog,
        };
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "gateway did not start"
            );
            assert!(watched.process.running(), "gateway exited at start");
            if watched.process.1.is_empty() {
                if let Some(listen) = watched.listen_address() {
                    watched.process.1 = format!("http://{listen}/a2a/jsonrpc");
                }
            }
            if !watched.process.1.is_empty()
                && healthz(watched.origin(), Duration::from_secs(1))
                    .await
                    .is_some()
            {
                return watched;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The address in the log's "a2a-gateway serving" line.
    fn listen_address(&self) -> Option<String> {
        let log = std::fs::read_to_string(&self.log).ok()?;
        let line = log.lines().find(|l| l.contains("a2a-gateway serving"))?;
        let fields: Value = serde_json::from_str(line).ok()?;
        Some(fields["fields"]["listen"].as_str()?.to_owned())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> &str {
        self.process.origin()
    }

    /// The JSON-RPC endpoint of the flags-only route.
    pub fn jsonrpc(&self) -> &str {
        &self.process.1
    }

    /// Peak resident set size (VmHWM) in MiB, as far as it is known.
    pub fn peak_rss_mib(&self) -> f64 {
        let now = status_kib(self.process.pid(), "VmHWM:").unwrap_or(0);
        now.max(self.peak_kib.load(Ordering::SeqCst)) as f64 / 1024.0
    }

    /// Whether the watchdog killed the process for its memory.
    pub fn killed_for_memory(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Open file descriptors.
    pub fn fds(&self) -> usize {
        open_fds(self.process.pid())
    }

    /// Lines of the gateway's log that report a panic.
    pub fn panics(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("panicked"))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.watchdog.abort();
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

async fn watch_memory(pid: u32, peak: Arc<AtomicU64>, killed: Arc<AtomicBool>) {
    loop {
        if let Some(hwm) = status_kib(pid, "VmHWM:") {
            peak.fetch_max(hwm, Ordering::SeqCst);
            if hwm > KILL_AT_KIB {
                if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
                killed.store(true, Ordering::SeqCst);
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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

//! The real `a2a-gateway` binary as a child process, what `/proc` says about it (peak RSS,
//! open descriptors, CPU time), and the JSON-RPC calls the cases make to it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::process::BIN;
use crate::harness::vitals::{open_fds, status_kib};

/// RSS at which the watchdog kills a gateway, so a memory bomb cannot take the machine
/// (or the other cases running in parallel) with it; the case then fails.
const KILL_AT_KIB: u64 = 768 << 10;

/// A running gateway process, killed when dropped.
pub struct Gateway {
    child: Child,
    pub pid: u32,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    log: PathBuf,
    /// Highest VmHWM seen by the watchdog (KiB) and whether it had to kill the process.
    peak_kib: Arc<AtomicU64>,
    killed: Arc<AtomicBool>,
    watchdog: tokio::task::JoinHandle<()>,
}

impl Gateway {
    /// Starts the binary with `args`, listening on a port it picks itself (a port picked
    /// here could be taken by a case running in parallel before the gateway binds it);
    /// returns once its log names the port and `/healthz` answers there.
    pub async fn start(args: &[&str], log_name: &str) -> Gateway {
        let log =
            std::env::temp_dir().join(format!("a2a-hostile-{}/{log_name}.log", std::process::id()));
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let child = Command::new(BIN)
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            // Warnings, and the one info line that names the address.
            .env("RUST_LOG", "warn,a2a_gateway=info")
            // A panic's backtrace would be symbolized (~150 MiB of debug info in RSS).
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let pid = child.id();
        let peak_kib = Arc::new(AtomicU64::new(0));
        let killed = Arc::new(AtomicBool::new(false));
        let watchdog = tokio::spawn(watch_memory(pid, peak_kib.clone(), killed.clone()));
        let mut gateway = Gateway {
            child,
            pid,
            base: String::new(),
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
            assert!(gateway.running(), "gateway exited at start");
            if gateway.base.is_empty() {
                if let Some(listen) = gateway.listen_address() {
                    gateway.base = format!("http://{listen}");
                }
            }
            if !gateway.base.is_empty()
                && healthz(&gateway.base, Duration::from_secs(1))
                    .await
                    .is_some()
            {
                return gateway;
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

    pub fn jsonrpc(&self) -> String {
        format!("{}/a2a/jsonrpc", self.base)
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Peak resident set size (VmHWM) in MiB, as far as it is known.
    pub fn peak_rss_mib(&self) -> f64 {
        let now = status_kib(self.pid, "VmHWM:").unwrap_or(0);
        now.max(self.peak_kib.load(Ordering::SeqCst)) as f64 / 1024.0
    }

    /// Whether the watchdog killed the process for its memory.
    pub fn killed_for_memory(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Open file descriptors.
    pub fn fds(&self) -> usize {
        open_fds(self.pid)
    }

    /// User + system CPU time so far.
    pub fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // Fields after the `(comm)`; utime and stime are fields 14 and 15 of the line.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = fields
            .get(11..13)
            .map(|f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum())
            .unwrap_or(0);
        // USER_HZ is 100 on Linux.
        Duration::from_millis(ticks * 10)
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

impl Drop for Gateway {
    fn drop(&mut self) {
        self.watchdog.abort();
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// A client with no connection reuse: each call is a new connection, which the gateway's
/// acceptor deals to the next worker (round-robin).
pub fn fresh_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// `GET /healthz`; the latency, or `None` without an answer within `limit`.
pub async fn healthz(base: &str, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let get = fresh_client().get(format!("{base}/healthz")).send();
    match tokio::time::timeout(limit, get).await {
        Ok(Ok(r)) if r.status() == 200 => Some(started.elapsed()),
        _ => None,
    }
}

/// A call whose message text is `text_len` bytes long.
pub fn call_body(method: &str, text_len: usize) -> String {
    let text = "hi".repeat(text_len.max(2) / 2);
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}},
    })
    .to_string()
}

/// What a JSON-RPC call got, and when.
pub struct Answered {
    pub elapsed: Duration,
    pub reply: Result<Value, String>,
}

/// A hard bound on any one call, so a hang never blocks the suite.
pub const HARD_LIMIT: Duration = Duration::from_secs(15);

/// Starts a POST with `A2A-Version: 1.0` and returns the response head.
pub async fn open(url: &str, method: &str) -> Result<reqwest::Response, String> {
    open_within(url, method, 2, HARD_LIMIT).await
}

async fn open_within(
    url: &str,
    method: &str,
    text_len: usize,
    limit: Duration,
) -> Result<reqwest::Response, String> {
    let send = fresh_client()
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(call_body(method, text_len))
        .send();
    match tokio::time::timeout(limit, send).await {
        Err(_) => Err(format!("no answer within {limit:?}")),
        Ok(Err(e)) => Err(format!("HTTP error: {e}")),
        Ok(Ok(r)) if r.status() != 200 => Err(format!("HTTP status {}", r.status())),
        Ok(Ok(r)) => Ok(r),
    }
}

/// One unary `method` call; the JSON reply.
pub async fn unary(url: &str, method: &str) -> Answered {
    unary_within(url, method, 2, HARD_LIMIT).await
}

/// `unary` with a message text of `text_len` bytes, given up after `limit`.
pub async fn unary_within(url: &str, method: &str, text_len: usize, limit: Duration) -> Answered {
    let started = Instant::now();
    let reply = async {
        let response = open_within(url, method, text_len, limit).await?;
        let body = tokio::time::timeout(limit, response.bytes())
            .await
            .map_err(|_| format!("body not complete within {limit:?}"))?
            .map_err(|e| format!("body error: {e}"))?;
        serde_json::from_slice(&body)
            .map_err(|e| format!("not JSON ({e}): {:?}", String::from_utf8_lossy(&body)))
    }
    .await;
    Answered {
        elapsed: started.elapsed(),
        reply,
    }
}

/// An SSE response read frame by frame (text between blank lines).
pub struct Sse {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

/// The first answer of a streaming call: a JSON reply (an error before the first event),
/// or the event stream.
pub enum Streamed {
    Json(Value),
    Events(Sse),
}

pub async fn stream(url: &str) -> Result<Streamed, String> {
    let response = open(url, "SendStreamingMessage").await?;
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if content_type.starts_with("text/event-stream") {
        return Ok(Streamed::Events(Sse {
            response,
            buffer: Vec::new(),
        }));
    }
    let body = tokio::time::timeout(HARD_LIMIT, response.bytes())
        .await
        .map_err(|_| "body not complete".to_owned())?
        .map_err(|e| format!("body error: {e}"))?;
    serde_json::from_slice(&body)
        .map(Streamed::Json)
        .map_err(|e| format!("not JSON ({e}): {:?}", String::from_utf8_lossy(&body)))
}

impl Sse {
    /// The next frame; `Ok(None)` at the end of the stream, `Err` on a broken body or
    /// when nothing arrives within `limit`.
    pub async fn frame(&mut self, limit: Duration) -> Result<Option<String>, String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let frame = String::from_utf8_lossy(&self.buffer[..end]).into_owned();
                self.buffer.drain(..end + 2);
                return Ok(Some(frame));
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Err(_) => return Err("timeout".into()),
                Ok(Err(e)) => return Err(format!("body error: {e}")),
                Ok(Ok(None)) => return Ok(None),
                Ok(Ok(Some(chunk))) => self.buffer.extend_from_slice(&chunk),
            }
        }
    }
}

/// The JSON of a frame's `data:` line.
pub fn frame_data(frame: &str) -> Option<Value> {
    let data = frame.lines().find_map(|l| l.strip_prefix("data: "))?;
    serde_json::from_str(data).ok()
}

//! What the abuse, soak and hostile-backend tests watch of a gateway process: its resident
//! memory and open descriptors (from `/proc/PID`), the gauges it exports at `/metrics`, and
//! the latency of a well-behaved client measured on a thread and runtime of its own, so the
//! attacking tasks of the test never delay it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Resident memory of process `pid`, in KiB (0 once it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:").unwrap_or(0)
}

/// The field `key` (`VmRSS:`, `VmHWM:`) of process `pid`'s `/proc/PID/status`, in KiB.
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(key))?;
    value.split_whitespace().next()?.parse().ok()
}

/// Open file descriptors of process `pid`.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Established TCP connections of process `pid` to `port` (its backend connections), read
/// from `/proc` so that no `ss` is needed.
pub fn connections_to(pid: u32, port: u16) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let inodes: std::collections::HashSet<String> = entries
        .flatten()
        .filter_map(|entry| {
            let target = std::fs::read_link(entry.path()).ok()?;
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let port = format!(":{port:04X}");
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .map(|table| {
            // Columns: sl, local, remote, state (01: established), …, inode (the tenth).
            let established_to = |fields: &[&str]| {
                fields.len() > 9
                    && fields[2].ends_with(&port)
                    && fields[3] == "01"
                    && inodes.contains(fields[9])
            };
            table
                .lines()
                .skip(1)
                .filter(|line| established_to(&line.split_whitespace().collect::<Vec<_>>()))
                .count()
        })
        .sum()
}

/// User + system CPU time of process `pid` so far (zero once it is gone).
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
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

/// Samples a process's RSS every 20 ms until dropped; `peak_kib` is the highest seen.
pub struct RssWatch {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl RssWatch {
    pub fn start(pid: u32) -> RssWatch {
        let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        RssWatch { peak, stop }
    }

    pub fn peak_kib(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads the gateway's `/metrics` over exactly one HTTP/1.1 connection, held for the whole
/// test, so that scraping never adds a connection (and its task and descriptor) of its own to
/// what is counted. A pooled client may open a second connection when a reply is still being
/// read, which once left "one task and one descriptor above baseline" in the storm test.
pub struct Scraper {
    authority: String,
    connection: tokio::sync::Mutex<Option<hyper::client::conn::http1::SendRequest<String>>>,
}

impl Scraper {
    /// For the gateway serving JSON-RPC at `url`.
    pub fn new(url: &str) -> Scraper {
        let base = base_of(url);
        Scraper {
            authority: base.strip_prefix("http://").unwrap().to_string(),
            connection: tokio::sync::Mutex::new(None),
        }
    }

    /// The body of `/metrics`, over the held connection (opened again only once it closed).
    async fn scrape(&self) -> String {
        use http_body_util::BodyExt;
        let mut held = self.connection.lock().await;
        if held.as_ref().is_none_or(|sender| sender.is_closed()) {
            let stream = tokio::net::TcpStream::connect(&self.authority)
                .await
                .unwrap();
            let io = hyper_util::rt::TokioIo::new(stream);
            let (sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(connection);
            *held = Some(sender);
        }
        let sender = held.as_mut().unwrap();
        sender.ready().await.unwrap();
        let request = http::Request::get("/metrics")
            .header(http::header::HOST, &self.authority)
            .body(String::new())
            .unwrap();
        let reply = sender.send_request(request).await.unwrap();
        let body = reply.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// The value of the gauge or counter `name`, summed over its labels (per-route series
    /// such as `a2a_gateway_streams_open{route=…}` add up to the process's figure).
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self.scrape().await;
        let values: Vec<f64> = text
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(name)?;
                let rest = match rest.strip_prefix('{') {
                    Some(labelled) => &labelled[labelled.find('}')? + 1..],
                    None => rest,
                };
                rest.strip_prefix(' ')?.parse().ok()
            })
            .collect();
        assert!(!values.is_empty(), "no {name} in /metrics:\n{text}");
        values.iter().sum()
    }
}

/// `http://127.0.0.1:P` of a JSON-RPC URL.
pub fn base_of(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    format!("http://{}", &rest[..rest.find('/').unwrap()])
}

/// Raises this process's soft open-files limit to its hard limit (10,000 connections need
/// as many descriptors on the client side too).
pub fn raise_fd_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).unwrap();
    limit.current.unwrap_or(u64::MAX)
}

/// The body of the probe's call: a small unary GetTask.
pub const PROBE_CALL: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"probe"}}"#;

/// One call on each of 8 fresh connections, so every serving thread of the gateway has
/// connected to the backend before descriptors and tasks are counted.
pub async fn warm_up(url: &str) {
    for _ in 0..8 {
        let text = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(PROBE_CALL)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(text.contains("\"result\""), "{text}");
    }
}

/// Calls of one latency measurement (after a few warm-up calls).
const PROBE_CALLS: usize = 40;

/// Median latency of `PROBE_CALLS` sequential GetTask calls to `url` over one keep-alive
/// connection, on a thread and runtime of its own. Every call must succeed.
pub async fn median_latency(url: &str) -> Duration {
    medians(&[url]).await[0]
}

/// The median latencies of `PROBE_CALLS` GetTask calls to each of `urls`, made in turn
/// (one to each, then again), each over its own keep-alive connection, on a thread and
/// runtime of their own. Every call must succeed.
pub async fn medians(urls: &[&str]) -> Vec<Duration> {
    let urls: Vec<String> = urls.iter().map(|u| (*u).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let clients: Vec<_> = urls
                .iter()
                .map(|_| reqwest::Client::builder().http1_only().build().unwrap())
                .collect();
            let mut times = vec![Vec::with_capacity(PROBE_CALLS); urls.len()];
            for i in 0..PROBE_CALLS + 5 {
                for ((url, client), times) in urls.iter().zip(&clients).zip(&mut times) {
                    let started = Instant::now();
                    let response = client
                        .post(url)
                        .header("content-type", "application/json")
                        .header("a2a-version", "1.0")
                        .body(PROBE_CALL)
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("the well-behaved client's call failed: {e}"));
                    let text = response.text().await.unwrap();
                    assert!(text.contains("\"result\""), "probe call answered {text}");
                    if i >= 5 {
                        times.push(started.elapsed());
                    }
                }
            }
            times
                .into_iter()
                .map(|mut t| {
                    t.sort();
                    t[t.len() / 2]
                })
                .collect()
        })
    })
    .await
    .unwrap()
}

/// The bound on the well-behaved client's median latency during an attack: twice its
/// baseline, or the baseline plus 5 ms (a loaded 2-core machine moves sub-millisecond
/// medians by more than 2x without any attack).
pub fn latency_bound(baseline: Duration) -> Duration {
    (baseline * 2).max(baseline + Duration::from_millis(5))
}

/// Asserts that the well-behaved client's median latency at the attacked gateway `url`
/// stays within `latency_bound` of its `baseline` (measured before the attack) while the
/// attack runs, or, when other work on the machine slows everything down, within
/// `latency_bound` of the median at `control`, an identical gateway that is not attacked,
/// called in turn with it. A miss is measured again (three times at most): the attack goes
/// on throughout, so three misses are the attack's doing.
pub async fn assert_unhurt(url: &str, control: &str, baseline: Duration, attack: &str) {
    let mut seen = Vec::new();
    for _ in 0..3 {
        let pair = medians(&[url, control]).await;
        let (during, beside) = (pair[0], pair[1]);
        seen.push((during, beside));
        if during <= latency_bound(baseline) || during <= latency_bound(beside) {
            println!(
                "{attack}: probe median {during:?} (baseline {baseline:?}, control gateway {beside:?})"
            );
            return;
        }
    }
    panic!(
        "{attack}: the well-behaved client's median latencies (attacked, control) {seen:?} \
         exceed twice (or +5 ms over) both the baseline {baseline:?} and the control's"
    );
}

/// The TCP connections of process `pid`, as `ss` lists them (for failure messages).
pub fn connections_of(pid: u32) -> String {
    let out = std::process::Command::new("ss")
        .args(["-tnp"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| format!("(cannot run ss: {e})"));
    let tag = format!("pid={pid},");
    out.lines()
        .filter(|l| l.contains(&tag))
        .collect::<Vec<_>>()
        .join("\n")
        + "\nits descriptors:\n"
        + &descriptors_of(pid)
}

/// What each open descriptor of process `pid` points at (`socket:[inode]`, `anon_inode:[eventpoll]`,
/// a path), one per line, so a descriptor left behind names its kind.
pub fn descriptors_of(pid: u32) -> String {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return String::new();
    };
    let mut lines: Vec<String> = entries
        .flatten()
        .map(|entry| {
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            format!(
                "{} -> {}",
                entry.file_name().to_string_lossy(),
                target.display()
            )
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

//! Overhead benchmark: a JSON-RPC call through a2a-gateway vs the same call made directly
//! over gRPC, side by side in one run (see `benches/README.md`).
//!
//! ```text
//! cargo bench --bench overhead -- [SCENARIO…] [--quick] [--reps N]
//! ```
//!
//! The bench starts its own processes: this binary re-executed as the gRPC backend
//! (`--role-backend`, a tonic server whose work is minimal and identical for both paths),
//! the real gateway binary (release build) in front of it, and itself as load generator
//! (keep-alive HTTP/1.1 connections to the gateway, tonic channels to the backend). Every
//! loop is bounded in count and time and talks to 127.0.0.1 only. CPU time per call of each
//! process comes from `/proc/PID/stat` (utime + stime) over the measured window.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
use a2a_gateway::proto::a2a_service_server::{A2aService, A2aServiceServer};
use a2a_gateway::proto::{
    send_message_response, stream_response, AgentCard, Artifact, CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, Message, Part,
    Role, SendMessageRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task,
    TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent, Timestamp,
};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};
use tonic::{Response, Status};

const ROLE_BACKEND: &str = "--role-backend";
const ROLE_RELAY: &str = "--role-relay";
const GATEWAY_BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
/// USER_HZ: the unit of utime/stime in /proc/PID/stat (100 on every Linux ABI).
const CLK_TCK: f64 = 100.0;
/// No single call of the load generator may take longer than this.
const CALL_LIMIT: Duration = Duration::from_secs(10);
const FAN_STREAMS: usize = 10_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(ROLE_BACKEND) => return backend_main(),
        Some(ROLE_RELAY) => return relay_main(args.get(1).expect("relay's backend")),
        _ => {}
    }
    let opts = Options::parse(&args);
    raise_nofile();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(opts));
}

// ---------------------------------------------------------------- options

const SCENARIOS: &[&str] = &[
    "unary-small-32",
    "unary-16k-32",
    "get-task-32",
    "unary-small-1",
    "unary-16k-1",
    "get-task-1",
    "fixed-rate",
    "stream",
    "fan-in",
    "sdk",
    "jwt-32",
    "grpc-front-32",
    "many-routes",
    "relay-1",
    "relay-32",
];

struct Options {
    scenarios: Vec<&'static str>,
    quick: bool,
    reps: usize,
}

impl Options {
    fn parse(args: &[String]) -> Options {
        let mut quick = false;
        let mut reps = None;
        let mut picked = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--bench" => {} // added by `cargo bench`
                "--quick" => quick = true,
                "--reps" => reps = it.next().and_then(|n| n.parse().ok()),
                name => {
                    let matched: Vec<_> = SCENARIOS
                        .iter()
                        .filter(|s| **s == name || s.starts_with(name))
                        .collect();
                    if matched.is_empty() {
                        eprintln!("unknown scenario {name:?}; known: {}", SCENARIOS.join(" "));
                        std::process::exit(2);
                    }
                    picked.extend(matched);
                }
            }
        }
        let scenarios = if picked.is_empty() {
            SCENARIOS.to_vec()
        } else {
            SCENARIOS
                .iter()
                .copied()
                .filter(|s| picked.contains(&s))
                .collect()
        };
        Options {
            scenarios,
            quick,
            reps: reps.unwrap_or(3).max(1),
        }
    }

    fn warmup(&self) -> Duration {
        Duration::from_millis(if self.quick { 300 } else { 1000 })
    }

    fn window(&self) -> Duration {
        Duration::from_millis(if self.quick { 1500 } else { 4000 })
    }
}

// ---------------------------------------------------------------- processes

/// A child process, killed when dropped.
struct Proc {
    child: Child,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// utime + stime of a whole process, in seconds.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    // Fields after the command: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok());
    (ticks(14).unwrap_or(0) + ticks(15).unwrap_or(0)) as f64 / CLK_TCK
}

/// Resident set size in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn raise_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let want = 65_536u64;
    let hard = limit.maximum.map_or(want, |m| m.max(want));
    // Root may raise the hard limit; anyone may raise the soft one up to it.
    let raised = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(want),
            maximum: Some(hard),
        },
    );
    if raised.is_err() {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        );
    }
}

fn start_backend() -> (Proc, SocketAddr) {
    start_role(&[ROLE_BACKEND])
}

/// This binary re-executed in a role (`args`), and the address it says it listens on.
fn start_role(args: &[&str]) -> (Proc, SocketAddr) {
    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start role");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("role's address");
    let addr = line
        .trim()
        .strip_prefix("LISTEN ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{args:?} said {line:?}"));
    (Proc { child }, addr)
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// The gateway in front of `backend`, with the defaults and then `extra` flags.
async fn start_gateway(backend: SocketAddr, extra: &[&str]) -> (Proc, SocketAddr) {
    let backend = format!("http://{backend}");
    let args: Vec<&str> = ["--backend", &backend]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    launch_gateway(&args).await
}

/// The gateway with the defaults and then `args` (which name its backends).
async fn launch_gateway(args: &[&str]) -> (Proc, SocketAddr) {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    // OVERHEAD_GATEWAY_BIN: another gateway build, for before/after comparisons.
    let bin = std::env::var("OVERHEAD_GATEWAY_BIN").unwrap_or_else(|_| GATEWAY_BIN.to_owned());
    let mut command = Command::new(bin);
    // For experiments: the gateway's serving threads (the bench's own are unaffected).
    // Builds before the worker threads (before 9144fb5) read TOKIO_WORKER_THREADS.
    if let Ok(threads) = std::env::var("OVERHEAD_GATEWAY_THREADS") {
        command.env("A2A_GATEWAY_WORKERS", &threads);
        command.env("TOKIO_WORKER_THREADS", threads);
    }
    // As users run it: the access log on (the default), the default log level, stderr to a
    // file. OVERHEAD_ACCESS_LOG=false measures the gateway without its access lines.
    let access_log = std::env::var("OVERHEAD_ACCESS_LOG").unwrap_or_else(|_| "true".into());
    let log = std::fs::File::create(gateway_log()).expect("gateway log file");
    let child = command
        .args(["--listen", &addr.to_string()])
        .args(["--access-log", &access_log])
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start gateway");
    let proc = Proc { child };
    wait_listening(addr).await;
    (proc, addr)
}

/// Where the gateway the bench started last writes its log (stderr).
fn gateway_log() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("overhead-gateway-{}.log", std::process::id()))
}

async fn wait_listening(addr: SocketAddr) {
    let started = Instant::now();
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing listens on {addr}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The processes whose CPU time a row reports.
#[derive(Clone, Copy)]
struct Pids {
    gateway: Option<u32>,
    backend: u32,
}

#[derive(Clone, Copy, Default)]
struct Cpu {
    gateway: f64,
    backend: f64,
    loadgen: f64,
}

impl Cpu {
    fn now(pids: Pids) -> Cpu {
        Cpu {
            gateway: pids.gateway.map_or(0.0, cpu_secs),
            backend: cpu_secs(pids.backend),
            loadgen: cpu_secs(std::process::id()),
        }
    }

    fn since(self, start: Cpu) -> Cpu {
        Cpu {
            gateway: self.gateway - start.gateway,
            backend: self.backend - start.backend,
            loadgen: self.loadgen - start.loadgen,
        }
    }
}

// ---------------------------------------------------------------- the backend role

/// The bench backend: echoes messages, answers GetTask with a fixed task, streams
/// `stream:N` frames as fast as it can, and holds SubscribeToTask streams open, sending
/// one event per second on each while ticking is switched on (`control:tick`).
#[derive(Clone)]
struct BenchBackend {
    task: Task,
    ticking: Arc<tokio::sync::watch::Sender<bool>>,
}

type Events = BoxStream<'static, Result<StreamResponse, Status>>;

fn first_text(message: &Message) -> Option<&str> {
    message.parts.iter().find_map(|p| match &p.content {
        Some(a2a_gateway::proto::part::Content::Text(t)) => Some(t.as_str()),
        _ => None,
    })
}

fn text_part(text: &str) -> Part {
    Part {
        content: Some(a2a_gateway::proto::part::Content::Text(text.to_owned())),
        ..Part::default()
    }
}

fn status_event(task_id: &str, context_id: &str) -> StreamResponse {
    StreamResponse {
        payload: Some(stream_response::Payload::StatusUpdate(
            TaskStatusUpdateEvent {
                task_id: task_id.to_owned(),
                context_id: context_id.to_owned(),
                status: Some(TaskStatus {
                    state: TaskState::Working as i32,
                    message: None,
                    timestamp: Some(Timestamp {
                        seconds: 1_767_225_600,
                        nanos: 0,
                    }),
                }),
                metadata: None,
            },
        )),
    }
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn bench_task() -> Task {
    let message = |id: &str, role: Role, text: &str| Message {
        message_id: id.to_owned(),
        context_id: "ctx-1".to_owned(),
        task_id: "task-1".to_owned(),
        role: role as i32,
        parts: vec![text_part(text)],
        ..Message::default()
    };
    Task {
        id: "task-1".to_owned(),
        context_id: "ctx-1".to_owned(),
        status: Some(TaskStatus {
            state: TaskState::Completed as i32,
            message: None,
            timestamp: Some(Timestamp {
                seconds: 1_767_225_600,
                nanos: 250_000_000,
            }),
        }),
        artifacts: vec![Artifact {
            artifact_id: "a-1".to_owned(),
            name: "result".to_owned(),
            parts: vec![text_part(&"r".repeat(120))],
            ..Artifact::default()
        }],
        history: vec![
            message("m-1", Role::User, "summarise the quarterly report"),
            message("m-2", Role::Agent, "working on it"),
        ],
        metadata: None,
    }
}

#[tonic::async_trait]
impl A2aService for BenchBackend {
    async fn send_message(
        &self,
        request: tonic::Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let mut message = request.into_inner().message.unwrap_or_default();
        if let Some(command) = first_text(&message).and_then(|t| t.strip_prefix("control:")) {
            self.ticking.send_replace(command == "tick");
        }
        message.role = Role::Agent as i32;
        Ok(Response::new(SendMessageResponse {
            payload: Some(send_message_response::Payload::Message(message)),
        }))
    }

    type SendStreamingMessageStream = Events;

    async fn send_streaming_message(
        &self,
        request: tonic::Request<SendMessageRequest>,
    ) -> Result<Response<Events>, Status> {
        let message = request.into_inner().message.unwrap_or_default();
        let frames: usize = first_text(&message)
            .and_then(|t| t.strip_prefix("stream:"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        let event = status_event("task-stream", "ctx-stream");
        let events = futures::stream::iter((0..frames).map(move |_| Ok(event.clone())));
        Ok(Response::new(events.boxed()))
    }

    async fn get_task(
        &self,
        _request: tonic::Request<GetTaskRequest>,
    ) -> Result<Response<Task>, Status> {
        Ok(Response::new(self.task.clone()))
    }

    async fn list_tasks(
        &self,
        _request: tonic::Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        Err(Status::unimplemented("not in the bench"))
    }

    async fn cancel_task(
        &self,
        _request: tonic::Request<CancelTaskRequest>,
    ) -> Result<Response<Task>, Status> {
        Err(Status::unimplemented("not in the bench"))
    }

    type SubscribeToTaskStream = Events;

    async fn subscribe_to_task(
        &self,
        request: tonic::Request<SubscribeToTaskRequest>,
    ) -> Result<Response<Events>, Status> {
        let id = request.into_inner().id;
        let k: u64 = id
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        // Streams tick at evenly spread phases, so events arrive at a steady rate.
        let phase = Duration::from_micros(k * 1_000_000 / FAN_STREAMS as u64 % 1_000_000);
        let first = StreamResponse {
            payload: Some(stream_response::Payload::Task(Task {
                id: id.clone(),
                context_id: "ctx".to_owned(),
                status: Some(TaskStatus {
                    state: TaskState::Working as i32,
                    ..TaskStatus::default()
                }),
                ..Task::default()
            })),
        };
        let state = (self.ticking.subscribe(), None::<tokio::time::Interval>, id);
        let ticks = futures::stream::unfold(state, move |(mut rx, mut interval, id)| async move {
            loop {
                if !*rx.borrow_and_update() {
                    interval = None;
                    rx.changed().await.ok()?;
                    continue;
                }
                let iv = interval.get_or_insert_with(|| {
                    let start = tokio::time::Instant::now() + phase;
                    let mut iv = tokio::time::interval_at(start, Duration::from_secs(1));
                    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    iv
                });
                let fired = tokio::select! {
                    _ = iv.tick() => true,
                    changed = rx.changed() => {
                        changed.ok()?;
                        false
                    }
                };
                if fired {
                    let event = status_event(&id, &unix_nanos().to_string());
                    return Some((Ok(event), (rx, interval, id)));
                }
            }
        });
        Ok(Response::new(
            futures::stream::iter([Ok(first)]).chain(ticks).boxed(),
        ))
    }

    async fn create_task_push_notification_config(
        &self,
        _request: tonic::Request<TaskPushNotificationConfig>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        Err(Status::unimplemented("not in the bench"))
    }

    async fn get_task_push_notification_config(
        &self,
        _request: tonic::Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        Err(Status::unimplemented("not in the bench"))
    }

    async fn list_task_push_notification_configs(
        &self,
        _request: tonic::Request<ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigsResponse>, Status> {
        Err(Status::unimplemented("not in the bench"))
    }

    async fn get_extended_agent_card(
        &self,
        _request: tonic::Request<GetExtendedAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        Err(Status::unimplemented("not in the bench"))
    }

    async fn delete_task_push_notification_config(
        &self,
        _request: tonic::Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        Err(Status::unimplemented("not in the bench"))
    }
}

fn backend_main() {
    exit_with_bench();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        println!("LISTEN {}", listener.local_addr().expect("addr"));
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
            if let Ok(conn) = &conn {
                let _ = conn.set_nodelay(true);
            }
            conn
        });
        let backend = BenchBackend {
            task: bench_task(),
            ticking: Arc::new(tokio::sync::watch::channel(false).0),
        };
        let service = A2aServiceServer::new(backend)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        tonic::transport::Server::builder()
            // The fan-in scenario holds 10,000 streams on the gateway's one connection.
            .max_concurrent_streams(Some(2 * FAN_STREAMS as u32))
            .add_service(service)
            .serve_with_incoming(incoming)
            .await
            .expect("serve");
    });
}

/// Exits this process once the bench's end of its stdin closes: a role lives as long as
/// the bench.
fn exit_with_bench() {
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
}

/// A bare TCP relay in front of `backend`: each connection is copied both ways by one task
/// (`tokio::io::copy_bidirectional`), nothing is parsed. What it adds is what the extra hop
/// of any proxy costs on this machine (two more socket round trips per call, one more
/// process to wake twice), so the gateway's own share is what it adds beyond the relay.
/// One thread, as cheap as a relay gets: no wake-up crosses threads.
fn relay_main(backend: &str) {
    exit_with_bench();
    let backend: SocketAddr = backend.parse().expect("relay's backend address");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        println!("LISTEN {}", listener.local_addr().expect("addr"));
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let Ok(mut upstream) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
}

// ---------------------------------------------------------------- calls

/// What one unary call sends.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// SendMessage whose JSON-RPC body is about this many bytes.
    Send(usize),
    GetTask,
}

impl Kind {
    fn text(self) -> String {
        match self {
            // The JSON-RPC envelope and message around the text take 124 bytes.
            Kind::Send(size) => "x".repeat(size.saturating_sub(124).max(1)),
            Kind::GetTask => String::new(),
        }
    }

    fn json(self) -> Bytes {
        let body = match self {
            Kind::Send(_) => format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m-1","role":"ROLE_USER","parts":[{{"text":"{}"}}]}}}}}}"#,
                self.text()
            ),
            Kind::GetTask => {
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-1"}}"#.to_owned()
            }
        };
        Bytes::from(body)
    }

    fn send_request(text: &str) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message {
                message_id: "m-1".to_owned(),
                role: Role::User as i32,
                parts: vec![text_part(text)],
                ..Message::default()
            }),
            ..SendMessageRequest::default()
        }
    }
}

/// One keep-alive connection of the load generator (a few per run: size does not matter).
#[allow(clippy::large_enum_variant)]
enum Conn {
    Http {
        sender: Sender,
        host: String,
        path: &'static str,
        body: Bytes,
        /// `Authorization` of every request (`Target::Bearer`).
        authorization: Option<&'static str>,
    },
    Grpc {
        client: A2aServiceClient<Channel>,
        kind: Kind,
        send: SendMessageRequest,
    },
}

/// A keep-alive connection's request half: HTTP/1.1, or HTTP/2 with prior knowledge (h2c).
enum Sender {
    Http1(SendRequest<Full<Bytes>>),
    H2c(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    async fn ready(&mut self) -> hyper::Result<()> {
        match self {
            Sender::Http1(sender) => sender.ready().await,
            Sender::H2c(sender) => sender.ready().await,
        }
    }

    async fn send(
        &mut self,
        mut request: http::Request<Full<Bytes>>,
    ) -> hyper::Result<http::Response<hyper::body::Incoming>> {
        match self {
            Sender::Http1(sender) => sender.send_request(request).await,
            Sender::H2c(sender) => {
                // HTTP/2 names the host in `:authority`, from an absolute URI.
                let host = request.headers_mut().remove(http::header::HOST);
                let host = host.as_ref().and_then(|h| h.to_str().ok()).unwrap_or("");
                let uri = format!("http://{host}{}", request.uri().path());
                *request.uri_mut() = uri.parse().expect("uri");
                sender.send_request(request).await
            }
        }
    }
}

async fn h2c_sender(addr: SocketAddr) -> Sender {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(tcp),
    )
    .await
    .expect("handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Sender::H2c(sender)
}

async fn http_sender(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .expect("handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
}

fn http_request(host: &str, path: &str, body: Bytes) -> http::Request<Full<Bytes>> {
    http::Request::post(path)
        .header(http::header::HOST, host)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header("a2a-version", "1.0")
        .body(Full::new(body))
        .expect("request")
}

async fn grpc_client(addr: SocketAddr) -> A2aServiceClient<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .tcp_nodelay(true)
        .connect()
        .await
        .expect("connect");
    A2aServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

fn versioned<T>(msg: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(msg);
    request.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    request
}

/// Where the load goes.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// JSON-RPC at this address and path (the gateway, or the SDK's own endpoint).
    Http(SocketAddr, &'static str),
    /// The gateway's JSON-RPC endpoint at this address, with this `Authorization`.
    Bearer(SocketAddr, &'static str),
    /// JSON-RPC at this address and path over HTTP/2 with prior knowledge (h2c).
    H2c(SocketAddr, &'static str),
    /// The backend directly over gRPC.
    Grpc(SocketAddr),
}

impl Conn {
    async fn open(target: Target, kind: Kind) -> Conn {
        match target {
            Target::Http(addr, path) => Conn::Http {
                sender: Sender::Http1(http_sender(addr).await),
                host: addr.to_string(),
                path,
                body: kind.json(),
                authorization: None,
            },
            Target::H2c(addr, path) => Conn::Http {
                sender: h2c_sender(addr).await,
                host: addr.to_string(),
                path,
                body: kind.json(),
                authorization: None,
            },
            Target::Bearer(addr, authorization) => Conn::Http {
                sender: Sender::Http1(http_sender(addr).await),
                host: addr.to_string(),
                path: "/a2a/jsonrpc",
                body: kind.json(),
                authorization: Some(authorization),
            },
            Target::Grpc(addr) => Conn::Grpc {
                client: grpc_client(addr).await,
                kind,
                send: Kind::send_request(&kind.text()),
            },
        }
    }

    async fn call(&mut self) -> Result<(), String> {
        match tokio::time::timeout(CALL_LIMIT, self.call_once()).await {
            Ok(result) => result,
            Err(_) => Err("call timed out".to_owned()),
        }
    }

    async fn call_once(&mut self) -> Result<(), String> {
        match self {
            Conn::Http {
                sender,
                host,
                path,
                body,
                authorization,
            } => {
                sender.ready().await.map_err(|e| e.to_string())?;
                let mut request = http_request(host, path, body.clone());
                if let Some(authorization) = authorization {
                    let value = http::HeaderValue::from_static(authorization);
                    request
                        .headers_mut()
                        .insert(http::header::AUTHORIZATION, value);
                }
                let response = sender.send(request).await.map_err(|e| e.to_string())?;
                let status = response.status();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?
                    .to_bytes();
                let ok = status == http::StatusCode::OK
                    && memchr::memmem::find(&body[..body.len().min(64)], b"\"result\"").is_some();
                if ok {
                    Ok(())
                } else {
                    Err(format!("{status}: {}", String::from_utf8_lossy(&body)))
                }
            }
            Conn::Grpc { client, kind, send } => {
                match kind {
                    Kind::Send(_) => {
                        client
                            .send_message(versioned(send.clone()))
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    Kind::GetTask => {
                        let request = GetTaskRequest {
                            id: "task-1".to_owned(),
                            ..GetTaskRequest::default()
                        };
                        client
                            .get_task(versioned(request))
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                }
                Ok(())
            }
        }
    }
}

// ---------------------------------------------------------------- measurements

/// One measured window.
#[derive(Clone, Default)]
struct Sample {
    /// Completed calls (or frames) per second.
    rate: f64,
    /// Latencies in nanoseconds, sorted.
    latencies: Vec<u64>,
    /// CPU seconds per call (or frame) of each process.
    per_call: Cpu,
    /// Calls (or frames) counted.
    count: u64,
}

impl Sample {
    /// One sample of several windows of the same scenario and path.
    fn merge(parts: Vec<Sample>) -> Sample {
        let count: u64 = parts.iter().map(|p| p.count).sum();
        let secs: f64 = parts
            .iter()
            .map(|p| p.count as f64 / p.rate.max(1e-9))
            .sum();
        let total =
            |f: fn(&Cpu) -> f64| parts.iter().map(|p| f(&p.per_call) * p.count as f64).sum();
        let cpu = Cpu {
            gateway: total(|c| c.gateway),
            backend: total(|c| c.backend),
            loadgen: total(|c| c.loadgen),
        };
        let latencies = parts.into_iter().flat_map(|p| p.latencies).collect();
        Sample::new(count, secs, latencies, cpu)
    }

    fn new(count: u64, secs: f64, mut latencies: Vec<u64>, cpu: Cpu) -> Sample {
        latencies.sort_unstable();
        let n = count.max(1) as f64;
        Sample {
            rate: count as f64 / secs,
            latencies,
            per_call: Cpu {
                gateway: cpu.gateway / n,
                backend: cpu.backend / n,
                loadgen: cpu.loadgen / n,
            },
            count,
        }
    }

    fn pct_us(&self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let i = ((p / 100.0) * (self.latencies.len() - 1) as f64).round() as usize;
        self.latencies[i] as f64 / 1000.0
    }
}

/// N clients, each calling back to back for warm-up + window; the window is measured.
async fn closed_loop(
    target: Target,
    kind: Kind,
    clients: usize,
    pids: Pids,
    warmup: Duration,
    window: Duration,
) -> Sample {
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(Conn::open(target, kind).await);
    }
    let start = Instant::now() + warmup;
    let end = start + window;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(1 << 16);
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    if let Err(e) = conn.call().await {
                        panic!("call failed: {e}");
                    }
                    let t1 = Instant::now();
                    if t0 >= start && t1 <= end {
                        latencies.push((t1 - t0).as_nanos() as u64);
                    }
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep_until(start.into()).await;
    let cpu0 = Cpu::now(pids);
    tokio::time::sleep_until(end.into()).await;
    let cpu = Cpu::now(pids).since(cpu0);
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("client task"));
    }
    Sample::new(latencies.len() as u64, window.as_secs_f64(), latencies, cpu)
}

/// `rate` calls per second spread round-robin over `conns` connections (open loop).
/// A call whose connection was still busy at its scheduled time is timed from that
/// time (no coordinated omission); otherwise from when it was sent (timer jitter of the
/// load generator is not the server's).
async fn fixed_rate(
    target: Target,
    kind: Kind,
    conns: usize,
    rate: u64,
    pids: Pids,
    warmup: Duration,
    window: Duration,
) -> Sample {
    let mut opened = Vec::new();
    for _ in 0..conns {
        opened.push(Conn::open(target, kind).await);
    }
    let t0 = Instant::now() + Duration::from_millis(100);
    let measured_from = t0 + warmup;
    let total = rate * (warmup + window).as_millis() as u64 / 1000;
    let first_measured = rate * warmup.as_millis() as u64 / 1000;
    let late = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = opened
        .into_iter()
        .enumerate()
        .map(|(c, mut conn)| {
            let late = late.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut i = c as u64;
                while i < total {
                    let scheduled = t0 + Duration::from_nanos(i * 1_000_000_000 / rate);
                    let now = Instant::now();
                    let from = if now < scheduled {
                        tokio::time::sleep_until(scheduled.into()).await;
                        Instant::now()
                    } else {
                        late.fetch_add(1, Ordering::Relaxed);
                        scheduled
                    };
                    if let Err(e) = conn.call().await {
                        panic!("call failed: {e}");
                    }
                    if i >= first_measured {
                        latencies.push((Instant::now() - from).as_nanos() as u64);
                    }
                    i += conns as u64;
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep_until(measured_from.into()).await;
    let cpu0 = Cpu::now(pids);
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("client task"));
    }
    let secs = measured_from.elapsed().as_secs_f64();
    let cpu = Cpu::now(pids).since(cpu0);
    let mut sample = Sample::new(latencies.len() as u64, secs, latencies, cpu);
    sample.rate = sample.count as f64 / window.as_secs_f64();
    sample
}

fn stream_body(frames: usize) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{{"message":{{"messageId":"m-1","role":"ROLE_USER","parts":[{{"text":"stream:{frames}"}}]}}}}}}"#
    ))
}

/// Reads one SSE stream to its end; returns (frames, time of the first frame).
async fn read_sse(
    sender: &mut SendRequest<Full<Bytes>>,
    host: &str,
    body: Bytes,
) -> (u64, Instant) {
    sender.ready().await.expect("ready");
    let response = sender
        .send_request(http_request(host, "/a2a/jsonrpc", body))
        .await
        .expect("response");
    assert_eq!(response.status(), http::StatusCode::OK);
    let mut body = response.into_body();
    let mut frames = 0u64;
    let mut first = None;
    let mut last_newline = false;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.expect("body").into_data() else {
            continue;
        };
        // Frames end with a blank line; JSON text never holds a raw newline.
        if last_newline && data.first() == Some(&b'\n') {
            frames += 1;
        }
        frames += memchr::memmem::find_iter(&data, b"\n\n").count() as u64;
        last_newline = data.last() == Some(&b'\n');
        if frames > 0 && first.is_none() {
            first = Some(Instant::now());
        }
    }
    (frames, first.unwrap_or_else(Instant::now))
}

/// Frames per second of one long stream, with CPU per frame.
async fn stream_rate(target: Target, frames: usize, pids: Pids) -> Sample {
    let cpu0 = Cpu::now(pids);
    let started = Instant::now();
    let got = match target {
        Target::Http(addr, _) => {
            let mut sender = http_sender(addr).await;
            read_sse(&mut sender, &addr.to_string(), stream_body(frames))
                .await
                .0
        }
        Target::Bearer(..) | Target::H2c(..) => {
            unreachable!("streams are measured over HTTP/1.1 without a token")
        }
        Target::Grpc(addr) => {
            let mut client = grpc_client(addr).await;
            let request = Kind::send_request(&format!("stream:{frames}"));
            let mut stream = client
                .send_streaming_message(versioned(request))
                .await
                .expect("stream")
                .into_inner();
            let mut n = 0u64;
            while stream.message().await.expect("frame").is_some() {
                n += 1;
            }
            n
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let cpu = Cpu::now(pids).since(cpu0);
    assert_eq!(got, frames as u64, "frames lost");
    Sample::new(got, secs, Vec::new(), cpu)
}

/// Time to first frame over `calls` sequential streams of `frames` frames, one client.
async fn stream_first_frame(target: Target, calls: usize, frames: usize, pids: Pids) -> Sample {
    let cpu0 = Cpu::now(pids);
    let started = Instant::now();
    let mut latencies = Vec::new();
    match target {
        Target::Http(addr, _) => {
            let mut sender = http_sender(addr).await;
            let host = addr.to_string();
            for _ in 0..calls {
                let t0 = Instant::now();
                let (got, first) = read_sse(&mut sender, &host, stream_body(frames)).await;
                assert_eq!(got, frames as u64);
                latencies.push((first - t0).as_nanos() as u64);
            }
        }
        Target::Bearer(..) | Target::H2c(..) => {
            unreachable!("streams are measured over HTTP/1.1 without a token")
        }
        Target::Grpc(addr) => {
            let mut client = grpc_client(addr).await;
            for _ in 0..calls {
                let t0 = Instant::now();
                let request = Kind::send_request(&format!("stream:{frames}"));
                let mut stream = client
                    .send_streaming_message(versioned(request))
                    .await
                    .expect("stream")
                    .into_inner();
                stream.message().await.expect("frame").expect("first frame");
                latencies.push(t0.elapsed().as_nanos() as u64);
                while stream.message().await.expect("frame").is_some() {}
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = Cpu::now(pids).since(cpu0);
    Sample::new(calls as u64, secs, latencies, cpu)
}

// ---------------------------------------------------------------- results

fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The medians of several samples of one path.
#[derive(Clone, Copy)]
struct Summary {
    rate: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    cpu: Cpu,
}

fn summarize(samples: &[Sample]) -> Summary {
    let m = |f: &dyn Fn(&Sample) -> f64| median(samples.iter().map(f).collect());
    Summary {
        rate: m(&|s| s.rate),
        p50: m(&|s| s.pct_us(50.0)),
        p90: m(&|s| s.pct_us(90.0)),
        p99: m(&|s| s.pct_us(99.0)),
        cpu: Cpu {
            gateway: m(&|s| s.per_call.gateway),
            backend: m(&|s| s.per_call.backend),
            loadgen: m(&|s| s.per_call.loadgen),
        },
    }
}

struct Row {
    scenario: String,
    path: String,
    rate: String,
    p50: String,
    p90: String,
    p99: String,
    gateway: String,
    backend: String,
    loadgen: String,
    note: String,
}

fn us(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.0}")
    } else {
        "-".to_owned()
    }
}

fn us1(v: f64) -> String {
    if v.is_finite() && v > 0.0 {
        format!("{:.1}", v * 1e6)
    } else {
        "-".to_owned()
    }
}

impl Row {
    fn from(scenario: &str, path: &str, s: Summary, note: String) -> Row {
        Row {
            scenario: scenario.to_owned(),
            path: path.to_owned(),
            rate: format!("{:.0}", s.rate),
            p50: us(s.p50),
            p90: us(s.p90),
            p99: us(s.p99),
            gateway: us1(s.cpu.gateway),
            backend: us1(s.cpu.backend),
            loadgen: us1(s.cpu.loadgen),
            note,
        }
    }

    fn text(scenario: &str, path: &str, note: String) -> Row {
        let dash = || "-".to_owned();
        Row {
            scenario: scenario.to_owned(),
            path: path.to_owned(),
            rate: dash(),
            p50: dash(),
            p90: dash(),
            p99: dash(),
            gateway: dash(),
            backend: dash(),
            loadgen: dash(),
            note,
        }
    }
}

fn print_table(rows: &[Row], opts: &Options) {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        out,
        "\na2a-gateway overhead: {cores} cores, medians of {} repetitions{}; latencies in µs; \
         CPU in µs per call (frame) of each process",
        opts.reps,
        if opts.quick { " (--quick)" } else { "" }
    );
    let _ = writeln!(
        out,
        "{:<16} {:<8} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}  note",
        "scenario", "path", "calls/s", "p50", "p90", "p99", "gw cpu", "be cpu", "lg cpu"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<16} {:<8} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}  {}",
            r.scenario,
            r.path,
            r.rate,
            r.p50,
            r.p90,
            r.p99,
            r.gateway,
            r.backend,
            r.loadgen,
            r.note
        );
    }
    let _ = writeln!(
        out,
        "\nreproduce a row: cargo bench --bench overhead -- SCENARIO [--quick]"
    );
    let mut seen = Vec::new();
    for r in rows {
        if !seen.contains(&r.scenario) {
            seen.push(r.scenario.clone());
        }
    }
    for s in seen {
        // Rows are named after their scenario, except the streams' second row.
        let scenario = s.strip_suffix("-first").unwrap_or(&s);
        let _ = writeln!(out, "  {s:<16} cargo bench --bench overhead -- {scenario}");
    }
    println!("{out}");
}

// ---------------------------------------------------------------- scenarios

struct Setup {
    backend: Proc,
    backend_addr: SocketAddr,
    gateway: Proc,
    gateway_addr: SocketAddr,
}

impl Setup {
    fn pids(&self, through_gateway: bool) -> Pids {
        Pids {
            gateway: through_gateway.then(|| self.gateway.pid()),
            backend: self.backend.pid(),
        }
    }
}

async fn run(opts: Options) {
    let (backend, backend_addr) = start_backend();
    let (gateway, gateway_addr) = start_gateway(backend_addr, &[]).await;
    let setup = Setup {
        backend,
        backend_addr,
        gateway,
        gateway_addr,
    };
    eprintln!(
        "backend pid {} at {backend_addr}; gateway pid {} at {gateway_addr}",
        setup.backend.pid(),
        setup.gateway.pid()
    );
    let mut rows = Vec::new();
    for scenario in &opts.scenarios {
        eprintln!("== {scenario}");
        let started = Instant::now();
        match *scenario {
            "unary-small-32" => {
                rows.extend(unary(&setup, &opts, scenario, Kind::Send(200), 32).await)
            }
            "unary-16k-32" => {
                rows.extend(unary(&setup, &opts, scenario, Kind::Send(16_384), 32).await)
            }
            "get-task-32" => rows.extend(unary(&setup, &opts, scenario, Kind::GetTask, 32).await),
            "unary-small-1" => {
                rows.extend(unary(&setup, &opts, scenario, Kind::Send(200), 1).await)
            }
            "unary-16k-1" => {
                rows.extend(unary(&setup, &opts, scenario, Kind::Send(16_384), 1).await)
            }
            "get-task-1" => rows.extend(unary(&setup, &opts, scenario, Kind::GetTask, 1).await),
            "fixed-rate" => rows.extend(rate_scenario(&setup, &opts).await),
            "stream" => rows.extend(stream_scenario(&setup, &opts).await),
            "fan-in" => rows.extend(fan_in(&setup, &opts).await),
            "sdk" => rows.extend(sdk(&opts).await),
            "jwt-32" => rows.extend(jwt(&setup, &opts).await),
            "grpc-front-32" => rows.extend(grpc_front(&setup, &opts).await),
            "many-routes" => rows.extend(many_routes(&setup, &opts).await),
            "relay-1" => rows.extend(relay(&setup, &opts, scenario, 1).await),
            "relay-32" => rows.extend(relay(&setup, &opts, scenario, 32).await),
            _ => unreachable!(),
        }
        eprintln!("   {:.1} s", started.elapsed().as_secs_f64());
    }
    eprintln!(
        "gateway RSS after the run: {:.1} MiB",
        rss_mib(setup.gateway.pid())
    );
    print_table(&rows, &opts);
}

fn added(gw: Summary, direct: Summary) -> String {
    format!(
        "adds p50 {:+.0} µs, p99 {:+.0} µs",
        gw.p50 - direct.p50,
        gw.p99 - direct.p99
    )
}

/// The gateway path and the other path measured in A-B-A order, `reps` times: this VM's
/// speed drifts by tens of percent within a minute, so a ratio of medians taken minutes
/// apart moved by ±0.1 for one binary; each repetition's ratio (the mean of its two
/// gateway windows over the window between them) cancels a drift that is linear over the
/// repetition. Returns every gateway window, every other window and the paired ratios.
async fn paired_windows(
    reps: usize,
    mut gateway: impl AsyncFnMut() -> Sample,
    mut other: impl AsyncFnMut() -> Sample,
) -> (Vec<Sample>, Vec<Sample>, Vec<f64>) {
    let (mut gw, mut others, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let before = gateway().await;
        let between = other().await;
        let after = gateway().await;
        ratios.push((before.rate + after.rate) / 2.0 / between.rate);
        gw.extend([before, after]);
        others.push(between);
    }
    (gw, others, ratios)
}

/// "ratio M (lo–hi over N A-B-A pairs)", and the gateway's CPU per call over the backend's.
fn paired_ratio(ratios: &[f64], gw: Summary) -> String {
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    format!(
        "ratio {:.2} ({lo:.2}–{hi:.2} over {} A-B-A); gw cpu {:.2}× be",
        median(ratios.to_vec()),
        ratios.len(),
        gw.cpu.gateway / gw.cpu.backend
    )
}

async fn unary(setup: &Setup, opts: &Options, name: &str, kind: Kind, clients: usize) -> Vec<Row> {
    let gw_target = Target::Http(setup.gateway_addr, "/a2a/jsonrpc");
    let direct_target = Target::Grpc(setup.backend_addr);
    let (w, win) = (opts.warmup(), opts.window());
    let (gw, direct, ratios) = paired_windows(
        opts.reps,
        async || closed_loop(gw_target, kind, clients, setup.pids(true), w, win).await,
        async || closed_loop(direct_target, kind, clients, setup.pids(false), w, win).await,
    )
    .await;
    let (g, d) = (summarize(&gw), summarize(&direct));
    let note = format!("{}; {}", paired_ratio(&ratios, g), added(g, d));
    vec![
        Row::from(name, "gateway", g, note),
        Row::from(name, "direct", d, String::new()),
    ]
}

async fn rate_scenario(setup: &Setup, opts: &Options) -> Vec<Row> {
    // Each path gets its window in 5 s slices, alternating with the other path's. This VM
    // pauses now and then for tens of milliseconds (host steal); with one 30 s window per
    // path, such a pause inflated whichever path it hit, and a p99 ratio swung between
    // 0.5 and 20 from run to run. Alternating slices expose both paths to the same phases.
    let slices = if opts.quick { 1 } else { 6 };
    let slice = Duration::from_secs(5);
    let warmup = Duration::from_secs(1);
    let kind = Kind::Send(1024);
    let mut gw = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..opts.reps {
        let (mut gw_slices, mut direct_slices) = (Vec::new(), Vec::new());
        for _ in 0..slices {
            let target = Target::Http(setup.gateway_addr, "/a2a/jsonrpc");
            let pids = setup.pids(true);
            gw_slices.push(fixed_rate(target, kind, 32, 3000, pids, warmup, slice).await);
            let target = Target::Grpc(setup.backend_addr);
            let pids = setup.pids(false);
            direct_slices.push(fixed_rate(target, kind, 32, 3000, pids, warmup, slice).await);
        }
        gw.push(Sample::merge(gw_slices));
        direct.push(Sample::merge(direct_slices));
    }
    let (g, d) = (summarize(&gw), summarize(&direct));
    let note = format!(
        "3000/s x {} s in 5 s slices, 32 conns; p99 ratio {:.2}; p90 ratio {:.2}",
        slices * 5,
        g.p99 / d.p99,
        g.p90 / d.p90
    );
    vec![
        Row::from("fixed-rate", "gateway", g, note),
        Row::from("fixed-rate", "direct", d, String::new()),
    ]
}

async fn stream_scenario(setup: &Setup, opts: &Options) -> Vec<Row> {
    let frames = if opts.quick { 100_000 } else { 500_000 };
    let calls = if opts.quick { 500 } else { 2000 };
    let gw_target = Target::Http(setup.gateway_addr, "/a2a/jsonrpc");
    let direct_target = Target::Grpc(setup.backend_addr);
    let (mut gw, mut direct, mut gw_first, mut direct_first) = (vec![], vec![], vec![], vec![]);
    for _ in 0..opts.reps {
        gw.push(stream_rate(gw_target, frames, setup.pids(true)).await);
        direct.push(stream_rate(direct_target, frames, setup.pids(false)).await);
        gw_first.push(stream_first_frame(gw_target, calls, 10, setup.pids(true)).await);
        direct_first.push(stream_first_frame(direct_target, calls, 10, setup.pids(false)).await);
    }
    let (g, d) = (summarize(&gw), summarize(&direct));
    let (gf, df) = (summarize(&gw_first), summarize(&direct_first));
    let mut g_row = Row::from(
        "stream",
        "gateway",
        g,
        format!(
            "frames/s, one stream of {frames}; ratio {:.2}",
            g.rate / d.rate
        ),
    );
    let mut d_row = Row::from("stream", "direct", d, "frames/s".to_owned());
    for row in [&mut g_row, &mut d_row] {
        row.p50 = "-".to_owned();
        row.p90 = "-".to_owned();
        row.p99 = "-".to_owned();
    }
    let mut gf_row = Row::from(
        "stream-first",
        "gateway",
        gf,
        format!(
            "time to first frame, {calls} streams of 10; adds p50 {:+.0} µs",
            gf.p50 - df.p50
        ),
    );
    let mut df_row = Row::from("stream-first", "direct", df, String::new());
    for row in [&mut gf_row, &mut df_row] {
        row.rate = "-".to_owned();
    }
    vec![g_row, d_row, gf_row, df_row]
}

// ---------------------------------------------------------------- fan-in

struct FanState {
    open: AtomicUsize,
    failed: AtomicUsize,
    frames: AtomicU64,
    recording: AtomicBool,
    delays: Mutex<Vec<u64>>,
}

/// The backend's send time carried in `contextId` (nanoseconds since the epoch).
fn sent_at(event: &[u8]) -> Option<u64> {
    let key = b"\"contextId\":\"";
    let at = memchr::memmem::find(event, key)? + key.len();
    let digits = &event[at..];
    let end = digits.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

async fn fan_stream(
    addr: SocketAddr,
    k: usize,
    state: Arc<FanState>,
    gate: Arc<tokio::sync::Semaphore>,
) {
    let permit = gate.acquire_owned().await.expect("semaphore");
    let opened = async {
        let mut sender = http_sender(addr).await;
        sender.ready().await.ok()?;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{k},"method":"SubscribeToTask","params":{{"id":"fan-{k}"}}}}"#
        );
        let response = sender
            .send_request(http_request(
                &addr.to_string(),
                "/a2a/jsonrpc",
                Bytes::from(body),
            ))
            .await
            .ok()?;
        (response.status() == http::StatusCode::OK).then_some((sender, response))
    };
    let Ok(Some((_sender, response))) = tokio::time::timeout(Duration::from_secs(30), opened).await
    else {
        state.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    drop(permit);
    state.open.fetch_add(1, Ordering::Relaxed);
    let mut body = response.into_body();
    let mut carry: Vec<u8> = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let now = unix_nanos();
        carry.extend_from_slice(&data);
        while let Some(end) = memchr::memmem::find(&carry, b"\n\n") {
            if let Some(sent) = sent_at(&carry[..end]) {
                state.frames.fetch_add(1, Ordering::Relaxed);
                if state.recording.load(Ordering::Relaxed) {
                    state.delays.lock().unwrap().push(now.saturating_sub(sent));
                }
            }
            carry.drain(..end + 2);
        }
    }
}

async fn set_ticking(control: &mut A2aServiceClient<Channel>, on: bool) {
    let text = if on { "control:tick" } else { "control:idle" };
    control
        .send_message(versioned(Kind::send_request(text)))
        .await
        .expect("control");
}

async fn fan_in(setup: &Setup, opts: &Options) -> Vec<Row> {
    let window = Duration::from_secs(if opts.quick { 4 } else { 10 });
    // A fresh gateway, so its RSS is that of this scenario alone. Its default bound of
    // open streams (1,000) is what this scenario exceeds on purpose.
    let streams = FAN_STREAMS.to_string();
    let raised = ["--global-max-concurrent-streams", &streams];
    let (gateway, addr) = start_gateway(setup.backend_addr, &raised).await;
    let gw_pid = gateway.pid();
    let mut probe = Conn::open(Target::Http(addr, "/a2a/jsonrpc"), Kind::GetTask).await;
    for _ in 0..10 {
        probe.call().await.expect("probe");
    }
    drop(probe);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss = rss_mib(gw_pid);
    let mut control = grpc_client(setup.backend_addr).await;
    set_ticking(&mut control, false).await;

    let state = Arc::new(FanState {
        open: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        frames: AtomicU64::new(0),
        recording: AtomicBool::new(false),
        delays: Mutex::new(Vec::new()),
    });
    let gate = Arc::new(tokio::sync::Semaphore::new(256));
    let opening = Instant::now();
    let tasks: Vec<_> = (0..FAN_STREAMS)
        .map(|k| tokio::spawn(fan_stream(addr, k, state.clone(), gate.clone())))
        .collect();
    while state.open.load(Ordering::Relaxed) + state.failed.load(Ordering::Relaxed) < FAN_STREAMS
        && opening.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let open = state.open.load(Ordering::Relaxed);
    eprintln!(
        "   {open} streams open ({} failed) in {:.1} s",
        state.failed.load(Ordering::Relaxed),
        opening.elapsed().as_secs_f64()
    );
    let pids = Pids {
        gateway: Some(gw_pid),
        backend: setup.backend.pid(),
    };

    // Idle: only keepalive comments flow.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu0 = Cpu::now(pids);
    tokio::time::sleep(window).await;
    let idle_cpu = Cpu::now(pids).since(cpu0);
    let idle_streams_rss = rss_mib(gw_pid);

    // One event per stream per second.
    set_ticking(&mut control, true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let frames0 = state.frames.load(Ordering::Relaxed);
    state.recording.store(true, Ordering::Relaxed);
    let cpu0 = Cpu::now(pids);
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let busy_cpu = Cpu::now(pids).since(cpu0);
    let secs = t0.elapsed().as_secs_f64();
    state.recording.store(false, Ordering::Relaxed);
    let frames = state.frames.load(Ordering::Relaxed) - frames0;
    let busy_rss = rss_mib(gw_pid);
    set_ticking(&mut control, false).await;
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    drop(gateway);

    let delays = std::mem::take(&mut *state.delays.lock().unwrap());
    let busy = Sample::new(frames, secs, delays, busy_cpu);
    let pct = |s: &Sample, p: f64| s.pct_us(p) / 1000.0;
    let per_sec = |cpu: f64| format!("{:.1}%", cpu / window.as_secs_f64() * 100.0);
    vec![
        Row::text(
            "fan-in",
            "idle",
            format!("fresh gateway, no streams: RSS {idle_rss:.1} MiB"),
        ),
        Row::text(
            "fan-in",
            "10k idle",
            format!(
                "{open} SSE streams open: RSS {idle_streams_rss:.1} MiB; gateway CPU {} of a core, backend {}",
                per_sec(idle_cpu.gateway),
                per_sec(idle_cpu.backend)
            ),
        ),
        Row {
            p50: format!("{:.1}", pct(&busy, 50.0)),
            p90: format!("{:.1}", pct(&busy, 90.0)),
            p99: format!("{:.1}", pct(&busy, 99.0)),
            ..Row::from(
                "fan-in",
                "10k 1/s",
                summarize(std::slice::from_ref(&busy)),
                format!(
                    "events/s; frame delay in ms; RSS {busy_rss:.1} MiB; gateway CPU {} of a core",
                    per_sec(busy_cpu.gateway)
                ),
            )
        },
    ]
}

// ---------------------------------------------------------------- the reference SDK

/// The SDK agent (tests/peers/agent.py) on its own JSON-RPC endpoint vs the gateway in
/// front of its gRPC endpoint.
async fn sdk(opts: &Options) -> Vec<Row> {
    match sdk_rows(opts).await {
        Ok(rows) => rows,
        Err(why) => vec![Row::text("sdk", "-", format!("NOT DONE: {why}"))],
    }
}

async fn sdk_rows(opts: &Options) -> Result<Vec<Row>, String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let provision = Command::new("bash")
        .arg(format!("{root}/tests/peers/provision.sh"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("provision.sh: {e}"))?;
    if !provision.status.success() {
        return Err("tests/peers/provision.sh failed".to_owned());
    }
    let python = String::from_utf8_lossy(&provision.stdout).trim().to_owned();
    let mut child = Command::new(&python)
        .arg(format!("{root}/tests/peers/agent.py"))
        .args(["--grpc-port", "0", "--http-port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("start agent.py: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let agent = Proc { child };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("READY ") {
                let _ = tx.send(line);
                return;
            }
        }
    });
    let ready = rx
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| "agent.py printed no READY line within 60 s".to_owned())?;
    let field = |name: &str| -> Result<SocketAddr, String> {
        ready
            .split_whitespace()
            .find_map(|f| f.strip_prefix(name))
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("no {name} in {ready:?}"))
    };
    let grpc = field("grpc=")?;
    let http = field("http=")?;
    let (gateway, gateway_addr) = start_gateway(grpc, &[]).await;
    let pids = |through: bool| Pids {
        gateway: through.then(|| gateway.pid()),
        backend: agent.pid(),
    };
    let kind = Kind::Send(200);
    let clients = 32;
    let window = Duration::from_secs(if opts.quick { 2 } else { 5 });
    let gw_target = Target::Http(gateway_addr, "/a2a/jsonrpc");
    let own_target = Target::Http(http, "/jsonrpc");
    let (gw, own, ratios) = paired_windows(
        opts.reps,
        async || closed_loop(gw_target, kind, clients, pids(true), opts.warmup(), window).await,
        async || {
            closed_loop(
                own_target,
                kind,
                clients,
                pids(false),
                opts.warmup(),
                window,
            )
            .await
        },
    )
    .await;
    let (g, o) = (summarize(&gw), summarize(&own));
    Ok(vec![
        Row::from(
            "sdk",
            "gw+grpc",
            g,
            format!(
                "a2a-sdk agent's gRPC behind the gateway; {} vs its own JSON-RPC; be = python",
                paired_ratio(&ratios, g)
            ),
        ),
        Row::from(
            "sdk",
            "sdk-json",
            o,
            "a2a-sdk's own JSON-RPC endpoint".to_owned(),
        ),
    ])
}

// ---------------------------------------------------------------- jwt

/// `iss` and `aud` of the bench's tokens.
const JWT_ISSUER: &str = "https://issuer.bench.example";
const JWT_AUDIENCE: &str = "a2a-gateway";

/// A gateway whose route takes bearer JWTs (one EdDSA key, from a JWKS file) beside the
/// setup's plain one, and an `Authorization` value it accepts for the next hour.
async fn jwt_gateway(backend: SocketAddr) -> (Proc, SocketAddr, &'static str) {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).expect("key");
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("key");
    let jwks = format!(
        r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"bench","alg":"EdDSA","use":"sig","x":"{}"}}]}}"#,
        URL_SAFE_NO_PAD.encode(key.public_key().as_ref())
    );
    let dir = std::env::temp_dir();
    let jwks_path = dir.join(format!("overhead-jwks-{}.json", std::process::id()));
    std::fs::write(&jwks_path, jwks).expect("jwks file");
    let config = format!(
        "[[auth.jwt]]\nissuer = \"{JWT_ISSUER}\"\naudiences = [\"{JWT_AUDIENCE}\"]\njwks-file = \"{}\"\n",
        jwks_path.display()
    );
    let config_path = dir.join(format!("overhead-jwt-{}.toml", std::process::id()));
    std::fs::write(&config_path, config).expect("config file");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA","kid":"bench","typ":"JWT"}"#);
    let claims = format!(
        r#"{{"iss":"{JWT_ISSUER}","aud":"{JWT_AUDIENCE}","sub":"bench","iat":{now},"exp":{}}}"#,
        now + 3600
    );
    let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims));
    let signature = URL_SAFE_NO_PAD.encode(key.sign(input.as_bytes()).as_ref());
    let authorization = format!("Bearer {input}.{signature}").leak();
    let config_arg = config_path.to_string_lossy().into_owned();
    let (gateway, addr) = start_gateway(backend, &["--config", &config_arg]).await;
    (gateway, addr, authorization)
}

/// The same calls through a route with bearer JWTs and through the plain one, A-B-A: what
/// authentication adds per call (a verified token is cached, so each call looks it up).
async fn jwt(setup: &Setup, opts: &Options) -> Vec<Row> {
    let (gateway, addr, authorization) = jwt_gateway(setup.backend_addr).await;
    let kind = Kind::Send(200);
    let (w, win) = (opts.warmup(), opts.window());
    let plain = Target::Http(setup.gateway_addr, "/a2a/jsonrpc");
    let authed = Target::Bearer(addr, authorization);
    let pids = |gateway: u32| Pids {
        gateway: Some(gateway),
        backend: setup.backend.pid(),
    };
    let (jwt_pid, plain_pid) = (gateway.pid(), setup.gateway.pid());
    let (with, without, ratios) = paired_windows(
        opts.reps,
        async || closed_loop(authed, kind, 32, pids(jwt_pid), w, win).await,
        async || closed_loop(plain, kind, 32, pids(plain_pid), w, win).await,
    )
    .await;
    let (j, p) = (summarize(&with), summarize(&without));
    let note = format!(
        "{}; gw cpu {:.2}× the route without auth",
        paired_ratio(&ratios, j).replace("ratio", "ratio to no auth"),
        j.cpu.gateway / p.cpu.gateway
    );
    vec![
        Row::from("jwt-32", "jwt", j, note),
        Row::from("jwt-32", "no auth", p, String::new()),
    ]
}

/// The gRPC front against the JSON-RPC front (issue 24: a front adds no more per call than
/// the JSON-RPC one): SendMessage 200 B from 32 tonic clients to a second gateway serving
/// both fronts, A-B-A against 32 JSON-RPC clients over HTTP/2 (h2c) to the same gateway, so
/// both fronts pay for the same transport; then one window of 32 HTTP/1.1 JSON-RPC clients
/// to it, for what HTTP/2 itself costs. The note gives the gRPC front's gateway CPU per call
/// over the JSON-RPC front's on each transport.
async fn grpc_front(setup: &Setup, opts: &Options) -> Vec<Row> {
    let fronts = ["--fronts", "JSONRPC,GRPC"];
    let (gateway, addr) = start_gateway(setup.backend_addr, &fronts).await;
    let kind = Kind::Send(200);
    let (w, win) = (opts.warmup(), opts.window());
    let pids = Pids {
        gateway: Some(gateway.pid()),
        backend: setup.backend.pid(),
    };
    let (grpc, h2c, http1) = (
        Target::Grpc(addr),
        Target::H2c(addr, "/a2a/jsonrpc"),
        Target::Http(addr, "/a2a/jsonrpc"),
    );
    let (with, without, ratios) = paired_windows(
        opts.reps,
        async || closed_loop(grpc, kind, 32, pids, w, win).await,
        async || closed_loop(h2c, kind, 32, pids, w, win).await,
    )
    .await;
    let h1 = closed_loop(http1, kind, 32, pids, w, win).await;
    let (g, j, h1) = (summarize(&with), summarize(&without), summarize(&[h1]));
    let note = format!(
        "{}; gw cpu {:.2}× the JSON-RPC front's over h2c, {:.2}× over HTTP/1.1",
        paired_ratio(&ratios, g).replace("ratio", "ratio to JSON-RPC h2c"),
        g.cpu.gateway / j.cpu.gateway,
        g.cpu.gateway / h1.cpu.gateway,
    );
    vec![
        Row::from("grpc-front-32", "grpc front", g, note),
        Row::from("grpc-front-32", "jsonrpc h2c", j, String::new()),
        Row::from("grpc-front-32", "jsonrpc h1", h1, String::new()),
    ]
}

// ---------------------------------------------------------------- the relay floor

/// The gateway, a bare TCP relay (`relay_main`) and the direct path, SendMessage 200 B from
/// `clients` clients. Each repetition runs gateway, relay, direct, relay, gateway: the two
/// windows of each proxy are centred on the direct one, so each repetition's ratios cancel a
/// drift that is linear over it, and the gateway and the relay are compared at the same time.
async fn relay(setup: &Setup, opts: &Options, name: &str, clients: usize) -> Vec<Row> {
    let backend = setup.backend_addr.to_string();
    let (relay, relay_addr) = start_role(&[ROLE_RELAY, &backend]);
    let kind = Kind::Send(200);
    let (w, win) = (opts.warmup(), opts.window());
    let relay_pids = Pids {
        gateway: Some(relay.pid()),
        backend: setup.backend.pid(),
    };
    let gateway = Target::Http(setup.gateway_addr, "/a2a/jsonrpc");
    let (relayed, direct) = (Target::Grpc(relay_addr), Target::Grpc(setup.backend_addr));
    let (mut gw, mut rl, mut dr) = (Vec::new(), Vec::new(), Vec::new());
    let (mut gw_ratios, mut rl_ratios, mut gw_over_rl) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..opts.reps {
        let g1 = closed_loop(gateway, kind, clients, setup.pids(true), w, win).await;
        let r1 = closed_loop(relayed, kind, clients, relay_pids, w, win).await;
        let d = closed_loop(direct, kind, clients, setup.pids(false), w, win).await;
        let r2 = closed_loop(relayed, kind, clients, relay_pids, w, win).await;
        let g2 = closed_loop(gateway, kind, clients, setup.pids(true), w, win).await;
        let (g, r) = ((g1.rate + g2.rate) / 2.0, (r1.rate + r2.rate) / 2.0);
        gw_ratios.push(g / d.rate);
        rl_ratios.push(r / d.rate);
        gw_over_rl.push(g / r);
        gw.extend([g1, g2]);
        rl.extend([r1, r2]);
        dr.push(d);
    }
    let (g, r, d) = (summarize(&gw), summarize(&rl), summarize(&dr));
    let gateway_note = format!(
        "{}; {}; over the relay: ratio {:.2}, p50 {:+.0} µs",
        paired_ratio(&gw_ratios, g),
        added(g, d),
        median(gw_over_rl),
        g.p50 - r.p50,
    );
    let relay_note = format!(
        "{} (gw cpu = the relay's); {}",
        paired_ratio(&rl_ratios, r).replace("gw cpu", "relay cpu"),
        added(r, d),
    );
    vec![
        Row::from(name, "gateway", g, gateway_note),
        Row::from(name, "tcp relay", r, relay_note),
        Row::from(name, "direct", d, String::new()),
    ]
}

// ---------------------------------------------------------------- many routes

/// Routes of the many-routes scenario's configuration.
const MANY_ROUTES: usize = 10_000;

/// The most RSS a route may add, in KiB: issue 25's bound (measured 8.9 to 9.2 with two
/// workers, benches/README.md, many routes). The figure depends on what is allocated, not
/// on the machine's speed or load, so it is checked, as `tests/it/cost_budget.rs` checks a
/// call.
const ROUTE_BUDGET_KIB: f64 = 10.0;

/// A config file of `routes` routes (`/r0` … ), all to the agent at `backend`, with
/// `timeout` as every route's deadline (a reload changes it).
fn routes_file(routes: usize, backend: SocketAddr, timeout: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "overhead-routes-{}-{routes}.toml",
        std::process::id()
    ));
    let mut text = format!("timeout = \"{timeout}\"\n");
    for i in 0..routes {
        let _ = write!(
            text,
            "[[route]]\nname = \"r{i}\"\npath = \"/r{i}\"\nbackend = \"http://{backend}\"\n"
        );
    }
    std::fs::write(&path, text).expect("routes file");
    path
}

/// One HTTP/1.1 GET of `path`: the status line and the body.
async fn http_get(addr: SocketAddr, path: &str) -> Option<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let head = format!("GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.ok()?;
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).await.ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

/// Polls `addr` until `done` holds for the answer to GET `path`; the time it took.
async fn until(addr: SocketAddr, path: &str, done: impl Fn(&str, &str) -> bool) -> Duration {
    let started = Instant::now();
    loop {
        if let Some((status, body)) = http_get(addr, path).await {
            if done(&status, &body) {
                return started.elapsed();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{path}: no answer"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the gateway's log, past its first `from` bytes, says a reload was applied:
/// the reload's own duration, its `elapsed_ms`.
async fn reloaded(from: u64) -> u64 {
    use std::io::{Seek, SeekFrom};
    let started = Instant::now();
    let mut log = std::fs::File::open(gateway_log()).expect("gateway log");
    log.seek(SeekFrom::Start(from)).expect("seek the log");
    let mut text = String::new();
    loop {
        log.read_to_string(&mut text).expect("read the log");
        // Whole lines only: the last may still be being written.
        let whole = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
        if let Some(line) = whole.lines().find(|l| l.contains("configuration reloaded")) {
            let elapsed = line.split_once("elapsed_ms=").map(|(_, ms)| ms);
            let digits = elapsed.map(|ms| ms.split(|c: char| !c.is_ascii_digit()).next());
            let ms = digits.flatten().and_then(|ms| ms.parse().ok());
            return ms.expect("the reload's elapsed_ms");
        }
        assert!(
            !text.contains("reload refused"),
            "the reload was refused: {text}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no reload logged"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A gateway of `MANY_ROUTES` routes: how long until it serves, its RSS over a one-route
/// gateway's, how long a reload of every route takes (inside the gateway, and from SIGHUP
/// until it logs it), what one `/metrics` scrape then costs, and one client's calls on the
/// last route against the first, paired A-B-A.
async fn many_routes(setup: &Setup, opts: &Options) -> Vec<Row> {
    let one = routes_file(1, setup.backend_addr, "30s");
    // Two workers whatever the machine: each holds its own handler of every route.
    let (small, small_addr) =
        launch_gateway(&["--config", one.to_str().unwrap(), "--workers", "2"]).await;
    until(small_addr, "/healthz", |status, _| status.contains(" 200")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let small_rss = rss_mib(small.pid());
    drop(small);

    let many = routes_file(MANY_ROUTES, setup.backend_addr, "30s");
    let started = Instant::now();
    let (gateway, addr) =
        launch_gateway(&["--config", many.to_str().unwrap(), "--workers", "2"]).await;
    // The listener accepts before the routes are built: serving is a route's answer.
    let last_path: &'static str =
        Box::leak(format!("/r{}/a2a/jsonrpc", MANY_ROUTES - 1).into_boxed_str());
    let mut probe = loop {
        let mut conn = Conn::open(Target::Http(addr, last_path), Kind::GetTask).await;
        if conn.call().await.is_ok() {
            break conn;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let serving = started.elapsed();
    probe.call().await.expect("probe");
    drop(probe);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss = rss_mib(gateway.pid());
    let per_route_kib = (rss - small_rss) * 1024.0 / (MANY_ROUTES - 1) as f64;
    assert!(
        per_route_kib <= ROUTE_BUDGET_KIB,
        "a route costs {per_route_kib:.1} KiB of RSS, over the budget of {ROUTE_BUDGET_KIB} KiB"
    );

    // Every route changed (another deadline), applied on SIGHUP: seen in the gateway's log,
    // which says how long the reload took inside it. Nothing is asked of the gateway
    // meanwhile (polling /metrics, megabytes at this many routes, was most of what an
    // earlier version of this bench measured).
    routes_file(MANY_ROUTES, setup.backend_addr, "29s");
    let logged = std::fs::metadata(gateway_log()).map_or(0, |m| m.len());
    let pid = rustix::process::Pid::from_raw(gateway.pid() as i32).expect("pid");
    let signalled = Instant::now();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).expect("SIGHUP");
    let reload_ms = reloaded(logged).await;
    let seen = signalled.elapsed();
    let rss_after_reload = rss_mib(gateway.pid());
    // Then one scrape, as Prometheus makes them.
    let scraping = Instant::now();
    let (_, metrics) = http_get(addr, "/metrics").await.expect("/metrics");
    let scraped = scraping.elapsed();
    let rss_after_scrape = rss_mib(gateway.pid());

    let first = Target::Http(addr, "/r0/a2a/jsonrpc");
    let last = Target::Http(addr, last_path);
    let (w, win) = (opts.warmup(), opts.window());
    let pids = setup.pids(true);
    let (on_last, on_first, ratios) = paired_windows(
        opts.reps,
        async || closed_loop(last, Kind::Send(200), 1, pids, w, win).await,
        async || closed_loop(first, Kind::Send(200), 1, pids, w, win).await,
    )
    .await;
    let (l, f) = (summarize(&on_last), summarize(&on_first));
    let _ = std::fs::remove_file(one);
    let _ = std::fs::remove_file(many);
    vec![
        Row::text(
            "many-routes",
            "gateway",
            format!(
                "{MANY_ROUTES} routes: serving after {:.2} s; RSS {rss:.1} MiB, {per_route_kib:.1} KiB a route over one route's {small_rss:.1} MiB; every route changed by SIGHUP: reloaded in {reload_ms} ms (the gateway's log), logged {:.2} s after the signal, RSS then {rss_after_reload:.1} MiB; then /metrics: {:.1} MB in {:.2} s, RSS then {rss_after_scrape:.1} MiB",
                serving.as_secs_f64(),
                seen.as_secs_f64(),
                metrics.len() as f64 / 1e6,
                scraped.as_secs_f64(),
            ),
        ),
        Row::from(
            "many-routes",
            "last route",
            l,
            format!(
                "rate over the first route's {:.2} ({} A-B-A); p50 {:+.0} µs",
                median(ratios.clone()),
                ratios.len(),
                l.p50 - f.p50
            ),
        ),
        Row::from("many-routes", "first route", f, String::new()),
    ]
}

//! The command line and the `--config` file: flags, each also settable by environment
//! variable and by a TOML file, merged with precedence flag, then environment, then file,
//! then default. Only `settings` reads the result (`Config`), checking and typing it; the
//! errors of both name the bad flag or key.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};
use serde::Deserialize;

use crate::backend::affinity::{Affinity, AffinityKey};
use crate::backend::endpoints::Balance;
use crate::card::CardSettings;
use crate::protocol::binding::Binding;
use crate::protocol::error::Profile;
use crate::protocol::params::ForwardPolicyError;
use crate::server::readiness::ReadinessMode;
use crate::server::tls::ClientAuth;
use crate::telemetry::trace::{OtlpProtocol, TraceConfigError};
use crate::units::{parse_duration, parse_size};

mod file;
pub mod routes;

pub use routes::RouteConfig;

/// The help heading of the settings that exist once per process: the config file takes
/// them at its top level only.
const PROCESS: &str = "Process-wide settings";
/// The help heading of the settings a route may set: the config file takes them at its top
/// level and in `[[route]]` tables. Flags under neither heading are command-line only.
const ROUTE: &str = "Route settings";

/// JSON-RPC 2.0 edge gateway for A2A v1.0 agents that speak gRPC or HTTP+JSON.
///
/// Clients POST JSON-RPC to the gateway; each call becomes one typed `lf.a2a.v1` request to
/// the backend agent, and its reply, stream or error comes back as JSON-RPC (SSE for streams).
#[derive(Clone, Debug, Parser)]
#[command(
    name = "a2a-gateway",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("A2A_GATEWAY_COMMIT"), ")"),
    about,
    long_about = None
)]
pub struct Cli {
    /// Address to serve JSON-RPC on.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// PEM certificate chain (leaf first) to serve HTTPS with, HTTP/1.1 and HTTP/2 by ALPN.
    /// Read again when the file changes (polled every second): new connections get the
    /// new certificate, open ones go on. Needs --tls-key.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1), reloaded with it.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<std::path::PathBuf>,

    /// PEM file of CA certificates that client certificates must chain to: clients are
    /// asked for one (see --tls-client-auth). Needs --tls-cert.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_TLS_CLIENT_CA", value_name = "FILE")]
    pub tls_client_ca: Option<std::path::PathBuf>,

    /// With --tls-client-ca: `required` refuses clients without a valid certificate;
    /// `optional` also serves clients that present none (one they present must be valid).
    #[arg(
        help_heading = PROCESS,
        long,
        env = "A2A_GATEWAY_TLS_CLIENT_AUTH",
        value_enum,
        default_value = "required"
    )]
    pub tls_client_auth: ClientAuth,

    /// A client's TLS handshake must complete within this long, or its connection is
    /// closed.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_TLS_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,

    /// Backend agent URL: `http://host:port` (`https://` for TLS). For HTTP+JSON a base
    /// path may follow (`http://host:port/a2a`). Given several times (or comma-separated
    /// in the environment), calls are balanced over the URLs; `dns:///name:port` balances
    /// over every address of the name (a headless Service's pods). Required unless --demo
    /// is given.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND", value_delimiter = ',')]
    pub backend: Vec<String>,

    /// Reach a `dns:///` backend over TLS (the TLS server name is the DNS name).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_TLS")]
    pub backend_tls: bool,

    /// How often a `dns:///` backend's name is resolved again (also soon after a
    /// connection to one of its addresses fails, at most once a second).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_RESOLVE_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub backend_resolve_interval: Duration,

    /// The DNS server (`ip:port`) that resolves `dns:///` backends instead of the system's
    /// (`/etc/resolv.conf`): for tests and special setups.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_RESOLVER", value_name = "IP:PORT")]
    pub backend_resolver: Option<SocketAddr>,

    /// How calls are spread over a route's endpoints: `p2c` (of two endpoints drawn at
    /// random, the one with fewer calls outstanding) or `round-robin`.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BALANCE", value_enum, default_value = "p2c")]
    pub balance: Balance,

    /// An endpoint failing this many calls in a row with a gateway fault (connection reset,
    /// deadline) is ejected; one that cannot be connected to is ejected at once.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_EJECT_AFTER", default_value_t = 5)]
    pub eject_after: u32,

    /// How long an endpoint's first ejection lasts; each further one without a success in
    /// between doubles it, up to 5 minutes. Then a connect probe readmits it.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_EJECT_BACKOFF", default_value = "10s", value_parser = parse_duration)]
    pub eject_backoff: Duration,

    /// `task`: calls about a task (get, cancel, subscribe, push configs, follow-up
    /// messages) go to the endpoint that created it, for agents that keep tasks in memory.
    /// The ids clients see carry their endpoint, authenticated by --affinity-key.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_AFFINITY", value_enum, default_value = "none")]
    pub affinity: Affinity,

    /// The key (at least 16 bytes) that authenticates the task and context ids of
    /// `--affinity task`; every gateway replica must have the same one. Prefer the
    /// environment or --affinity-key-file to a flag (visible in the process list).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_AFFINITY_KEY", hide_env_values = true)]
    pub affinity_key: Option<AffinityKey>,

    /// A file holding the affinity key (trailing whitespace ignored).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_AFFINITY_KEY_FILE", value_name = "FILE")]
    pub affinity_key_file: Option<std::path::PathBuf>,

    /// Caller-bound tasks: the task and context ids clients get carry their owner (the
    /// authenticated principal), sealed with --owner-key-file; a call naming another
    /// caller's task is answered as an unknown task, and ListTasks lists the caller's own.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_TASK_OWNER")]
    pub task_owner: bool,

    /// The keys of --task-owner, one a line (16 to 1024 bytes each, trailing whitespace
    /// ignored, at most 8): the first seals new ids, every one is accepted, so a new key
    /// put first rotates without breaking live tasks. Every replica needs the same file.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_OWNER_KEY_FILE", value_name = "FILE")]
    pub owner_key_file: Option<std::path::PathBuf>,

    /// Binding the backend speaks: GRPC or HTTP+JSON.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BINDING", default_value = "GRPC", value_parser = Binding::backend)]
    pub binding: Binding,

    /// PEM file of CA certificates to trust for an `https://` backend, in addition to the
    /// system roots (e.g. the cluster's internal CA).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_CA", value_name = "FILE")]
    pub backend_ca: Option<std::path::PathBuf>,

    /// PEM certificate chain (leaf first) the gateway presents to an `https://` backend
    /// that asks for a client certificate (mTLS). Needs --backend-client-key.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_CLIENT_CERT", value_name = "FILE")]
    pub backend_client_cert: Option<std::path::PathBuf>,

    /// PEM private key of --backend-client-cert.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_CLIENT_KEY", value_name = "FILE")]
    pub backend_client_key: Option<std::path::PathBuf>,

    /// Path of the JSON-RPC endpoint.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_JSONRPC_PATH", default_value = "/a2a/jsonrpc")]
    pub jsonrpc_path: String,

    /// The fronts clients reach the route over, in the order its card lists them:
    /// JSONRPC, HTTP+JSON, GRPC (gRPC calls on the route's listener, told by their content
    /// type, and on --grpc-listen); comma-separated (a list in the file). Duplicates are
    /// refused.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_FRONTS", value_delimiter = ',', default_value = "JSONRPC", value_parser = Binding::from_name)]
    pub fronts: Vec<Binding>,

    /// Base path of the HTTP+JSON front (spec 11) below the route's prefix.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_REST_PATH", default_value = "/a2a/rest")]
    pub rest_path: String,

    /// Serve in front of an embedded demo agent (gRPC on a loopback port) instead of
    /// --backend; send it "hello", "task", "stream", "input", "slow", "fail" or "reject".
    #[arg(long, conflicts_with_all = ["backend", "binding"])]
    pub demo: bool,

    /// Deadline of unary calls, e.g. `30s`, `1500ms`; `0` disables it. Sent to the
    /// backend (`grpc-timeout`) and enforced by the gateway.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Deadline of whole streams; `0` (default) lets streams stay open.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_STREAM_TIMEOUT", default_value = "0", value_parser = parse_duration)]
    pub stream_timeout: Duration,

    /// Interval of SSE keepalive comments on idle streams.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_KEEPALIVE", default_value = "15s", value_parser = parse_duration)]
    pub keepalive: Duration,

    /// Deadline of a stream's first event (the SSE response starts with it); `0`: none.
    /// Default: the unary --timeout. Once the first event is in, a stream may stay quiet.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_FIRST_EVENT_TIMEOUT", value_parser = parse_duration)]
    pub first_event_timeout: Option<Duration>,

    /// HTTP/2 keepalive of the gRPC backend connection: a ping is sent only after this long
    /// without reading anything from the backend, and only while calls are in flight. The
    /// default, 5 minutes, is what gRPC servers allow by default (grpc C-core, grpc-go and
    /// grpc-java answer more frequent pings without data with GOAWAY `too_many_pings`); on
    /// such a GOAWAY the interval doubles for that backend.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_KEEPALIVE", default_value = "5m", value_parser = parse_duration)]
    pub backend_keepalive: Duration,

    /// A keepalive ping unanswered for this long closes the backend connection, failing
    /// its calls at once instead of at their deadline.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_KEEPALIVE_TIMEOUT", default_value = "20s", value_parser = parse_duration)]
    pub backend_keepalive_timeout: Duration,

    /// Send keepalive pings also while no call is in flight (only for backends whose
    /// servers permit it, e.g. grpc's `keepalive_permit_without_calls`).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_KEEPALIVE_WHILE_IDLE")]
    pub backend_keepalive_while_idle: bool,

    /// Largest gRPC message (a reply or one stream event), HTTP+JSON reply body or stream
    /// event accepted from the backend; larger ones fail the call with BACKEND_BAD_RESPONSE
    /// before they are buffered.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_BACKEND_MAX_MESSAGE", default_value = "16MiB", value_parser = parse_size)]
    pub backend_max_message: usize,

    /// The service `/readyz` asks a gRPC agent's `grpc.health.v1.Health/Check` about;
    /// empty (default): the server as a whole.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_HEALTH_SERVICE", default_value = "")]
    pub health_service: String,

    /// Timeout for establishing the backend connection.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_CONNECT_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Largest accepted request body, e.g. `4MiB`, `512KiB`, `1000000`.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_MAX_BODY", default_value = "4MiB", value_parser = parse_size)]
    pub max_body: usize,

    /// Largest number of members of a JSON-RPC batch (notifications included); a larger
    /// batch is refused whole with one `-32600` error before any member is decoded or
    /// called. At least 1 (`1`: one call per request).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_MAX_BATCH_SIZE", default_value_t = 100)]
    pub max_batch_size: usize,

    /// Largest JSON-RPC batch reply; members whose replies would take it past this get a
    /// `-32603` error `GATEWAY_REPLY_TOO_LARGE` (with their id) in their place.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_MAX_BATCH_REPLY", default_value = "4MiB", value_parser = parse_size)]
    pub max_batch_reply: usize,

    /// Unary calls of a route (of each route, in a config file's top level) in flight at
    /// once; one more gets HTTP 503 with `Retry-After` and never reaches the agent. `0`:
    /// no limit.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_MAX_CONCURRENT_CALLS", default_value_t = 0)]
    pub max_concurrent_calls: usize,

    /// Streams of a route open at once; one more gets HTTP 503. `0`: no limit.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_MAX_CONCURRENT_STREAMS", default_value_t = 0)]
    pub max_concurrent_streams: usize,

    /// Calls per second a route takes (a token bucket, calls and streams alike); more get
    /// HTTP 429 with `Retry-After`. `0`: no limit.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_RATE_LIMIT", default_value_t = 0.0)]
    pub rate_limit: f64,

    /// Calls a route takes at once above --rate-limit (the bucket's size). Default: one
    /// second's worth of --rate-limit.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_RATE_BURST", default_value_t = 0)]
    pub rate_burst: u32,

    /// Calls per second each client of a route takes (by principal, or by address for an
    /// anonymous caller; a token bucket per client); more get HTTP 429 with `Retry-After`.
    /// `0`: no limit.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_CLIENT_RATE_LIMIT", default_value_t = 0.0)]
    pub client_rate_limit: f64,

    /// Calls a client takes at once above --client-rate-limit. Default: one second's worth.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_CLIENT_RATE_BURST", default_value_t = 0)]
    pub client_rate_burst: u32,

    /// Calls and streams each client of a route has in flight at once; one more gets HTTP
    /// 429. `0`: no limit.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_CLIENT_MAX_CONCURRENT", default_value_t = 0)]
    pub client_max_concurrent: usize,

    /// Clients a route's per-client limits track at once (principals and addresses each,
    /// in tables of their own); when full, idle clients are
    /// forgotten, and if none is idle a new client gets HTTP 429 (known ones are served).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_CLIENT_LIMIT_KEYS", default_value_t = 10000)]
    pub client_limit_keys: usize,

    /// Largest request header fields a route accepts (name + value + 32 bytes per field,
    /// as HTTP/2 counts); larger ones get HTTP 431 (Envoy's default is 60 KiB). `0`: only
    /// hyper's own bounds.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_MAX_HEADER_SIZE", default_value = "64KiB", value_parser = parse_size)]
    pub max_header_size: usize,

    /// A stream without an event from the agent for this long ends with a final error
    /// event and its upstream call is cancelled; `0` (default): streams may stay quiet.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_STREAM_IDLE_TIMEOUT", default_value = "0", value_parser = parse_duration)]
    pub stream_idle_timeout: Duration,

    /// Unary calls in flight at once across all routes (a call to every endpoint of an
    /// affinity route counts once per endpoint); `0`: no limit.
    #[arg(
        help_heading = PROCESS,
        long,
        env = "A2A_GATEWAY_GLOBAL_MAX_CONCURRENT_CALLS",
        default_value_t = 1000
    )]
    pub global_max_concurrent_calls: usize,

    /// Streams open at once across all routes; `0`: no limit.
    #[arg(
        help_heading = PROCESS,
        long,
        env = "A2A_GATEWAY_GLOBAL_MAX_CONCURRENT_STREAMS",
        default_value_t = 1000
    )]
    pub global_max_concurrent_streams: usize,

    /// Request body bytes held at once across all routes while bodies are read and
    /// handled (each body is charged as its bytes arrive, up to `max-body`); a request
    /// past it gets HTTP 503. `0`: no limit.
    #[arg(
        help_heading = PROCESS,
        long,
        env = "A2A_GATEWAY_GLOBAL_MAX_BODY_BYTES_IN_FLIGHT",
        default_value = "64MiB",
        value_parser = parse_size
    )]
    pub global_max_body_bytes_in_flight: usize,

    /// Calls per second across all routes; `0`: no limit.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_GLOBAL_RATE_LIMIT", default_value_t = 0.0)]
    pub global_rate_limit: f64,

    /// The burst of --global-rate-limit. Default: one second's worth.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_GLOBAL_RATE_BURST", default_value_t = 0)]
    pub global_rate_burst: u32,

    /// Browser origin (`https://app.example.com`, or `*`) allowed to call the gateway
    /// (CORS; repeatable). None (default): no CORS headers at all.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CORS_ORIGIN", value_delimiter = ',')]
    pub cors_origin: Vec<String>,

    /// Request header browsers may send, beyond A2A-Version, A2A-Extensions,
    /// Authorization, Content-Type and x-request-id (repeatable).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CORS_ALLOW_HEADER", value_delimiter = ',')]
    pub cors_allow_header: Vec<String>,

    /// Methods browsers may use (repeatable). Default: GET, POST.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CORS_ALLOW_METHOD", value_delimiter = ',')]
    pub cors_allow_method: Vec<String>,

    /// How long browsers may cache a preflight's answer.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CORS_MAX_AGE", default_value = "10m", value_parser = parse_duration)]
    pub cors_max_age: Duration,

    /// Extra request header to forward to the backend (repeatable). Always forwarded:
    /// A2A-Extensions, Authorization, traceparent, tracestate, x-request-id.
    #[arg(
        help_heading = ROUTE,
        long = "forward-header",
        env = "A2A_GATEWAY_FORWARD_HEADERS",
        value_delimiter = ','
    )]
    pub forward_headers: Vec<String>,

    /// Header set on every call to the agent, `NAME=VALUE` (repeatable); the client's
    /// header of that name is not forwarded.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_SET_HEADER", value_name = "NAME=VALUE")]
    pub set_header: Vec<String>,

    /// Header never sent to the agent, even a default-forwarded one (repeatable).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_REMOVE_HEADER", value_delimiter = ',')]
    pub remove_header: Vec<String>,

    /// Header carrying the caller's identity or tenant (repeatable): with `--tenant`, the
    /// client's value is never forwarded, even when `--forward-header` names it.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_IDENTITY_HEADER", value_delimiter = ',')]
    pub identity_header: Vec<String>,

    /// Header carrying a credential (repeatable), besides Authorization,
    /// Proxy-Authorization, Cookie and X-Api-Key: never logged, and sent to the agent
    /// HPACK never-indexed.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_SENSITIVE_HEADER", value_delimiter = ',')]
    pub sensitive_header: Vec<String>,

    /// After SIGTERM, how long the gateway keeps serving everything (also new connections)
    /// while `/readyz` already answers 503, so load balancers stop sending first. Ctrl-C
    /// skips it.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_DRAIN_DELAY", default_value = "5s", value_parser = parse_duration)]
    pub drain_delay: Duration,

    /// Then, how long in-flight requests and open streams may go on before streams get a
    /// final error frame (GATEWAY_SHUTTING_DOWN) and the process exits.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// A second address serving only `/metrics`, `/healthz` and `/readyz` (e.g. a port
    /// that only the cluster reaches); `/metrics` then leaves the main listener, while
    /// `/healthz` and `/readyz` stay on both.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_ADMIN_LISTEN", value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,

    /// A second address for gRPC clients, served as --listen is (its TLS, its routes): a
    /// gRPC call there goes to the one route of its host whose fronts include GRPC, so
    /// clients need no path prefix. Needs such a route, and at most one per host.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_GRPC_LISTEN", value_name = "ADDR")]
    pub grpc_listen: Option<SocketAddr>,

    /// What `/readyz` needs to answer 200 (besides not draining): `process` (the process
    /// serves; no agent is asked), `any-route` (one route's agent passes its check) or
    /// `all-routes` (every route's does). A route whose agent is down answers its clients
    /// with BACKEND_UNAVAILABLE in every mode.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_READINESS", value_enum, default_value = "process")]
    pub readiness: ReadinessMode,

    /// How long `/readyz` reuses the result of checking the agents: probes within it get
    /// the same answer and ask no agent; `0`: every probe checks (concurrent ones share).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_READINESS_CACHE", default_value = "2s", value_parser = parse_duration)]
    pub readiness_cache: Duration,

    /// Deadline of `/readyz`'s check of one agent endpoint (connecting included).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_READINESS_TIMEOUT", default_value = "1s", value_parser = parse_duration)]
    pub readiness_timeout: Duration,
    /// A client must send each request head within this (HTTP/1.1); it also bounds how
    /// long an idle HTTP/1.1 keep-alive connection waits for its next request.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CLIENT_HEADER_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub client_header_timeout: Duration,

    /// A client must send each whole request body within this, counted from its head;
    /// a slower one gets -32600 and its connection is closed.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CLIENT_BODY_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub client_body_timeout: Duration,

    /// A client connection with no request in flight this long is closed (HTTP/2: GOAWAY).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CLIENT_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub client_idle_timeout: Duration,

    /// A client connection that accepts no response bytes this long (a client that stops
    /// reading its stream) is closed; its streams' backend calls are cancelled. An HTTP/2
    /// stream its client grants no window this long is dropped alone (its call cancelled).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_CLIENT_SEND_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub client_send_timeout: Duration,

    /// Serving threads, each running its own event loop with its own backend connection,
    /// so a call never hops between threads; `0` (default): one per available CPU.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_WORKERS", default_value_t = 0)]
    pub workers: usize,

    /// Log format.
    #[arg(
        help_heading = PROCESS,
        long,
        env = "A2A_GATEWAY_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// One log line per JSON-RPC call (target `a2a_gateway::access`, INFO): route, method,
    /// id, result code, backend status, duration, bytes, frames, client, request and trace
    /// ids. `false` turns it off.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_ACCESS_LOG", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub access_log: bool,

    /// OTLP endpoint that receives the gateway's spans (e.g. `http://collector:4318`;
    /// http/protobuf adds `/v1/traces`). Default: `OTEL_EXPORTER_OTLP_ENDPOINT`; without
    /// either, traces are off.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,

    /// OTLP transport. Default: `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_OTLP_PROTOCOL", value_enum)]
    pub otlp_protocol: Option<OtlpProtocol>,

    /// Which traces are recorded, as `OTEL_TRACES_SAMPLER` names them (`always_on`,
    /// `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off`,
    /// `parentbased_traceidratio`). Default: `OTEL_TRACES_SAMPLER`, else
    /// `parentbased_always_on`.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_TRACE_SAMPLER", value_name = "SAMPLER")]
    pub trace_sampler: Option<String>,

    /// The ratio of the `traceidratio` samplers (0 to 1). Default: `OTEL_TRACES_SAMPLER_ARG`.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_TRACE_SAMPLER_ARG", value_name = "RATIO")]
    pub trace_sampler_arg: Option<f64>,

    /// Fixed tenant of the route: injected into every request whose `tenant` is empty; a
    /// request naming another tenant is refused (-32602).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_TENANT")]
    pub tenant: Option<String>,

    /// Public base URL of the gateway (e.g. `https://agents.example.com`), used in the cards
    /// and the catalog it serves. Default: an --allowed-hosts entry the request names, else
    /// the gateway's own address the client connected to (never the request's `Host`).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,

    /// Without --public-url, build public URLs from `X-Forwarded-Proto`/`X-Forwarded-Host`
    /// or `Forwarded` (only behind a proxy that sets them: a card built from a client's
    /// header could point other clients anywhere).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_TRUST_FORWARDED")]
    pub trust_forwarded: bool,

    /// With --trust-forwarded: how many proxies in front of the gateway append to
    /// `Forwarded`/`X-Forwarded-*`; the element this far from the end is read (what the
    /// outermost trusted proxy wrote), never the client's own elements before it.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_TRUSTED_PROXY_HOPS", default_value_t = 1)]
    pub trusted_proxy_hops: usize,

    /// The hosts (`host` or `host:port`, compared exactly; comma-separated or repeated) the
    /// gateway answers for: a route or catalog request whose `Host` (or trusted forwarded
    /// host) is another gets 400. Without --public-url, cards name the host the request
    /// used among these. Default: any host.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Where the agent's card comes from: a JSON file, an `http(s)://` URL (e.g. the agent's
    /// own well-known card), or `backend` (the agent's GetExtendedAgentCard). The card is
    /// served at `/.well-known/agent-card.json` with the gateway as its interface.
    #[arg(long, env = "A2A_GATEWAY_CARD", value_name = "FILE|URL|backend")]
    pub card: Option<String>,

    /// PEM private key (ES256 or RS256) that re-signs the served card; without it the
    /// agent's signatures, which the rewriting breaks, are removed.
    #[arg(long, env = "A2A_GATEWAY_CARD_SIGN_KEY", value_name = "PEM")]
    pub card_sign_key: Option<std::path::PathBuf>,

    /// `kid` header of the card signatures made with --card-sign-key.
    #[arg(long, env = "A2A_GATEWAY_CARD_SIGN_KID", value_name = "KID")]
    pub card_sign_kid: Option<String>,

    /// What the route does with the push-notification configs clients hand the agent
    /// (docs/security.md "Push notifications"): `guard` refuses (-32602) a URL that is not
    /// `https`, or whose host is or resolves to a loopback, private, link-local, metadata…
    /// address; `relay` checks it the same way, then gives the agent the gateway's own
    /// callback (--push-callback-url) and a token sealing the client's URL, token and
    /// authentication, and relays what the agent posts there; `pass` checks nothing.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_PUSH", value_enum, default_value = "guard")]
    pub push: crate::push::PushMode,

    /// The URL agents post push notifications to on `push = "relay"` routes, as the
    /// agents reach the gateway (a public or in-cluster name); the gateway serves its path
    /// on --listen. Required when a route relays.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_CALLBACK_URL", value_name = "URL")]
    pub push_callback_url: Option<String>,

    /// The key that seals clients' push URLs and credentials into the tokens agents get:
    /// the base64 of 32 random bytes (`openssl rand -base64 32`) on the first line; a
    /// second line may hold the previous key, still accepted. Every replica needs the
    /// same file. Required when a route relays.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_KEY_FILE", value_name = "FILE")]
    pub push_key_file: Option<std::path::PathBuf>,

    /// Largest push notification body an agent may post to --push-callback-url (413 past
    /// it).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_MAX_BODY", default_value = "1MiB", value_parser = parse_size)]
    pub push_max_body: usize,

    /// How long the callback trusts a token it found in its agent's push configs before
    /// asking the agent again (0: it asks at every post; at most 10m). A config deleted
    /// through another replica, or by the agent, stops delivering within this time.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_TOKEN_CACHE_TTL", default_value = "30s", value_parser = parse_duration)]
    pub push_token_cache_ttl: Duration,

    /// Admit `http://` push URLs too (their host is checked all the same).
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_PUSH_ALLOW_HTTP")]
    pub push_allow_http: bool,

    /// A push URL host the guard admits (repeatable): a name, `*.name` (names under it),
    /// an address or a CIDR.
    #[arg(
        help_heading = ROUTE,
        long = "push-allow",
        env = "A2A_GATEWAY_PUSH_ALLOW",
        value_delimiter = ',',
        value_name = "HOST|CIDR"
    )]
    pub push_allow: Vec<String>,

    /// Push deliveries the gateway holds at once, waiting or being sent, across all
    /// webhooks (docs/configuration.md "Push delivery").
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_QUEUE", default_value_t = 10000)]
    pub push_queue: usize,

    /// Of those, for one webhook destination (`host:port`).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_QUEUE_PER_DESTINATION", default_value_t = 1000)]
    pub push_queue_per_destination: usize,

    /// The bytes of the push notifications the gateway holds at once, across all webhooks:
    /// the queues' memory, whatever the notifications' sizes.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_QUEUE_BYTES", default_value = "64MiB", value_parser = parse_size)]
    pub push_queue_bytes: usize,

    /// Past a push queue bound: drop the `oldest` waiting delivery, or refuse the
    /// `newest`; counted either way.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_DROP", value_enum, default_value = "oldest")]
    pub push_drop: crate::push::deliver::PushDrop,

    /// Attempts of one push delivery, the first included (connection failures, timeouts,
    /// 5xx and 429 are retried; other answers are final).
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_MAX_ATTEMPTS", default_value_t = 8)]
    pub push_max_attempts: u32,

    /// No push delivery is retried later than this after it was queued.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_MAX_AGE", default_value = "10m", value_parser = parse_duration)]
    pub push_max_age: Duration,

    /// Deadline of connecting to a webhook: resolving its name, TCP and TLS.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_CONNECT_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub push_connect_timeout: Duration,

    /// Deadline of a webhook's answer (its status and headers), from the attempt's start.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_RESPONSE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub push_response_timeout: Duration,

    /// Deadline of one whole delivery attempt, the answer's body included.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_DELIVERY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub push_delivery_timeout: Duration,

    /// PEM certificates trusted for `https` webhooks besides the platform's roots.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_CA_FILE", value_name = "PEM")]
    pub push_ca_file: Option<std::path::PathBuf>,

    /// PEM PKCS#8 private key (EC P-256 or Ed25519) that signs each push delivery
    /// (`X-A2A-Signature`, a detached JWS); its public key is served at
    /// `/.well-known/jwks.json`.
    #[arg(help_heading = PROCESS, long, env = "A2A_GATEWAY_PUSH_SIGN_KEY", value_name = "PEM")]
    pub push_sign_key: Option<std::path::PathBuf>,

    /// `v0.3`: v0.3 JSON-RPC clients (no `A2A-Version`, v0.3 method names) are served,
    /// their calls translated to v1.0 and the answers back (README "v0.3 clients");
    /// `off`: they get -32601 as before.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_LEGACY", value_enum, default_value = "v0.3")]
    pub legacy: Legacy,

    /// The specification release whose error mappings the route's gRPC and HTTP+JSON fronts
    /// write: `1.0.1` or `1.0.0`, which gave six errors other gRPC codes and HTTP statuses
    /// (docs/errors.md "Conformance profiles").
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_SPEC_PROFILE", default_value = "1.0.1", value_parser = Profile::from_name)]
    pub spec_profile: Profile,

    /// The HTTP status of a call the gateway refuses with a JSON-RPC error (a limit,
    /// authentication, authorization, a body that is not JSON): `http`, the status that
    /// says why (401, 403, 415, 429, 431, 503); `jsonrpc`, 200, as JSON-RPC servers answer
    /// errors, for SDK clients that raise on the status before reading the error (the
    /// Python a2a-sdk). `Retry-After` and `WWW-Authenticate` are sent either way.
    #[arg(help_heading = ROUTE, long, env = "A2A_GATEWAY_REFUSAL_STATUS", value_enum, default_value = "http")]
    pub refusal_status: crate::front::jsonrpc::RefusalStatus,

    /// The `card` table of the config file (the flags above override its keys).
    #[arg(skip)]
    pub card_settings: CardSettings,

    /// The `auth` table of the config file.
    #[arg(skip)]
    pub auth_table: crate::auth::table::AuthTable,

    /// The `allow` rules of the config file.
    #[arg(skip)]
    pub allow_rules: Vec<crate::auth::table::AllowRule>,

    /// TOML file with any of the process-wide and route settings (keys as the flags without `--`, e.g.
    /// `backend = "http://agent:50051"`, `forward-header = ["x-tenant"]`); flags and
    /// environment variables override it. Unknown keys are errors.
    #[arg(long, env = "A2A_GATEWAY_CONFIG", value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,

    /// Reload the configuration when the config file, or a file it names (keys, CA
    /// bundles, certificates, cards), changes; SIGHUP reloads it in any case. Default: on
    /// when `--config` is given.
    #[arg(long, env = "A2A_GATEWAY_WATCH_CONFIG", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub watch_config: Option<bool>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands; without one, the gateway serves.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Validates a config file (and the flags and environment around it) without serving:
    /// exit code 0 when it would start, 2 with the error otherwise.
    CheckConfig {
        /// The TOML file to check.
        file: std::path::PathBuf,
    },
}

/// Whether a route serves v0.3 clients (`--legacy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
pub enum Legacy {
    /// v0.3 calls are translated to v1.0 and their answers back.
    #[default]
    #[value(name = "v0.3")]
    #[serde(rename = "v0.3")]
    V03,
    /// v0.3 method names are unknown methods.
    #[value(name = "off")]
    #[serde(rename = "off")]
    Off,
}

/// Log line formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `tracing`'s text lines, one event per line (the default).
    Text,
    /// One JSON object per event, for log collectors.
    Json,
}

/// A configuration that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--jsonrpc-path` (or a route's `jsonrpc-path`) is not an absolute path.
    #[error("--jsonrpc-path must start with '/': {0:?}")]
    JsonRpcPath(String),
    /// `--grpc-listen` without a route that serves gRPC, or with two for one host.
    #[error("--grpc-listen: {0}")]
    GrpcListen(String),
    /// `--rest-path` is not an absolute path without a trailing `/` (but `/`), or is the
    /// JSON-RPC path.
    #[error("--rest-path must start with '/', not end with '/' (but \"/\" itself) and differ from --jsonrpc-path: {0:?}")]
    RestPath(String),
    /// `--fronts` is empty or names a front twice.
    #[error("--fronts: {0}")]
    Fronts(String),
    /// A backend URL cannot be used: why.
    #[error("--backend: {0}")]
    BackendUrl(String),
    /// `--backend-resolve-interval` is zero.
    #[error("--backend-resolve-interval must be greater than 0")]
    ResolveInterval,
    /// `--eject-after` is zero.
    #[error("--eject-after must be at least 1")]
    EjectAfter,
    /// `--eject-backoff` is zero.
    #[error("--eject-backoff must be greater than 0")]
    EjectBackoff,
    /// The task affinity key (`--affinity-key` or its file) cannot be used: why.
    #[error("--affinity-key: {0}")]
    AffinityKey(String),
    /// Task ownership has no usable `--owner-key-file`: why.
    #[error("--owner-key-file: {0}")]
    OwnerKey(String),
    /// Task affinity is on for a route that has a single endpoint to pin tasks to.
    #[error("--affinity task needs several endpoints (a list of backends or a dns:/// name)")]
    AffinityOneBackend,
    /// A `--forward-header`, `--set-header` or `--remove-header` entry is refused.
    #[error(transparent)]
    Headers(#[from] ForwardPolicyError),
    /// An `[auth.forward]` caller header is refused.
    #[error(transparent)]
    CallerHeaders(#[from] crate::auth::forward::CallerHeaderError),
    /// `--keepalive` (the SSE keepalive interval) is zero.
    #[error("--keepalive must be greater than 0")]
    Keepalive,
    /// `--backend-keepalive` (the HTTP/2 ping interval) is zero.
    #[error("--backend-keepalive must be greater than 0")]
    BackendKeepalive,
    /// `--backend-keepalive-timeout` is zero.
    #[error("--backend-keepalive-timeout must be greater than 0")]
    BackendKeepaliveTimeout,
    /// The `--backend-ca` file cannot be read or holds no certificate: its path and why.
    #[error("--backend-ca {0:?}: {1}")]
    BackendCa(std::path::PathBuf, String),
    /// The listener's TLS files (`--tls-cert`, `--tls-key`, `--client-ca`) are refused.
    #[error(transparent)]
    Tls(#[from] crate::server::tls::TlsConfigError),
    /// A client connection timeout (the flag named) is zero.
    #[error("--{0} must be greater than 0")]
    ClientTimeout(&'static str),
    /// Nothing to serve: no backend, no `--demo` and no `[[route]]`.
    #[error("--backend is required (or --demo, or [[route]] tables in --config)")]
    NoBackend,
    /// `--readiness-timeout` is zero.
    #[error("--readiness-timeout must be greater than 0")]
    ReadinessTimeout,
    /// `--admin-listen` is the `--listen` address.
    #[error("--admin-listen must differ from --listen")]
    AdminListen,
    /// `--tenant` is given but empty.
    #[error("--tenant must not be empty")]
    Tenant,
    /// `--public-url` is refused: why.
    #[error("--public-url {0}")]
    PublicUrl(String),
    /// An `--allowed-hosts` entry is refused: why.
    #[error("--allowed-hosts {0}")]
    AllowedHosts(String),
    /// `--trusted-proxy-hops` is zero.
    #[error("--trusted-proxy-hops must be at least 1")]
    TrustedProxyHops,
    /// The route's `[auth]` settings are refused (schemes, key sources, issuers).
    #[error(transparent)]
    Auth(#[from] crate::auth::authenticator::AuthConfigError),
    /// An `allow` rule is refused.
    #[error(transparent)]
    Allow(#[from] crate::auth::rules::RuleError),
    /// The card source `backend` would publish the extended card to callers who may not
    /// call `GetExtendedAgentCard`.
    #[error("card source `backend` serves the agent's extended card to anyone at the card URL, but not everyone may call GetExtendedAgentCard (the route authenticates its callers, or the `allow` rules do not let everyone have it); use a file or URL source")]
    ExtendedCardPublished,
    /// A per-route setting (the key named) is given process-wide while `[[route]]` tables
    /// are used.
    #[error("`{0}` is a per-route setting: with [[route]] tables, set it in each route")]
    PerRoute(&'static str),
    /// A limit is out of its range: the setting and why.
    #[error("--{0}: {1}")]
    Limit(&'static str, String),
    /// The CORS settings are refused.
    #[error(transparent)]
    Cors(#[from] crate::front::cors::CorsError),
    /// A key of a `[[route]]` table is refused.
    #[error("{route}: key `{key}`: {message}")]
    Route {
        /// The route's name.
        route: String,
        /// The key, as written in the file.
        key: &'static str,
        /// Why it is refused.
        message: String,
    },
    /// A route's settings, once merged with the process-wide ones, are refused.
    #[error("{route}: {error}")]
    RouteSettings {
        /// The route's name.
        route: String,
        /// What is refused.
        error: Box<ConfigError>,
    },
    /// Two routes have the same name.
    #[error("{route}: the name is already used by {earlier}")]
    DuplicateRoute {
        /// The route's name.
        route: String,
        /// The route it clashes with, defined before it.
        earlier: String,
    },
    /// Two routes could match the same request (same host, one path a prefix of the other).
    #[error(
        "{route}: its path overlaps {earlier} on the same host (no request may match two routes)"
    )]
    OverlappingRoutes {
        /// The route's name.
        route: String,
        /// The route it clashes with, defined before it.
        earlier: String,
    },
    /// The trace export settings (`OTEL_*` variables) are refused.
    #[error(transparent)]
    Traces(#[from] TraceConfigError),
    /// The agent card settings are refused.
    #[error(transparent)]
    Card(#[from] crate::card::CardConfigError),
    /// A `--push-allow` entry is refused.
    #[error(transparent)]
    PushAllow(#[from] crate::push::PushAllowError),
    /// The DNS resolver the push guard checks names with cannot be built: why.
    #[error("--push: {0}")]
    PushResolver(String),
    /// A route relays push notifications, and the relay's process settings are missing
    /// or refused: why.
    #[error("push = \"relay\": {0}")]
    PushRelay(String),
    /// A push delivery setting is refused: which, and why.
    #[error("--{0}: {1}")]
    PushDelivery(&'static str, String),
    /// The push signing key is refused.
    #[error(transparent)]
    PushSignKey(#[from] crate::push::sign::PushSignKeyError),
}

/// The configuration could not be assembled from flags, environment and file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The command line or environment cannot be parsed; also `--help` and `--version`,
    /// which clap reports as errors (`clap::Error::use_stderr` is false for them).
    #[error(transparent)]
    Flags(#[from] clap::Error),
    /// The `--config` file cannot be read or parsed.
    #[error("--config {path:?}: {message}")]
    File {
        /// The file as given.
        path: std::path::PathBuf,
        /// What is wrong, with the line when the parser gives one.
        message: String,
    },
    /// The configuration is complete but cannot be served.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// A parsed configuration, before `settings` checks and types it: the process-wide
/// settings and the routes.
#[derive(Clone, Debug)]
pub struct Config {
    /// Flags, environment and file, before any route's own keys.
    pub cli: Cli,
    pub routes: Vec<RouteConfig>,
}

impl Config {
    /// Parses `args` (program name first), fills every setting the command line and
    /// environment left at its default from the config file (`--config`, or the file of
    /// `check-config`), and checks the routes' names, paths and hosts.
    pub fn load<I, T>(args: I) -> Result<Config, LoadError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let command = Cli::command();
        let mut cli = parse(command.clone(), &args)?;
        if let Some(Command::CheckConfig { file }) = &cli.command {
            cli.config = Some(file.clone());
        }
        let Some(path) = cli.config.clone() else {
            let routes = routes::resolve(&cli, Vec::new())?;
            return Ok(Config { cli, routes });
        };
        let file = file::read(&path, &command).map_err(|message| LoadError::File {
            path: path.clone(),
            message,
        })?;
        // The file's values are the flags' defaults: the command line and environment win.
        let mut cli = parse(file.top.as_defaults(command), &args)?;
        cli.config = Some(path);
        cli.card_settings = file.top.card.unwrap_or_default();
        cli.auth_table = file.top.auth.unwrap_or_default();
        cli.allow_rules = file.top.allow.unwrap_or_default();
        let mut tables = Vec::with_capacity(file.routes.len());
        for mut route in file.routes {
            let mut settings = cli.clone();
            route.settings.set_over(&mut settings)?;
            // A route's `card` table and `allow` list replace the top-level ones; its
            // `auth` keys replace theirs one by one.
            if let Some(card) = route.settings.card.take() {
                settings.card_settings = card;
            }
            if let Some(auth) = route.settings.auth.take() {
                settings.auth_table = auth.over(&cli.auth_table);
            }
            if let Some(allow) = route.settings.allow.take() {
                settings.allow_rules = allow;
            }
            tables.push((route, settings));
        }
        let routes = routes::resolve(&cli, tables)?;
        Ok(Config { cli, routes })
    }
}

/// `args` parsed by `command` (`Cli`'s, perhaps with the file's defaults).
fn parse(command: clap::Command, args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    let matches = command.try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn load(args: &[&str], file: &str) -> Result<Cli, String> {
        load_config(args, file).map(|(config, _)| config.cli)
    }

    /// The merged configuration of `args` and `file`, and its settings, checked.
    fn load_config(args: &[&str], file: &str) -> Result<(Config, Settings), String> {
        static FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("a2a-config-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gateway.toml");
        std::fs::write(&path, file).unwrap();
        let mut argv = vec!["a2a-gateway", "--config", path.to_str().unwrap()];
        argv.extend_from_slice(args);
        let settings = Settings::load(argv.clone()).map_err(|e| e.to_string());
        let result = settings.and_then(|settings| {
            let config = Config::load(argv).map_err(|e| e.to_string())?;
            Ok((config, settings))
        });
        std::fs::remove_dir_all(&dir).ok();
        result
    }

    #[test]
    fn file_settings_fill_what_flags_leave() {
        let file = r#"
            listen = "127.0.0.1:9000"
            backend = "http://agent:50051"
            binding = "HTTP+JSON"
            timeout = "5s"
            max-body = "1MiB"
            forward-header = ["x-tenant"]
            log-format = "json"
        "#;
        let cli = load(&["--timeout", "7s"], file).unwrap();
        assert_eq!(cli.listen.to_string(), "127.0.0.1:9000");
        assert_eq!(cli.backend, ["http://agent:50051"]);
        assert_eq!(cli.binding, Binding::HttpJson);
        assert_eq!(cli.timeout, Duration::from_secs(7), "the flag wins");
        assert_eq!(cli.max_body, 1 << 20);
        assert_eq!(cli.forward_headers, ["x-tenant"]);
        assert_eq!(cli.log_format, LogFormat::Json);
        assert_eq!(cli.keepalive, Duration::from_secs(15), "defaults stay");
    }

    #[test]
    fn affinity_needs_a_shared_key_and_several_endpoints() {
        let two = "backend = [\"http://a:1\", \"http://b:1\"]\n";
        let err = load(&["--affinity", "task"], two).unwrap_err();
        assert!(
            err.contains("needs a key every gateway replica shares"),
            "{err}"
        );
        let keyed = format!("{two}affinity = \"task\"\naffinity-key = \"a key of 16 bytes+\"\n");
        let cli = load(&[], &keyed).unwrap();
        assert_eq!(cli.affinity, Affinity::Task);
        assert!(
            !format!("{cli:?}").contains("a key of"),
            "the key is not logged"
        );
        let err = load(&["--affinity-key", "short"], &keyed).unwrap_err();
        assert!(err.contains("16 to 1024"), "{err}");
        let one = load(
            &["--affinity", "task", "--affinity-key", "a key of 16 bytes+"],
            "backend = \"http://a:1\"\n",
        );
        assert!(one.unwrap_err().contains("several endpoints"));
        let route = "[[route]]\nname = \"r\"\npath = \"/r\"\naffinity = \"task\"\n";
        let err = load(&[], &format!("{route}{two}")).unwrap_err();
        assert!(
            err.contains("route \"r\"") && err.contains("affinity-key"),
            "{err}"
        );
    }

    #[test]
    fn client_timeouts_are_global_and_greater_than_zero() {
        let backend = "backend = \"http://a:1\"\n";
        let cli = load(&[], &format!("{backend}client-body-timeout = \"5s\"\n")).unwrap();
        assert_eq!(cli.client_body_timeout, Duration::from_secs(5));
        assert_eq!(
            cli.client_header_timeout,
            Duration::from_secs(30),
            "default"
        );
        let err = load(&["--client-idle-timeout", "0"], backend).unwrap_err();
        assert!(
            err.contains("--client-idle-timeout must be greater than 0"),
            "{err}"
        );
        let route = "[[route]]\nname = \"r\"\npath = \"/r\"\nclient-send-timeout = \"1s\"\n";
        let err = load(&[], &format!("{route}{backend}")).unwrap_err();
        assert!(err.contains("client-send-timeout"), "{err}");
    }

    #[test]
    fn file_errors_name_the_key() {
        let long = "k".repeat(100_000);
        let err = load(&[], &format!("backend = \"http://a:1\"\n{long} = 1\n")).unwrap_err();
        assert!(
            err.contains("kkk") && err.len() < 2_000,
            "{} bytes",
            err.len()
        );
        let err = load(&[], "backend = \"http://a:1\"\ntimeot = \"5s\"\n").unwrap_err();
        assert!(err.contains("timeot"), "{err}");
        let err = load(&[], "keepalive = \"soon\"\n").unwrap_err();
        assert!(err.contains("keepalive"), "{err}");
        let err = load(&[], "binding = \"SOAP\"\n").unwrap_err();
        assert!(err.contains("binding"), "{err}");
        let err = load(&[], "listen = [").unwrap_err();
        assert!(err.contains("--config"), "{err}");
        let err = load(&[], "").unwrap_err();
        assert!(err.contains("--backend is required"), "{err}");
    }

    /// File values go through the flags' own parsers and stand where their heading says.
    #[test]
    fn file_keys_are_the_flags() {
        let backend = "backend = \"http://a:1\"\n";
        let cli = load(&[], "backend = \"dns:///a:1\"\nbackend-tls = true\n").unwrap();
        assert!(cli.backend_tls, "a boolean sets the flag");
        let cli = load(
            &["--eject-after", "2"],
            &format!("{backend}eject-after = 9\n"),
        )
        .unwrap();
        assert_eq!(cli.eject_after, 2, "the flag wins");
        let cases = [
            (
                "backend-tls = \"yes\"",
                "line 2: key `backend-tls`: \"yes\" is not one of",
            ),
            ("workers = [1, 2]", "key `workers`: takes one value"),
            ("timeout = {}", "key `timeout`: must be a string"),
            ("demo = true", "key `demo`: is a command-line flag only"),
            (
                "[[route]]\nname = \"r\"\npath = \"/r\"\nworkers = 2",
                "line 5: key `route[0].workers`: is process-wide",
            ),
        ];
        // A route's keys win over everything else; what it leaves, booleans too, stays.
        let routes =
            "backend-tls = true\nmax-body = \"2MiB\"\n[[route]]\nname = \"a\"\npath = \"/a\"\n\
            backend = \"dns:///a:1\"\ntimeout = \"60s\"\n[[route]]\nname = \"b\"\npath = \"/b\"\n\
            backend = \"dns:///b:1\"\n";
        let (config, _) = load_config(&["--timeout", "7s"], routes).unwrap();
        let [a, b] = &config.routes[..] else {
            panic!("two routes")
        };
        assert_eq!(a.settings.timeout, Duration::from_secs(60));
        assert_eq!(b.settings.timeout, Duration::from_secs(7));
        assert!(a.settings.backend_tls && b.settings.backend_tls);
        assert_eq!(b.settings.max_body, 2 << 20);
        for (body, expected) in cases {
            let err = load(&[], &format!("{backend}{body}\n")).unwrap_err();
            assert!(
                err.contains(expected),
                "{body}\n→ {err}\nexpected: {expected}"
            );
        }
    }

    /// Every setting the file may hold is reachable by its flag's long name.
    #[test]
    fn file_settings_have_long_names() {
        for arg in Cli::command().get_arguments() {
            if matches!(arg.get_help_heading(), Some(PROCESS | ROUTE)) {
                assert!(arg.get_long().is_some(), "{:?}", arg.get_id());
            }
        }
    }

    #[test]
    fn auth_keys_are_route_defaults_a_route_replaces_one_by_one() {
        let file = r#"
            [auth]
            anonymous = true
            [[allow]]
            methods = ["GetTask"]

            [[route]]
            name = "a"
            path = "/a"
            backend = "http://a:1"

            [[route]]
            name = "b"
            path = "/b"
            backend = "http://b:1"
            [route.auth.api-keys]
            header = "x-key"
            [[route.allow]]
            principals = ["svc-*"]
            [[route.allow]]
            tenants = ["acme"]
        "#;
        // Both tables are enforced now: route b's key table without keys fails the load.
        let err = load_config(&[], file).err().unwrap();
        assert!(
            err.contains("route \"b\"") && err.contains("no key configured"),
            "{err}"
        );
        let path = std::env::temp_dir().join(format!("a2a-auth-{}.toml", std::process::id()));
        std::fs::write(&path, file).unwrap();
        let config = Config::load([
            "a2a-gateway".as_ref(),
            "--config".as_ref(),
            path.as_os_str(),
        ]);
        let config = config.map_err(|e| e.to_string()).unwrap();
        let [a, b] = &config.routes[..] else {
            panic!("two routes")
        };
        assert!(a.settings.auth_table.lets_anonymous_in());
        assert_eq!(a.settings.allow_rules.len(), 1);
        assert!(
            b.settings.auth_table.lets_anonymous_in(),
            "a key of the top level"
        );
        let keys = b.settings.auth_table.api_keys.as_ref().unwrap();
        assert_eq!(keys.header.as_deref(), Some("x-key"));
        assert_eq!(b.settings.allow_rules.len(), 2);
        let wrong = "[[route]]\nname = \"a\"\npath = \"/a\"\n[[route.allow]]\nmethod = [\"x\"]\n";
        let err = load_config(&[], wrong).err().unwrap();
        assert!(err.contains("route[0].allow[0].method"), "{err}");
    }

    #[test]
    fn routes_take_the_global_settings_under_their_own() {
        let file = r#"
            timeout = "5s"
            public-url = "https://agents.example.com"

            [[route]]
            name = "billing"
            path = "/agents/billing/"
            backend = "http://billing:50051"
            timeout = "60s"
            tenant = "acme"
            [route.card]
            source = "http://billing:8081/.well-known/agent-card.json"

            [[route]]
            name = "search"
            host = "Search.Example.com"
            backend = "http://search:8080/a2a"
            binding = "HTTP+JSON"
        "#;
        let (config, settings) = load_config(&["--connect-timeout", "2s"], file).unwrap();
        let [billing, search] = &config.routes[..] else {
            panic!("two routes: {:?}", config.routes);
        };
        let billing_settings = &settings.routes[0];
        assert_eq!(billing.prefix, "/agents/billing");
        assert_eq!(
            billing_settings.jsonrpc_path(),
            "/agents/billing/a2a/jsonrpc"
        );
        assert_eq!(
            billing_settings.card_path(),
            "/agents/billing/.well-known/agent-card.json"
        );
        assert_eq!(billing.settings.timeout, Duration::from_secs(60));
        assert_eq!(billing.settings.tenant.as_deref(), Some("acme"));
        assert_eq!(billing.line, Some(6));
        assert!(billing_settings
            .card
            .source
            .clone()
            .unwrap()
            .starts_with("http://billing:8081"));
        assert_eq!(search.host.as_deref(), Some("search.example.com"));
        assert_eq!(search.prefix, "");
        assert_eq!(search.settings.binding, Binding::HttpJson);
        assert_eq!(search.settings.timeout, Duration::from_secs(5), "global");
        assert_eq!(
            search.settings.connect_timeout,
            Duration::from_secs(2),
            "flag"
        );
        assert_eq!(
            search.settings.public_url.as_deref(),
            Some("https://agents.example.com")
        );
        assert!(search.settings.tenant.is_none());
    }

    #[test]
    fn the_shorthand_is_one_root_route() {
        let (_, settings) =
            load_config(&["--backend", "http://a:1", "--card", "card.json"], "").unwrap();
        let [route] = &settings.routes[..] else {
            panic!("one route")
        };
        assert_eq!(
            (route.name.as_str(), route.prefix.as_str()),
            ("default", "")
        );
        assert_eq!(route.jsonrpc_path(), "/a2a/jsonrpc");
        assert_eq!(route.card.source.as_deref(), Some("card.json"));
    }

    /// Each kind of route mistake fails at load, naming the route, its line and the key.
    #[test]
    fn route_mistakes_name_the_route_and_key() {
        let route = |name: &str, body: &str| {
            let backend = if body.contains("backend") {
                ""
            } else {
                "backend = \"http://a:1\"\n"
            };
            format!("[[route]]\nname = \"{name}\"\n{backend}{body}\n")
        };
        let cases = [
            (
                route("a", "path = \"/a\"\ntimeot = \"1s\""),
                "key `route[0].timeot`",
            ),
            (
                route("a", "path = \"/a\"\nbackend = \"ftp://a\""),
                "route \"a\" (line 2): --backend",
            ),
            (
                route("a", "path = \"a\""),
                "key `path`: \"a\" must start with '/'",
            ),
            (route("a", "path = \"/a/../b\""), "key `path`"),
            (route("a", "path = \"/metrics\""), "taken by the gateway"),
            (route("a", ""), "needs a path, a host or both"),
            (route("a", "host = \"a.example:80\""), "key `host`"),
            (route("a b", "path = \"/a\""), "key `name`"),
            (
                route("a", "path = \"/a\"\ntenant = \"\""),
                "--tenant must not be empty",
            ),
            (
                route("a", "path = \"/a\"\npublic-url = \"example.com\""),
                "--public-url",
            ),
            (
                route("a", "path = \"/a\"\n[route.card]\nsorce = \"x\""),
                "route[0].card.sorce",
            ),
            (
                route("a", "path = \"/a\"") + &route("a", "path = \"/b\""),
                "already used by route \"a\" (line 2)",
            ),
            (
                route("a", "path = \"/a\"") + &route("b", "path = \"/a/b\""),
                "route \"b\" (line 6): its path overlaps route \"a\"",
            ),
            (
                route("a", "path = \"/\"") + &route("b", "path = \"/b\""),
                "overlaps",
            ),
            (
                route("a", "path = \"/a\"\nhost = \"x.example\"")
                    + &route("b", "path = \"/a\"\nhost = \"x.example\""),
                "overlaps",
            ),
            (
                format!("backend = \"http://a:1\"\n{}", route("a", "path = \"/a\"")),
                "`backend` is a per-route setting",
            ),
            (
                format!("tenant = \"t\"\n{}", route("a", "path = \"/a\"")),
                "`tenant` is a per-route setting",
            ),
            (
                route("a", "path = \"/a\"\nlisten = \"127.0.0.1:1\""),
                "route[0].listen",
            ),
        ];
        for (file, expected) in cases {
            let err = load(&[], &file).unwrap_err();
            assert!(
                err.contains(expected),
                "{file}\n→ {err}\nexpected: {expected}"
            );
        }
        // Distinct hosts may share a path; a host route beside an any-host one too.
        let file = route("a", "path = \"/a\"\nhost = \"x.example\"")
            + &route("b", "path = \"/a\"\nhost = \"y.example\"")
            + &route("c", "path = \"/a\"");
        assert_eq!(load_config(&[], &file).unwrap().1.routes.len(), 3);
    }
}

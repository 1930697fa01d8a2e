//! What the suites share. Here: how the gateway reaches the test backend (`Scheme`: over
//! `http://` or `https://`, one test CA per test process) and the gateway served on
//! `127.0.0.1:0` in front of it. In the submodules: the scriptable gRPC test backend
//! (`backend`), small wire-level clients (`client`) and the bounded ones of the case runners
//! (`calls`), the gateway binary as a child process (`process`, the only place it is
//! started to serve), a test DNS server, pods that die, a JWT issuer (`issuer`), the
//! reference-SDK peers, differential transcripts, the hostile-backend and agent-fault case
//! machinery, an OTLP receiver, a mock HTTP+JSON agent, TLS certificates, what the abuse,
//! soak and hostile-backend suites watch of a gateway process, and the tests that run in a
//! process of their own.

pub mod backend;
pub mod calls;
pub mod client;
pub mod dns;
pub mod faults;
pub mod hostile;
pub mod issuer;
pub mod otlp;
pub mod own_process;
pub mod peer;
pub mod pods;
pub mod process;
pub mod rest_mock;
pub mod tls_pki;
pub mod transcript;
pub mod verdicts;
pub mod vitals;

pub use backend::{
    echo_message, keep_push_config, push_config_agent, status_update, task, Answer, PushStore,
    Step, TestBackend,
};
pub use client::{
    client, key_digest_hex, message_params, metrics_text, post, post_with, request, rpc, SseReader,
};

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use a2a_gateway::backend::grpc::{GrpcBackend, GrpcSettings};
use a2a_gateway::front::Gateway;
use a2a_gateway::protocol::ops::Request;
use a2a_gateway::protocol::params::ForwardPolicy;

/// The name the test harness gives the test `name` of the module whose `module_path!()`
/// is `module`: the module's path without the crate's name, then `name`.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}

/// How the gateway reaches the test backend. The gRPC wire suites run every case over
/// both (`scheme_tests!`): cleartext HTTP/2 and TLS with ALPN `h2`, whose client paths
/// in the gateway differ only below HTTP/2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The backend URL of a server on `addr`.
    pub fn url(self, addr: SocketAddr) -> String {
        match self {
            Scheme::Http => format!("http://{addr}"),
            Scheme::Https => format!("https://{addr}"),
        }
    }

    /// `server` as is, or serving TLS with the test CA's server certificate.
    pub fn server(self, server: tonic::transport::Server) -> tonic::transport::Server {
        use tonic::transport::{Identity, ServerTlsConfig};
        match self {
            Scheme::Http => server,
            Scheme::Https => {
                let pki = test_pki();
                let identity = Identity::from_pem(&pki.cert_pem, &pki.key_pem);
                server
                    .tls_config(ServerTlsConfig::new().identity(identity))
                    .unwrap()
            }
        }
    }

    /// The flags that make the binary's configuration trust the test CA (none for http).
    pub fn ca_flags(self) -> Vec<String> {
        match self {
            Scheme::Http => Vec::new(),
            Scheme::Https => vec![
                "--backend-ca".to_owned(),
                test_pki().ca_file.to_str().unwrap().to_owned(),
            ],
        }
    }

    /// The server side of a raw scripted backend's connection: `tcp` itself, or TLS
    /// (ALPN `h2`) with the test CA's server certificate; `None` if the handshake fails.
    pub async fn accept(self, tcp: tokio::net::TcpStream) -> Option<Box<dyn Io>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        if self == Scheme::Http {
            return Some(Box::new(tcp));
        }
        static ACCEPTOR: OnceLock<tokio_rustls::TlsAcceptor> = OnceLock::new();
        let acceptor = ACCEPTOR.get_or_init(|| {
            let pki = test_pki();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![CertificateDer::from_pem_slice(pki.cert_pem.as_bytes()).unwrap()],
                    PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes()).unwrap(),
                )
                .unwrap();
            config.alpn_protocols = vec![b"h2".to_vec()];
            tokio_rustls::TlsAcceptor::from(Arc::new(config))
        });
        let tls = acceptor.accept(tcp).await.ok()?;
        Some(Box::new(tls))
    }

    /// A test backend served with this scheme and the gateway in front of it.
    pub async fn setup(
        self,
        handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    ) -> (TestBackend, String) {
        self.setup_with(handler, Settings::default()).await
    }

    pub async fn setup_with(
        self,
        handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
        settings: Settings,
    ) -> (TestBackend, String) {
        let backend = TestBackend::new(handler);
        let addr = backend.spawn_scheme(self).await;
        let url = gateway(&self.url(addr), settings).await;
        (backend, url)
    }
}

/// A raw scripted backend's connection, cleartext or TLS.
pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// Runs each `async fn case(scheme: Scheme)` named as two tests, `case::http` and
/// `case::https`, so a failure names its scheme. Written above the case:
/// `scheme_tests!(case);` (the case stays a plain function that rustfmt formats and grep
/// finds; the macro only declares the module of its two tests).
macro_rules! scheme_tests {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[tokio::test]
            async fn http() {
                super::$case($crate::harness::Scheme::Http).await
            }

            #[tokio::test]
            async fn https() {
                super::$case($crate::harness::Scheme::Https).await
            }
        }
    )*};
}
pub(crate) use scheme_tests;

/// The DNS name the test DNS server gives pods (`dns.rs`), in the test certificate too.
pub const POD_NAME: &str = "agents.a2a.test";

/// The test process's CA and the `localhost`/`127.0.0.1` server certificate it signed.
pub struct TestPki {
    pub ca_pem: String,
    /// `ca_pem` in a file, for `--backend-ca`.
    pub ca_file: std::path::PathBuf,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Made once per test process.
pub fn test_pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| {
        let ca = tls_pki::Ca::new("a2a-gateway test CA");
        // For `localhost`, `127.0.0.1` and the pods behind the test DNS server
        // (`tests/it/endpoints.rs`).
        let server = ca.server("a2a-gateway test backend", 1);
        let ca_file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("test-ca-{}.pem", std::process::id()));
        std::fs::write(&ca_file, &ca.pem).unwrap();
        TestPki {
            ca_pem: ca.pem,
            ca_file,
            cert_pem: server.cert_pem,
            key_pem: server.key_pem,
        }
    })
}

/// Gateway settings for tests (defaults as in the CLI, unless changed).
pub struct Settings {
    pub unary_timeout: Option<Duration>,
    pub stream_timeout: Option<Duration>,
    pub keepalive: Duration,
    pub max_body: usize,
    pub forward: ForwardPolicy,
    /// The push URL guard (`None`: off).
    pub push: Option<PushGuard>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            unary_timeout: Some(Duration::from_secs(30)),
            stream_timeout: None,
            keepalive: Duration::from_secs(15),
            max_body: 4 << 20,
            forward: ForwardPolicy::default(),
            // On, as by default; the wire suites' push URLs name these hosts, which do
            // not resolve here.
            push: Some(push_guard(&["hooks.example", "example.com"], None)),
        }
    }
}

/// The push URL guard's settings: admitting `allow` (https only), resolving names with
/// `dns` or the system's resolver.
pub fn push_guard(allow: &[&str], dns: Option<SocketAddr>) -> PushGuard {
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    PushGuard {
        policy: a2a_gateway::push::PushPolicy::new(false, &allow).unwrap(),
        dns,
    }
}

/// A push guard's policy and the DNS server it asks.
pub struct PushGuard {
    policy: a2a_gateway::push::PushPolicy,
    dns: Option<SocketAddr>,
}

/// One route's settings from `flags`, as the binary parses them (a placeholder backend
/// unless the flags name one).
pub fn route_settings(flags: &[&str]) -> a2a_gateway::settings::RouteSettings {
    let backend = ["--backend", "http://backend.invalid:1"];
    let backend = if flags.contains(&"--backend") {
        &[][..]
    } else {
        &backend[..]
    };
    let args = std::iter::once("a2a-gateway")
        .chain(backend.iter().copied())
        .chain(flags.iter().copied());
    let mut settings = a2a_gateway::settings::Settings::load(args).unwrap();
    settings.routes.remove(0)
}

/// The gateway in front of the gRPC backend at `backend`, served on 127.0.0.1:0; an
/// `https://` backend is verified with the test CA. Returns the JSON-RPC endpoint URL.
pub async fn gateway(backend: &str, settings: Settings) -> String {
    let grpc_settings = GrpcSettings {
        connect_timeout: Duration::from_secs(2),
        ..GrpcSettings::default()
    };
    let ca = backend
        .starts_with("https://")
        .then(|| test_pki().ca_pem.as_bytes());
    let grpc = GrpcBackend::new(backend, &grpc_settings, ca).unwrap();
    let mut route = route_settings(&[]);
    route.unary_timeout = settings.unary_timeout;
    route.stream_timeout = settings.stream_timeout;
    route.first_event_timeout = settings.unary_timeout;
    route.keepalive = settings.keepalive;
    route.max_body = settings.max_body;
    route.forward = settings.forward;
    route.push = settings.push.map(|push| {
        route.resolution.server = push.dns;
        push.policy
    });
    let state =
        a2a_gateway::route::handler_over(&route, Arc::new(grpc), Default::default()).unwrap();
    serve(state, "/a2a/jsonrpc").await
}

/// The route prefix every wire suite is served under (`serve`).
pub const ROUTE_PREFIX: &str = "/agents/under-test";

/// Serves `state` on 127.0.0.1:0 until the test ends; returns the JSON-RPC endpoint URL.
/// The gateway answers as a multi-route gateway does: `state` is the route at
/// `ROUTE_PREFIX`, beside a sibling route, so every wire suite checks that a route's
/// endpoint behaves as the single endpoint of the flags-only shorthand (`tests/it/cli.rs`
/// runs that one).
pub async fn serve(state: Arc<Gateway>, jsonrpc_path: &str) -> String {
    use a2a_gateway::server::routing::ServedRoute;
    let route = |name: &str, prefix: &str| ServedRoute {
        name: name.to_owned(),
        prefix: prefix.to_owned(),
        host: None,
        jsonrpc_path: Some(jsonrpc_path.to_owned()),
        rest_path: None,
        grpc: false,
        endpoints: None,
        gateway: state.clone(),
    };
    let routes = vec![
        route("sibling", "/agents/sibling"),
        route("under-test", ROUTE_PREFIX),
    ];
    let router =
        a2a_gateway::server::Frontend::new(routes, state.metrics.clone(), state.lifecycle.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(a2a_gateway::server::serve(
        listener,
        router,
        std::future::pending(),
        Duration::from_secs(1),
    ));
    format!("http://{addr}{ROUTE_PREFIX}{jsonrpc_path}")
}

/// The gateway built exactly as the binary builds it from `args` (flags after the
/// program name), served on 127.0.0.1:0. Returns the JSON-RPC endpoint URL.
pub async fn gateway_from_flags(args: &[&str]) -> String {
    // The SDK peers' conversations register push hooks on loopback (`http://127.0.0.1:9/…`),
    // which the push guard refuses unless admitted.
    let admit_loopback_hooks = ["--push-allow-http", "--push-allow", "127.0.0.1"];
    let settings = a2a_gateway::settings::Settings::load(
        std::iter::once("a2a-gateway")
            .chain(args.iter().copied())
            .chain(admit_loopback_hooks),
    )
    .unwrap();
    let route = &settings.routes[0];
    let state = a2a_gateway::route::gateway(route, Default::default()).unwrap();
    serve(state, &route.jsonrpc_path).await
}

/// A cleartext test backend and the gateway in front of it.
pub async fn setup(
    handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
) -> (TestBackend, String) {
    setup_with(handler, Settings::default()).await
}

pub async fn setup_with(
    handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    settings: Settings,
) -> (TestBackend, String) {
    Scheme::Http.setup_with(handler, settings).await
}

/// A loopback port nothing listens on, for as long as this is kept: bound but never
/// listening, so connects are refused and no other test (they share the process) can be
/// given the port, as one was when it was merely released.
pub struct ClosedPort(tokio::net::TcpSocket);

impl ClosedPort {
    pub fn new() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        ClosedPort(socket)
    }

    pub fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }
}

/// Serves `frontend` on 127.0.0.1:0 until the test ends: its base URL.
pub async fn serve_frontend(frontend: a2a_gateway::server::Frontend) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(a2a_gateway::server::serve(
        listener,
        frontend,
        std::future::pending(),
        Duration::from_secs(1),
    ));
    format!("http://{addr}")
}

/// `SendMessage` params of a user message with `text`, in `context` and `task` if given.
pub fn message_in(text: &str, context: Option<&str>, task: Option<&str>) -> serde_json::Value {
    let mut message = serde_json::json!({"messageId": uuid::Uuid::new_v4().to_string(),
                                         "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(context) = context {
        message["contextId"] = serde_json::json!(context);
    }
    if let Some(task) = task {
        message["taskId"] = serde_json::json!(task);
    }
    serde_json::json!({ "message": message })
}

/// A backend answering GetTask with a completed task of the id asked for; and its URL.
pub async fn task_backend() -> (TestBackend, String) {
    use a2a_gateway::proto::TaskState;
    use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(get)) => {
            Answer::Reply(Reply::GetTask(task(&get.id, TaskState::Completed)))
        }
        _ => Answer::Error(tonic::Status::unimplemented("GetTask only")),
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

/// The URL of an agent that accepts connections and holds them without a byte of HTTP/2
/// (a readiness check or a call to it waits for its timeout).
pub async fn silent_agent() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    format!("http://{addr}")
}

/// A loopback address no one listens on yet, for a gateway process to serve on.
pub fn free_listen_address() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// Waits (at most 10 s) until a gateway process serves `/healthz` on `listen`.
pub async fn await_serving(listen: &str) {
    let started = std::time::Instant::now();
    while reqwest::get(format!("http://{listen}/healthz"))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "gateway did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The gateway of `args` (and the TOML `file`, if any) built as the binary builds it, served
/// on two worker threads (whose counters must be shared); returns its origin.
pub async fn serve_on_workers(args: &[&str], file: Option<&str>) -> String {
    use a2a_gateway::route::Routes;
    use a2a_gateway::server::workers::Workers;
    let file = file.map(|text| process::TempFile::new("toml", text));
    let mut argv = vec!["a2a-gateway"];
    argv.extend_from_slice(args);
    if let Some(file) = &file {
        argv.extend(["--config", file.path()]);
    }
    let config = a2a_gateway::settings::Settings::load(argv).unwrap();
    let template = Arc::new(Routes::new(&config, None).unwrap());
    // As `main` does: the JWT issuers' keys are fetched from now on.
    template.start_auth();
    let workers = Workers::start(&template, &Arc::default(), 2, Duration::from_secs(1)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(workers.serve(listener, None, std::future::pending()));
    format!("http://{addr}")
}

//! `/readyz` asks the agents, on real sockets: gRPC agents serving tonic-health's
//! `grpc.health.v1.Health` (over `http://` and `https://`), agents without it (a connect
//! decides), HTTP+JSON agents, balanced routes, several routes; the cache that keeps probe
//! storms off the agents; the per-route `a2a_gateway_route_ready` gauge; and the admin
//! listener (`--admin-listen`) of the real binary, draining on SIGTERM.
//!
//! Two surfaces: the admin listener's `/readyz` names each route that is not ready and
//! why; every other listener's body is exactly `ready`, `not ready` or `shutting down`
//! (issue 20: no route names or agent addresses on the public port), and the reasons are
//! in the log on every change.
//!
//! The gateway is built from flags as the binary builds it (`Settings::load`,
//! `route::Routes`), so its `/readyz` and `/metrics` are the binary's; each test reads
//! both its main (public) listener and its admin listener.

use crate::harness;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::route::Routes;
use a2a_gateway::settings::Settings;
use harness::pods::Pod;
use harness::process::{start_with, TempFile};
use harness::{free_listen_address, message_params, request, rpc, Scheme, TestBackend};
use serde_json::json;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthReporter, HealthService};
use tonic_health::ServingStatus;

/// A gateway's two listeners: their base URLs.
struct Served {
    /// The main listener (routes and gateway endpoints): `/readyz` says ready or not.
    public: String,
    /// The admin listener: `/readyz` says which route is not ready, and why.
    admin: String,
}

/// The gateway of `args` (flags after the program name) on 127.0.0.1:0, with its admin
/// listener beside it, sharing one readiness as the binary's listeners do. Its
/// `--readiness` is `all-routes`, the mode whose `/readyz` follows every route's check
/// (`readiness_modes` tests each mode).
async fn gateway(args: &[&str]) -> Served {
    let argv = ["a2a-gateway", "--readiness", "all-routes"].into_iter();
    let config = Settings::load(argv.chain(args.iter().copied())).unwrap();
    let template = Routes::new(&config, None).unwrap();
    let metrics = Arc::default();
    Served {
        public: harness::serve_frontend(template.frontend(&metrics).unwrap()).await,
        admin: harness::serve_frontend(template.admin_frontend(&metrics).unwrap()).await,
    }
}

/// The public `/readyz` of a gateway that is not ready: 503 and no more, whatever the
/// admin listener says.
async fn assert_public_not_ready(served: &Served) {
    assert_eq!(
        readyz(&served.public).await,
        (503, "not ready\n".to_owned())
    );
}

/// `GET base + path`: status and body.
async fn get(base: &str, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("{base}{path}")).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn readyz(base: &str) -> (u16, String) {
    get(base, "/readyz").await
}

/// Polls `/readyz` until it answers `status`; returns its body. Fails after `limit`.
async fn await_readyz(base: &str, status: u16, limit: Duration) -> String {
    let started = Instant::now();
    loop {
        let (now, body) = readyz(base).await;
        if now == status {
            return body;
        }
        assert!(
            started.elapsed() < limit,
            "/readyz still {now} after {limit:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What an agent answers to `Health/Check`.
#[derive(Clone, Copy, PartialEq)]
enum Offers {
    /// tonic-health's service, its statuses set through the agent's reporter.
    Health,
    /// A health service that answers UNIMPLEMENTED, as an agent without one does.
    Unimplemented,
}

/// tonic-health's service, counting the checks it answers.
struct Counted {
    inner: HealthService,
    offers: Offers,
    checks: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl Health for Counted {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.checks.fetch_add(1, Relaxed);
        match self.offers {
            Offers::Health => self.inner.check(request).await,
            Offers::Unimplemented => Err(Status::unimplemented("no health service here")),
        }
    }

    type WatchStream = tonic_health::server::WatchStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.inner.watch(request).await
    }
}

/// A gRPC agent with a health service, on a runtime of its own: killing it closes its
/// listener and connections at once.
struct Agent {
    addr: SocketAddr,
    reporter: HealthReporter,
    checks: Arc<AtomicUsize>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Agent {
    async fn start(offers: Offers, scheme: Scheme) -> Agent {
        Agent::start_at(offers, scheme, "127.0.0.1:0".parse().unwrap()).await
    }

    /// Serves on `addr` (port 0: any).
    async fn start_at(offers: Offers, scheme: Scheme, addr: SocketAddr) -> Agent {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let reporter = HealthReporter::new();
        let checks = Arc::new(AtomicUsize::new(0));
        let service = Counted {
            inner: HealthService::from_health_reporter(reporter.clone()),
            offers,
            checks: checks.clone(),
        };
        let (bound_tx, bound) = tokio::sync::oneshot::channel();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
            let _ = bound_tx.send(listener.local_addr().unwrap());
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = scheme
                .server(tonic::transport::Server::builder())
                .add_service(HealthServer::new(service))
                .serve_with_incoming(incoming)
                .await;
        });
        Agent {
            addr: bound.await.unwrap(),
            reporter,
            checks,
            runtime: Some(runtime),
        }
    }

    async fn set(&self, service: &str, status: ServingStatus) {
        self.reporter.set_service_status(service, status).await;
    }

    fn checks(&self) -> usize {
        self.checks.load(Relaxed)
    }

    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SERVING is ready, NOT_SERVING is 503 naming the route (and the gauge says 0), and
/// SERVING again is ready within the cache period; over TLS as over cleartext.
#[tokio::test]
async fn the_agents_health_status_decides() {
    for scheme in [Scheme::Http, Scheme::Https] {
        let agent = Agent::start(Offers::Health, scheme).await;
        let url = scheme.url(agent.addr);
        let mut args = vec!["--backend", &url, "--readiness-cache", "300ms"];
        let ca = scheme.ca_flags();
        args.extend(ca.iter().map(String::as_str));
        let served = gateway(&args).await;
        assert_eq!(readyz(&served.admin).await, (200, "ready\n".to_owned()));
        assert_eq!(agent.checks(), 1);
        assert_eq!(readyz(&served.public).await, (200, "ready\n".to_owned()));

        agent.set("", ServingStatus::NotServing).await;
        let changed = Instant::now();
        let body = await_readyz(&served.admin, 503, Duration::from_secs(2)).await;
        assert!(
            changed.elapsed() < Duration::from_millis(300 + 500),
            "{scheme:?}: seen after {:?}",
            changed.elapsed()
        );
        assert_eq!(
            body,
            "route \"default\" is not ready: the agent reports NOT_SERVING for service \"\"\n"
        );
        assert_public_not_ready(&served).await;
        let (_, metrics) = get(&served.admin, "/metrics").await;
        assert!(
            metrics.contains("a2a_gateway_route_ready{route=\"default\"} 0\n"),
            "{metrics}"
        );

        agent.set("", ServingStatus::Serving).await;
        let changed = Instant::now();
        await_readyz(&served.public, 200, Duration::from_secs(2)).await;
        assert!(changed.elapsed() < Duration::from_millis(300 + 500));
        assert_eq!(readyz(&served.admin).await, (200, "ready\n".to_owned()));
        let (_, metrics) = get(&served.admin, "/metrics").await;
        assert!(metrics.contains("a2a_gateway_route_ready{route=\"default\"} 1\n"));
    }
}

/// An agent without the health service: a connect decides, ready while it accepts and 503
/// once it is gone; whether it offers the service is asked once, not on every check.
#[tokio::test]
async fn without_a_health_service_a_connect_decides() {
    let mut pod = Pod::start(
        TestBackend::new(|_| harness::Answer::Error(Status::unimplemented("unused"))),
        Scheme::Http,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let url = format!("http://{}", pod.addr);
    let served = gateway(&["--backend", &url, "--readiness-cache", "50ms"]).await;
    assert_eq!(readyz(&served.public).await, (200, "ready\n".to_owned()));
    pod.kill();
    let body = await_readyz(&served.admin, 503, Duration::from_secs(2)).await;
    let expected = format!(
        "route \"default\" is not ready: cannot connect to {}",
        pod.addr
    );
    assert!(body.starts_with(&expected), "{body}");
    assert_public_not_ready(&served).await;

    // UNIMPLEMENTED is remembered: later checks only connect.
    let agent = Agent::start(Offers::Unimplemented, Scheme::Http).await;
    let url = format!("http://{}", agent.addr);
    let base = gateway(&["--backend", &url, "--readiness-cache", "50ms"])
        .await
        .public;
    for _ in 0..5 {
        assert_eq!(readyz(&base).await, (200, "ready\n".to_owned()));
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    assert_eq!(
        agent.checks(),
        1,
        "asked whether it offers the health service once"
    );
}

/// Probes in a burst share one check, and a probe storm asks the agent at most once per
/// cache period.
#[tokio::test]
async fn probe_storms_ask_the_agent_once_per_cache_period() {
    let agent = Agent::start(Offers::Health, Scheme::Http).await;
    let url = format!("http://{}", agent.addr);
    let base = gateway(&["--backend", &url, "--readiness-cache", "500ms"])
        .await
        .public;
    // Warm the client's connection pool apart from the gateway's readiness.
    assert_eq!(get(&base, "/healthz").await.0, 200);
    let client = reqwest::Client::new();
    let burst = (0..50).map(|_| client.get(format!("{base}/readyz")).send());
    for response in futures::future::join_all(burst).await {
        assert_eq!(response.unwrap().status(), 200);
    }
    assert_eq!(agent.checks(), 1, "50 concurrent probes, one check");

    let started = Instant::now();
    let period = Duration::from_millis(1600);
    let probes = Arc::new(AtomicUsize::new(0));
    let storm = (0..16).map(|_| {
        let (client, base, probes) = (client.clone(), base.clone(), probes.clone());
        async move {
            while started.elapsed() < period {
                let response = client.get(format!("{base}/readyz")).send().await.unwrap();
                assert_eq!(response.status(), 200);
                probes.fetch_add(1, Relaxed);
            }
        }
    });
    futures::future::join_all(storm).await;
    let checks = agent.checks() - 1;
    let probes = probes.load(Relaxed);
    assert!(probes > 100, "only {probes} probes");
    // 1.6 s of 0.5 s periods: a check at most at 0.5, 1.0 and 1.5 s (the burst's at 0).
    assert!(
        (1..=3).contains(&checks),
        "{checks} checks for {probes} probes"
    );
}

/// An agent that accepts connections but never answers is not ready once
/// `--readiness-timeout` has passed: the probe gets the gateway's 503, not the silence.
#[tokio::test]
async fn a_silent_agent_is_not_ready_after_the_readiness_timeout() {
    let url = harness::silent_agent().await;
    let served = gateway(&["--backend", &url, "--readiness-timeout", "300ms"]).await;
    let started = Instant::now();
    let (status, body) = readyz(&served.admin).await;
    let took = started.elapsed();
    assert_eq!(status, 503);
    assert_eq!(
        body,
        "route \"default\" is not ready: no health answer within 300ms\n"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1500),
        "answered after {took:?}"
    );
    assert_public_not_ready(&served).await;
}

/// HTTP+JSON agents: ready while their address accepts connections.
#[tokio::test]
async fn http_json_routes_are_ready_while_the_agent_accepts() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}/a2a");
    let served = gateway(&[
        "--backend",
        &url,
        "--binding",
        "HTTP+JSON",
        "--readiness-cache",
        "50ms",
    ])
    .await;
    assert_eq!(readyz(&served.public).await, (200, "ready\n".to_owned()));
    drop(listener);
    let body = await_readyz(&served.admin, 503, Duration::from_secs(2)).await;
    assert!(
        body.starts_with(&format!(
            "route \"default\" is not ready: cannot connect to {addr}"
        )),
        "{body}"
    );
    assert_public_not_ready(&served).await;
}

/// Each route is judged on its own; the 503 names exactly the routes that are not ready,
/// and the gauge has one line per route. `health-service` is per route.
#[tokio::test]
async fn routes_are_judged_one_by_one() {
    let agent = Agent::start(Offers::Health, Scheme::Http).await;
    agent
        .set("lf.a2a.v1.A2AService", ServingStatus::Serving)
        .await;
    let down = free_listen_address();
    let config = format!(
        r#"
        readiness-cache = "50ms"
        readiness-timeout = "500ms"

        [[route]]
        name = "serving"
        path = "/serving"
        backend = "http://{agent}"
        health-service = "lf.a2a.v1.A2AService"

        [[route]]
        name = "unknown-service"
        path = "/unknown"
        backend = "http://{agent}"
        health-service = "no.such.Service"

        [[route]]
        name = "down"
        path = "/down"
        backend = "http://{down}"
        "#,
        agent = agent.addr
    );
    let file = TempFile::new("toml", &config);
    let served = gateway(&["--config", file.path()]).await;
    let (status, body) = readyz(&served.admin).await;
    assert_eq!(status, 503);
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 2, "{body}");
    assert_eq!(
        lines[0],
        "route \"unknown-service\" is not ready: the health check failed with NotFound: service not registered"
    );
    assert!(
        lines[1].starts_with("route \"down\" is not ready: backend unreachable: "),
        "{body}"
    );
    assert_public_not_ready(&served).await;
    let (_, metrics) = get(&served.admin, "/metrics").await;
    for line in [
        "a2a_gateway_route_ready{route=\"serving\"} 1\n",
        "a2a_gateway_route_ready{route=\"unknown-service\"} 0\n",
        "a2a_gateway_route_ready{route=\"down\"} 0\n",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }

    agent
        .set("lf.a2a.v1.A2AService", ServingStatus::NotServing)
        .await;
    let started = Instant::now();
    let body = loop {
        let (status, body) = readyz(&served.admin).await;
        if body.contains("route \"serving\"") {
            assert_eq!(status, 503);
            break body;
        }
        assert!(started.elapsed() < Duration::from_secs(2), "{body}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        body.starts_with(
            "route \"serving\" is not ready: the agent reports NOT_SERVING for service \"lf.a2a.v1.A2AService\"\n"
        ),
        "{body}"
    );
}

/// Routes to the same agent, reached the same way, share one check: a probe asks the agent
/// once for all of them (10,000 such routes made a scrape of `/metrics` open 10,000
/// connections to it), and once more for a route that asks about another service.
#[tokio::test]
async fn routes_to_one_agent_share_its_check() {
    let agent = Agent::start(Offers::Health, Scheme::Http).await;
    agent
        .set("lf.a2a.v1.A2AService", ServingStatus::Serving)
        .await;
    let mut config = String::from("readiness-cache = \"1h\"\n");
    for i in 0..3 {
        let backend = format!("http://{}", agent.addr);
        config += &format!(
            "[[route]]\nname = \"same-{i}\"\npath = \"/same{i}\"\nbackend = \"{backend}\"\n"
        );
    }
    config += &format!(
        "[[route]]\nname = \"service\"\npath = \"/service\"\nbackend = \"http://{}\"\nhealth-service = \"lf.a2a.v1.A2AService\"\n",
        agent.addr
    );
    let file = TempFile::new("toml", &config);
    let served = gateway(&["--config", file.path()]).await;
    assert_eq!(readyz(&served.admin).await, (200, "ready\n".to_owned()));
    assert_eq!(
        agent.checks(),
        2,
        "one check for three routes, one for the other service"
    );
    let (_, metrics) = get(&served.admin, "/metrics").await;
    for route in ["same-0", "same-1", "same-2", "service"] {
        let line = format!("a2a_gateway_route_ready{{route=\"{route}\"}} 1\n");
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
}

/// A balanced route is ready while one endpoint is.
#[tokio::test]
async fn balanced_routes_need_one_ready_endpoint() {
    let a = Agent::start(Offers::Health, Scheme::Http).await;
    let b = Agent::start(Offers::Health, Scheme::Http).await;
    let (url_a, url_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let served = gateway(&[
        "--backend",
        &url_a,
        "--backend",
        &url_b,
        "--readiness-cache",
        "50ms",
    ])
    .await;
    let base = &served.admin;
    assert_eq!(readyz(base).await.0, 200);
    a.set("", ServingStatus::NotServing).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = a.checks() + b.checks();
    assert_eq!(readyz(base).await, (200, "ready\n".to_owned()));
    // The first endpoint to pass decides; the other's check may be dropped unasked.
    assert!(a.checks() + b.checks() > before, "checked anew");

    b.set("", ServingStatus::NotServing).await;
    let body = await_readyz(base, 503, Duration::from_secs(2)).await;
    assert!(
        body.starts_with("route \"default\" is not ready: no endpoint is ready ("),
        "{body}"
    );
    for url in [&url_a, &url_b] {
        assert!(
            body.contains(&format!("{url}: the agent reports NOT_SERVING")),
            "{body}"
        );
    }
    assert_public_not_ready(&served).await;
    b.set("", ServingStatus::Serving).await;
    await_readyz(base, 200, Duration::from_secs(2)).await;
}

/// The pods behind a `dns:///` name, over TLS: each address is asked (TLS name and
/// `:authority` the DNS name), and one that passes is enough.
#[tokio::test]
async fn pods_behind_a_dns_name_are_checked_at_their_addresses() {
    let addrs = harness::pods::pod_addresses(2);
    let mut pods = Vec::new();
    for addr in &addrs {
        pods.push(Agent::start_at(Offers::Health, Scheme::Https, *addr).await);
    }
    let dns = harness::dns::TestDns::start(harness::POD_NAME, &harness::pods::ips(&addrs)).await;
    let backend = format!("dns:///{}:{}", harness::POD_NAME, addrs[0].port());
    let resolver = dns.addr.to_string();
    let mut args = vec![
        "--backend",
        &backend,
        "--backend-tls",
        "--backend-resolver",
        &resolver,
        "--readiness-cache",
        "50ms",
    ];
    let ca = Scheme::Https.ca_flags();
    args.extend(ca.iter().map(String::as_str));
    let served = gateway(&args).await;
    let base = &served.admin;
    await_readyz(base, 200, Duration::from_secs(2)).await;
    for pod in &pods {
        pod.set("", ServingStatus::NotServing).await;
    }
    let body = await_readyz(base, 503, Duration::from_secs(2)).await;
    for addr in &addrs {
        assert!(
            body.contains(&format!("{addr}: the agent reports NOT_SERVING")),
            "{body}"
        );
    }
    assert_public_not_ready(&served).await;
    pods[1].set("", ServingStatus::Serving).await;
    await_readyz(base, 200, Duration::from_secs(2)).await;
    assert!(pods.iter().all(|pod| pod.checks() >= 1), "both pods asked");
}

/// The settings load from flags, environment and the file's global keys; a route table
/// cannot set the global ones; bad values name the flag.
#[test]
fn readiness_settings_load_and_are_checked() {
    let load = |args: &[&str], file: &str| {
        let file = TempFile::new("toml", file);
        let mut argv = vec!["a2a-gateway", "--config", file.path()];
        argv.extend_from_slice(args);
        Settings::load(argv).map_err(|e| e.to_string())
    };
    let file = "backend = \"http://a:1\"\nadmin-listen = \"127.0.0.1:9090\"\nreadiness-cache = \"5s\"\nreadiness-timeout = \"250ms\"\nhealth-service = \"x.Y\"\n";
    let config = load(&[], file).unwrap();
    let process = &config.process;
    assert_eq!(
        process.admin_listen,
        Some("127.0.0.1:9090".parse().unwrap())
    );
    assert_eq!(process.readiness_cache, Duration::from_secs(5));
    assert_eq!(process.readiness_timeout, Duration::from_millis(250));
    assert_eq!(config.routes[0].health_service, "x.Y");
    let config = load(&["--admin-listen", "127.0.0.1:9191"], file).unwrap();
    assert_eq!(
        config.process.admin_listen,
        Some("127.0.0.1:9191".parse().unwrap()),
        "the flag wins"
    );

    let route = "[[route]]\nname = \"r\"\npath = \"/r\"\nbackend = \"http://a:1\"\n";
    let err = load(&[], &format!("{route}readiness-cache = \"1s\"\n")).unwrap_err();
    assert!(err.contains("route[0].readiness-cache"), "{err}");
    let err = load(&[], &format!("{route}admin-listen = \"127.0.0.1:1\"\n")).unwrap_err();
    assert!(err.contains("route[0].admin-listen"), "{err}");
    let err = load(&["--readiness-timeout", "0"], "backend = \"http://a:1\"\n").unwrap_err();
    assert!(err.contains("--readiness-timeout"), "{err}");
    let err = load(
        &[
            "--listen",
            "127.0.0.1:9000",
            "--admin-listen",
            "127.0.0.1:9000",
        ],
        "backend = \"http://a:1\"\n",
    )
    .unwrap_err();
    assert!(err.contains("--admin-listen"), "{err}");
}

/// The binary with `args` and an admin listener (set by its environment variable), its
/// `/readyz` following every route's check (`--readiness all-routes`, also set so).
async fn with_admin(args: &[&str]) -> (harness::process::Running, String, String) {
    let admin = free_listen_address();
    let gateway = start_with(
        args,
        &[
            ("A2A_GATEWAY_ADMIN_LISTEN", admin.as_str()),
            ("A2A_GATEWAY_READINESS", "all-routes"),
        ],
        std::process::Stdio::null(),
    )
    .await;
    let main = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    (gateway, main, format!("http://{admin}"))
}

/// The admin listener serves `/metrics`, `/healthz` and `/readyz` and nothing else; the
/// main listener keeps `/healthz` and `/readyz` but no longer serves `/metrics`.
#[tokio::test]
async fn the_admin_listener_takes_metrics_off_the_main_one() {
    let (_gateway, main, admin) = with_admin(&["--demo"]).await;
    assert_eq!(get(&admin, "/healthz").await, (200, "ok\n".to_owned()));
    assert_eq!(get(&admin, "/readyz").await, (200, "ready\n".to_owned()));
    let (status, metrics) = get(&admin, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("a2a_gateway_route_ready{route=\"default\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("a2a_gateway_requests_total"), "{metrics}");
    for path in ["/.well-known/agent-card.json", "/.well-known/api-catalog"] {
        assert_eq!(get(&admin, path).await.0, 404, "admin {path}");
    }
    let call = request(json!(1), "SendMessage", message_params("hello"));
    let status = reqwest::Client::new()
        .post(format!("{admin}/a2a/jsonrpc"))
        .header("content-type", "application/json")
        .body(call.clone())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404, "no JSON-RPC on the admin listener");

    assert_eq!(get(&main, "/metrics").await.0, 404);
    assert_eq!(get(&main, "/healthz").await, (200, "ok\n".to_owned()));
    assert_eq!(get(&main, "/readyz").await, (200, "ready\n".to_owned()));
    let reply = rpc(&format!("{main}/a2a/jsonrpc"), &call).await;
    assert!(reply["result"].is_object(), "{reply}");
}

/// SIGTERM: the admin listener's `/readyz` turns 503 at once, as the main one's does,
/// while calls are still served for the drain delay.
#[tokio::test]
async fn sigterm_drain_shows_on_the_admin_listener() {
    let (mut gateway, main, admin) = with_admin(&["--demo", "--drain-delay", "2s"]).await;
    assert_eq!(get(&admin, "/readyz").await.0, 200);
    gateway.terminate();
    let started = Instant::now();
    let body = await_readyz(&admin, 503, Duration::from_millis(500)).await;
    assert_eq!(body, "shutting down\n");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(readyz(&main).await, (503, "shutting down\n".to_owned()));
    assert_eq!(
        get(&admin, "/metrics").await.0,
        200,
        "still scraped while draining"
    );
    let call = request(json!(1), "SendMessage", message_params("hello"));
    let reply = rpc(&format!("{main}/a2a/jsonrpc"), &call).await;
    assert!(reply["result"].is_object(), "{reply}");
    let status = gateway
        .exit_within(Duration::from_secs(5), "no exit after the drain")
        .await;
    assert!(status.success(), "{status:?}");
}

/// The binary's two surfaces with a route whose agent is down: the main listener's 503
/// says `not ready` and nothing else (no route name, no reason); the admin listener's
/// names the route and why.
#[tokio::test]
async fn only_the_admin_listener_says_why() {
    let down = free_listen_address();
    let url = format!("http://{down}");
    let (_gateway, main, admin) = with_admin(&["--backend", &url]).await;
    assert_eq!(readyz(&main).await, (503, "not ready\n".to_owned()));
    let (status, body) = readyz(&admin).await;
    assert_eq!(status, 503);
    assert!(
        body.starts_with("route \"default\" is not ready: backend unreachable: ")
            && body.ends_with('\n')
            && body.lines().count() == 1,
        "{body}"
    );
}

/// The binary's log lines, read from its stderr as they come (JSON, one object a line),
/// and its base URL, whose `/readyz` makes the checks that log.
struct Log {
    lines: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    base: String,
}

impl Log {
    fn read(gateway: &mut harness::process::Running) -> Log {
        use std::io::BufRead;
        let stderr = gateway.0.stderr.take().expect("stderr piped");
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Ok(value) = serde_json::from_str(&line) {
                    sink.lock().unwrap().push(value);
                }
            }
        });
        let base = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
        Log { lines, base }
    }

    /// The `fields` of every line whose message is `message`, once there are `n` of them
    /// (within 5 s), probing `/readyz` meanwhile.
    async fn await_lines(&self, message: &str, n: usize) -> Vec<serde_json::Value> {
        let started = Instant::now();
        loop {
            readyz(&self.base).await;
            let found: Vec<_> = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .filter(|line| line["fields"]["message"] == message)
                .map(|line| line["fields"].clone())
                .collect();
            if found.len() >= n {
                return found;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{n} {message:?} lines expected, {} logged",
                found.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Without an admin listener no `/readyz` says why; the log does, on every change: the
/// route turning unready (with the reason), turning unready for another reason (the new
/// one and the old), and ready again (with the reason it had been unready for).
#[tokio::test]
async fn without_an_admin_listener_the_log_says_why() {
    let agent = Agent::start(Offers::Health, Scheme::Http).await;
    let url = format!("http://{}", agent.addr);
    let mut gateway = start_with(
        &[
            "--backend",
            &url,
            "--readiness-cache",
            "50ms",
            "--log-format",
            "json",
            "--readiness",
            "all-routes",
        ],
        &[],
        std::process::Stdio::piped(),
    )
    .await;
    let log = Log::read(&mut gateway);
    let main = log.base.clone();
    assert_eq!(readyz(&main).await, (200, "ready\n".to_owned()));

    let not_serving = "the agent reports NOT_SERVING for service \"\"";
    let unknown = "the agent reports UNKNOWN for service \"\"";
    agent.set("", ServingStatus::NotServing).await;
    let body = await_readyz(&main, 503, Duration::from_secs(2)).await;
    assert_eq!(body, "not ready\n");
    let lines = log.await_lines("route not ready", 1).await;
    assert_eq!(lines[0]["route"], "default", "{lines:?}");
    assert_eq!(lines[0]["why"], not_serving, "{lines:?}");
    assert!(lines[0].get("was").is_none(), "{lines:?}");

    // Still not ready, for another reason: logged again, the public body the same.
    agent.set("", ServingStatus::Unknown).await;
    let lines = log.await_lines("route not ready", 2).await;
    assert_eq!(lines[1]["why"], unknown, "{lines:?}");
    assert_eq!(lines[1]["was"], not_serving, "{lines:?}");
    assert_eq!(readyz(&main).await, (503, "not ready\n".to_owned()));

    agent.set("", ServingStatus::Serving).await;
    await_readyz(&main, 200, Duration::from_secs(2)).await;
    let again = log.await_lines("route ready again", 1).await;
    assert_eq!(again[0]["route"], "default", "{again:?}");
    assert_eq!(again[0]["was"], unknown, "{again:?}");
    // One line per change: polling an unchanged state logs nothing more.
    for _ in 0..5 {
        assert_eq!(readyz(&main).await.0, 200);
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    assert_eq!(log.await_lines("route not ready", 0).await.len(), 2);
    assert_eq!(log.await_lines("route ready again", 0).await.len(), 1);
}

/// An admin address the gateway cannot listen on is a startup error naming the flag.
#[test]
fn an_admin_address_in_use_fails_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = taken.local_addr().unwrap().to_string();
    let listen = free_listen_address();
    let out = std::process::Command::new(harness::process::BIN)
        .args(["--demo", "--listen", &listen, "--admin-listen", &admin])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {admin} (--admin-listen)")),
        "{stderr}"
    );
}

//! `a2a-gateway` command line: flags → validated configuration → serve.

use std::process::ExitCode;

use std::sync::Arc;

use a2a_gateway::backend::endpoints::Targets;
use a2a_gateway::route::reload::Reloader;
use a2a_gateway::route::Routes;
use a2a_gateway::settings::{LoadError, LogFormat, RouteSettings, Settings, Upstream};
use a2a_gateway::telemetry::access::sink::{self, LineFormat};
use a2a_gateway::telemetry::trace::Tracing;
use a2a_gateway::telemetry::untrusted::without_credentials;
use a2a_gateway::telemetry::Metrics;
use a2a_gateway::watched;
use a2a_gateway::{demo, server};
use tokio::sync::watch;
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};

/// mimalloc instead of glibc's allocator: about 5 % fewer instructions per call. Without
/// transparent huge pages (`no_thp`): with them, idle RSS was 21 MiB instead of 10 and
/// 10,000 open streams took 312 MiB instead of 192 (benches/README.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code for configuration and startup errors, as for bad flags.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Loaded on a thread of its own, which ends: parsing thousands of route tables makes
    // megabytes of short-lived values, which the allocator keeps resident for the thread
    // that freed them, and this one goes on to accept connections (benches/README.md,
    // many routes).
    let load = || watched::collect(|| Settings::load(args.clone()));
    let (settings, files) = match std::thread::scope(|scope| scope.spawn(load).join()) {
        Ok(loaded) => loaded,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    let settings = match settings {
        Ok(settings) => settings,
        Err(LoadError::Flags(e)) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(LoadError::Flags(e)) => return fail(&one_line(&e.to_string())),
        Err(e) => return fail(&e.to_string()),
    };
    let process = &settings.process;
    // Held to the end: dropping it writes what the log still holds (at most a second).
    let _log = init_logging(process.log_format, process.access_log);
    raise_fd_limit();
    // The main thread accepts connections, handles signals and runs the demo agent; the
    // workers serve the calls (server::workers).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    if let Some(file) = &process.check_config {
        return runtime.block_on(check(&settings, file));
    }
    // Started before serving and shut down after the last connection is drained, so the
    // spans of every call are exported (`Tracing::shutdown` flushes what is buffered).
    let traces = process.traces.clone();
    let tracing = match traces.as_ref().map(Tracing::start).transpose() {
        Ok(tracing) => tracing,
        Err(e) => return fail(&e),
    };
    if let Some(settings) = &traces {
        tracing::info!(endpoint = %without_credentials(&settings.endpoint), protocol = ?settings.protocol, sampler = ?settings.sampler, "exporting traces over OTLP");
    }
    let code = runtime.block_on(run(settings, args, files));
    sink::flush();
    if let Some(tracing) = tracing {
        tracing.shutdown();
    }
    code
}

/// `check-config`: everything a start would build, but nothing served.
async fn check(settings: &Settings, file: &std::path::Path) -> ExitCode {
    let demo = settings.process.demo.then_some("http://127.0.0.1:1");
    if let Err(e) = Routes::new(settings, demo) {
        return fail(&e.to_string());
    }
    use std::io::Write as _;
    // Written, not printed: a reader that stops early (`| head`) ends the listing, not the
    // process in a panic.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}: ok, {} route(s)",
        file.display(),
        settings.routes.len()
    );
    for route in &settings.routes {
        let written = writeln!(
            out,
            "  {}: {}{} -> {} ({})",
            route.name,
            route.host.as_deref().unwrap_or("*"),
            route.jsonrpc_path(),
            backends(route),
            route.binding,
        );
        if written.is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

async fn run(
    mut settings: Settings,
    args: Vec<std::ffi::OsString>,
    files: Vec<std::path::PathBuf>,
) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(settings.process.listen).await {
        Ok(listener) => listener,
        Err(e) => {
            return fail(&format!(
                "cannot listen on {}: {e}",
                settings.process.listen
            ))
        }
    };
    let grpc_listener = match settings.process.grpc_listen {
        None => None,
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => Some(listener),
            Err(e) => return fail(&format!("cannot listen on {addr} (--grpc-listen): {e}")),
        },
    };
    // Cards name the port the gRPC listener has (`:0` picks one), now and after reloads.
    let grpc_listen = grpc_listener.as_ref().and_then(|l| l.local_addr().ok());
    settings.process.grpc_listen = grpc_listen;
    let cli = &settings.process;
    let demo_backend = if cli.demo {
        match demo::spawn().await {
            Ok(addr) => Some(format!("http://{addr}")),
            Err(e) => return fail(&format!("cannot start the demo agent: {e}")),
        }
    } else {
        None
    };
    // Built on a thread of its own too, in this runtime (the cards refresh and the agents
    // are checked on it), for what building thousands of routes frees.
    let runtime = tokio::runtime::Handle::current();
    let build = || {
        let _in_runtime = runtime.enter();
        Routes::new(&settings, demo_backend.as_deref())
    };
    let template = match std::thread::scope(|scope| scope.spawn(build).join()) {
        Ok(Ok(template)) => Arc::new(template),
        Ok(Err(e)) => return fail(&e.to_string()),
        Err(panic) => std::panic::resume_unwind(panic),
    };
    // The cards refresh on this runtime, beside the acceptor: never on a worker's.
    template.start_cards();
    // So do the JWT issuers' keys.
    template.start_auth();
    let count = cli.workers;
    let metrics: Arc<Metrics> = Arc::default();
    metrics.config_loaded(None);
    let admin = match cli.admin_listen {
        Some(addr) => match serve_admin(addr, &template, &metrics, cli.shutdown_grace).await {
            Ok(admin) => Some(admin),
            Err(e) => return fail(&e),
        },
        None => None,
    };
    let workers =
        match server::workers::Workers::start(&template, &metrics, count, cli.shutdown_grace) {
            Ok(workers) => workers,
            Err(e) => return fail(&e),
        };
    let local = listener.local_addr().map_or(cli.listen, |a| a);
    let tls = cli.tls.is_some();
    tracing::info!(listen = %local, workers = count, demo = cli.demo, tls, "a2a-gateway serving");
    if let Some(grpc) = grpc_listen {
        tracing::info!(grpc_listen = %grpc, "serving gRPC clients");
    }
    for route in &settings.routes {
        tracing::info!(
            route = %route.name,
            host = route.host.as_deref().unwrap_or("*"),
            jsonrpc = %route.jsonrpc_path(),
            backend = demo_backend.clone().unwrap_or_else(|| backends(route)),
            binding = %route.binding,
            tenant = route.tenant.as_deref().unwrap_or_default(),
            "route"
        );
    }
    if let Some(backend) = &demo_backend {
        println!(
            "a2a-gateway demo: JSON-RPC at {scheme}://{local}{}, card at {scheme}://{local}/.well-known/agent-card.json (demo agent over gRPC at {backend})",
            settings.routes[0].jsonrpc_path,
            scheme = if tls { "https" } else { "http" },
        );
    }
    // The routes hold what they need of their settings: with thousands of routes, a
    // second copy of every route's settings is megabytes kept for nothing.
    let Settings { process, routes } = settings;
    drop(routes);
    let cli = &process;
    let lifecycle = template.lifecycle().clone();
    let running = Arc::new(std::sync::Mutex::new(template));
    let reloader = Reloader {
        args,
        demo_backend,
        running: running.clone(),
        fixed: cli.fixed.clone(),
        grpc_listen,
        files,
        rebuilds: workers.rebuilds(),
        admin,
        metrics,
    };
    tokio::spawn(reloader.run(cli.watch_config));
    let drain_delay = cli.drain_delay;
    let stop = async move {
        let signal = server::shutdown_signal().await;
        // Listening before the drain shows on /readyz: a Ctrl-C from then on is seen.
        let mut interrupts = server::Interrupts::listen();
        lifecycle.drain();
        if signal == server::StopSignal::Terminate && !drain_delay.is_zero() {
            tracing::info!(?drain_delay, "stopping: /readyz answers 503, still serving");
            // Someone at a terminal is not kept waiting by the orchestrator's delay.
            tokio::select! {
                () = tokio::time::sleep(drain_delay) => {}
                () = interrupts.next() => tracing::info!("Ctrl-C: drain delay cut short"),
            }
        }
        // From here on in-flight calls have the grace period; a Ctrl-C ends it at once.
        tokio::spawn(async move {
            interrupts.next().await;
            tracing::warn!("Ctrl-C while draining: exiting without waiting for calls in flight");
            std::process::exit(130);
        });
    };
    workers.serve(listener, grpc_listener, stop).await;
    // No more relayed posts can arrive: what is held for webhooks gets its own grace.
    let routes = running.lock().unwrap_or_else(|e| e.into_inner()).clone();
    routes.flush_push(cli.shutdown_grace).await;
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` (`--admin-listen`), on this
/// runtime, until the process exits: during the drain its `/readyz` answers 503 too.
/// Returns what a reload swaps the admin routes through.
async fn serve_admin(
    addr: std::net::SocketAddr,
    template: &Routes,
    metrics: &Arc<Metrics>,
    grace: std::time::Duration,
) -> Result<watch::Sender<server::Served>, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (--admin-listen): {e}"))?;
    let frontend = template
        .admin_frontend(metrics)
        .map_err(|e| e.to_string())?;
    let local = listener.local_addr().map_or(addr, |a| a);
    tracing::info!(admin = %local, "serving /metrics, /healthz and /readyz");
    let (admin, served) = watch::channel(server::Served::new(frontend));
    tokio::spawn(server::serve_live(
        listener,
        served,
        std::future::pending(),
        grace,
    ));
    Ok(admin)
}

/// A route's backends as logs and `check-config` show them.
fn backends(route: &RouteSettings) -> String {
    match &route.upstream {
        Upstream::Demo => "demo agent".to_owned(),
        Upstream::Targets(Targets::One(url)) => url.clone(),
        Upstream::Targets(Targets::List(urls)) => urls.join(", "),
        Upstream::Targets(Targets::Dns(target)) => {
            format!("dns:///{}:{}{}", target.name, target.port, target.path)
        }
    }
}

/// clap's message up to its first blank line, folded into one line without the
/// "error:" prefix (the usage and tip lines that follow add nothing here).
fn one_line(rendered: &str) -> String {
    let paragraph: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let text = paragraph.join(" ");
    text.strip_prefix("error: ").unwrap_or(&text).to_owned() + " (see --help)"
}

fn fail(message: &str) -> ExitCode {
    eprintln!("a2a-gateway: error: {message}");
    ExitCode::from(USAGE_ERROR)
}

/// Raises the soft limit of open files to the hard limit, as Go's runtime does at start:
/// every client connection is a file descriptor, and the common soft default (1024) is far
/// below what one gateway serves. The hard limit is the operator's to set.
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return;
    }
    limit.current = limit.maximum;
    match setrlimit(Resource::Nofile, limit) {
        Ok(()) => tracing::debug!(limit = ?limit.maximum, "raised the open-files limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-files limit"),
    }
}

/// Pieces of the log (events, or pieces of access lines) queued for stderr at most; past
/// them a piece is dropped and counted, so a stuck stderr stalls no thread. Access pieces
/// are at most 64 KiB each: 8 MiB at the very worst.
const LOG_QUEUE: usize = 128;

/// Logs go to stderr from a thread of their own (`tracing-appender`), the access lines
/// through `telemetry::access::sink`; the guard, dropped, writes what is queued.
fn init_logging(format: LogFormat, access_log: bool) -> WorkerGuard {
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if !access_log {
        // The most specific directive wins, whatever RUST_LOG says.
        if let Ok(off) = format!("{}=off", a2a_gateway::telemetry::access::TARGET).parse() {
            filter = filter.add_directive(off);
        }
    }
    let (writer, guard) = NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE)
        .lossy(true)
        .thread_name("log-writer")
        .finish(std::io::stderr());
    // Colours only for a person at a terminal: in a file or a collector they are bytes.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer.clone());
    // Installed with the access log off too: it counts what the shared writer drops (the
    // log filter, above, keeps access lines out).
    let lines = match format {
        LogFormat::Text => LineFormat::Text,
        LogFormat::Json => LineFormat::Json,
    };
    if let Err(e) = sink::install(lines, writer) {
        eprintln!("a2a-gateway: warning: no access log: cannot start its writer: {e}");
    }
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    guard
}

//! The gateway's settings, typed and checked: flags, environment and the `--config` file
//! merged once (`config` parses and merges them) into `Settings { process, routes }`.
//! Once built they are valid: every file they name is read and checked (TLS material, CA
//! bundles, affinity keys), every URL, header rule and policy parsed; nothing downstream
//! parses a setting again or sees the command line.

mod route;

pub(crate) use route::ClientSettings;
pub use route::{RouteSettings, Upstream};

pub use crate::config::{ConfigError, LoadError, LogFormat};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tower_http::cors::CorsLayer;

use crate::card::origin::{OriginSettings, Origins};
use crate::config::{Cli, Command, Config};
use crate::front::limits::GlobalLimitSettings;
use crate::push::deliver::{Backoff, DeliverySettings, Timeouts};
use crate::push::relay::RelaySettings;
use crate::push::PushMode;
use crate::server::clients::ClientLimits;
use crate::server::readiness::ReadinessMode;
use crate::server::tls::{ListenerTlsSettings, ServerTls};
use crate::telemetry::trace::{TraceFlags, TraceSettings};

/// Everything the gateway runs with, checked.
pub struct Settings {
    /// The settings of the process as a whole.
    pub process: ProcessSettings,
    /// At least one; no two match the same request.
    pub routes: Vec<RouteSettings>,
}

/// The settings that exist once per process.
pub struct ProcessSettings {
    /// The address the JSON-RPC listener binds (`--listen`).
    pub listen: SocketAddr,
    /// The listener of `/metrics`, `/healthz` and `/readyz` only.
    pub admin_listen: Option<SocketAddr>,
    /// A second listener, for gRPC clients (`--grpc-listen`).
    pub grpc_listen: Option<SocketAddr>,
    /// Serving threads (`--workers`, or one per CPU this process may use).
    pub workers: usize,
    /// After SIGTERM, how long everything is still served while `/readyz` answers 503.
    pub drain_delay: Duration,
    /// Then, how long calls and streams in flight may go on before the process exits.
    pub shutdown_grace: Duration,
    /// The shape of log lines (`--log-format`).
    pub log_format: LogFormat,
    /// Whether one access line is logged per JSON-RPC call.
    pub access_log: bool,
    /// Trace export; `None`: traces are off.
    pub traces: Option<TraceSettings>,
    /// The listener's HTTPS, its files read and checked; `None`: cleartext.
    pub tls: Option<ServerTls>,
    /// What each client connection may hold, and for how long.
    pub(crate) client_limits: ClientLimits,
    /// Which routes `/readyz` needs ready.
    pub(crate) readiness: ReadinessMode,
    /// How long `/readyz` reuses its last check of the agents; zero: every probe checks.
    pub readiness_cache: Duration,
    /// Deadline of `/readyz`'s check of one agent endpoint, connecting included.
    pub readiness_timeout: Duration,
    pub(crate) limits: GlobalLimitSettings,
    /// `None`: no CORS headers at all.
    pub(crate) cors: Option<CorsLayer>,
    /// The global public URL, forwarded-header trust and allowed hosts, for the catalog.
    pub(crate) origins: Origins,
    /// The push relay's callback and keys, when a route relays (`push = "relay"`).
    pub(crate) push_relay: Option<Arc<RelaySettings>>,
    /// `--demo`: the one route's backend is the embedded demo agent.
    pub demo: bool,
    /// `check-config FILE`: check, print the routes and exit.
    pub check_config: Option<PathBuf>,
    /// Whether a change of the files the configuration was read from reloads it.
    pub watch_config: bool,
    /// The settings a reload cannot change, with their values as given.
    pub fixed: FixedAtStart,
    /// How push notifications are delivered to webhooks (`--push-*`).
    pub(crate) push_delivery: DeliverySettings,
}

/// The values of the settings a reload cannot change (`fixed_at_start`), by flag name.
#[derive(Clone, Debug)]
pub struct FixedAtStart(Vec<(&'static str, String)>);

impl FixedAtStart {
    /// The settings whose value differs in `other`: a reload names them and keeps the
    /// values of `self`.
    pub fn changed_in(&self, other: &FixedAtStart) -> Vec<&'static str> {
        (self.0.iter().zip(&other.0))
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, _)| a.0)
            .collect()
    }
}

/// The process-wide settings a running gateway holds from its start, by flag name: its
/// sockets, threads, TLS listener (whose certificate files still reload), client
/// connection bounds, log and exporters are made once. Every other setting, and every
/// route setting, a reload applies.
fn fixed_at_start(cli: &Cli) -> FixedAtStart {
    let fixed: [(&'static str, &dyn std::fmt::Debug); 21] = [
        ("listen", &cli.listen),
        ("admin-listen", &cli.admin_listen),
        ("grpc-listen", &cli.grpc_listen),
        ("workers", &cli.workers),
        ("tls-cert", &cli.tls_cert),
        ("tls-key", &cli.tls_key),
        ("tls-client-ca", &cli.tls_client_ca),
        ("tls-client-auth", &cli.tls_client_auth),
        ("tls-handshake-timeout", &cli.tls_handshake_timeout),
        ("client-header-timeout", &cli.client_header_timeout),
        ("client-body-timeout", &cli.client_body_timeout),
        ("client-idle-timeout", &cli.client_idle_timeout),
        ("client-send-timeout", &cli.client_send_timeout),
        ("drain-delay", &cli.drain_delay),
        ("shutdown-grace", &cli.shutdown_grace),
        ("log-format", &cli.log_format),
        ("access-log", &cli.access_log),
        ("otlp-endpoint", &cli.otlp_endpoint),
        ("otlp-protocol", &cli.otlp_protocol),
        (
            "trace-sampler",
            &(&cli.trace_sampler, &cli.trace_sampler_arg),
        ),
        ("demo", &cli.demo),
    ];
    let values = fixed.into_iter();
    FixedAtStart(
        values
            .map(|(name, value)| (name, format!("{value:?}")))
            .collect(),
    )
}

impl Settings {
    /// Parses `args` (program name first), fills every setting the command line and
    /// environment left at its default from the config file (`--config`, or the file of
    /// `check-config`), and checks and types the whole result, routes included. Trace
    /// settings not given by flags come from the process's `OTEL_*` variables.
    pub fn load<I, T>(args: I) -> Result<Settings, LoadError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let config = Config::load(args)?;
        // Routes of the same header rules share one policy: thousands of routes, most of
        // them with the defaults, would otherwise hold a copy each.
        let mut policies: std::collections::HashSet<crate::protocol::params::ForwardPolicy> =
            std::collections::HashSet::new();
        // Routes first: their messages name a bad setting before the process's do.
        let routes: Vec<RouteSettings> = config
            .routes
            .into_iter()
            .map(|route| {
                let mut route = RouteSettings::new(route)?;
                match policies.get(&route.forward) {
                    Some(shared) => route.forward = shared.clone(),
                    None => drop(policies.insert(route.forward.clone())),
                }
                Ok(route)
            })
            .collect::<Result<_, ConfigError>>()?;
        // A browser sends a route's API key in that route's header: preflights allow it.
        let key_headers: Vec<String> = routes
            .iter()
            .filter_map(|route| Some(route.auth.as_ref()?.key_header()?.to_string()))
            .collect();
        let env = |name: &str| std::env::var(name).ok();
        let mut process = ProcessSettings::new(&config.cli, &key_headers, &env)?;
        if process.grpc_listen.is_some() {
            grpc_routes(&routes)?;
        }
        let mut routes = routes;
        process.push_relay = push_relay(&config.cli, &mut routes)?;
        Ok(Settings { process, routes })
    }
}

/// `--grpc-listen`'s routes: some route serves gRPC, and no two for one host (`None`:
/// any host), since a call there is routed by its host alone.
fn grpc_routes(routes: &[RouteSettings]) -> Result<(), ConfigError> {
    let serving: Vec<&RouteSettings> = (routes.iter())
        .filter(|r| r.fronts.contains(&crate::protocol::binding::Binding::Grpc))
        .collect();
    if serving.is_empty() {
        let why = "no route serves gRPC: add GRPC to a route's fronts";
        return Err(ConfigError::GrpcListen(why.into()));
    }
    for (i, route) in serving.iter().enumerate() {
        if let Some(other) = serving[..i].iter().find(|o| o.host == route.host) {
            let host = route.host.as_deref().unwrap_or("any host");
            return Err(ConfigError::GrpcListen(format!(
                "routes {:?} and {:?} both serve gRPC for {host}: a call there names no route",
                other.name, route.name
            )));
        }
    }
    Ok(())
}

impl ProcessSettings {
    /// The process-wide settings of `cli`, checked; `key_headers` are the routes' API key
    /// headers, `env` gives the `OTEL_*` variables.
    fn new(
        cli: &Cli,
        key_headers: &[String],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProcessSettings, ConfigError> {
        let client_limits = client_limits(cli)?;
        let push_delivery = push_delivery(cli)?;
        if cli.readiness_timeout.is_zero() {
            return Err(ConfigError::ReadinessTimeout);
        }
        if cli.admin_listen == Some(cli.listen) && cli.listen.port() != 0 {
            return Err(ConfigError::AdminListen);
        }
        for host in &cli.allowed_hosts {
            crate::card::origin::check_allowed_host(host).map_err(ConfigError::AllowedHosts)?;
        }
        let limits = GlobalLimitSettings {
            max_body_bytes_in_flight: cli.global_max_body_bytes_in_flight,
            max_concurrent_calls: cli.global_max_concurrent_calls,
            max_concurrent_streams: cli.global_max_concurrent_streams,
            rate_limit: cli.global_rate_limit,
            rate_burst: cli.global_rate_burst,
        };
        route::check_rate("global-rate-limit", limits.rate_limit, limits.rate_burst)?;
        let allow_headers: Vec<String> = (cli.cors_allow_header.iter())
            .chain(key_headers)
            .cloned()
            .collect();
        let cors = crate::front::cors::layer(&crate::front::cors::CorsSettings {
            origins: &cli.cors_origin,
            allow_headers: &allow_headers,
            allow_methods: &cli.cors_allow_method,
            max_age: cli.cors_max_age,
        })?;
        let traces = TraceSettings::resolve(
            TraceFlags {
                endpoint: cli.otlp_endpoint.as_deref(),
                protocol: cli.otlp_protocol,
                sampler: cli.trace_sampler.as_deref(),
                sampler_arg: cli.trace_sampler_arg,
            },
            env,
        )?;
        let origins = Origins::new(&OriginSettings {
            public_url: cli.public_url.as_deref(),
            trust_forwarded: cli.trust_forwarded,
            trusted_proxy_hops: cli.trusted_proxy_hops,
            allowed_hosts: &cli.allowed_hosts,
            tls: cli.tls_cert.is_some(),
            // The catalog is the gateway's, of no route.
            route_host: None,
        });
        let tls = ServerTls::new(&ListenerTlsSettings {
            cert: cli.tls_cert.as_deref(),
            key: cli.tls_key.as_deref(),
            client_ca: cli.tls_client_ca.as_deref(),
            client_auth: cli.tls_client_auth,
            handshake_timeout: cli.tls_handshake_timeout,
        })?;
        Ok(ProcessSettings {
            listen: cli.listen,
            admin_listen: cli.admin_listen,
            grpc_listen: cli.grpc_listen,
            workers: match cli.workers {
                0 => std::thread::available_parallelism().map_or(1, usize::from),
                n => n,
            },
            drain_delay: cli.drain_delay,
            shutdown_grace: cli.shutdown_grace,
            log_format: cli.log_format,
            access_log: cli.access_log,
            traces,
            tls,
            client_limits,
            readiness: cli.readiness,
            readiness_cache: cli.readiness_cache,
            readiness_timeout: cli.readiness_timeout,
            limits,
            cors,
            origins: origins?,
            push_relay: None,
            demo: cli.demo,
            check_config: cli
                .command
                .as_ref()
                .map(|Command::CheckConfig { file }| file.clone()),
            watch_config: cli.watch_config.unwrap_or(cli.config.is_some()),
            fixed: fixed_at_start(cli),
            push_delivery,
        })
    }
}

/// The push relay's settings when a route relays, given to each route that does; its
/// callback path may be no route's JSON-RPC endpoint or card.
fn push_relay(
    cli: &Cli,
    routes: &mut [RouteSettings],
) -> Result<Option<Arc<RelaySettings>>, ConfigError> {
    if routes.iter().all(|r| r.push_mode != PushMode::Relay) {
        return Ok(None);
    }
    let relay = RelaySettings::new(
        cli.push_callback_url.as_deref(),
        cli.push_key_file.as_deref(),
        cli.push_max_body,
        cli.push_token_cache_ttl,
    )
    .map_err(ConfigError::PushRelay)?;
    let path = relay.callback_path();
    let own = [
        "/healthz",
        "/readyz",
        "/metrics",
        crate::server::routing::CATALOG_PATH,
    ];
    if own.contains(&path) {
        return Err(ConfigError::PushRelay(format!(
            "--push-callback-url's path {path:?} is the gateway's own"
        )));
    }
    if let Some(route) = (routes.iter()).find(|r| r.jsonrpc_path() == path || r.card_path() == path)
    {
        return Err(ConfigError::PushRelay(format!(
            "--push-callback-url's path {path:?} is route {:?}'s",
            route.name
        )));
    }
    let relay = Arc::new(relay);
    for route in routes.iter_mut() {
        match route.push_mode == PushMode::Relay {
            true => route.relay = Some(relay.clone()),
            // An agent behind a relaying route and this one would show this route's
            // callers the relay's sealed tokens: whoever holds one can post notifications
            // to its client's webhook.
            false => route.relayed_elsewhere = Some(relay.clone()),
        }
    }
    Ok(Some(relay))
}

/// The push delivery settings: bounds of at least 1, deadlines above zero, the CA file and
/// signing key read and checked.
fn push_delivery(cli: &Cli) -> Result<DeliverySettings, ConfigError> {
    let refuse = |flag, why: &str| ConfigError::PushDelivery(flag, why.to_owned());
    for (flag, n) in [
        ("push-queue", cli.push_queue),
        ("push-queue-per-destination", cli.push_queue_per_destination),
        ("push-queue-bytes", cli.push_queue_bytes),
        ("push-max-attempts", cli.push_max_attempts as usize),
    ] {
        if n == 0 {
            return Err(refuse(flag, "must be at least 1"));
        }
    }
    for (flag, timeout) in [
        ("push-max-age", cli.push_max_age),
        ("push-connect-timeout", cli.push_connect_timeout),
        ("push-response-timeout", cli.push_response_timeout),
        ("push-delivery-timeout", cli.push_delivery_timeout),
    ] {
        if timeout.is_zero() {
            return Err(refuse(flag, "must be more than 0"));
        }
    }
    let read = |flag, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| refuse(flag, &format!("{}: {e}", path.display())))
    };
    let ca = match &cli.push_ca_file {
        Some(path) => Some(read("push-ca-file", path)?),
        None => None,
    };
    let tls = crate::push::deliver::connect::tls(ca.as_deref())
        .map_err(|why| refuse("push-ca-file", &why))?;
    let signer = match &cli.push_sign_key {
        Some(path) => Some(std::sync::Arc::new(
            crate::push::sign::PushSigner::from_pem(&read("push-sign-key", path)?)?,
        )),
        None => None,
    };
    Ok(DeliverySettings {
        queue: cli.push_queue,
        per_destination: cli.push_queue_per_destination,
        queue_bytes: cli.push_queue_bytes,
        drop: cli.push_drop,
        max_attempts: cli.push_max_attempts,
        max_age: cli.push_max_age,
        timeouts: Timeouts {
            connect: cli.push_connect_timeout,
            response: cli.push_response_timeout,
            delivery: cli.push_delivery_timeout,
        },
        backoff: Backoff::DEFAULT,
        tls: std::sync::Arc::new(tls),
        signer,
    })
}

/// The client connection deadlines, each greater than zero.
fn client_limits(cli: &Cli) -> Result<ClientLimits, ConfigError> {
    for (flag, timeout) in [
        ("client-header-timeout", cli.client_header_timeout),
        ("client-body-timeout", cli.client_body_timeout),
        ("client-idle-timeout", cli.client_idle_timeout),
        ("client-send-timeout", cli.client_send_timeout),
    ] {
        if timeout.is_zero() {
            return Err(ConfigError::ClientTimeout(flag));
        }
    }
    Ok(ClientLimits {
        header_timeout: cli.client_header_timeout,
        body_timeout: cli.client_body_timeout,
        idle_timeout: cli.client_idle_timeout,
        send_timeout: cli.client_send_timeout,
    })
}

/// Names what is served, never the keys and files the settings hold.
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routes: Vec<&str> = self.routes.iter().map(|r| r.name.as_str()).collect();
        f.debug_struct("Settings")
            .field("listen", &self.process.listen)
            .field("routes", &routes)
            .finish_non_exhaustive()
    }
}

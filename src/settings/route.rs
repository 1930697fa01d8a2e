//! One route's settings, typed and checked (`RouteSettings::new`): its backend targets,
//! client and balancing settings, the affinity id codec, the forwarding policy, deadlines,
//! limits, push policy and card settings. Files are read here (the backend CA bundle, the
//! client identity, the affinity key file), so a bad one fails the load, naming the route.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

use crate::auth::authenticator::Authenticator;
use crate::auth::forward::CallerHeaders;
use crate::auth::owner::OwnerKeys;
use crate::auth::rules::Rules;
use crate::auth::table::AuthTable;
use crate::backend::affinity::{load_codec, Affinity, IdCodec};
use crate::backend::endpoints::{Policy, Resolution, Targets};
use crate::backend::grpc::GrpcSettings;
use crate::card::{CardSettings, Enforced, SignaturePolicy, BACKEND_CARD_SOURCE};
use crate::config::{Cli, ConfigError, Legacy, RouteConfig};
use crate::front::limits::{PerClientSettings, RouteLimitSettings};
use crate::front::BatchLimits;
use crate::protocol::binding::Binding;
use crate::protocol::error::Profile;
use crate::protocol::ops::Op;
use crate::protocol::params::{ForwardPolicy, HeaderRules};
use crate::push::relay::RelaySettings;
use crate::push::{PushMode, PushPolicy};
use crate::units::optional;

/// One checked route: what selects it and everything its call path is built from.
#[derive(Clone)]
pub struct RouteSettings {
    /// The route's name: unique, in logs, metrics and the API catalog.
    pub name: String,
    /// Public path prefix: empty (the root) or `/segment[/segment…]`, no trailing `/`.
    pub(crate) prefix: String,
    /// Lowercase host name (no port) the route answers for; `None`: any host.
    pub host: Option<String>,
    /// The route's JSON-RPC path below its prefix (`--jsonrpc-path`).
    pub jsonrpc_path: String,
    /// The fronts clients reach the route over, in the order its card lists them.
    pub(crate) fronts: Vec<Binding>,
    /// The HTTP+JSON front's base path below the prefix: empty (the prefix itself) or
    /// `/segment…` without trailing `/` (`--rest-path`).
    pub(crate) rest_path: String,
    /// The agent the route calls.
    pub upstream: Upstream,
    /// The binding the agent speaks.
    pub binding: Binding,
    /// How the route's backend clients connect and what they accept.
    pub client: ClientSettings,
    /// How a balanced route spreads and ejects.
    pub(crate) policy: Policy,
    /// Where `dns:///` names (and push URL hosts) are resolved.
    pub resolution: Resolution,
    /// Task affinity's id codec, keyed for this route; `None`: no affinity.
    pub(crate) affinity: Option<Arc<IdCodec>>,
    /// The keys of caller-bound ids (`task-owner`), keyed for this route; `None`: off.
    pub(crate) owner: Option<Arc<OwnerKeys>>,
    /// The service `/readyz` asks a gRPC agent about.
    pub health_service: String,
    /// Which client headers reach the agent, and which are set or removed.
    pub forward: ForwardPolicy,
    /// The headers telling the agent who calls (`[auth.forward]`).
    pub(crate) caller_headers: CallerHeaders,
    /// Deadline of a unary call; `None`: none.
    pub unary_timeout: Option<Duration>,
    /// Deadline of a whole stream; `None`: none.
    pub stream_timeout: Option<Duration>,
    /// Deadline of a stream's first event; `None`: none.
    pub first_event_timeout: Option<Duration>,
    /// Interval of SSE keepalive comments on idle streams.
    pub keepalive: Duration,
    /// The largest request body accepted, in bytes.
    pub max_body: usize,
    pub(crate) batch: BatchLimits,
    pub(crate) limits: RouteLimitSettings,
    /// The `allow` rules (`None`: every call is allowed), shared with their counters.
    pub(crate) allow: Option<Arc<Rules>>,
    /// The tenant every request is pinned to (`--tenant`); `None`: the client's own.
    pub tenant: Option<String>,
    /// Whether v0.3 clients are served.
    pub(crate) legacy: bool,
    /// The error table's column the route's fronts write (`spec-profile`).
    pub(crate) profile: Profile,
    /// The HTTP status of refusals.
    pub(crate) refusal_status: crate::front::jsonrpc::RefusalStatus,
    /// The push URL policy; `None`: the guard is off (`push = "pass"`).
    pub push: Option<PushPolicy>,
    /// `push = "relay"`: the relay's process-wide settings (`Settings::load` sets them).
    pub(crate) relay: Option<Arc<RelaySettings>>,
    /// On a route that does not relay, in a process where another does: the relay's
    /// settings, whose sealed tokens this route must not show (`Settings::load` sets them).
    pub(crate) relayed_elsewhere: Option<Arc<RelaySettings>>,
    /// What the route does with push configs (`--push`).
    pub(crate) push_mode: PushMode,
    /// The `card` table with the `--card*` flags over it.
    pub card: CardSettings,
    /// What the route's authentication enforces, which its card declares.
    pub(crate) enforced: Enforced,
    pub(crate) origin: RouteOrigin,
    /// Headers carrying credentials besides the standard ones (`--sensitive-header`, the
    /// API key header).
    pub(crate) sensitive_headers: Vec<String>,
    /// The route's authentication (`[auth]`); `None`: none configured.
    pub(crate) auth: Option<Arc<Authenticator>>,
}

/// What a route's backend is.
#[derive(Clone)]
pub enum Upstream {
    /// The `backend` setting, parsed.
    Targets(Targets),
    /// `--demo`: the embedded demo agent, whose address is known once it runs.
    Demo,
}

/// How a route's backend clients connect and what they accept.
#[derive(Clone)]
pub struct ClientSettings {
    pub connect_timeout: Duration,
    /// Largest message, reply body or stream event accepted from the backend.
    pub max_message: usize,
    /// gRPC keepalive: a ping after this long without reading anything…
    pub(crate) keepalive_interval: Duration,
    /// …unanswered this long closes the connection…
    pub(crate) keepalive_timeout: Duration,
    /// …and also while no call is in flight.
    pub(crate) keepalive_while_idle: bool,
    /// The CA bundle (PEM, checked) trusted for `https://` backends besides the system
    /// roots.
    pub(crate) ca: Option<Vec<u8>>,
    /// The client certificate chain and key (PEM, checked) for a backend that asks.
    pub(crate) identity: Option<Vec<u8>>,
}

impl ClientSettings {
    /// The settings of the route's gRPC clients.
    pub(crate) fn grpc(&self) -> GrpcSettings {
        GrpcSettings {
            connect_timeout: self.connect_timeout,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            keepalive_while_idle: self.keepalive_while_idle,
            max_message: self.max_message,
        }
    }
}

/// Where the route's public URLs come from (its card's interface).
#[derive(Clone)]
pub(crate) struct RouteOrigin {
    pub(crate) public_url: Option<String>,
    pub(crate) trust_forwarded: bool,
    pub(crate) trusted_proxy_hops: usize,
    pub(crate) allowed_hosts: Vec<String>,
    /// The listener serves TLS.
    pub(crate) tls: bool,
}

impl RouteSettings {
    /// Checks and types `route`; an error of a `[[route]]` table names the route and line.
    pub(super) fn new(route: RouteConfig) -> Result<RouteSettings, ConfigError> {
        let label = route.line.map(|_| route.label());
        let RouteConfig {
            name,
            prefix,
            host,
            settings: cli,
            ..
        } = route;
        let checked = typed(&cli, &name);
        let parts = checked.map_err(|error| match label {
            Some(route) => ConfigError::RouteSettings {
                route,
                error: Box::new(error),
            },
            None => error,
        })?;
        Ok(RouteSettings {
            name,
            prefix,
            host,
            ..parts
        })
    }

    /// The public path of the route's JSON-RPC endpoint.
    pub fn jsonrpc_path(&self) -> String {
        format!("{}{}", self.prefix, self.jsonrpc_path)
    }

    /// The public path of the route's HTTP+JSON front (its operations' paths follow it).
    pub(crate) fn rest_path(&self) -> String {
        format!("{}{}", self.prefix, self.rest_path)
    }

    /// The public path of the route's agent card.
    pub(crate) fn card_path(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.prefix)
    }
}

/// The settings of `cli` for the route `name` (which keys its affinity ids); the name,
/// prefix and host are left empty for the caller.
fn typed(cli: &Cli, name: &str) -> Result<RouteSettings, ConfigError> {
    let upstream = upstream(cli)?;
    let affinity = affinity(cli, name, &upstream)?;
    let owner = owner(cli, name)?;
    check_positive(cli)?;
    if cli.tenant.as_deref() == Some("") {
        return Err(ConfigError::Tenant);
    }
    if let Some(url) = &cli.public_url {
        crate::card::origin::check_public_url(url).map_err(ConfigError::PublicUrl)?;
    }
    if cli.trusted_proxy_hops == 0 {
        return Err(ConfigError::TrustedProxyHops);
    }
    let client_certificates = cli.tls_cert.is_some() && cli.tls_client_ca.is_some();
    let auth = Authenticator::new(&cli.auth_table, client_certificates)?;
    let mut sensitive_headers = cli.sensitive_header.clone();
    let consumed = consumed_headers(cli, auth.as_deref());
    sensitive_headers.extend(
        auth.as_deref()
            .and_then(Authenticator::key_header)
            .map(|h| h.to_string()),
    );
    let (max_body, batch, limits) = limits(cli)?;
    let allow = allow(cli, auth.as_deref())?;
    let push = match cli.push {
        PushMode::Guard | PushMode::Relay => {
            Some(PushPolicy::new(cli.push_allow_http, &cli.push_allow)?)
        }
        PushMode::Pass => None,
    };
    if cli.push == PushMode::Relay && (cli.task_owner || affinity.is_some()) {
        // The agent's events carry its own ids, which such a route never shows clients.
        return Err(ConfigError::PushRelay(
            "not with task-owner or task affinity yet: notifications would carry the agent's task ids".into(),
        ));
    }
    let caller_headers = match &cli.auth_table.forward {
        Some(table) => CallerHeaders::new(table)?,
        None => CallerHeaders::default(),
    };
    let caller: Vec<HeaderName> = caller_headers.names().cloned().collect();
    let forward = ForwardPolicy::with_rules(&HeaderRules {
        forward: &cli.forward_headers,
        set: &cli.set_header,
        remove: &cli.remove_header,
        identity: &cli.identity_header,
        sensitive: &cli.sensitive_header,
        fixed_tenant: cli.tenant.is_some(),
        caller: &caller,
        consumed: &consumed,
    })?;
    Ok(RouteSettings {
        name: String::new(),
        prefix: String::new(),
        host: None,
        jsonrpc_path: cli.jsonrpc_path.clone(),
        fronts: fronts(cli)?,
        rest_path: rest_path(cli)?,
        upstream,
        binding: cli.binding,
        client: client(cli)?,
        policy: Policy {
            balance: cli.balance,
            eject_after: cli.eject_after,
            eject_backoff: cli.eject_backoff,
            connect_timeout: cli.connect_timeout,
        },
        resolution: Resolution {
            interval: cli.backend_resolve_interval,
            server: cli.backend_resolver,
        },
        affinity,
        owner,
        health_service: cli.health_service.clone(),
        forward,
        caller_headers,
        unary_timeout: optional(cli.timeout),
        stream_timeout: optional(cli.stream_timeout),
        first_event_timeout: optional(cli.first_event_timeout.unwrap_or(cli.timeout)),
        keepalive: cli.keepalive,
        max_body,
        batch,
        limits,
        allow,
        tenant: cli.tenant.clone(),
        legacy: cli.legacy == Legacy::V03,
        profile: cli.spec_profile,
        refusal_status: cli.refusal_status,
        push,
        relay: None,
        relayed_elsewhere: None,
        push_mode: cli.push,
        card: card(cli),
        enforced: enforced(&cli.auth_table, auth.as_deref()),
        origin: RouteOrigin {
            public_url: cli.public_url.clone(),
            trust_forwarded: cli.trust_forwarded,
            trusted_proxy_hops: cli.trusted_proxy_hops,
            allowed_hosts: cli.allowed_hosts.clone(),
            tls: cli.tls_cert.is_some(),
        },
        sensitive_headers,
        auth,
    })
}

/// The route's fronts: at least one, none twice (the card lists each once).
fn fronts(cli: &Cli) -> Result<Vec<Binding>, ConfigError> {
    if cli.fronts.is_empty() {
        return Err(ConfigError::Fronts("name at least one front".into()));
    }
    for (i, front) in cli.fronts.iter().enumerate() {
        if cli.fronts[..i].contains(front) {
            return Err(ConfigError::Fronts(format!("{front} is named twice")));
        }
    }
    Ok(cli.fronts.clone())
}

/// The HTTP+JSON front's base path, `/` as the prefix itself (empty).
fn rest_path(cli: &Cli) -> Result<String, ConfigError> {
    let path = cli.rest_path.as_str();
    let fine = path == "/" || (path.starts_with('/') && !path.ends_with('/'));
    if !fine || path == cli.jsonrpc_path {
        return Err(ConfigError::RestPath(path.to_owned()));
    }
    Ok(path.trim_end_matches('/').to_owned())
}

/// The credentials the route's authentication consumes, never forwarded: the API key
/// header always, `Authorization` when `[auth.forward] authorization = false`.
fn consumed_headers(cli: &Cli, auth: Option<&Authenticator>) -> Vec<http::HeaderName> {
    let mut consumed: Vec<_> = auth
        .and_then(Authenticator::key_header)
        .cloned()
        .into_iter()
        .collect();
    let forward = cli.auth_table.forward.as_ref();
    if forward.and_then(|f| f.authorization) == Some(false) {
        consumed.push(http::header::AUTHORIZATION);
    }
    consumed
}

/// The route's backend: the parsed `backend` URLs, or the demo agent.
fn upstream(cli: &Cli) -> Result<Upstream, ConfigError> {
    if cli.backend.is_empty() && !cli.demo {
        return Err(ConfigError::NoBackend);
    }
    if !cli.jsonrpc_path.starts_with('/') {
        return Err(ConfigError::JsonRpcPath(cli.jsonrpc_path.clone()));
    }
    if cli.demo {
        return Ok(Upstream::Demo);
    }
    let targets = Targets::parse(&cli.backend, cli.backend_tls).map_err(ConfigError::BackendUrl)?;
    Ok(Upstream::Targets(targets))
}

/// The id codec of `--affinity task`, keyed by the key (or key file) and the route's name;
/// affinity needs several endpoints to choose among.
fn affinity(
    cli: &Cli,
    route: &str,
    upstream: &Upstream,
) -> Result<Option<Arc<IdCodec>>, ConfigError> {
    if cli.affinity == Affinity::None {
        return Ok(None);
    }
    if matches!(
        upstream,
        Upstream::Demo | Upstream::Targets(Targets::One(_))
    ) {
        return Err(ConfigError::AffinityOneBackend);
    }
    let file = cli.affinity_key_file.as_deref();
    let codec = load_codec(cli.affinity_key.as_ref(), file, route);
    Ok(Some(Arc::new(codec.map_err(ConfigError::AffinityKey)?)))
}

/// The owner keys of `task-owner`, keyed by the key file and the route's name.
fn owner(cli: &Cli, route: &str) -> Result<Option<Arc<OwnerKeys>>, ConfigError> {
    if !cli.task_owner {
        return Ok(None);
    }
    let Some(file) = &cli.owner_key_file else {
        return Err(ConfigError::OwnerKey(
            "task-owner needs owner-key-file, the keys every gateway replica shares".into(),
        ));
    };
    let keys = OwnerKeys::load(file, route).map_err(ConfigError::OwnerKey)?;
    Ok(Some(Arc::new(keys)))
}

/// Intervals and counts that must not be zero.
fn check_positive(cli: &Cli) -> Result<(), ConfigError> {
    let zero = [
        (
            cli.backend_resolve_interval.is_zero(),
            ConfigError::ResolveInterval,
        ),
        (cli.eject_after == 0, ConfigError::EjectAfter),
        (cli.eject_backoff.is_zero(), ConfigError::EjectBackoff),
        (cli.keepalive.is_zero(), ConfigError::Keepalive),
        (
            cli.backend_keepalive.is_zero(),
            ConfigError::BackendKeepalive,
        ),
        (
            cli.backend_keepalive_timeout.is_zero(),
            ConfigError::BackendKeepaliveTimeout,
        ),
    ];
    match zero.into_iter().find(|(is_zero, _)| *is_zero) {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// The body, batch and route limits: a batch has room for a member, a message for a byte.
fn limits(cli: &Cli) -> Result<(usize, BatchLimits, RouteLimitSettings), ConfigError> {
    for (setting, size) in [
        ("max-body", cli.max_body),
        ("max-batch-reply", cli.max_batch_reply),
        ("backend-max-message", cli.backend_max_message),
    ] {
        if size == 0 {
            let why = "must be at least 1 byte".to_owned();
            return Err(ConfigError::Limit(setting, why));
        }
    }
    if cli.max_batch_size == 0 {
        let why = "must be at least 1 (1: one call per request)".to_owned();
        return Err(ConfigError::Limit("max-batch-size", why));
    }
    check_rate("rate-limit", cli.rate_limit, cli.rate_burst)?;
    check_rate(
        "client-rate-limit",
        cli.client_rate_limit,
        cli.client_rate_burst,
    )?;
    if cli.client_limit_keys == 0 {
        let why = "must be at least 1 (the clients tracked at once)".to_owned();
        return Err(ConfigError::Limit("client-limit-keys", why));
    }
    let batch = BatchLimits {
        size: cli.max_batch_size,
        reply: cli.max_batch_reply,
    };
    let limits = RouteLimitSettings {
        max_concurrent_calls: cli.max_concurrent_calls,
        max_concurrent_streams: cli.max_concurrent_streams,
        rate_limit: cli.rate_limit,
        rate_burst: cli.rate_burst,
        max_header_size: cli.max_header_size,
        stream_idle_timeout: cli.stream_idle_timeout,
        client: PerClientSettings {
            rate_limit: cli.client_rate_limit,
            rate_burst: cli.client_rate_burst,
            max_concurrent: cli.client_max_concurrent,
            max_keys: cli.client_limit_keys,
        },
    };
    Ok((cli.max_body, batch, limits))
}

/// The lowest rate a limit takes (about one call in 12 days; `0` turns the limit off): the
/// limiter's period is one call's share of a second, which must stay a duration.
const MIN_RATE: f64 = 1e-6;

/// A rate is a finite number of calls per second, `0` or at least `MIN_RATE`; a burst
/// needs its rate.
pub(super) fn check_rate(flag: &'static str, rate: f64, burst: u32) -> Result<(), ConfigError> {
    if !rate.is_finite() || rate < 0.0 {
        let why = format!("{rate} is not a number of calls per second");
        return Err(ConfigError::Limit(flag, why));
    }
    if rate > 0.0 && rate < MIN_RATE {
        let why = format!(
            "{rate} is below the lowest rate, {MIN_RATE} calls per second (0 turns it off)"
        );
        return Err(ConfigError::Limit(flag, why));
    }
    if burst > 0 && rate == 0.0 {
        let why = "a burst needs a rate".to_owned();
        return Err(ConfigError::Limit(flag, why));
    }
    Ok(())
}

/// The route's `allow` rules, checked. The card source `backend` publishes the agent's
/// extended card at the public card URL, so everyone must be let in and allowed it.
fn allow(cli: &Cli, auth: Option<&Authenticator>) -> Result<Option<Arc<Rules>>, ConfigError> {
    let rules = Rules::new(&cli.allow_rules)?;
    let source = cli.card.as_deref().or(cli.card_settings.source.as_deref());
    let anyone_in = auth.is_none_or(Authenticator::lets_anonymous_in);
    let allowed = |rules: &Rules| rules.allow_everyone(Op::GetExtendedAgentCard);
    if source == Some(BACKEND_CARD_SOURCE) && !(anyone_in && rules.as_ref().is_none_or(allowed)) {
        return Err(ConfigError::ExtendedCardPublished);
    }
    Ok(rules.map(Arc::new))
}

/// The backend clients' settings, the CA bundle and client identity read and checked.
fn client(cli: &Cli) -> Result<ClientSettings, ConfigError> {
    let ca = match &cli.backend_ca {
        Some(path) => Some(read_ca(path)?),
        None => None,
    };
    let identity = crate::server::tls::backend_identity(
        cli.backend_client_cert.as_deref(),
        cli.backend_client_key.as_deref(),
    )?;
    Ok(ClientSettings {
        connect_timeout: cli.connect_timeout,
        max_message: cli.backend_max_message,
        keepalive_interval: cli.backend_keepalive,
        keepalive_timeout: cli.backend_keepalive_timeout,
        keepalive_while_idle: cli.backend_keepalive_while_idle,
        ca,
        identity,
    })
}

/// Reads a PEM bundle and checks it holds at least one certificate, so a bad file is a
/// startup error rather than a failure of every call.
fn read_ca(path: &std::path::Path) -> Result<Vec<u8>, ConfigError> {
    let fail = |why: String| ConfigError::BackendCa(path.to_owned(), why);
    crate::watched::note(path);
    let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certificates) if !certificates.is_empty() => Ok(pem),
        Ok(_) => Err(fail("no PEM certificate in the file".into())),
        Err(e) => Err(fail(e.to_string())),
    }
}

/// What `[auth]` enforces (`auth`, built from it), as the route's card declares it.
fn enforced(table: &AuthTable, auth: Option<&Authenticator>) -> Enforced {
    Enforced {
        jwt_issuers: table.jwt.iter().map(|jwt| jwt.issuer.clone()).collect(),
        api_key_header: auth
            .and_then(Authenticator::key_header)
            .map(|h| h.to_string()),
        mtls: table.mtls.is_some(),
        anonymous: table.lets_anonymous_in(),
    }
}

/// The route's card settings: the `card` table, with the `--card*` flags over it.
fn card(cli: &Cli) -> CardSettings {
    let mut card = cli.card_settings.clone();
    if cli.card.is_some() {
        card.source.clone_from(&cli.card);
    }
    if cli.card_sign_key.is_some() {
        card.sign_key.clone_from(&cli.card_sign_key);
    }
    if cli.card_sign_kid.is_some() {
        card.sign_kid.clone_from(&cli.card_sign_kid);
    }
    // A key is given to be used.
    if card.sign_key.is_some() && card.signatures.is_none() {
        card.signatures = Some(SignaturePolicy::Resign);
    }
    card
}

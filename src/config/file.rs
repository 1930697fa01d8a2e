//! The `--config` TOML file. Top-level keys are the flags' names without `--`; `[[route]]`
//! tables describe one route each (several agents behind one gateway). The settings a route
//! may set are listed once (`file_config!`), so the top level and the routes accept exactly
//! the same keys for them. Errors name the key and, where the parser knows it, the line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{Cli, ClientAuth, LogFormat};
use crate::backend::affinity::{Affinity, AffinityKey};
use crate::backend::endpoints::Balance;
use crate::card::CardSettings;
use crate::protocol::binding::Binding;
use crate::telemetry::trace::OtlpProtocol;
use crate::units::{duration_text, size_text};

/// Declares the file's two tables from one list of the settings a route may set: `plain`
/// ones replace a `Cli` field, `optional` ones fill an `Option` field of `Cli`.
macro_rules! file_config {
    (
        plain { $($(#[$pa:meta])* $plain:ident: $pty:ty,)* }
        optional { $($(#[$oa:meta])* $opt:ident: $oty:ty,)* }
    ) => {
        /// The whole file. Durations and sizes are written as on the command line
        /// (`"30s"`, `"4MiB"`).
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct FileConfig {
            listen: Option<SocketAddr>,
            #[serde(default, deserialize_with = "duration_text")]
            shutdown_grace: Option<Duration>,
            #[serde(default, deserialize_with = "duration_text")]
            drain_delay: Option<Duration>,
            workers: Option<usize>,
            log_format: Option<LogFormat>,
            global_max_concurrent_calls: Option<usize>,
            global_max_concurrent_streams: Option<usize>,
            #[serde(default, deserialize_with = "size_text")]
            global_max_body_bytes_in_flight: Option<usize>,
            global_rate_limit: Option<f64>,
            global_rate_burst: Option<u32>,
            cors_origin: Option<Vec<String>>,
            allowed_hosts: Option<Vec<String>>,
            cors_allow_header: Option<Vec<String>>,
            cors_allow_method: Option<Vec<String>>,
            #[serde(default, deserialize_with = "duration_text")]
            cors_max_age: Option<Duration>,
            admin_listen: Option<SocketAddr>,
            #[serde(default, deserialize_with = "duration_text")]
            readiness_cache: Option<Duration>,
            #[serde(default, deserialize_with = "duration_text")]
            readiness_timeout: Option<Duration>,
            tls_cert: Option<PathBuf>,
            tls_key: Option<PathBuf>,
            tls_client_ca: Option<PathBuf>,
            tls_client_auth: Option<ClientAuth>,
            #[serde(default, deserialize_with = "duration_text")]
            tls_handshake_timeout: Option<Duration>,
            access_log: Option<bool>,
            otlp_endpoint: Option<String>,
            otlp_protocol: Option<OtlpProtocol>,
            trace_sampler: Option<String>,
            trace_sampler_arg: Option<f64>,
            #[serde(default, deserialize_with = "duration_text")]
            client_header_timeout: Option<Duration>,
            #[serde(default, deserialize_with = "duration_text")]
            client_body_timeout: Option<Duration>,
            #[serde(default, deserialize_with = "duration_text")]
            client_idle_timeout: Option<Duration>,
            #[serde(default, deserialize_with = "duration_text")]
            client_send_timeout: Option<Duration>,
            /// One table per route; none: the top-level settings are the one route.
            #[serde(default)]
            route: Vec<RouteFile>,
            forward_header: Option<Vec<String>>,
            card: Option<CardSettings>,
            $($(#[$pa])* $plain: Option<$pty>,)*
            $($(#[$oa])* $opt: Option<$oty>,)*
        }

        /// One `[[route]]` table: what selects the route, then its settings, which
        /// replace the top-level ones.
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct RouteFile {
            /// Spanned: every later error about the route can name its line.
            pub name: Spanned<String>,
            /// Public path prefix, e.g. `/agents/billing`.
            pub path: Option<String>,
            /// `Host` the route answers for.
            pub host: Option<String>,
            forward_header: Option<Vec<String>>,
            card: Option<CardSettings>,
            $($(#[$pa])* $plain: Option<$pty>,)*
            $($(#[$oa])* $opt: Option<$oty>,)*
        }

        /// The route settings of either table, applied to `cli` where `take(flag id)`.
        struct RouteSettings {
            forward_header: Option<Vec<String>>,
            card: Option<CardSettings>,
            $($plain: Option<$pty>,)*
            $($opt: Option<$oty>,)*
        }

        impl RouteSettings {
            fn apply(self, cli: &mut Cli, take: &dyn Fn(&str) -> bool) {
                $(if let Some(value) = self.$plain {
                    if take(stringify!($plain)) {
                        cli.$plain = value;
                    }
                })*
                $(if self.$opt.is_some() && take(stringify!($opt)) {
                    cli.$opt = self.$opt;
                })*
                if let Some(headers) = self.forward_header {
                    if take("forward_headers") {
                        cli.forward_headers = headers;
                    }
                }
                if let Some(card) = self.card {
                    cli.card_settings = card;
                }
            }
        }

        impl FileConfig {
            fn split(self) -> (Globals, RouteSettings, Vec<RouteFile>) {
                let globals = Globals {
                    listen: self.listen,
                    shutdown_grace: self.shutdown_grace,
                    drain_delay: self.drain_delay,
                    workers: self.workers,
                    log_format: self.log_format,
                    global_max_concurrent_calls: self.global_max_concurrent_calls,
                    global_max_concurrent_streams: self.global_max_concurrent_streams,
                    global_max_body_bytes_in_flight: self.global_max_body_bytes_in_flight,
                    global_rate_limit: self.global_rate_limit,
                    global_rate_burst: self.global_rate_burst,
                    cors_origin: self.cors_origin,
                    allowed_hosts: self.allowed_hosts,
                    cors_allow_header: self.cors_allow_header,
                    cors_allow_method: self.cors_allow_method,
                    cors_max_age: self.cors_max_age,
                    admin_listen: self.admin_listen,
                    readiness_cache: self.readiness_cache,
                    readiness_timeout: self.readiness_timeout,
                    tls_cert: self.tls_cert,
                    tls_key: self.tls_key,
                    tls_client_ca: self.tls_client_ca,
                    tls_client_auth: self.tls_client_auth,
                    tls_handshake_timeout: self.tls_handshake_timeout,
                    access_log: self.access_log,
                    otlp_endpoint: self.otlp_endpoint,
                    otlp_protocol: self.otlp_protocol,
                    trace_sampler: self.trace_sampler,
                    trace_sampler_arg: self.trace_sampler_arg,
                    client_header_timeout: self.client_header_timeout,
                    client_body_timeout: self.client_body_timeout,
                    client_idle_timeout: self.client_idle_timeout,
                    client_send_timeout: self.client_send_timeout,
                };
                let settings = RouteSettings {
                    forward_header: self.forward_header,
                    card: self.card,
                    $($plain: self.$plain,)*
                    $($opt: self.$opt,)*
                };
                (globals, settings, self.route)
            }
        }

        impl RouteFile {
            /// Applies this route's settings over `cli` (a copy of the global settings).
            pub fn apply(self, cli: &mut Cli) -> RouteSelector {
                let settings = RouteSettings {
                    forward_header: self.forward_header,
                    card: self.card,
                    $($plain: self.$plain,)*
                    $($opt: self.$opt,)*
                };
                settings.apply(cli, &|_| true);
                RouteSelector {
                    name: self.name,
                    path: self.path,
                    host: self.host,
                }
            }
        }
    };
}

file_config! {
    plain {
        binding: Binding,
        jsonrpc_path: String,
        #[serde(default, deserialize_with = "duration_text")]
        timeout: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        stream_timeout: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        keepalive: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        backend_keepalive: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        backend_keepalive_timeout: Duration,
        backend_keepalive_while_idle: bool,
        #[serde(default, deserialize_with = "size_text")]
        backend_max_message: usize,
        #[serde(default, deserialize_with = "duration_text")]
        connect_timeout: Duration,
        #[serde(default, deserialize_with = "size_text")]
        max_body: usize,
        max_batch_size: usize,
        #[serde(default, deserialize_with = "size_text")]
        max_batch_reply: usize,
        #[serde(default, deserialize_with = "size_text")]
        max_header_size: usize,
        trust_forwarded: bool,
        trusted_proxy_hops: usize,
        #[serde(default, deserialize_with = "one_or_many")]
        backend: Vec<String>,
        backend_tls: bool,
        #[serde(default, deserialize_with = "duration_text")]
        backend_resolve_interval: Duration,
        balance: Balance,
        eject_after: u32,
        #[serde(default, deserialize_with = "duration_text")]
        eject_backoff: Duration,
        affinity: Affinity,
        max_concurrent_calls: usize,
        max_concurrent_streams: usize,
        rate_limit: f64,
        rate_burst: u32,
        #[serde(default, deserialize_with = "duration_text")]
        stream_idle_timeout: Duration,
        health_service: String,
        legacy: super::Legacy,
        set_header: Vec<String>,
        remove_header: Vec<String>,
        identity_header: Vec<String>,
        sensitive_header: Vec<String>,
        push_guard: bool,
        push_allow_http: bool,
        push_allow: Vec<String>,
    }
    optional {
        backend_resolver: SocketAddr,
        backend_ca: PathBuf,
        backend_client_cert: PathBuf,
        backend_client_key: PathBuf,
        #[serde(default, deserialize_with = "duration_text")]
        first_event_timeout: Duration,
        tenant: String,
        public_url: String,
        affinity_key: AffinityKey,
        affinity_key_file: PathBuf,
    }
}

/// `backend = "url"` or `backend = ["url", …]` (a balanced list).
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(Some(match OneOrMany::deserialize(d)? {
        OneOrMany::One(url) => vec![url],
        OneOrMany::Many(urls) => urls,
    }))
}

/// The settings that exist once per process.
struct Globals {
    listen: Option<SocketAddr>,
    shutdown_grace: Option<Duration>,
    drain_delay: Option<Duration>,
    workers: Option<usize>,
    log_format: Option<LogFormat>,
    global_max_concurrent_calls: Option<usize>,
    global_max_concurrent_streams: Option<usize>,
    global_max_body_bytes_in_flight: Option<usize>,
    global_rate_limit: Option<f64>,
    global_rate_burst: Option<u32>,
    cors_origin: Option<Vec<String>>,
    allowed_hosts: Option<Vec<String>>,
    cors_allow_header: Option<Vec<String>>,
    cors_allow_method: Option<Vec<String>>,
    cors_max_age: Option<Duration>,
    admin_listen: Option<SocketAddr>,
    readiness_cache: Option<Duration>,
    readiness_timeout: Option<Duration>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_client_ca: Option<PathBuf>,
    tls_client_auth: Option<ClientAuth>,
    tls_handshake_timeout: Option<Duration>,
    access_log: Option<bool>,
    otlp_endpoint: Option<String>,
    otlp_protocol: Option<OtlpProtocol>,
    trace_sampler: Option<String>,
    trace_sampler_arg: Option<f64>,
    client_header_timeout: Option<Duration>,
    client_body_timeout: Option<Duration>,
    client_idle_timeout: Option<Duration>,
    client_send_timeout: Option<Duration>,
}

/// What selects a route, as written in its table.
pub struct RouteSelector {
    pub name: Spanned<String>,
    pub path: Option<String>,
    pub host: Option<String>,
}

/// A file read and parsed: its routes, and the line of each byte offset for messages.
pub struct ParsedFile {
    pub routes: Vec<RouteFile>,
    text: String,
}

impl ParsedFile {
    /// The 1-based line of a byte offset into the file.
    pub fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    }
}

impl FileConfig {
    /// Reads and parses a file; the error names the offending key and its line.
    pub fn read(path: &Path) -> Result<(FileConfig, String), String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        Ok((FileConfig::parse(&text)?, text))
    }

    /// Parses TOML text; the error names the offending key and its line.
    pub fn parse(text: &str) -> Result<FileConfig, String> {
        let line = |span: Option<std::ops::Range<usize>>| {
            span.map(|s| {
                let before = &text.as_bytes()[..s.start.min(text.len())];
                before.iter().filter(|b| **b == b'\n').count() + 1
            })
        };
        let de = toml::Deserializer::parse(text).map_err(|e| match line(e.span()) {
            Some(n) => format!("line {n}: {}", e.message()),
            None => e.message().to_owned(),
        })?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let message = e.inner().message();
            let at = line(e.inner().span()).map_or(String::new(), |n| format!("line {n}: "));
            if key == "." {
                format!("{at}{message}")
            } else {
                format!("{at}key `{key}`: {message}")
            }
        })
    }

    /// Sets every global setting the command line and environment did not set (`unset`),
    /// and returns the file's routes.
    pub fn apply(self, text: String, cli: &mut Cli, unset: &dyn Fn(&str) -> bool) -> ParsedFile {
        let (globals, settings, routes) = self.split();
        macro_rules! take {
            ($($field:ident),*) => {$(
                if let Some(value) = globals.$field {
                    if unset(stringify!($field)) {
                        cli.$field = value;
                    }
                }
            )*};
        }
        take!(listen, shutdown_grace, drain_delay, workers, log_format);
        take!(
            global_max_concurrent_calls,
            global_max_concurrent_streams,
            global_max_body_bytes_in_flight,
            global_rate_limit,
            global_rate_burst,
            cors_origin,
            cors_allow_header,
            cors_allow_method,
            cors_max_age,
            allowed_hosts
        );
        take!(readiness_cache, readiness_timeout);
        take!(tls_client_auth, tls_handshake_timeout);
        take!(access_log);
        take!(
            client_header_timeout,
            client_body_timeout,
            client_idle_timeout,
            client_send_timeout
        );
        // Settings whose `Cli` field is optional itself.
        macro_rules! take_optional {
            ($($field:ident),*) => {$(
                if globals.$field.is_some() && unset(stringify!($field)) {
                    cli.$field = globals.$field;
                }
            )*};
        }
        take_optional!(admin_listen, tls_cert, tls_key, tls_client_ca);
        take_optional!(otlp_endpoint, otlp_protocol);
        take_optional!(trace_sampler, trace_sampler_arg);
        settings.apply(cli, unset);
        ParsedFile { routes, text }
    }
}

//! The `--config` TOML file. Top-level keys are the flags' names without `--`; `[[route]]`
//! tables describe one route each (several agents behind one gateway). Every setting is
//! listed once (`file_config!`), which declares its key, its type and how it fills `Cli`;
//! the top level and the routes accept exactly the same keys for the route settings.
//! Errors name the key and, where the parser knows it, the line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{Cli, LogFormat};
use crate::backend::affinity::{Affinity, AffinityKey};
use crate::backend::endpoints::Balance;
use crate::card::CardSettings;
use crate::protocol::binding::Binding;
use crate::server::tls::ClientAuth;
use crate::telemetry::trace::OtlpProtocol;
use crate::units::{duration_text, size_text};

/// Declares the file's two tables and how they apply to `Cli`, each setting named once:
/// `global` settings exist once per process (top level only), the others a route may set
/// too (top level and `[[route]]`). `plain` ones replace a `Cli` field, `optional` ones
/// (`global_optional`) fill an `Option` field of `Cli`. A key is its `Cli` field's name in
/// kebab case, which is also the flag's id.
macro_rules! file_config {
    (
        global { $($(#[$ga:meta])* $global:ident: $gty:ty,)* }
        global_optional { $($(#[$goa:meta])* $gopt:ident: $goty:ty,)* }
        plain { $($(#[$pa:meta])* $plain:ident: $pty:ty,)* }
        optional { $($(#[$oa:meta])* $opt:ident: $oty:ty,)* }
    ) => {
        /// The whole file. Durations and sizes are written as on the command line
        /// (`"30s"`, `"4MiB"`).
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct FileConfig {
            $($(#[$ga])* $global: Option<$gty>,)*
            $($(#[$goa])* $gopt: Option<$goty>,)*
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
            /// Sets every global setting the command line and environment did not set
            /// (`unset(flag id)`), and returns the file's routes.
            pub fn apply(
                self,
                text: String,
                cli: &mut Cli,
                unset: &dyn Fn(&str) -> bool,
            ) -> ParsedFile {
                $(if let Some(value) = self.$global {
                    if unset(stringify!($global)) {
                        cli.$global = value;
                    }
                })*
                // Settings whose `Cli` field is optional itself.
                $(if self.$gopt.is_some() && unset(stringify!($gopt)) {
                    cli.$gopt = self.$gopt;
                })*
                let settings = RouteSettings {
                    forward_header: self.forward_header,
                    card: self.card,
                    $($plain: self.$plain,)*
                    $($opt: self.$opt,)*
                };
                settings.apply(cli, unset);
                ParsedFile {
                    routes: self.route,
                    text,
                }
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
    global {
        listen: SocketAddr,
        #[serde(default, deserialize_with = "duration_text")]
        shutdown_grace: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        drain_delay: Duration,
        workers: usize,
        log_format: LogFormat,
        global_max_concurrent_calls: usize,
        global_max_concurrent_streams: usize,
        #[serde(default, deserialize_with = "size_text")]
        global_max_body_bytes_in_flight: usize,
        global_rate_limit: f64,
        global_rate_burst: u32,
        cors_origin: Vec<String>,
        allowed_hosts: Vec<String>,
        cors_allow_header: Vec<String>,
        cors_allow_method: Vec<String>,
        #[serde(default, deserialize_with = "duration_text")]
        cors_max_age: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        readiness_cache: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        readiness_timeout: Duration,
        tls_client_auth: ClientAuth,
        #[serde(default, deserialize_with = "duration_text")]
        tls_handshake_timeout: Duration,
        access_log: bool,
        #[serde(default, deserialize_with = "duration_text")]
        client_header_timeout: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        client_body_timeout: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        client_idle_timeout: Duration,
        #[serde(default, deserialize_with = "duration_text")]
        client_send_timeout: Duration,
    }
    global_optional {
        admin_listen: SocketAddr,
        tls_cert: PathBuf,
        tls_key: PathBuf,
        tls_client_ca: PathBuf,
        otlp_endpoint: String,
        otlp_protocol: OtlpProtocol,
        trace_sampler: String,
        trace_sampler_arg: f64,
    }
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
}

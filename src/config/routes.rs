//! Routes: which requests go to which agent. A route is selected by a public path prefix
//! (`/agents/billing`: JSON-RPC at `/agents/billing/a2a/jsonrpc`, card at
//! `/agents/billing/.well-known/agent-card.json`) and/or a `Host`; everything else about it
//! (backend, binding, timeouts, forwarded headers, tenant, card) is the global settings
//! with the route's own keys over them. Without `[[route]]` tables the global settings are
//! the one route, at the root (the flags-only shorthand).
//!
//! Checked here, before anything starts: names, paths, hosts, and that no two routes can
//! match the same request (`settings` checks each route's settings).

use std::collections::HashMap;

use super::file::RouteFile;
use super::{Cli, ConfigError};
use crate::server::routing::DEFAULT_ROUTE;

/// Paths the gateway itself answers; no route may take them.
const RESERVED: [&str; 4] = ["/healthz", "/readyz", "/metrics", "/.well-known"];

/// One checked route.
#[derive(Clone, Debug)]
pub struct RouteConfig {
    pub name: String,
    /// Public path prefix: empty (the root) or `/segment[/segment…]`, no trailing `/`.
    pub prefix: String,
    /// Lowercase host name (no port) the route answers for; `None`: any host.
    pub host: Option<String>,
    /// The config file line of the route's `name`, for messages.
    pub line: Option<usize>,
    /// The route's settings: backend, binding, timeouts, tenant, public URL, card.
    pub settings: Cli,
}

impl RouteConfig {
    /// How messages name the route: its name and, from a file, its line.
    pub(crate) fn label(&self) -> String {
        match self.line {
            Some(line) => format!("route {:?} (line {line})", self.name),
            None => format!("route {:?}", self.name),
        }
    }
}

/// The routes of a loaded configuration: the file's `[[route]]` tables, each with its
/// settings (the global ones under its own), or the shorthand.
pub fn resolve(cli: &Cli, tables: Vec<(RouteFile, Cli)>) -> Result<Vec<RouteConfig>, ConfigError> {
    if tables.is_empty() {
        let route = RouteConfig {
            name: DEFAULT_ROUTE.to_owned(),
            prefix: String::new(),
            host: None,
            line: None,
            settings: cli.clone(),
        };
        return Ok(vec![route]);
    }
    for (key, set) in [
        ("backend", !cli.backend.is_empty()),
        ("tenant", cli.tenant.is_some()),
        (
            "card",
            cli.card.is_some() || cli.card_settings.source.is_some(),
        ),
        ("card-sign-key", cli.card_sign_key.is_some()),
        ("demo", cli.demo),
    ] {
        if set {
            return Err(ConfigError::PerRoute(key));
        }
    }
    let mut routes = Vec::with_capacity(tables.len());
    for (table, settings) in tables {
        let route = RouteConfig {
            line: Some(table.line),
            name: table.name,
            prefix: String::new(),
            host: None,
            settings,
        };
        routes.push(check_route(route, table.path, table.host)?);
    }
    check_disjoint(&routes)?;
    Ok(routes)
}

fn check_route(
    mut route: RouteConfig,
    path: Option<String>,
    host: Option<String>,
) -> Result<RouteConfig, ConfigError> {
    let fail = |route: &RouteConfig, key: &'static str, message: String| {
        Err(ConfigError::Route {
            route: route.label(),
            key,
            message,
        })
    };
    let name_ok = !route.name.is_empty()
        && route
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !name_ok {
        let why = "must be non-empty letters, digits, '-', '_' or '.'".to_owned();
        return fail(&route, "name", why);
    }
    if path.is_none() && host.is_none() {
        return fail(
            &route,
            "path",
            "a route needs a path, a host or both".into(),
        );
    }
    if let Some(path) = path {
        match check_prefix(&path) {
            Ok(prefix) => route.prefix = prefix,
            Err(why) => return fail(&route, "path", format!("{path:?} {why}")),
        }
    }
    if let Some(host) = host {
        match check_host(&host) {
            Ok(host) => route.host = Some(host),
            Err(why) => return fail(&route, "host", format!("{host:?} {why}")),
        }
    }
    Ok(route)
}

/// A path prefix as routes use it: `/` alone is the root (empty prefix).
fn check_prefix(path: &str) -> Result<String, &'static str> {
    let trimmed = path.trim_end_matches('/');
    if !path.starts_with('/') {
        return Err("must start with '/'");
    }
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    if trimmed.contains(['?', '#', '%']) || trimmed.parse::<http::uri::PathAndQuery>().is_err() {
        return Err("must be a plain URL path (no query, fragment or escapes)");
    }
    if trimmed[1..]
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err("must not have empty, '.' or '..' segments");
    }
    if RESERVED.iter().any(|r| segment_prefix(r, trimmed)) {
        return Err("is taken by the gateway (/healthz, /readyz, /metrics, /.well-known)");
    }
    Ok(trimmed.to_owned())
}

/// Whether `prefix` is `path` or a whole-segment prefix of it.
fn segment_prefix(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn check_host(host: &str) -> Result<String, &'static str> {
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|label| !label.is_empty() && label.len() <= 63)
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if valid {
        Ok(host.to_ascii_lowercase())
    } else {
        Err("must be a DNS host name without port")
    }
}

/// No two routes may match one request: names are unique, and among the routes for the
/// same host (or for any host) no prefix is another's prefix. Each route is checked
/// against the earlier ones through tables (its name; each whole-segment prefix of its
/// prefix; every earlier prefix's whole-segment prefixes), so 10,000 routes take
/// milliseconds; a conflict names the earliest route it conflicts with.
fn check_disjoint(routes: &[RouteConfig]) -> Result<(), ConfigError> {
    let mut names: HashMap<&str, usize> = HashMap::with_capacity(routes.len());
    // (host, prefix) of earlier routes, and (host, a whole-segment prefix of an earlier
    // route's prefix), each with the earliest route it came from.
    let mut prefixes: HashMap<(Option<&str>, &str), usize> = HashMap::new();
    let mut below: HashMap<(Option<&str>, &str), usize> = HashMap::new();
    for (i, a) in routes.iter().enumerate() {
        let host = a.host.as_deref();
        let duplicate = names.get(a.name.as_str()).copied();
        // An earlier prefix that is a whole-segment prefix of this one (or the same), or
        // this prefix a whole-segment prefix of an earlier one.
        let above = segment_prefixes(&a.prefix)
            .filter_map(|p| prefixes.get(&(host, p)).copied())
            .min();
        let overlap = above
            .into_iter()
            .chain(below.get(&(host, a.prefix.as_str())).copied())
            .min();
        match (duplicate, overlap) {
            (Some(d), o) if o.is_none_or(|o| d <= o) => {
                return Err(ConfigError::DuplicateRoute {
                    route: a.label(),
                    earlier: routes[d].label(),
                })
            }
            (_, Some(o)) => {
                return Err(ConfigError::OverlappingRoutes {
                    route: a.label(),
                    earlier: routes[o].label(),
                })
            }
            _ => {}
        }
        names.entry(&a.name).or_insert(i);
        prefixes.entry((host, &a.prefix)).or_insert(i);
        for p in segment_prefixes(&a.prefix) {
            below.entry((host, p)).or_insert(i);
        }
    }
    Ok(())
}

/// Every whole-segment prefix of `prefix`, itself included: `""`, `/a`, `/a/b` for `/a/b`.
fn segment_prefixes(prefix: &str) -> impl Iterator<Item = &str> {
    let ends = prefix.match_indices('/').map(|(at, _)| at);
    ends.chain(std::iter::once(prefix.len()))
        .map(move |end| &prefix[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(
            check_prefix("/agents/billing/"),
            Ok("/agents/billing".into())
        );
        assert_eq!(check_prefix("/"), Ok(String::new()));
        assert!(check_prefix("agents").is_err());
        assert!(check_prefix("/a//b").is_err());
        assert!(check_prefix("/a/../b").is_err());
        assert!(check_prefix("/a?x=1").is_err());
        assert!(check_prefix("/a b").is_err());
        assert!(check_prefix("/metrics").is_err());
        assert!(check_prefix("/.well-known/x").is_err());
        assert_eq!(check_prefix("/metricsx"), Ok("/metricsx".into()));
    }

    #[test]
    fn hosts() {
        assert_eq!(
            check_host("Billing.Example.COM"),
            Ok("billing.example.com".into())
        );
        assert!(check_host("billing.example.com:8080").is_err());
        assert!(check_host("a..b").is_err());
        assert!(check_host("").is_err());
    }

    #[test]
    fn whole_segments_only() {
        assert!(segment_prefix("/a", "/a/b"));
        assert!(segment_prefix("/a", "/a"));
        assert!(!segment_prefix("/a", "/ab"));
    }
}

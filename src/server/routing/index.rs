//! Which route a request belongs to, found in time independent of the number of routes:
//! a table from each route's prefix to its routes by host, looked up only at the prefix
//! lengths some route has (so a path of thousands of segments costs as many lookups as
//! there are distinct prefix lengths in the configuration, not as many as it has segments).
//!
//! `config::routes` made the routes disjoint: among the routes for one host (or for any
//! host) no prefix is a whole-segment prefix of another, so at most one route per host and
//! one for any host match a path; a route for the request's host wins over one for any host.

use std::collections::HashMap;

/// The longest DNS host name (`config::routes::check_host`); longer hosts match no route.
const MAX_HOST: usize = 253;

/// The routes of one prefix.
#[derive(Default)]
struct PrefixRoutes {
    /// The route for any host, if any.
    any_host: Option<usize>,
    /// Routes for one host each, by lowercase host name.
    by_host: HashMap<Box<str>, usize>,
}

/// The route table by prefix (route indices in configuration order).
#[derive(Default)]
pub struct RouteIndex {
    by_prefix: HashMap<Box<str>, PrefixRoutes>,
    /// The distinct lengths of the prefixes, ascending.
    lengths: Vec<usize>,
}

impl RouteIndex {
    /// The index of routes given as `(prefix, lowercase host or None)` in order.
    pub fn new<'a>(routes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> RouteIndex {
        let mut index = RouteIndex::default();
        for (i, (prefix, host)) in routes.into_iter().enumerate() {
            let entry = index.by_prefix.entry(prefix.into()).or_default();
            // Disjoint routes never repeat a (prefix, host) pair; were they to, the first
            // would win, as a scan in order would have it.
            match host {
                None => {
                    entry.any_host.get_or_insert(i);
                }
                Some(host) => {
                    entry.by_host.entry(host.into()).or_insert(i);
                }
            }
            index.lengths.push(prefix.len());
        }
        index.lengths.sort_unstable();
        index.lengths.dedup();
        index.lengths.shrink_to_fit();
        index
    }

    /// The route of a request for `path` (with `host` when some route selects by host).
    pub fn find(&self, path: &str, host: Option<&str>) -> Option<usize> {
        let mut lower = [0u8; MAX_HOST];
        let host = host.and_then(|host| {
            let bytes = host.as_bytes();
            let lower = lower.get_mut(..bytes.len())?;
            lower.copy_from_slice(bytes);
            lower.make_ascii_lowercase();
            std::str::from_utf8(lower).ok()
        });
        let mut any_host = None;
        for &length in &self.lengths {
            if length > path.len() {
                break;
            }
            // A prefix matches whole segments only: `/a` is below `/a`, `/a/b`, not `/ab`.
            let Some(candidate) = path.get(..length) else {
                continue;
            };
            if !(path.len() == length || path.as_bytes()[length] == b'/') {
                continue;
            }
            let Some(routes) = self.by_prefix.get(candidate) else {
                continue;
            };
            if let Some(route) = host.and_then(|host| routes.by_host.get(host)) {
                return Some(*route);
            }
            any_host = any_host.or(routes.any_host);
        }
        any_host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(routes: &[(&'static str, Option<&'static str>)]) -> RouteIndex {
        RouteIndex::new(routes.iter().copied())
    }

    #[test]
    fn whole_segments_match_and_the_root_matches_everything() {
        let routes = index(&[("/agents/a", None), ("/agents/b/c", None), ("", Some("h"))]);
        assert_eq!(routes.find("/agents/a", None), Some(0));
        assert_eq!(routes.find("/agents/a/a2a/jsonrpc", None), Some(0));
        assert_eq!(routes.find("/agents/ab", None), None);
        assert_eq!(routes.find("/agents/b/c/x", None), Some(1));
        assert_eq!(routes.find("/agents/b", None), None);
        assert_eq!(routes.find("/agents/ab", Some("h")), Some(2));
        assert_eq!(routes.find("/", Some("h")), Some(2));
        assert_eq!(routes.find("", Some("h")), Some(2));
        assert_eq!(routes.find("/agents/é/x", None), None);
    }

    #[test]
    fn a_route_for_the_host_wins_over_one_for_any_host() {
        let routes = index(&[
            ("", None),
            ("/x", Some("a.example")),
            ("", Some("b.example")),
        ]);
        assert_eq!(routes.find("/x/y", Some("A.Example")), Some(1));
        assert_eq!(routes.find("/x/y", Some("b.example")), Some(2));
        assert_eq!(routes.find("/x/y", Some("c.example")), Some(0));
        assert_eq!(routes.find("/x/y", None), Some(0));
        assert_eq!(routes.find("/z", Some("a.example")), Some(0));
        let long = "h".repeat(MAX_HOST + 1);
        assert_eq!(routes.find("/x", Some(&long)), Some(0));
    }

    #[test]
    fn a_deep_path_costs_one_lookup_per_prefix_length() {
        let routes = index(&[("/a", None), ("/b/c", None)]);
        let deep = "/a".to_owned() + &"/z".repeat(30_000);
        assert_eq!(routes.find(&deep, None), Some(0));
        assert_eq!(routes.lengths, vec![2, 4]);
    }
}

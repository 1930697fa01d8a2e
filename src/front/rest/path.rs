//! Which operation an HTTP+JSON request names: its method and path (below the front's base
//! path) matched against the operation table's HTTP rules (`Op::http_rule`, spec 11.3),
//! with or without a leading `/{tenant}` segment, and the path parameters it carries.
//!
//! Where two rules match a path (`/tasks/{id}` and `/tasks/{id}:subscribe`), the one with
//! more literal text wins. SubscribeToTask is served on `GET` (the schema's rule) and on
//! `POST` (the prose of spec 11.3.2), as the REST backend may send either.

use std::borrow::Cow;

use http::Method;
use percent_encoding::percent_decode_str;

use crate::protocol::ops::{HttpMethod, Op};

/// What a request's method and path name.
#[derive(Debug, PartialEq)]
pub(crate) enum Routed {
    /// An operation, with its tenant and path parameters.
    Call(Matched),
    /// A path the front serves, with a method it does not serve there: the `Allow` value.
    WrongMethod(String),
    /// No operation's path.
    NotFound,
    /// A path longer than any operation's can be (`MAX_PATH_BYTES`): its length.
    TooLong(usize),
}

/// An operation a request names.
#[derive(Debug, PartialEq)]
pub(crate) struct Matched {
    pub(crate) op: Op,
    /// The `/{tenant}` segment, decoded (`None`: the path has none).
    pub(crate) tenant: Option<String>,
    /// The path parameters by proto field name (`task_id`), decoded.
    pub(crate) fields: Fields,
}

/// Path parameters by proto field name, decoded.
type Fields = Vec<(&'static str, String)>;

/// The longest path (below the front's base) read: ids are at most 1 KiB
/// (`affinity::ids::MAX_ID_BYTES`, checked in `decode`), and a longer path names no
/// operation.
pub(crate) const MAX_PATH_BYTES: usize = 4 << 10;

/// The operation `method` on `path` (below the front's base, starting with `/`) names.
pub(crate) fn route(method: &Method, path: &str) -> Routed {
    if path.len() > MAX_PATH_BYTES {
        return Routed::TooLong(path.len());
    }
    let Some(below) = path.strip_prefix('/') else {
        return Routed::NotFound;
    };
    match route_at(method, below) {
        Routed::NotFound => {}
        routed => return routed,
    }
    // `/{tenant}/…`: tried only when the path names no operation without it.
    let Some((tenant, rest)) = below.split_once('/') else {
        return Routed::NotFound;
    };
    let Some(tenant) = decoded(tenant).filter(|t| !t.is_empty()) else {
        return Routed::NotFound;
    };
    let tenant = tenant.into_owned();
    match route_at(method, rest) {
        Routed::Call(mut matched) => {
            matched.tenant = Some(tenant);
            Routed::Call(matched)
        }
        routed => routed,
    }
}

/// `route` for a path without its leading `/` and without a tenant. Only the chosen rule's
/// parameters are copied out (a call allocates little: tests/it/cost_budget.rs).
fn route_at(method: &Method, path: &str) -> Routed {
    let matching =
        || (Op::ALL.iter().copied()).filter(|op| visit(op.http_rule().path, path, |_, _| {}));
    // The most specific rules matching the path: the most literal text.
    let Some(best) = matching().map(|op| literal_len(op.http_rule().path)).max() else {
        return Routed::NotFound;
    };
    let candidates = || matching().filter(move |op| literal_len(op.http_rule().path) == best);
    if let Some(op) = candidates().find(|op| methods(*op).contains(method)) {
        // Room for the rule's parameters, none for most calls (SendMessage has none).
        let template = op.http_rule().path;
        let mut fields = Fields::with_capacity(template.matches('{').count());
        visit(template, path, |field, value| {
            fields.push((field, value.into_owned()))
        });
        return Routed::Call(Matched {
            op,
            tenant: None,
            fields,
        });
    }
    let allowed: Vec<&str> = candidates()
        .flat_map(|op| methods(op).iter().map(Method::as_str))
        .collect();
    Routed::WrongMethod(allowed.join(", "))
}

/// The methods `op` is served on.
fn methods(op: Op) -> &'static [Method] {
    match (op, op.http_rule().method) {
        (Op::SubscribeToTask, _) => &[Method::GET, Method::POST],
        (_, HttpMethod::Get) => &[Method::GET],
        (_, HttpMethod::Post) => &[Method::POST],
        (_, HttpMethod::Delete) => &[Method::DELETE],
    }
}

/// Whether `path` matches `template` (both without the leading `/`), telling `found` each
/// path parameter by proto field name. A parameter's segment may end in literal text
/// (`{id}:cancel`); its value is what precedes it, decoded (borrowed unless it has escapes),
/// UTF-8 and not empty.
fn visit<'p>(
    template: &'static str,
    path: &'p str,
    mut found: impl FnMut(&'static str, Cow<'p, str>),
) -> bool {
    let Some(template) = template.strip_prefix('/') else {
        return false;
    };
    let mut segments = path.split('/');
    for expected in template.split('/') {
        let Some(segment) = segments.next() else {
            return false;
        };
        match expected.strip_prefix('{').and_then(|t| t.split_once('}')) {
            Some((field, suffix)) => {
                let value = segment.strip_suffix(suffix).and_then(decoded);
                match value.filter(|v| !v.is_empty()) {
                    Some(value) => found(field, value),
                    None => return false,
                }
            }
            None if segment == expected => {}
            None => return false,
        }
    }
    segments.next().is_none()
}

/// The bytes of a template outside its placeholders: how specific it is.
fn literal_len(template: &str) -> usize {
    let mut len = 0;
    let mut inside = false;
    for c in template.chars() {
        match c {
            '{' => inside = true,
            '}' => inside = false,
            _ if !inside => len += 1,
            _ => {}
        }
    }
    len
}

/// A percent-decoded path segment; `None` when it is not UTF-8.
fn decoded(segment: &str) -> Option<Cow<'_, str>> {
    percent_decode_str(segment).decode_utf8().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: Op, tenant: Option<&str>, fields: &[(&'static str, &str)]) -> Routed {
        Routed::Call(Matched {
            op,
            tenant: tenant.map(str::to_owned),
            fields: fields.iter().map(|(f, v)| (*f, (*v).to_owned())).collect(),
        })
    }

    /// Every rule of the table is found from its own path, with and without a tenant.
    #[test]
    fn every_rule_is_routed_back() {
        for &op in Op::ALL {
            let rule = op.http_rule();
            let path = rule.path.replace("{id}", "i%2Fd").replace("{task_id}", "t");
            let method = methods(op)[0].clone();
            let Routed::Call(matched) = route(&method, &path) else {
                panic!("{op:?} at {path}");
            };
            assert_eq!((matched.op, matched.tenant), (op, None), "{path}");
            for (field, value) in &matched.fields {
                assert_eq!(value, if *field == "id" { "i/d" } else { "t" });
            }
            let Routed::Call(matched) = route(&method, &format!("/acme%20co{path}")) else {
                panic!("{op:?} under a tenant");
            };
            assert_eq!(matched.op, op);
            assert_eq!(matched.tenant.as_deref(), Some("acme co"));
        }
    }

    #[test]
    fn the_most_specific_rule_wins_and_methods_are_checked() {
        assert_eq!(
            route(&Method::GET, "/tasks/a:subscribe"),
            call(Op::SubscribeToTask, None, &[("id", "a")])
        );
        assert_eq!(
            route(&Method::POST, "/tasks/a:subscribe"),
            call(Op::SubscribeToTask, None, &[("id", "a")])
        );
        assert_eq!(
            route(&Method::GET, "/tasks/a"),
            call(Op::GetTask, None, &[("id", "a")])
        );
        assert_eq!(
            route(&Method::PUT, "/tasks/a/pushNotificationConfigs"),
            Routed::WrongMethod("POST, GET".into())
        );
        assert_eq!(
            route(&Method::GET, "/tasks/a:cancel"),
            Routed::WrongMethod("POST".into())
        );
        assert_eq!(
            route(&Method::DELETE, "/t/tasks/a/pushNotificationConfigs/c"),
            call(
                Op::DeleteTaskPushNotificationConfig,
                Some("t"),
                &[("task_id", "a"), ("id", "c")]
            )
        );
        let at = format!(
            "/{}/tasks/t",
            "x".repeat(MAX_PATH_BYTES - "//tasks/t".len())
        );
        assert_eq!(at.len(), MAX_PATH_BYTES);
        assert!(matches!(route(&Method::GET, &at), Routed::Call(_)));
        assert_eq!(
            route(&Method::GET, &format!("/x{}", &at[1..])),
            Routed::TooLong(MAX_PATH_BYTES + 1)
        );
        for missing in [
            "/",
            "",
            "/tasks/",
            "/tasks/a/b",
            "/message:sendx",
            "/t/u/tasks",
            "/%FF/tasks",
            "//tasks",
        ] {
            assert_eq!(route(&Method::GET, missing), Routed::NotFound, "{missing}");
        }
    }
}

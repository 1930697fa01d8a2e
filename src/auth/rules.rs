//! Authorization rules (`[[allow]]`, issue 22 item 2), typed and checked once at load
//! (`Rules::new`): method names against the operation table, scheme names against
//! `Scheme`, name patterns (only a trailing `*`), no empty list. When a route has rules, a
//! call must match one, and a rule matches when every field it gives matches; a refusal
//! (`Rules::check`) names the fields that did not, never the caller's name, claims or
//! credentials.
//!
//! A call on a route that authenticates nobody (no `[auth]` scheme) is anonymous: it has
//! no name and no claims, so only rules without `principals` and `claims` can match it
//! (`schemes = ["anonymous"]`, `methods`, `tenants`).
//!
//! An API key's name and a certificate's identity are principal names (`Principal::name`),
//! so `principals` with `schemes = ["api-key"]` or `["mtls"]` says "these API keys" or
//! "these certificates"; no key of their own is needed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde_json::Value;

use crate::auth::table::AllowRule;
use crate::auth::{Principal, Scheme};
use crate::protocol::ops::Op;

/// A rule that cannot be used, named by its place (`allow[0].methods`).
#[derive(Debug, thiserror::Error)]
#[error("allow[{index}].{key}: {why}")]
pub struct RuleError {
    pub index: usize,
    pub key: &'static str,
    pub why: String,
}

/// A name or tenant pattern: exact, or a prefix (a trailing `*`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Prefix(String),
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, String> {
        let (head, star) = match text.strip_suffix('*') {
            Some(head) => (head, true),
            None => (text, false),
        };
        if head.contains('*') {
            return Err(format!("{text:?}: only a trailing `*` is a wildcard"));
        }
        match (head.is_empty(), star) {
            (true, false) => Err("an empty name matches no one".to_owned()),
            (_, true) => Ok(Pattern::Prefix(head.to_owned())),
            (false, false) => Ok(Pattern::Exact(head.to_owned())),
        }
    }

    fn matches(&self, text: &str) -> bool {
        match self {
            Pattern::Exact(exact) => exact == text,
            Pattern::Prefix(prefix) => text.starts_with(prefix.as_str()),
        }
    }
}

/// What a rule may require, as a refusal names it (`ErrorInfo.metadata.missing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Principal,
    Claims,
    Scheme,
    Method,
    Tenant,
}

impl Field {
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Principal => "principal",
            Field::Claims => "claims",
            Field::Scheme => "scheme",
            Field::Method => "method",
            Field::Tenant => "tenant",
        }
    }
}

/// One checked rule; `None` fields match anything.
#[derive(Clone, Debug)]
struct Rule {
    principals: Option<Vec<Pattern>>,
    claims: Option<Vec<(String, String)>>,
    schemes: Option<Vec<Scheme>>,
    /// A bit per operation (`Op as u32`).
    methods: Option<u32>,
    tenants: Option<Vec<Pattern>>,
}

/// A call as the rules see it.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    /// `None`: the route authenticates nobody (an anonymous caller).
    pub principal: Option<&'a Principal>,
    pub op: Op,
    /// The request's tenant (empty: none).
    pub tenant: &'a str,
}

impl Rule {
    /// The first field of this rule the call does not match, if any.
    fn mismatch(&self, call: &Caller<'_>) -> Option<Field> {
        let name = call.principal.map_or("", |p| &p.name);
        let scheme = call.principal.map_or(Scheme::Anonymous, |p| p.scheme);
        let claims = call.principal.and_then(|p| p.claims.as_deref());
        let any = |patterns: &[Pattern], text: &str| patterns.iter().any(|p| p.matches(text));
        if let Some(methods) = self.methods {
            if methods & (1 << call.op as u32) == 0 {
                return Some(Field::Method);
            }
        }
        if let Some(tenants) = &self.tenants {
            if !any(tenants, call.tenant) {
                return Some(Field::Tenant);
            }
        }
        if let Some(schemes) = &self.schemes {
            if !schemes.contains(&scheme) {
                return Some(Field::Scheme);
            }
        }
        if let Some(principals) = &self.principals {
            // An anonymous caller has no name to match.
            if scheme == Scheme::Anonymous || !any(principals, name) {
                return Some(Field::Principal);
            }
        }
        if let Some(required) = &self.claims {
            let held = |(claim, value): &(String, String)| {
                claims
                    .and_then(|c| c.get(claim))
                    .is_some_and(|v| holds(v, value))
            };
            if !required.iter().all(held) {
                return Some(Field::Claims);
            }
        }
        None
    }
}

/// Whether a claim holds `value`: equal to it, one of the words of a space-separated
/// string (`scope`), one of an array's strings, or a number or boolean written as it.
fn holds(claim: &Value, value: &str) -> bool {
    match claim {
        Value::String(text) => text == value || text.split(' ').any(|word| word == value),
        Value::Array(items) => items.iter().any(|item| item.as_str() == Some(value)),
        Value::Number(n) => n.to_string() == value,
        Value::Bool(b) => b.to_string() == value,
        _ => false,
    }
}

/// A route's rules, with how often they allowed and denied (`/metrics`). Shared by every
/// serving thread of the route.
#[derive(Debug)]
pub struct Rules {
    rules: Vec<Rule>,
    allowed: AtomicU64,
    denied: AtomicU64,
}

/// A call no rule allows: the fields the rules' first mismatches named, in rule order.
#[derive(Debug, PartialEq, Eq)]
pub struct Denied {
    pub missing: Vec<Field>,
}

impl Rules {
    /// The checked `rules` of a route; `None` when there are none (every call allowed).
    pub fn new(rules: &[AllowRule]) -> Result<Option<Rules>, RuleError> {
        if rules.is_empty() {
            return Ok(None);
        }
        let rules = rules
            .iter()
            .enumerate()
            .map(|(index, rule)| checked(rule).map_err(|(key, why)| RuleError { index, key, why }))
            .collect::<Result<_, _>>()?;
        Ok(Some(Rules {
            rules,
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
        }))
    }

    /// Allows `call` when a rule matches it, else says what was missing; counted.
    pub fn check(&self, call: &Caller<'_>) -> Result<(), Denied> {
        let mut missing = Vec::new();
        for rule in &self.rules {
            match rule.mismatch(call) {
                None => {
                    self.allowed.fetch_add(1, Relaxed);
                    return Ok(());
                }
                Some(field) if !missing.contains(&field) => missing.push(field),
                Some(_) => {}
            }
        }
        self.denied.fetch_add(1, Relaxed);
        Err(Denied { missing })
    }

    /// Whether every caller may make `op` whatever its tenant: some rule requires nothing
    /// but (at most) the method.
    pub fn allow_everyone(&self, op: Op) -> bool {
        self.rules.iter().any(|rule| {
            rule.principals.is_none()
                && rule.claims.is_none()
                && rule.schemes.is_none()
                && rule.tenants.is_none()
                && rule.methods.is_none_or(|m| m & (1 << op as u32) != 0)
        })
    }

    /// Calls allowed and denied so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.allowed.load(Relaxed), self.denied.load(Relaxed))
    }
}

/// One rule checked, or the key at fault and why.
fn checked(rule: &AllowRule) -> Result<Rule, (&'static str, String)> {
    fn list<'a, T>(
        key: &'static str,
        items: &'a Option<Vec<String>>,
        parse: impl Fn(&'a str) -> Result<T, String>,
    ) -> Result<Option<Vec<T>>, (&'static str, String)> {
        let Some(items) = items else { return Ok(None) };
        if items.is_empty() {
            return Err((
                key,
                "an empty list matches nothing; leave the key out to match anything".into(),
            ));
        }
        let parsed: Result<Vec<T>, String> = items.iter().map(|item| parse(item)).collect();
        parsed.map(Some).map_err(|why| (key, why))
    }
    let methods = list("methods", &rule.methods, |name| {
        Op::from_name(name).ok_or_else(|| format!("{name:?} is not an A2A v1.0 method name"))
    })?;
    let schemes = list("schemes", &rule.schemes, |name| {
        let all = [Scheme::Jwt, Scheme::ApiKey, Scheme::Mtls, Scheme::Anonymous];
        let known = all.into_iter().find(|s| s.as_str() == name);
        known.ok_or_else(|| format!("{name:?} is not a scheme (jwt, api-key, mtls, anonymous)"))
    })?;
    let claims = match &rule.claims {
        Some(claims) if claims.is_empty() => {
            let why = "an empty table matches nothing; leave the key out to match anything";
            return Err(("claims", why.into()));
        }
        Some(claims) => Some(claims.clone().into_iter().collect()),
        None => None,
    };
    Ok(Rule {
        principals: list("principals", &rule.principals, Pattern::parse)?,
        claims,
        schemes,
        methods: methods.map(|ops| ops.into_iter().fold(0, |bits, op| bits | 1 << op as u32)),
        tenants: list("tenants", &rule.tenants, Pattern::parse)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn rule(toml_text: &str) -> AllowRule {
        toml::from_str(toml_text).unwrap()
    }

    fn rules(texts: &[&str]) -> Rules {
        let rules: Vec<_> = texts.iter().map(|t| rule(t)).collect();
        Rules::new(&rules).unwrap().unwrap()
    }

    fn principal(name: &str, scheme: Scheme, claims: Option<Value>) -> Principal {
        Principal {
            name: name.into(),
            scheme,
            claims: claims.map(|c| Arc::new(c.as_object().unwrap().clone())),
        }
    }

    fn call<'a>(principal: Option<&'a Principal>, op: Op, tenant: &'a str) -> Caller<'a> {
        Caller {
            principal,
            op,
            tenant,
        }
    }

    #[test]
    fn every_field_given_must_match_and_one_rule_suffices() {
        let r = rules(&[
            "principals = [\"alice\", \"svc-*\"]\nmethods = [\"SendMessage\", \"GetTask\"]",
            "schemes = [\"anonymous\"]\nmethods = [\"GetExtendedAgentCard\"]\ntenants = [\"pub\"]",
        ]);
        let alice = principal("alice", Scheme::ApiKey, None);
        let svc = principal("svc-billing", Scheme::Jwt, None);
        let bob = principal("bob", Scheme::ApiKey, None);
        assert_eq!(r.check(&call(Some(&alice), Op::GetTask, "")), Ok(()));
        assert_eq!(r.check(&call(Some(&svc), Op::SendMessage, "x")), Ok(()));
        let denied = r
            .check(&call(Some(&alice), Op::CancelTask, ""))
            .unwrap_err();
        assert_eq!(denied.missing, [Field::Method]);
        let denied = r.check(&call(Some(&bob), Op::GetTask, "")).unwrap_err();
        assert_eq!(denied.missing, [Field::Principal, Field::Method]);
        assert_eq!(
            r.check(&call(None, Op::GetExtendedAgentCard, "pub")),
            Ok(())
        );
        let denied = r
            .check(&call(None, Op::GetExtendedAgentCard, ""))
            .unwrap_err();
        assert_eq!(denied.missing, [Field::Method, Field::Tenant]);
        assert_eq!(r.counts(), (3, 3));
    }

    #[test]
    fn an_anonymous_caller_has_no_name_and_no_claims() {
        let r = rules(&["principals = [\"*\"]", "claims = { scope = \"read\" }"]);
        let anonymous = principal("", Scheme::Anonymous, None);
        for who in [None, Some(&anonymous)] {
            let denied = r.check(&call(who, Op::GetTask, "")).unwrap_err();
            assert_eq!(denied.missing, [Field::Principal, Field::Claims]);
        }
        let anyone = principal("x", Scheme::Mtls, None);
        assert_eq!(r.check(&call(Some(&anyone), Op::GetTask, "")), Ok(()));
    }

    #[test]
    fn claims_match_values_words_and_array_members() {
        let r = rules(&["claims = { scope = \"a2a:write\", admin = \"true\", tier = \"3\" }"]);
        let ok = serde_json::json!({"scope": "a2a:read a2a:write", "admin": true, "tier": 3});
        let listed = serde_json::json!({"scope": ["a2a:write"], "admin": "true", "tier": "3"});
        let short = serde_json::json!({"scope": "a2a:writer", "admin": true, "tier": 3});
        for (claims, allowed) in [(ok, true), (listed, true), (short, false)] {
            let p = principal("p", Scheme::Jwt, Some(claims));
            assert_eq!(r.check(&call(Some(&p), Op::GetTask, "")).is_ok(), allowed);
        }
    }

    #[test]
    fn load_errors_name_the_rule_and_key() {
        let cases = [
            (
                "methods = [\"getTask\"]",
                "allow[1].methods: \"getTask\" is not",
            ),
            ("methods = []", "allow[1].methods: an empty list"),
            (
                "schemes = [\"basic\"]",
                "allow[1].schemes: \"basic\" is not a scheme",
            ),
            (
                "principals = [\"a*b\"]",
                "allow[1].principals: \"a*b\": only a trailing",
            ),
            ("principals = [\"\"]", "allow[1].principals: an empty name"),
            (
                "tenants = [\"*x\"]",
                "allow[1].tenants: \"*x\": only a trailing",
            ),
            ("claims = {}", "allow[1].claims: an empty table"),
        ];
        for (text, expected) in cases {
            let list = [rule("methods = [\"GetTask\"]"), rule(text)];
            let err = Rules::new(&list).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{text}: {err}");
        }
        assert!(Rules::new(&[]).unwrap().is_none());
    }

    #[test]
    fn everyone_is_allowed_a_method_only_by_a_rule_without_who_or_tenant() {
        let r = rules(&["methods = [\"GetTask\"]", "principals = [\"a\"]"]);
        assert!(r.allow_everyone(Op::GetTask));
        assert!(!r.allow_everyone(Op::GetExtendedAgentCard));
        assert!(!rules(&["tenants = [\"*\"]"]).allow_everyone(Op::GetTask));
    }
}

//! The push-notification URL guard (spec 13.2; README "Push notifications"). A call that
//! hands the agent a webhook URL (`FIELDS`) is checked before it reaches the agent: the
//! URL must be `https` (or `http` where the route allows it), and its host, in whatever
//! spelling an address can take, must not lie in a refused range (`guard::RANGES`) or be
//! a refused name (`guard::NAMES`); a name is resolved and every address it has is
//! checked, and a name that does not resolve is refused too. The route's allow-list
//! (`push-allow`: names, `*.suffix` names, addresses, CIDRs) admits what the operator
//! vouches for. A refusal is -32602 naming the field and the reason.
//!
//! Hosts are parsed as WHATWG URLs (the `url` crate), which turns `2130706433`,
//! `0177.0.0.1`, `0x7f.1`, `127.1` and `127.0.0.1.` into `127.0.0.1`. What parsers disagree
//! on (backslashes, whitespace, control characters, userinfo) is refused: the agent must
//! see the host that was checked. The guard cannot stop a name from resolving elsewhere
//! later (DNS rebinding): an agent should check again when it delivers.
//!
//! A route that relays (`PushMode::Relay`, `relay`) gives the agent the gateway's own
//! callback instead, with the client's URL and credentials sealed in the token
//! (`seal`), and hands what the agent posts there to delivery (`outbox`).

pub mod deliver;
mod guard;
pub mod outbox;
pub mod relay;
pub(crate) mod seal;
pub mod sign;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use ipnet::IpNet;
use url::{Host, Url};

use crate::protocol::error::A2aError;
use crate::protocol::ops::{Op, Request, StreamRequest, UnaryRequest};
pub(crate) use guard::{refused_address, refused_name, unwrap_v4};

/// The longest host name DNS can carry (RFC 1035: 253 characters, without the last dot).
pub(crate) const MAX_NAME: usize = 253;

/// How long a push URL's name may take to resolve; no answer by then is a refusal.
pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest scheme a refusal repeats.
const SCHEME_SHOWN: usize = 16;

/// Reads a push URL out of a request, if it carries one.
type UrlOf = fn(&Request) -> Option<&str>;

/// Every request field that carries a push URL: the operation, where its URL is, and the
/// field's path as v1.0 and as v0.3 clients write it.
const FIELDS: [(Op, UrlOf, &str, &str); 3] = [
    (
        Op::CreateTaskPushNotificationConfig,
        created_url,
        "url",
        "pushNotificationConfig.url",
    ),
    (
        Op::SendMessage,
        sent_url,
        "configuration.taskPushNotificationConfig.url",
        "configuration.pushNotificationConfig.url",
    ),
    (
        Op::SendStreamingMessage,
        sent_url,
        "configuration.taskPushNotificationConfig.url",
        "configuration.pushNotificationConfig.url",
    ),
];

/// What a route does with the push configs clients hand the agent (`--push`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PushMode {
    /// Handed to the agent unchecked.
    Pass,
    /// Handed to the agent once the guard admits the URL.
    #[default]
    Guard,
    /// Checked by the guard, then relayed: the agent gets the gateway's callback.
    Relay,
}

/// The push URL `request` hands the agent, if any, with the field that carries it as the
/// client's dialect (`v03`) names it. Checked without awaiting, so the calls that carry no
/// push URL (nearly all) never hold the resolver's future.
pub(crate) fn pushed_url(request: &Request, v03: bool) -> Option<(&str, &'static str)> {
    let op = request.op();
    FIELDS.iter().find_map(|&(row, url_of, path, v03_path)| {
        let url = (row == op).then(|| url_of(request)).flatten()?;
        Some((url, if v03 { v03_path } else { path }))
    })
}

fn created_url(request: &Request) -> Option<&str> {
    match request {
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(config)) => Some(&config.url),
        _ => None,
    }
}

fn sent_url(request: &Request) -> Option<&str> {
    let send = match request {
        Request::Unary(UnaryRequest::SendMessage(send))
        | Request::Stream(StreamRequest::SendStreamingMessage(send)) => send,
        _ => return None,
    };
    let config = send.configuration.as_ref()?;
    config
        .task_push_notification_config
        .as_ref()
        .map(|push| push.url.as_str())
}

/// Why a push URL is refused; the text is the reason a client reads.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("not a URL ({0})")]
    NotUrl(url::ParseError),
    #[error("backslashes, whitespace and control characters are not allowed")]
    Ambiguous,
    #[error("user names and passwords are not allowed in the URL")]
    Userinfo,
    #[error("scheme {0} not allowed")]
    Scheme(String),
    #[error("{reason} {addr}")]
    Address { addr: IpAddr, reason: &'static str },
    #[error("{reason} {name}")]
    Name { name: String, reason: &'static str },
    #[error("host name of {0} characters (at most {MAX_NAME})")]
    LongName(usize),
    #[error("{name} resolves to {reason} {addr}")]
    Resolves {
        name: String,
        addr: IpAddr,
        reason: &'static str,
    },
    #[error("{name} does not resolve ({why})")]
    Unresolved { name: String, why: &'static str },
}

/// A route's push settings, checked: what its allow-list admits and whether `http` is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PushPolicy {
    allow_http: bool,
    names: Vec<String>,
    /// `*.example.com` entries, kept as `.example.com`.
    suffixes: Vec<String>,
    nets: Vec<IpNet>,
}

/// A `push-allow` entry that is neither a name, an address nor a CIDR.
#[derive(Debug, thiserror::Error)]
#[error("--push-allow {entry:?}: {why}")]
pub struct PushAllowError {
    entry: String,
    why: &'static str,
}

impl PushPolicy {
    /// A policy admitting `allow` (names, `*.suffix` names, addresses, CIDRs).
    pub fn new(allow_http: bool, allow: &[String]) -> Result<PushPolicy, PushAllowError> {
        let mut policy = PushPolicy {
            allow_http,
            ..PushPolicy::default()
        };
        for entry in allow {
            let bad = |why| PushAllowError {
                entry: entry.clone(),
                why,
            };
            if let Ok(net) = entry.parse::<IpNet>() {
                policy.nets.push(net.trunc());
                continue;
            }
            if let Ok(ip) = entry.parse::<IpAddr>() {
                policy.nets.push(IpNet::from(ip));
                continue;
            }
            let (wildcard, name) = match entry.strip_prefix("*.") {
                Some(name) => (true, name),
                None => (false, entry.as_str()),
            };
            let name = match Host::parse(name) {
                Ok(Host::Domain(name)) => name.trim_end_matches('.').to_owned(),
                Ok(_) => return Err(bad("an address cannot take `*.`")),
                Err(_) => return Err(bad("not a host name, an address or a CIDR")),
            };
            if name.is_empty() || name.len() > MAX_NAME {
                return Err(bad("a host name has 1 to 253 characters"));
            }
            if wildcard {
                policy.suffixes.push(format!(".{name}"));
            } else {
                policy.names.push(name);
            }
        }
        Ok(policy)
    }

    fn admits_name(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name) || self.suffixes.iter().any(|s| name.ends_with(s))
    }

    fn admits_address(&self, ip: IpAddr) -> bool {
        let inner = unwrap_v4(ip);
        self.nets
            .iter()
            .any(|net| net.contains(&ip) || net.contains(&inner))
    }

    /// The URL's refusal, if it is refused without resolving a name; the name to
    /// resolve, if it needs resolving.
    fn check_static(&self, text: &str) -> Result<Option<String>, Refusal> {
        if text
            .chars()
            .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
        {
            return Err(Refusal::Ambiguous);
        }
        let url = Url::parse(text).map_err(Refusal::NotUrl)?;
        match url.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            other => return Err(Refusal::Scheme(other.chars().take(SCHEME_SHOWN).collect())),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Userinfo);
        }
        let address = |addr: IpAddr| match refused_address(addr) {
            Some(reason) if !self.admits_address(addr) => Err(Refusal::Address { addr, reason }),
            _ => Ok(None),
        };
        match url.host() {
            Some(Host::Ipv4(v4)) => address(v4.into()),
            Some(Host::Ipv6(v6)) => address(v6.into()),
            Some(Host::Domain(name)) => {
                let name = name.trim_end_matches('.');
                if name.len() > MAX_NAME {
                    return Err(Refusal::LongName(name.len()));
                }
                if self.admits_name(name) {
                    return Ok(None);
                }
                if let Some(reason) = refused_name(name) {
                    let name = name.to_owned();
                    return Err(Refusal::Name { name, reason });
                }
                Ok(Some(name.to_owned()))
            }
            // WHATWG gives http(s) URLs a host or fails the parse; kept total all the same.
            None => Err(Refusal::NotUrl(url::ParseError::EmptyHost)),
        }
    }
}

/// One worker's guard: the route's policy and a resolver on the worker's runtime.
pub(crate) struct PushGuard {
    /// Shared by every worker's guard of the route, and by routes of the same policy.
    policy: Arc<PushPolicy>,
    resolver: Arc<TokioResolver>,
}

impl PushGuard {
    /// A guard of `policy` resolving names with `resolver` (the thread's, shared by its
    /// routes).
    pub(crate) fn new(policy: Arc<PushPolicy>, resolver: Arc<TokioResolver>) -> PushGuard {
        PushGuard { policy, resolver }
    }

    /// Checks the push URL `request` hands the agent (`pushed_url`), naming its field as the
    /// client's dialect does (`v03`).
    pub(crate) async fn check_pushed(&self, url: &str, field: &str) -> Result<(), A2aError> {
        self.check(url)
            .await
            .map_err(|refusal| A2aError::invalid_params(field, &refusal.to_string()))
    }

    /// Whether the agent may be given `url` as a push URL.
    pub(crate) async fn check(&self, url: &str) -> Result<(), Refusal> {
        let Some(name) = self.policy.check_static(url)? else {
            return Ok(());
        };
        let unresolved = |why| Refusal::Unresolved {
            name: name.clone(),
            why,
        };
        // Absolute: the gateway's search domains (a cluster's own) are not tried.
        let lookup = self.resolver.lookup_ip(format!("{name}."));
        let addresses = match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
            Err(_) => return Err(unresolved("no answer within 2 s")),
            Ok(Err(e)) if e.is_no_records_found() => return Err(unresolved("no address")),
            Ok(Err(_)) => return Err(unresolved("DNS failed")),
            Ok(Ok(addresses)) => addresses,
        };
        let mut any = false;
        for addr in addresses.iter() {
            any = true;
            if let Some(reason) =
                refused_address(addr).filter(|_| !self.policy.admits_address(addr))
            {
                return Err(Refusal::Resolves { name, addr, reason });
            }
        }
        if any {
            Ok(())
        } else {
            Err(unresolved("no address"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow_http: bool, allow: &[&str]) -> PushPolicy {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        PushPolicy::new(allow_http, &allow).unwrap()
    }

    fn refused(policy: &PushPolicy, url: &str) -> String {
        policy.check_static(url).unwrap_err().to_string()
    }

    #[test]
    fn every_spelling_of_loopback_is_refused() {
        let p = policy(true, &[]);
        for url in [
            "http://127.0.0.1/hook",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://0x7f000001/",
            "http://127.1/",
            "http://127.0.0.1./",
            "http://127.0.0.1:8080/",
            "http://%31%32%37.0.0.1/",
            "http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/",
            "HTTP://127.0.0.1/",
        ] {
            assert_eq!(refused(&p, url), "loopback address 127.0.0.1", "{url}");
        }
        // IPv6 forms are named as written, and checked as the IPv4 address they carry.
        for (url, named) in [
            ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
            ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1"),
            ("http://[::127.0.0.1]/", "::7f00:1"),
            ("http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1"),
        ] {
            assert_eq!(
                refused(&p, url),
                format!("loopback address {named}"),
                "{url}"
            );
        }
        assert_eq!(refused(&p, "http://[::1]/"), "loopback address ::1");
        assert_eq!(refused(&p, "http://0/"), "unspecified address 0.0.0.0");
        assert_eq!(
            refused(&p, "http://0xa9.0xfe.0xa9.0xfe/"),
            "cloud metadata address 169.254.169.254"
        );
    }

    #[test]
    fn names_are_refused_in_any_case_and_with_trailing_dots() {
        let p = policy(false, &[]);
        for (url, reason) in [
            ("https://localhost/", "localhost name localhost"),
            ("https://LOCALHOST./", "localhost name localhost"),
            ("https://app.localhost/", "localhost name app.localhost"),
            (
                "https://metadata.google.internal/computeMetadata/v1/",
                "internal name metadata.google.internal",
            ),
            ("https://Metadata/", "cloud metadata name metadata"),
            ("https://kubernetes/", "single-label name kubernetes"),
        ] {
            assert_eq!(refused(&p, url), reason, "{url}");
        }
    }

    #[test]
    fn schemes_and_ambiguous_urls_are_refused() {
        let strict = policy(false, &[]);
        assert_eq!(
            refused(&strict, "http://hooks.example/"),
            "scheme http not allowed"
        );
        for url in ["ftp://hooks.example/", "file:///etc/passwd", "gopher://x/"] {
            assert!(refused(&strict, url).starts_with("scheme "), "{url}");
        }
        let long = format!("{}://x/", "a".repeat(100));
        assert_eq!(
            refused(&strict, &long),
            format!("scheme {} not allowed", "a".repeat(SCHEME_SHOWN))
        );
        for url in [
            "https://hooks.example\\@127.0.0.1/",
            "https://hooks.example /",
            "https://hooks.example\t/",
        ] {
            assert_eq!(
                refused(&strict, url),
                Refusal::Ambiguous.to_string(),
                "{url}"
            );
        }
        assert_eq!(
            refused(&strict, "https://hooks.example@127.0.0.1/"),
            Refusal::Userinfo.to_string()
        );
        assert!(refused(&strict, "").starts_with("not a URL"));
        assert!(refused(&strict, "hooks.example/a2a").starts_with("not a URL"));
        assert_eq!(
            strict.check_static("https://hooks.example/a2a"),
            Ok(Some("hooks.example".into()))
        );
        assert_eq!(strict.check_static("https://8.8.8.8/a2a"), Ok(None));
    }

    #[test]
    fn a_name_is_at_most_253_characters() {
        let p = policy(false, &[]);
        // Labels of 63: four of them and the dots make 255; trimmed to 253 and 254.
        let label = "a".repeat(63);
        let at = format!("{label}.{label}.{label}.{}", "b".repeat(61));
        assert_eq!(at.len(), MAX_NAME);
        assert_eq!(
            p.check_static(&format!("https://{at}/")),
            Ok(Some(at.clone()))
        );
        let past = format!("c{at}");
        assert_eq!(
            refused(&p, &format!("https://{past}/")),
            "host name of 254 characters (at most 253)"
        );
    }

    #[test]
    fn the_allow_list_admits_names_suffixes_addresses_and_cidrs() {
        let p = policy(
            true,
            &[
                "127.0.0.1",
                "10.1.0.0/16",
                "hooks.internal",
                "*.corp.example",
                "::1",
            ],
        );
        for url in [
            "http://127.0.0.1:9/hook",
            "http://[::ffff:127.0.0.1]/",
            "http://2130706433/",
            "http://10.1.200.3/",
            "https://hooks.internal/",
            "https://HOOKS.internal./",
            "https://a.b.corp.example/",
            "http://[::1]/",
        ] {
            assert_eq!(p.check_static(url), Ok(None), "{url}");
        }
        for (url, reason) in [
            ("http://127.0.0.2/", "loopback address 127.0.0.2"),
            ("http://10.2.0.1/", "private address 10.2.0.1"),
            ("https://other.internal/", "internal name other.internal"),
        ] {
            assert_eq!(refused(&p, url), reason, "{url}");
        }
        // `*.corp.example` is what is under it, not the name itself (resolved instead).
        assert_eq!(
            p.check_static("https://corp.example/"),
            Ok(Some("corp.example".into()))
        );
    }

    #[test]
    fn bad_allow_entries_are_named() {
        for entry in ["*.10.0.0.1", "a b", "10.0.0.0/33", ""] {
            let err = PushPolicy::new(false, &[entry.to_owned()]).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("--push-allow {entry:?}: ")),
                "{err}"
            );
        }
    }

    #[test]
    fn every_field_row_finds_its_url() {
        use crate::protocol::legacy::Method;
        let cases = [
            (
                Op::CreateTaskPushNotificationConfig,
                r#"{"taskId":"t","url":"U"}"#,
            ),
            (
                Op::SendMessage,
                r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"taskPushNotificationConfig":{"url":"U"}}}"#,
            ),
            (
                Op::SendStreamingMessage,
                r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"taskPushNotificationConfig":{"url":"U"}}}"#,
            ),
        ];
        for ((op, url_of, _, _), (case, text)) in FIELDS.iter().zip(cases) {
            assert_eq!(*op, case);
            let request = Request::decode(case, Some(text)).unwrap();
            assert_eq!(url_of(&request), Some("U"), "{op:?}");
        }
        // The v0.3 forms decode into the same fields.
        let set = Method::from_name("tasks/pushNotificationConfig/set").unwrap();
        let request = set
            .decode(Some(
                r#"{"taskId":"t","pushNotificationConfig":{"url":"U"}}"#,
            ))
            .unwrap();
        assert_eq!(created_url(&request), Some("U"));
        let send = Method::from_name("message/send").unwrap();
        let text = r#"{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]},"configuration":{"pushNotificationConfig":{"url":"U"}}}"#;
        assert_eq!(sent_url(&send.decode(Some(text)).unwrap()), Some("U"));
        // Without a push config there is nothing to check.
        let plain = r#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}"#;
        assert_eq!(
            sent_url(&Request::decode(Op::SendMessage, Some(plain)).unwrap()),
            None
        );
    }
}

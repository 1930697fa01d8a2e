//! The card as a route serves it. A source card is checked (`check`), then edited once for
//! what does not depend on the request (`prepare`: interfaces taken apart, tenant rule,
//! legacy members, skills, signatures), then rendered for one origin (`render`: the
//! gateway's interfaces first, one per front the route enables in its configured order,
//! then the gateway's signature). The origin comes from the route's public URL or from the
//! request (`interface_origin`, through `origin`).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use http::request::Parts;
use http::HeaderValue;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::origin::{self, Origin, Refusal};
use super::security::Security;
use super::{CardConfigError, CardSettings, RouteCard, SignaturePolicy};
use crate::proto::AgentCard;
use crate::protocol::binding::{Binding, JSONRPC};
use crate::protocol::{legacy, params};
use crate::signing::{CardSigner, SignError};

/// The protocol version the gateway's interface speaks.
const PROTOCOL_VERSION: &str = "1.0";
/// v0.3 card members naming the agent's own address.
const LEGACY_ADDRESS_MEMBERS: [&str; 3] = ["url", "preferredTransport", "additionalInterfaces"];

/// What becomes of a card's signatures, with what it needs.
pub(super) enum Treatment {
    Strip,
    /// Boxed: a key pair is large, and the treatment lives as long as the route.
    Resign(Box<CardSigner>),
    Preserve,
}

impl Treatment {
    /// The treatment of `settings`, with its settings checked.
    pub(super) fn from_settings(settings: &CardSettings) -> Result<Treatment, CardConfigError> {
        let policy = settings.signatures.unwrap_or_default();
        if policy != SignaturePolicy::Resign {
            let unused = [
                ("sign-key", settings.sign_key.is_some()),
                ("sign-kid", settings.sign_kid.is_some()),
                ("sign-jku", settings.sign_jku.is_some()),
            ];
            if let Some((key, _)) = unused.into_iter().find(|(_, set)| *set) {
                return Err(CardConfigError::new(
                    key,
                    "only used with signatures = \"resign\"",
                ));
            }
        }
        match policy {
            SignaturePolicy::Strip => Ok(Treatment::Strip),
            SignaturePolicy::Preserve => {
                if settings.skills.is_some() {
                    return Err(CardConfigError::new(
                        "skills",
                        "cannot filter a card served unchanged (signatures = \"preserve\")",
                    ));
                }
                if settings.keep_interfaces {
                    return Err(CardConfigError::new(
                        "keep-interfaces",
                        "has no effect on a card served unchanged (signatures = \"preserve\")",
                    ));
                }
                Ok(Treatment::Preserve)
            }
            SignaturePolicy::Resign => Ok(Treatment::Resign(Box::new(signer(settings)?))),
        }
    }
}

/// The gateway's signing key of `settings` (`resign`), read and checked.
fn signer(settings: &CardSettings) -> Result<CardSigner, CardConfigError> {
    let Some(path) = &settings.sign_key else {
        return Err(CardConfigError::new(
            "sign-key",
            "required with signatures = \"resign\"",
        ));
    };
    let Some(kid) = &settings.sign_kid else {
        return Err(CardConfigError::new(
            "sign-kid",
            "required with signatures = \"resign\" (the key id clients look the key up by)",
        ));
    };
    if let Some(jku) = &settings.sign_jku {
        let url = reqwest::Url::parse(jku)
            .map_err(|e| CardConfigError::new("sign-jku", format!("{jku:?}: {e}")))?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(CardConfigError::new(
                "sign-jku",
                format!("{jku:?}: expected an https:// URL"),
            ));
        }
    }
    crate::watched::note(path);
    let pem = std::fs::read(path)
        .map_err(|e| CardConfigError::new("sign-key", format!("{}: {e}", path.display())))?;
    CardSigner::from_pem(&pem, kid, settings.sign_jku.as_deref()).map_err(|e| match e {
        SignError::EmptyKid => CardConfigError::new("sign-kid", e.to_string()),
        e => CardConfigError::new("sign-key", format!("{}: {e}", path.display())),
    })
}

/// The route's rewriting rules.
pub(super) struct Rewriter {
    route: String,
    jsonrpc_path: String,
    /// The route's fronts in the card's order, each with its public path (gRPC: none).
    fronts: Vec<(Binding, Option<String>)>,
    /// The public origin: configured, or from the request.
    origins: origin::Origins,
    fixed_tenant: bool,
    binding: &'static str,
    /// The gRPC front's own listener's port (`RouteCard::grpc_port`).
    grpc_port: Option<u16>,
    keep_interfaces: bool,
    skills: Option<Vec<String>>,
    treatment: Treatment,
    /// What the card says about authentication on a route that authenticates.
    security: Option<Security>,
    logged: Logged,
    legacy: bool,
}

/// Which card a request is served: v1.0, or for v0.3 clients (`legacy`) the dual-format
/// card (no `A2A-Version`) or the v0.3 card (`A2A-Version: 0.3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CardForm {
    V1_0,
    Dual,
    V0_3,
}

/// Corrections already logged: each once per route, not at every refresh.
#[derive(Default)]
struct Logged {
    signatures: AtomicBool,
    schema_only: AtomicBool,
    legacy: AtomicBool,
    skills: AtomicBool,
    mtls: AtomicBool,
}

/// True the first time for `flag`.
pub(super) fn first(flag: &AtomicBool) -> bool {
    !flag.swap(true, Relaxed)
}

/// A checked source card after the edits that do not depend on the request.
pub(super) struct Prepared {
    /// The card without `supportedInterfaces` (unless served unchanged).
    card: Map<String, Value>,
    /// The tenant clients must send through the gateway, if any.
    tenant: Option<String>,
    /// The agent's interfaces listed after the gateway's (`keep-interfaces`).
    agent_interfaces: Vec<Value>,
}

impl Rewriter {
    pub(super) fn new(
        settings: &CardSettings,
        route: &RouteCard,
        treatment: Treatment,
    ) -> Result<Rewriter, CardConfigError> {
        let origins = origin::Origins::new(&origin::OriginSettings {
            public_url: route.public_url.as_deref(),
            trust_forwarded: route.trust_forwarded,
            trusted_proxy_hops: route.trusted_proxy_hops,
            allowed_hosts: &route.allowed_hosts,
            tls: route.tls,
            route_host: route.host.as_deref(),
        })?;
        if !route.jsonrpc_path.starts_with('/') {
            return Err(CardConfigError::new(
                "jsonrpc-path",
                format!("must start with '/': {:?}", route.jsonrpc_path),
            ));
        }
        if matches!(treatment, Treatment::Preserve) && origins.public_url().is_none() {
            return Err(CardConfigError::new(
                "signatures",
                "\"preserve\" needs the route's public URL, which the unchanged card must name",
            ));
        }
        // A signature says "this card is the operator's": its URL must never be one a
        // client named.
        if matches!(treatment, Treatment::Resign(_)) && !origins.all_vouched() {
            return Err(CardConfigError::new(
                "signatures",
                "\"resign\" (--card-sign-key) needs public-url or allowed-hosts, so that the \
                 signed interface URL never comes from the request",
            ));
        }
        let preserve = matches!(treatment, Treatment::Preserve);
        let security = Security::new(settings.security, &route.enforced, preserve, &route.route)?;
        Ok(Rewriter {
            route: route.route.clone(),
            jsonrpc_path: route.jsonrpc_path.clone(),
            fronts: (route.fronts.iter())
                .map(|front| match front {
                    Binding::JsonRpc => (*front, Some(route.jsonrpc_path.clone())),
                    Binding::HttpJson => (*front, Some(route.rest_path.clone())),
                    Binding::Grpc => (*front, None),
                })
                .collect(),
            origins,
            fixed_tenant: route.fixed_tenant.is_some(),
            binding: route.binding.name(),
            grpc_port: route.grpc_port,
            keep_interfaces: settings.keep_interfaces,
            skills: settings.skills.clone(),
            treatment,
            security,
            logged: Logged::default(),
            legacy: route.legacy,
        })
    }

    /// The request headers the served card depends on (`Vary`), none with a public URL.
    pub(super) fn vary(&self) -> Option<HeaderValue> {
        let origin = match (
            self.origins.request_dependent(),
            self.origins.trusts_forwarded(),
        ) {
            (false, _) => None,
            (true, false) => Some("host"),
            (true, true) => Some("host, forwarded, x-forwarded-host, x-forwarded-proto"),
        };
        match (origin, self.legacy) {
            (None, false) => None,
            (Some(origin), false) => Some(HeaderValue::from_static(origin)),
            (None, true) => Some(HeaderValue::from_static(params::VERSION)),
            (Some(origin), true) => {
                HeaderValue::from_str(&format!("{origin}, {}", params::VERSION)).ok()
            }
        }
    }

    /// The card form `request` is served.
    pub(super) fn form(&self, request: &Parts) -> CardForm {
        if !self.legacy || !params::legacy_requested(&request.headers, request.uri.query()) {
            return CardForm::V1_0;
        }
        let named = request
            .headers
            .get(params::VERSION)
            .is_some_and(|v| !v.as_bytes().trim_ascii().is_empty());
        if named {
            CardForm::V0_3
        } else {
            CardForm::Dual
        }
    }

    /// `render` in `form`: the v0.3 members come from the same rendered card, with the
    /// gateway's JSON-RPC endpoint at `origin` as the v0.3 `url`.
    pub(super) fn render_form(&self, prepared: &Prepared, origin: &str, form: CardForm) -> Value {
        let card = self.render(prepared, origin);
        let url = &format!("{origin}{}", self.jsonrpc_path);
        match form {
            CardForm::V1_0 => card,
            CardForm::Dual => legacy::dual_card(card, url),
            CardForm::V0_3 => legacy::card(card.clone(), Some(url)).unwrap_or(card),
        }
    }

    /// Checks a source card: an `AgentCard` in ProtoJSON with a name, and with `preserve`
    /// one that names this gateway. Returns its members.
    pub(super) fn check(&self, card: Value) -> Result<Map<String, Value>, String> {
        let typed = AgentCard::deserialize(&card).map_err(|e| format!("not an AgentCard: {e}"))?;
        if typed.name.is_empty() {
            return Err("not an AgentCard: no name".to_owned());
        }
        let Value::Object(card) = card else {
            return Err("not an AgentCard: not a JSON object".to_owned());
        };
        if let (Treatment::Preserve, Some(base)) = (&self.treatment, self.origins.public_url()) {
            let url = format!("{base}{}", self.jsonrpc_path);
            let names_gateway = interfaces(&card)
                .iter()
                .any(|i| i["url"] == url.as_str() && i["protocolBinding"] == JSONRPC);
            if !names_gateway {
                return Err(format!(
                    "its interfaces do not name this gateway ({JSONRPC} at {url}); \
                     signatures = \"preserve\" serves it unchanged"
                ));
            }
        }
        Ok(card)
    }

    /// The URL of the gateway's interface for `request`: the public URL, or the origin the
    /// request names (see `origin`), plus the JSON-RPC path; vouched for or not as the
    /// origin is.
    pub(super) fn interface_url(&self, request: &Parts) -> Result<Origin, Refusal> {
        Ok(match self.origins.origin(request)? {
            Origin::Vouched(origin) => Origin::Vouched(origin + &self.jsonrpc_path),
            Origin::Named(origin) => Origin::Named(origin + &self.jsonrpc_path),
        })
    }

    /// The origin the gateway's interfaces are at for `request`: the public URL, or the
    /// origin the request names (see `origin`); vouched for or not as the origin is.
    pub(super) fn interface_origin(&self, request: &Parts) -> Result<Origin, Refusal> {
        self.origins.origin(request)
    }

    /// The origin the route is public at for `request` (see `origin`).
    pub(super) fn origin(&self, request: &Parts) -> Option<String> {
        let origin = self.origins.origin(request).ok()?;
        Some(origin.as_str().to_owned())
    }

    /// How the route finds its public origin.
    pub(super) fn origins(&self) -> &origin::Origins {
        &self.origins
    }

    /// The JSON-RPC path: a relative reference to the gateway's interface.
    pub(super) fn jsonrpc_path(&self) -> &str {
        &self.jsonrpc_path
    }

    /// The edits that do not depend on the request; none with `preserve`.
    pub(super) fn prepare(&self, mut card: Map<String, Value>) -> Prepared {
        if matches!(self.treatment, Treatment::Preserve) {
            return Prepared {
                card,
                tenant: None,
                agent_interfaces: Vec::new(),
            };
        }
        let interfaces = match card.remove("supportedInterfaces") {
            Some(Value::Array(interfaces)) => interfaces,
            _ => Vec::new(),
        };
        // Spec 8.3.2: clients send exactly the tenant of the interface they use; the gateway
        // passes it on, so its interface carries the agent's tenant for the route's binding
        // unless the route injects a tenant of its own.
        let tenant = match self.fixed_tenant {
            true => None,
            false => interfaces
                .iter()
                .find(|i| i["protocolBinding"] == self.binding)
                .and_then(|i| i["tenant"].as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
        };
        let agent_interfaces = match self.keep_interfaces {
            true => interfaces,
            false => {
                self.drop_legacy_addresses(&mut card);
                Vec::new()
            }
        };
        self.filter_skills(&mut card);
        self.drop_signatures(&mut card);
        self.warn_mtls(&card);
        if let Some(security) = &self.security {
            security.apply(&mut card);
        }
        Prepared {
            card,
            tenant,
            agent_interfaces,
        }
    }

    /// The gateway's interfaces at `origin` (empty: unknown, the URLs are then relative
    /// references, and the gRPC front, which has no path, is left out): one per front in
    /// the route's order, as the card lists them and the catalog links them.
    pub(super) fn front_urls(&self, origin: &str) -> Vec<(Binding, String)> {
        (self.fronts.iter())
            .filter_map(|(binding, path)| match path {
                Some(path) => Some((*binding, format!("{origin}{path}"))),
                None => grpc_url(origin, self.grpc_port).map(|url| (*binding, url)),
            })
            .collect()
    }

    /// The card served at `origin` (empty: unknown, the URLs are then relative
    /// references): the gateway's interfaces first, one per front in the route's order,
    /// then the kept ones.
    pub(super) fn render(&self, prepared: &Prepared, origin: &str) -> Value {
        let mut card = prepared.card.clone();
        if matches!(self.treatment, Treatment::Preserve) {
            return Value::Object(card);
        }
        let fronts = self.front_urls(origin);
        let mut interfaces: Vec<Value> = (fronts.iter())
            .map(|(binding, url)| {
                let mut gateway = json!({
                    "url": url,
                    "protocolBinding": binding.name(),
                    "protocolVersion": PROTOCOL_VERSION,
                });
                // Every front passes the tenant on alike.
                if let Some(tenant) = &prepared.tenant {
                    gateway["tenant"] = Value::from(tenant.as_str());
                }
                gateway
            })
            .collect();
        interfaces.extend(
            (prepared.agent_interfaces.iter())
                .filter(|i| {
                    !(fronts.iter()).any(|(b, url)| {
                        i["url"] == url.as_str() && i["protocolBinding"] == b.name()
                    })
                })
                .cloned(),
        );
        card.insert("supportedInterfaces".to_owned(), Value::Array(interfaces));
        let mut card = Value::Object(card);
        if let Treatment::Resign(signer) = &self.treatment {
            card = self.schema_only(card);
            card["signatures"] = json!([signer.sign(&card)]);
        }
        card
    }

    /// A card to re-sign holds only what its verifiers reconstruct: they read it as an
    /// `AgentCard` (the reference SDK ignores unknown members and drops empty values before
    /// canonicalising), so a member outside the schema would make the signature fail for
    /// them. The card was checked against the schema, so the round trip cannot fail.
    fn schema_only(&self, card: Value) -> Value {
        let typed =
            serde_json::from_value::<AgentCard>(card.clone()).and_then(serde_json::to_value);
        match typed {
            Ok(typed) => {
                if typed != card && first(&self.logged.schema_only) {
                    tracing::info!(route = %self.route,
                        "agent card: members outside the AgentCard schema (or empty values) dropped from the re-signed card, so verifiers that read it as an AgentCard reconstruct what was signed");
                }
                typed
            }
            Err(_) => card,
        }
    }

    fn drop_legacy_addresses(&self, card: &mut Map<String, Value>) {
        let mut dropped = LEGACY_ADDRESS_MEMBERS
            .iter()
            .filter(|name| card.remove(**name).is_some())
            .peekable();
        if dropped.peek().is_some() && first(&self.logged.legacy) {
            let dropped: Vec<_> = dropped.collect();
            tracing::info!(route = %self.route, members = ?dropped,
                "agent card: v0.3 members naming the agent's address removed (keep-interfaces keeps them)");
        }
    }

    fn filter_skills(&self, card: &mut Map<String, Value>) {
        let (Some(keep), Some(Value::Array(skills))) = (&self.skills, card.get_mut("skills"))
        else {
            return;
        };
        let mut removed = Vec::new();
        skills.retain(|skill| {
            let id = skill["id"].as_str().unwrap_or_default();
            let kept = keep.iter().any(|k| k == id);
            if !kept {
                removed.push(id.to_owned());
            }
            kept
        });
        if !removed.is_empty() && first(&self.logged.skills) {
            tracing::info!(route = %self.route, skills = ?removed,
                "agent card: skills not in card.skills are not advertised");
        }
    }

    fn drop_signatures(&self, card: &mut Map<String, Value>) {
        let had = card
            .remove("signatures")
            .is_some_and(|s| s.as_array().is_some_and(|a| !a.is_empty()));
        if had && first(&self.logged.signatures) {
            let why = "the rewritten card would not verify against them";
            match self.treatment {
                Treatment::Resign(_) => tracing::info!(route = %self.route,
                    "agent card: the agent's signatures are replaced by the gateway's: {why}"),
                Treatment::Strip | Treatment::Preserve => tracing::info!(route = %self.route,
                    "agent card: the agent's signatures are removed: {why}"),
            }
        }
    }

    fn warn_mtls(&self, card: &Map<String, Value>) {
        let mtls = card
            .get("securitySchemes")
            .and_then(Value::as_object)
            .is_some_and(|schemes| {
                schemes
                    .values()
                    .any(|s| s.get("mtlsSecurityScheme").is_some())
            });
        if mtls && first(&self.logged.mtls) {
            tracing::warn!(route = %self.route,
                "agent card: it declares mutual TLS, which ends at the gateway; the agent will not see client certificates");
        }
    }
}

/// The URL of the gRPC front of a route public at `origin` (`scheme://host[:port][/path]`):
/// `host:port`, the form the A2A schema gives a gRPC interface's address and a gRPC client
/// dials as its target (the JS SDK hands it to grpc-js as it stands, which cannot resolve a
/// `scheme://` one); the port is the origin's (its scheme's default when it names none), or
/// `port` (the gRPC front's own listener). `None` when the origin is unknown (empty) or no
/// URL.
pub(crate) fn grpc_url(origin: &str, port: Option<u16>) -> Option<String> {
    let url = url::Url::parse(origin).ok()?;
    let port = port.or(url.port_or_known_default())?;
    Some(format!("{}:{port}", url.host_str()?))
}

/// The agent's interfaces of a card.
fn interfaces(card: &Map<String, Value>) -> &[Value] {
    card.get("supportedInterfaces")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::binding::Binding;

    fn route(public_url: Option<&str>, trust_forwarded: bool, fixed_tenant: bool) -> RouteCard {
        RouteCard {
            route: "billing".to_owned(),
            jsonrpc_path: "/agents/billing/a2a/jsonrpc".to_owned(),
            card_path: "/.well-known/agent-card.json".to_owned(),
            public_url: public_url.map(str::to_owned),
            trust_forwarded,
            trusted_proxy_hops: 1,
            allowed_hosts: Vec::new(),
            tls: false,
            host: None,
            fixed_tenant: fixed_tenant.then(|| "acme".to_owned()),
            binding: Binding::Grpc,
            legacy: false,
            enforced: Default::default(),
            fronts: vec![Binding::JsonRpc],
            rest_path: "/a2a/rest".to_owned(),
            grpc_port: None,
        }
    }

    fn rewriter(settings: &CardSettings, route: &RouteCard) -> Rewriter {
        let treatment = Treatment::from_settings(settings).unwrap();
        Rewriter::new(settings, route, treatment).unwrap()
    }

    fn card() -> Value {
        json!({
            "name": "Billing",
            "description": "Bills",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": "billing.internal:50051", "protocolBinding": "GRPC",
                 "protocolVersion": "1.0", "tenant": "t-7"},
                {"url": "http://billing.internal/a2a", "protocolBinding": "HTTP+JSON",
                 "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": true, "futureCapability": 3},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {"id": "pay", "name": "Pay", "description": "d", "tags": []},
                {"id": "refund", "name": "Refund", "description": "d", "tags": []}
            ],
            "signatures": [{"protected": "e30", "signature": "c2ln"}],
            "url": "http://billing.internal/v03",
            "preferredTransport": "GRPC",
            "x-vendor": {"kept": true}
        })
    }

    fn request(headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::get("/agents/billing/.well-known/agent-card.json");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let builder = builder.extension(crate::telemetry::ConnectionAddrs::example());
        builder.body(()).unwrap().into_parts().0
    }

    fn served(rewriter: &Rewriter, request: &Parts) -> Value {
        let card = rewriter.check(card()).unwrap();
        let origin = rewriter.interface_origin(request).unwrap();
        rewriter.render(&rewriter.prepare(card), origin.as_str())
    }

    /// One interface per front, in the route's order, each with the agent's tenant; gRPC as
    /// the origin's host and port; an agent interface naming one of them once.
    #[test]
    fn every_front_is_listed_in_the_configured_order() {
        let mut route = route(Some("https://gw.example/x"), false, false);
        route.fronts = vec![Binding::HttpJson, Binding::Grpc, Binding::JsonRpc];
        route.rest_path = "/agents/billing/a2a/rest".to_owned();
        let settings = CardSettings {
            keep_interfaces: true,
            ..CardSettings::default()
        };
        let rewriter = rewriter(&settings, &route);
        let mut source = card();
        source["supportedInterfaces"][1]["url"] =
            json!("https://gw.example/x/agents/billing/a2a/rest");
        let checked = rewriter.check(source).unwrap();
        let listing = rewriter.render(&rewriter.prepare(checked), "https://gw.example/x");
        let listed: Vec<(&str, &str)> = (listing["supportedInterfaces"].as_array().unwrap().iter())
            .map(|i| {
                (
                    i["protocolBinding"].as_str().unwrap(),
                    i["url"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("HTTP+JSON", "https://gw.example/x/agents/billing/a2a/rest"),
                ("GRPC", "gw.example:443"),
                ("JSONRPC", "https://gw.example/x/agents/billing/a2a/jsonrpc"),
                ("GRPC", "billing.internal:50051"),
            ]
        );
        assert!(
            (listing["supportedInterfaces"].as_array().unwrap()[..3].iter())
                .all(|i| i["tenant"] == "t-7" && i["protocolVersion"] == "1.0")
        );
        // Without a known origin the URLs are relative references, and gRPC, which has
        // no path, is left out.
        let checked = rewriter.check(card()).unwrap();
        let card = rewriter.render(&rewriter.prepare(checked), "");
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            "/agents/billing/a2a/rest"
        );
        assert_eq!(
            card["supportedInterfaces"][1]["url"],
            "/agents/billing/a2a/jsonrpc"
        );
    }

    #[test]
    fn grpc_urls_are_host_and_port() {
        assert_eq!(
            grpc_url("https://gw.example/base", None).as_deref(),
            Some("gw.example:443")
        );
        assert_eq!(
            grpc_url("http://gw.example:8080", None).as_deref(),
            Some("gw.example:8080")
        );
        assert_eq!(
            grpc_url("https://gw.example/base", Some(50051)).as_deref(),
            Some("gw.example:50051")
        );
        assert_eq!(
            grpc_url("http://[::1]:8080", None).as_deref(),
            Some("[::1]:8080")
        );
        assert_eq!(grpc_url("", None), None);
        assert_eq!(grpc_url("/relative", Some(1)), None);
    }

    #[test]
    fn gateway_interface_first_with_the_agents_tenant() {
        let rewriter = rewriter(
            &CardSettings::default(),
            &route(Some("https://gw.example/x/"), false, false),
        );
        let card = served(&rewriter, &request(&[("host", "ignored.example")]));
        assert_eq!(
            card["supportedInterfaces"],
            json!([{"url": "https://gw.example/x/agents/billing/a2a/jsonrpc",
                    "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t-7"}])
        );
        // Everything else survives, unknown members included; v0.3 addresses and
        // signatures do not.
        assert_eq!(
            card["capabilities"],
            json!({"streaming": true, "futureCapability": 3})
        );
        assert_eq!(card["x-vendor"], json!({"kept": true}));
        assert_eq!(card["skills"].as_array().unwrap().len(), 2);
        for gone in ["signatures", "url", "preferredTransport"] {
            assert!(card.get(gone).is_none(), "{gone}");
        }
    }

    #[test]
    fn a_grpc_listener_puts_its_port_in_the_grpc_interface() {
        let mut route = route(Some("https://gw.example/x/"), false, false);
        route.fronts = vec![Binding::JsonRpc, Binding::Grpc];
        route.grpc_port = Some(50051);
        let rewriter = rewriter(&CardSettings::default(), &route);
        let card = served(&rewriter, &request(&[]));
        assert_eq!(
            card["supportedInterfaces"],
            json!([{"url": "https://gw.example/x/agents/billing/a2a/jsonrpc",
                    "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t-7"},
                   {"url": "gw.example:50051",
                    "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "t-7"}])
        );
    }

    #[test]
    fn a_fixed_tenant_leaves_the_interface_without_one() {
        let rewriter = rewriter(
            &CardSettings::default(),
            &route(Some("https://gw.example"), false, true),
        );
        let card = served(&rewriter, &request(&[]));
        assert!(card["supportedInterfaces"][0].get("tenant").is_none());
    }

    #[test]
    fn the_tenant_comes_from_the_interface_of_the_routes_binding() {
        let mut route = route(Some("https://gw.example"), false, false);
        route.binding = Binding::HttpJson;
        let card = served(&rewriter(&CardSettings::default(), &route), &request(&[]));
        assert!(card["supportedInterfaces"][0].get("tenant").is_none());
    }

    #[test]
    fn keep_interfaces_appends_the_agents_and_keeps_v03_members() {
        let settings = CardSettings {
            keep_interfaces: true,
            ..Default::default()
        };
        let rewriter = rewriter(&settings, &route(Some("https://gw.example"), false, false));
        let card = served(&rewriter, &request(&[]));
        let interfaces = card["supportedInterfaces"].as_array().unwrap();
        assert_eq!(interfaces.len(), 3);
        assert_eq!(interfaces[0]["protocolBinding"], "JSONRPC");
        assert_eq!(interfaces[1]["url"], "billing.internal:50051");
        assert_eq!(card["preferredTransport"], "GRPC");
    }

    #[test]
    fn skills_filter() {
        let settings = CardSettings {
            skills: Some(vec!["refund".to_owned(), "absent".to_owned()]),
            ..Default::default()
        };
        let rewriter = rewriter(&settings, &route(Some("https://gw.example"), false, false));
        let card = served(&rewriter, &request(&[]));
        assert_eq!(
            card["skills"],
            json!([{"id": "refund", "name": "Refund", "description": "d", "tags": []}])
        );
    }

    #[test]
    fn without_public_url_the_local_address_is_named() {
        let rewriter = rewriter(&CardSettings::default(), &route(None, false, false));
        let url = |headers: &[(&str, &str)]| {
            let url = rewriter.interface_url(&request(headers)).ok();
            url.map(|u| u.as_str().to_owned())
        };
        // The Host is the client's text: the card names the address the client reached.
        let local = "http://10.1.2.3:8080/agents/billing/a2a/jsonrpc";
        for host in [
            "GW.example:8080",
            "evil.example",
            "evil.example.",
            "[::1]:8080",
        ] {
            assert_eq!(url(&[("host", host)]).as_deref(), Some(local), "{host:?}");
        }
        // Forwarded headers are not trusted here.
        let forwarded = [
            ("host", "gw.example"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.example"),
            ("forwarded", "proto=https;host=evil.example"),
        ];
        assert_eq!(url(&forwarded).as_deref(), Some(local));
        for bad in [
            "user@evil.example",
            "evil.example/path",
            "a b",
            "evil.example:port",
            "evil.example:99999",
            "",
            "\"x\"",
        ] {
            assert_eq!(url(&[("host", bad)]), None, "{bad:?}");
        }
        assert_eq!(url(&[]), None);
    }

    /// The rows of every header form are `origin`'s; here, that the interface URL follows.
    #[test]
    fn trusted_forwarded_headers() {
        let rewriter = rewriter(&CardSettings::default(), &route(None, true, false));
        let url = |headers: &[(&str, &str)]| rewriter.interface_url(&request(headers)).unwrap();
        let path = "/agents/billing/a2a/jsonrpc";
        // The client's forged first element is ignored: the proxy's last one counts.
        let forwarded =
            "proto=https;host=\"evil.example\", for=192.0.2.1;proto=https;host=gw.example";
        assert_eq!(
            url(&[("host", "internal:8080"), ("forwarded", forwarded)]),
            Origin::Named(format!("https://gw.example{path}"))
        );
        assert_eq!(
            url(&[
                ("host", "internal:8080"),
                ("x-forwarded-host", "gw.example/x")
            ]),
            Origin::Named(format!("http://10.1.2.3:8080{path}"))
        );
    }

    #[test]
    fn preserve_serves_the_card_unchanged_if_it_names_the_gateway() {
        let settings = CardSettings {
            signatures: Some(SignaturePolicy::Preserve),
            ..Default::default()
        };
        let rewriter = rewriter(&settings, &route(Some("https://gw.example"), false, false));
        let err = rewriter.check(card()).unwrap_err();
        assert!(
            err.contains("https://gw.example/agents/billing/a2a/jsonrpc"),
            "{err}"
        );
        let mut named = card();
        named["supportedInterfaces"][1] = json!({"url": "https://gw.example/agents/billing/a2a/jsonrpc",
            "protocolBinding": "JSONRPC", "protocolVersion": "1.0"});
        let checked = rewriter.check(named.clone()).unwrap();
        let served = rewriter.render(&rewriter.prepare(checked), "https://other.example");
        assert_eq!(served, named);
    }

    /// A fresh P-256 key as PKCS#8 PEM, and its public key.
    fn p256_key(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let path = dir.join("card-key.pem");
        std::fs::write(&path, key.serialize_pem()).unwrap();
        (path, key.public_key_raw().to_vec())
    }

    #[test]
    fn resign_signs_the_rewritten_card() {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let dir = std::env::temp_dir().join(format!("a2a-card-resign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (key, public) = p256_key(&dir);
        let settings = CardSettings {
            signatures: Some(SignaturePolicy::Resign),
            sign_key: Some(key),
            sign_kid: Some("gw-1".to_owned()),
            sign_jku: Some("https://gw.example/jwks.json".to_owned()),
            ..Default::default()
        };
        let rewriter = rewriter(&settings, &route(Some("https://gw.example"), false, false));
        std::fs::remove_dir_all(&dir).ok();
        let mut card = served(&rewriter, &request(&[]));
        let signatures = card["signatures"].as_array().unwrap().clone();
        assert_eq!(signatures.len(), 1, "the agent's signature is replaced");
        let protected = signatures[0]["protected"].as_str().unwrap();
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(protected).unwrap()).unwrap();
        assert_eq!(
            header,
            json!({"alg": "ES256", "typ": "JOSE", "kid": "gw-1", "jku": "https://gw.example/jwks.json"})
        );
        let signature = URL_SAFE_NO_PAD
            .decode(signatures[0]["signature"].as_str().unwrap())
            .unwrap();
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            public,
        );
        let verify = |card: &Value| {
            let payload = URL_SAFE_NO_PAD.encode(crate::signing::signing_payload(card));
            public.verify(format!("{protected}.{payload}").as_bytes(), &signature)
        };
        assert!(
            verify(&card).is_ok(),
            "the signature covers the served card"
        );
        card["supportedInterfaces"][0]["url"] = json!("https://evil.example/a2a");
        assert!(verify(&card).is_err());
    }

    #[test]
    fn settings_that_contradict_each_other() {
        let error = |settings: CardSettings, route: RouteCard| {
            Treatment::from_settings(&settings)
                .and_then(|t| Rewriter::new(&settings, &route, t))
                .err()
                .unwrap()
                .to_string()
        };
        let preserve = || CardSettings {
            signatures: Some(SignaturePolicy::Preserve),
            ..Default::default()
        };
        let with_url = || route(Some("https://gw.example"), false, false);
        assert!(error(preserve(), route(None, false, false)).starts_with("card.signatures:"));
        let skills = CardSettings {
            skills: Some(vec![]),
            ..preserve()
        };
        assert!(error(skills, with_url()).starts_with("card.skills:"));
        let keep = CardSettings {
            keep_interfaces: true,
            ..preserve()
        };
        assert!(error(keep, with_url()).starts_with("card.keep-interfaces:"));
        let key = CardSettings {
            sign_key: Some("k.pem".into()),
            ..Default::default()
        };
        assert!(error(key, with_url()).starts_with("card.sign-key:"));
        let resign = || CardSettings {
            signatures: Some(SignaturePolicy::Resign),
            sign_key: Some("/nonexistent/key.pem".into()),
            sign_kid: Some("k".to_owned()),
            ..Default::default()
        };
        let e = error(resign(), with_url());
        assert!(
            e.starts_with("card.sign-key:") && e.contains("/nonexistent/key.pem"),
            "{e}"
        );
        let no_key = CardSettings {
            sign_key: None,
            ..resign()
        };
        assert!(error(no_key, with_url()).starts_with("card.sign-key:"));
        let no_kid = CardSettings {
            sign_kid: None,
            ..resign()
        };
        assert!(error(no_kid, with_url()).starts_with("card.sign-kid:"));
        let bad_jku = CardSettings {
            sign_jku: Some("jwks.json".to_owned()),
            ..resign()
        };
        assert!(error(bad_jku, with_url()).starts_with("card.sign-jku:"));
        let not_a_key = CardSettings {
            sign_key: Some("Cargo.toml".into()),
            ..resign()
        };
        assert!(error(not_a_key, with_url()).starts_with("card.sign-key:"));
        for bad in [
            "ftp://gw.example",
            "https://u@gw.example",
            "https://gw.example/?q",
            "/relative",
        ] {
            let e = error(CardSettings::default(), route(Some(bad), false, false));
            assert!(e.starts_with("card.public-url:"), "{bad}: {e}");
        }
    }

    #[test]
    fn invalid_cards() {
        let rewriter = rewriter(&CardSettings::default(), &route(None, false, false));
        for bad in [
            json!([]),
            json!({"name": ""}),
            json!({"name": "x", "skills": "none"}),
            json!({"name": "x", "capabilities": {"streaming": "yes"}}),
        ] {
            assert!(rewriter.check(bad.clone()).is_err(), "{bad}");
        }
        assert!(rewriter.check(json!({"name": "x", "unknown": 1})).is_ok());
    }
}

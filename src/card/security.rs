//! What the card says about authentication (spec 4.5, 8; issue 22 item 5): on a route that
//! authenticates, the served card's `securitySchemes` and `securityRequirements` describe
//! what the gateway enforces, so a client that reads the card sends what the gateway checks.
//!
//! One scheme per accepted credential, named `gateway-*`, and one requirement per scheme (any
//! one suffices); when anonymous callers are let in too, an empty requirement follows, which
//! is how the spec's model (OpenAPI's Security Requirement Object) says "no credential":
//! last, so a client holding a credential picks a scheme first.
//! - a JWT issuer whose `issuer` is an `https://` URL: `openIdConnectSecurityScheme` with its
//!   discovery URL (OpenID Connect Discovery §4: the issuer, then
//!   `/.well-known/openid-configuration`); another issuer (a name, not a URL: a service's own
//!   tokens, keys from a JWKS) has no discovery document, so `httpAuthSecurityScheme`
//!   `Bearer`, `bearerFormat` `JWT`;
//! - API keys: `apiKeySecurityScheme`, `location` `header`, `name` the header;
//! - mutual TLS: `mtlsSecurityScheme`.
//!
//! `card.security` says what becomes of the agent's own (`SecurityPolicy`). The v0.3 card
//! is written from the rewritten one (`protocol/legacy/card.rs`: `security`, `type`-tagged
//! schemes), and a re-signed card signs it, since both happen after `prepare`.

use std::sync::atomic::AtomicBool;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::rewrite::first;
use super::CardConfigError;

/// What a route's authentication enforces, as its card declares it (from `[auth]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Enforced {
    /// The `issuer` of each `[[auth.jwt]]` table, in order.
    pub(crate) jwt_issuers: Vec<String>,
    /// The header of `[auth.api-keys]`, when API keys are accepted.
    pub(crate) api_key_header: Option<String>,
    /// `[auth.mtls]`: the client certificate names the caller.
    pub(crate) mtls: bool,
    /// `anonymous = true`: calls without credentials are let in too.
    pub(crate) anonymous: bool,
}

impl Enforced {
    /// Whether the route authenticates anyone (any scheme configured).
    pub(crate) fn authenticates(&self) -> bool {
        !self.jwt_issuers.is_empty() || self.api_key_header.is_some() || self.mtls
    }
}

/// What becomes of the agent's `securitySchemes` and `securityRequirements` on a route that
/// authenticates (`card.security`; default `replace`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecurityPolicy {
    /// The card says what the gateway enforces, and nothing of the agent's: the gateway is
    /// the only one checking credentials (skills' own requirements go too).
    #[default]
    Replace,
    /// The gateway's schemes join the agent's, and each requirement asks for both the
    /// gateway's and the agent's: the agent checks credentials of its own as well.
    Merge,
    /// The agent's card is served as it says: the operator vouches that it already
    /// describes what the gateway enforces.
    Agent,
}

/// The route's security declaration, ready to write into cards.
pub(super) struct Security {
    merge: bool,
    /// The gateway's `securitySchemes` members.
    schemes: Map<String, Value>,
    /// The gateway's requirements: each a `schemes` map (the ProtoJSON `SecurityRequirement`).
    requirements: Vec<Map<String, Value>>,
    route: String,
    logged: AtomicBool,
    collided: AtomicBool,
}

impl Security {
    /// The declaration of `enforced` under `policy`; `None` when the card's own stays (the
    /// route authenticates nobody, or `agent`). `preserve` serves the card unchanged, so it
    /// goes only with `agent`.
    pub(super) fn new(
        policy: Option<SecurityPolicy>,
        enforced: &Enforced,
        preserve: bool,
        route: &str,
    ) -> Result<Option<Security>, CardConfigError> {
        if !enforced.authenticates() {
            return match policy {
                Some(_) => Err(CardConfigError::new(
                    "security",
                    "the route authenticates nobody ([auth] has no jwt, api-keys or mtls)",
                )),
                None => Ok(None),
            };
        }
        let policy = policy.unwrap_or_default();
        if preserve && policy != SecurityPolicy::Agent {
            return Err(CardConfigError::new(
                "signatures",
                "\"preserve\" serves the agent's card unchanged, but the route authenticates \
                 and its card must say so (card.security = \"agent\" if the agent's card \
                 already does)",
            ));
        }
        if policy == SecurityPolicy::Agent {
            return Ok(None);
        }
        let schemes = schemes(enforced);
        let mut requirements: Vec<Map<String, Value>> = schemes
            .iter()
            .map(|(name, _)| Map::from_iter([(name.clone(), json!({"list": []}))]))
            .collect();
        if enforced.anonymous {
            requirements.push(Map::new());
        }
        Ok(Some(Security {
            merge: policy == SecurityPolicy::Merge,
            schemes: schemes.into_iter().collect(),
            requirements,
            route: route.to_owned(),
            logged: AtomicBool::new(false),
            collided: AtomicBool::new(false),
        }))
    }

    /// Writes the declaration into `card` (a source card's members).
    pub(super) fn apply(&self, card: &mut Map<String, Value>) {
        adopt_v03_security(card);
        let own = match card.remove("securitySchemes") {
            Some(Value::Object(own)) if self.merge => own,
            _ => Map::new(),
        };
        let schemes = self.merged_schemes(own);
        card.insert("securitySchemes".to_owned(), Value::Object(schemes));
        let own = card.remove("securityRequirements");
        let requirements = self.requirements_with(own.as_ref());
        card.insert("securityRequirements".to_owned(), requirements);
        if let Some(Value::Array(skills)) = card.get_mut("skills") {
            for skill in skills.iter_mut().filter_map(Value::as_object_mut) {
                adopt_v03_security(skill);
                // A skill's requirements replace the card's for it (spec 4.4.5): merged,
                // they still ask for the gateway's; replaced, they go (they name schemes
                // the card no longer declares) and the card's apply.
                if let (true, Some(own)) = (self.merge, skill.remove("securityRequirements")) {
                    let merged = self.requirements_with(Some(&own));
                    skill.insert("securityRequirements".to_owned(), merged);
                }
            }
        }
        if first(&self.logged) {
            let how = if self.merge { "merged with" } else { "replace" };
            tracing::info!(route = %self.route,
                "agent card: the gateway's security schemes {how} the agent's (card.security)");
        }
    }

    /// The gateway's schemes over the agent's `own`: a name both use is the gateway's.
    fn merged_schemes(&self, mut own: Map<String, Value>) -> Map<String, Value> {
        for (name, scheme) in &self.schemes {
            if own.insert(name.clone(), scheme.clone()).is_some() && first(&self.collided) {
                tracing::warn!(route = %self.route, scheme = %name,
                    "agent card: the agent declares a security scheme under the gateway's name; the gateway's replaces it");
            }
        }
        own
    }

    /// The gateway's requirements, each joined with each of `own` (the agent's, merged):
    /// a caller satisfies one of the gateway's and one of the agent's.
    fn requirements_with(&self, own: Option<&Value>) -> Value {
        let own: Vec<&Map<String, Value>> = match own {
            Some(Value::Array(own)) if self.merge => own
                .iter()
                .filter_map(|r| r["schemes"].as_object())
                .collect(),
            _ => Vec::new(),
        };
        let requirement = |schemes: Map<String, Value>| match schemes.is_empty() {
            true => json!({}),
            false => json!({ "schemes": schemes }),
        };
        if own.is_empty() {
            return self.requirements.iter().cloned().map(requirement).collect();
        }
        let mut out = Vec::with_capacity(self.requirements.len() * own.len());
        for gateway in &self.requirements {
            for agent in &own {
                let mut both = (*agent).clone();
                both.extend(gateway.iter().map(|(k, v)| (k.clone(), v.clone())));
                out.push(requirement(both));
            }
        }
        Value::Array(out)
    }
}

/// The gateway's `securitySchemes`, named: JWT issuers, API keys, mutual TLS, in the order
/// their requirements are listed.
fn schemes(enforced: &Enforced) -> Vec<(String, Value)> {
    let mut schemes = Vec::new();
    let several = enforced.jwt_issuers.len() > 1;
    for (i, issuer) in enforced.jwt_issuers.iter().enumerate() {
        let name = match several {
            true => format!("gateway-jwt-{}", i + 1),
            false => "gateway-jwt".to_owned(),
        };
        schemes.push((name, jwt_scheme(issuer)));
    }
    if let Some(header) = &enforced.api_key_header {
        let scheme = json!({"apiKeySecurityScheme": {"location": "header", "name": header}});
        schemes.push(("gateway-api-key".to_owned(), scheme));
    }
    if enforced.mtls {
        schemes.push(("gateway-mtls".to_owned(), json!({"mtlsSecurityScheme": {}})));
    }
    schemes
}

/// An issuer's scheme: its OpenID Connect discovery URL, or a bearer JWT.
fn jwt_scheme(issuer: &str) -> Value {
    if issuer.starts_with("https://") {
        let url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        return json!({"openIdConnectSecurityScheme": {"openIdConnectUrl": url}});
    }
    json!({"httpAuthSecurityScheme": {
        "scheme": "Bearer",
        "bearerFormat": "JWT",
        "description": format!("a JWT issued by {issuer}"),
    }})
}

/// A v0.3 card's (or skill's) `security` as the v1 `securityRequirements` it means (the
/// v0.3 table's row), unless v1 ones are there: the rewrite then covers both shapes, and no
/// v0.3 list survives beside it, naming schemes the card no longer declares.
fn adopt_v03_security(object: &mut Map<String, Value>) {
    let Some(security) = object.remove("security") else {
        return;
    };
    if object.contains_key("securityRequirements") {
        return;
    }
    if let Some(v1) = crate::protocol::legacy::security_to_v1(security) {
        object.insert("securityRequirements".to_owned(), v1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enforced() -> Enforced {
        Enforced {
            jwt_issuers: vec!["https://login.example.com/".to_owned(), "svc".to_owned()],
            api_key_header: Some("x-api-key".to_owned()),
            mtls: true,
            anonymous: false,
        }
    }

    fn security(policy: Option<SecurityPolicy>, enforced: &Enforced) -> Security {
        Security::new(policy, enforced, false, "r")
            .unwrap()
            .unwrap()
    }

    fn agent_card() -> Map<String, Value> {
        let card = json!({
            "name": "a",
            "securitySchemes": {"oauth": {"oauth2SecurityScheme": {"flows": {}}}},
            "securityRequirements": [{"schemes": {"oauth": {"list": ["read"]}}}],
            "skills": [
                {"id": "s", "securityRequirements": [{"schemes": {"oauth": {"list": ["admin"]}}}]},
                {"id": "t"}
            ]
        });
        card.as_object().unwrap().clone()
    }

    #[test]
    fn replace_declares_each_scheme_once_and_nothing_of_the_agents() {
        let mut card = agent_card();
        security(None, &enforced()).apply(&mut card);
        assert_eq!(
            card["securitySchemes"],
            json!({
                "gateway-jwt-1": {"openIdConnectSecurityScheme": {
                    "openIdConnectUrl": "https://login.example.com/.well-known/openid-configuration"}},
                "gateway-jwt-2": {"httpAuthSecurityScheme": {
                    "scheme": "Bearer", "bearerFormat": "JWT", "description": "a JWT issued by svc"}},
                "gateway-api-key": {"apiKeySecurityScheme": {"location": "header", "name": "x-api-key"}},
                "gateway-mtls": {"mtlsSecurityScheme": {}}
            })
        );
        let one = |name: &str| json!({"schemes": {name: {"list": []}}});
        assert_eq!(
            card["securityRequirements"],
            json!([
                one("gateway-jwt-1"),
                one("gateway-jwt-2"),
                one("gateway-api-key"),
                one("gateway-mtls")
            ])
        );
        assert_eq!(card["skills"], json!([{"id": "s"}, {"id": "t"}]));
    }

    #[test]
    fn a_v03_cards_security_is_rewritten_too_and_never_kept_beside() {
        let v03 = || {
            let card = json!({
                "name": "a",
                "securitySchemes": {"agent-key": {"apiKeySecurityScheme": {"location": "header", "name": "k"}}},
                "security": [{"agent-key": []}],
                "skills": [{"id": "s", "security": [{"agent-key": ["admin"]}]}]
            });
            card.as_object().unwrap().clone()
        };
        let mut replaced = v03();
        security(None, &enforced()).apply(&mut replaced);
        assert!(replaced.get("security").is_none(), "{replaced:?}");
        assert_eq!(replaced["skills"], json!([{"id": "s"}]));
        assert_eq!(
            replaced["securityRequirements"].as_array().unwrap().len(),
            4
        );
        let mut merged = v03();
        security(Some(SecurityPolicy::Merge), &enforced()).apply(&mut merged);
        assert!(merged.get("security").is_none(), "{merged:?}");
        let both = json!({"schemes": {"agent-key": {"list": []}, "gateway-api-key": {"list": []}}});
        assert!(merged["securityRequirements"]
            .as_array()
            .unwrap()
            .contains(&both));
        let skill = &merged["skills"][0];
        assert!(skill.get("security").is_none(), "{skill}");
        let both =
            json!({"schemes": {"agent-key": {"list": ["admin"]}, "gateway-mtls": {"list": []}}});
        assert!(skill["securityRequirements"]
            .as_array()
            .unwrap()
            .contains(&both));
    }

    #[test]
    fn anonymous_adds_an_empty_requirement_last() {
        let only_keys = Enforced {
            api_key_header: Some("x-key".to_owned()),
            anonymous: true,
            ..Enforced::default()
        };
        let mut card = Map::new();
        security(Some(SecurityPolicy::Replace), &only_keys).apply(&mut card);
        assert_eq!(
            card["securityRequirements"],
            json!([{"schemes": {"gateway-api-key": {"list": []}}}, {}])
        );
        let one_issuer = Enforced {
            jwt_issuers: vec!["https://id.example".to_owned()],
            ..Enforced::default()
        };
        let mut card = Map::new();
        security(None, &one_issuer).apply(&mut card);
        assert_eq!(
            card["securityRequirements"],
            json!([{"schemes": {"gateway-jwt": {"list": []}}}])
        );
    }

    #[test]
    fn merge_asks_for_the_gateways_and_the_agents() {
        let both = Enforced {
            api_key_header: Some("x-api-key".to_owned()),
            mtls: true,
            anonymous: true,
            ..Enforced::default()
        };
        let mut card = agent_card();
        security(Some(SecurityPolicy::Merge), &both).apply(&mut card);
        let schemes = card["securitySchemes"].as_object().unwrap();
        let names: Vec<&str> = schemes.keys().map(String::as_str).collect();
        assert_eq!(names, ["gateway-api-key", "gateway-mtls", "oauth"]);
        let with = |gateway: Option<&str>, scope: &str| {
            let mut schemes = json!({"oauth": {"list": [scope]}});
            if let Some(name) = gateway {
                schemes[name] = json!({"list": []});
            }
            json!({ "schemes": schemes })
        };
        assert_eq!(
            card["securityRequirements"],
            json!([
                with(Some("gateway-api-key"), "read"),
                with(Some("gateway-mtls"), "read"),
                with(None, "read")
            ])
        );
        assert_eq!(
            card["skills"][0]["securityRequirements"],
            json!([
                with(Some("gateway-api-key"), "admin"),
                with(Some("gateway-mtls"), "admin"),
                with(None, "admin")
            ])
        );
        assert!(card["skills"][1].get("securityRequirements").is_none());
        // An agent without requirements: the gateway's alone.
        let mut bare = Map::from_iter([("name".to_owned(), json!("b"))]);
        security(Some(SecurityPolicy::Merge), &both).apply(&mut bare);
        assert_eq!(bare["securityRequirements"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn merge_keeps_the_gateways_scheme_under_a_shared_name() {
        let keys = Enforced {
            api_key_header: Some("x-api-key".to_owned()),
            ..Enforced::default()
        };
        let mut card = Map::new();
        card.insert(
            "securitySchemes".to_owned(),
            json!({"gateway-api-key": {"apiKeySecurityScheme": {"location": "query", "name": "k"}}}),
        );
        security(Some(SecurityPolicy::Merge), &keys).apply(&mut card);
        assert_eq!(
            card["securitySchemes"]["gateway-api-key"]["apiKeySecurityScheme"]["location"],
            "header"
        );
    }

    #[test]
    fn settings_that_cannot_hold() {
        let nobody = Enforced {
            anonymous: true,
            ..Enforced::default()
        };
        assert!(Security::new(None, &nobody, false, "r").unwrap().is_none());
        for policy in [
            SecurityPolicy::Replace,
            SecurityPolicy::Merge,
            SecurityPolicy::Agent,
        ] {
            let e = Security::new(Some(policy), &nobody, false, "r")
                .err()
                .unwrap();
            assert!(e.to_string().starts_with("card.security:"), "{e}");
        }
        let e = Security::new(None, &enforced(), true, "r").err().unwrap();
        assert!(e.to_string().starts_with("card.signatures:"), "{e}");
        let agent = Some(SecurityPolicy::Agent);
        assert!(Security::new(agent, &enforced(), true, "r")
            .unwrap()
            .is_none());
        assert!(Security::new(agent, &enforced(), false, "r")
            .unwrap()
            .is_none());
    }

    /// The re-signed card signs the declaration, and the v0.3 card carries it in v0.3's
    /// shapes (`security`, `type`-tagged schemes).
    #[test]
    fn resigned_and_v03_cards_carry_the_declaration() {
        use super::super::rewrite::{Rewriter, Treatment};
        use super::super::{CardSettings, RouteCard, SignaturePolicy};
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let dir = std::env::temp_dir().join(format!("a2a-card-security-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let key_path = dir.join("key.pem");
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        let settings = CardSettings {
            signatures: Some(SignaturePolicy::Resign),
            sign_key: Some(key_path),
            sign_kid: Some("gw".to_owned()),
            ..CardSettings::default()
        };
        let route = RouteCard {
            route: "r".to_owned(),
            jsonrpc_path: "/a2a".to_owned(),
            card_path: "/.well-known/agent-card.json".to_owned(),
            public_url: Some("https://gw.example".to_owned()),
            trust_forwarded: false,
            trusted_proxy_hops: 1,
            allowed_hosts: Vec::new(),
            tls: false,
            host: None,
            fixed_tenant: None,
            binding: crate::protocol::binding::Binding::Grpc,
            legacy: true,
            enforced: enforced(),
            fronts: vec![crate::protocol::binding::Binding::JsonRpc],
            rest_path: "/a2a/rest".to_owned(),
            grpc_port: None,
        };
        let treatment = Treatment::from_settings(&settings).unwrap();
        let rewriter = Rewriter::new(&settings, &route, treatment).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let source = json!({"name": "a", "description": "d", "version": "1",
            "capabilities": {}, "skills": [], "defaultInputModes": [], "defaultOutputModes": [],
            "securitySchemes": {"oauth": {"oauth2SecurityScheme": {"flows": {}}}}});
        let checked = rewriter.check(source).unwrap();
        let card = rewriter.render(&rewriter.prepare(checked), "https://gw.example");
        assert_eq!(card["securitySchemes"].as_object().unwrap().len(), 4);
        assert!(card["securitySchemes"].get("oauth").is_none());
        let signature = &card["signatures"][0];
        let protected = signature["protected"].as_str().unwrap();
        let payload = URL_SAFE_NO_PAD.encode(crate::signing::signing_payload(&card));
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            key.public_key_raw(),
        );
        let raw = URL_SAFE_NO_PAD
            .decode(signature["signature"].as_str().unwrap())
            .unwrap();
        let signed = format!("{protected}.{payload}");
        assert!(public.verify(signed.as_bytes(), &raw).is_ok());
        let mut forged = card.clone();
        forged["securityRequirements"] = json!([{}]);
        let payload = URL_SAFE_NO_PAD.encode(crate::signing::signing_payload(&forged));
        let forged = format!("{protected}.{payload}");
        assert!(public.verify(forged.as_bytes(), &raw).is_err());

        let v03 = crate::protocol::legacy::card(card, Some("https://gw.example/a2a")).unwrap();
        assert_eq!(
            v03["securitySchemes"],
            json!({
                "gateway-jwt-1": {"type": "openIdConnect",
                    "openIdConnectUrl": "https://login.example.com/.well-known/openid-configuration"},
                "gateway-jwt-2": {"type": "http", "scheme": "Bearer", "bearerFormat": "JWT",
                    "description": "a JWT issued by svc"},
                "gateway-api-key": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "gateway-mtls": {"type": "mutualTLS"}
            })
        );
        assert_eq!(
            v03["security"],
            json!([{"gateway-jwt-1": []}, {"gateway-jwt-2": []}, {"gateway-api-key": []},
                   {"gateway-mtls": []}])
        );
    }
}

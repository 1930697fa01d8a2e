//! The card tells the truth (issue 22 item 5), through the gateway process: on a route that
//! authenticates, the served card's `securitySchemes` and `securityRequirements` are what
//! the gateway enforces (`card/security.rs`), replacing (`replace`, the default) or merged
//! with (`merge`) the agent's, or the agent's as they are (`agent`); the v0.3 card says the
//! same in v0.3's shapes; a re-signed card signs the declaration; the extended card gets the
//! same; a route without authentication serves the agent's declaration untouched.

use crate::harness;

use a2a_gateway::proto::{AgentCard, SecurityRequirement, SecurityScheme, StringList};
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use harness::process::*;
use harness::*;
use serde_json::{json, Value};

/// The agent's card: an OAuth scheme, required for the card and for one skill.
fn agent_card() -> Value {
    json!({
        "name": "billing",
        "description": "an agent behind the gateway",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": "http://10.0.0.7:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": true},
        "securitySchemes": {"oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
            "tokenUrl": "https://id.example/token", "scopes": {"pay": "pay bills"}}}}}},
        "securityRequirements": [{"schemes": {"oauth": {"list": ["pay"]}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {"id": "pay", "name": "Pay", "description": "d", "tags": ["t"],
             "securityRequirements": [{"schemes": {"oauth": {"list": ["pay", "admin"]}}}]}
        ]
    })
}

/// A route table: `name` at `/name`, the card file, and `extra` lines (its own tables).
fn route(name: &str, backend: &str, card: &str, card_extra: &str, auth: &str) -> String {
    format!(
        "[[route]]\nname = \"{name}\"\npath = \"/{name}\"\nbackend = \"{backend}\"\n\
         public-url = \"https://gw.example\"\n\
         [route.card]\nsource = \"{card}\"\n{card_extra}\n{auth}\n"
    )
}

/// The gateway's API key scheme and its requirement, as the card writes them.
fn api_key_scheme(header: &str) -> Value {
    json!({"apiKeySecurityScheme": {"location": "header", "name": header}})
}

struct Gateway {
    _process: Running,
    origin: String,
    _files: Vec<TempFile>,
    signing_key: rcgen::KeyPair,
}

/// One gateway with a route per treatment, behind a backend answering
/// GetExtendedAgentCard with the agent's card.
async fn gateway() -> Gateway {
    let extended: AgentCard = serde_json::from_value(agent_card()).unwrap();
    let backend = TestBackend::new(move |request| match request {
        Request::Unary(UnaryRequest::GetExtendedAgentCard(_)) => {
            Answer::Reply(Reply::GetExtendedAgentCard(extended.clone()))
        }
        _ => Answer::Error(tonic::Status::unimplemented("cards only")),
    });
    let backend = format!("http://{}", backend.spawn().await);
    let card = TempFile::new("json", &agent_card().to_string());
    let keys = TempFile::new("keys", &format!("alice {}\n", key_digest_hex(b"alice-key")));
    let signing_key = rcgen::KeyPair::generate().unwrap();
    let pem = TempFile::new("pem", &signing_key.serialize_pem());
    let api_keys = |anonymous: bool| {
        format!(
            "[route.auth]\nanonymous = {anonymous}\n[route.auth.api-keys]\nfile = \"{}\"\n\
             header = \"X-Key\"\n",
            keys.path()
        )
    };
    let resign = format!(
        "signatures = \"resign\"\nsign-key = \"{}\"\nsign-kid = \"gw-1\"\n",
        pem.path()
    );
    let config = [
        route("plain", &backend, card.path(), "", ""),
        route("replace", &backend, card.path(), "", &api_keys(false)),
        route(
            "merge",
            &backend,
            card.path(),
            "security = \"merge\"",
            &api_keys(true),
        ),
        route(
            "agent",
            &backend,
            card.path(),
            "security = \"agent\"",
            &api_keys(false),
        ),
        route("signed", &backend, card.path(), &resign, &api_keys(false)),
        route(
            "private",
            &backend,
            card.path(),
            "",
            &api_keys(false).replace("[route.auth]\n", "[route.auth]\npublic-card = false\n"),
        ),
    ]
    .concat();
    let config = TempFile::new("toml", &config);
    let process = start(&["--config", config.path()]).await;
    let origin = process.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    Gateway {
        _process: process,
        origin,
        _files: vec![card, keys, pem, config],
        signing_key,
    }
}

impl Gateway {
    /// The card of `route`, in the form `version` asks for (`None`: no `A2A-Version`).
    async fn card(&self, route: &str, version: Option<&str>) -> (Vec<u8>, Value) {
        let mut request = client().get(format!(
            "{}/{route}/.well-known/agent-card.json",
            self.origin
        ));
        if let Some(version) = version {
            request = request.header("a2a-version", version);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{route}");
        let bytes = response.bytes().await.unwrap().to_vec();
        let card = serde_json::from_slice(&bytes).unwrap();
        (bytes, card)
    }

    /// GetExtendedAgentCard through `route` with `headers`.
    async fn extended(&self, route: &str, headers: &[(&str, &str)]) -> Value {
        let url = format!("{}/{route}/a2a/jsonrpc", self.origin);
        let mut all = vec![("a2a-version", "1.0")];
        all.extend_from_slice(headers);
        let body = request(json!(1), "GetExtendedAgentCard", json!({}));
        let (status, _, text) = post_with(&url, body, &all).await;
        assert_eq!(status, 200, "{text}");
        let reply: Value = serde_json::from_str(&text).unwrap();
        reply["result"].clone()
    }
}

#[tokio::test]
async fn cards_declare_what_the_gateway_enforces() {
    let gateway = gateway().await;
    let agent = agent_card();

    // No authentication: the agent's declaration, untouched.
    let (_, plain) = gateway.card("plain", Some("1.0")).await;
    for member in ["securitySchemes", "securityRequirements", "skills"] {
        assert_eq!(plain[member], agent[member], "{member}");
    }

    // replace: the gateway's API key alone, skills' own requirements gone.
    let (_, replaced) = gateway.card("replace", Some("1.0")).await;
    assert_eq!(
        replaced["securitySchemes"],
        json!({"gateway-api-key": api_key_scheme("x-key")})
    );
    let required = json!([{"schemes": {"gateway-api-key": {"list": []}}}]);
    assert_eq!(replaced["securityRequirements"], required);
    assert!(replaced["skills"][0].get("securityRequirements").is_none());
    // The card parses as the SDKs' AgentCard, scheme and all.
    let typed: AgentCard = serde_json::from_value(replaced.clone()).unwrap();
    let scheme: &SecurityScheme = &typed.security_schemes["gateway-api-key"];
    assert!(scheme.scheme.is_some());
    let requirement: &SecurityRequirement = &typed.security_requirements[0];
    assert_eq!(
        requirement.schemes["gateway-api-key"],
        StringList::default()
    );

    // merge, with anonymous callers let in: both schemes; the gateway's key and the agent's
    // OAuth, or the agent's OAuth alone (no gateway credential).
    let (_, merged) = gateway.card("merge", Some("1.0")).await;
    let schemes = merged["securitySchemes"].as_object().unwrap();
    assert_eq!(schemes["gateway-api-key"], api_key_scheme("x-key"));
    assert_eq!(schemes["oauth"], agent["securitySchemes"]["oauth"]);
    assert_eq!(
        merged["securityRequirements"],
        json!([
            {"schemes": {"gateway-api-key": {"list": []}, "oauth": {"list": ["pay"]}}},
            {"schemes": {"oauth": {"list": ["pay"]}}}
        ])
    );
    assert_eq!(
        merged["skills"][0]["securityRequirements"][0],
        json!({"schemes": {"gateway-api-key": {"list": []}, "oauth": {"list": ["pay", "admin"]}}})
    );

    // agent: the operator vouches for the agent's card.
    let (_, theirs) = gateway.card("agent", Some("1.0")).await;
    assert_eq!(theirs["securitySchemes"], agent["securitySchemes"]);
    assert_eq!(
        theirs["securityRequirements"],
        agent["securityRequirements"]
    );

    // The v0.3 card says the same in v0.3's shapes.
    let (_, v03) = gateway.card("replace", Some("0.3")).await;
    assert_eq!(
        v03["securitySchemes"],
        json!({"gateway-api-key": {"type": "apiKey", "in": "header", "name": "x-key"}})
    );
    assert_eq!(v03["security"], json!([{"gateway-api-key": []}]));
    let (_, v03_merged) = gateway.card("merge", Some("0.3")).await;
    assert_eq!(
        v03_merged["security"],
        json!([{"gateway-api-key": [], "oauth": ["pay"]}, {"oauth": ["pay"]}])
    );
}

#[tokio::test]
async fn a_resigned_card_signs_the_declaration() {
    let gateway = gateway().await;
    let (_, card) = gateway.card("signed", Some("1.0")).await;
    assert_eq!(
        card["securitySchemes"],
        json!({"gateway-api-key": api_key_scheme("x-key")})
    );
    let signature = &card["signatures"][0];
    let protected = signature["protected"].as_str().unwrap();
    let raw = URL_SAFE_NO_PAD
        .decode(signature["signature"].as_str().unwrap())
        .unwrap();
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::ECDSA_P256_SHA256_FIXED,
        gateway.signing_key.public_key_raw().to_vec(),
    );
    let verifies = |card: &Value| {
        let payload = URL_SAFE_NO_PAD.encode(a2a_gateway::signing::signing_payload(card));
        public
            .verify(format!("{protected}.{payload}").as_bytes(), &raw)
            .is_ok()
    };
    assert!(verifies(&card), "the served card verifies: {card}");
    // Taking the requirement away (a client told no credential is needed) breaks it.
    let mut forged = card.clone();
    forged["securityRequirements"] = json!([{}]);
    assert!(!verifies(&forged));

    // a2a-sdk 1.3.0 drops every empty value before canonicalising, the scope-less
    // requirement `{"list": []}` the spec keeps (§8.4.1) included (card_signing.rs pins the
    // rule): its verifier rejects this card. When the SDK changes, this says so.
    let pem = gateway.signing_key.serialize_pem();
    let result = harness::peer::sdk_verify(&[("gw-1", &pem)], std::slice::from_ref(&card));
    let mut without = card;
    without
        .as_object_mut()
        .unwrap()
        .remove("securityRequirements");
    let theirs = String::from_utf8(a2a_gateway::signing::signing_payload(&without)).unwrap();
    assert_eq!(result.payloads[0], theirs, "the only difference");
    assert_eq!(result.verdicts, ["invalid: No valid signature found"]);
}

#[tokio::test]
async fn the_extended_card_gets_the_same_declaration() {
    let gateway = gateway().await;
    let card = gateway.extended("replace", &[("x-key", "alice-key")]).await;
    assert_eq!(card["name"], "billing", "{card}");
    assert_eq!(
        card["securitySchemes"],
        json!({"gateway-api-key": api_key_scheme("x-key")})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"gateway-api-key": {"list": []}}}])
    );
    let plain = gateway.extended("plain", &[]).await;
    assert_eq!(plain["securitySchemes"], agent_card()["securitySchemes"]);
}

#[tokio::test]
async fn a_private_card_is_served_to_authenticated_callers_only() {
    let gateway = gateway().await;
    let url = format!("{}/private/.well-known/agent-card.json", gateway.origin);
    let anonymous = client().get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers()["www-authenticate"].to_str().unwrap();
    assert_eq!(challenge, "ApiKey header=\"x-key\"");
    let keyed = client().get(&url).header("x-key", "alice-key");
    let keyed = keyed.send().await.unwrap();
    assert_eq!(keyed.status(), 200);
    let card: Value = keyed.json().await.unwrap();
    assert_eq!(
        card["securityRequirements"][0]["schemes"]["gateway-api-key"],
        json!({"list": []})
    );
    // The catalog, public, lists the public cards only.
    let catalog = client()
        .get(format!("{}/.well-known/api-catalog", gateway.origin))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        catalog.contains("/replace/.well-known/agent-card.json"),
        "{catalog}"
    );
    assert!(!catalog.contains("/private/"), "{catalog}");
}

//! The agent card rows of the mapping table: v1.0 `AgentCard` (spec 4.4) ↔ the v0.3
//! `AgentCard`, whose connection members (`url`, `preferredTransport`, `protocolVersion`,
//! `additionalInterfaces`) v1.0 replaced by `supportedInterfaces`, and the dual-format card
//! that carries both (as the reference SDK serves it: v1.0 members, plus the v0.3 ones where
//! v1.0 has none).

use serde_json::{json, Map, Value};

use super::shape::{Conv, Invalid, Member, Shape};
use crate::protocol::binding::JSONRPC;

const fn m(v1: &'static str, v03: &'static str, conv: Conv) -> Member {
    Member {
        v1,
        v03,
        conv,
        required: false,
    }
}

/// The `protocolVersion` a v0.3 card declares.
pub const V03_PROTOCOL_VERSION: &str = "0.3.0";

static PROVIDER: Shape = Shape::Table {
    name: "AgentProvider",
    kind: None,
    members: &[
        m("url", "url", Conv::Same),
        m("organization", "organization", Conv::Same),
    ],
    derive: None,
};

static EXTENSION: Shape = Shape::Table {
    name: "AgentExtension",
    kind: None,
    members: &[
        m("uri", "uri", Conv::Same),
        m("description", "description", Conv::Same),
        m("required", "required", Conv::Same),
        m("params", "params", Conv::Same),
    ],
    derive: None,
};

/// `extendedAgentCard` is a top-level member in v0.3 (`supportsAuthenticatedExtendedCard`),
/// moved by `CARD`.
static CAPABILITIES: Shape = Shape::Table {
    name: "AgentCapabilities",
    kind: None,
    members: &[
        m("streaming", "streaming", Conv::Same),
        m("pushNotifications", "pushNotifications", Conv::Same),
        m("extensions", "extensions", Conv::List(&EXTENSION)),
    ],
    derive: None,
};

/// v1.0 `{"schemes": {"name": {"list": [scopes]}}}` ↔ v0.3 `{"name": [scopes]}`.
static SECURITY_REQUIREMENT: Shape = Shape::Custom {
    name: "SecurityRequirement",
    to_v03: |mut requirement| {
        let schemes = match requirement.remove("schemes") {
            Some(Value::Object(schemes)) => schemes,
            _ => Map::new(),
        };
        let flat = schemes
            .into_iter()
            .map(|(name, mut scopes)| (name, scopes["list"].take()))
            .map(|(name, list)| (name, if list.is_null() { json!([]) } else { list }))
            .collect();
        Value::Object(flat)
    },
    to_v1: |requirement| match requirement {
        Value::Object(flat) => {
            let schemes: Map<String, Value> = flat
                .into_iter()
                .map(|(name, scopes)| (name, json!({ "list": scopes })))
                .collect();
            Ok(json!({ "schemes": schemes }))
        }
        _ => Err(Invalid::new("expected an object of scope lists")),
    },
};

static SKILL: Shape = Shape::Table {
    name: "AgentSkill",
    kind: None,
    members: &[
        m("id", "id", Conv::Same),
        m("name", "name", Conv::Same),
        m("description", "description", Conv::Same),
        m("tags", "tags", Conv::Same),
        m("examples", "examples", Conv::Same),
        m("inputModes", "inputModes", Conv::Same),
        m("outputModes", "outputModes", Conv::Same),
        m(
            "securityRequirements",
            "security",
            Conv::List(&SECURITY_REQUIREMENT),
        ),
    ],
    derive: Some(|skill| {
        skill.entry("tags").or_insert_with(|| json!([]));
    }),
};

/// OAuth flows share their members; v1.0's `pkceRequired` and device-code flow have no v0.3
/// form and are left out.
static OAUTH_FLOW: Shape = Shape::Table {
    name: "OAuthFlow",
    kind: None,
    members: &[
        m("authorizationUrl", "authorizationUrl", Conv::Same),
        m("tokenUrl", "tokenUrl", Conv::Same),
        m("refreshUrl", "refreshUrl", Conv::Same),
        m("scopes", "scopes", Conv::Same),
    ],
    derive: None,
};

static OAUTH_FLOWS: Shape = Shape::Table {
    name: "OAuthFlows",
    kind: None,
    members: &[
        m(
            "authorizationCode",
            "authorizationCode",
            Conv::Object(&OAUTH_FLOW),
        ),
        m(
            "clientCredentials",
            "clientCredentials",
            Conv::Object(&OAUTH_FLOW),
        ),
        m("implicit", "implicit", Conv::Object(&OAUTH_FLOW)),
        m("password", "password", Conv::Object(&OAUTH_FLOW)),
    ],
    derive: None,
};

static API_KEY: Shape = Shape::Table {
    name: "APIKeySecurityScheme",
    kind: None,
    members: &[
        m("description", "description", Conv::Same),
        m("location", "in", Conv::Same),
        m("name", "name", Conv::Same),
    ],
    derive: None,
};

static HTTP_AUTH: Shape = Shape::Table {
    name: "HTTPAuthSecurityScheme",
    kind: None,
    members: &[
        m("description", "description", Conv::Same),
        m("scheme", "scheme", Conv::Same),
        m("bearerFormat", "bearerFormat", Conv::Same),
    ],
    derive: None,
};

static OAUTH2: Shape = Shape::Table {
    name: "OAuth2SecurityScheme",
    kind: None,
    members: &[
        m("description", "description", Conv::Same),
        m("flows", "flows", Conv::Object(&OAUTH_FLOWS)),
        m("oauth2MetadataUrl", "oauth2MetadataUrl", Conv::Same),
    ],
    derive: None,
};

static OPEN_ID_CONNECT: Shape = Shape::Table {
    name: "OpenIdConnectSecurityScheme",
    kind: None,
    members: &[
        m("description", "description", Conv::Same),
        m("openIdConnectUrl", "openIdConnectUrl", Conv::Same),
    ],
    derive: None,
};

static MUTUAL_TLS: Shape = Shape::Table {
    name: "MutualTLSSecurityScheme",
    kind: None,
    members: &[m("description", "description", Conv::Same)],
    derive: None,
};

/// `SecurityScheme`'s oneof ↔ the v0.3 scheme tagged by `type`.
pub static SECURITY_SCHEME: Shape = Shape::Union {
    name: "SecurityScheme",
    tag: "type",
    cases: &[
        ("apiKeySecurityScheme", "apiKey", &API_KEY),
        ("httpAuthSecurityScheme", "http", &HTTP_AUTH),
        ("oauth2SecurityScheme", "oauth2", &OAUTH2),
        (
            "openIdConnectSecurityScheme",
            "openIdConnect",
            &OPEN_ID_CONNECT,
        ),
        ("mtlsSecurityScheme", "mutualTLS", &MUTUAL_TLS),
    ],
};

/// The card's members other than its interfaces and the extended-card flag.
static CARD_MEMBERS: Shape = Shape::Table {
    name: "AgentCard",
    kind: None,
    members: &[
        m("name", "name", Conv::Same),
        m("description", "description", Conv::Same),
        m("version", "version", Conv::Same),
        m("provider", "provider", Conv::Object(&PROVIDER)),
        m("documentationUrl", "documentationUrl", Conv::Same),
        m("iconUrl", "iconUrl", Conv::Same),
        m("capabilities", "capabilities", Conv::Object(&CAPABILITIES)),
        m(
            "securitySchemes",
            "securitySchemes",
            Conv::Map(&SECURITY_SCHEME),
        ),
        m(
            "securityRequirements",
            "security",
            Conv::List(&SECURITY_REQUIREMENT),
        ),
        m("defaultInputModes", "defaultInputModes", Conv::Same),
        m("defaultOutputModes", "defaultOutputModes", Conv::Same),
        m("skills", "skills", Conv::List(&SKILL)),
        m("signatures", "signatures", Conv::Same),
    ],
    derive: Some(|card| {
        // Required by the v0.3 schema, optional or defaulted in v1.0.
        card.entry("capabilities").or_insert_with(|| json!({}));
        for list in ["defaultInputModes", "defaultOutputModes", "skills"] {
            card.entry(list).or_insert_with(|| json!([]));
        }
    }),
};

/// The whole card. v0.3's main interface (`url`, `preferredTransport`) is the first
/// JSON-RPC interface that serves v0.3: one declaring a 0.x or no version (the gateway marks
/// its own endpoint so, see `legacy::card`); `additionalInterfaces` repeat it (as v0.3 asks)
/// and add the other interfaces that serve v0.3. Interfaces serving only v1.0 are left out: a
/// v0.3 client cannot speak v1.0 to them. Without any, the card has no `url`.
pub static CARD: Shape = Shape::Custom {
    name: "AgentCard",
    to_v03: card_to_v03,
    to_v1: card_to_v1,
};

/// Whether an interface serves v0.3 clients.
fn serves_v03(interface: &Value) -> bool {
    let version = interface["protocolVersion"].as_str().unwrap_or_default();
    version.is_empty() || version.starts_with("0.")
}

fn card_to_v03(mut card: Map<String, Value>) -> Value {
    let interfaces = match card.remove("supportedInterfaces") {
        Some(Value::Array(interfaces)) => interfaces,
        _ => Vec::new(),
    };
    let extended = card
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
        .and_then(|c| c.remove("extendedAgentCard"));
    let mut out = into_map(CARD_MEMBERS.to_v03(Value::Object(card)));
    let legacy: Vec<&Value> = interfaces.iter().filter(|i| serves_v03(i)).collect();
    let primary = legacy.iter().find(|i| i["protocolBinding"] == JSONRPC);
    if let Some(primary) = primary {
        let additional: Vec<Value> = std::iter::once(*primary)
            .chain(legacy.iter().copied().filter(|i| i != primary))
            .map(|i| json!({"url": i["url"], "transport": i["protocolBinding"]}))
            .collect();
        out.insert("url".into(), primary["url"].clone());
        out.insert("preferredTransport".into(), JSONRPC.into());
        out.insert("additionalInterfaces".into(), Value::Array(additional));
    }
    out.insert("protocolVersion".into(), V03_PROTOCOL_VERSION.into());
    if extended == Some(Value::Bool(true)) {
        out.insert("supportsAuthenticatedExtendedCard".into(), true.into());
    }
    Value::Object(out)
}

/// Marks the interface at `endpoint` (the gateway's JSON-RPC endpoint, which answers v0.3
/// calls) as serving v0.3, for `CARD`.
pub fn mark_v03_endpoint(card: &mut Value, endpoint: &str) {
    if let Some(interfaces) = card["supportedInterfaces"].as_array_mut() {
        for interface in interfaces.iter_mut() {
            if interface["url"] == endpoint && interface["protocolBinding"] == JSONRPC {
                interface["protocolVersion"] = V03_PROTOCOL_VERSION.into();
            }
        }
    }
}

fn card_to_v1(card: Value) -> Result<Value, Invalid> {
    let Value::Object(mut card) = card else {
        return Err(Invalid::new("expected an AgentCard object"));
    };
    let url = card.remove("url").unwrap_or_default();
    let transport = card
        .remove("preferredTransport")
        .unwrap_or_else(|| JSONRPC.into());
    let version = card
        .remove("protocolVersion")
        .unwrap_or_else(|| V03_PROTOCOL_VERSION.into());
    let additional = match card.remove("additionalInterfaces") {
        Some(Value::Array(additional)) => additional,
        _ => Vec::new(),
    };
    let extended = card.remove("supportsAuthenticatedExtendedCard");
    let mut out = into_map(CARD_MEMBERS.to_v1(Value::Object(card))?);
    let primary = json!({"url": url, "protocolBinding": transport, "protocolVersion": version});
    let others = additional
        .into_iter()
        .map(|i| json!({"url": i["url"], "protocolBinding": i["transport"], "protocolVersion": version}))
        .filter(|i| *i != primary);
    let interfaces: Vec<Value> = std::iter::once(primary.clone()).chain(others).collect();
    out.insert("supportedInterfaces".into(), Value::Array(interfaces));
    if let Some(extended) = extended {
        out.entry("capabilities")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|c| c.insert("extendedAgentCard".into(), extended));
    }
    Ok(Value::Object(out))
}

/// An object row's output (always an object) as its map.
fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The dual-format card: `card` (v1.0) with the members of `v03` (its v0.3 form) added
/// where `card` has none, recursively through objects and, by position, lists of objects — a
/// v0.3 client reads its members, a v1.0 client its own.
pub fn dual(mut card: Value, v03: Value) -> Value {
    merge(&mut card, v03);
    card
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                match into.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        into.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(into), Value::Array(from)) => {
            for (existing, value) in into.iter_mut().zip(from) {
                if existing.is_object() {
                    merge(existing, value);
                }
            }
        }
        _ => {}
    }
}

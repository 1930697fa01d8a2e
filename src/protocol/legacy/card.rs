//! The agent card rows of the mapping table: v1.0 `AgentCard` (spec 4.4) ↔ the v0.3
//! `AgentCard`, whose connection members (`url`, `preferredTransport`, `protocolVersion`,
//! `additionalInterfaces`) v1.0 replaced by `supportedInterfaces`, and the dual-format card
//! that carries both (as the reference SDK serves it: v1.0 members, plus the v0.3 ones where
//! v1.0 has none).
//!
//! The v1.0 side comes from the compiled schema (`protocol::schema`): most rows are `Proto`
//! rows that name their message and only what v0.3 renames or drops; the fields, and which
//! row a nested message takes (`ROWS`), follow from the proto.

use serde_json::{json, Map, Value};

use super::shape::{m, Change, Conv, Invalid, Shape};
use crate::protocol::binding::JSONRPC;

/// The `protocolVersion` a v0.3 card declares.
pub const V03_PROTOCOL_VERSION: &str = "0.3.0";

/// A v1.0 message of the card that v0.3 writes the same way, but for `changes`; its fields
/// come from the compiled schema.
const fn proto(message: &'static str, changes: &'static [(&'static str, Change)]) -> Shape {
    Shape::Proto {
        message,
        changes,
        rows: &ROWS,
        derive: None,
    }
}

/// The v0.3 row of each v1.0 message the card holds (the interfaces, the extended-card flag
/// and the signatures aside): how a field holding one converts.
static ROWS: [(&str, &Shape); 16] = [
    ("AgentProvider", &PROVIDER),
    ("AgentCapabilities", &CAPABILITIES),
    ("AgentExtension", &EXTENSION),
    ("AgentSkill", &SKILL),
    ("SecurityRequirement", &SECURITY_REQUIREMENT),
    ("SecurityScheme", &SECURITY_SCHEME),
    ("APIKeySecurityScheme", &API_KEY),
    ("HTTPAuthSecurityScheme", &HTTP_AUTH),
    ("OAuth2SecurityScheme", &OAUTH2),
    ("OpenIdConnectSecurityScheme", &OPEN_ID_CONNECT),
    ("MutualTlsSecurityScheme", &MUTUAL_TLS),
    ("OAuthFlows", &OAUTH_FLOWS),
    ("AuthorizationCodeOAuthFlow", &OAUTH_FLOW),
    ("ClientCredentialsOAuthFlow", &OAUTH_FLOW),
    ("ImplicitOAuthFlow", &OAUTH_FLOW),
    ("PasswordOAuthFlow", &OAUTH_FLOW),
];

static PROVIDER: Shape = proto("AgentProvider", &[]);

static EXTENSION: Shape = proto("AgentExtension", &[]);

/// `extendedAgentCard` is a top-level member in v0.3 (`supportsAuthenticatedExtendedCard`),
/// moved by `CARD`.
static CAPABILITIES: Shape = proto(
    "AgentCapabilities",
    &[("extendedAgentCard", Change::Dropped)],
);

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

static SKILL: Shape = Shape::Proto {
    message: "AgentSkill",
    changes: &[("securityRequirements", Change::Renamed("security"))],
    rows: &ROWS,
    derive: Some(|skill| {
        skill.entry("tags").or_insert_with(|| json!([]));
    }),
};

/// v0.3's flows, one row for the four v1.0 flows it has: the members any v0.3 flow has,
/// read from whichever flow holds them. v1.0's `pkceRequired` has no v0.3 form.
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

/// v1.0's device-code flow has no v0.3 form.
static OAUTH_FLOWS: Shape = proto("OAuthFlows", &[("deviceCode", Change::Dropped)]);

static API_KEY: Shape = proto(
    "APIKeySecurityScheme",
    &[("location", Change::Renamed("in"))],
);

static HTTP_AUTH: Shape = proto("HTTPAuthSecurityScheme", &[]);

static OAUTH2: Shape = proto("OAuth2SecurityScheme", &[]);

static OPEN_ID_CONNECT: Shape = proto("OpenIdConnectSecurityScheme", &[]);

static MUTUAL_TLS: Shape = proto("MutualTlsSecurityScheme", &[]);

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

/// The card's members other than its interfaces (written by `CARD`); v0.3 signatures are
/// v1.0's.
static CARD_MEMBERS: Shape = Shape::Proto {
    message: "AgentCard",
    changes: &[
        ("supportedInterfaces", Change::Dropped),
        ("securityRequirements", Change::Renamed("security")),
        ("signatures", Change::Unchanged),
    ],
    rows: &ROWS,
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

/// A v0.3 `security` list (`[{"name": [scopes]}, …]`) as v1.0 `securityRequirements`,
/// through the `SecurityRequirement` row; `None` when it is not one.
pub fn security_to_v1(v03: Value) -> Option<Value> {
    let Value::Array(requirements) = v03 else {
        return None;
    };
    let v1 = requirements
        .into_iter()
        .map(|r| SECURITY_REQUIREMENT.to_v1(r).ok());
    v1.collect::<Option<Vec<_>>>().map(Value::Array)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::schema;

    fn row_of(message: &str) -> &'static Shape {
        ROWS.iter()
            .find(|(name, _)| *name == message)
            .unwrap_or_else(|| panic!("{message} has no v0.3 row"))
            .1
    }

    /// Walks the schema from AgentCard along the rows: every message the card holds (but
    /// where a row drops or keeps a field unchanged) has a row, every change names a field,
    /// and a oneof's cases are its fields, each converted by its message's row. A message
    /// added to the proto without its v0.3 decision fails here.
    #[test]
    fn the_rows_cover_the_card_schema() {
        let mut todo = vec![("AgentCard", &CARD_MEMBERS)];
        let mut reached = Vec::new();
        while let Some((name, shape)) = todo.pop() {
            if reached.contains(&name) {
                continue;
            }
            reached.push(name);
            let message = schema::message(name).unwrap();
            match shape {
                Shape::Proto {
                    message: row_message,
                    changes,
                    ..
                } => {
                    assert_eq!(*row_message, name);
                    for (field, _) in *changes {
                        assert!(message.field(field).is_some(), "{name}.{field}");
                    }
                    for field in &message.fields {
                        let change = changes.iter().find(|(f, _)| *f == field.json_name);
                        if let (None | Some((_, Change::Renamed(_))), Some(inner)) =
                            (change, field.kind.message())
                        {
                            todo.push((inner.name.as_str(), row_of(&inner.name)));
                        }
                    }
                }
                Shape::Union { cases, .. } => {
                    let fields: Vec<&str> = message
                        .fields
                        .iter()
                        .map(|f| f.json_name.as_str())
                        .collect();
                    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
                    assert_eq!(names, fields, "{name}");
                    for (case, _, shape) in *cases {
                        let inner = message.field(case).unwrap().kind.message().unwrap();
                        assert!(std::ptr::eq(*shape, row_of(&inner.name)), "{name}.{case}");
                        todo.push((inner.name.as_str(), shape));
                    }
                }
                // The custom rows and the shared v0.3 flow row state their own members.
                Shape::Custom { .. } | Shape::Table { .. } => {}
            }
        }
        reached.sort();
        let mut rows: Vec<&str> = ROWS.iter().map(|(name, _)| *name).collect();
        rows.push("AgentCard");
        rows.sort();
        assert_eq!(reached, rows, "every row is reached");
    }
}

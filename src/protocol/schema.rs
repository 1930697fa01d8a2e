//! THE `lf.a2a.v1` message schema as the JSON code needs it, read once from the descriptor
//! set `build.rs` compiles from `proto/a2a.proto`: each message's fields by ProtoJSON name,
//! their presence (proto3 §"Field Presence") and which message they hold. Code that walks
//! a message as JSON (card signing's §8.4.1 default removal, the v0.3 card rows) reads it
//! here instead of restating the proto.
//!
//! What the descriptor does not carry stays with its user: the normative schema's
//! `REQUIRED` marks (the gateway's copy of the proto drops the annotations) live in
//! `signing`, the v0.3 renames in `legacy::card`.

use std::collections::HashMap;
use std::sync::LazyLock;

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorSet};

/// The package whose messages are described; other messages (`google.protobuf.Struct`,
/// `Timestamp`) are JSON values the schema does not look into.
const PACKAGE: &str = "lf.a2a.v1";

/// One message of the package.
#[derive(Debug)]
pub struct Message {
    /// The message's name without its package (`AgentCard`).
    pub name: String,
    /// In declaration order.
    pub fields: Vec<Field>,
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    /// The ProtoJSON member name (`supportedInterfaces`).
    pub json_name: String,
    pub presence: Presence,
    pub kind: Kind,
    /// A `repeated` field (a JSON list), maps aside.
    pub repeated: bool,
    /// A `bool` field (its query parameter is `true` or `false`, spec 11.5).
    pub boolean: bool,
}

/// Whether a field tells "set to the default" from "not set".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// proto3 `optional`, a `oneof` member or a singular message.
    Explicit,
    /// Scalars, enums, repeated fields and maps: the default means "not set".
    Implicit,
}

/// What a field's JSON value holds, as far as messages of the package go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Scalars, enums, lists and maps of them, and messages of other packages.
    Leaf,
    /// One message of the package, by name.
    Message(String),
    /// A list of messages of the package.
    List(String),
    /// A map (a JSON object) whose values are messages of the package.
    Map(String),
}

impl Message {
    /// The field with ProtoJSON name `json_name`.
    pub fn field(&self, json_name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.json_name == json_name)
    }
}

impl Kind {
    /// The message of the package a field holds (one, a list or map values), if any.
    pub fn message(&self) -> Option<&'static Message> {
        match self {
            Kind::Leaf => None,
            Kind::Message(name) | Kind::List(name) | Kind::Map(name) => message(name),
        }
    }
}

/// The message `name` (without package) of `lf.a2a.v1`.
pub fn message(name: &str) -> Option<&'static Message> {
    SCHEMA.get(name)
}

static SCHEMA: LazyLock<HashMap<String, Message>> = LazyLock::new(|| {
    let bytes = include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));
    // build.rs wrote these bytes with protoc in this very build: they always decode.
    let set = FileDescriptorSet::decode(&bytes[..]).expect("the build's descriptor set decodes");
    set.file
        .iter()
        .filter(|file| file.package() == PACKAGE)
        .flat_map(|file| &file.message_type)
        .map(|proto| (proto.name().to_owned(), describe(proto)))
        .collect()
});

fn describe(proto: &DescriptorProto) -> Message {
    let fields = proto
        .field
        .iter()
        .map(|field| Field {
            json_name: field.json_name().to_owned(),
            presence: presence(field),
            kind: kind(proto, field),
            repeated: field.label() == Label::Repeated && !is_map(proto, field),
            boolean: field.r#type() == Type::Bool,
        })
        .collect();
    Message {
        name: proto.name().to_owned(),
        fields,
    }
}

fn presence(field: &FieldDescriptorProto) -> Presence {
    let singular_message = field.r#type() == Type::Message && field.label() != Label::Repeated;
    // A proto3 `optional` field sits in a synthetic oneof, so `oneof_index` covers it too.
    if field.oneof_index.is_some() || singular_message {
        Presence::Explicit
    } else {
        Presence::Implicit
    }
}

/// The nested `*Entry` message of a map field, if `field` is one.
fn map_entry<'a>(
    proto: &'a DescriptorProto,
    field: &FieldDescriptorProto,
) -> Option<&'a DescriptorProto> {
    if field.r#type() != Type::Message {
        return None;
    }
    proto
        .nested_type
        .iter()
        .filter(|n| n.options.as_ref().is_some_and(|o| o.map_entry()))
        .find(|n| field.type_name().ends_with(&format!(".{}", n.name())))
}

fn is_map(proto: &DescriptorProto, field: &FieldDescriptorProto) -> bool {
    map_entry(proto, field).is_some()
}

fn kind(proto: &DescriptorProto, field: &FieldDescriptorProto) -> Kind {
    if field.r#type() != Type::Message {
        return Kind::Leaf;
    }
    // A map is a repeated nested `*Entry` message; its value field (number 2) holds the
    // message, if any.
    let entry = map_entry(proto, field);
    let (target, wrap): (&str, fn(String) -> Kind) = match entry {
        Some(entry) => (
            entry
                .field
                .iter()
                .find(|f| f.number() == 2)
                .map_or("", |f| f.type_name()),
            Kind::Map,
        ),
        None if field.label() == Label::Repeated => (field.type_name(), Kind::List),
        None => (field.type_name(), Kind::Message),
    };
    match target.strip_prefix(".lf.a2a.v1.") {
        Some(name) => wrap(name.to_owned()),
        None => Kind::Leaf,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_carry_presence_and_kind_from_the_proto() {
        let card = message("AgentCard").unwrap();
        assert_eq!(card.name, "AgentCard");
        let field = |name: &str| card.field(name).unwrap();
        assert_eq!(field("name").presence, Presence::Implicit);
        assert_eq!(field("name").kind, Kind::Leaf);
        // proto3 `optional`.
        assert_eq!(field("iconUrl").presence, Presence::Explicit);
        assert_eq!(field("provider").presence, Presence::Explicit);
        assert_eq!(
            field("provider").kind,
            Kind::Message("AgentProvider".into())
        );
        assert_eq!(field("skills").presence, Presence::Implicit);
        assert_eq!(field("skills").kind, Kind::List("AgentSkill".into()));
        assert_eq!(
            field("securitySchemes").kind,
            Kind::Map("SecurityScheme".into())
        );
        assert_eq!(field("securitySchemes").presence, Presence::Implicit);
        assert_eq!(field("defaultInputModes").kind, Kind::Leaf);
        assert!(card.field("security_schemes").is_none(), "JSON names only");

        let scheme = message("SecurityScheme").unwrap();
        // A oneof member.
        let api_key = scheme.field("apiKeySecurityScheme").unwrap();
        assert_eq!(api_key.presence, Presence::Explicit);
        assert_eq!(api_key.kind.message().unwrap().name, "APIKeySecurityScheme");
        // A map of scalars and a message of another package are leaves.
        let flow = message("ClientCredentialsOAuthFlow").unwrap();
        assert_eq!(flow.field("scopes").unwrap().kind, Kind::Leaf);
        let extension = message("AgentExtension").unwrap();
        assert_eq!(extension.field("params").unwrap().kind, Kind::Leaf);
        assert_eq!(
            extension.field("params").unwrap().presence,
            Presence::Explicit
        );
        assert!(message("Struct").is_none() && message("AgentCardX").is_none());

        // What a query parameter of the HTTP+JSON front is read as.
        let list = message("ListTasksRequest").unwrap();
        assert!(list.field("includeArtifacts").unwrap().boolean);
        assert!(!list.field("pageSize").unwrap().boolean);
        assert!(card.field("skills").unwrap().repeated);
        assert!(card.field("defaultInputModes").unwrap().repeated);
        assert!(!card.field("securitySchemes").unwrap().repeated);
        assert!(!card.field("name").unwrap().repeated);
    }
}

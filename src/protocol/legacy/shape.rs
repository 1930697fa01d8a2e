//! The walker that applies the object rows of the mapping table (`objects`, `card`) in
//! either direction: v1.0 ProtoJSON → v0.3 JSON for replies and stream events, v0.3 JSON →
//! v1.0 ProtoJSON for params. A row renames members, maps enum values, recurses into nested
//! objects, or names a function for the few conversions that are no renaming. A `Proto` row
//! takes its members from the compiled schema (`protocol::schema`) and states only the v0.3
//! differences.

use serde_json::{Map, Value};

use crate::protocol::schema::{self, Kind};

/// `(v1.0 value, v0.3 value)` pairs of one enum; the first pair also stands for v1.0 values
/// outside the table (a newer agent's state is `unknown` to a v0.3 client).
pub type Pairs = &'static [(&'static str, &'static str)];

/// How one member's value converts.
#[derive(Clone, Copy)]
pub enum Conv {
    /// The same JSON in both versions (ids, strings, metadata objects, lists of strings).
    Same,
    /// An enum, by its value pairs.
    Enum(Pairs),
    /// A nested object.
    Object(&'static Shape),
    /// A list of objects.
    List(&'static Shape),
    /// A map of objects; the keys are kept.
    Map(&'static Shape),
    /// A boolean meaning the opposite (`returnImmediately` ↔ `blocking`).
    Negated,
    /// A history length: v0.3's `0` means "no limit", which v1.0 writes as unset (v1.0's
    /// `0` means "no history", spec 3.2.4).
    HistoryLength,
    /// One string in v1.0, a list in v0.3 (`scheme` ↔ `schemes`); v0.3's first item is kept.
    OneOfList,
}

/// One member of an object row.
#[derive(Clone, Copy)]
pub struct Member {
    pub v1: &'static str,
    pub v03: &'static str,
    pub conv: Conv,
    /// Required by the v0.3 schema (checked on v0.3 input).
    pub required: bool,
}

/// An optional member named `v1` in v1.0 and `v03` in v0.3, converted by `conv`.
pub const fn m(v1: &'static str, v03: &'static str, conv: Conv) -> Member {
    Member {
        v1,
        v03,
        conv,
        required: false,
    }
}

/// Members that only one version has, filled in on the way to v0.3 from the converted
/// object (e.g. `final`, derived from the state).
pub type Derive = fn(&mut Map<String, Value>);

/// How a `Proto` row treats one field of its message, where v0.3 differs from "the same
/// name, converted by the field's type".
#[derive(Clone, Copy)]
pub enum Change {
    /// The member's v0.3 name.
    Renamed(&'static str),
    /// No v0.3 member: v0.3 has no such field, or the row's caller moves it.
    Dropped,
    /// The same JSON in both versions, not looked into.
    Unchanged,
}

/// The v0.3 rows of v1.0 messages, by message name: how a `Proto` row converts the fields
/// that hold messages.
pub type Rows = &'static [(&'static str, &'static Shape)];

/// One object row of the table.
pub enum Shape {
    /// Converted member by member; members outside the row are dropped. `kind` is the v0.3
    /// discriminator the object carries.
    Table {
        name: &'static str,
        kind: Option<&'static str>,
        members: &'static [Member],
        derive: Option<Derive>,
    },
    /// The v1.0 message `message` of the schema, converted field by field as a `Table` with
    /// a member per schema field: each keeps its name and converts by its type (a nested
    /// message by its row in `rows`), except for the `changes`.
    Proto {
        message: &'static str,
        changes: &'static [(&'static str, Change)],
        rows: Rows,
        derive: Option<Derive>,
    },
    /// A oneof: v1.0 wraps the value in a member named after the case, v0.3 tags the value
    /// itself with `tag` (`kind`, `type`). Cases: `(v1.0 member, v0.3 tag, shape)`.
    Union {
        name: &'static str,
        tag: &'static str,
        cases: &'static [(&'static str, &'static str, &'static Shape)],
    },
    /// A conversion that is no renaming, as two functions.
    Custom {
        name: &'static str,
        to_v03: fn(Map<String, Value>) -> Value,
        to_v1: fn(Value) -> Result<Value, Invalid>,
    },
}

/// v0.3 input that does not fit the v0.3 schema: where (member names, outermost first) and
/// what.
#[derive(Debug, PartialEq)]
pub struct Invalid {
    pub path: Vec<String>,
    pub problem: String,
}

impl Invalid {
    pub fn new(problem: impl Into<String>) -> Invalid {
        Invalid {
            path: Vec::new(),
            problem: problem.into(),
        }
    }

    /// The same problem, one level further out.
    pub fn within(mut self, segment: impl Into<String>) -> Invalid {
        self.path.insert(0, segment.into());
        self
    }

    /// `a.b[0].c: problem`.
    pub fn describe(&self) -> String {
        let mut path = String::new();
        for segment in &self.path {
            if !segment.starts_with('[') && !path.is_empty() {
                path.push('.');
            }
            path.push_str(segment);
        }
        if path.is_empty() {
            self.problem.clone()
        } else {
            format!("{path}: {}", self.problem)
        }
    }
}

impl Shape {
    fn name(&self) -> &'static str {
        match self {
            Shape::Table { name, .. }
            | Shape::Proto { message: name, .. }
            | Shape::Union { name, .. }
            | Shape::Custom { name, .. } => name,
        }
    }

    /// The members of a `Proto` row: one per field of its schema message.
    fn proto_members(
        message: &'static str,
        changes: &'static [(&'static str, Change)],
        rows: Rows,
    ) -> impl Iterator<Item = Member> {
        let fields = schema::message(message).map_or(&[][..], |m| &m.fields[..]);
        fields.iter().filter_map(move |field| {
            let v1 = field.json_name.as_str();
            // A message without a row passes unchanged (the card rows' test walks the
            // schema so that every message the card holds has its row).
            let row = |name: &str| rows.iter().find(|(m, _)| *m == name).map(|(_, s)| *s);
            let by_type = match &field.kind {
                Kind::Leaf => None,
                Kind::Message(name) => row(name).map(Conv::Object),
                Kind::List(name) => row(name).map(Conv::List),
                Kind::Map(name) => row(name).map(Conv::Map),
            }
            .unwrap_or(Conv::Same);
            let (v03, conv) = match changes.iter().find(|(name, _)| *name == v1) {
                None => (v1, by_type),
                Some((_, Change::Renamed(v03))) => (*v03, by_type),
                Some((_, Change::Dropped)) => return None,
                Some((_, Change::Unchanged)) => (v1, Conv::Same),
            };
            Some(Member {
                v1,
                v03,
                conv,
                required: false,
            })
        })
    }

    /// A v1.0 value of this row as v0.3. A value that is not an object passes unchanged
    /// (the agent's reply was decoded into the typed reply, so this does not happen).
    pub fn to_v03(&self, value: Value) -> Value {
        let Value::Object(mut object) = value else {
            return value;
        };
        match self {
            Shape::Table {
                kind,
                members,
                derive,
                ..
            } => {
                let mut out = Map::new();
                if let Some(kind) = kind {
                    out.insert("kind".into(), Value::from(*kind));
                }
                members_to_v03(members.iter().copied(), object, &mut out);
                if let Some(derive) = derive {
                    derive(&mut out);
                }
                Value::Object(out)
            }
            Shape::Proto {
                message,
                changes,
                rows,
                derive,
            } => {
                let mut out = Map::new();
                members_to_v03(
                    Self::proto_members(message, changes, rows),
                    object,
                    &mut out,
                );
                if let Some(derive) = derive {
                    derive(&mut out);
                }
                Value::Object(out)
            }
            Shape::Union { tag, cases, .. } => {
                for (case, name, shape) in cases.iter() {
                    if let Some(inner) = object.remove(*case) {
                        let mut converted = shape.to_v03(inner);
                        if let Value::Object(map) = &mut converted {
                            map.insert((*tag).into(), Value::from(*name));
                        }
                        return converted;
                    }
                }
                Value::Object(Map::new())
            }
            Shape::Custom { to_v03, .. } => to_v03(object),
        }
    }

    /// A v0.3 value of this row as v1.0, or what in it breaks the v0.3 schema.
    pub fn to_v1(&self, value: Value) -> Result<Value, Invalid> {
        match self {
            Shape::Table { members, .. } => {
                members_to_v1(members.iter().copied(), self.object(value)?)
            }
            Shape::Proto {
                message,
                changes,
                rows,
                ..
            } => members_to_v1(
                Self::proto_members(message, changes, rows),
                self.object(value)?,
            ),
            Shape::Union { tag, cases, .. } => {
                let object = self.object(value)?;
                let found = object
                    .get(*tag)
                    .and_then(Value::as_str)
                    .and_then(|t| cases.iter().find(|(_, name, _)| *name == t));
                let Some((case, _, shape)) = found else {
                    let names: Vec<_> = cases.iter().map(|(_, name, _)| *name).collect();
                    let why = format!("must be one of {}", names.join(", "));
                    return Err(Invalid::new(why).within(*tag));
                };
                let mut out = Map::new();
                out.insert((*case).into(), shape.to_v1(Value::Object(object))?);
                Ok(Value::Object(out))
            }
            Shape::Custom { to_v1, .. } => to_v1(value),
        }
    }

    fn object(&self, value: Value) -> Result<Map<String, Value>, Invalid> {
        match value {
            Value::Object(object) => Ok(object),
            _ => Err(Invalid::new(format!("expected a {} object", self.name()))),
        }
    }
}

/// Moves `members` of a v1.0 object into its v0.3 form `out`.
fn members_to_v03(
    members: impl Iterator<Item = Member>,
    mut object: Map<String, Value>,
    out: &mut Map<String, Value>,
) {
    for member in members {
        let converted = match object.remove(member.v1).filter(|v| !v.is_null()) {
            Some(v) => member.conv.to_v03(v),
            // ProtoJSON omits defaults the v0.3 schema requires: ids become "",
            // enums their first value, lists empty.
            None if member.required => member.conv.absent_v03(),
            None => None,
        };
        if let Some(v) = converted {
            out.insert(member.v03.into(), v);
        }
    }
}

/// The v1.0 form of a v0.3 object made of `members`; members outside them are dropped.
fn members_to_v1(
    members: impl Iterator<Item = Member>,
    mut object: Map<String, Value>,
) -> Result<Value, Invalid> {
    let mut out = Map::new();
    for member in members {
        match object.remove(member.v03).filter(|v| !v.is_null()) {
            Some(v) => {
                let v = member.conv.to_v1(v).map_err(|e| e.within(member.v03))?;
                if let Some(v) = v {
                    out.insert(member.v1.into(), v);
                }
            }
            None if member.required => {
                return Err(Invalid::new("field required").within(member.v03))
            }
            None => {}
        }
    }
    Ok(Value::Object(out))
}

impl Conv {
    /// The v0.3 value of a required member v1.0 left out (its default).
    fn absent_v03(self) -> Option<Value> {
        match self {
            Conv::Same => Some(Value::from("")),
            Conv::Enum(pairs) => Some(Value::from(pairs[0].1)),
            Conv::List(_) | Conv::OneOfList => Some(Value::Array(Vec::new())),
            Conv::Object(shape) => Some(shape.to_v03(Value::Object(Map::new()))),
            Conv::Map(_) | Conv::Negated | Conv::HistoryLength => None,
        }
    }

    /// A v0.3 value as v1.0 (`null` where the member would be left out).
    pub fn to_v1_value(self, value: Value) -> Result<Value, Invalid> {
        Ok(self.to_v1(value)?.unwrap_or_default())
    }

    /// `None`: the member is left out.
    fn to_v03(self, value: Value) -> Option<Value> {
        Some(match self {
            Conv::Same | Conv::HistoryLength => value,
            Conv::Enum(pairs) => {
                let v1 = value.as_str().unwrap_or_default();
                let pair = pairs.iter().find(|(a, _)| *a == v1).unwrap_or(&pairs[0]);
                Value::from(pair.1)
            }
            Conv::Object(shape) => shape.to_v03(value),
            Conv::List(shape) => Value::Array(
                items(value)
                    .into_iter()
                    .map(|item| shape.to_v03(item))
                    .collect(),
            ),
            Conv::Map(shape) => match value {
                Value::Object(map) => {
                    Value::Object(map.into_iter().map(|(k, v)| (k, shape.to_v03(v))).collect())
                }
                other => other,
            },
            Conv::Negated => negate(value),
            Conv::OneOfList => Value::Array(vec![value]),
        })
    }

    fn to_v1(self, value: Value) -> Result<Option<Value>, Invalid> {
        Ok(Some(match self {
            Conv::Same => value,
            Conv::Enum(pairs) => {
                let v03 = value.as_str().unwrap_or_default();
                let Some((v1, _)) = pairs.iter().find(|(_, b)| *b == v03) else {
                    let names: Vec<_> = pairs.iter().map(|(_, b)| *b).collect();
                    return Err(Invalid::new(format!(
                        "{value} is not one of {}",
                        names.join(", ")
                    )));
                };
                Value::from(*v1)
            }
            Conv::Object(shape) => shape.to_v1(value)?,
            Conv::List(shape) => {
                let Value::Array(list) = value else {
                    return Err(Invalid::new("expected a list"));
                };
                let converted = list
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| shape.to_v1(item).map_err(|e| e.within(format!("[{i}]"))))
                    .collect::<Result<_, _>>()?;
                Value::Array(converted)
            }
            Conv::Map(shape) => match value {
                Value::Object(map) => Value::Object(
                    map.into_iter()
                        .map(|(k, v)| {
                            shape
                                .to_v1(v)
                                .map_err(|e| e.within(k.clone()))
                                .map(|v| (k, v))
                        })
                        .collect::<Result<_, _>>()?,
                ),
                _ => return Err(Invalid::new("expected an object")),
            },
            Conv::Negated => negate(value),
            Conv::HistoryLength if value.as_i64() == Some(0) => return Ok(None),
            Conv::HistoryLength => value,
            Conv::OneOfList => match value {
                Value::Array(list) => match list.into_iter().next() {
                    Some(first) => first,
                    None => return Ok(None),
                },
                _ => return Err(Invalid::new("expected a list")),
            },
        }))
    }
}

fn items(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => vec![other],
    }
}

/// A boolean's opposite; anything else is left for the v1.0 decoder to refuse.
fn negate(value: Value) -> Value {
    match value {
        Value::Bool(b) => Value::Bool(!b),
        other => other,
    }
}

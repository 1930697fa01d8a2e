//! Differential transcripts: the same request sequence sent down several paths (a reference
//! endpoint, then the gateway in front of each binding), each answer normalised for what
//! legitimately differs (generated ids and timestamps, number formatting, default-valued
//! members), then compared step by step. Used by `tests/it/interop.rs` (v1.0),
//! `tests/it/legacy.rs` (v0.3), and per front by `tests/it/rest_front.rs`,
//! `tests/it/grpc_interop.rs` and `tests/it/cross_front.rs`.

use std::collections::BTreeMap;
use std::future::Future;

use serde_json::{json, Map, Value};

/// `value` with generated ids numbered in order of appearance (`ids` carries the numbering
/// across one transcript), timestamps and page tokens replaced, numbers as floats, and
/// default-valued members (which ProtoJSON may omit) dropped.
pub fn normalise(value: &Value, ids: &mut BTreeMap<String, String>) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, v) in map {
                let generated = matches!(key.as_str(), "timestamp" | "nextPageToken");
                let v = match v.as_str() {
                    // Timestamps, and page tokens that encode a generated id and timestamp.
                    Some(text) if generated && !text.is_empty() => json!(format!("<{key}>")),
                    _ => normalise(v, ids),
                };
                let default = matches!(&v, Value::Null | Value::Bool(false))
                    || v.as_str() == Some("")
                    || v.as_f64() == Some(0.0)
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.as_object().is_some_and(Map::is_empty);
                if !default {
                    out.insert(key.clone(), v);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| normalise(v, ids)).collect()),
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::String(s) => Value::String(replace_uuids(s, ids)),
        other => other.clone(),
    }
}

/// `text` with every UUID replaced by its number in `ids`.
pub fn replace_uuids(text: &str, ids: &mut BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < text.len() {
        let candidate = text
            .get(i..i + 36)
            .filter(|c| uuid::Uuid::parse_str(c).is_ok());
        if let Some(id) = candidate {
            let n = ids.len();
            out.push_str(
                ids.entry(id.to_owned())
                    .or_insert_with(|| format!("<id-{n}>")),
            );
            i += 36;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Runs `scenario` down every one of `paths` (the first is the reference; each a URL, or
/// whatever else tells the scenario where to go) and asserts the transcripts, normalised
/// and then passed through `known` (differences that are the reference SDK's own), are
/// equal step by step.
pub async fn differential<P, F, Fut>(
    name: &str,
    paths: &[(&'static str, P)],
    known: fn(Value) -> Value,
    scenario: F,
) where
    P: Clone,
    F: Fn(P) -> Fut,
    Fut: Future<Output = Vec<Value>>,
{
    let mut transcripts = Vec::new();
    for (path, target) in paths {
        let raw = scenario(target.clone()).await;
        let mut ids = BTreeMap::new();
        let normalised: Vec<Value> = raw.iter().map(|v| known(normalise(v, &mut ids))).collect();
        transcripts.push((*path, raw, normalised));
    }
    let (reference, raw_reference, expected) = &transcripts[0];
    for (path, raw, actual) in &transcripts[1..] {
        for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
            assert_eq!(
                a, e,
                "{name}: step {i}: {path} differs from {reference}\n{path}: {}\n{reference}: {}",
                raw[i], raw_reference[i]
            );
        }
        assert_eq!(
            actual.len(),
            expected.len(),
            "{name}: {path} has {} steps, {reference} {}",
            actual.len(),
            expected.len()
        );
    }
}

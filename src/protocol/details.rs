//! `google.rpc.Status` details → ProtoJSON `Any` objects for `error.data` (spec 3.3.2, 9.5),
//! and back (`to_status_bytes`, for the gRPC front).
//!
//! tonic-types' detail types have no serde, and its `ErrorDetails` drops unknown types, so
//! the status is decoded here as raw `Any`s and each well-known `google.rpc` type is written
//! field by field (defaults omitted, as ProtoJSON does). Unknown types keep their bytes as
//! `{"@type": …, "value": <base64>}` so nothing is lost.

use base64::Engine as _;
use prost::Message;
use serde_json::{json, Map, Value};
use tonic_types::pb;

const TYPE_PREFIX: &str = "type.googleapis.com/google.rpc.";
/// `@type` of `google.rpc.ErrorInfo`.
pub const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// `@type` of `google.rpc.BadRequest`.
pub const BAD_REQUEST: &str = "type.googleapis.com/google.rpc.BadRequest";
/// `@type` of `google.rpc.RetryInfo`.
pub const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// A `google.rpc.RetryInfo` detail: the client may try again after `wait` (to the
/// millisecond), the advice `Retry-After` gives in whole seconds.
pub(crate) fn retry_info(wait: std::time::Duration) -> Value {
    let nanos = (wait.subsec_millis() * 1_000_000) as i32;
    let seconds = i64::try_from(wait.as_secs()).unwrap_or(i64::MAX);
    json!({"@type": RETRY_INFO, "retryDelay": duration(seconds, nanos)})
}

/// Decodes `grpc-status-details-bin` (a serialized `google.rpc.Status`) into `error.data`
/// objects. Undecodable bytes yield one opaque entry rather than an error.
pub fn from_status_bytes(bytes: &[u8]) -> Vec<Value> {
    if bytes.is_empty() {
        return Vec::new();
    }
    match pb::Status::decode(bytes) {
        Ok(status) => status
            .details
            .iter()
            .map(|any| any_to_json(&any.type_url, &any.value))
            .collect(),
        Err(_) => vec![opaque("type.googleapis.com/google.rpc.Status", bytes)],
    }
}

/// `error.data` objects as a serialized `google.rpc.Status` of `code` and `message`, for
/// `grpc-status-details-bin`. `ErrorInfo` and `BadRequest` (what the gateway writes) are
/// encoded from their fields, an opaque object (`value`, base64) from its bytes; other
/// objects cannot be encoded back and are left out.
pub fn to_status_bytes(code: i32, message: &str, data: &[Value]) -> Vec<u8> {
    let details = data.iter().filter_map(json_to_any).collect();
    let status = pb::Status {
        code,
        message: message.to_owned(),
        details,
    };
    status.encode_to_vec()
}

/// One ProtoJSON `Any` object as an `Any`, where its type is one `to_status_bytes` encodes.
fn json_to_any(object: &Value) -> Option<prost_types::Any> {
    let type_url = object.get("@type")?.as_str()?;
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let value = match type_url {
        ERROR_INFO => pb::ErrorInfo {
            reason: text(object, "reason"),
            domain: text(object, "domain"),
            metadata: object
                .get("metadata")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
        }
        .encode_to_vec(),
        BAD_REQUEST => pb::BadRequest {
            field_violations: object
                .get("fieldViolations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|v| pb::bad_request::FieldViolation {
                    field: text(v, "field"),
                    description: text(v, "description"),
                    reason: text(v, "reason"),
                    localized_message: None,
                })
                .collect(),
        }
        .encode_to_vec(),
        _ => {
            let value = object.get("value")?.as_str()?;
            base64::engine::general_purpose::STANDARD
                .decode(value)
                .ok()?
        }
    };
    Some(prost_types::Any {
        type_url: type_url.to_owned(),
        value,
    })
}

/// One `Any` as a ProtoJSON object with `@type`.
pub fn any_to_json(type_url: &str, value: &[u8]) -> Value {
    let name = type_url.strip_prefix(TYPE_PREFIX).unwrap_or("");
    let fields = match name {
        "ErrorInfo" => pb::ErrorInfo::decode(value).ok().map(|m| {
            let mut o = Obj::default();
            o.str("reason", &m.reason).str("domain", &m.domain);
            if !m.metadata.is_empty() {
                o.0.insert("metadata".into(), json!(m.metadata));
            }
            o.0
        }),
        "BadRequest" => pb::BadRequest::decode(value).ok().map(|m| {
            let violations: Vec<Value> = m
                .field_violations
                .iter()
                .map(|v| {
                    let mut o = Obj::default();
                    o.str("field", &v.field)
                        .str("description", &v.description)
                        .str("reason", &v.reason);
                    if let Some(lm) = &v.localized_message {
                        o.0.insert("localizedMessage".into(), localized(lm));
                    }
                    Value::Object(o.0)
                })
                .collect();
            Obj::default().list("fieldViolations", violations).take()
        }),
        "RetryInfo" => pb::RetryInfo::decode(value).ok().map(|m| {
            let mut o = Obj::default();
            if let Some(d) = m.retry_delay {
                o.0.insert("retryDelay".into(), json!(duration(d.seconds, d.nanos)));
            }
            o.0
        }),
        "DebugInfo" => pb::DebugInfo::decode(value).ok().map(|m| {
            let mut o = Obj::default();
            o.list(
                "stackEntries",
                m.stack_entries.iter().map(|s| json!(s)).collect(),
            )
            .str("detail", &m.detail);
            o.0
        }),
        "QuotaFailure" => pb::QuotaFailure::decode(value).ok().map(|m| {
            let violations = m
                .violations
                .iter()
                .map(|v| {
                    let mut o = Obj::default();
                    o.str("subject", &v.subject)
                        .str("description", &v.description)
                        .str("apiService", &v.api_service)
                        .str("quotaMetric", &v.quota_metric)
                        .str("quotaId", &v.quota_id);
                    if !v.quota_dimensions.is_empty() {
                        o.0.insert("quotaDimensions".into(), json!(v.quota_dimensions));
                    }
                    if v.quota_value != 0 {
                        o.0.insert("quotaValue".into(), json!(v.quota_value.to_string()));
                    }
                    if let Some(f) = v.future_quota_value {
                        o.0.insert("futureQuotaValue".into(), json!(f.to_string()));
                    }
                    Value::Object(o.0)
                })
                .collect();
            Obj::default().list("violations", violations).take()
        }),
        "PreconditionFailure" => pb::PreconditionFailure::decode(value).ok().map(|m| {
            let violations = m
                .violations
                .iter()
                .map(|v| {
                    let mut o = Obj::default();
                    o.str("type", &v.r#type)
                        .str("subject", &v.subject)
                        .str("description", &v.description);
                    Value::Object(o.0)
                })
                .collect();
            Obj::default().list("violations", violations).take()
        }),
        "RequestInfo" => pb::RequestInfo::decode(value).ok().map(|m| {
            let mut o = Obj::default();
            o.str("requestId", &m.request_id)
                .str("servingData", &m.serving_data);
            o.0
        }),
        "ResourceInfo" => pb::ResourceInfo::decode(value).ok().map(|m| {
            let mut o = Obj::default();
            o.str("resourceType", &m.resource_type)
                .str("resourceName", &m.resource_name)
                .str("owner", &m.owner)
                .str("description", &m.description);
            o.0
        }),
        "Help" => pb::Help::decode(value).ok().map(|m| {
            let links = m
                .links
                .iter()
                .map(|l| {
                    let mut o = Obj::default();
                    o.str("description", &l.description).str("url", &l.url);
                    Value::Object(o.0)
                })
                .collect();
            Obj::default().list("links", links).take()
        }),
        "LocalizedMessage" => pb::LocalizedMessage::decode(value)
            .ok()
            .and_then(|m| localized(&m).as_object().cloned()),
        _ => None,
    };
    match fields {
        Some(mut fields) => {
            let mut obj = Map::with_capacity(fields.len() + 1);
            obj.insert("@type".into(), json!(type_url));
            obj.append(&mut fields);
            Value::Object(obj)
        }
        None => opaque(type_url, value),
    }
}

fn opaque(type_url: &str, value: &[u8]) -> Value {
    json!({
        "@type": type_url,
        "value": base64::engine::general_purpose::STANDARD.encode(value),
    })
}

fn localized(m: &pb::LocalizedMessage) -> Value {
    let mut o = Obj::default();
    o.str("locale", &m.locale).str("message", &m.message);
    Value::Object(o.0)
}

/// ProtoJSON `Duration`: seconds with 0, 3, 6 or 9 fractional digits and an `s` suffix.
fn duration(seconds: i64, nanos: i32) -> String {
    let sign = if seconds < 0 || nanos < 0 { "-" } else { "" };
    let (s, n) = (seconds.unsigned_abs(), nanos.unsigned_abs());
    match n {
        0 => format!("{sign}{s}s"),
        n if n % 1_000_000 == 0 => format!("{sign}{s}.{:03}s", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{sign}{s}.{:06}s", n / 1_000),
        n => format!("{sign}{s}.{n:09}s"),
    }
}

/// A JSON object builder that omits default values, as ProtoJSON does.
#[derive(Default)]
struct Obj(Map<String, Value>);

impl Obj {
    fn str(&mut self, key: &str, value: &str) -> &mut Self {
        if !value.is_empty() {
            self.0.insert(key.into(), json!(value));
        }
        self
    }

    fn take(&mut self) -> Map<String, Value> {
        std::mem::take(&mut self.0)
    }

    fn list(&mut self, key: &str, values: Vec<Value>) -> &mut Self {
        if !values.is_empty() {
            self.0.insert(key.into(), Value::Array(values));
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_use_protojson_form() {
        assert_eq!(duration(3, 0), "3s");
        assert_eq!(duration(1, 500_000_000), "1.500s");
        assert_eq!(duration(0, 1_000), "0.000001s");
    }

    #[test]
    fn the_gateway_s_details_go_to_a_status_and_back() {
        let data = vec![
            json!({"@type": ERROR_INFO, "reason": "R", "domain": "d", "metadata": {"k": "v"}}),
            json!({"@type": BAD_REQUEST, "fieldViolations": [{"field": "f", "description": "why"}]}),
            json!({"@type": "type.example.com/x.Y", "value": "AQID"}),
        ];
        let bytes = to_status_bytes(3, "m", &data);
        let status = pb::Status::decode(&bytes[..]).unwrap();
        assert_eq!((status.code, status.message.as_str()), (3, "m"));
        assert_eq!(from_status_bytes(&bytes), data);
    }

    #[test]
    fn retry_info_reads_back_as_it_was_written() {
        let written = retry_info(std::time::Duration::from_micros(1_500_700));
        assert_eq!(
            written,
            json!({"@type": RETRY_INFO, "retryDelay": "1.500s"})
        );
        let encoded = pb::RetryInfo {
            retry_delay: Some(prost_types::Duration {
                seconds: 1,
                nanos: 500_000_000,
            }),
        }
        .encode_to_vec();
        assert_eq!(any_to_json(RETRY_INFO, &encoded), written);
    }

    #[test]
    fn unknown_types_keep_their_bytes() {
        let v = any_to_json("type.example.com/x.Y", &[1, 2, 3]);
        assert_eq!(v, json!({"@type": "type.example.com/x.Y", "value": "AQID"}));
    }
}

//! The structure-aware model of a JSON-RPC request to the gateway (`arbitrary`): a single
//! call or a batch, each with a method from the operation table (or a legacy, odd or
//! missing one), params shaped like the operation's request (fields of the A2A schema
//! with typical or odd values), ids of every JSON type, odd strings and numbers, deep
//! nesting; written as JSON text by hand (so that it can hold what serializers never
//! write: lone surrogates, `1e400`, 30-digit integers, duplicated members), then mutated
//! at the byte level. It also scripts the in-process backend's answers.

use std::fmt::Write as _;

use arbitrary::Arbitrary;

use crate::protocol::ops::Op;

/// One input of the `jsonrpc_model` target.
#[derive(Arbitrary, Clone, Debug)]
pub struct JsonRpcCase {
    pub(crate) body: RequestBody,
    pub(crate) version: VersionHeader,
    /// Byte-level mutations applied to the written body, in order.
    pub(crate) mutations: Vec<Mutation>,
    /// The body arrives in this many chunks (0 and 1: one).
    pub(crate) chunks: u8,
    /// A body limit of this many bytes instead of the default.
    pub(crate) small_limit: Option<u8>,
    /// The route pins a tenant.
    pub(crate) fixed_tenant: bool,
    /// The route has a card service (GetExtendedAgentCard replies are rewritten).
    pub(crate) card: bool,
    pub(crate) backend: BackendScript,
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum RequestBody {
    One(Call),
    Batch(Vec<Call>),
    Raw(Vec<u8>),
}

/// One request object. Members are written in the order given by `order` (a rotation),
/// `extra` members after them.
#[derive(Arbitrary, Clone, Debug)]
pub(crate) struct Call {
    pub(crate) jsonrpc: Version,
    pub(crate) id: Id,
    pub(crate) method: Method,
    pub(crate) params: Params,
    pub(crate) extra: Vec<(Text, Json)>,
    pub(crate) order: u8,
    /// Member names written with `\u` escapes (`"\u0069d"`), as JSON allows.
    pub(crate) escaped_names: bool,
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Version {
    Right,
    Absent,
    Other(Text),
    NotString(Json),
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Id {
    Absent,
    Null,
    Int(i64),
    /// An integer of 20 to 275 digits.
    Big(u8),
    Str(Text),
    Float(f64),
    Number(NumberText),
    Other(Json),
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Method {
    Op(u8),
    /// A v0.3 method name, which v1.0 does not know.
    Legacy(u8),
    /// An operation name with its case changed or a suffix.
    NearMiss(u8, u8),
    Odd(Text),
    NotString(Json),
    Absent,
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Params {
    Absent,
    /// Fields of the method's request type (or of another's, when `method` is not one).
    Shaped(Vec<Field>),
    Json(Json),
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) struct Field {
    /// Index into the schema's fields (`FIELDS`).
    pub(crate) name: u8,
    pub(crate) value: FieldValue,
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum FieldValue {
    /// A value of the field's own type, picked by the number.
    Typical(u8),
    Any(Json),
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Number(NumberText),
    Str(Text),
    Array(Vec<Json>),
    Object(Vec<(Text, Json)>),
    /// Arrays nested this many levels (up to a few thousand).
    Deep(u16),
}

/// Number texts that `f64`/`i64` do not produce.
#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum NumberText {
    NegativeZero,
    /// `1e<n>`: beyond `f64` for large `n`.
    Exponent(i16),
    /// `0.000…1` with this many zeros.
    Tiny(u8),
    /// `-` then digits, past `i64`.
    Negative(u8),
    U64Max,
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Text {
    Plain(String),
    /// One of `ODD_STRINGS`.
    Odd(u8),
    /// Each unit as a `\uXXXX` escape: lone and reversed surrogates included.
    Escaped(Vec<u16>),
    /// `x` repeated (up to 64 KiB).
    Long(u16),
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum VersionHeader {
    Absent,
    Header(u8),
    Query(u8),
    Odd(Text),
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Mutation {
    Truncate(u16),
    Flip(u16, u8),
    Insert(u16, u8),
    Delete(u16),
    /// Copies a range of the body to another place.
    Splice(u16, u8, u16),
}

/// What the in-process backend answers.
#[derive(Arbitrary, Clone, Debug, Default)]
pub(crate) struct BackendScript {
    pub(crate) unary: UnaryScript,
    pub(crate) stream: StreamScript,
    /// The backend's `A2A-Extensions` response parameter.
    pub(crate) extensions: Option<Vec<u8>>,
}

#[derive(Arbitrary, Clone, Debug, Default)]
pub(crate) enum UnaryScript {
    /// The operation's reply with default values.
    #[default]
    Empty,
    /// The reply decoded from these protobuf bytes (undecodable: a bad response).
    Reply(Vec<u8>),
    Error(ErrorScript),
}

#[derive(Arbitrary, Clone, Debug, Default)]
pub(crate) struct StreamScript {
    /// The stream is refused before any event.
    pub(crate) refused: Option<ErrorScript>,
    /// Each event decoded from protobuf bytes (at most 8 are sent).
    pub(crate) events: Vec<Vec<u8>>,
    /// The stream ends with this error after its events.
    pub(crate) end: Option<ErrorScript>,
}

/// A backend error as the gRPC binding would carry it.
#[derive(Arbitrary, Clone, Debug)]
pub(crate) struct ErrorScript {
    /// gRPC status code (any number: unknown ones are UNKNOWN).
    pub(crate) code: i32,
    pub(crate) message: Text,
    pub(crate) details: Details,
}

#[derive(Arbitrary, Clone, Debug)]
pub(crate) enum Details {
    None,
    /// Serialized `google.rpc.Status` bytes, as `grpc-status-details-bin` carries them.
    Raw(Vec<u8>),
    /// An `ErrorInfo` with a reason of the error table (or another) and a domain.
    ErrorInfo {
        reason: u8,
        a2a_domain: bool,
    },
}

/// Strings that break naive code: empty, NUL, controls, non-BMP, RTL, BOM, JSON-looking.
pub(crate) const ODD_STRINGS: &[&str] = &[
    "",
    "\0",
    "\u{1}\u{1f}\u{7f}",
    "\r\n\r\n",
    "\u{feff}",
    "\u{10ffff}",
    "\u{1f600}",
    "\u{202e}gnirts",
    "é\u{301}",
    "\"}",
    "\\",
    "{\"jsonrpc\":\"2.0\"}",
    "data: x\n\n",
    "%00%ZZ",
    "../..",
    "2.0",
    "null",
    "tasks/get",
];

/// v0.3 method names.
const LEGACY_METHODS: &[&str] = &[
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "agent/getAuthenticatedExtendedCard",
];

/// `A2A-Version` values: the supported one, the empty one (0.3), and others.
const VERSIONS: &[&str] = &[
    "1.0", "1", "1.0.0", "0.3", "", " 1.0 ", "2.0", "1.1", "1.0, 0.3",
];

/// Field kinds, for typical values.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Role,
    State,
    Timestamp,
    Struct,
    Strings,
    Message,
    Parts,
    Configuration,
    Authentication,
}

/// The A2A request fields the params of the 11 operations use (ProtoJSON names).
const FIELDS: &[(&str, Kind)] = &[
    ("tenant", Kind::Str),
    ("message", Kind::Message),
    ("configuration", Kind::Configuration),
    ("metadata", Kind::Struct),
    ("id", Kind::Str),
    ("historyLength", Kind::Int),
    ("contextId", Kind::Str),
    ("status", Kind::State),
    ("pageSize", Kind::Int),
    ("pageToken", Kind::Str),
    ("statusTimestampAfter", Kind::Timestamp),
    ("includeArtifacts", Kind::Bool),
    ("taskId", Kind::Str),
    ("url", Kind::Str),
    ("token", Kind::Str),
    ("authentication", Kind::Authentication),
];

/// The fields of each operation's request (indices into `FIELDS`), in `Op::ALL` order.
fn op_fields(op: Op) -> &'static [usize] {
    match op {
        Op::SendMessage | Op::SendStreamingMessage => &[0, 1, 2, 3],
        Op::GetTask => &[0, 4, 5],
        Op::ListTasks => &[0, 6, 7, 8, 9, 5, 10, 11],
        Op::CancelTask => &[0, 4, 3],
        Op::CreateTaskPushNotificationConfig => &[0, 4, 12, 13, 14, 15],
        Op::GetTaskPushNotificationConfig | Op::DeleteTaskPushNotificationConfig => &[0, 12, 4],
        Op::ListTaskPushNotificationConfigs => &[0, 12, 8, 9],
        Op::GetExtendedAgentCard => &[0],
        Op::SubscribeToTask => &[0, 4],
    }
}

/// The operation at `n` of the table.
pub(crate) fn op_at(n: u8) -> Op {
    Op::ALL[usize::from(n) % Op::ALL.len()]
}

impl JsonRpcCase {
    /// The request body: the model written as JSON, then mutated.
    pub(crate) fn body_bytes(&self) -> Vec<u8> {
        let mut out = match &self.body {
            RequestBody::One(call) => call.to_json().into_bytes(),
            RequestBody::Batch(calls) => {
                let members: Vec<String> = calls.iter().map(Call::to_json).collect();
                format!("[{}]", members.join(",")).into_bytes()
            }
            RequestBody::Raw(bytes) => bytes.clone(),
        };
        for mutation in &self.mutations {
            mutation.apply(&mut out);
        }
        out
    }

    /// The `A2A-Version` header and the query string of the request.
    pub(crate) fn version(&self) -> (Option<String>, Option<String>) {
        let pick = |n: u8| VERSIONS[usize::from(n) % VERSIONS.len()].to_owned();
        match &self.version {
            VersionHeader::Absent => (None, None),
            VersionHeader::Header(n) => (Some(pick(*n)), None),
            VersionHeader::Query(n) => {
                let version = pick(*n);
                let value = percent_encoding::utf8_percent_encode(
                    &version,
                    percent_encoding::NON_ALPHANUMERIC,
                );
                (None, Some(format!("A2A-Version={value}")))
            }
            VersionHeader::Odd(text) => (Some(text.plain()), None),
        }
    }
}

impl Mutation {
    fn apply(&self, out: &mut Vec<u8>) {
        let at = |n: u16, len: usize| usize::from(n) % (len + 1);
        match *self {
            Mutation::Truncate(n) => out.truncate(at(n, out.len())),
            Mutation::Flip(n, bits) if !out.is_empty() => {
                let i = usize::from(n) % out.len();
                out[i] ^= bits;
            }
            Mutation::Insert(n, byte) => out.insert(at(n, out.len()), byte),
            Mutation::Delete(n) if !out.is_empty() => {
                out.remove(usize::from(n) % out.len());
            }
            Mutation::Splice(from, len, to) => {
                let start = at(from, out.len());
                let end = (start + usize::from(len)).min(out.len());
                let piece = out[start..end].to_vec();
                let to = at(to, out.len());
                out.splice(to..to, piece);
            }
            _ => {}
        }
    }
}

impl Call {
    /// The request object as JSON text.
    pub(crate) fn to_json(&self) -> String {
        let op = match self.method {
            Method::Op(n) => Some(op_at(n)),
            _ => None,
        };
        let mut members: Vec<(&str, String)> = Vec::new();
        match &self.jsonrpc {
            Version::Right => members.push(("jsonrpc", "\"2.0\"".to_owned())),
            Version::Absent => {}
            Version::Other(text) => members.push(("jsonrpc", text.to_json())),
            Version::NotString(json) => members.push(("jsonrpc", json.to_json(0))),
        }
        if let Some(id) = self.id.to_json() {
            members.push(("id", id));
        }
        if let Some(method) = self.method.to_json() {
            members.push(("method", method));
        }
        match &self.params {
            Params::Absent => {}
            Params::Shaped(fields) => members.push(("params", shaped(op, fields))),
            Params::Json(json) => members.push(("params", json.to_json(0))),
        }
        if !members.is_empty() {
            let by = usize::from(self.order) % members.len();
            members.rotate_left(by);
        }
        let mut out = String::from("{");
        for (name, value) in &members {
            if out.len() > 1 {
                out.push(',');
            }
            if self.escaped_names {
                out.push('"');
                for c in name.chars() {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                }
                out.push('"');
            } else {
                let _ = write!(out, "\"{name}\"");
            }
            out.push(':');
            out.push_str(value);
        }
        for (name, value) in &self.extra {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&name.to_json());
            out.push(':');
            out.push_str(&value.to_json(0));
        }
        out.push('}');
        out
    }
}

impl Id {
    fn to_json(&self) -> Option<String> {
        Some(match self {
            Id::Absent => return None,
            Id::Null => "null".to_owned(),
            Id::Int(n) => n.to_string(),
            Id::Big(n) => big_integer(*n),
            Id::Str(text) => text.to_json(),
            Id::Float(x) => float(*x),
            Id::Number(number) => number.to_json(),
            Id::Other(json) => json.to_json(0),
        })
    }
}

impl Method {
    fn to_json(&self) -> Option<String> {
        Some(match *self {
            Method::Op(n) => format!("\"{}\"", op_at(n).name()),
            Method::Legacy(n) => format!(
                "\"{}\"",
                LEGACY_METHODS[usize::from(n) % LEGACY_METHODS.len()]
            ),
            Method::NearMiss(n, how) => {
                let name = op_at(n).name();
                let changed = match how % 4 {
                    0 => name.to_ascii_lowercase(),
                    1 => format!("{name} "),
                    2 => name[..name.len() - 1].to_owned(),
                    _ => format!("{name}\\u0000"),
                };
                format!("\"{changed}\"")
            }
            Method::Odd(ref text) => text.to_json(),
            Method::NotString(ref json) => json.to_json(0),
            Method::Absent => return None,
        })
    }
}

/// Params of the request type of `op` (or of the whole field list without one).
fn shaped(op: Option<Op>, fields: &[Field]) -> String {
    let names: Vec<usize> = match op {
        Some(op) => op_fields(op).to_vec(),
        None => (0..FIELDS.len()).collect(),
    };
    let mut out = String::from("{");
    for field in fields {
        let (name, kind) = FIELDS[names[usize::from(field.name) % names.len()]];
        if out.len() > 1 {
            out.push(',');
        }
        let _ = write!(out, "\"{name}\":");
        match &field.value {
            FieldValue::Typical(n) => out.push_str(&typical(kind, *n)),
            FieldValue::Any(json) => out.push_str(&json.to_json(0)),
        }
    }
    out.push('}');
    out
}

/// A value of `kind`, mostly valid, sometimes at its edges.
fn typical(kind: Kind, n: u8) -> String {
    let pick = |options: &[&str]| options[usize::from(n) % options.len()].to_owned();
    match kind {
        Kind::Str => pick(&[
            "\"task-1\"",
            "\"\"",
            "\".\"",
            "\"..\"",
            "\"a/b?c#d\"",
            "\"t%2F\"",
            "\"\\u00e9\\ud83d\\ude00\"",
        ]),
        Kind::Int => pick(&[
            "0",
            "1",
            "-1",
            "100",
            "101",
            "2147483647",
            "2147483648",
            "-2147483649",
            "\"5\"",
            "1.5",
            "null",
        ]),
        Kind::Bool => pick(&["true", "false", "\"true\"", "0", "null"]),
        Kind::Role => pick(&[
            "\"ROLE_USER\"",
            "\"ROLE_AGENT\"",
            "\"ROLE_UNSPECIFIED\"",
            "1",
            "\"user\"",
            "99",
        ]),
        Kind::State => pick(&[
            "\"TASK_STATE_WORKING\"",
            "\"TASK_STATE_COMPLETED\"",
            "3",
            "\"working\"",
            "-1",
        ]),
        Kind::Timestamp => pick(&[
            "\"2024-01-01T00:00:00Z\"",
            "\"2024-01-01T00:00:00.123456789+02:00\"",
            "\"9999-12-31T23:59:59Z\"",
            "\"0001-01-01T00:00:00Z\"",
            "\"10000-01-01T00:00:00Z\"",
            "\"yesterday\"",
            "0",
        ]),
        Kind::Struct => pick(&[
            "{}",
            "{\"k\":\"v\"}",
            "{\"n\":1e308,\"l\":[null,true,{\"x\":[]}]}",
            "{\"k\":null}",
            "[]",
            "\"s\"",
        ]),
        Kind::Strings => pick(&["[]", "[\"text/plain\"]", "[\"\",\"\"]", "[1]", "\"a\""]),
        Kind::Message => {
            let role = typical(Kind::Role, n / 7);
            let parts = typical(Kind::Parts, n / 3);
            format!("{{\"messageId\":\"m-{n}\",\"role\":{role},\"parts\":{parts},\"contextId\":\"c\",\"extensions\":{},\"referenceTaskIds\":{}}}", typical(Kind::Strings, n), typical(Kind::Strings, n / 5))
        }
        Kind::Parts => pick(&[
            "[{\"text\":\"task\"}]",
            "[{\"text\":\"stream\"},{\"text\":\"\"}]",
            "[{\"data\":{\"a\":[1,2]},\"mediaType\":\"application/json\"}]",
            "[{\"url\":\"https://example.com/f\",\"filename\":\"f.txt\"}]",
            "[{\"raw\":\"aGVsbG8=\"}]",
            "[{\"raw\":\"not base64!\"}]",
            "[{\"text\":\"a\",\"data\":{}}]",
            "[{}]",
            "[]",
        ]),
        Kind::Configuration => format!(
            "{{\"acceptedOutputModes\":{},\"historyLength\":{},\"returnImmediately\":{}}}",
            typical(Kind::Strings, n),
            typical(Kind::Int, n / 3),
            typical(Kind::Bool, n / 5)
        ),
        Kind::Authentication => pick(&[
            "{\"scheme\":\"Bearer\",\"credentials\":\"x\"}",
            "{}",
            "null",
        ]),
    }
}

impl Json {
    /// JSON text; nesting past 8 levels of the model is cut (deep nesting is `Deep`).
    pub(crate) fn to_json(&self, depth: usize) -> String {
        if depth > 8 {
            return "null".to_owned();
        }
        match self {
            Json::Null => "null".to_owned(),
            Json::Bool(b) => b.to_string(),
            Json::Int(n) => n.to_string(),
            Json::Float(x) => float(*x),
            Json::Number(number) => number.to_json(),
            Json::Str(text) => text.to_json(),
            Json::Array(items) => {
                let items: Vec<String> = items.iter().map(|j| j.to_json(depth + 1)).collect();
                format!("[{}]", items.join(","))
            }
            Json::Object(members) => {
                let members: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!("{}:{}", k.to_json(), v.to_json(depth + 1)))
                    .collect();
                format!("{{{}}}", members.join(","))
            }
            Json::Deep(n) => {
                let n = usize::from(*n) % 3000;
                format!("{}{}", "[".repeat(n), "]".repeat(n))
            }
        }
    }
}

impl NumberText {
    fn to_json(&self) -> String {
        match *self {
            NumberText::NegativeZero => "-0".to_owned(),
            NumberText::Exponent(e) => format!("1e{e}"),
            NumberText::Tiny(zeros) => format!("0.{}1", "0".repeat(usize::from(zeros))),
            NumberText::Negative(n) => format!("-{}", big_integer(n)),
            NumberText::U64Max => u64::MAX.to_string(),
        }
    }
}

/// A finite float as JSON (non-finite ones are not JSON numbers: written as 0).
fn float(x: f64) -> String {
    if x.is_finite() {
        format!("{x:?}")
    } else {
        "0".to_owned()
    }
}

fn big_integer(n: u8) -> String {
    let digits = 20 + usize::from(n);
    (0..digits)
        .map(|i| char::from(b'1' + (i % 9) as u8))
        .collect()
}

impl Text {
    /// The text as a Rust string (escapes decoded, lone surrogates replaced).
    fn plain(&self) -> String {
        match self {
            Text::Plain(s) => s.clone(),
            Text::Odd(n) => ODD_STRINGS[usize::from(*n) % ODD_STRINGS.len()].to_owned(),
            Text::Escaped(units) => String::from_utf16_lossy(units),
            Text::Long(n) => "x".repeat(usize::from(*n)),
        }
    }

    /// The text as a JSON string literal.
    fn to_json(&self) -> String {
        match self {
            Text::Escaped(units) => {
                let mut out = String::from("\"");
                for unit in units {
                    let _ = write!(out, "\\u{unit:04x}");
                }
                out.push('"');
                out
            }
            other => serde_json::to_string(&other.plain()).unwrap_or_default(),
        }
    }
}

impl ErrorScript {
    /// The serialized `google.rpc.Status` the backend would send.
    pub(crate) fn details_bytes(&self) -> Vec<u8> {
        use prost::Message as _;
        match &self.details {
            Details::None => Vec::new(),
            Details::Raw(bytes) => bytes.clone(),
            Details::ErrorInfo { reason, a2a_domain } => {
                let reasons: Vec<&str> = crate::protocol::error::ErrorKind::ALL
                    .iter()
                    .filter_map(|k| k.reason())
                    .chain(["NOT_A_REASON"])
                    .collect();
                let info = tonic_types::pb::ErrorInfo {
                    reason: reasons[usize::from(*reason) % reasons.len()].to_owned(),
                    domain: if *a2a_domain {
                        crate::protocol::error::A2A_DOMAIN
                    } else {
                        "example.com"
                    }
                    .to_owned(),
                    metadata: Default::default(),
                };
                let mut status = tonic_types::pb::Status {
                    code: self.code,
                    message: self.message.plain(),
                    details: vec![Default::default()],
                };
                // `Any` is prost-types' (typed through the field: no dependency of its own).
                status.details[0].type_url = crate::protocol::details::ERROR_INFO.to_owned();
                status.details[0].value = info.encode_to_vec();
                status.encode_to_vec()
            }
        }
    }

    /// The error's message.
    pub(crate) fn message(&self) -> String {
        self.message.plain()
    }
}

//! THE operation table (spec 5.3, HTTP rules of the normative schema): each of the 11
//! operations once, with its JSON-RPC/gRPC name, tonic client method, request and reply
//! types, streaming or not, and its HTTP+JSON rule.
//!
//! `with_operations!` hands the rows to a callback macro, so every transport derives its
//! dispatch from these rows instead of restating them. HTTP rules: `POST` rules carry the
//! whole request as body (`body: "*"` in the schema); `GET`/`DELETE` rules carry the fields
//! that are not path parameters as query parameters (spec 11.5). Every rule also exists
//! under a `/{tenant}` prefix, used when the request's `tenant` is non-empty.
//!
//! SubscribeToTask: the schema's rule says `GET`, the prose of spec 11.3.2 says `POST`. We
//! follow the schema and the REST backend retries with `POST` on 405 (see `backend/rest.rs`).

use serde_json::value::RawValue;

use crate::proto::*;
use crate::protocol::error::A2aError;

/// Invokes `$callback!` with every row of the operation table.
macro_rules! with_operations {
    ($callback:ident) => {
        $callback! {
            unary {
                SendMessage: send_message(SendMessageRequest) -> SendMessageResponse,
                    POST "/message:send";
                GetTask: get_task(GetTaskRequest) -> Task,
                    GET "/tasks/{id}";
                ListTasks: list_tasks(ListTasksRequest) -> ListTasksResponse,
                    GET "/tasks";
                CancelTask: cancel_task(CancelTaskRequest) -> Task,
                    POST "/tasks/{id}:cancel";
                CreateTaskPushNotificationConfig:
                    create_task_push_notification_config(TaskPushNotificationConfig) -> TaskPushNotificationConfig,
                    POST "/tasks/{task_id}/pushNotificationConfigs";
                GetTaskPushNotificationConfig:
                    get_task_push_notification_config(GetTaskPushNotificationConfigRequest) -> TaskPushNotificationConfig,
                    GET "/tasks/{task_id}/pushNotificationConfigs/{id}";
                ListTaskPushNotificationConfigs:
                    list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest) -> ListTaskPushNotificationConfigsResponse,
                    GET "/tasks/{task_id}/pushNotificationConfigs";
                DeleteTaskPushNotificationConfig:
                    delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest) -> ::pbjson_types::Empty,
                    DELETE "/tasks/{task_id}/pushNotificationConfigs/{id}";
                GetExtendedAgentCard: get_extended_agent_card(GetExtendedAgentCardRequest) -> AgentCard,
                    GET "/extendedAgentCard";
            }
            stream {
                SendStreamingMessage: send_streaming_message(SendMessageRequest),
                    POST "/message:stream";
                SubscribeToTask: subscribe_to_task(SubscribeToTaskRequest),
                    GET "/tasks/{id}:subscribe";
            }
        }
    };
}
pub(crate) use with_operations;

/// An HTTP+JSON rule: method and path template with `{field}` placeholders (proto names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpRule {
    pub method: HttpMethod,
    pub path: &'static str,
}

/// The HTTP methods the operation table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
    Delete,
}

macro_rules! declare_operations {
    (
        unary { $( $u:ident : $urpc:ident ($ureq:ty) -> $uresp:ty, $um:ident $upath:literal; )* }
        stream { $( $s:ident : $srpc:ident ($sreq:ty), $sm:ident $spath:literal; )* }
    ) => {
        /// One of the 11 A2A operations.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Op { $( $u, )* $( $s, )* }

        impl Op {
            /// Every operation, in table order.
            pub const ALL: &'static [Op] = &[ $( Op::$u, )* $( Op::$s, )* ];

            /// The method name, identical in JSON-RPC and gRPC (spec 5.3).
            pub fn name(self) -> &'static str {
                match self { $( Op::$u => stringify!($u), )* $( Op::$s => stringify!($s), )* }
            }

            /// The operation a JSON-RPC method name denotes; v0.3 names are not operations.
            pub fn from_name(name: &str) -> Option<Op> {
                match name {
                    $( stringify!($u) => Some(Op::$u), )*
                    $( stringify!($s) => Some(Op::$s), )*
                    _ => None,
                }
            }

            /// Server-streaming operations answer with a stream of `StreamResponse`.
            pub fn is_streaming(self) -> bool {
                match self { $( Op::$u => false, )* $( Op::$s => true, )* }
            }

            /// The HTTP+JSON binding's rule for this operation (without tenant prefix).
            pub fn http_rule(self) -> HttpRule {
                match self {
                    $( Op::$u => HttpRule { method: http_method!($um), path: $upath }, )*
                    $( Op::$s => HttpRule { method: http_method!($sm), path: $spath }, )*
                }
            }
        }

        /// A typed request for one operation.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Request { $( $u($ureq), )* $( $s($sreq), )* }

        impl Request {
            /// The operation this request is for.
            pub fn op(&self) -> Op {
                match self { $( Request::$u(_) => Op::$u, )* $( Request::$s(_) => Op::$s, )* }
            }

            /// Decodes JSON-RPC `params` (ProtoJSON) straight into the operation's request type.
            /// Absent params mean `{}`; errors name the failing field path.
            pub fn decode(op: Op, params: Option<&RawValue>) -> Result<Request, A2aError> {
                let text = params.map_or("{}", RawValue::get);
                Ok(match op {
                    $( Op::$u => Request::$u(decode_params(text)?), )*
                    $( Op::$s => Request::$s(decode_params(text)?), )*
                })
            }

            /// The request's `tenant` field (empty when unset).
            pub fn tenant(&self) -> &str {
                match self { $( Request::$u(r) => &r.tenant, )* $( Request::$s(r) => &r.tenant, )* }
            }

            /// The request as ProtoJSON, for bindings that send JSON.
            pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
                let mut out = Vec::new();
                match self {
                    $( Request::$u(r) => write_json(&mut out, r)?, )*
                    $( Request::$s(r) => write_json(&mut out, r)?, )*
                }
                Ok(out)
            }
        }

        /// A typed reply of a unary operation.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Reply { $( $u($uresp), )* }

        impl Reply {
            /// The operation this reply answers.
            pub fn op(&self) -> Op {
                match self { $( Reply::$u(_) => Op::$u, )* }
            }

            /// A guess of the JSON size of this reply, for sizing buffers: the protobuf
            /// size plus a quarter (field names and quoting outgrow varints).
            pub fn json_size_hint(&self) -> usize {
                let len = match self { $( Reply::$u(r) => ::prost::Message::encoded_len(r), )* };
                len + len / 4 + 64
            }

            /// Appends the JSON-RPC `result` value for this reply.
            pub fn write_json(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
                match self { $( Reply::$u(r) => crate::protocol::ops::ResultJson::write_result(r, out), )* }
            }

            /// Decodes a reply of `op` from ProtoJSON (HTTP+JSON backends).
            pub fn from_json(op: Op, body: &[u8]) -> Result<Reply, serde_json::Error> {
                match op {
                    $( Op::$u => crate::protocol::ops::ResultJson::read_result(body).map(Reply::$u), )*
                    $( Op::$s => Err(serde::de::Error::custom(concat!(stringify!($s), " is a stream"))), )*
                }
            }
        }
    };
}

macro_rules! http_method {
    (GET) => {
        HttpMethod::Get
    };
    (POST) => {
        HttpMethod::Post
    };
    (DELETE) => {
        HttpMethod::Delete
    };
}

with_operations!(declare_operations);

fn decode_params<T: serde::de::DeserializeOwned + RestoreNulls>(text: &str) -> Result<T, A2aError> {
    // Fast path: sonic-rs (SIMD string scanning, several times serde_json's speed on long
    // texts), no path tracking. Only to describe an error is the text decoded again, by
    // serde_json with the field's path; both refuse the same inputs, so the fast path
    // never accepts what the error path would reject.
    match sonic_rs::from_str::<T>(text) {
        Ok(mut request) => {
            request.restore_nulls();
            Ok(request)
        }
        Err(_) => decode_params_tracked(text),
    }
}

/// `decode_params` with the failing field's path in the error.
fn decode_params_tracked<T: serde::de::DeserializeOwned + RestoreNulls>(
    text: &str,
) -> Result<T, A2aError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let mut request: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        // The path names the field; serde_json's "at line 1 column 30" adds nothing.
        let text = e.inner().to_string();
        let description = match text.rfind(" at line ") {
            Some(at) => &text[..at],
            None => &text,
        };
        A2aError::invalid_params(&path, description)
    })?;
    de.end()
        .map_err(|e| A2aError::invalid_params("", &e.to_string()))?;
    request.restore_nulls();
    Ok(request)
}

/// Appends `value` as JSON. sonic-rs, not serde_json: escaping a string byte by byte was
/// 40 % of the instructions of a 16 KiB call (benches/README.md).
pub fn write_json<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    sonic_rs::to_writer(out, value).map_err(serde::ser::Error::custom)
}

/// How a unary reply type reads and writes its JSON-RPC `result`.
///
/// Most types use their ProtoJSON form. Two deviate on purpose, as the reference SDK does:
/// `ListTasksResponse` prints its REQUIRED fields even when they hold defaults (pbjson would
/// drop `nextPageToken: ""`), and `google.protobuf.Empty` is `null`.
pub trait ResultJson: Sized {
    fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error>;
    fn read_result(body: &[u8]) -> Result<Self, serde_json::Error>;
}

macro_rules! protojson_result {
    ($($ty:ty),*) => {$(
        impl ResultJson for $ty {
            fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
                write_json(out, self)
            }
            fn read_result(body: &[u8]) -> Result<Self, serde_json::Error> {
                serde_json::from_slice(body)
            }
        }
    )*};
}
protojson_result!(
    SendMessageResponse,
    Task,
    TaskPushNotificationConfig,
    ListTaskPushNotificationConfigsResponse,
    AgentCard
);

impl ResultJson for ListTasksResponse {
    fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        use serde::ser::{SerializeStruct, Serializer};
        let mut ser = sonic_rs::Serializer::new(out);
        let mut write = || {
            let mut s = (&mut ser).serialize_struct("ListTasksResponse", 4)?;
            s.serialize_field("tasks", &self.tasks)?;
            s.serialize_field("nextPageToken", &self.next_page_token)?;
            s.serialize_field("pageSize", &self.page_size)?;
            s.serialize_field("totalSize", &self.total_size)?;
            s.end()
        };
        write().map_err(serde::ser::Error::custom)
    }
    fn read_result(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

impl ResultJson for ::pbjson_types::Empty {
    fn write_result(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        out.extend_from_slice(b"null");
        Ok(())
    }
    fn read_result(body: &[u8]) -> Result<Self, serde_json::Error> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self {});
        }
        serde_json::from_slice(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{GetTaskRequest, SendMessageRequest};

    /// The sonic-rs fast path must refuse exactly what serde_json refuses, or a bad
    /// request would slip past the error path that names the field.
    #[test]
    fn the_fast_path_accepts_what_serde_json_accepts() {
        let message = |part: &str| {
            format!(r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{part}]}}}}"#)
        };
        let cases = [
            message(r#"{"text":"plain"}"#),
            message(r#"{"text":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00"}"#),
            message(r#"{"text":"lone \ud800 surrogate"}"#),
            message(r#"{"text":"lone \udc00 trail"}"#),
            message(r#"{"text":"bad \x escape"}"#),
            message("{\"text\":\"raw \u{1} control\"}"),
            message(r#"{"text":"a","text":"b"}"#),
            message(r#"{"data":{"n":1e400}}"#),
            message(r#"{"data":{"n":-0.0,"big":123456789012345678901234567890}}"#),
            message(r#"{"data":{"a":[1,2,]}}"#),
            message(r#"{"data":{"a":NaN}}"#),
            message(r#"{"data":null}"#),
            message(r#"{"raw":"AAEC"}"#),
            message(r#"{"raw":"not base64!"}"#),
            message(r#"{"text":"x"} "#),
            r#"{"message":{}} trailing"#.to_owned(),
            r#"{"message":{"messageId":"m","role":"ROLE_NOPE","parts":[]}}"#.to_owned(),
            r#"{"configuration":{"historyLength":"7"}}"#.to_owned(),
            r#"{"configuration":{"historyLength":7.5}}"#.to_owned(),
            r#"{"configuration":{"historyLength":1e2}}"#.to_owned(),
            r#"{"configuration":{"historyLength":4294967296}}"#.to_owned(),
        ];
        for text in &cases {
            let fast = decode_params::<SendMessageRequest>(text).ok();
            let tracked = decode_params_tracked::<SendMessageRequest>(text).ok();
            assert_eq!(fast, tracked, "{text}");
        }
        assert!(decode_params::<SendMessageRequest>(&cases[0]).is_ok());
        assert!(decode_params::<SendMessageRequest>(&cases[15]).is_err());
        for text in [r#"{"id":"t","historyLength":-1}"#, r#"{"id":5}"#, "{}"] {
            let fast = decode_params::<GetTaskRequest>(text).ok();
            let tracked = decode_params_tracked::<GetTaskRequest>(text).ok();
            assert_eq!(fast, tracked, "{text}");
        }
    }
}

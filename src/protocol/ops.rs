//! THE operation table (spec 5.3, HTTP rules of the normative schema): each of the 11
//! operations once, with its JSON-RPC/gRPC name, request and reply types, streaming or
//! not, and its HTTP+JSON rule.
//!
//! Everything per operation is generated here from the rows, once: the `Op` enum, typed
//! requests split by kind (`UnaryRequest`, `StreamRequest`, so a backend can never be
//! handed a request of the wrong kind), their ProtoJSON decoding and protobuf encoding,
//! tenant access, and the typed `Reply`. Transports only use these. HTTP rules: `POST`
//! rules carry the whole request as body (`body: "*"` in the schema); `GET`/`DELETE`
//! rules carry the fields that are not path parameters as query parameters (spec 11.5).
//! Every rule also exists under a `/{tenant}` prefix, used when the request's `tenant` is
//! non-empty.
//!
//! SubscribeToTask: the schema's rule says `GET`, the prose of spec 11.3.2 says `POST`. We
//! follow the schema and the REST backend retries with `POST` on 405 (see `backend/rest.rs`).

use bytes::BufMut;

use crate::proto::*;
use crate::protocol::error::A2aError;
use crate::protocol::json::{decode_params, params_from, write_json, ResultJson};

/// An HTTP+JSON rule: method and path template with `{field}` placeholders (proto names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HttpRule {
    pub(crate) method: HttpMethod,
    pub(crate) path: &'static str,
}

/// The HTTP methods the operation table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HttpMethod {
    Get,
    Post,
    Delete,
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

/// What every typed request offers, whatever its kind, so a transport writes its request
/// path once for both kinds.
pub(crate) trait TypedRequest {
    /// The operation this request is for.
    fn op(&self) -> Op;
    /// The request's `tenant` field (empty when unset).
    fn tenant(&self) -> &str;
    /// The `tenant` field, to move it (HTTP+JSON sends it as path prefix).
    fn tenant_mut(&mut self) -> &mut String;
    /// The protobuf size of the request.
    fn encoded_len(&self) -> usize;
    /// Appends the request in protobuf encoding; `out` must have `encoded_len()` bytes
    /// of room.
    fn encode(&self, out: &mut impl BufMut) -> Result<(), prost::EncodeError>;
    /// The request as ProtoJSON, for bindings that send JSON.
    fn to_json(&self) -> Result<Vec<u8>, serde_json::Error>;
}

/// `TypedRequest` for one kind: one `match` per method, over the rows of its own enum.
macro_rules! typed_request {
    ($kind:ident, $($v:ident),*) => {
        impl TypedRequest for $kind {
            fn op(&self) -> Op {
                match self { $( $kind::$v(_) => Op::$v, )* }
            }

            fn tenant(&self) -> &str {
                match self { $( $kind::$v(r) => &r.tenant, )* }
            }

            fn tenant_mut(&mut self) -> &mut String {
                match self { $( $kind::$v(r) => &mut r.tenant, )* }
            }

            fn encoded_len(&self) -> usize {
                match self { $( $kind::$v(r) => prost::Message::encoded_len(r), )* }
            }

            fn encode(&self, out: &mut impl BufMut) -> Result<(), prost::EncodeError> {
                match self { $( $kind::$v(r) => prost::Message::encode(r, out), )* }
            }

            fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
                let mut out = Vec::new();
                match self { $( $kind::$v(r) => write_json(&mut out, r)?, )* }
                Ok(out)
            }
        }
    };
}

macro_rules! declare_operations {
    (
        unary { $( $u:ident ($ureq:ty) -> $uresp:ty, $um:ident $upath:literal; )* }
        stream { $( $s:ident ($sreq:ty), $sm:ident $spath:literal; )* }
    ) => {
        /// One of the 11 A2A operations, by its method name ([spec 5.3], method mapping).
        ///
        /// [spec 5.3]: https://a2a-protocol.org/latest/specification/#53-method-mapping-reference
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Op {
            $( #[doc = concat!("`", stringify!($u), "` (unary).")] $u, )*
            $( #[doc = concat!("`", stringify!($s), "` (server-streaming).")] $s, )*
        }

        impl Op {
            /// Every operation, in table order.
            pub const ALL: &'static [Op] = &[ $( Op::$u, )* $( Op::$s, )* ];

            /// The method name, identical in JSON-RPC and gRPC (spec 5.3).
            pub fn name(self) -> &'static str {
                match self { $( Op::$u => stringify!($u), )* $( Op::$s => stringify!($s), )* }
            }

            /// The gRPC request path, `/lf.a2a.v1.A2AService/{name}` (spec 10).
            pub(crate) fn grpc_path(self) -> &'static str {
                match self {
                    $( Op::$u => concat!("/lf.a2a.v1.A2AService/", stringify!($u)), )*
                    $( Op::$s => concat!("/lf.a2a.v1.A2AService/", stringify!($s)), )*
                }
            }

            /// The operation a JSON-RPC method name denotes; v0.3 names are not operations.
            pub(crate) fn from_name(name: &str) -> Option<Op> {
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

            /// Decodes this operation's request from protobuf bytes (the gRPC front: straight
            /// from tonic's buffer).
            pub(crate) fn decode_request(self, mut message: impl bytes::Buf) -> Result<Request, prost::DecodeError> {
                Ok(match self {
                    $( Op::$u => Request::Unary(UnaryRequest::$u(<$ureq as prost::Message>::decode(&mut message)?)), )*
                    $( Op::$s => Request::Stream(StreamRequest::$s(<$sreq as prost::Message>::decode(&mut message)?)), )*
                })
            }

            /// The name of this operation's request message in `lf.a2a.v1`
            /// (`protocol::schema` describes it).
            pub(crate) fn request_message(self) -> &'static str {
                match self { $( Op::$u => stringify!($ureq), )* $( Op::$s => stringify!($sreq), )* }
            }

            /// The HTTP+JSON binding's rule for this operation (without tenant prefix).
            pub(crate) fn http_rule(self) -> HttpRule {
                match self {
                    $( Op::$u => HttpRule { method: http_method!($um), path: $upath }, )*
                    $( Op::$s => HttpRule { method: http_method!($sm), path: $spath }, )*
                }
            }
        }

        /// A typed request of a unary operation. Not boxed: it is moved a few times per
        /// call, and a box would be one more allocation per call.
        #[derive(Clone, Debug, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum UnaryRequest {
            $( #[doc = concat!("A `", stringify!($u), "` request.")] $u($ureq), )*
        }

        /// A typed request of a server-streaming operation.
        #[derive(Clone, Debug, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum StreamRequest {
            $( #[doc = concat!("A `", stringify!($s), "` request.")] $s($sreq), )*
        }

        impl UnaryRequest {
            /// Decodes the reply of this request's operation from protobuf bytes.
            pub(crate) fn decode_reply(&self, message: bytes::Bytes) -> Result<Reply, prost::DecodeError> {
                match self { $( UnaryRequest::$u(_) => <$uresp as prost::Message>::decode(message).map(Reply::$u), )* }
            }

            /// Decodes the reply of this request's operation from ProtoJSON (HTTP+JSON).
            pub(crate) fn reply_from_json(&self, body: &[u8]) -> Result<Reply, serde_json::Error> {
                match self { $( UnaryRequest::$u(_) => <$uresp as ResultJson>::read_result(body).map(Reply::$u), )* }
            }
        }

        typed_request!(UnaryRequest, $( $u ),*);
        typed_request!(StreamRequest, $( $s ),*);

        /// Decodes `params` at a deserializer's position straight into this operation's
        /// request type (`json::decode_params` for their text, and the JSON-RPC envelope's
        /// own scan).
        impl<'de> serde::de::DeserializeSeed<'de> for Op {
            type Value = Request;

            fn deserialize<D: serde::Deserializer<'de>>(self, params: D) -> Result<Request, D::Error> {
                Ok(match self {
                    $( Op::$u => Request::Unary(UnaryRequest::$u(params_from(params)?)), )*
                    $( Op::$s => Request::Stream(StreamRequest::$s(params_from(params)?)), )*
                })
            }
        }

        /// A typed reply of a unary operation.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Reply {
            $( #[doc = concat!("The reply to `", stringify!($u), "`.")] $u($uresp), )*
        }

        impl Reply {
            /// The operation this reply answers.
            pub fn op(&self) -> Op {
                match self { $( Reply::$u(_) => Op::$u, )* }
            }

            /// Capacity to write this reply's JSON in without growing the buffer: a guess of
            /// the JSON's size (the protobuf size plus a quarter: field names and quoting
            /// outgrow varints), plus the room sonic-rs reserves before escaping a string,
            /// six times its length (`\uXXXX` for every byte, the worst case), for strings
            /// up to `ESCAPE_ROOM_MAX`. Sized for the JSON alone, a reply with a long
            /// string was reallocated, its whole buffer copied once more (1 % of a 16 KiB
            /// call's CPU). The extra room is reserved, not written.
            pub(crate) fn json_capacity(&self) -> usize {
                let len = match self { $( Reply::$u(r) => prost::Message::encoded_len(r), )* };
                len + len / 4 + 64 + 6 * len.min(ESCAPE_ROOM_MAX)
            }

            /// The reply in protobuf encoding (the gRPC front).
            pub(crate) fn to_proto(&self) -> Vec<u8> {
                match self { $( Reply::$u(r) => prost::Message::encode_to_vec(r), )* }
            }

            /// Appends the JSON-RPC `result` value for this reply.
            pub(crate) fn write_json(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
                match self { $( Reply::$u(r) => ResultJson::write_result(r, out), )* }
            }
        }
    };
}

declare_operations! {
    unary {
        SendMessage(SendMessageRequest) -> SendMessageResponse,
            POST "/message:send";
        GetTask(GetTaskRequest) -> Task,
            GET "/tasks/{id}";
        ListTasks(ListTasksRequest) -> ListTasksResponse,
            GET "/tasks";
        CancelTask(CancelTaskRequest) -> Task,
            POST "/tasks/{id}:cancel";
        CreateTaskPushNotificationConfig(TaskPushNotificationConfig) -> TaskPushNotificationConfig,
            POST "/tasks/{task_id}/pushNotificationConfigs";
        GetTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest) -> TaskPushNotificationConfig,
            GET "/tasks/{task_id}/pushNotificationConfigs/{id}";
        ListTaskPushNotificationConfigs(ListTaskPushNotificationConfigsRequest) -> ListTaskPushNotificationConfigsResponse,
            GET "/tasks/{task_id}/pushNotificationConfigs";
        DeleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest) -> ::pbjson_types::Empty,
            DELETE "/tasks/{task_id}/pushNotificationConfigs/{id}";
        GetExtendedAgentCard(GetExtendedAgentCardRequest) -> AgentCard,
            GET "/extendedAgentCard";
    }
    stream {
        SendStreamingMessage(SendMessageRequest),
            POST "/message:stream";
        SubscribeToTask(SubscribeToTaskRequest),
            GET "/tasks/{id}:subscribe";
    }
}

/// The longest string `Reply::json_capacity` makes escaping room for; a longer one grows
/// the buffer once, a copy small next to escaping it.
const ESCAPE_ROOM_MAX: usize = 64 << 10;

/// A typed request, of either kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// A request answered by one reply.
    Unary(UnaryRequest),
    /// A request answered by a stream of events.
    Stream(StreamRequest),
}

impl Request {
    /// Decodes JSON-RPC `params` (ProtoJSON) straight into the operation's request type.
    /// Absent params mean `{}`; errors name the failing field path.
    pub(crate) fn decode(op: Op, params: Option<&str>) -> Result<Request, A2aError> {
        decode_params(op, params.unwrap_or("{}"))
    }

    /// The operation this request is for.
    pub fn op(&self) -> Op {
        match self {
            Request::Unary(r) => r.op(),
            Request::Stream(r) => r.op(),
        }
    }

    /// The request's `tenant` field (empty when unset).
    pub(crate) fn tenant(&self) -> &str {
        match self {
            Request::Unary(r) => r.tenant(),
            Request::Stream(r) => r.tenant(),
        }
    }

    /// The `tenant` field, to set it.
    pub(crate) fn tenant_mut(&mut self) -> &mut String {
        match self {
            Request::Unary(r) => r.tenant_mut(),
            Request::Stream(r) => r.tenant_mut(),
        }
    }
}

impl From<UnaryRequest> for Request {
    fn from(request: UnaryRequest) -> Self {
        Request::Unary(request)
    }
}

impl From<StreamRequest> for Request {
    fn from(request: StreamRequest) -> Self {
        Request::Stream(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_consistent() {
        for &op in Op::ALL {
            assert_eq!(Op::from_name(op.name()), Some(op));
            assert_eq!(
                op.grpc_path(),
                format!("/lf.a2a.v1.A2AService/{}", op.name())
            );
            let request = Request::decode(op, None).unwrap();
            assert_eq!(request.op(), op);
            let mut bytes = Vec::new();
            match &request {
                Request::Unary(r) => r.encode(&mut bytes),
                Request::Stream(r) => r.encode(&mut bytes),
            }
            .unwrap();
            assert_eq!(op.decode_request(bytes.as_slice()).unwrap(), request);
            assert_eq!(matches!(request, Request::Stream(_)), op.is_streaming());
            assert!(crate::protocol::schema::message(op.request_message()).is_some());
        }
        assert_eq!(Op::from_name("message/send"), None);
    }

    /// A reply is written into a buffer of `json_capacity` without growing it, also when
    /// one string is most of it (sonic-rs reserves six times a string's length first).
    #[test]
    fn a_reply_fits_its_json_capacity() {
        for text in [
            "short".to_owned(),
            "x".repeat(16 << 10),
            "é\"".repeat(4 << 10),
        ] {
            let message = Message {
                message_id: "m".into(),
                role: Role::Agent as i32,
                parts: vec![Part {
                    content: Some(part::Content::Text(text)),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let reply = Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Message(message)),
            });
            let mut out = Vec::with_capacity(reply.json_capacity());
            let capacity = out.capacity();
            reply.write_json(&mut out).unwrap();
            assert_eq!(out.capacity(), capacity, "{} bytes written", out.len());
        }
    }
}

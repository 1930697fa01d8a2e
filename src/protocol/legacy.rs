//! THE v0.3 ↔ v1.0 mapping table: v0.3 JSON-RPC clients reach v1.0 agents through the
//! gateway. A v0.3 call (no `A2A-Version`, or `0.3`, and a v0.3 method name) is read into
//! the v1.0 operation's typed request; its reply, every stream event and every error go back
//! in v0.3 shapes.
//!
//! Sources: v1.0 is the specification (spec 3.6 versioning, 5.3 method names, 5.4 errors,
//! Appendix A migration) and its normative schema; v0.3 is the A2A 0.3.0 JSON schema, as the
//! reference SDK's `compat/v0_3` types carry it (`kind` discriminators, lowercase kebab
//! states, `final` on status updates, nested push configs, v0.3 error codes).
//!
//! The table has four parts, each tested row by row in both directions:
//! - methods (here): v0.3 name → v1.0 operation, the params row and the result row;
//! - objects (`objects`): messages, parts, tasks, events, push configs, params;
//! - the agent card (`card`), and the dual-format card;
//! - errors (here): the v1.0 error kinds v0.3 knows keep their code; the others are
//!   internal errors (-32603), as the reference SDK's v0.3 endpoint answers.
//!
//! The lossy or asymmetric corners are decided once, here and in the README ("v0.3
//! clients"). JSON is the pivot: v0.3 exists only as JSON, and the v1.0 side is the
//! ProtoJSON form of the typed request and reply, so params are still decoded once into the
//! typed request, by the one codec.

mod card;

pub use card::security_to_v1;
mod objects;
mod shape;

use serde_json::Value;

use crate::protocol::error::{A2aError, ErrorKind, A2A_DOMAIN};
use crate::protocol::ops::{Op, Request};
use objects::*;
use shape::Shape;

macro_rules! legacy_methods {
    ($( $variant:ident: $name:literal => $op:ident, $params:expr, $result:expr; )*) => {
        /// A v0.3 JSON-RPC method.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Method { $( $variant, )* }

        impl Method {
            /// Every v0.3 method, in table order.
            pub const ALL: &'static [Method] = &[ $( Method::$variant, )* ];

            /// The v0.3 method name.
            pub fn name(self) -> &'static str {
                match self { $( Method::$variant => $name, )* }
            }

            /// The v0.3 method a name denotes.
            pub fn from_name(name: &str) -> Option<Method> {
                match name { $( $name => Some(Method::$variant), )* _ => None }
            }

            /// The v1.0 operation it is served by.
            pub fn op(self) -> Op {
                match self { $( Method::$variant => Op::$op, )* }
            }

            /// v0.3 params ↔ the v1.0 request.
            fn params_row(self) -> &'static Shape {
                match self { $( Method::$variant => $params, )* }
            }

            /// The v1.0 result (for streams: each event) ↔ the v0.3 result.
            fn result_row(self) -> &'static Shape {
                match self { $( Method::$variant => $result, )* }
            }
        }
    };
}

legacy_methods! {
    // v0.3 method => v1.0 operation (spec 5.3), params row, result row
    MessageSend: "message/send" => SendMessage, &SEND_PARAMS, &SEND_MESSAGE_RESPONSE;
    MessageStream: "message/stream" => SendStreamingMessage, &SEND_PARAMS, &STREAM_RESPONSE;
    TasksGet: "tasks/get" => GetTask, &TASK_QUERY_PARAMS, &TASK;
    TasksCancel: "tasks/cancel" => CancelTask, &CANCEL_PARAMS, &TASK;
    TasksResubscribe: "tasks/resubscribe" => SubscribeToTask, &TASK_ID_PARAMS, &STREAM_RESPONSE;
    PushConfigSet: "tasks/pushNotificationConfig/set" => CreateTaskPushNotificationConfig,
        &TASK_PUSH_CONFIG, &TASK_PUSH_CONFIG;
    PushConfigGet: "tasks/pushNotificationConfig/get" => GetTaskPushNotificationConfig,
        &PUSH_CONFIG_PARAMS, &TASK_PUSH_CONFIG;
    PushConfigList: "tasks/pushNotificationConfig/list" => ListTaskPushNotificationConfigs,
        &PUSH_CONFIG_LIST_PARAMS, &PUSH_CONFIG_LIST;
    PushConfigDelete: "tasks/pushNotificationConfig/delete" => DeleteTaskPushNotificationConfig,
        &PUSH_CONFIG_DELETE_PARAMS, &EMPTY;
    ExtendedCard: "agent/getAuthenticatedExtendedCard" => GetExtendedAgentCard,
        &NO_PARAMS, &card::CARD;
}

impl Method {
    /// Decodes v0.3 `params` into the v1.0 operation's typed request. Whatever does not fit
    /// the v0.3 schema is refused as the v0.3 endpoint refuses it: -32600 `Invalid Request`
    /// with the problem as `data`.
    pub fn decode(self, params: Option<&str>) -> Result<Request, A2aError> {
        let value: Value = match params {
            Some(text) => serde_json::from_str(text).map_err(|e| invalid(&e.to_string()))?,
            None => Value::Object(Default::default()),
        };
        let mut v1 = self
            .params_row()
            .to_v1(value)
            .map_err(|e| invalid(&e.within("params").describe()))?;
        // A v0.3 get without a config id names the config set without one, whose id is
        // the task's (v0.3 default); v1.0 requires the id.
        if self == Method::PushConfigGet && v1.get("id").is_none() {
            v1["id"] = v1["taskId"].clone();
        }
        Request::decode(self.op(), Some(&v1.to_string())).map_err(|e| invalid(&e.message))
    }

    /// The v0.3 result for the v1.0 result (ProtoJSON) of this method's operation, or of
    /// one of its stream events.
    pub fn result(self, v1: Value) -> Value {
        self.result_row().to_v03(v1)
    }

    /// Appends the v0.3 result of a v1.0 result that `write_v1` writes (ProtoJSON).
    pub fn write_result(
        self,
        out: &mut Vec<u8>,
        write_v1: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
    ) -> Result<(), serde_json::Error> {
        let mut v1 = Vec::new();
        write_v1(&mut v1)?;
        let value: Value = serde_json::from_slice(&v1)?;
        serde_json::to_writer(out, &self.result(value))
    }
}

/// The v0.3 form of an agent card. `endpoint`: the gateway's JSON-RPC endpoint named in the
/// card, which serves v0.3 and becomes its `url`; without one, only interfaces that declare
/// v0.3 can. A card with none cannot be written for v0.3 (the reference SDK's v0.3 endpoint
/// answers the same internal error).
pub fn card(mut v1: Value, endpoint: Option<&str>) -> Result<Value, A2aError> {
    if let Some(endpoint) = endpoint {
        card::mark_v03_endpoint(&mut v1, endpoint);
    }
    let v03 = card::CARD.to_v03(v1);
    if v03.get("url").is_none() {
        return Err(A2aError::with_message(
            ErrorKind::Internal,
            "AgentCard must have at least one interface with compatible protocol version.",
        ));
    }
    Ok(v03)
}

/// The dual-format card served to clients that name no version: `v1` with the v0.3
/// members of `card(v1, endpoint)` added (as the reference SDK serves its card).
pub fn dual_card(v1: Value, endpoint: &str) -> Value {
    match card(v1.clone(), Some(endpoint)) {
        Ok(v03) => card::dual(v1, v03),
        Err(_) => v1,
    }
}

/// The v0.3 endpoint's answer to params outside the v0.3 schema.
fn invalid(problem: &str) -> A2aError {
    A2aError {
        kind: ErrorKind::InvalidRequest,
        message: "Invalid Request".to_owned(),
        data: vec![Value::from(problem)],
    }
}

/// The error kinds of the v0.3 schema (its `A2AError` union): each keeps its JSON-RPC code.
pub const V03_ERRORS: &[ErrorKind] = &[
    ErrorKind::ParseError,
    ErrorKind::InvalidRequest,
    ErrorKind::MethodNotFound,
    ErrorKind::InvalidParams,
    ErrorKind::Internal,
    ErrorKind::TaskNotFound,
    ErrorKind::TaskNotCancelable,
    ErrorKind::PushNotificationNotSupported,
    ErrorKind::UnsupportedOperation,
    ErrorKind::ContentTypeNotSupported,
    ErrorKind::InvalidAgentResponse,
    ErrorKind::ExtendedAgentCardNotConfigured,
];

/// The v0.3 kind of an error: itself if v0.3 has it, else an internal error (v1.0's
/// -32008, -32009 and the gateway's -31401/-31403 are unknown to v0.3 clients).
pub fn v03_kind(kind: ErrorKind) -> ErrorKind {
    if V03_ERRORS.contains(&kind) {
        kind
    } else {
        ErrorKind::Internal
    }
}

/// The v0.3 JSON-RPC `error` object: the v0.3 code, the message, and as `data` the details
/// other than the `ErrorInfo` of domain `a2a-protocol.org` (its reason is what the code
/// says); one detail is `data` itself, several a list, none no `data` (v0.3 `data` is one
/// value of any type).
pub fn error(err: &A2aError) -> Value {
    let mut object = serde_json::json!({
        "code": v03_kind(err.kind).code(),
        "message": err.message,
    });
    let is_a2a_info = |d: &&Value| {
        d.get("@type").and_then(Value::as_str) == Some(crate::protocol::details::ERROR_INFO)
            && d.get("domain").and_then(Value::as_str) == Some(A2A_DOMAIN)
    };
    let mut data: Vec<Value> = err
        .data
        .iter()
        .filter(|d| !is_a2a_info(d))
        .cloned()
        .collect();
    match data.len() {
        0 => {}
        1 => object["data"] = data.remove(0),
        _ => object["data"] = Value::Array(data),
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(role: &str) -> Value {
        json!({"messageId": "m1", "contextId": "c1", "taskId": "t1", "role": role,
               "parts": [{"text": "hi", "metadata": {"k": 1}}], "metadata": {"m": true},
               "extensions": ["urn:x"], "referenceTaskIds": ["t0"]})
    }

    fn task() -> Value {
        json!({"id": "t1", "contextId": "c1",
               "status": {"state": "TASK_STATE_WORKING", "message": message("ROLE_AGENT"),
                          "timestamp": "2025-01-01T00:00:00Z"},
               "history": [message("ROLE_USER")],
               "artifacts": [{"artifactId": "a1", "name": "n", "description": "d",
                              "parts": [{"data": {"x": [1, 2]}}], "metadata": {"a": 1},
                              "extensions": ["urn:y"]}],
               "metadata": {"t": "v"}})
    }

    fn push_config() -> Value {
        json!({"taskId": "t1", "id": "p1", "url": "https://hook.example/a2a", "token": "tok",
               "authentication": {"scheme": "Bearer", "credentials": "secret"}})
    }

    /// v0.3 params of each method, which must decode into its operation's request and come
    /// back unchanged through the params row.
    fn params(method: Method) -> Value {
        match method {
            Method::MessageSend | Method::MessageStream => json!({
                "message": {"kind": "message", "messageId": "m1", "role": "user",
                            "parts": [{"kind": "text", "text": "hi"}]},
                "configuration": {"acceptedOutputModes": ["text/plain"], "blocking": false,
                                  "historyLength": 3,
                                  "pushNotificationConfig": {"url": "https://h.example", "id": "p",
                                      "token": "t", "authentication": {"schemes": ["Bearer"]}}},
                "metadata": {"k": "v"}}),
            Method::TasksGet => json!({"id": "t1", "historyLength": 2}),
            Method::TasksCancel => json!({"id": "t1", "metadata": {"why": "done"}}),
            Method::TasksResubscribe | Method::PushConfigList => json!({"id": "t1"}),
            Method::PushConfigSet => json!({"taskId": "t1", "pushNotificationConfig":
                {"id": "p1", "url": "https://h.example", "token": "tok",
                 "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}),
            Method::PushConfigGet | Method::PushConfigDelete => {
                json!({"id": "t1", "pushNotificationConfigId": "p1"})
            }
            Method::ExtendedCard => json!({}),
        }
    }

    /// A v1.0 result (or stream event) of each method, which must come back unchanged
    /// through the result row.
    fn results(method: Method) -> Vec<Value> {
        match method {
            Method::MessageSend => vec![
                json!({"task": task()}),
                json!({"message": message("ROLE_AGENT")}),
            ],
            Method::MessageStream | Method::TasksResubscribe => vec![
                json!({"task": task()}),
                json!({"message": message("ROLE_AGENT")}),
                json!({"statusUpdate": {"taskId": "t1", "contextId": "c1", "metadata": {"n": 1},
                                        "status": {"state": "TASK_STATE_COMPLETED"}}}),
                json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1", "append": true,
                                          "lastChunk": false, "metadata": {"n": 2},
                                          "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}}),
            ],
            Method::TasksGet | Method::TasksCancel => vec![task()],
            Method::PushConfigSet | Method::PushConfigGet => vec![push_config()],
            Method::PushConfigList => vec![json!({"configs": [push_config(), push_config()]})],
            Method::PushConfigDelete => vec![json!({})],
            Method::ExtendedCard => vec![card()],
        }
    }

    fn card() -> Value {
        let flow = json!({"authorizationUrl": "https://a", "tokenUrl": "https://t",
                          "refreshUrl": "https://r", "scopes": {"read": "Read"}});
        json!({
            "name": "agent", "description": "d", "version": "1",
            "supportedInterfaces": [
                {"url": "https://gw/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
                {"url": "https://gw/other", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"}],
            "provider": {"url": "https://p", "organization": "o"},
            "documentationUrl": "https://doc", "iconUrl": "https://icon",
            "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": true,
                             "extensions": [{"uri": "urn:e", "description": "e", "required": true,
                                             "params": {"p": 1}}]},
            "securitySchemes": {
                "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key", "description": "k"}},
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
                "oauth": {"oauth2SecurityScheme": {"flows": {"authorizationCode": flow.clone(),
                    "clientCredentials": flow.clone(), "implicit": flow.clone(), "password": flow},
                    "oauth2MetadataUrl": "https://m"}},
                "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://o"}},
                "mtls": {"mtlsSecurityScheme": {"description": "m"}}},
            "securityRequirements": [{"schemes": {"oauth": {"list": ["read"]}, "key": {"list": []}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"], "examples": ["e"],
                        "inputModes": ["text/plain"], "outputModes": ["text/plain"],
                        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}]}],
            "signatures": [{"protected": "p", "signature": "s", "header": {"kid": "k"}}],
        })
    }

    #[test]
    fn every_method_row_round_trips() {
        for &method in Method::ALL {
            assert_eq!(Method::from_name(method.name()), Some(method));
            assert_eq!(
                Op::from_name(method.name()),
                None,
                "v0.3 names are no operations"
            );
            let v03 = params(method);
            let text = v03.to_string();
            let request = method
                .decode(Some(&text))
                .unwrap_or_else(|e| panic!("{method:?}: {e}"));
            assert_eq!(request.op(), method.op());
            assert_eq!(
                method.op().is_streaming(),
                matches!(request, Request::Stream(_))
            );
            let v1 = method.params_row().to_v1(v03.clone()).unwrap();
            assert_eq!(method.params_row().to_v03(v1), v03, "{method:?} params");
            for v1 in results(method) {
                let v03 = method.result(v1.clone());
                assert_eq!(
                    method.result_row().to_v1(v03.clone()).unwrap(),
                    v1,
                    "{method:?}: {v03}"
                );
            }
        }
        assert_eq!(Method::from_name("SendMessage"), None);
    }

    #[test]
    fn every_enum_value_round_trips() {
        for (table, shape, member) in [
            (objects::TASK_STATES, &objects::TASK_STATUS, "state"),
            (objects::ROLES, &objects::MESSAGE, "role"),
        ] {
            for (v1, v03) in table {
                let object = json!({ member: v1, "messageId": "m", "parts": [] });
                let converted = shape.to_v03(object);
                assert_eq!(converted[member], *v03);
                assert_eq!(shape.to_v1(converted).unwrap()[member], *v1);
            }
            // A value v1.0 adds later (or leaves out as default) is the first row's.
            assert_eq!(shape.to_v03(json!({ member: "NEW" }))[member], table[0].1);
            assert_eq!(shape.to_v03(json!({}))[member], table[0].1);
        }
        let status = json!({"status": {"state": "TASK_STATE_INPUT_REQUIRED"}});
        assert_eq!(objects::STATUS_UPDATE.to_v03(status)["final"], false);
        for state in [
            "TASK_STATE_COMPLETED",
            "TASK_STATE_CANCELED",
            "TASK_STATE_FAILED",
            "TASK_STATE_REJECTED",
        ] {
            let status = json!({"status": {"state": state}});
            assert_eq!(
                objects::STATUS_UPDATE.to_v03(status)["final"],
                true,
                "{state}"
            );
        }
    }

    #[test]
    fn every_part_shape_round_trips() {
        let parts = [
            json!({"text": "t", "metadata": {"a": 1}}),
            json!({"data": {"k": [1, null]}}),
            json!({"data": [1, 2], "metadata": {"a": 1}}),
            json!({"data": "scalar"}),
            json!({"raw": "AAEC", "mediaType": "image/png", "filename": "x.png"}),
            json!({"url": "https://f.example/x", "mediaType": "text/plain"}),
        ];
        for part in parts {
            let v03 = objects::PART.to_v03(part.clone());
            assert!(v03["kind"].is_string(), "{v03}");
            assert_eq!(objects::PART.to_v1(v03).unwrap(), part);
        }
        let wrapped = objects::PART.to_v03(json!({"data": 7}));
        assert_eq!(
            wrapped,
            json!({"kind": "data", "data": {"value": 7}, "metadata": {"data_part_compat": true}})
        );
        // A part without `kind` is read by its members; a file needs bytes or a uri.
        assert_eq!(
            objects::PART.to_v1(json!({"text": "x"})).unwrap(),
            json!({"text": "x"})
        );
        let no_file = objects::PART.to_v1(json!({"kind": "file", "file": {"name": "n"}}));
        assert_eq!(
            no_file.unwrap_err().describe(),
            "file: bytes or uri required"
        );
    }

    #[test]
    fn every_security_scheme_and_the_card_round_trip() {
        let v03 = card::CARD.to_v03(card());
        assert_eq!(v03["url"], "https://gw/a2a");
        assert_eq!(v03["preferredTransport"], "JSONRPC");
        assert_eq!(v03["protocolVersion"], card::V03_PROTOCOL_VERSION);
        assert_eq!(v03["supportsAuthenticatedExtendedCard"], true);
        assert_eq!(
            v03["securitySchemes"]["key"],
            json!({"type": "apiKey", "in": "header", "name": "X-Key", "description": "k"})
        );
        assert_eq!(v03["security"], json!([{"oauth": ["read"], "key": []}]));
        assert_eq!(
            v03["additionalInterfaces"][1],
            json!({"url": "https://gw/other", "transport": "JSONRPC"})
        );
        assert_eq!(card::CARD.to_v1(v03).unwrap(), card());
        // The dual card keeps every v1.0 member and adds the v0.3 ones.
        let dual = dual_card(card(), "https://gw/a2a");
        assert_eq!(dual["supportedInterfaces"], card()["supportedInterfaces"]);
        assert_eq!(
            dual["securitySchemes"]["key"]["apiKeySecurityScheme"]["location"],
            "header"
        );
        assert_eq!(dual["securitySchemes"]["key"]["type"], "apiKey");
        assert_eq!(dual["url"], "https://gw/a2a");
    }

    #[test]
    fn the_gateways_endpoint_is_the_v03_url() {
        let v1 = json!({"name": "a", "supportedInterfaces": [
            {"url": "https://gw/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "agent:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]});
        let v03 = super::card(v1.clone(), Some("https://gw/rpc")).unwrap();
        assert_eq!(v03["url"], "https://gw/rpc");
        assert_eq!(
            v03["additionalInterfaces"],
            json!([{"url": "https://gw/rpc", "transport": "JSONRPC"}])
        );
        let err = super::card(v1.clone(), None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        let dual = dual_card(v1.clone(), "https://gw/rpc");
        assert_eq!(dual["supportedInterfaces"], v1["supportedInterfaces"]);
        assert_eq!(
            (&dual["url"], &dual["protocolVersion"]),
            (&json!("https://gw/rpc"), &json!("0.3.0"))
        );
    }

    #[test]
    fn every_error_kind_has_a_v03_code() {
        let v03_codes = [
            -32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006,
            -32007,
        ];
        for &kind in ErrorKind::ALL {
            let code = error(&A2aError::new(kind))["code"].as_i64().unwrap() as i32;
            assert!(v03_codes.contains(&code), "{kind:?}");
            if V03_ERRORS.contains(&kind) {
                assert_eq!(code, kind.code(), "{kind:?} keeps its code");
            } else {
                assert_eq!(code, -32603, "{kind:?} is unknown to v0.3");
            }
        }
        assert_eq!(V03_ERRORS.len(), v03_codes.len());
        // The A2A ErrorInfo is what the code says; other details are kept.
        let err = A2aError::a2a(ErrorKind::TaskNotFound, "gone");
        assert_eq!(error(&err), json!({"code": -32001, "message": "gone"}));
        let fault = A2aError::gateway(
            crate::protocol::error::GatewayFault::BackendUnavailable,
            "down",
        );
        let data = &error(&fault)["data"];
        assert_eq!(data[0]["reason"], "BACKEND_UNAVAILABLE");
        assert_eq!(data[1]["retryDelay"], "1s", "{data}");
        let alone = A2aError::gateway(
            crate::protocol::error::GatewayFault::BackendBadResponse,
            "garbled",
        );
        assert_eq!(error(&alone)["data"]["reason"], "BACKEND_BAD_RESPONSE");
    }

    #[test]
    fn params_outside_the_v03_schema_are_invalid_requests() {
        let cases = [
            (
                Method::MessageSend,
                r#"{}"#,
                "params.message: field required",
            ),
            (
                Method::MessageSend,
                r#"{"message":{"messageId":"m","role":"robot","parts":[]}}"#,
                "params.message.role: \"robot\" is not one of agent, user",
            ),
            (
                Method::MessageSend,
                r#"{"message":{"messageId":"m","role":"user","parts":[{"kind":"data","data":3}]}}"#,
                "params.message.parts[0].data: expected an object",
            ),
            (
                Method::TasksGet,
                r#"{"historyLength":1}"#,
                "params.id: field required",
            ),
            (
                Method::PushConfigSet,
                r#"{"taskId":"t"}"#,
                "params.pushNotificationConfig: field required",
            ),
            (
                Method::PushConfigDelete,
                r#"{"id":"t"}"#,
                "params.pushNotificationConfigId: field required",
            ),
        ];
        for (method, text, problem) in cases {
            let err = method.decode(Some(text)).unwrap_err();
            assert_eq!(
                error(&err),
                json!({"code": -32600, "message": "Invalid Request", "data": problem})
            );
        }
        // Type errors found by the v1.0 decoder are refused the same way.
        let err = Method::TasksGet.decode(Some(r#"{"id":5}"#)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidRequest);
        // v0.3's historyLength 0 is "no limit": unset in v1.0; a get without a config id
        // asks for the config whose id is the task's.
        let Request::Unary(crate::protocol::ops::UnaryRequest::GetTask(get)) = Method::TasksGet
            .decode(Some(r#"{"id":"t","historyLength":0}"#))
            .unwrap()
        else {
            panic!("tasks/get is GetTask")
        };
        assert_eq!(get.history_length, None);
        let Request::Unary(crate::protocol::ops::UnaryRequest::GetTaskPushNotificationConfig(get)) =
            Method::PushConfigGet.decode(Some(r#"{"id":"t"}"#)).unwrap()
        else {
            panic!("get is GetTaskPushNotificationConfig")
        };
        assert_eq!((get.task_id.as_str(), get.id.as_str()), ("t", "t"));
    }
}

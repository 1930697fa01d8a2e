//! The object rows of the mapping table: messages, parts, tasks, artifacts, stream events,
//! push notification configs and each v0.3 method's params. v1.0 names are the ProtoJSON
//! names of the normative schema (spec 4, 5, Appendix A); v0.3 names are the A2A 0.3.0 JSON
//! schema's (as the reference SDK's `compat/v0_3` types carry it).

use serde_json::{Map, Value};

use super::shape::{m, Conv, Invalid, Member, Pairs, Shape};

/// A member the v0.3 schema requires.
const fn req(v1: &'static str, v03: &'static str, conv: Conv) -> Member {
    Member {
        v1,
        v03,
        conv,
        required: true,
    }
}

/// `TaskState` (spec 4.1.3) ↔ v0.3 `TaskState`; unknown v1.0 states are `unknown`.
pub const TASK_STATES: Pairs = &[
    ("TASK_STATE_UNSPECIFIED", "unknown"),
    ("TASK_STATE_SUBMITTED", "submitted"),
    ("TASK_STATE_WORKING", "working"),
    ("TASK_STATE_COMPLETED", "completed"),
    ("TASK_STATE_FAILED", "failed"),
    ("TASK_STATE_CANCELED", "canceled"),
    ("TASK_STATE_INPUT_REQUIRED", "input-required"),
    ("TASK_STATE_REJECTED", "rejected"),
    ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
];

/// v0.3 states after which a task does not change: a status update in one of them has
/// `final: true` (as the reference SDK sets it; interrupted states are not final).
const FINAL_STATES: [&str; 4] = ["completed", "canceled", "failed", "rejected"];

/// `Role` (spec 4.1.5) ↔ v0.3 `Role`; an unspecified role is the agent's.
pub const ROLES: Pairs = &[("ROLE_AGENT", "agent"), ("ROLE_USER", "user")];

pub static MESSAGE: Shape = Shape::Table {
    name: "Message",
    kind: Some("message"),
    members: &[
        req("messageId", "messageId", Conv::Same),
        m("contextId", "contextId", Conv::Same),
        m("taskId", "taskId", Conv::Same),
        req("role", "role", Conv::Enum(ROLES)),
        req("parts", "parts", Conv::List(&PART)),
        m("metadata", "metadata", Conv::Same),
        m("extensions", "extensions", Conv::Same),
        m("referenceTaskIds", "referenceTaskIds", Conv::Same),
    ],
    derive: None,
};

/// `Part` (spec 4.1.6): v1.0's content oneof (`text`, `data`, `raw`, `url` with
/// `mediaType` and `filename`) ↔ v0.3's `TextPart`, `DataPart`, `FilePart`.
pub static PART: Shape = Shape::Custom {
    name: "Part",
    to_v03: part_to_v03,
    to_v1: part_to_v1,
};

/// v0.3 `DataPart.data` must be an object; other v1.0 values travel as `{"value": …}` with
/// this metadata flag (the reference SDK's convention), and are unwrapped on the way back.
const DATA_PART_COMPAT: &str = "data_part_compat";

fn part_to_v03(mut part: Map<String, Value>) -> Value {
    let mut out = Map::new();
    let mut metadata = part.remove("metadata");
    if let Some(text) = part.remove("text") {
        out.insert("kind".into(), "text".into());
        out.insert("text".into(), text);
    } else if let Some(data) = part.remove("data") {
        out.insert("kind".into(), "data".into());
        let data = if data.is_object() {
            data
        } else {
            let mut flagged = match metadata.take() {
                Some(Value::Object(map)) => map,
                _ => Map::new(),
            };
            flagged.insert(DATA_PART_COMPAT.into(), true.into());
            metadata = Some(Value::Object(flagged));
            serde_json::json!({ "value": data })
        };
        out.insert("data".into(), data);
    } else {
        // A file, or (an empty part, which the schema does not allow) an empty text.
        let mut file = Map::new();
        if let Some(raw) = part.remove("raw") {
            file.insert("bytes".into(), raw);
        } else if let Some(url) = part.remove("url") {
            file.insert("uri".into(), url);
        } else {
            out.insert("kind".into(), "text".into());
            out.insert("text".into(), "".into());
        }
        if !file.is_empty() {
            if let Some(media_type) = part.remove("mediaType") {
                file.insert("mimeType".into(), media_type);
            }
            if let Some(filename) = part.remove("filename") {
                file.insert("name".into(), filename);
            }
            out.insert("kind".into(), "file".into());
            out.insert("file".into(), Value::Object(file));
        }
    }
    if let Some(metadata) = metadata {
        out.insert("metadata".into(), metadata);
    }
    Value::Object(out)
}

fn part_to_v1(part: Value) -> Result<Value, Invalid> {
    let Value::Object(mut part) = part else {
        return Err(Invalid::new("expected a Part object"));
    };
    let mut out = Map::new();
    let mut metadata = part.remove("metadata").filter(|m| !m.is_null());
    // The reference SDK reads a part without `kind` by its members, as pydantic does.
    let kind = match part.get("kind").and_then(Value::as_str) {
        Some(kind) => kind.to_owned(),
        None if part.contains_key("text") => "text".to_owned(),
        None if part.contains_key("file") => "file".to_owned(),
        None if part.contains_key("data") => "data".to_owned(),
        None => return Err(Invalid::new("field required").within("kind")),
    };
    let required = |part: &mut Map<String, Value>, key: &str| {
        part.remove(key)
            .filter(|v| !v.is_null())
            .ok_or_else(|| Invalid::new("field required").within(key))
    };
    match kind.as_str() {
        "text" => {
            out.insert("text".into(), required(&mut part, "text")?);
        }
        "data" => {
            let mut data = required(&mut part, "data")?;
            if !data.is_object() {
                return Err(Invalid::new("expected an object").within("data"));
            }
            let flagged = match &mut metadata {
                Some(Value::Object(map)) => map.remove(DATA_PART_COMPAT) == Some(true.into()),
                _ => false,
            };
            if metadata
                .as_ref()
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                metadata = None;
            }
            if flagged {
                data = data.get_mut("value").map(Value::take).unwrap_or_default();
            }
            out.insert("data".into(), data);
        }
        "file" => {
            let Value::Object(mut file) = required(&mut part, "file")? else {
                return Err(Invalid::new("expected an object").within("file"));
            };
            if let Some(bytes) = file.remove("bytes") {
                out.insert("raw".into(), bytes);
            } else if let Some(uri) = file.remove("uri") {
                out.insert("url".into(), uri);
            } else {
                return Err(Invalid::new("bytes or uri required").within("file"));
            }
            if let Some(mime_type) = file.remove("mimeType").filter(|v| !v.is_null()) {
                out.insert("mediaType".into(), mime_type);
            }
            if let Some(name) = file.remove("name").filter(|v| !v.is_null()) {
                out.insert("filename".into(), name);
            }
        }
        other => {
            let why = format!("{other:?} is not one of text, file, data");
            return Err(Invalid::new(why).within("kind"));
        }
    }
    if let Some(metadata) = metadata {
        out.insert("metadata".into(), metadata);
    }
    Ok(Value::Object(out))
}

pub static TASK_STATUS: Shape = Shape::Table {
    name: "TaskStatus",
    kind: None,
    members: &[
        req("state", "state", Conv::Enum(TASK_STATES)),
        m("message", "message", Conv::Object(&MESSAGE)),
        m("timestamp", "timestamp", Conv::Same),
    ],
    derive: None,
};

pub static ARTIFACT: Shape = Shape::Table {
    name: "Artifact",
    kind: None,
    members: &[
        req("artifactId", "artifactId", Conv::Same),
        m("name", "name", Conv::Same),
        m("description", "description", Conv::Same),
        req("parts", "parts", Conv::List(&PART)),
        m("metadata", "metadata", Conv::Same),
        m("extensions", "extensions", Conv::Same),
    ],
    derive: None,
};

pub static TASK: Shape = Shape::Table {
    name: "Task",
    kind: Some("task"),
    members: &[
        req("id", "id", Conv::Same),
        req("contextId", "contextId", Conv::Same),
        req("status", "status", Conv::Object(&TASK_STATUS)),
        m("history", "history", Conv::List(&MESSAGE)),
        m("artifacts", "artifacts", Conv::List(&ARTIFACT)),
        m("metadata", "metadata", Conv::Same),
    ],
    derive: None,
};

pub static STATUS_UPDATE: Shape = Shape::Table {
    name: "TaskStatusUpdateEvent",
    kind: Some("status-update"),
    members: &[
        req("taskId", "taskId", Conv::Same),
        req("contextId", "contextId", Conv::Same),
        req("status", "status", Conv::Object(&TASK_STATUS)),
        m("metadata", "metadata", Conv::Same),
    ],
    derive: Some(|event| {
        let state = event["status"]["state"].as_str().unwrap_or_default();
        let last = FINAL_STATES.contains(&state);
        event.insert("final".into(), last.into());
    }),
};

pub static ARTIFACT_UPDATE: Shape = Shape::Table {
    name: "TaskArtifactUpdateEvent",
    kind: Some("artifact-update"),
    members: &[
        req("taskId", "taskId", Conv::Same),
        req("contextId", "contextId", Conv::Same),
        req("artifact", "artifact", Conv::Object(&ARTIFACT)),
        m("append", "append", Conv::Same),
        m("lastChunk", "lastChunk", Conv::Same),
        m("metadata", "metadata", Conv::Same),
    ],
    derive: Some(|event| {
        // The reference SDK always writes both flags; ProtoJSON omits `false`.
        for flag in ["append", "lastChunk"] {
            event.entry(flag).or_insert(false.into());
        }
    }),
};

/// `StreamResponse` (spec 3.2.3) ↔ the v0.3 `result` of a stream event, told apart by `kind`.
pub static STREAM_RESPONSE: Shape = Shape::Union {
    name: "StreamResponse",
    tag: "kind",
    cases: &[
        ("task", "task", &TASK),
        ("message", "message", &MESSAGE),
        ("statusUpdate", "status-update", &STATUS_UPDATE),
        ("artifactUpdate", "artifact-update", &ARTIFACT_UPDATE),
    ],
};

/// `SendMessageResponse` ↔ the v0.3 `message/send` result: a `Task` or a `Message`.
pub static SEND_MESSAGE_RESPONSE: Shape = Shape::Union {
    name: "SendMessageResponse",
    tag: "kind",
    cases: &[("task", "task", &TASK), ("message", "message", &MESSAGE)],
};

/// `AuthenticationInfo` (one scheme) ↔ v0.3 `PushNotificationAuthenticationInfo` (a list).
pub static AUTHENTICATION: Shape = Shape::Table {
    name: "PushNotificationAuthenticationInfo",
    kind: None,
    members: &[
        req("scheme", "schemes", Conv::OneOfList),
        m("credentials", "credentials", Conv::Same),
    ],
    derive: None,
};

/// The config members of v1.0 `TaskPushNotificationConfig` ↔ v0.3 `PushNotificationConfig`.
pub static PUSH_CONFIG: Shape = Shape::Table {
    name: "PushNotificationConfig",
    kind: None,
    members: &[
        m("id", "id", Conv::Same),
        req("url", "url", Conv::Same),
        m("token", "token", Conv::Same),
        m(
            "authentication",
            "authentication",
            Conv::Object(&AUTHENTICATION),
        ),
    ],
    derive: None,
};

/// v1.0 `TaskPushNotificationConfig` (flat) ↔ v0.3 `TaskPushNotificationConfig` (`taskId`
/// and a nested `pushNotificationConfig`). The v1.0 `tenant` has no v0.3 member.
pub static TASK_PUSH_CONFIG: Shape = Shape::Custom {
    name: "TaskPushNotificationConfig",
    to_v03: |mut config| {
        let task_id = config.remove("taskId").unwrap_or_else(|| "".into());
        let nested = PUSH_CONFIG.to_v03(Value::Object(config));
        serde_json::json!({"taskId": task_id, "pushNotificationConfig": nested})
    },
    to_v1: |config| {
        let Value::Object(mut config) = config else {
            return Err(Invalid::new("expected a TaskPushNotificationConfig object"));
        };
        let task_id = config
            .remove("taskId")
            .filter(|v| !v.is_null())
            .ok_or_else(|| Invalid::new("field required").within("taskId"))?;
        let nested = config
            .remove("pushNotificationConfig")
            .filter(|v| !v.is_null())
            .ok_or_else(|| Invalid::new("field required").within("pushNotificationConfig"))?;
        let mut out = match PUSH_CONFIG.to_v1(nested) {
            Ok(Value::Object(out)) => out,
            Ok(_) => Map::new(),
            Err(e) => return Err(e.within("pushNotificationConfig")),
        };
        out.insert("taskId".into(), task_id);
        Ok(Value::Object(out))
    },
};

/// `SendMessageConfiguration` ↔ v0.3 `MessageSendConfiguration`. Both default to waiting
/// for the task (v0.3 `blocking` absent = true, v1.0 `returnImmediately` absent = false).
pub static SEND_CONFIGURATION: Shape = Shape::Table {
    name: "MessageSendConfiguration",
    kind: None,
    members: &[
        m("acceptedOutputModes", "acceptedOutputModes", Conv::Same),
        m("returnImmediately", "blocking", Conv::Negated),
        m("historyLength", "historyLength", Conv::HistoryLength),
        m(
            "taskPushNotificationConfig",
            "pushNotificationConfig",
            Conv::Object(&PUSH_CONFIG),
        ),
    ],
    derive: None,
};

/// `message/send`, `message/stream`: v0.3 `MessageSendParams` ↔ `SendMessageRequest`.
pub static SEND_PARAMS: Shape = Shape::Table {
    name: "MessageSendParams",
    kind: None,
    members: &[
        req("message", "message", Conv::Object(&MESSAGE)),
        m(
            "configuration",
            "configuration",
            Conv::Object(&SEND_CONFIGURATION),
        ),
        m("metadata", "metadata", Conv::Same),
    ],
    derive: None,
};

/// `tasks/get`: v0.3 `TaskQueryParams` ↔ `GetTaskRequest` (v0.3 `metadata`: no v1.0 member).
pub static TASK_QUERY_PARAMS: Shape = Shape::Table {
    name: "TaskQueryParams",
    kind: None,
    members: &[
        req("id", "id", Conv::Same),
        m("historyLength", "historyLength", Conv::HistoryLength),
    ],
    derive: None,
};

/// `tasks/cancel`: v0.3 `TaskIdParams` ↔ `CancelTaskRequest`.
pub static CANCEL_PARAMS: Shape = Shape::Table {
    name: "TaskIdParams",
    kind: None,
    members: &[
        req("id", "id", Conv::Same),
        m("metadata", "metadata", Conv::Same),
    ],
    derive: None,
};

/// `tasks/resubscribe`: v0.3 `TaskIdParams` ↔ `SubscribeToTaskRequest`.
pub static TASK_ID_PARAMS: Shape = Shape::Table {
    name: "TaskIdParams",
    kind: None,
    members: &[req("id", "id", Conv::Same)],
    derive: None,
};

/// `tasks/pushNotificationConfig/get`: the task's `id` and the config's
/// `pushNotificationConfigId` ↔ `taskId` and `id`. A v0.3 get without a config id asks
/// for the config the task was given without one, whose id is the task's (see `legacy`).
pub static PUSH_CONFIG_PARAMS: Shape = Shape::Table {
    name: "GetTaskPushNotificationConfigParams",
    kind: None,
    members: &[
        req("taskId", "id", Conv::Same),
        m("id", "pushNotificationConfigId", Conv::Same),
    ],
    derive: None,
};

/// `tasks/pushNotificationConfig/delete`: as `get`, the config id required.
pub static PUSH_CONFIG_DELETE_PARAMS: Shape = Shape::Table {
    name: "DeleteTaskPushNotificationConfigParams",
    kind: None,
    members: &[
        req("taskId", "id", Conv::Same),
        req("id", "pushNotificationConfigId", Conv::Same),
    ],
    derive: None,
};

/// `tasks/pushNotificationConfig/list`: `ListTaskPushNotificationConfigParams`.
pub static PUSH_CONFIG_LIST_PARAMS: Shape = Shape::Table {
    name: "ListTaskPushNotificationConfigParams",
    kind: None,
    members: &[req("taskId", "id", Conv::Same)],
    derive: None,
};

/// `agent/getAuthenticatedExtendedCard`: no params.
pub static NO_PARAMS: Shape = Shape::Table {
    name: "params",
    kind: None,
    members: &[],
    derive: None,
};

/// `ListTaskPushNotificationConfigsResponse` ↔ the v0.3 list result: a bare list of
/// configs (v1.0's `nextPageToken` has no v0.3 member: a v0.3 client sees the first page).
pub static PUSH_CONFIG_LIST: Shape = Shape::Custom {
    name: "ListTaskPushNotificationConfigsResponse",
    to_v03: |mut list| {
        let configs = match list.remove("configs") {
            Some(Value::Array(configs)) => configs,
            _ => Vec::new(),
        };
        Value::Array(
            configs
                .into_iter()
                .map(|c| TASK_PUSH_CONFIG.to_v03(c))
                .collect(),
        )
    },
    to_v1: |configs| {
        let configs = Conv::List(&TASK_PUSH_CONFIG)
            .to_v1_value(configs)
            .map_err(|e| e.within("configs"))?;
        Ok(serde_json::json!({ "configs": configs }))
    },
};

/// `google.protobuf.Empty` (DeleteTaskPushNotificationConfig) ↔ the v0.3 `null` result.
pub static EMPTY: Shape = Shape::Table {
    name: "Empty",
    kind: None,
    members: &[],
    derive: None,
};

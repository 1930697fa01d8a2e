//! Every operation of the table through the gateway to a real gRPC backend: the JSON-RPC
//! params arrive as the exact typed gRPC request, and the typed reply leaves as JSON.

use crate::harness;

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Op, Reply, Request, StreamRequest, UnaryRequest};
use harness::*;
use serde_json::{json, Value};

const TS: &str = "2023-11-14T22:13:20.123Z";

fn task_json(id: &str, state: &str) -> Value {
    json!({"id": id, "contextId": "ctx-1", "status": {"state": state, "timestamp": TS}})
}

fn push_config() -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        tenant: String::new(),
        id: "cfg-1".into(),
        task_id: "t-1".into(),
        url: "https://hooks.example/a2a".into(),
        token: "tok".into(),
        authentication: Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "secret".into(),
        }),
    }
}

fn push_config_json() -> Value {
    json!({"id": "cfg-1", "taskId": "t-1", "url": "https://hooks.example/a2a", "token": "tok",
           "authentication": {"scheme": "Bearer", "credentials": "secret"}})
}

pub(crate) struct Case {
    pub(crate) params: Value,
    /// The request the backend receives (the gRPC front sends it as is).
    pub(crate) expected: Request,
    /// The backend's reply.
    pub(crate) reply: Reply,
    pub(crate) result: Value,
}

/// One case per unary operation; `unary_cases_cover_the_table` checks none is missing.
pub(crate) fn unary_case(op: Op) -> Case {
    let metadata = |k: &str, v: &str| {
        Some(pbjson_types::Struct {
            fields: [(k.to_owned(), pbjson_types::Value::from(v.to_owned()))].into(),
        })
    };
    match op {
        Op::SendMessage => Case {
            params: json!({
                "tenant": "acme",
                "message": {"messageId": "m-1", "contextId": "c-1", "taskId": "t-0", "role": "ROLE_USER",
                            "parts": [{"text": "hi", "mediaType": "text/plain"},
                                      {"raw": "AAEC", "filename": "a.bin"},
                                      {"url": "https://x/y.png"},
                                      {"data": {"n": [1, "two", null, true]}, "metadata": {"k": "v"}}],
                            "extensions": ["urn:e"], "referenceTaskIds": ["t-9"]},
                "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 0,
                                  "returnImmediately": true,
                                  "taskPushNotificationConfig": {"url": "https://hooks.example/a2a", "token": "tok"}},
                "metadata": {"trace": "yes"},
                "unknownField": {"ignored": true}
            }),
            expected: Request::Unary(UnaryRequest::SendMessage(SendMessageRequest {
                tenant: "acme".into(),
                message: Some(Message {
                    message_id: "m-1".into(),
                    context_id: "c-1".into(),
                    task_id: "t-0".into(),
                    role: Role::User as i32,
                    parts: vec![
                        Part {
                            content: Some(part::Content::Text("hi".into())),
                            media_type: "text/plain".into(),
                            ..Default::default()
                        },
                        Part {
                            content: Some(part::Content::Raw(vec![0, 1, 2])),
                            filename: "a.bin".into(),
                            ..Default::default()
                        },
                        Part {
                            content: Some(part::Content::Url("https://x/y.png".into())),
                            ..Default::default()
                        },
                        Part {
                            content: Some(part::Content::Data(pbjson_types::Value::from(
                                pbjson_types::Struct {
                                    fields: [(
                                        "n".to_owned(),
                                        pbjson_types::Value::from(vec![
                                            pbjson_types::Value::from(1.0),
                                            pbjson_types::Value::from("two".to_owned()),
                                            pbjson_types::Value {
                                                kind: Some(pbjson_types::value::Kind::NullValue(0)),
                                            },
                                            pbjson_types::Value::from(true),
                                        ]),
                                    )]
                                    .into(),
                                },
                            ))),
                            metadata: metadata("k", "v"),
                            ..Default::default()
                        },
                    ],
                    extensions: vec!["urn:e".into()],
                    reference_task_ids: vec!["t-9".into()],
                    metadata: None,
                }),
                configuration: Some(SendMessageConfiguration {
                    accepted_output_modes: vec!["text/plain".into()],
                    history_length: Some(0),
                    return_immediately: true,
                    task_push_notification_config: Some(TaskPushNotificationConfig {
                        url: "https://hooks.example/a2a".into(),
                        token: "tok".into(),
                        ..Default::default()
                    }),
                }),
                metadata: metadata("trace", "yes"),
            })),
            reply: Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Task(task(
                    "t-1",
                    TaskState::Completed,
                ))),
            }),
            result: json!({"task": task_json("t-1", "TASK_STATE_COMPLETED")}),
        },
        Op::GetTask => Case {
            // snake_case keys are accepted too.
            params: json!({"id": "t-1", "history_length": 3}),
            expected: Request::Unary(UnaryRequest::GetTask(GetTaskRequest {
                id: "t-1".into(),
                history_length: Some(3),
                ..Default::default()
            })),
            reply: Reply::GetTask(Task {
                artifacts: vec![Artifact {
                    artifact_id: "a-1".into(),
                    name: "out".into(),
                    parts: vec![Part {
                        content: Some(part::Content::Text("r".into())),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                history: vec![Message {
                    message_id: "m-1".into(),
                    role: Role::Agent as i32,
                    ..Default::default()
                }],
                ..task("t-1", TaskState::Working)
            }),
            result: {
                let mut t = task_json("t-1", "TASK_STATE_WORKING");
                t["artifacts"] =
                    json!([{"artifactId": "a-1", "name": "out", "parts": [{"text": "r"}]}]);
                t["history"] = json!([{"messageId": "m-1", "role": "ROLE_AGENT"}]);
                t
            },
        },
        Op::ListTasks => Case {
            params: json!({"tenant": "acme", "contextId": "c-1", "status": "TASK_STATE_WORKING", "pageSize": 10,
                           "pageToken": "p2", "historyLength": 0, "statusTimestampAfter": "2025-01-01T00:00:00Z",
                           "includeArtifacts": true}),
            expected: Request::Unary(UnaryRequest::ListTasks(ListTasksRequest {
                tenant: "acme".into(),
                context_id: "c-1".into(),
                status: TaskState::Working as i32,
                page_size: Some(10),
                page_token: "p2".into(),
                history_length: Some(0),
                status_timestamp_after: Some(Timestamp {
                    seconds: 1_735_689_600,
                    nanos: 0,
                }),
                include_artifacts: Some(true),
            })),
            reply: Reply::ListTasks(ListTasksResponse {
                tasks: vec![task("t-1", TaskState::Working)],
                next_page_token: String::new(),
                page_size: 10,
                total_size: 1,
            }),
            // REQUIRED fields stay even when they hold defaults, as the reference SDK prints them.
            result: json!({"tasks": [task_json("t-1", "TASK_STATE_WORKING")], "nextPageToken": "", "pageSize": 10, "totalSize": 1}),
        },
        Op::CancelTask => Case {
            params: json!({"id": "t-1", "metadata": {"reason": "user"}}),
            expected: Request::Unary(UnaryRequest::CancelTask(CancelTaskRequest {
                id: "t-1".into(),
                metadata: metadata("reason", "user"),
                ..Default::default()
            })),
            reply: Reply::CancelTask(task("t-1", TaskState::Canceled)),
            result: task_json("t-1", "TASK_STATE_CANCELED"),
        },
        Op::CreateTaskPushNotificationConfig => Case {
            params: push_config_json(),
            expected: Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(push_config())),
            reply: Reply::CreateTaskPushNotificationConfig(push_config()),
            result: push_config_json(),
        },
        Op::GetTaskPushNotificationConfig => Case {
            params: json!({"taskId": "t-1", "id": "cfg-1"}),
            expected: Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(
                GetTaskPushNotificationConfigRequest {
                    task_id: "t-1".into(),
                    id: "cfg-1".into(),
                    ..Default::default()
                },
            )),
            reply: Reply::GetTaskPushNotificationConfig(push_config()),
            result: push_config_json(),
        },
        Op::ListTaskPushNotificationConfigs => Case {
            params: json!({"taskId": "t-1", "pageSize": 5, "pageToken": "n1"}),
            expected: Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(
                ListTaskPushNotificationConfigsRequest {
                    task_id: "t-1".into(),
                    page_size: 5,
                    page_token: "n1".into(),
                    ..Default::default()
                },
            )),
            reply: Reply::ListTaskPushNotificationConfigs(
                ListTaskPushNotificationConfigsResponse {
                    configs: vec![push_config()],
                    next_page_token: "n2".into(),
                },
            ),
            result: json!({"configs": [push_config_json()], "nextPageToken": "n2"}),
        },
        Op::DeleteTaskPushNotificationConfig => Case {
            params: json!({"taskId": "t-1", "id": "cfg-1"}),
            expected: Request::Unary(UnaryRequest::DeleteTaskPushNotificationConfig(
                DeleteTaskPushNotificationConfigRequest {
                    task_id: "t-1".into(),
                    id: "cfg-1".into(),
                    ..Default::default()
                },
            )),
            reply: Reply::DeleteTaskPushNotificationConfig(pbjson_types::Empty {}),
            result: Value::Null,
        },
        Op::GetExtendedAgentCard => Case {
            params: Value::Null,
            expected: Request::Unary(UnaryRequest::GetExtendedAgentCard(
                GetExtendedAgentCardRequest::default(),
            )),
            reply: Reply::GetExtendedAgentCard(AgentCard {
                name: "agent".into(),
                description: "d".into(),
                version: "1".into(),
                supported_interfaces: vec![AgentInterface {
                    url: "grpc.example:443".into(),
                    protocol_binding: "GRPC".into(),
                    protocol_version: "1.0".into(),
                    ..Default::default()
                }],
                capabilities: Some(AgentCapabilities {
                    streaming: Some(false),
                    ..Default::default()
                }),
                documentation_url: Some(String::new()),
                ..Default::default()
            }),
            // `optional` fields holding defaults are printed: presence is kept.
            result: json!({"name": "agent", "description": "d", "version": "1",
                           "supportedInterfaces": [{"url": "grpc.example:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
                           "capabilities": {"streaming": false}, "documentationUrl": ""}),
        },
        Op::SendStreamingMessage | Op::SubscribeToTask => {
            unreachable!("streams are tested in streams.rs")
        }
    }
}

scheme_tests!(every_unary_operation_round_trips_over_grpc);
async fn every_unary_operation_round_trips_over_grpc(scheme: Scheme) {
    for &op in Op::ALL.iter().filter(|op| !op.is_streaming()) {
        let case = unary_case(op);
        let reply = case.reply.clone();
        let (backend, url) = scheme.setup(move |_| Answer::Reply(reply.clone())).await;
        let body = if case.params.is_null() {
            json!({"jsonrpc": "2.0", "id": op.name(), "method": op.name()}).to_string()
        } else {
            request(json!(op.name()), op.name(), case.params.clone())
        };
        let response = rpc(&url, &body).await;
        assert_eq!(
            response,
            json!({"jsonrpc": "2.0", "id": op.name(), "result": case.result}),
            "{op:?}"
        );
        let seen = backend.last();
        assert_eq!(
            seen.request, case.expected,
            "{op:?}: request the backend received"
        );
        assert_eq!(seen.metadata.get("a2a-version").unwrap(), "1.0", "{op:?}");
    }
}

scheme_tests!(streaming_operations_reach_their_rpc);
async fn streaming_operations_reach_their_rpc(scheme: Scheme) {
    for (method, params, expected) in [
        (
            "SendStreamingMessage",
            message_params("go"),
            Op::SendStreamingMessage,
        ),
        (
            "SubscribeToTask",
            json!({"id": "t-1", "tenant": "acme"}),
            Op::SubscribeToTask,
        ),
    ] {
        let (backend, url) = scheme
            .setup(|_| {
                Answer::Stream(vec![Step::Event(status_update(
                    "t-1",
                    TaskState::Completed,
                ))])
            })
            .await;
        let (headers, mut sse) = SseReader::open(&url, request(json!(7), method, params)).await;
        assert_eq!(headers["content-type"], "text/event-stream");
        let frame = sse.data().await.unwrap();
        assert_eq!(frame["id"], 7);
        assert_eq!(
            frame["result"]["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        assert!(sse.data().await.is_none());
        assert_eq!(backend.last().request.op(), expected);
        if let Request::Stream(StreamRequest::SubscribeToTask(r)) = backend.last().request {
            assert_eq!((r.id.as_str(), r.tenant.as_str()), ("t-1", "acme"));
        }
    }
}

#[test]
fn unary_cases_cover_the_table() {
    for &op in Op::ALL.iter().filter(|op| !op.is_streaming()) {
        let case = unary_case(op);
        assert_eq!(case.expected.op(), op);
        assert_eq!(case.reply.op(), op);
    }
}

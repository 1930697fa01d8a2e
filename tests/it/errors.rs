//! Every row of the error table at the wire: a backend `google.rpc.Status` becomes the
//! JSON-RPC error its `ErrorInfo.reason` names (status code only as fallback), with every
//! detail kept in `error.data`; gateway faults are told apart by their own domain.

use crate::harness;

use std::time::Duration;

use a2a_gateway::protocol::error::{ErrorKind, Profile};
use a2a_gateway::protocol::ops::Reply;
use harness::*;
use prost::Message as _;
use serde_json::{json, Value};
use tonic::{Code, Status};
use tonic_types::pb;

fn any<M: prost::Message>(name: &str, message: &M) -> prost_types::Any {
    prost_types::Any {
        type_url: format!("type.googleapis.com/google.rpc.{name}"),
        value: message.encode_to_vec(),
    }
}

fn status_with(code: Code, message: &str, details: Vec<prost_types::Any>) -> Status {
    let status = pb::Status {
        code: code as i32,
        message: message.into(),
        details,
    };
    Status::with_details(code, message, status.encode_to_vec().into())
}

fn error_info(reason: &str, domain: &str) -> prost_types::Any {
    any(
        "ErrorInfo",
        &pb::ErrorInfo {
            reason: reason.into(),
            domain: domain.into(),
            metadata: [("taskId".to_owned(), "t-1".to_owned())].into(),
        },
    )
}

const GET_TASK: &str = r#"{"jsonrpc":"2.0","id":9,"method":"GetTask","params":{"id":"t-1"}}"#;

async fn error_for(scheme: Scheme, status: impl Fn() -> Status + Send + Sync + 'static) -> Value {
    let (_, url) = scheme.setup(move |_| Answer::Error(status())).await;
    let reply = rpc(&url, GET_TASK).await;
    assert_eq!(reply["id"], 9, "{reply}");
    assert!(reply.get("result").is_none());
    reply["error"].clone()
}

scheme_tests!(a2a_errors_map_by_reason);
async fn a2a_errors_map_by_reason(scheme: Scheme) {
    for &kind in ErrorKind::ALL {
        let Some(reason) = kind.reason() else {
            continue;
        };
        // Each profile's status, then a status that disagrees: the reason decides.
        let statuses = Profile::ALL.map(|p| kind.grpc(p));
        for code in statuses.into_iter().chain([Code::Unknown]) {
            let error = error_for(scheme, move || {
                status_with(
                    code,
                    "agent says no",
                    vec![error_info(reason, "a2a-protocol.org")],
                )
            })
            .await;
            assert_eq!(error["code"], kind.code(), "{kind:?} via {code:?}: {error}");
            assert_eq!(error["message"], "agent says no");
            assert_eq!(
                error["data"],
                json!([{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason, "domain": "a2a-protocol.org", "metadata": {"taskId": "t-1"}
                }])
            );
        }
    }
}

scheme_tests!(status_codes_are_the_fallback);
async fn status_codes_are_the_fallback(scheme: Scheme) {
    let cases = [
        (Code::NotFound, -32001),
        (Code::InvalidArgument, -32602),
        (Code::Unimplemented, -32601),
        (Code::Unauthenticated, -31401),
        (Code::PermissionDenied, -31403),
        (Code::Internal, -32603),
        (Code::Unknown, -32603),
        (Code::FailedPrecondition, -32603),
        (Code::ResourceExhausted, -32603),
        (Code::Aborted, -32603),
    ];
    for (code, expected) in cases {
        let error = error_for(scheme, move || Status::new(code, format!("plain {code:?}"))).await;
        assert_eq!(error["code"], expected, "{code:?}: {error}");
        assert_eq!(error["message"], format!("plain {code:?}"));
        assert!(error.get("data").is_none(), "{error}");
    }
    // An ErrorInfo of another domain does not decide.
    let error = error_for(scheme, || {
        status_with(
            Code::Internal,
            "x",
            vec![error_info("TASK_NOT_FOUND", "example.com")],
        )
    })
    .await;
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"][0]["domain"], "example.com");
    // An empty message gets the table's standard message.
    let error = error_for(scheme, || Status::new(Code::NotFound, "")).await;
    assert_eq!(error["message"], "Task not found");
}

scheme_tests!(every_detail_is_kept);
async fn every_detail_is_kept(scheme: Scheme) {
    let details = || {
        vec![
            error_info("TASK_NOT_FOUND", "a2a-protocol.org"),
            any(
                "BadRequest",
                &pb::BadRequest {
                    field_violations: vec![pb::bad_request::FieldViolation {
                        field: "id".into(),
                        description: "empty".into(),
                        reason: "REQUIRED".into(),
                        localized_message: Some(pb::LocalizedMessage {
                            locale: "en".into(),
                            message: "Id missing".into(),
                        }),
                    }],
                },
            ),
            any(
                "RetryInfo",
                &pb::RetryInfo {
                    retry_delay: Some(prost_types::Duration {
                        seconds: 1,
                        nanos: 500_000_000,
                    }),
                },
            ),
            any(
                "DebugInfo",
                &pb::DebugInfo {
                    stack_entries: vec!["a".into(), "b".into()],
                    detail: "d".into(),
                },
            ),
            any(
                "QuotaFailure",
                &pb::QuotaFailure {
                    violations: vec![pb::quota_failure::Violation {
                        subject: "s".into(),
                        description: "d".into(),
                        ..Default::default()
                    }],
                },
            ),
            any(
                "PreconditionFailure",
                &pb::PreconditionFailure {
                    violations: vec![pb::precondition_failure::Violation {
                        r#type: "TOS".into(),
                        subject: "s".into(),
                        description: "d".into(),
                    }],
                },
            ),
            any(
                "RequestInfo",
                &pb::RequestInfo {
                    request_id: "r".into(),
                    serving_data: "sd".into(),
                },
            ),
            any(
                "ResourceInfo",
                &pb::ResourceInfo {
                    resource_type: "task".into(),
                    resource_name: "t-1".into(),
                    owner: "o".into(),
                    description: "d".into(),
                },
            ),
            any(
                "Help",
                &pb::Help {
                    links: vec![pb::help::Link {
                        description: "docs".into(),
                        url: "https://d".into(),
                    }],
                },
            ),
            any(
                "LocalizedMessage",
                &pb::LocalizedMessage {
                    locale: "fr".into(),
                    message: "introuvable".into(),
                },
            ),
            prost_types::Any {
                type_url: "type.example.com/acme.Custom".into(),
                value: vec![8, 1],
            },
        ]
    };
    let error = error_for(scheme, move || {
        status_with(Code::NotFound, "gone", details())
    })
    .await;
    assert_eq!(error["code"], -32001);
    assert_eq!(
        error["data"],
        json!([
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org", "metadata": {"taskId": "t-1"}},
            {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "id", "description": "empty", "reason": "REQUIRED", "localizedMessage": {"locale": "en", "message": "Id missing"}}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.500s"},
            {"@type": "type.googleapis.com/google.rpc.DebugInfo", "stackEntries": ["a", "b"], "detail": "d"},
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"subject": "s", "description": "d"}]},
            {"@type": "type.googleapis.com/google.rpc.PreconditionFailure", "violations": [{"type": "TOS", "subject": "s", "description": "d"}]},
            {"@type": "type.googleapis.com/google.rpc.RequestInfo", "requestId": "r", "servingData": "sd"},
            {"@type": "type.googleapis.com/google.rpc.ResourceInfo", "resourceType": "task", "resourceName": "t-1", "owner": "o", "description": "d"},
            {"@type": "type.googleapis.com/google.rpc.Help", "links": [{"description": "docs", "url": "https://d"}]},
            {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "fr", "message": "introuvable"},
            {"@type": "type.example.com/acme.Custom", "value": "CAE="},
        ])
    );
}

fn gateway_fault(error: &Value, reason: &str) {
    assert_eq!(error["code"], -32603, "{error}");
    assert_eq!(error["data"][0]["domain"], "a2a-gateway", "{error}");
    assert_eq!(error["data"][0]["reason"], reason, "{error}");
}

scheme_tests!(unreachable_backend_is_a_gateway_fault);
async fn unreachable_backend_is_a_gateway_fault(scheme: Scheme) {
    let closed = crate::harness::ClosedPort::new();
    let backend = scheme.url(([127, 0, 0, 1], closed.port()).into());
    let url = gateway(&backend, Settings::default()).await;
    let reply = rpc(&url, GET_TASK).await;
    gateway_fault(&reply["error"], "BACKEND_UNAVAILABLE");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{reply}"
    );
}

scheme_tests!(deadline_exceeded_is_a_gateway_fault);
async fn deadline_exceeded_is_a_gateway_fault(scheme: Scheme) {
    let settings = Settings {
        unary_timeout: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let slow = || {
        Answer::After(
            Duration::from_secs(5),
            Box::new(Answer::Reply(Reply::GetTask(task(
                "t-1",
                a2a_gateway::proto::TaskState::Working,
            )))),
        )
    };
    let (_, url) = scheme.setup_with(move |_| slow(), settings).await;
    let started = std::time::Instant::now();
    let reply = rpc(&url, GET_TASK).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "deadline enforced: {:?}",
        started.elapsed()
    );
    gateway_fault(&reply["error"], "BACKEND_DEADLINE_EXCEEDED");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deadline"),
        "{reply}"
    );
}

scheme_tests!(connection_lost_is_a_gateway_fault);
async fn connection_lost_is_a_gateway_fault(scheme: Scheme) {
    // A "backend" that accepts, reads the start of the call, then drops the connection.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let Some(mut socket) = scheme.accept(socket).await else {
                    return;
                };
                let mut buf = [0u8; 256];
                let _ = socket.read(&mut buf).await;
                drop(socket);
            });
        }
    });
    let url = gateway(&scheme.url(addr), Settings::default()).await;
    let reply = rpc(&url, GET_TASK).await;
    gateway_fault(&reply["error"], "BACKEND_CONNECTION_RESET");
}

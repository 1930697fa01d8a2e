//! A call means the same whichever front it comes through (issue 24): one route serving
//! `fronts = ["JSONRPC", "HTTP+JSON", "GRPC"]` in front of the reference SDK's agent
//! (`tests/peers/agent.py`), once over each backend binding, and the same scripted
//! conversation through every front × backend. Each answer is read back into its protobuf
//! message (a JSON-RPC `result`, an HTTP+JSON body, a gRPC reply; stream frames alike)
//! and written as ProtoJSON, so the transcripts compare as messages, not as encodings;
//! an error is its `ErrorInfo.reason` and message, once its front's code (JSON-RPC code,
//! HTTP status and `status` name, gRPC code) has been checked against that reason's row
//! of the error table in the route's profile (1.0.1 for the conversation, then 1.0.0 for
//! the error rows). One expectation holds for every pair.

use crate::grpc_front;
use crate::harness;
use crate::rest_front::{layout, REST};

use std::time::Duration;

use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
use a2a_gateway::proto::*;
use a2a_gateway::protocol::error::{ErrorKind, Profile};
use a2a_gateway::protocol::ops::{Op, Reply, Request, StreamRequest};
use harness::peer::{self, Peer};
use harness::{transcript, SseReader};
use prost::Message as _;
use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::Serialize;
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::Streaming;
use tonic_types::pb;

/// The longest wait for one stream frame (the agent's slowest trigger here ticks every 0.2 s).
const FRAME_WITHIN: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug)]
enum Front {
    JsonRpc,
    HttpJson,
    Grpc,
}

const FRONTS: [Front; 3] = [Front::JsonRpc, Front::HttpJson, Front::Grpc];

/// One front of one gateway, and the route's profile, which every code it writes is
/// checked against.
#[derive(Clone)]
struct Target {
    front: Front,
    origin: String,
    profile: Profile,
}

/// `value` read as the message `T` and written back: ProtoJSON as the gateway's types
/// write it, whatever wrote `value`.
fn message<T: DeserializeOwned + Serialize>(value: Value) -> Value {
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{e}: not a {}: {value}", std::any::type_name::<T>()));
    serde_json::to_value(typed).unwrap()
}

/// A unary operation's reply, in JSON, as its message.
fn reply_message(op: Op, reply: Value) -> Value {
    match op {
        Op::SendMessage => message::<SendMessageResponse>(reply),
        Op::GetTask | Op::CancelTask => message::<Task>(reply),
        Op::ListTasks => message::<ListTasksResponse>(reply),
        Op::CreateTaskPushNotificationConfig | Op::GetTaskPushNotificationConfig => {
            message::<TaskPushNotificationConfig>(reply)
        }
        Op::ListTaskPushNotificationConfigs => {
            message::<ListTaskPushNotificationConfigsResponse>(reply)
        }
        // JSON-RPC's `result` for it is `null`, as the reference SDK writes it.
        Op::DeleteTaskPushNotificationConfig if reply.is_null() => json!({}),
        Op::DeleteTaskPushNotificationConfig => message::<pbjson_types::Empty>(reply),
        Op::GetExtendedAgentCard => message::<AgentCard>(reply),
        Op::SendStreamingMessage | Op::SubscribeToTask => panic!("{op:?} has no unary reply"),
    }
}

/// A gRPC reply as ProtoJSON.
fn reply_json(reply: &Reply) -> Value {
    let json = match reply {
        Reply::SendMessage(r) => serde_json::to_value(r),
        Reply::GetTask(r) | Reply::CancelTask(r) => serde_json::to_value(r),
        Reply::ListTasks(r) => serde_json::to_value(r),
        Reply::CreateTaskPushNotificationConfig(r) | Reply::GetTaskPushNotificationConfig(r) => {
            serde_json::to_value(r)
        }
        Reply::ListTaskPushNotificationConfigs(r) => serde_json::to_value(r),
        Reply::DeleteTaskPushNotificationConfig(r) => serde_json::to_value(r),
        Reply::GetExtendedAgentCard(r) => serde_json::to_value(r),
    };
    json.unwrap()
}

/// An error as every front must mean it: its reason and message, after `code` (what the
/// front said) is checked against the reason's row (`row` picks the front's column).
fn meaning(
    front: Front,
    code: Value,
    message: &str,
    reason: Option<&str>,
    row: impl Fn(ErrorKind) -> Value,
) -> Value {
    // Without a reason the error is the agent's failure, the internal row.
    let kind = match reason {
        Some(reason) => *(ErrorKind::ALL.iter())
            .find(|k| k.reason() == Some(reason))
            .unwrap_or_else(|| panic!("{front:?}: {reason} is no row of the error table")),
        None => ErrorKind::Internal,
    };
    assert_eq!(code, row(kind), "{front:?}: {reason:?} {message}");
    json!({"error": reason.unwrap_or(NO_REASON), "message": message})
}

/// The `ErrorInfo.reason` among JSON `details` (a JSON-RPC `error.data`, an HTTP+JSON
/// `error.details`).
fn json_reason(details: &Value) -> Option<&str> {
    (details.as_array()?.iter())
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        .and_then(|d| d["reason"].as_str())
}

/// What an error without an `ErrorInfo` reason reads as.
const NO_REASON: &str = "<no reason>";

/// A JSON-RPC error object, as every front means it.
fn jsonrpc_error(error: &Value) -> Value {
    let message = error["message"].as_str().unwrap();
    meaning(
        Front::JsonRpc,
        error["code"].clone(),
        message,
        json_reason(&error["data"]),
        |kind| json!(kind.code()),
    )
}

/// An HTTP+JSON error (status and `google.rpc.Status` body), as every front means it.
fn rest_error(profile: Profile, status: u16, body: &Value) -> Value {
    let error = &body["error"];
    let said = json!([status, error["code"], error["status"]]);
    meaning(
        Front::HttpJson,
        said,
        error["message"].as_str().unwrap(),
        json_reason(&error["details"]),
        |kind| {
            let http = kind.http(profile);
            let name = format!("{:?}", kind.grpc(profile));
            json!([http, http, screaming(&name)])
        },
    )
}

/// `FailedPrecondition` → `FAILED_PRECONDITION` (a `google.rpc.Code` name).
fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// A gRPC status, as every front means it.
fn grpc_error(profile: Profile, status: &tonic::Status) -> Value {
    let details = pb::Status::decode(status.details()).unwrap_or_default();
    let reason = (details.details.iter())
        .find(|any| any.type_url == "type.googleapis.com/google.rpc.ErrorInfo")
        .map(|any| pb::ErrorInfo::decode(&any.value[..]).unwrap().reason);
    meaning(
        Front::Grpc,
        json!(format!("{:?}", status.code())),
        status.message(),
        reason.as_deref(),
        |kind| json!(format!("{:?}", kind.grpc(profile))),
    )
}

/// A stream being read, on any front.
enum Frames {
    /// JSON-RPC or HTTP+JSON: SSE.
    Sse(Front, Profile, SseReader),
    Grpc(Profile, Streaming<StreamResponse>),
    /// Refused before its first frame: the error.
    Refused(Option<Value>),
}

impl Frames {
    /// The next frame (`Ok`, as its message), the error that ends the stream (`Err`), or
    /// `None` at its end.
    async fn next(&mut self) -> Option<Result<Value, Value>> {
        match self {
            Frames::Refused(error) => error.take().map(Err),
            Frames::Grpc(profile, stream) => {
                match tokio::time::timeout(FRAME_WITHIN, stream.message())
                    .await
                    .expect("a stream stalled")
                {
                    Ok(frame) => frame.map(|f| Ok(serde_json::to_value(f).unwrap())),
                    Err(status) => Some(Err(grpc_error(*profile, &status))),
                }
            }
            Frames::Sse(front, profile, reader) => {
                let data = tokio::time::timeout(FRAME_WITHIN, reader.data())
                    .await
                    .expect("a stream stalled")?;
                Some(match front {
                    Front::JsonRpc if data.get("error").is_some() => {
                        Err(jsonrpc_error(&data["error"]))
                    }
                    Front::JsonRpc => Ok(message::<StreamResponse>(data["result"].clone())),
                    // A status body ends an HTTP+JSON stream; its HTTP status is the row's.
                    _ if data.get("error").is_some() => {
                        let status = data["error"]["code"].as_u64().unwrap() as u16;
                        Err(rest_error(*profile, status, &data))
                    }
                    _ => Ok(message::<StreamResponse>(data)),
                })
            }
        }
    }

    /// Every frame, then how the stream ended.
    async fn drain(mut self) -> Value {
        let mut frames = Vec::new();
        loop {
            match self.next().await {
                Some(Ok(frame)) => frames.push(frame),
                Some(Err(error)) => return json!({"frames": frames, "end": error}),
                None => return json!({"frames": frames, "end": "OK"}),
            }
        }
    }
}

impl Target {
    async fn grpc(&self) -> A2aServiceClient<Channel> {
        A2aServiceClient::connect(self.origin.clone())
            .await
            .unwrap()
    }

    /// `op` with `params` (ProtoJSON): its reply message, or its error.
    async fn unary(&self, op: Op, params: Value) -> Value {
        match self.front {
            Front::JsonRpc => {
                let url = format!("{}/a2a/jsonrpc", self.origin);
                let response =
                    harness::rpc(&url, &harness::request(json!(1), op.name(), params)).await;
                match response.get("error") {
                    Some(error) => jsonrpc_error(error),
                    None => json!({"reply": reply_message(op, response["result"].clone())}),
                }
            }
            Front::HttpJson => {
                let response = self.rest(op, &params).await;
                let status = response.status().as_u16();
                let body: Value = response.json().await.unwrap();
                match status {
                    200 => json!({"reply": reply_message(op, body)}),
                    _ => rest_error(self.profile, status, &body),
                }
            }
            Front::Grpc => {
                let Request::Unary(request) = op.deserialize(&params).unwrap() else {
                    panic!("{op:?} is not unary");
                };
                let mut client = self.grpc().await;
                match grpc_front::call(&mut client, request).await {
                    Ok(reply) => json!({"reply": reply_json(&reply)}),
                    Err(status) => grpc_error(self.profile, &status),
                }
            }
        }
    }

    /// The HTTP+JSON request of `op` with `params`, sent.
    async fn rest(&self, op: Op, params: &Value) -> reqwest::Response {
        let (method, path, body) = layout(op, params);
        let mut request = (harness::client())
            .request(method, format!("{}{REST}{path}", self.origin))
            .header("a2a-version", "1.0");
        if let Some(body) = body {
            request =
                (request.header("content-type", "application/a2a+json")).body(body.to_string());
        }
        request.send().await.unwrap()
    }

    /// Opens the stream of `op` with `params`.
    async fn open(&self, op: Op, params: Value) -> Frames {
        let response = match self.front {
            Front::Grpc => {
                let Request::Stream(request) = op.deserialize(&params).unwrap() else {
                    panic!("{op:?} is not streaming");
                };
                let mut client = self.grpc().await;
                let opened = match request {
                    StreamRequest::SendStreamingMessage(r) => {
                        client.send_streaming_message(r).await
                    }
                    StreamRequest::SubscribeToTask(r) => client.subscribe_to_task(r).await,
                };
                return match opened {
                    Ok(stream) => Frames::Grpc(self.profile, stream.into_inner()),
                    Err(status) => Frames::Refused(Some(grpc_error(self.profile, &status))),
                };
            }
            Front::JsonRpc => (harness::client())
                .post(format!("{}/a2a/jsonrpc", self.origin))
                .header("content-type", "application/json")
                .header("a2a-version", "1.0")
                .body(harness::request(json!(1), op.name(), params))
                .send()
                .await
                .unwrap(),
            Front::HttpJson => self.rest(op, &params).await,
        };
        let is_sse = (response.headers().get("content-type"))
            .is_some_and(|t| t.to_str().unwrap().starts_with("text/event-stream"));
        if is_sse {
            return Frames::Sse(self.front, self.profile, SseReader::new(response));
        }
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        Frames::Refused(Some(match self.front {
            Front::JsonRpc => jsonrpc_error(&body["error"]),
            _ => rest_error(self.profile, status, &body),
        }))
    }

    async fn stream(&self, op: Op, params: Value) -> Value {
        self.open(op, params).await.drain().await
    }
}

fn send(text: &str, context: &str) -> Value {
    harness::message_in(text, Some(context), None)
}

/// The conversation through `target`: every operation, streams, a cancel seen by a
/// subscriber, and the errors.
async fn conversation(target: Target) -> Vec<Value> {
    let t = &target;
    let ctx = uuid::Uuid::new_v4().to_string();
    let mut out = vec![t.unary(Op::SendMessage, send("hello", &ctx)).await];
    let done = t.unary(Op::SendMessage, send("task", &ctx)).await;
    let id = done["reply"]["task"]["id"].as_str().unwrap().to_owned();
    out.push(done);
    out.push(
        t.unary(Op::GetTask, json!({"id": id, "historyLength": 1}))
            .await,
    );
    let listed =
        json!({"contextId": ctx, "status": "TASK_STATE_COMPLETED", "includeArtifacts": true});
    out.push(t.unary(Op::ListTasks, listed).await);
    out.push(t.unary(Op::CancelTask, json!({"id": id})).await);
    let config =
        json!({"taskId": id, "id": "cfg-1", "url": "http://127.0.0.1:9/hook", "token": "tok"});
    out.push(t.unary(Op::CreateTaskPushNotificationConfig, config).await);
    let named = json!({"taskId": id, "id": "cfg-1"});
    out.push(
        t.unary(Op::GetTaskPushNotificationConfig, named.clone())
            .await,
    );
    out.push(
        t.unary(Op::ListTaskPushNotificationConfigs, json!({"taskId": id}))
            .await,
    );
    out.push(
        t.unary(Op::DeleteTaskPushNotificationConfig, named.clone())
            .await,
    );
    out.push(t.unary(Op::GetTaskPushNotificationConfig, named).await);
    // The interfaces are the route's own (`cards::`); the rest is the agent's.
    let mut card = t.unary(Op::GetExtendedAgentCard, json!({})).await;
    card["reply"]["supportedInterfaces"] = json!("<the route's>");
    out.push(card);
    for text in [
        "stream",
        "late-error:TaskNotFound",
        "error:UnsupportedOperation",
    ] {
        out.push(t.stream(Op::SendStreamingMessage, send(text, &ctx)).await);
    }

    // A slow task, a subscriber, a cancel once the subscriber has its first frame.
    let mut slow = send("slow:20", &ctx);
    slow["configuration"] = json!({"returnImmediately": true});
    let started = t.unary(Op::SendMessage, slow).await;
    let slow_id = started["reply"]["task"]["id"].as_str().unwrap().to_owned();
    out.push(started);
    let mut subscriber = t.open(Op::SubscribeToTask, json!({"id": slow_id})).await;
    // The task as it stands when the subscriber comes (its ticks so far), and ticks before
    // the cancel, depend on timing; its id, the last frame and the end do not.
    let first = subscriber
        .next()
        .await
        .expect("the subscriber's first frame");
    out.push(first.expect("a frame")["task"]["id"].clone());
    out.push(t.unary(Op::CancelTask, json!({"id": slow_id})).await);
    let mut last = None;
    let end = loop {
        match subscriber.next().await {
            Some(Ok(frame)) => last = Some(frame),
            Some(Err(error)) => break error,
            None => break json!("OK"),
        }
    };
    out.push(json!({"last": last, "end": end}));
    out.push(t.stream(Op::SubscribeToTask, json!({"id": slow_id})).await);
    out.extend(errors(target.clone()).await);
    out
}

/// Every error row the agent raises, and a few it answers with.
async fn errors(target: Target) -> Vec<Value> {
    let t = &target;
    let ctx = uuid::Uuid::new_v4().to_string();
    let mut out = Vec::new();
    for name in peer::AGENT_ERRORS {
        let text = format!("error:{name}");
        out.push(t.unary(Op::SendMessage, send(&text, &ctx)).await);
    }
    out.push(t.unary(Op::SendMessage, send("boom", &ctx)).await);
    out.push(t.unary(Op::GetTask, json!({"id": "no-such-task"})).await);
    out.push(t.unary(Op::CancelTask, json!({"id": "no-such-task"})).await);
    out.push(t.unary(Op::SendMessage, json!({})).await);
    let error = send("error:UnsupportedOperation", &ctx);
    out.push(t.stream(Op::SendStreamingMessage, error).await);
    out
}

/// Every front of a route in `profile` before `agent` over each binding, as differential
/// paths.
async fn targets(agent: &Peer, profile: Profile) -> Vec<(&'static str, Target)> {
    let mut paths = Vec::new();
    for (binding, backend) in [
        (
            "grpc",
            ["--backend", agent.grpc.as_str(), "--binding", "GRPC"],
        ),
        (
            "rest",
            ["--backend", agent.rest.as_str(), "--binding", "HTTP+JSON"],
        ),
    ] {
        let fronts = ["--fronts", "JSONRPC,HTTP+JSON,GRPC"];
        let push = ["--push-allow-http", "--push-allow", "127.0.0.1"];
        let profiled = ["--spec-profile", profile.name()];
        let flags: Vec<&str> = [&backend[..], &fronts, &push, &profiled].concat();
        let origin = harness::serve_on_workers(&flags, None).await;
        for front in FRONTS {
            // A test's few names, for the life of the test process.
            let name: &'static str = format!("{front:?} front, {binding} backend").leak();
            let origin = origin.clone();
            paths.push((
                name,
                Target {
                    front,
                    origin,
                    profile,
                },
            ));
        }
    }
    paths
}

/// The whole conversation in the default profile (1.0.1, the reference SDK's), then the
/// agent's error rows in 1.0.0, whose codes differ on the HTTP+JSON and gRPC fronts.
#[tokio::test(flavor = "multi_thread")]
async fn every_front_means_the_same_over_every_backend() {
    let agent = tokio::task::spawn_blocking(Peer::start).await.unwrap();
    let paths = targets(&agent, Profile::V1_0_1).await;
    transcript::differential("cross-front", &paths, known_sdk_differences, conversation).await;
    let paths = targets(&agent, Profile::V1_0_0).await;
    transcript::differential("cross-front 1.0.0", &paths, known_sdk_differences, errors).await;
}

/// The reference SDK words an uncaught exception in agent code (`boom`) differently on
/// each binding (gRPC `Unexpected <class 'RuntimeError'>: boom`, HTTP+JSON `unknown
/// exception`), without a reason; every front passes on the agent's words, so an error
/// without a reason compares by its row alone (checked in `meaning`).
fn known_sdk_differences(mut value: Value) -> Value {
    if value["error"] == NO_REASON {
        value["message"] = json!("<the agent's words>");
    }
    value
}

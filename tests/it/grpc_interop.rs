//! The gRPC front against the reference SDK's own gRPC server (a2a-sdk 1.3.0,
//! `tests/peers/agent.py`): one tonic client of `lf.a2a.v1.A2AService` holds the same
//! conversation (a) with the agent's gRPC server, (b) with the gateway's gRPC front in
//! front of the same agent over HTTP+JSON and (c) over gRPC. Every operation, streams
//! frame by frame, and every error row the agent raises must be identical up to ids and
//! timestamps: the status code and message, `grpc-status-details-bin` decoded (its
//! `google.rpc.Status`, each `ErrorInfo`'s reason, domain and metadata, each `BadRequest`'s
//! violations), the reply messages and the `a2a-extensions` the agent reports back.

use crate::harness;

use std::time::Duration;

use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
use a2a_gateway::proto::StreamResponse;
use harness::peer::{self, Peer};
use harness::transcript;
use prost::Message as _;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::{Response, Status, Streaming};
use tonic_types::pb;

/// The longest wait for one stream frame (the agent's slowest trigger here ticks every 0.2 s).
const FRAME_WITHIN: Duration = Duration::from_secs(20);

/// `params` (ProtoJSON) as the request message `T`, with the version a v1.0 client sends.
fn call<T: DeserializeOwned>(params: Value) -> tonic::Request<T> {
    let message = serde_json::from_value(params.clone())
        .unwrap_or_else(|e| panic!("{e}: not a request message: {params}"));
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    request
}

/// A `SendMessage` request of a user message with `text` in `context`.
fn send(text: &str, context: &str) -> Value {
    harness::message_in(text, Some(context), None)
}

/// `grpc-status-details-bin` decoded: the `google.rpc.Status` and each detail it carries.
fn details(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    let status = pb::Status::decode(bytes).expect("grpc-status-details-bin is a google.rpc.Status");
    let details: Vec<Value> = (status.details.iter())
        .map(|any| match any.type_url.as_str() {
            "type.googleapis.com/google.rpc.ErrorInfo" => {
                let info = pb::ErrorInfo::decode(&any.value[..]).unwrap();
                json!({"@type": any.type_url, "reason": info.reason, "domain": info.domain,
                       "metadata": info.metadata})
            }
            "type.googleapis.com/google.rpc.BadRequest" => {
                let bad = pb::BadRequest::decode(&any.value[..]).unwrap();
                let violations: Vec<Value> = (bad.field_violations.iter())
                    .map(|v| json!({"field": v.field, "description": v.description}))
                    .collect();
                json!({"@type": any.type_url, "fieldViolations": violations})
            }
            other => json!({"@type": other, "value": any.value}),
        })
        .collect();
    json!({"code": status.code, "message": status.message, "details": details})
}

fn status(status: &Status) -> Value {
    json!({"code": format!("{:?}", status.code()), "message": status.message(),
           "details": details(status.details())})
}

/// A unary call's outcome: the reply (ProtoJSON) and the extensions the agent reported
/// back, or the status.
fn unary<T: Serialize>(result: Result<Response<T>, Status>) -> Value {
    match result {
        Ok(response) => {
            let extensions = response.metadata().get("a2a-extensions");
            json!({"reply": serde_json::to_value(response.get_ref()).unwrap(),
                   "extensions": extensions.map(|v| v.to_str().unwrap())})
        }
        Err(refused) => json!({"status": status(&refused)}),
    }
}

/// The next frame of `stream`, bounded by `FRAME_WITHIN`.
async fn next(stream: &mut Streaming<StreamResponse>) -> Result<Option<StreamResponse>, Status> {
    tokio::time::timeout(FRAME_WITHIN, stream.message())
        .await
        .expect("a stream stalled")
}

/// A streaming call's frames (ProtoJSON), how it ended, and the extensions the agent
/// reported back. A status in place of the response head and one after no frame are the
/// same to a client: both read as no frames, then that status.
async fn frames(result: Result<Response<Streaming<StreamResponse>>, Status>) -> Value {
    let response = match result {
        Ok(response) => response,
        Err(refused) => return json!({"frames": [], "end": status(&refused)}),
    };
    let extensions =
        (response.metadata().get("a2a-extensions")).map(|v| v.to_str().unwrap().to_owned());
    let mut stream = response.into_inner();
    let mut frames = Vec::new();
    let end = loop {
        match next(&mut stream).await {
            Ok(Some(frame)) => frames.push(serde_json::to_value(frame).unwrap()),
            Ok(None) => break json!("OK"),
            Err(ended) => break status(&ended),
        }
    };
    json!({"frames": frames, "end": end, "extensions": extensions})
}

/// A refusal's code, `ErrorInfo` reasons and `BadRequest` fields, without its wording.
fn refusal(outcome: Value) -> Value {
    let details = outcome["status"]["details"]["details"].as_array().unwrap();
    let reasons: Vec<&Value> = details.iter().filter_map(|d| d.get("reason")).collect();
    let fields: Vec<&Value> = (details.iter())
        .filter_map(|d| d.get("fieldViolations")?.as_array())
        .flatten()
        .map(|v| &v["field"])
        .collect();
    json!({"code": outcome["status"]["code"], "reasons": reasons, "fields": fields})
}

/// The task id of a `SendMessage` outcome.
fn task_id(outcome: &Value) -> String {
    (outcome["reply"]["task"]["id"].as_str())
        .unwrap_or_else(|| panic!("no task in {outcome}"))
        .to_owned()
}

/// The conversation, against the gRPC server at `url`: every operation, streams, a
/// cancel seen by a subscriber, and every error row.
async fn conversation(url: String) -> Vec<Value> {
    let mut c = A2aServiceClient::connect(url).await.unwrap();
    let ctx = uuid::Uuid::new_v4().to_string();
    let mut out = vec![unary(c.send_message(call(send("hello", &ctx))).await)];
    let done = unary(c.send_message(call(send("task", &ctx))).await);
    let id = task_id(&done);
    out.push(done);
    for text in ["fail", "reject"] {
        out.push(unary(c.send_message(call(send(text, &ctx))).await));
    }
    out.push(unary(c.get_task(call(json!({"id": id}))).await));
    let recent = json!({"id": id, "historyLength": 1});
    out.push(unary(c.get_task(call(recent)).await));
    let listed = json!({"contextId": ctx, "status": "TASK_STATE_COMPLETED"});
    out.push(unary(c.list_tasks(call(listed)).await));
    let page = json!({"contextId": ctx, "pageSize": 1, "includeArtifacts": true});
    out.push(unary(c.list_tasks(call(page)).await));
    let waiting = unary(c.send_message(call(send("input", &ctx))).await);
    let waiting_id = task_id(&waiting);
    out.push(waiting);
    let more = harness::message_in("more", None, Some(&waiting_id));
    out.push(unary(c.send_message(call(more)).await));
    // The agent reports back the extensions it activated (initial metadata).
    let mut asking = call(send("hello", &ctx));
    let extension = "https://a2a-gateway.test/ext/echo/v1";
    (asking.metadata_mut()).insert("a2a-extensions", extension.parse().unwrap());
    out.push(unary(c.send_message(asking).await));
    let mut asking = call(send("stream", &ctx));
    (asking.metadata_mut()).insert("a2a-extensions", extension.parse().unwrap());
    out.push(frames(c.send_streaming_message(asking).await).await);
    // The interfaces are where a card differs by design: the gateway lists its own fronts
    // (`cards::`, `rest_front::the_card_lists_every_front_in_order`).
    let mut card = unary(c.get_extended_agent_card(call(json!({}))).await);
    card["reply"]["supportedInterfaces"] = json!("<interfaces>");
    out.push(card);

    for text in [
        "stream",
        "hello",
        "late-error:TaskNotFound",
        "error:UnsupportedOperation",
    ] {
        out.push(frames(c.send_streaming_message(call(send(text, &ctx))).await).await);
    }

    // Push configs: create (with and without an id), get, list, delete, and the deleted one.
    let config = json!({"taskId": id, "id": "cfg-1", "url": "http://127.0.0.1:9/hook",
                        "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "secret"}});
    let other = json!({"taskId": id, "url": "http://127.0.0.1:9/other"});
    let (named, of_task) = (json!({"taskId": id, "id": "cfg-1"}), json!({"taskId": id}));
    out.push(unary(
        c.create_task_push_notification_config(call(config)).await,
    ));
    out.push(unary(
        c.create_task_push_notification_config(call(other)).await,
    ));
    out.push(unary(
        c.get_task_push_notification_config(call(named.clone()))
            .await,
    ));
    out.push(unary(
        c.list_task_push_notification_configs(call(of_task.clone()))
            .await,
    ));
    out.push(unary(
        c.delete_task_push_notification_config(call(named.clone()))
            .await,
    ));
    out.push(unary(
        c.list_task_push_notification_configs(call(of_task)).await,
    ));
    out.push(unary(
        c.get_task_push_notification_config(call(named)).await,
    ));

    out.extend(cancel_seen_by_a_subscriber(&mut c, &ctx).await);

    for name in peer::AGENT_ERRORS {
        let text = format!("error:{name}");
        out.push(unary(c.send_message(call(send(&text, &ctx))).await));
    }
    out.push(unary(c.send_message(call(send("boom", &ctx))).await));
    out.push(unary(c.list_tasks(call(json!({"pageSize": 1000}))).await));
    out.push(unary(c.get_task(call(json!({"id": "no-such-task"}))).await));
    // Over HTTP+JSON the id is a path segment, so the gateway refuses an empty one itself,
    // in its own words: the same code, reason and field.
    out.push(refusal(unary(c.get_task(call(json!({}))).await)));
    out.push(unary(
        c.cancel_task(call(json!({"id": "no-such-task"}))).await,
    ));
    let unknown = json!({"taskId": "no-such-task", "id": "x"});
    out.push(unary(
        c.get_task_push_notification_config(call(unknown)).await,
    ));
    out.push(unary(c.send_message(call(json!({}))).await));
    let no_parts = json!({"message": {"messageId": "m", "role": "ROLE_USER"}});
    out.push(unary(c.send_message(call(no_parts)).await));
    out.push(
        frames(
            c.subscribe_to_task(call(json!({"id": "no-such-task"})))
                .await,
        )
        .await,
    );
    out
}

/// A slow task started without waiting, a subscriber to it, the task cancelled once the
/// subscriber has its first frame; the subscriber's first and last frames, a second cancel
/// (not cancelable), a subscription to the ended task (unsupported) and the task.
async fn cancel_seen_by_a_subscriber(c: &mut A2aServiceClient<Channel>, ctx: &str) -> Vec<Value> {
    let mut slow = send("slow:20", ctx);
    slow["configuration"] = json!({"returnImmediately": true});
    let started = unary(c.send_message(call(slow)).await);
    let id = task_id(&started);
    let mut out = vec![started];
    let subscribe = call(json!({"id": id}));
    let mut stream = c.subscribe_to_task(subscribe).await.unwrap().into_inner();
    let first = next(&mut stream)
        .await
        .unwrap()
        .expect("the subscriber's first frame");
    // The task as it stands when the subscriber comes (its ticks so far), and ticks before
    // the cancel, depend on timing; its id, the last frame and the end do not.
    let first = serde_json::to_value(first).unwrap();
    out.push(first["task"]["id"].clone());
    out.push(unary(c.cancel_task(call(json!({"id": id}))).await));
    let mut last = None;
    let end = loop {
        match next(&mut stream).await {
            Ok(Some(frame)) => last = Some(frame),
            Ok(None) => break json!("OK"),
            Err(ended) => break status(&ended),
        }
    };
    out.push(json!({"last": serde_json::to_value(last).unwrap(), "end": end}));
    out.push(unary(c.cancel_task(call(json!({"id": id}))).await));
    out.push(frames(c.subscribe_to_task(call(json!({"id": id}))).await).await);
    out.push(unary(
        c.get_task(call(json!({"id": id, "historyLength": 0})))
            .await,
    ));
    out
}

/// What is the reference SDK's own and differs between its bindings, so cannot be the
/// same through the gateway: an uncaught exception in agent code (`boom`) is UNKNOWN
/// `Unexpected <class 'RuntimeError'>: boom` over gRPC but 500 INTERNAL `unknown exception`
/// over HTTP+JSON, neither with an A2A reason, and the gateway passes on what the agent
/// said. Only such statuses, internal and without any detail, are made alike.
fn known_sdk_differences(mut value: Value) -> Value {
    let status = &value["status"];
    let internal = ["Unknown", "Internal"].contains(&status["code"].as_str().unwrap_or(""));
    let detailless =
        (status["details"].get("details").and_then(Value::as_array)).is_none_or(Vec::is_empty);
    if internal && detailless {
        value["status"] = json!("<agent exception>");
    }
    value
}

#[tokio::test(flavor = "multi_thread")]
async fn the_grpc_front_answers_as_the_reference_sdks_own_grpc_server() {
    let agent = tokio::task::spawn_blocking(Peer::start).await.unwrap();
    let fronts = [
        "--fronts",
        "GRPC",
        "--push-allow-http",
        "--push-allow",
        "127.0.0.1",
    ];
    let mut flags = vec!["--backend", &agent.rest, "--binding", "HTTP+JSON"];
    flags.extend(fronts);
    let over_rest = harness::serve_on_workers(&flags, None).await;
    let mut flags = vec!["--backend", &agent.grpc];
    flags.extend(fronts);
    let over_grpc = harness::serve_on_workers(&flags, None).await;
    let paths = [
        ("sdk-grpc", agent.grpc.clone()),
        ("gateway-grpc-over-rest", over_rest),
        ("gateway-grpc-over-grpc", over_grpc),
    ];
    transcript::differential("grpc front", &paths, known_sdk_differences, conversation).await;
}

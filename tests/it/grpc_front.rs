//! The gRPC front (`src/front/grpc.rs`): a tonic client of `lf.a2a.v1.A2AService` (the
//! generated client types) calls the gateway, which calls a gRPC or an HTTP+JSON agent.
//! Every operation arrives at the agent as the client sent it and its reply comes back;
//! streams stream; every error row arrives as its profile's code with its `ErrorInfo`; the
//! client's deadline reaches the agent, its cancel cancels the agent's call; messages are
//! bounded by `max-body`, at the bound and one past it.

use std::time::Duration;

use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
use a2a_gateway::proto::*;
use a2a_gateway::protocol::error::{ErrorKind, Profile};
use a2a_gateway::protocol::ops::{Op, Reply, Request, StreamRequest, UnaryRequest};
use futures::StreamExt;
use prost::Message as _;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_types::pb;

use crate::harness::{self, status_update, task, Answer, Step, TestBackend};
use crate::operations::unary_case;

/// The gateway built from `flags` (its backend among them) with the gRPC front on, served
/// as the only route at the root: its base URL.
async fn gateway(flags: &[&str]) -> String {
    let mut all = vec!["--fronts", "JSONRPC,GRPC", "--push-allow", "hooks.example"];
    all.extend_from_slice(flags);
    let route = harness::route_settings(&all);
    let state = a2a_gateway::route::gateway(&route, Default::default()).unwrap();
    let frontend = a2a_gateway::route::frontend(&route, state);
    harness::serve_frontend(frontend).await
}

/// One gRPC message as the wire frames it: the compression flag, the declared length, the
/// bytes (either may lie, for the tests that send what a client must not).
fn frame(flag: u8, declared: usize, bytes: &[u8]) -> Vec<u8> {
    let mut framed = vec![flag];
    framed.extend_from_slice(&(declared as u32).to_be_bytes());
    framed.extend_from_slice(bytes);
    framed
}

/// POSTs `body` as a gRPC call of `method` at `base` over HTTP/2, with `headers`, without a
/// gRPC client (which would frame it right, and keep its own deadline).
async fn post_grpc(
    base: &str,
    method: &str,
    body: Vec<u8>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let mut request = http
        .post(format!("{base}/lf.a2a.v1.A2AService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(body).send().await.unwrap()
}

/// A gRPC test backend answering with `handler`, the gateway in front of it with `flags`,
/// and a client of the gateway's gRPC front.
async fn setup(
    handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    flags: &[&str],
) -> (TestBackend, A2aServiceClient<Channel>) {
    let backend = TestBackend::new(handler);
    let addr = backend.spawn().await;
    let url = format!("http://{addr}");
    let mut all = vec!["--backend", url.as_str()];
    all.extend_from_slice(flags);
    let base = gateway(&all).await;
    (backend, client(&base).await)
}

async fn client(base: &str) -> A2aServiceClient<Channel> {
    A2aServiceClient::connect(base.to_owned()).await.unwrap()
}

/// One unary call of `request`'s operation through the generated client.
pub(crate) async fn call(
    client: &mut A2aServiceClient<Channel>,
    request: UnaryRequest,
) -> Result<Reply, Status> {
    Ok(match request {
        UnaryRequest::SendMessage(r) => {
            Reply::SendMessage(client.send_message(r).await?.into_inner())
        }
        UnaryRequest::GetTask(r) => Reply::GetTask(client.get_task(r).await?.into_inner()),
        UnaryRequest::ListTasks(r) => Reply::ListTasks(client.list_tasks(r).await?.into_inner()),
        UnaryRequest::CancelTask(r) => Reply::CancelTask(client.cancel_task(r).await?.into_inner()),
        UnaryRequest::CreateTaskPushNotificationConfig(r) => {
            Reply::CreateTaskPushNotificationConfig(
                client
                    .create_task_push_notification_config(r)
                    .await?
                    .into_inner(),
            )
        }
        UnaryRequest::GetTaskPushNotificationConfig(r) => Reply::GetTaskPushNotificationConfig(
            client
                .get_task_push_notification_config(r)
                .await?
                .into_inner(),
        ),
        UnaryRequest::ListTaskPushNotificationConfigs(r) => Reply::ListTaskPushNotificationConfigs(
            client
                .list_task_push_notification_configs(r)
                .await?
                .into_inner(),
        ),
        UnaryRequest::DeleteTaskPushNotificationConfig(r) => {
            Reply::DeleteTaskPushNotificationConfig(
                client
                    .delete_task_push_notification_config(r)
                    .await?
                    .into_inner(),
            )
        }
        UnaryRequest::GetExtendedAgentCard(r) => {
            Reply::GetExtendedAgentCard(client.get_extended_agent_card(r).await?.into_inner())
        }
    })
}

fn get_task(id: &str) -> GetTaskRequest {
    GetTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}

fn user_message(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message {
            message_id: "m-1".into(),
            role: Role::User as i32,
            parts: vec![Part {
                content: Some(part::Content::Text(text.into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The `ErrorInfo` details of a status.
fn error_infos(status: &Status) -> Vec<pb::ErrorInfo> {
    let details = pb::Status::decode(status.details()).unwrap();
    details
        .details
        .iter()
        .filter(|any| any.type_url == "type.googleapis.com/google.rpc.ErrorInfo")
        .map(|any| pb::ErrorInfo::decode(&any.value[..]).unwrap())
        .collect()
}

#[tokio::test]
async fn every_unary_operation_reaches_a_grpc_agent_and_its_reply_comes_back() {
    for &op in Op::ALL.iter().filter(|op| !op.is_streaming()) {
        let case = unary_case(op);
        let reply = case.reply.clone();
        let (backend, mut client) = setup(move |_| Answer::Reply(reply.clone()), &[]).await;
        let Request::Unary(request) = case.expected.clone() else {
            panic!("{op:?} is unary");
        };
        let got = call(&mut client, request).await.unwrap();
        assert_eq!(got, case.reply, "{op:?}: the reply");
        let seen = backend.last();
        assert_eq!(
            seen.request, case.expected,
            "{op:?}: what the agent received"
        );
        assert_eq!(seen.metadata.get("a2a-version").unwrap(), "1.0", "{op:?}");
    }
}

#[tokio::test]
async fn streaming_operations_stream_and_end() {
    let events = vec![
        status_update("t-1", TaskState::Working),
        status_update("t-1", TaskState::Completed),
    ];
    let script = events.clone();
    let (backend, mut client) = setup(
        move |_| Answer::Stream(script.iter().cloned().map(Step::Event).collect()),
        &[],
    )
    .await;
    let stream = client
        .send_streaming_message(user_message("go"))
        .await
        .unwrap();
    let got: Vec<_> = stream.into_inner().map(Result::unwrap).collect().await;
    assert_eq!(got, events);
    assert_eq!(backend.last().request.op(), Op::SendStreamingMessage);

    let subscribe = SubscribeToTaskRequest {
        id: "t-1".into(),
        tenant: "acme".into(),
    };
    let stream = client.subscribe_to_task(subscribe).await.unwrap();
    let got: Vec<_> = stream.into_inner().map(Result::unwrap).collect().await;
    assert_eq!(got, events);
    let Request::Stream(StreamRequest::SubscribeToTask(seen)) = backend.last().request else {
        panic!("not a SubscribeToTask");
    };
    assert_eq!((seen.id.as_str(), seen.tenant.as_str()), ("t-1", "acme"));
}

#[tokio::test]
async fn an_error_after_the_first_event_ends_the_stream_with_its_status() {
    let (_backend, mut client) = setup(
        |_| {
            Answer::Stream(vec![
                Step::Event(status_update("t-1", TaskState::Working)),
                Step::Error(Status::not_found("gone")),
            ])
        },
        &[],
    )
    .await;
    let mut stream = client
        .send_streaming_message(user_message("go"))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.next().await.unwrap().is_ok());
    let status = stream.next().await.unwrap().unwrap_err();
    assert_eq!((status.code(), status.message()), (Code::NotFound, "gone"));
    assert!(stream.next().await.is_none());
}

/// An agent's error with an A2A reason arrives as the row's gRPC code in the route's
/// profile, with its message and its `ErrorInfo`, whatever code the agent chose.
#[tokio::test]
async fn every_error_row_arrives_as_its_profile_s_code_and_reason() {
    for profile in Profile::ALL {
        let flags = ["--spec-profile", profile.name()];
        let (_backend, mut client) = setup(
            |request| {
                let Request::Unary(UnaryRequest::GetTask(get)) = request else {
                    panic!("GetTask only");
                };
                // The test names the reason in the task id.
                let info = pb::ErrorInfo {
                    reason: get.id.clone(),
                    domain: "a2a-protocol.org".into(),
                    metadata: Default::default(),
                };
                let status = pb::Status {
                    code: Code::Unknown as i32,
                    message: "agent says no".into(),
                    details: vec![prost_types::Any {
                        type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
                        value: info.encode_to_vec(),
                    }],
                };
                let details = status.encode_to_vec().into();
                Answer::Error(Status::with_details(
                    Code::Unknown,
                    "agent says no",
                    details,
                ))
            },
            &flags,
        )
        .await;
        for &kind in ErrorKind::ALL {
            let Some(reason) = kind.reason() else {
                continue;
            };
            let status = client.get_task(get_task(reason)).await.unwrap_err();
            assert_eq!(status.code(), kind.grpc(profile), "{kind:?} in {profile:?}");
            assert_eq!(status.message(), "agent says no");
            let infos = error_infos(&status);
            assert_eq!(infos.len(), 1, "{kind:?}");
            assert_eq!(
                (infos[0].reason.as_str(), infos[0].domain.as_str()),
                (reason, "a2a-protocol.org")
            );
        }
    }
}

/// The rows whose gRPC code 1.0.1 changed, raised by the gateway itself: a version it does
/// not serve is VersionNotSupported, UNIMPLEMENTED in 1.0.0, FAILED_PRECONDITION in 1.0.1.
#[tokio::test]
async fn the_gateway_s_own_errors_follow_the_profile() {
    for (profile, code) in [
        ("1.0.0", Code::Unimplemented),
        ("1.0.1", Code::FailedPrecondition),
    ] {
        let (backend, mut client) = setup(
            |_| panic!("the agent is not called"),
            &["--spec-profile", profile],
        )
        .await;
        let mut request = tonic::Request::new(get_task("t-1"));
        request
            .metadata_mut()
            .insert("a2a-version", "2.0".parse().unwrap());
        let status = client.get_task(request).await.unwrap_err();
        assert_eq!(status.code(), code, "{profile}");
        assert_eq!(error_infos(&status)[0].reason, "VERSION_NOT_SUPPORTED");
        assert_eq!(backend.calls(), 0);
    }
}

#[tokio::test]
async fn a_client_deadline_reaches_the_agent_and_bounds_the_call() {
    let (backend, mut client) = setup(
        |_| {
            let reply = Reply::GetTask(task("t-1", TaskState::Working));
            Answer::After(Duration::from_secs(30), Box::new(Answer::Reply(reply)))
        },
        &["--timeout", "60s"],
    )
    .await;
    let mut request = tonic::Request::new(get_task("t-1"));
    request.set_timeout(Duration::from_millis(500));
    let status = client.get_task(request).await.unwrap_err();
    // The client's own timer and the gateway's fire together: either answer ends the call.
    let ended = [Code::DeadlineExceeded, Code::Cancelled];
    assert!(ended.contains(&status.code()), "{status:?}");
    let timeout = backend
        .last()
        .metadata
        .get("grpc-timeout")
        .cloned()
        .unwrap();
    let timeout = timeout.to_str().unwrap();
    let (digits, unit) = timeout.split_at(timeout.len() - 1);
    let nanos: u64 = digits.parse().unwrap();
    let nanos = nanos
        * match unit {
            "n" => 1,
            "u" => 1_000,
            "m" => 1_000_000,
            "S" => 1_000_000_000,
            other => panic!("unit {other}"),
        };
    assert!(
        nanos <= 500_000_000,
        "the agent's grpc-timeout {timeout} is the client's 500ms or less"
    );
    assert!(nanos > 0);
}

#[tokio::test]
async fn a_client_that_cancels_a_stream_cancels_the_agent_s() {
    let (backend, mut client) = setup(
        |_| {
            Answer::Stream(vec![
                Step::Event(status_update("t-1", TaskState::Working)),
                Step::Hang,
            ])
        },
        &[],
    )
    .await;
    let mut stream = client
        .send_streaming_message(user_message("go"))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.next().await.unwrap().is_ok());
    drop(stream);
    // The agent's stream is dropped once the gateway's is: wait for it, within a bound.
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while backend.cancelled.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "the agent's stream was not cancelled");
}

/// `max-body` bounds a message: one of exactly that size is served, one byte more is
/// refused before the agent is called, as a JSON-RPC body one byte past it is: the
/// INVALID_REQUEST row (INVALID_ARGUMENT in both profiles), counted as a rejected request
/// of the route.
#[tokio::test]
async fn a_message_at_max_body_is_served_and_one_byte_more_is_not() {
    let max = 1024;
    let (backend, url) = harness::task_backend().await;
    for profile in ["1.0.0", "1.0.1"] {
        let args = [
            "--backend",
            &url,
            "--fronts",
            "GRPC",
            "--max-body",
            "1024",
            "--spec-profile",
            profile,
        ];
        let origin = harness::serve_on_workers(&args, None).await;
        let mut client = client(&origin).await;
        // Ids are bounded on their own (`MAX_ID_BYTES`), so the tenant carries the size.
        let sized = |len: usize| {
            let mut request = get_task("t-1");
            let base = request.encoded_len() + 3;
            request.tenant = "x".repeat(len - base);
            assert_eq!(request.encoded_len(), len);
            request
        };
        let calls = backend.calls();
        let reply = client.get_task(sized(max)).await;
        assert!(reply.is_ok(), "{profile}: {reply:?}");
        let status = client.get_task(sized(max + 1)).await.unwrap_err();
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{profile}: {status:?}"
        );
        let why = "request body exceeds the limit of 1024 bytes (max-body)";
        assert!(status.message().ends_with(why), "{status:?}");
        assert_eq!(error_infos(&status)[0].reason, "INVALID_REQUEST");
        assert_eq!(backend.calls(), calls + 1, "{profile}");
        let metrics = harness::metrics_text(&origin).await;
        let line = "a2a_gateway_requests_total{route=\"default\",method=\"\",code=\"-32600\"} 1\n";
        assert!(metrics.contains(line), "{profile}: {metrics}");
    }
}

/// The gateway accepts no gRPC compression: a message sent with `grpc-encoding: gzip` is
/// UNIMPLEMENTED naming `identity`, before the agent; `identity` is served.
#[tokio::test]
async fn a_compressed_message_is_unimplemented() {
    let (backend, url) = harness::task_backend().await;
    let base = gateway(&["--backend", &url]).await;
    // One message, its compressed flag as `encoding` says.
    let call = |encoding: &'static str| {
        let message = get_task("t-1").encode_to_vec();
        let framed = frame(u8::from(encoding != "identity"), message.len(), &message);
        let base = base.clone();
        async move { post_grpc(&base, "GetTask", framed, &[("grpc-encoding", encoding)]).await }
    };
    let refused = call("gzip").await;
    assert_eq!(refused.headers()["grpc-status"], "12", "UNIMPLEMENTED");
    assert_eq!(refused.headers()["grpc-accept-encoding"], "identity");
    assert_eq!(backend.calls(), 0);
    let served = call("identity").await;
    assert!(
        served.headers().get("grpc-status").is_none(),
        "not trailers-only"
    );
    // The reply's length bounds its body (served whole, not read ahead as a stream) but
    // is not stated: a gRPC reply has no content-length.
    assert!(served.headers().get("content-length").is_none());
    served.bytes().await.unwrap();
    assert_eq!(backend.calls(), 1);
}

/// A body that is not one whole message (cut short, a compression flag that is no flag, no
/// message, two messages) is INVALID_ARGUMENT (`INVALID_REQUEST`, saying what is wrong)
/// before the agent, counted as a rejected request; one whole message is served.
#[tokio::test]
async fn a_body_that_is_not_one_whole_message_is_invalid() {
    let (backend, url) = harness::task_backend().await;
    let origin = harness::serve_on_workers(&["--backend", &url, "--fronts", "GRPC"], None).await;
    let message = get_task("t-1").encode_to_vec();
    let whole = frame(0, message.len(), &message);
    let call = |body: Vec<u8>| post_grpc(&origin, "GetTask", body, &[]);
    for (body, why) in [
        (frame(0, message.len() + 10, &message), "cut short"),
        (whole[..3].to_vec(), "a prefix cut short"),
        (frame(2, message.len(), &message), "flag 2"),
        (Vec::new(), "no message"),
        ([whole.clone(), whole.clone()].concat(), "two messages"),
    ] {
        let response = call(body).await;
        let status = tonic::Status::from_header_map(response.headers())
            .unwrap_or_else(|| panic!("{why}: trailers-only"));
        assert_eq!(status.code(), Code::InvalidArgument, "{why}: {status:?}");
        assert_eq!(error_infos(&status)[0].reason, "INVALID_REQUEST", "{why}");
        assert!(status.message().contains("malformed"), "{why}: {status:?}");
    }
    assert_eq!(backend.calls(), 0);
    let served = call(whole).await;
    assert!(
        served.headers().get("grpc-status").is_none(),
        "not trailers-only"
    );
    // The reply's length bounds its body (served whole, not read ahead as a stream) but
    // is not stated: a gRPC reply has no content-length.
    assert!(served.headers().get("content-length").is_none());
    served.bytes().await.unwrap();
    assert_eq!(backend.calls(), 1);
    let metrics = harness::metrics_text(&origin).await;
    let line = "a2a_gateway_requests_total{route=\"default\",method=\"\",code=\"-32600\"} 5\n";
    assert!(metrics.contains(line), "{metrics}");
}

/// A message that is not the method's request is INVALID_ARGUMENT (`INVALID_PARAMS`, its
/// reason in the message) before the agent, counted as a rejected request.
#[tokio::test]
async fn a_message_that_is_no_request_is_invalid_params() {
    let (backend, url) = harness::task_backend().await;
    let base = gateway(&["--backend", &url]).await;
    // One message whose bytes are no protobuf (a field tag of 0).
    let refused = post_grpc(&base, "GetTask", frame(0, 2, &[0, 0]), &[]).await;
    let headers = refused.headers();
    assert_eq!(headers["grpc-status"], "3", "INVALID_ARGUMENT: {headers:?}");
    let message = headers["grpc-message"].to_str().unwrap();
    assert!(message.contains("GetTask"), "{message}");
    assert_eq!(backend.calls(), 0);
    let metrics = harness::metrics_text(&base).await;
    let line = "a2a_gateway_requests_total{route=\"default\",method=\"\",code=\"-32602\"} 1\n";
    assert!(metrics.contains(line), "{metrics}");
}

#[tokio::test]
async fn an_unknown_method_is_unimplemented() {
    let backend = TestBackend::new(|_| panic!("the agent is not called"));
    let url = format!("http://{}", backend.spawn().await);
    let base = gateway(&["--backend", &url]).await;
    let channel = Channel::from_shared(base).unwrap().connect().await.unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/lf.a2a.v1.A2AService/NoSuchMethod");
    let codec = tonic_prost::ProstCodec::<GetTaskRequest, Task>::default();
    let status = grpc
        .unary(tonic::Request::new(get_task("t-1")), path, codec)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert_eq!(error_infos(&status)[0].reason, "METHOD_NOT_FOUND");
    assert_eq!(backend.calls(), 0);
}

/// A route whose fronts leave gRPC out answers no gRPC call.
#[tokio::test]
async fn a_route_without_the_grpc_front_serves_no_grpc() {
    let backend = TestBackend::new(|_| panic!("the agent is not called"));
    let addr = backend.spawn().await;
    let url = format!("http://{addr}");
    let route = harness::route_settings(&["--backend", &url]);
    let state = a2a_gateway::route::gateway(&route, Default::default()).unwrap();
    let frontend = a2a_gateway::route::frontend(&route, state);
    let base = harness::serve_frontend(frontend).await;
    let status = client(&base)
        .await
        .get_task(get_task("t-1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
    assert_eq!(backend.calls(), 0);
}

/// The gRPC front in front of an HTTP+JSON agent: the call becomes the agent's REST call,
/// and its JSON reply the client's protobuf one.
#[tokio::test]
async fn a_grpc_client_reaches_an_http_json_agent() {
    use crate::harness::rest_mock::MockAgent;
    let agent = MockAgent::start(|recorded| {
        let body = match recorded.path.as_str() {
            "/tasks/t-7" => serde_json::json!({"id": "t-7", "contextId": "c-1",
                "status": {"state": "TASK_STATE_COMPLETED"}}),
            _ => serde_json::json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "no",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]}}),
        };
        let status = if recorded.path == "/tasks/t-7" {
            200
        } else {
            404
        };
        http::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string()))
            .unwrap()
    })
    .await;
    let base = gateway(&["--binding", "HTTP+JSON", "--backend", &agent.url]).await;
    let mut client = client(&base).await;
    let got = client.get_task(get_task("t-7")).await.unwrap().into_inner();
    assert_eq!((got.id.as_str(), got.context_id.as_str()), ("t-7", "c-1"));
    assert_eq!(got.status.unwrap().state, TaskState::Completed as i32);
    let status = client.get_task(get_task("t-8")).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(error_infos(&status)[0].reason, "TASK_NOT_FOUND");
}

/// `--grpc-listen`: the binary serves gRPC clients on a second port, a call at the root
/// path going to the route that serves gRPC (here one of two routes), and that route's card
/// lists its gRPC interface at that port.
#[tokio::test]
async fn the_binary_serves_grpc_clients_on_grpc_listen() {
    use crate::harness::process::{self, TempFile};
    let backend =
        TestBackend::new(|_| Answer::Reply(Reply::GetTask(task("t-1", TaskState::Completed))));
    let url = format!("http://{}", backend.spawn().await);
    let card = serde_json::json!({
        "name": "grpc", "description": "d", "version": "1.0.0",
        "supportedInterfaces": [
            {"url": "http://10.0.0.7:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": []
    });
    let card = TempFile::new("json", &card.to_string());
    let config = TempFile::new(
        "toml",
        &format!(
            "[[route]]\nname = \"rpc\"\npath = \"/rpc\"\nbackend = \"{url}\"\n\n\
             [[route]]\nname = \"grpc\"\npath = \"/grpc\"\nbackend = \"{url}\"\nfronts = [\"GRPC\"]\n\
             [route.card]\nsource = \"{card}\"\n",
            card = card.path()
        ),
    );
    let grpc_listen = harness::free_listen_address();
    let gateway = process::start(&["--config", config.path(), "--grpc-listen", &grpc_listen]).await;
    let mut client = client(&format!("http://{grpc_listen}")).await;
    let got = client.get_task(get_task("t-1")).await.unwrap().into_inner();
    assert_eq!(got.id, "t-1");
    assert_eq!(backend.calls(), 1);
    let card_url = format!("{}/grpc/.well-known/agent-card.json", gateway.origin());
    let served: serde_json::Value = reqwest::get(&card_url).await.unwrap().json().await.unwrap();
    let port = grpc_listen.rsplit(':').next().unwrap();
    assert_eq!(
        served["supportedInterfaces"][0],
        serde_json::json!({"url": format!("127.0.0.1:{port}"),
                           "protocolBinding": "GRPC", "protocolVersion": "1.0"}),
        "{served}"
    );
}

/// `--grpc-listen` is refused at load when nothing could tell its calls' route.
#[test]
fn grpc_listen_needs_one_grpc_route_per_host() {
    use crate::harness::process::{TempFile, BIN};
    for (routes, why) in [
        ("fronts = [\"JSONRPC\"]", "no route serves gRPC"),
        ("fronts = [\"GRPC\"]", "both serve gRPC for any host"),
    ] {
        let config = TempFile::new(
            "toml",
            &format!(
                "grpc-listen = \"127.0.0.1:0\"\n{routes}\n\
                 [[route]]\nname = \"a\"\npath = \"/a\"\nbackend = \"http://127.0.0.1:1\"\n\n\
                 [[route]]\nname = \"b\"\npath = \"/b\"\nbackend = \"http://127.0.0.1:1\"\n"
            ),
        );
        let out = std::process::Command::new(BIN)
            .args(["check-config", config.path()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
    }
}

/// `grpc.health.v1.Health`: the server and the A2A service are SERVING until the gateway
/// drains; other services are unknown.
#[tokio::test]
async fn grpc_health_follows_the_gateway_s_life() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let route = harness::route_settings(&["--fronts", "GRPC"]);
    let state = a2a_gateway::route::gateway(&route, Default::default()).unwrap();
    let lifecycle = state.lifecycle.clone();
    let frontend = a2a_gateway::route::frontend(&route, state);
    let base = harness::serve_frontend(frontend).await;
    let channel = Channel::from_shared(base).unwrap().connect().await.unwrap();
    let mut health = HealthClient::new(channel);
    let check = |service: &str| HealthCheckRequest {
        service: service.into(),
    };
    for service in ["", "lf.a2a.v1.A2AService"] {
        let status = health
            .check(check(service))
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service:?}");
    }
    let unknown = health.check(check("other.Service")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    lifecycle.drain();
    let status = health.check(check("")).await.unwrap().into_inner().status;
    assert_eq!(status, ServingStatus::NotServing as i32);
}

/// A gRPC call meets the route's authentication through its metadata, the same refusal
/// (UNAUTHENTICATED, the challenge as `www-authenticate`), the same limits
/// (RESOURCE_EXHAUSTED, `retry-after`) and the same metrics as a JSON-RPC call; the
/// client's `a2a-extensions` reach the agent and the agent's come back.
#[tokio::test]
async fn grpc_calls_go_through_the_same_checks_and_counts() {
    use crate::harness::process::TempFile;
    let (backend, url) = harness::task_backend().await;
    let keys = TempFile::new(
        "keys",
        &format!("alice {}\n", harness::key_digest_hex(b"alice-key")),
    );
    let file = format!(
        "backend = \"{url}\"\nfronts = [\"JSONRPC\", \"GRPC\"]\nrate-limit = 0.01\nrate-burst = 2\n\
         [auth.api-keys]\nfile = \"{}\"\n",
        keys.path()
    );
    let origin = harness::serve_on_workers(&[], Some(&file)).await;
    let mut client = client(&origin).await;

    let refused = client.get_task(get_task("t-1")).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let challenge = refused.metadata().get("www-authenticate").unwrap();
    assert_eq!(challenge, "ApiKey header=\"x-api-key\"");
    assert_eq!(backend.calls(), 0);

    let with_key = |extensions: Option<&'static str>| {
        let mut request = tonic::Request::new(get_task("t-1"));
        request
            .metadata_mut()
            .insert("x-api-key", "alice-key".parse().unwrap());
        if let Some(uri) = extensions {
            request
                .metadata_mut()
                .insert("a2a-extensions", uri.parse().unwrap());
        }
        request
    };
    let reply = client.get_task(with_key(Some("urn:x"))).await.unwrap();
    assert_eq!(reply.metadata().get("a2a-extensions").unwrap(), "urn:x");
    assert_eq!(reply.get_ref().id, "t-1");
    let seen = backend.last();
    assert_eq!(seen.metadata.get("a2a-extensions").unwrap(), "urn:x");
    assert!(
        seen.metadata.get("x-api-key").is_none(),
        "the key is consumed"
    );

    // The burst of 2 is spent by the second call: the third is refused.
    client.get_task(with_key(None)).await.unwrap();
    let limited = client.get_task(with_key(None)).await.unwrap_err();
    assert_eq!(limited.code(), Code::ResourceExhausted, "{limited:?}");
    assert!(limited.metadata().get("retry-after").is_some());
    assert_eq!(backend.calls(), 2);

    let metrics = harness::metrics_text(&origin).await;
    let line = "a2a_gateway_requests_total{route=\"default\",method=\"GetTask\",code=\"0\"} 2";
    assert!(metrics.contains(line), "{metrics}");
}

/// Over TLS (ALPN `h2`) as over h2c.
#[tokio::test]
async fn grpc_is_served_over_tls() {
    use crate::harness::process::TempFile;
    use tonic::transport::{Certificate, ClientTlsConfig};
    let (backend, url) = harness::task_backend().await;
    let pki = harness::test_pki();
    let (cert, key) = (
        TempFile::new("pem", &pki.cert_pem),
        TempFile::new("pem", &pki.key_pem),
    );
    let args = [
        "--backend",
        &url,
        "--fronts",
        "GRPC",
        "--tls-cert",
        cert.path(),
        "--tls-key",
        key.path(),
    ];
    let origin = harness::serve_on_workers(&args, None).await;
    let origin = origin.replace("http://127.0.0.1", "https://localhost");
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&pki.ca_pem));
    let channel = Channel::from_shared(origin)
        .unwrap()
        .tls_config(tls)
        .unwrap();
    let mut client = A2aServiceClient::new(channel.connect().await.unwrap());
    let got = client.get_task(get_task("t-1")).await.unwrap().into_inner();
    assert_eq!(got.id, "t-1");
    assert_eq!(backend.calls(), 1);
}

/// The reference SDK's gRPC client (a2a-sdk 1.3.0, `tests/peers/client_conversation.py
/// --grpc`) holds its whole conversation with the gateway's gRPC front, in front of the
/// SDK's own agent over gRPC and over HTTP+JSON, as with the agent's own gRPC server.
#[tokio::test]
async fn the_sdk_grpc_client_completes_a_conversation_through_the_gateway() {
    use crate::harness::peer::{python, Peer};
    use crate::harness::process::{OutputWithin, SDK_CLIENT_WITHIN};
    let peer = Peer::start();
    let admit_hooks = ["--push-allow-http", "--push-allow", "127.0.0.1"];
    let mut targets = vec![(
        "sdk-grpc",
        peer.grpc.trim_start_matches("http://").to_owned(),
    )];
    for flags in [
        vec!["--backend", peer.grpc.as_str()],
        vec!["--backend", peer.rest.as_str(), "--binding", "HTTP+JSON"],
    ] {
        let flags: Vec<&str> = flags.into_iter().chain(admit_hooks).collect();
        let base = gateway(&flags).await;
        let name = if flags.contains(&"HTTP+JSON") {
            "gateway-rest"
        } else {
            "gateway-grpc"
        };
        targets.push((name, base.trim_start_matches("http://").to_owned()));
    }
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/client_conversation.py");
    for (name, target) in targets {
        let (python, script) = (python(), script.clone());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .arg(script)
                .args(["--grpc", &target])
                .output_within(SDK_CLIENT_WITHIN)
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{name}: SDK gRPC client failed\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.lines().any(|l| l.starts_with("OK ")),
            "{name}: {stdout}"
        );
    }
}

/// A route's `max-header-size` holds for gRPC calls too: at the bound served, past it a
/// RESOURCE_EXHAUSTED status (not an HTTP 431 a gRPC client cannot read).
#[tokio::test]
async fn header_fields_past_max_header_size_are_a_grpc_status() {
    let (backend, url) = harness::task_backend().await;
    let args = [
        "--backend",
        &url,
        "--fronts",
        "GRPC",
        "--max-header-size",
        "4KiB",
    ];
    let origin = harness::serve_on_workers(&args, None).await;
    let mut client = client(&origin).await;
    let padded = |len: usize| {
        let mut request = tonic::Request::new(get_task("t-1"));
        let value = "v".repeat(len);
        request
            .metadata_mut()
            .insert("x-pad", value.parse().unwrap());
        request
    };
    client.get_task(padded(100)).await.unwrap();
    let status = client.get_task(padded(8 << 10)).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(error_infos(&status)[0].reason, "GATEWAY_HEADERS_TOO_LARGE");
    assert_eq!(backend.calls(), 1);
}

/// `fronts` decides what a route serves: without JSONRPC its JSON-RPC path is unknown; a
/// front named twice, or none, is refused at load.
#[tokio::test]
async fn fronts_are_what_the_route_serves() {
    let backend =
        TestBackend::new(|_| Answer::Reply(Reply::GetTask(task("t-1", TaskState::Completed))));
    let url = format!("http://{}", backend.spawn().await);
    let route = harness::route_settings(&["--backend", &url, "--fronts", "GRPC"]);
    let state = a2a_gateway::route::gateway(&route, Default::default()).unwrap();
    let frontend = a2a_gateway::route::frontend(&route, state);
    let base = harness::serve_frontend(frontend).await;
    let body = harness::request(
        serde_json::json!(1),
        "GetTask",
        serde_json::json!({"id": "t-1"}),
    );
    let (status, _, _) = harness::post(&format!("{base}/a2a/jsonrpc"), body).await;
    assert_eq!(status, 404);
    client(&base).await.get_task(get_task("t-1")).await.unwrap();

    for (fronts, why) in [
        ("GRPC,JSONRPC,grpc", "GRPC is named twice"),
        ("SOAP", "\"SOAP\" is not a binding"),
    ] {
        let args = ["a2a-gateway", "--backend", &url, "--fronts", fronts];
        let err = match a2a_gateway::settings::Settings::load(args) {
            Ok(_) => panic!("{fronts} was accepted"),
            Err(err) => err.to_string(),
        };
        assert!(err.contains(why), "{fronts}: {err}");
    }
}

/// A gRPC message counts against `global-max-body-bytes-in-flight` as a JSON-RPC body
/// does: one larger than the whole budget is refused (`GATEWAY_OVERLOADED`, UNAVAILABLE as
/// HTTP's 503 and as docs/errors.md says) before the agent.
#[tokio::test]
async fn a_message_counts_against_the_bytes_in_flight() {
    let (backend, url) = harness::task_backend().await;
    let args = [
        "--backend",
        &url,
        "--fronts",
        "GRPC",
        "--global-max-body-bytes-in-flight",
        "100",
    ];
    let origin = harness::serve_on_workers(&args, None).await;
    let mut client = client(&origin).await;
    client.get_task(get_task("t-1")).await.unwrap();
    let status = client
        .get_task(get_task(&"t".repeat(200)))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(error_infos(&status)[0].reason, "GATEWAY_OVERLOADED");
    assert_eq!(backend.calls(), 1);
}

/// A client deadline that has passed, or passes while the agent is asked, always ends the
/// call as the gateway's deadline (DEADLINE_EXCEEDED, `BACKEND_DEADLINE_EXCEEDED`), however
/// short: not as whatever the agent, told the same deadline, made of it first.
#[tokio::test]
async fn a_passed_client_deadline_is_always_deadline_exceeded() {
    // The demo agent (a tonic server) gives up at the deadline it is told, as agents do.
    let gateway = crate::harness::process::start(&["--demo", "--fronts", "JSONRPC,GRPC"]).await;
    let message = get_task("t-1").encode_to_vec();
    let framed = frame(0, message.len(), &message);
    for timeout in ["0S", "1n", "1u"] {
        let headers = [("grpc-timeout", timeout)];
        let response = post_grpc(gateway.origin(), "GetTask", framed.clone(), &headers).await;
        let status = tonic::Status::from_header_map(response.headers())
            .unwrap_or_else(|| panic!("{timeout}: trailers-only"));
        assert_eq!(
            status.code(),
            Code::DeadlineExceeded,
            "{timeout}: {status:?}"
        );
        let reason = &error_infos(&status)[0].reason;
        assert_eq!(reason, "BACKEND_DEADLINE_EXCEEDED", "{timeout}: {status:?}");
    }
}

/// A `grpc-timeout` that is not one is refused (INVALID_ARGUMENT) before the agent.
#[tokio::test]
async fn a_malformed_grpc_timeout_is_refused() {
    let (backend, mut client) = setup(|_| panic!("the agent is not called"), &[]).await;
    let mut request = tonic::Request::new(get_task("t-1"));
    request
        .metadata_mut()
        .insert("grpc-timeout", "100000000S".parse().unwrap());
    let status = client.get_task(request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(error_infos(&status)[0].reason, "INVALID_REQUEST");
    assert_eq!(backend.calls(), 0);
}

/// `grpc.reflection.v1` lists the A2A service and gives its schema (what grpcurl reads).
#[tokio::test]
async fn reflection_describes_the_a2a_service() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let route = harness::route_settings(&["--fronts", "GRPC"]);
    let state = a2a_gateway::route::gateway(&route, Default::default()).unwrap();
    let frontend = a2a_gateway::route::frontend(&route, state);
    let base = harness::serve_frontend(frontend).await;
    let channel = Channel::from_shared(base).unwrap().connect().await.unwrap();
    let mut reflection = ServerReflectionClient::new(channel);
    let ask = |request: MessageRequest| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let requests = futures::stream::iter([
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(
            "lf.a2a.v1.A2AService".into(),
        )),
    ]);
    let answers: Vec<_> = reflection
        .server_reflection_info(requests)
        .await
        .unwrap()
        .into_inner()
        .map(|answer| answer.unwrap().message_response.unwrap())
        .collect()
        .await;
    let MessageResponse::ListServicesResponse(list) = &answers[0] else {
        panic!("{:?}", answers[0]);
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"lf.a2a.v1.A2AService"), "{names:?}");
    let MessageResponse::FileDescriptorResponse(files) = &answers[1] else {
        panic!("{:?}", answers[1]);
    };
    let file =
        prost_types::FileDescriptorProto::decode(&files.file_descriptor_proto[0][..]).unwrap();
    assert_eq!(file.package(), "lf.a2a.v1");
    assert!(file.service.iter().any(|s| s.name() == "A2AService"));

    // A request (a symbol's name) of 16 KiB is taken, whatever the routes' max-body.
    let sized = |len: usize| {
        let mut request = ask(MessageRequest::FileContainingSymbol(String::new()));
        // The name's length takes two bytes of varint where the empty one took one.
        let name = "s".repeat(len - request.encoded_len() - 1);
        request.message_request = Some(MessageRequest::FileContainingSymbol(name));
        assert_eq!(request.encoded_len(), len);
        request
    };
    // At the bound the symbol is looked up (and not found).
    let answer = reflection
        .server_reflection_info(futures::stream::iter([sized(16 * 1024)]))
        .await
        .unwrap()
        .into_inner()
        .next()
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(answer.code(), Code::NotFound, "{answer:?}");
    // One byte more is not read: no answer (tonic's reflection ends the stream).
    let past = reflection
        .server_reflection_info(futures::stream::iter([sized(16 * 1024 + 1)]))
        .await
        .unwrap()
        .into_inner()
        .next()
        .await;
    assert!(past.is_none(), "{past:?}");
}

/// A fault of the gateway's path takes the gRPC code clients act on: an agent that cannot
/// be reached is UNAVAILABLE, with the gateway's `ErrorInfo` naming it.
#[tokio::test]
async fn an_unreachable_agent_is_unavailable() {
    let closed = harness::ClosedPort::new();
    let url = format!("http://127.0.0.1:{}", closed.port());
    let base = gateway(&["--backend", &url]).await;
    let status = client(&base)
        .await
        .get_task(get_task("t-1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let info = &error_infos(&status)[0];
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("BACKEND_UNAVAILABLE", "a2a-gateway")
    );
}

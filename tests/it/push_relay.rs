//! The push relay (`push = "relay"`) over real sockets, up to delivery's `Outbox` (a
//! recording one here): the agent (an in-process gRPC agent keeping push configs as the
//! reference SDK does) sees only the gateway's callback and a sealed token; the client
//! sees its own URL, token and authentication in every reply; a post to the callback with
//! the token reaches the outbox with the client's webhook, from any replica with the key;
//! forged and malformed posts are refused, each with its status and count.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use a2a_gateway::push::outbox::{Delivery, Outbox, Refused};
use a2a_gateway::route::Routes;
use a2a_gateway::settings::Settings;
use a2a_gateway::telemetry::Metrics;
use base64::Engine;
use serde_json::{json, Value};
use tonic::Status;

use crate::harness::peer::Peer;
use crate::harness::process::TempFile;
use crate::harness::*;

/// Where agents are told to post (what the gateway serves is its path).
const CALLBACK: &str = "https://gateway.example/a2a/push";
const CALLBACK_PATH: &str = "/a2a/push";
const HOOK: &str = "https://hooks.example/a2a/events";

/// Delivery as the relay sees it: what it was handed, or `Full` when asked to refuse.
#[derive(Default)]
struct Recorded {
    deliveries: Mutex<Vec<Delivery>>,
    full: AtomicBool,
    /// Woken at each delivery.
    arrived: tokio::sync::Notify,
}

impl Outbox for Recorded {
    fn enqueue(&self, delivery: Delivery) -> Result<(), Refused> {
        if self.full.load(Ordering::SeqCst) {
            return Err(Refused::Full);
        }
        self.deliveries.lock().unwrap().push(delivery);
        self.arrived.notify_one();
        Ok(())
    }
}

impl Recorded {
    fn taken(&self) -> Vec<Delivery> {
        std::mem::take(&mut *self.deliveries.lock().unwrap())
    }

    /// The deliveries so far, once one of them satisfies `done` (at most 30 s).
    async fn until(&self, done: impl Fn(&Delivery) -> bool) -> Vec<Delivery> {
        let wait = async {
            loop {
                let arrived = self.arrived.notified();
                let all = self.deliveries.lock().unwrap().clone();
                if all.iter().any(&done) {
                    return all;
                }
                arrived.await;
            }
        };
        let all = tokio::time::timeout(std::time::Duration::from_secs(30), wait).await;
        all.unwrap_or_else(|_| panic!("no such delivery: {:?}", self.deliveries.lock().unwrap()))
    }
}

/// The push configs an agent keeps, shared by the test and the agent.
type Store = Arc<Mutex<Vec<TaskPushNotificationConfig>>>;

/// Keeps `config` as the reference SDK does: a config without an id gets its task's id,
/// and replaces the one of the same task and id.
fn keep(store: &Store, mut config: TaskPushNotificationConfig) -> TaskPushNotificationConfig {
    if config.id.is_empty() {
        config.id.clone_from(&config.task_id);
    }
    let mut store = store.lock().unwrap();
    store.retain(|c| (&c.task_id, &c.id) != (&config.task_id, &config.id));
    store.push(config.clone());
    config
}

/// An agent keeping push configs in `store`, which answers a message with task `task-new`.
fn agent(store: Store) -> TestBackend {
    TestBackend::new(move |request| {
        let kept = || store.lock().unwrap().clone();
        match request {
            Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(c)) => Answer::Reply(
                Reply::CreateTaskPushNotificationConfig(keep(&store, c.clone())),
            ),
            Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(get)) => {
                let found = kept()
                    .into_iter()
                    .find(|c| c.task_id == get.task_id && c.id == get.id);
                match found {
                    Some(c) => Answer::Reply(Reply::GetTaskPushNotificationConfig(c)),
                    None => Answer::Error(Status::not_found("no such config")),
                }
            }
            Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list)) => {
                let configs = kept().into_iter().filter(|c| c.task_id == list.task_id);
                Answer::Reply(Reply::ListTaskPushNotificationConfigs(
                    ListTaskPushNotificationConfigsResponse {
                        configs: configs.collect(),
                        next_page_token: String::new(),
                    },
                ))
            }
            Request::Unary(UnaryRequest::DeleteTaskPushNotificationConfig(delete)) => {
                let mut store = store.lock().unwrap();
                store.retain(|c| (&c.task_id, &c.id) != (&delete.task_id, &delete.id));
                Answer::Reply(Reply::DeleteTaskPushNotificationConfig(Default::default()))
            }
            Request::Unary(UnaryRequest::SendMessage(send)) => {
                let pushed = send.configuration.as_ref();
                if let Some(config) = pushed.and_then(|c| c.task_push_notification_config.clone()) {
                    let task_id = "task-new".into();
                    keep(&store, TaskPushNotificationConfig { task_id, ..config });
                }
                let task = task("task-new", TaskState::Submitted);
                Answer::Reply(Reply::SendMessage(SendMessageResponse {
                    payload: Some(send_message_response::Payload::Task(task)),
                }))
            }
            other => Answer::Error(Status::unimplemented(format!("{other:?}"))),
        }
    })
}

/// A push key file (one random key).
fn key_file() -> TempFile {
    let key: [u8; 32] = std::array::from_fn(|_| rand_byte());
    TempFile::new(
        "key",
        &base64::engine::general_purpose::STANDARD.encode(key),
    )
}

fn rand_byte() -> u8 {
    uuid::Uuid::new_v4().as_bytes()[0]
}

/// One relaying gateway process (as the binary builds it, routes and frontend) in front
/// of an agent.
struct Gateway {
    /// The JSON-RPC endpoint.
    url: String,
    /// The callback as the agent reaches it.
    callback: String,
    origin: String,
    outbox: Arc<Recorded>,
}

impl Gateway {
    /// A gateway with `flags` (after the relay's own) whose route `default` delivers to a
    /// new recording outbox.
    async fn start(agent: &str, key: &TempFile, flags: &[&str]) -> Gateway {
        let mut args = vec![
            "a2a-gateway",
            "--backend",
            agent,
            "--push",
            "relay",
            "--push-allow",
            "hooks.example",
            "--push-callback-url",
            CALLBACK,
            "--push-key-file",
            key.path(),
        ];
        args.extend(flags);
        let settings = Settings::load(args).unwrap();
        let outbox = Arc::new(Recorded::default());
        let routes = Routes::new(&settings, None)
            .unwrap()
            .with_outbox("default", outbox.clone());
        let metrics: Arc<Metrics> = Arc::default();
        let origin = serve_frontend(routes.frontend(&metrics).unwrap()).await;
        Gateway {
            url: format!("{origin}/a2a/jsonrpc"),
            callback: format!("{origin}{CALLBACK_PATH}"),
            origin,
            outbox,
        }
    }
}

fn client_config(task: &str) -> Value {
    json!({"taskId": task, "id": "cfg-1", "url": HOOK, "token": "client-token",
           "authentication": {"scheme": "Bearer", "credentials": "client-secret"}})
}

/// The push config the agent last received.
fn agent_saw(agent: &TestBackend) -> TaskPushNotificationConfig {
    match agent.last().request {
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(c)) => c,
        Request::Unary(UnaryRequest::SendMessage(send))
        | Request::Stream(StreamRequest::SendStreamingMessage(send)) => send
            .configuration
            .and_then(|c| c.task_push_notification_config)
            .expect("a push config"),
        other => panic!("unexpected call {other:?}"),
    }
}

async fn call(url: &str, method: &str, params: Value) -> Value {
    rpc(url, &request(json!(1), method, params)).await
}

/// Posts `body` to the callback with `token`; the status and body.
async fn post_event(
    callback: &str,
    token: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> (u16, String) {
    let mut request = client()
        .post(callback)
        .header("content-type", "application/json")
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .body(body);
    if let Some(token) = token {
        request = request.header("x-a2a-notification-token", token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn event(task: &str) -> Vec<u8> {
    serde_json::to_vec(&status_update(task, TaskState::Working)).unwrap()
}

/// An agent keeping push configs, and its URL.
async fn started_agent() -> (TestBackend, Store, String) {
    let store = Store::default();
    let agent = agent(store.clone());
    let addr = agent.spawn().await;
    (agent, store, format!("http://{addr}"))
}

#[tokio::test]
async fn the_agent_sees_only_the_callback_and_the_client_only_its_own_config() {
    let (agent, store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;

    let created = call(
        &gateway.url,
        "CreateTaskPushNotificationConfig",
        client_config("t-1"),
    )
    .await;
    let seen = agent_saw(&agent);
    assert_eq!(seen.url, CALLBACK);
    assert_eq!(seen.authentication, None);
    assert!(
        !seen.token.is_empty() && seen.token.len() <= 4096,
        "{}",
        seen.token
    );
    for secret in ["hooks.example", "client-token", "client-secret"] {
        assert!(
            !format!("{seen:?}").contains(secret),
            "{secret} reached the agent"
        );
    }
    let shown = json!({"taskId": "t-1", "id": "cfg-1", "url": HOOK, "token": "client-token",
                       "authentication": {"scheme": "Bearer", "credentials": "client-secret"}});
    assert_eq!(created["result"], shown, "{created}");

    let named = json!({"taskId": "t-1", "id": "cfg-1"});
    let got = call(&gateway.url, "GetTaskPushNotificationConfig", named.clone()).await;
    assert_eq!(got["result"], shown, "{got}");

    // What the gateway did not seal for this task and id is shown as the agent has it: the
    // agent's own config, and the client's token copied to another task or id.
    let own = TaskPushNotificationConfig {
        task_id: "t-1".into(),
        id: "agent-own".into(),
        url: "https://agent.example/own".into(),
        token: "agent-own-token".into(),
        ..Default::default()
    };
    let copied = |task_id: &str, id: &str| TaskPushNotificationConfig {
        task_id: task_id.into(),
        id: id.into(),
        url: CALLBACK.into(),
        token: seen.token.clone(),
        ..Default::default()
    };
    keep(&store, own);
    keep(&store, copied("t-1", "copied"));
    keep(&store, copied("t-2", "cfg-1"));
    let listed = call(
        &gateway.url,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": "t-1"}),
    )
    .await;
    let as_kept = |id: &str, url: &str, token: &str| json!({"taskId": "t-1", "id": id, "url": url, "token": token});
    assert_eq!(
        listed["result"]["configs"],
        json!([
            shown,
            as_kept("agent-own", "https://agent.example/own", "agent-own-token"),
            as_kept("copied", CALLBACK, &seen.token),
        ]),
        "{listed}"
    );
    let other = call(
        &gateway.url,
        "GetTaskPushNotificationConfig",
        json!({"taskId": "t-2", "id": "cfg-1"}),
    )
    .await;
    assert_eq!(other["result"]["url"], CALLBACK, "{other}");

    let deleted = call(&gateway.url, "DeleteTaskPushNotificationConfig", named).await;
    assert_eq!(deleted["result"], Value::Null, "{deleted}");
    assert!(store
        .lock()
        .unwrap()
        .iter()
        .all(|c| c.id != "cfg-1" || c.task_id != "t-1"));

    let metrics = metrics_text(&gateway.origin).await;
    let relayed = "a2a_gateway_push_registrations_total{route=\"default\",outcome=\"relayed\"} 1\n";
    assert!(metrics.contains(relayed), "{metrics}");
}

#[tokio::test]
async fn a_message_config_is_relayed_and_v03_clients_see_their_own_too() {
    let (agent, store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;

    let mut params = message_params("report");
    params["configuration"] =
        json!({"taskPushNotificationConfig": {"url": HOOK, "token": "client-token"}});
    let sent = call(&gateway.url, "SendMessage", params).await;
    assert_eq!(sent["result"]["task"]["id"], "task-new", "{sent}");
    let seen = agent_saw(&agent);
    assert_eq!((seen.url.as_str(), seen.authentication), (CALLBACK, None));
    assert!(!seen.token.contains("client-token"));
    // The agent keeps it under the task it made (and the task's id as the config's id).
    let got = call(
        &gateway.url,
        "GetTaskPushNotificationConfig",
        json!({"taskId": "task-new", "id": "task-new"}),
    )
    .await;
    assert_eq!(
        (&got["result"]["url"], &got["result"]["token"]),
        (&json!(HOOK), &json!("client-token")),
        "{got}"
    );

    // A stream's config too (the agent here answers streams with an error).
    let mut params = message_params("report");
    params["configuration"] = json!({"taskPushNotificationConfig": {"url": HOOK}});
    call(&gateway.url, "SendStreamingMessage", params).await;
    let seen = agent_saw(&agent);
    assert_eq!((seen.url.as_str(), seen.authentication), (CALLBACK, None));
    assert!(matches!(agent.last().request, Request::Stream(_)));

    let v03 = |method: &str, params: Value| {
        let body = request(json!(1), method, params);
        let url = gateway.url.clone();
        async move {
            let (status, _, text) = post_with(&url, body, &[]).await;
            assert_eq!(status, 200, "{text}");
            serde_json::from_str::<Value>(&text).unwrap()
        }
    };
    let config = json!({"taskId": "t-3", "pushNotificationConfig": {"id": "cfg-1", "url": HOOK,
        "token": "client-token", "authentication": {"schemes": ["Bearer"], "credentials": "client-secret"}}});
    let set = v03("tasks/pushNotificationConfig/set", config).await;
    let seen = agent_saw(&agent);
    assert_eq!((seen.url.as_str(), seen.authentication), (CALLBACK, None));
    let named = json!({"id": "t-3", "pushNotificationConfigId": "cfg-1"});
    let got = v03("tasks/pushNotificationConfig/get", named).await;
    for reply in [&set, &got] {
        let shown = &reply["result"]["pushNotificationConfig"];
        assert_eq!(shown["url"], HOOK, "{reply}");
        assert_eq!(shown["token"], "client-token", "{reply}");
        assert_eq!(
            shown["authentication"]["credentials"], "client-secret",
            "{reply}"
        );
    }
    assert_eq!(store.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_config_too_large_to_seal_is_refused_before_the_agent() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;
    // The largest webhook that seals, found by trying, and one byte more.
    let config = |len: usize| {
        let mut config = client_config("t-1");
        config["url"] = json!(format!("{HOOK}/{}", "a".repeat(len)));
        config
    };
    let mut len = 2900;
    loop {
        let reply = call(
            &gateway.url,
            "CreateTaskPushNotificationConfig",
            config(len + 1),
        )
        .await;
        if reply.get("error").is_some() {
            assert_eq!(reply["error"]["code"], -32602, "{reply}");
            let message = reply["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("url: the URL, token and credentials take"),
                "{message}"
            );
            assert!(message.contains("more than 4096"), "{message}");
            break;
        }
        len += 1;
        assert!(len < 3100, "a webhook of {len} bytes sealed");
    }
    // The guard checks first, as on any guarded route.
    let mut inside = client_config("t-1");
    inside["url"] = json!("https://127.0.0.1/hook");
    let reply = call(&gateway.url, "CreateTaskPushNotificationConfig", inside).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("loopback"), "{message}");
    let calls = agent.calls();
    let reply = call(
        &gateway.url,
        "CreateTaskPushNotificationConfig",
        config(len),
    )
    .await;
    assert!(reply["result"].is_object(), "{reply}");
    assert_eq!(agent.calls(), calls + 1);
    assert!(agent_saw(&agent).token.len() <= 4096);
    let reply = call(
        &gateway.url,
        "CreateTaskPushNotificationConfig",
        config(len + 1),
    )
    .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(
        agent.calls(),
        calls + 1,
        "the refused config never reached the agent"
    );
    let metrics = metrics_text(&gateway.origin).await;
    // Every config the agent got was relayed; the loopback one and the two too large refused.
    for (outcome, n) in [("relayed", agent.calls()), ("refused", 3)] {
        let line = format!(
            "a2a_gateway_push_registrations_total{{route=\"default\",outcome=\"{outcome}\"}} {n}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
}

/// The token the agent got for `task`'s config `cfg-1`, registered through `gateway`.
async fn registered(gateway: &Gateway, agent: &TestBackend, task: &str) -> String {
    let created = call(
        &gateway.url,
        "CreateTaskPushNotificationConfig",
        client_config(task),
    )
    .await;
    assert!(created["result"].is_object(), "{created}");
    agent_saw(agent).token
}

#[tokio::test]
async fn a_post_with_the_token_reaches_delivery_from_any_replica() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;
    let replica = Gateway::start(&agent_url, &key, &[]).await;
    let token = registered(&gateway, &agent, "t-1").await;

    let body = event("t-1");
    assert_eq!(
        post_event(&gateway.callback, Some(&token), body.clone()).await,
        (204, String::new())
    );
    let delivered = gateway.outbox.taken();
    assert_eq!(delivered.len(), 1);
    let delivery = &delivered[0];
    assert_eq!(&*delivery.route, "default");
    assert_eq!(delivery.task_id, "t-1");
    assert_eq!(delivery.url, HOOK);
    assert_eq!(delivery.token.as_deref(), Some("client-token"));
    assert_eq!(
        delivery.authentication,
        Some(("Bearer".to_owned(), "client-secret".to_owned()))
    );
    assert_eq!(delivery.body, body, "the agent's bytes, as posted");
    assert_eq!(
        delivery.traceparent.as_deref(),
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    );

    // Another replica with the key takes the same post; the same event has the same key,
    // another event another.
    assert_eq!(
        post_event(&replica.callback, Some(&token), body.clone())
            .await
            .0,
        204
    );
    let completed = serde_json::to_vec(&status_update("t-1", TaskState::Completed)).unwrap();
    assert_eq!(
        post_event(&replica.callback, Some(&token), completed)
            .await
            .0,
        204
    );
    let again = replica.outbox.taken();
    assert_eq!(again.len(), 2);
    assert_eq!(again[0].event_key, delivery.event_key);
    assert_ne!(again[1].event_key, delivery.event_key);
    assert_eq!(again[1].url, HOOK);

    let metrics = metrics_text(&replica.origin).await;
    let accepted = "a2a_gateway_push_callbacks_total{route=\"default\",outcome=\"accepted\"} 2\n";
    assert!(metrics.contains(accepted), "{metrics}");
    // Rotation: a new key put first seals, the previous one second still opens; without
    // it the old token is refused.
    let new_key = key_file();
    let old_line = std::fs::read_to_string(key.path()).unwrap();
    let new_line = std::fs::read_to_string(new_key.path()).unwrap();
    let rotated = TempFile::new("key", &format!("{new_line}\n{old_line}\n"));
    let rotated = Gateway::start(&agent_url, &rotated, &[]).await;
    assert_eq!(
        post_event(&rotated.callback, Some(&token), event("t-1"))
            .await
            .0,
        204
    );
    let fresh = registered(&rotated, &agent, "t-1").await;
    assert_eq!(
        post_event(&gateway.callback, Some(&fresh), event("t-1"))
            .await
            .0,
        401
    );
    let new_only = Gateway::start(&agent_url, &new_key, &[]).await;
    assert_eq!(
        post_event(&new_only.callback, Some(&fresh), event("t-1"))
            .await
            .0,
        204
    );
    assert_eq!(
        post_event(&new_only.callback, Some(&token), event("t-1"))
            .await
            .0,
        401
    );
}

#[tokio::test]
async fn forged_and_malformed_posts_are_refused_and_counted() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &["--push-max-body", "1000"]).await;
    let token = registered(&gateway, &agent, "t-1").await;
    let other_task = registered(&gateway, &agent, "t-2").await;
    let callback = gateway.callback.as_str();

    // Tokens: absent, made up, cut short, another task's, another key's.
    let other_key = key_file();
    let stranger = Gateway::start(&agent_url, &other_key, &[]).await;
    let foreign = registered(&stranger, &agent, "t-1").await;
    let mut changed = token.clone().into_bytes();
    changed[40] = if changed[40] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).unwrap();
    for (token, why) in [
        (None, "absent"),
        (Some("not-a-token"), "made up"),
        (Some(&token[..token.len() - 1]), "cut short"),
        (Some(changed.as_str()), "one character changed"),
        (Some(foreign.as_str()), "sealed with another key"),
    ] {
        let (status, body) = post_event(callback, token, event("t-1")).await;
        assert_eq!(status, 401, "{why}: {body}");
        assert!(
            body.contains("no valid notification token"),
            "{why}: {body}"
        );
    }
    let (status, body) = post_event(callback, Some(&other_task), event("t-1")).await;
    assert_eq!(
        (status, body.as_str()),
        (400, "{\"error\":\"the event is not of the token's task\"}")
    );

    // Bodies: at the bound and one byte past it (declared and chunked), not JSON, not a
    // StreamResponse, no task.
    let padded = |len: usize| {
        let mut body = event("t-1");
        body.resize(len, b' ');
        body
    };
    assert_eq!(
        post_event(callback, Some(&token), padded(1000)).await.0,
        204
    );
    let (status, body) = post_event(callback, Some(&token), padded(1001)).await;
    assert_eq!(
        (status, body.as_str()),
        (
            413,
            "{\"error\":\"notification larger than push-max-body\"}"
        )
    );
    let chunks = futures::stream::iter([padded(600), vec![b' '; 401]].map(Ok::<_, std::io::Error>));
    let (status, _) = post_event(callback, Some(&token), reqwest::Body::wrap_stream(chunks)).await;
    assert_eq!(status, 413, "chunked");
    for (body, why) in [
        (&b"{not json"[..], "the body is not an A2A StreamResponse"),
        (
            b"{\"statusUpdate\": 7}",
            "the body is not an A2A StreamResponse",
        ),
        (b"{}", "the StreamResponse holds no event"),
        (
            b"{\"statusUpdate\": {\"status\": {}}}",
            "the event names no task",
        ),
    ] {
        let (status, text) = post_event(callback, Some(&token), body.to_vec()).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains(why), "{text}");
    }
    let get = client().get(callback).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert_eq!(get.headers()["allow"], "POST");

    // Delivery's queues full.
    gateway.outbox.full.store(true, Ordering::SeqCst);
    let (status, body) = post_event(callback, Some(&token), event("t-1")).await;
    assert_eq!(
        (status, body.as_str()),
        (503, "{\"error\":\"delivery queue full\"}")
    );

    assert_eq!(
        gateway.outbox.taken().len(),
        1,
        "only the post at the bound was delivered"
    );
    let metrics = metrics_text(&gateway.origin).await;
    for (route, outcome, n) in [
        ("", "unauthorized", 5),
        ("default", "accepted", 1),
        ("default", "wrong_task", 1),
        ("default", "too_large", 2),
        ("default", "bad_request", 4),
        ("default", "queue_full", 1),
        ("", "bad_request", 1),
    ] {
        let line = format!(
            "a2a_gateway_push_callbacks_total{{route=\"{route}\",outcome=\"{outcome}\"}} {n}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
}

#[test]
fn a_relay_without_its_callback_or_a_good_key_is_refused_at_load() {
    let key = key_file();
    let short = TempFile::new(
        "key",
        &base64::engine::general_purpose::STANDARD.encode([7; 31]),
    );
    let owner_keys = TempFile::new("keys", "0123456789abcdef0123456789abcdef\n");
    let load = |flags: &[&str]| {
        let args = [
            "a2a-gateway",
            "--backend",
            "http://agent.invalid:1",
            "--push",
            "relay",
        ];
        match Settings::load(args.iter().chain(flags)) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    };
    let with_key = ["--push-key-file", key.path()];
    let with_callback = ["--push-callback-url", CALLBACK];
    let both: Vec<&str> = with_key.iter().chain(&with_callback).copied().collect();
    assert_eq!(load(&both), "", "a callback and a key are all it needs");
    for (flags, error) in [
        (
            &with_key[..],
            "push = \"relay\": --push-callback-url is required",
        ),
        (
            &with_callback[..],
            "push = \"relay\": --push-key-file is required",
        ),
        (
            &[&with_callback[..], &["--push-key-file", short.path()]].concat()[..],
            "a key of 31 bytes; it must have 32",
        ),
        (
            &[
                &with_callback[..],
                &["--push-key-file", "/nonexistent/push-key"],
            ]
            .concat()[..],
            "--push-key-file \"/nonexistent/push-key\": No such file",
        ),
        (
            &[
                &with_key[..],
                &["--push-callback-url", "https://gw.example/a2a/jsonrpc"],
            ]
            .concat()[..],
            "path \"/a2a/jsonrpc\" is route \"default\"'s",
        ),
        (
            &[
                &with_key[..],
                &["--push-callback-url", "https://gw.example/metrics"],
            ]
            .concat()[..],
            "path \"/metrics\" is the gateway's own",
        ),
        (
            &[&with_key[..], &["--push-callback-url", "gw.example/push"]].concat()[..],
            "--push-callback-url \"gw.example/push\": relative URL without a base",
        ),
        (
            &[
                &both[..],
                &["--task-owner", "--owner-key-file", owner_keys.path()],
            ]
            .concat()[..],
            "not with task-owner or task affinity yet",
        ),
    ] {
        let message = load(flags);
        assert!(message.contains(error), "{flags:?}: {message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }
}

/// A JSON-RPC call as the API-key caller `key`.
async fn call_as(url: &str, key: &str, method: &str, params: Value) -> Value {
    let headers = [("a2a-version", "1.0"), ("x-api-key", key)];
    let (status, _, text) = post_with(url, request(json!(1), method, params), &headers).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn a_token_opens_only_for_its_route_and_caller() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let callers = TempFile::new(
        "keys",
        &format!(
            "alice {}\nbob {}\n",
            key_digest_hex(b"alice-key"),
            key_digest_hex(b"bob-key")
        ),
    );
    let route = |name: &str| {
        format!(
            "[[route]]\nname = \"{name}\"\npath = \"/{name}\"\nbackend = \"{agent_url}\"\n\
             push = \"relay\"\npush-allow = [\"hooks.example\"]\n"
        )
    };
    let config = TempFile::new(
        "toml",
        &format!(
            "push-callback-url = \"{CALLBACK}\"\npush-key-file = \"{}\"\n\
             [auth.api-keys]\nfile = \"{}\"\n{}{}",
            key.path(),
            callers.path(),
            route("orders"),
            route("billing"),
        ),
    );
    let settings = Settings::load(["a2a-gateway", "--config", config.path()]).unwrap();
    let outbox = Arc::new(Recorded::default());
    // Billing's notifications have no delivery here, as on a gateway where it does not relay.
    let routes = Routes::new(&settings, None)
        .unwrap()
        .with_outbox("orders", outbox.clone());
    let origin = serve_frontend(routes.frontend(&Arc::default()).unwrap()).await;
    let (orders, billing) = (
        format!("{origin}/orders/a2a/jsonrpc"),
        format!("{origin}/billing/a2a/jsonrpc"),
    );
    let create = "CreateTaskPushNotificationConfig";
    call_as(&orders, "alice-key", create, client_config("t-1")).await;
    let orders_token = agent_saw(&agent).token;
    call_as(&billing, "alice-key", create, client_config("t-9")).await;
    let billing_token = agent_saw(&agent).token;

    let get = "GetTaskPushNotificationConfig";
    let named = json!({"taskId": "t-1", "id": "cfg-1"});
    let shown = call_as(&orders, "alice-key", get, named.clone()).await;
    assert_eq!(shown["result"]["url"], HOOK, "{shown}");
    // Another caller, or the same caller on another route, sees the agent's config.
    for (url, caller) in [(&orders, "bob-key"), (&billing, "alice-key")] {
        let sealed = call_as(url, caller, get, named.clone()).await;
        assert_eq!(
            sealed["result"]["url"], CALLBACK,
            "{url} {caller}: {sealed}"
        );
        assert_eq!(sealed["result"]["token"], orders_token.as_str());
        assert!(!sealed.to_string().contains("client-"), "{sealed}");
    }

    let callback = format!("{origin}{CALLBACK_PATH}");
    assert_eq!(
        post_event(&callback, Some(&orders_token), event("t-1"))
            .await
            .0,
        204
    );
    let (status, _) = post_event(&callback, Some(&billing_token), event("t-9")).await;
    assert_eq!(
        status, 401,
        "a route without delivery takes no notification"
    );
    let delivered = outbox.taken();
    assert_eq!(delivered.len(), 1);
    assert_eq!(&*delivered[0].route, "orders");
}

/// The JSON of a delivery's body.
fn body(delivery: &Delivery) -> Value {
    serde_json::from_slice(&delivery.body).unwrap()
}

/// The first check, up to delivery: the reference SDK agent behind the relay posts
/// a task's events to the callback with the sealed token, and each reaches the outbox bound
/// for the client's webhook with the client's token, in order; the agent never holds the
/// client's URL or token; another replica with the key takes the agent's posts as well.
#[tokio::test]
async fn the_reference_sdk_agent_posts_through_the_relay() {
    let peer = Peer::start();
    let key = key_file();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let callback = format!("{origin}{CALLBACK_PATH}");
    let hook = "http://127.0.0.1:9/client-hook";
    let args = [
        "a2a-gateway",
        "--backend",
        &peer.grpc,
        "--push",
        "relay",
        "--push-allow-http",
        "--push-allow",
        "127.0.0.1",
        "--push-callback-url",
        &callback,
        "--push-key-file",
        key.path(),
    ];
    let settings = Settings::load(args).unwrap();
    let outbox = Arc::new(Recorded::default());
    let routes = Routes::new(&settings, None)
        .unwrap()
        .with_outbox("default", outbox.clone());
    let frontend = routes.frontend(&Arc::default()).unwrap();
    let serving = std::future::pending();
    let second = std::time::Duration::from_secs(1);
    tokio::spawn(a2a_gateway::server::serve(
        listener, frontend, serving, second,
    ));
    let url = format!("{origin}/a2a/jsonrpc");

    // A message's config: the stream task's events (working, three artifact chunks,
    // completed), each posted by the agent as it happens.
    let mut params = message_in("stream", None, None);
    params["configuration"] =
        json!({"taskPushNotificationConfig": {"url": hook, "token": "client-token"}});
    let sent = call(&url, "SendMessage", params).await;
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let completed =
        |d: &Delivery| body(d)["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED";
    let delivered = outbox.until(completed).await;
    let kinds: Vec<String> = delivered
        .iter()
        .map(|d| body(d).as_object().unwrap().keys().next().unwrap().clone())
        .collect();
    assert!(kinds.len() >= 5, "{kinds:?}");
    assert_eq!(kinds.last().unwrap(), "statusUpdate", "{kinds:?}");
    let artifacts = kinds.iter().filter(|k| *k == "artifactUpdate").count();
    assert_eq!(artifacts, 3, "{kinds:?}");
    for delivery in &delivered {
        assert_eq!(delivery.task_id, task);
        assert_eq!(
            (delivery.url.as_str(), delivery.token.as_deref()),
            (hook, Some("client-token"))
        );
        assert_eq!(delivery.authentication, None);
    }

    // What the agent keeps, asked directly: the callback and the sealed token only.
    let kept = rpc(
        &peer.jsonrpc,
        &request(
            json!(1),
            "ListTaskPushNotificationConfigs",
            json!({"taskId": task}),
        ),
    )
    .await;
    let configs = kept["result"]["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 1, "{kept}");
    assert_eq!(configs[0]["url"], callback.as_str(), "{kept}");
    let token = configs[0]["token"].as_str().unwrap().to_owned();
    assert!(!kept.to_string().contains("client-"), "{kept}");
    let shown = call(
        &url,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(shown["result"]["configs"][0]["url"], hook, "{shown}");

    // A config created for a waiting task: the follow-up's completion is delivered.
    let waiting = call(&url, "SendMessage", message_in("input", None, None)).await;
    let waiting = waiting["result"]["task"]["id"].as_str().unwrap().to_owned();
    let config = json!({"taskId": waiting, "url": hook, "token": "second-token",
                        "authentication": {"scheme": "Bearer", "credentials": "hook-secret"}});
    let created = call(&url, "CreateTaskPushNotificationConfig", config).await;
    assert_eq!(created["result"]["token"], "second-token", "{created}");
    call(
        &url,
        "SendMessage",
        message_in("done", None, Some(&waiting)),
    )
    .await;
    let done = |d: &Delivery| d.task_id == waiting && completed(d);
    let delivered = outbox.until(done).await;
    let last = delivered.iter().rfind(|d| d.task_id == waiting).unwrap();
    assert_eq!(last.token.as_deref(), Some("second-token"));
    assert_eq!(
        last.authentication,
        Some(("Bearer".to_owned(), "hook-secret".to_owned()))
    );

    // Another replica with the key takes what this agent posts.
    let replica = Gateway::start(&peer.grpc, &key, &[]).await;
    let event = delivered[0].body.clone();
    assert_eq!(
        post_event(&replica.callback, Some(&token), event).await.0,
        204
    );
    assert_eq!(replica.outbox.taken()[0].url, hook);
}

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
    let response = post_response(callback, token, body).await;
    (response.status().as_u16(), response.text().await.unwrap())
}

/// An agent's post of `body` to `callback` with `token`, as `post_event`, answered.
async fn post_response(
    callback: &str,
    token: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
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
    request.send().await.unwrap()
}

fn event(task: &str) -> Vec<u8> {
    serde_json::to_vec(&status_update(task, TaskState::Working)).unwrap()
}

/// An agent keeping push configs, and its URL.
async fn started_agent() -> (TestBackend, PushStore, String) {
    let store = PushStore::default();
    let agent = push_config_agent(store.clone());
    let addr = agent.spawn().await;
    (agent, store, format!("http://{addr}"))
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

/// A JSON-RPC call as the API-key caller `key`.
async fn call_as(url: &str, key: &str, method: &str, params: Value) -> Value {
    let headers = [("a2a-version", "1.0"), ("x-api-key", key)];
    let (status, _, text) = post_with(url, request(json!(1), method, params), &headers).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The JSON of a delivery's body.
fn body(delivery: &Delivery) -> Value {
    serde_json::from_slice(&delivery.body).unwrap()
}

mod callback;
mod registration;
mod revocation;
mod sdk;

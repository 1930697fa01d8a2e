//! Caller-bound tasks (`task-owner`) on the wire: two API-key principals, alice and bob,
//! share a route in front of reference-SDK agents (`tests/peers/agent.py`, in-memory task
//! stores), with and without affinity over two of them. Neither can get, cancel,
//! subscribe to, push-configure, follow up on or list the other's tasks, and each refusal
//! is byte for byte (but the id) what the agent answers for a task it does not know: that
//! answer is had from a replica (same route, same keys) in front of another agent, where
//! the caller's own, validly sealed id names a task that agent never saw.
//!
//! In-process agents that count their calls show that a refused call reaches no agent, a
//! route without authentication seals ids for one owner, the id length bound holds for
//! sealed ids (at the limit and one past), and key rotation keeps live tasks.

use crate::harness;
use crate::harness::key_digest_hex;

use std::time::Duration;

use a2a_gateway::proto::{
    send_message_response, ListTasksResponse, SendMessageResponse, TaskState,
};
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use a2a_gateway::route::Routes;
use a2a_gateway::settings::Settings;
use harness::peer::Peer;
use harness::process::TempFile;
use harness::{client, request, Answer, TestBackend};
use serde_json::{json, Value};

const ALICE: &str = "alice-api-key-0123456789";
const BOB: &str = "bob-api-key-0123456789";
const OLD_KEY: &str = "the old owner key, 32 bytes long";
const NEW_KEY: &str = "the new owner key, 32 bytes long";
const AFFINITY_KEY: &str = "test affinity key, 32 bytes long";

/// The files one gateway's configuration names; they live as long as this.
struct Files {
    api_keys: TempFile,
    owner_keys: TempFile,
}

impl Files {
    fn new(owner_keys: &[&str]) -> Files {
        let lines = format!(
            "alice {}\nbob {}\n",
            key_digest_hex(ALICE.as_bytes()),
            key_digest_hex(BOB.as_bytes())
        );
        Files {
            api_keys: TempFile::new("keys", &lines),
            owner_keys: TempFile::new("owner", &(owner_keys.join("\n") + "\n")),
        }
    }

    /// A configuration of route `r` over `backends`: API keys (unless `anonymous_route`),
    /// task-owner, and affinity when asked.
    fn config(&self, backends: &[String], affinity: bool, authenticated: bool) -> String {
        let mut text = format!(
            "task-owner = true\nowner-key-file = {:?}\npush-allow-http = true\n\
             push-allow = [\"127.0.0.1\"]\n",
            self.owner_keys.path()
        );
        if affinity {
            text += &format!("affinity = \"task\"\naffinity-key = {AFFINITY_KEY:?}\n");
        }
        if authenticated {
            text += &format!("[auth.api-keys]\nfile = {:?}\n", self.api_keys.path());
        }
        text + &format!("[[route]]\nname = \"r\"\npath = \"/r\"\nbackend = {backends:?}\n")
    }
}

/// The gateway of `config`, as the binary builds it; its JSON-RPC endpoint.
async fn gateway(config: &str) -> String {
    let file = TempFile::new("toml", config);
    let settings = Settings::load(["a2a-gateway", "--config", file.path()]).unwrap();
    let frontend = Routes::new(&settings, None)
        .unwrap()
        .frontend(&Default::default())
        .unwrap();
    format!("{}/r/a2a/jsonrpc", harness::serve_frontend(frontend).await)
}

/// One call as the holder of `key` (none: no credentials): HTTP status and body.
async fn post_as(url: &str, key: Option<&str>, method: &str, params: &Value) -> (u16, String) {
    let mut post = client()
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(request(json!(1), method, params.clone()));
    if let Some(key) = key {
        post = post.header("x-api-key", key);
    }
    let response = post.send().await.unwrap();
    let status = response.status().as_u16();
    let body = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the answer ended")
        .unwrap();
    (status, body)
}

/// A unary call's result.
async fn ok(url: &str, key: &str, method: &str, params: Value) -> Value {
    let (status, body) = post_as(url, Some(key), method, &params).await;
    let reply: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    match (status, reply.get("result")) {
        (200, Some(result)) => result.clone(),
        _ => panic!("{method} {params}: {status} {body}"),
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// A caller's conversation: a finished task and one waiting for input in one context.
#[derive(Clone)]
struct Conversation {
    context: String,
    done: String,
    waiting: String,
}

async fn converse(url: &str, key: &str) -> Conversation {
    let done = ok(
        url,
        key,
        "SendMessage",
        harness::message_in("task", None, None),
    )
    .await;
    let context = text(&done["task"]["contextId"]);
    let waiting = ok(
        url,
        key,
        "SendMessage",
        harness::message_in("input", Some(&context), None),
    )
    .await;
    assert_eq!(text(&waiting["task"]["contextId"]), context, "{waiting}");
    Conversation {
        done: text(&done["task"]["id"]),
        waiting: text(&waiting["task"]["id"]),
        context,
    }
}

/// The ids of a `ListTasks` result.
async fn listed(url: &str, key: &str, params: Value) -> Vec<String> {
    let list = ok(url, key, "ListTasks", params).await;
    let tasks = list["tasks"].as_array().cloned().unwrap_or_default();
    assert_eq!(list["totalSize"], json!(tasks.len()), "{list}");
    let mut ids: Vec<String> = tasks.iter().map(|t| text(&t["id"])).collect();
    ids.sort();
    ids
}

/// Every task-scoped call bob could make about alice's `conversation`.
fn foreign_calls(theirs: &Conversation) -> Vec<(&'static str, Value)> {
    let (task, waiting, context) = (&theirs.done, &theirs.waiting, &theirs.context);
    let hook = json!({"taskId": task, "id": "cfg-1", "url": "http://127.0.0.1:9/hook"});
    let mut referencing = harness::message_in("hi", None, None);
    referencing["message"]["referenceTaskIds"] = json!([task]);
    vec![
        ("GetTask", json!({"id": task})),
        ("CancelTask", json!({"id": waiting})),
        ("SubscribeToTask", json!({"id": waiting})),
        ("CreateTaskPushNotificationConfig", hook),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": task, "id": "cfg-1"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task, "id": "cfg-1"}),
        ),
        (
            "SendMessage",
            harness::message_in("more", None, Some(waiting)),
        ),
        (
            "SendStreamingMessage",
            harness::message_in("more", None, Some(waiting)),
        ),
        (
            "SendMessage",
            harness::message_in("more", Some(context), None),
        ),
        ("SendMessage", referencing),
        ("ListTasks", json!({"contextId": context})),
    ]
}

/// `body` with `id`, and each id inside it (the affinity id, the agent's), written `<id>`.
fn modulo_id(body: &str, id: &str) -> String {
    let inner = id.match_indices('.').map(|(at, _)| &id[at + 1..]);
    std::iter::once(id)
        .chain(inner)
        .fold(body.to_owned(), |body, id| body.replace(id, "<id>"))
}

/// Bob's every call about alice's tasks is refused as the agent refuses a task it does
/// not know: the same status and bytes but the id (`replica`, in front of another agent,
/// takes bob's own ids for tasks that agent never saw). A made-up id gets the same.
async fn refused_as_unknown(url: &str, replica: &str, alice: &Conversation, bob: &Conversation) {
    let mine = bob.clone();
    let made_up = Conversation {
        context: "made-up-context".into(),
        done: "made-up-task".into(),
        waiting: "made-up-task".into(),
    };
    let theirs = foreign_calls(alice);
    let unknown = foreign_calls(&mine);
    let invented = foreign_calls(&made_up);
    let mut compared = 0;
    for ((method, params), ((_, own), (_, fake))) in
        theirs.iter().zip(unknown.iter().zip(&invented))
    {
        let (status, body) = post_as(url, Some(BOB), method, params).await;
        assert_eq!(status, 200, "{method}: {body}");
        let error: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(error["error"]["code"], -32001, "{method} {params}: {body}");
        let named = foreign_id(params);
        let (fake_status, fake_body) = post_as(url, Some(BOB), method, fake).await;
        assert_eq!(
            (fake_status, modulo_id(&fake_body, &foreign_id(fake))),
            (status, modulo_id(&body, &named)),
            "{method}: a made-up id"
        );
        // Where the agent has an answer of its own for an unknown task, it is the same.
        let (own_status, own_body) = post_as(replica, Some(BOB), method, own).await;
        let agent_says = serde_json::from_str::<Value>(&own_body).ok();
        if agent_says.is_some_and(|v| v["error"]["code"] == -32001) {
            assert_eq!(
                (own_status, modulo_id(&own_body, &foreign_id(own))),
                (status, modulo_id(&body, &named)),
                "{method}: the agent's own unknown task"
            );
            compared += 1;
        }
    }
    // Get, Cancel, Subscribe, four push-config calls, two follow-ups: the agent has an
    // unknown task of its own for each.
    assert!(
        compared >= 9,
        "compared with the agent's own only {compared} times"
    );
}

/// The id a call names first: its task, else its context.
fn foreign_id(params: &Value) -> String {
    let message = &params["message"];
    [
        &params["id"],
        &params["taskId"],
        &message["taskId"],
        &message["contextId"],
        &message["referenceTaskIds"][0],
        &params["contextId"],
    ]
    .into_iter()
    .map(text)
    .find(|id| !id.is_empty())
    .unwrap_or_default()
}

/// The tasks each caller made so far.
#[derive(Default)]
struct Made {
    alice: Vec<String>,
    bob: Vec<String>,
}

/// Alice and bob on `url` (`replica`: the same route and keys, another agent).
async fn isolated(url: &str, replica: &str, made: &mut Made) {
    let alice = converse(url, ALICE).await;
    let bob = converse(url, BOB).await;
    // Each lists its own tasks only, whole and by context.
    made.alice
        .extend([alice.done.clone(), alice.waiting.clone()]);
    made.bob.extend([bob.done.clone(), bob.waiting.clone()]);
    made.alice.sort();
    made.bob.sort();
    assert_eq!(listed(url, ALICE, json!({})).await, made.alice);
    let mut context = vec![alice.done.clone(), alice.waiting.clone()];
    context.sort();
    let by_context = json!({"contextId": alice.context});
    assert_eq!(listed(url, ALICE, by_context).await, context);
    assert_eq!(listed(url, BOB, json!({"pageSize": 100})).await, made.bob);
    refused_as_unknown(url, replica, &alice, &bob).await;
    // Alice's tasks are as they were: bob's follow-up and cancel never reached them.
    let task = ok(url, ALICE, "GetTask", json!({"id": alice.waiting})).await;
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let answered = ok(
        url,
        ALICE,
        "SendMessage",
        harness::message_in("more", Some(&alice.context), Some(&alice.waiting)),
    )
    .await;
    assert_eq!(answered["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

fn peers(n: usize) -> Vec<Peer> {
    std::thread::scope(|s| {
        let started: Vec<_> = (0..n).map(|_| s.spawn(Peer::start)).collect();
        started.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[tokio::test]
async fn two_callers_cannot_reach_each_others_tasks() {
    let agents = peers(2);
    let files = Files::new(&[OLD_KEY]);
    let url = gateway(&files.config(&[agents[0].grpc.clone()], false, true)).await;
    let replica = gateway(&files.config(&[agents[1].grpc.clone()], false, true)).await;
    isolated(&url, &replica, &mut Made::default()).await;
}

#[tokio::test]
async fn two_callers_cannot_reach_each_others_tasks_across_pods() {
    let agents = peers(3);
    let files = Files::new(&[OLD_KEY]);
    let pods = vec![agents[0].grpc.clone(), agents[1].grpc.clone()];
    let url = gateway(&files.config(&pods, true, true)).await;
    let replica = gateway(&files.config(&[agents[2].grpc.clone()], false, true)).await;
    // Several conversations, so that both pods hold tasks of both callers.
    let mut made = Made::default();
    for _ in 0..3 {
        isolated(&url, &replica, &mut made).await;
    }
}

/// An agent that answers every call with one task of id `task` in a minted-looking context
/// (its reply is all a test needs), counting the calls it sees.
async fn counting_agent(task: &'static str) -> (TestBackend, String) {
    let backend = TestBackend::new(move |request| {
        let mut made = harness::task(task, TaskState::Completed);
        match request {
            Request::Unary(UnaryRequest::SendMessage(send)) => {
                made.context_id = send.message.as_ref().unwrap().context_id.clone();
                Answer::Reply(Reply::SendMessage(SendMessageResponse {
                    payload: Some(send_message_response::Payload::Task(made)),
                }))
            }
            Request::Unary(UnaryRequest::GetTask(_)) => Answer::Reply(Reply::GetTask(made)),
            _ => Answer::Error(tonic::Status::unimplemented("not in this test")),
        }
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

#[tokio::test]
async fn a_refused_call_reaches_no_agent() {
    let (agent, backend) = counting_agent("t-1").await;
    let files = Files::new(&[OLD_KEY]);
    let url = gateway(&files.config(&[backend], false, true)).await;
    let made = ok(
        &url,
        ALICE,
        "SendMessage",
        harness::message_in("hi", None, None),
    )
    .await;
    let alice = Conversation {
        context: text(&made["task"]["contextId"]),
        done: text(&made["task"]["id"]),
        waiting: text(&made["task"]["id"]),
    };
    let seen = agent.calls();
    for (method, params) in foreign_calls(&alice) {
        let (_, body) = post_as(&url, Some(BOB), method, &params).await;
        assert!(body.contains("-32001"), "{method}: {body}");
    }
    assert_eq!(agent.calls(), seen, "an agent saw a foreign call");
    // Altered ids (each character of the seal) are unknown too, and reach no agent.
    for at in 0..25 {
        let mut bytes = alice.done.clone().into_bytes();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).unwrap();
        let (_, body) = post_as(&url, Some(ALICE), "GetTask", &json!({"id": altered})).await;
        assert!(body.contains("\"Task not found\""), "{altered}: {body}");
    }
    assert_eq!(agent.calls(), seen, "an agent saw an altered id");
    // Alice's own call goes through, the agent seeing its own id.
    ok(&url, ALICE, "GetTask", json!({"id": alice.done})).await;
    assert_eq!(agent.calls(), seen + 1);
    match agent.last().request {
        Request::Unary(UnaryRequest::GetTask(get)) => assert_eq!(get.id, "t-1"),
        _ => panic!("not a GetTask"),
    }
}

/// An agent that keeps the tasks messages create, in order, and lists them in pages
/// whose token is the index of the next task.
async fn listing_agent() -> (TestBackend, String) {
    let tasks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let backend = TestBackend::new(move |request| {
        let mut tasks = tasks.lock().unwrap();
        match request {
            Request::Unary(UnaryRequest::SendMessage(send)) => {
                let mut made = harness::task(&format!("t-{}", tasks.len()), TaskState::Completed);
                made.context_id = send.message.as_ref().unwrap().context_id.clone();
                tasks.push(made.clone());
                Answer::Reply(Reply::SendMessage(SendMessageResponse {
                    payload: Some(send_message_response::Payload::Task(made)),
                }))
            }
            Request::Unary(UnaryRequest::ListTasks(list)) => {
                let start: usize = list.page_token.parse().unwrap_or(0);
                let size = list.page_size.unwrap_or(50) as usize;
                let end = (start + size).min(tasks.len());
                let next = if end < tasks.len() {
                    end.to_string()
                } else {
                    String::new()
                };
                Answer::Reply(Reply::ListTasks(ListTasksResponse {
                    tasks: tasks[start.min(end)..end].to_vec(),
                    next_page_token: next,
                    page_size: size as i32,
                    total_size: tasks.len() as i32,
                }))
            }
            _ => Answer::Error(tonic::Status::unimplemented("not in this test")),
        }
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

/// A page of `ListTasks`: the agent's ids (in order), the next page token, and how many
/// agent calls it took.
async fn page(
    url: &str,
    agent: &TestBackend,
    key: &str,
    token: &str,
) -> (Vec<String>, String, usize) {
    let before = agent.calls();
    let list = ok(
        url,
        key,
        "ListTasks",
        json!({"pageSize": 2, "pageToken": token}),
    )
    .await;
    let tasks = list["tasks"].as_array().cloned().unwrap_or_default();
    assert_eq!(list["totalSize"], json!(tasks.len()), "{list}");
    let ids = tasks
        .iter()
        .map(|t| text(&t["id"])[25..].to_owned())
        .collect();
    (ids, text(&list["nextPageToken"]), agent.calls() - before)
}

/// A page that lost another caller's tasks is filled from the agent's next pages, each
/// asked for the room left, at most `MORE_PAGES` more; then it ends short, with the token
/// that continues it, and no task is skipped.
#[tokio::test]
async fn a_listing_fills_its_page_from_further_agent_pages() {
    use a2a_gateway::auth::owner::MORE_PAGES;
    let (agent, backend) = listing_agent().await;
    let files = Files::new(&[OLD_KEY]);
    let url = gateway(&files.config(&[backend], false, true)).await;
    // The agent's order: alice t-0, bob t-1, alice t-2, bob t-3…t-14, alice t-15.
    let owners = [ALICE, BOB, ALICE]
        .into_iter()
        .chain([BOB; 12])
        .chain([ALICE]);
    for key in owners {
        ok(
            &url,
            key,
            "SendMessage",
            harness::message_in("hi", None, None),
        )
        .await;
    }
    assert_eq!(MORE_PAGES, 4);
    let (ids, token, calls) = page(&url, &agent, ALICE, "").await;
    assert_eq!(
        (ids, token.as_str(), calls),
        (vec!["t-0".into(), "t-2".into()], "3", 2)
    );
    // Twelve of bob's: 1 + MORE_PAGES agent pages of 2 hold ten, and the page ends empty.
    let (ids, token, calls) = page(&url, &agent, ALICE, &token).await;
    assert_eq!(
        (ids.len(), token.as_str(), calls),
        (0, "13", 1 + MORE_PAGES)
    );
    let (ids, token, calls) = page(&url, &agent, ALICE, &token).await;
    assert_eq!((ids, token.as_str(), calls), (vec!["t-15".into()], "", 2));
    // Bob's whole listing, in one agent page.
    let bob = ok(&url, BOB, "ListTasks", json!({"pageSize": 100})).await;
    assert_eq!(bob["tasks"].as_array().unwrap().len(), 13, "{bob}");
    assert_eq!(bob["totalSize"], 13);
}

#[tokio::test]
async fn without_authentication_every_caller_is_one_owner() {
    let (agent, backend) = counting_agent("t-1").await;
    let files = Files::new(&[OLD_KEY]);
    let url = gateway(&files.config(&[backend], false, false)).await;
    let (_, body) = post_as(
        &url,
        None,
        "SendMessage",
        &harness::message_in("hi", None, None),
    )
    .await;
    let made: Value = serde_json::from_str(&body).unwrap();
    let id = text(&made["result"]["task"]["id"]);
    assert!(id.ends_with(".t-1") && id.len() == 25 + 3, "{id}");
    // Anyone may name it (there is no one to tell apart); a made-up id reaches no agent.
    let (_, body) = post_as(&url, None, "GetTask", &json!({"id": id})).await;
    assert!(body.contains("\"result\""), "{body}");
    let seen = agent.calls();
    let (_, body) = post_as(&url, None, "GetTask", &json!({"id": "t-1"})).await;
    assert!(body.contains("-32001"), "{body}");
    assert_eq!(agent.calls(), seen);
}

/// Agents whose task ids are the longest a sealed id allows, and one byte longer.
#[tokio::test]
async fn sealed_ids_keep_within_the_id_bound() {
    // A sealed id is 25 bytes longer than the agent's; clients may send 1024.
    const LONGEST: usize = 1024 - 25;
    for (length, comes_back) in [(LONGEST, true), (LONGEST + 1, false)] {
        let id: &'static str = Box::leak("i".repeat(length).into_boxed_str());
        let (agent, backend) = counting_agent(id).await;
        let files = Files::new(&[OLD_KEY]);
        let url = gateway(&files.config(&[backend], false, true)).await;
        let made = ok(
            &url,
            ALICE,
            "SendMessage",
            harness::message_in("hi", None, None),
        )
        .await;
        let sealed = text(&made["task"]["id"]);
        assert_eq!(sealed.len(), length + 25);
        let seen = agent.calls();
        let (_, body) = post_as(&url, Some(ALICE), "GetTask", &json!({"id": sealed})).await;
        let reply: Value = serde_json::from_str(&body).unwrap();
        if comes_back {
            assert!(reply.get("result").is_some(), "{length}: {body}");
            assert_eq!(agent.calls(), seen + 1);
        } else {
            assert_eq!(reply["error"]["code"], -32602, "{length}: {body}");
            assert!(body.contains("1025 bytes"), "{body}");
            assert_eq!(agent.calls(), seen);
        }
    }
}

#[tokio::test]
async fn a_new_key_first_keeps_live_tasks() {
    let (agent, backend) = counting_agent("t-1").await;
    let old = Files::new(&[OLD_KEY]);
    let before = gateway(&old.config(std::slice::from_ref(&backend), false, true)).await;
    let made = ok(
        &before,
        ALICE,
        "SendMessage",
        harness::message_in("hi", None, None),
    )
    .await;
    let (old_id, old_context) = (text(&made["task"]["id"]), text(&made["task"]["contextId"]));
    let rotated = Files::new(&[NEW_KEY, OLD_KEY]);
    let after = gateway(&rotated.config(&[backend], false, true)).await;
    // The old task and its context still work for alice, and only for her.
    let got = ok(&after, ALICE, "GetTask", json!({"id": old_id})).await;
    let new_id = text(&got["id"]);
    assert!(
        new_id.ends_with(".t-1") && new_id != old_id,
        "sealed anew: {got}"
    );
    let follow_up = harness::message_in("more", Some(&old_context), None);
    ok(&after, ALICE, "SendMessage", follow_up).await;
    let (_, body) = post_as(&after, Some(BOB), "GetTask", &json!({"id": old_id})).await;
    assert!(body.contains("-32001"), "{body}");
    // A gateway with the new key alone no longer knows the old ids.
    let new_only = Files::new(&[NEW_KEY]);
    let (_, backend) = counting_agent("t-1").await;
    let fresh = gateway(&new_only.config(&[backend], false, true)).await;
    let (_, body) = post_as(&fresh, Some(ALICE), "GetTask", &json!({"id": old_id})).await;
    assert!(body.contains("-32001"), "{body}");
    let (_, body) = post_as(&fresh, Some(ALICE), "GetTask", &json!({"id": new_id})).await;
    assert!(body.contains("\"result\""), "{body}");
    drop(agent);
}

/// Why the configuration in `file` does not load.
fn refusal(file: &TempFile) -> String {
    match Settings::load(["a2a-gateway", "--config", file.path()]) {
        Ok(_) => panic!("loaded"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn task_owner_needs_a_key_file() {
    let config = "task-owner = true\n[[route]]\nname = \"r\"\npath = \"/r\"\nbackend = \"http://127.0.0.1:1\"\n";
    let file = TempFile::new("toml", config);
    let err = refusal(&file);
    assert!(
        err.contains("route \"r\"") && err.contains("needs owner-key-file"),
        "{err}"
    );
    let keys = TempFile::new("owner", "short\n");
    let config = format!(
        "task-owner = true\nowner-key-file = {:?}\nbackend = \"http://127.0.0.1:1\"\n",
        keys.path()
    );
    let file = TempFile::new("toml", &config);
    let err = refusal(&file);
    assert!(
        err.contains("owner-key-file") && err.contains("line 1"),
        "{err}"
    );
    assert!(!err.contains("short"), "the key is not echoed: {err}");
}

//! Task affinity in front of three reference-SDK agents (`tests/peers/agent.py`), each
//! with the SDK's in-memory task store: a task exists only in the process that created
//! it. One conversation (send, get, stream, subscribe, cancel, a follow-up message to an
//! input-required task, push config CRUD, list by context) runs several times through
//! a gateway with `--affinity task` and must work every time; then an unfiltered
//! `ListTasks`, whole and page by page, must list every task of every agent in the
//! spec's order. The same conversation without affinity must fail: proof that the three
//! agents really do not share tasks, so the test is real.
//!
//! Then the wire against a client that forges (in-process agents that count the calls
//! they see, no SDK needed): an id of one route is refused on another, under the same
//! key; forged ids (a flipped MAC or tag byte, the first, unkeyed id format, another
//! endpoint's tag spliced on) reach no agent; altered, overlong and re-filtered page
//! tokens are refused with -32602 naming `pageToken`; tags are keyed (another key, other
//! tags; a replica, the same). Each of those tests fails against the code with the check
//! it covers removed (the MAC check, the route in the key, the seal check, the length
//! bound, the filters in the seal, the key in the tags).

use crate::harness;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use a2a_gateway::backend::affinity::IdCodec;
use a2a_gateway::proto::{
    send_message_response, ListTasksRequest, ListTasksResponse, SendMessageResponse, Task,
    TaskState,
};
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use a2a_gateway::route::Routes;
use a2a_gateway::settings::Settings;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use harness::peer::Peer;
use harness::{client, post, request, Answer, Step, TestBackend};
use serde_json::{json, Value};

const KEY: &str = "test affinity key, 32 bytes long";

/// Three agents; the gateway's flags for them.
fn agents() -> (Vec<Peer>, Vec<String>) {
    let peers: Vec<Peer> = std::thread::scope(|s| {
        let started: Vec<_> = (0..3).map(|_| s.spawn(Peer::start)).collect();
        started.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut flags = Vec::new();
    for peer in &peers {
        flags.extend(["--backend".to_owned(), peer.grpc.clone()]);
    }
    (peers, flags)
}

async fn gateway(flags: &[String], affinity: bool) -> String {
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    if affinity {
        args.extend(["--affinity", "task", "--affinity-key", KEY]);
    }
    harness::gateway_from_flags(&args).await
}

/// A unary call's `result`, or its error as text.
async fn call(url: &str, method: &str, params: Value) -> Result<Value, String> {
    let (status, _, text) = post(url, request(json!(1), method, params.clone())).await;
    let reply: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    match (status, reply.get("result")) {
        (200, Some(result)) => Ok(result.clone()),
        _ => Err(format!("{method} {params}: {text}")),
    }
}

/// A stream's `result` objects to its end, or the error that ended or refused it.
async fn stream(url: &str, method: &str, params: Value) -> Result<Vec<Value>, String> {
    let response = client()
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(request(json!(1), method, params.clone()))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let sse = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream");
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .map_err(|_| format!("{method}: the stream did not end"))?
        .map_err(|e| e.to_string())?;
    if !sse {
        return Err(format!("{method} {params}: {text}"));
    }
    let mut results = Vec::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let frame: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        match frame.get("result") {
            Some(result) => results.push(result.clone()),
            None => return Err(format!("{method} {params}: {data}")),
        }
    }
    Ok(results)
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// `Err` unless `holds`.
fn expect(holds: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if holds {
        Ok(())
    } else {
        Err(what())
    }
}

/// The task and context ids one stream event names.
fn event_ids(result: &Value) -> (&str, &str) {
    for (kind, task) in [
        ("task", "id"),
        ("statusUpdate", "taskId"),
        ("artifactUpdate", "taskId"),
        ("message", "taskId"),
    ] {
        if let Some(event) = result.get(kind) {
            return (text(&event[task]), text(&event["contextId"]));
        }
    }
    ("", "")
}

/// Every event of a stream is about `task` in `context`.
fn one_task(events: &[Value], task: &str, context: &str) -> Result<(), String> {
    for event in events {
        expect(event_ids(event) == (task, context), || {
            format!("an event of another task or context: {event} (expected {task} in {context})")
        })?;
    }
    Ok(())
}

fn state(task: &Value) -> &str {
    text(&task["status"]["state"])
}

/// One client's conversation; its context and the tasks it made.
async fn conversation(url: &str) -> Result<(String, Vec<String>), String> {
    // A new context: any agent may take it.
    let done = call(url, "SendMessage", harness::message_in("task", None, None)).await?;
    let (t1, ctx) = (text(&done["task"]["id"]), text(&done["task"]["contextId"]));
    let (t1, ctx) = (t1.to_owned(), ctx.to_owned());
    expect(state(&done["task"]) == "TASK_STATE_COMPLETED", || {
        done.to_string()
    })?;
    let got = call(url, "GetTask", json!({"id": t1})).await?;
    expect(
        got["id"] == t1.as_str() && got["contextId"] == ctx.as_str(),
        || got.to_string(),
    )?;

    // A stream in the same context.
    let events = stream(
        url,
        "SendStreamingMessage",
        harness::message_in("stream", Some(&ctx), None),
    )
    .await?;
    let t2 = event_ids(&events[0]).0.to_owned();
    one_task(&events, &t2, &ctx)?;
    let last = events.last().unwrap();
    expect(
        state(&last["statusUpdate"]) == "TASK_STATE_COMPLETED",
        || last.to_string(),
    )?;
    let chunks = events.iter().filter(|e| e.get("artifactUpdate").is_some());
    expect(chunks.count() == 3, || format!("{events:?}"))?;

    // A slow task: subscribed to, then canceled.
    let mut params = harness::message_in("slow:20", Some(&ctx), None);
    params["configuration"] = json!({"returnImmediately": true});
    let slow = call(url, "SendMessage", params).await?;
    let t3 = text(&slow["task"]["id"]).to_owned();
    let watcher = tokio::spawn({
        let (url, t3) = (url.to_owned(), t3.clone());
        async move { stream(&url, "SubscribeToTask", json!({"id": t3})).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let canceled = call(url, "CancelTask", json!({"id": t3})).await?;
    expect(state(&canceled) == "TASK_STATE_CANCELED", || {
        canceled.to_string()
    })?;
    let watched = watcher.await.unwrap()?;
    one_task(&watched, &t3, &ctx)?;
    let end = watched.last().unwrap();
    expect(state(&end["statusUpdate"]) == "TASK_STATE_CANCELED", || {
        end.to_string()
    })?;

    // A task that needs input, and the follow-up message that gives it.
    let waiting = call(
        url,
        "SendMessage",
        harness::message_in("input", Some(&ctx), None),
    )
    .await?;
    let t4 = text(&waiting["task"]["id"]).to_owned();
    expect(
        state(&waiting["task"]) == "TASK_STATE_INPUT_REQUIRED",
        || waiting.to_string(),
    )?;
    let answered = call(
        url,
        "SendMessage",
        harness::message_in("more", Some(&ctx), Some(&t4)),
    )
    .await?;
    let task = &answered["task"];
    expect(
        task["id"] == t4.as_str() && state(task) == "TASK_STATE_COMPLETED",
        || answered.to_string(),
    )?;
    let reply = text(&task["status"]["message"]["parts"][0]["text"]);
    expect(reply == "got: more", || answered.to_string())?;

    // Push configs of the first task.
    let config = json!({"taskId": t1, "id": "cfg-1", "url": "http://127.0.0.1:9/hook"});
    let made = call(url, "CreateTaskPushNotificationConfig", config).await?;
    expect(made["taskId"] == t1.as_str(), || made.to_string())?;
    let named = json!({"taskId": t1, "id": "cfg-1"});
    let got = call(url, "GetTaskPushNotificationConfig", named.clone()).await?;
    expect(got["taskId"] == t1.as_str(), || got.to_string())?;
    let listed = call(
        url,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": t1}),
    )
    .await?;
    let configs = listed["configs"].as_array().cloned().unwrap_or_default();
    expect(
        configs.len() == 1 && configs[0]["taskId"] == t1.as_str(),
        || listed.to_string(),
    )?;
    call(url, "DeleteTaskPushNotificationConfig", named).await?;
    let listed = call(
        url,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": t1}),
    )
    .await?;
    let left = listed["configs"].as_array().map_or(0, Vec::len);
    expect(left == 0, || listed.to_string())?;

    // The context's tasks.
    let tasks = vec![t1, t2, t3, t4];
    let listed = call(url, "ListTasks", json!({"contextId": ctx})).await?;
    let ids: BTreeSet<&str> = listed["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| text(&t["id"]))
        .collect();
    let expected: BTreeSet<&str> = tasks.iter().map(String::as_str).collect();
    expect(ids == expected, || {
        format!("{listed} (expected {expected:?})")
    })?;
    Ok((ctx, tasks))
}

/// The endpoint tag an id names (its first 8 bytes after base64url).
fn tag_of(id: &str) -> Vec<u8> {
    assert_eq!(
        id.as_bytes().get(24),
        Some(&b'.'),
        "not an affinity id: {id}"
    );
    URL_SAFE_NO_PAD.decode(&id[..24]).unwrap()[..8].to_vec()
}

fn timestamp(task: &Value) -> time::OffsetDateTime {
    let stamp = text(&task["status"]["timestamp"]);
    time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{e}: {task}"))
}

async fn error_code(url: &str, method: &str, params: Value) -> i64 {
    let (_, _, text) = post(url, request(json!(1), method, params)).await;
    let reply: Value = serde_json::from_str(&text).unwrap();
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{text}"))
}

#[tokio::test]
async fn conversations_follow_their_tasks() {
    let (_agents, flags) = agents();
    let url = gateway(&flags, true).await;
    let mut all = Vec::new();
    let mut endpoints = BTreeSet::new();
    for round in 0..8 {
        let (ctx, tasks) = conversation(&url)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        endpoints.insert(tag_of(&ctx));
        for task in &tasks {
            assert_eq!(tag_of(task), tag_of(&ctx), "a task away from its context");
        }
        all.extend(tasks);
    }
    // 8 new contexts, each on one of 3 agents drawn at random: all on one agent has a
    // chance of 3^-7.
    assert!(endpoints.len() > 1, "every conversation went to one agent");

    // Unfiltered: every agent's tasks, most recent first, whole and page by page.
    let whole = call(&url, "ListTasks", json!({"pageSize": 100}))
        .await
        .unwrap();
    let listed: Vec<Value> = whole["tasks"].as_array().unwrap().clone();
    let ids: Vec<&str> = listed.iter().map(|t| text(&t["id"])).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    let made: BTreeSet<&str> = all.iter().map(String::as_str).collect();
    assert_eq!((unique.len(), &unique), (ids.len(), &made), "{whole}");
    assert_eq!(whole["totalSize"], json!(all.len()), "{whole}");
    assert_eq!(text(&whole["nextPageToken"]), "");
    for pair in listed.windows(2) {
        assert!(
            timestamp(&pair[0]) >= timestamp(&pair[1]),
            "out of order: {pair:?}"
        );
    }
    let mut paged = Vec::new();
    let mut token = String::new();
    loop {
        let page = call(
            &url,
            "ListTasks",
            json!({"pageSize": 3, "pageToken": token}),
        )
        .await
        .unwrap();
        let tasks = page["tasks"].as_array().unwrap();
        assert!(!tasks.is_empty() && tasks.len() <= 3, "{page}");
        paged.extend(tasks.iter().map(|t| text(&t["id"]).to_owned()));
        token = text(&page["nextPageToken"]).to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(paged, ids, "pages differ from the whole list");

    // Ids the gateway did not issue are tasks the agent does not know.
    let t1 = &all[0];
    let mut tampered = t1.clone().into_bytes();
    tampered[3] = if tampered[3] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let agents_own = &t1[25..];
    for id in [tampered.as_str(), agents_own, "no-such-task"] {
        assert_eq!(
            error_code(&url, "GetTask", json!({"id": id})).await,
            -32001,
            "{id}"
        );
        let params = json!({"id": id});
        assert_eq!(
            error_code(&url, "SubscribeToTask", params).await,
            -32001,
            "{id}"
        );
    }
    let params = harness::message_in("more", None, Some(&tampered));
    assert_eq!(error_code(&url, "SendMessage", params).await, -32001);
}

#[tokio::test]
async fn without_affinity_the_conversation_fails() {
    let (_agents, flags) = agents();
    let url = gateway(&flags, false).await;
    for round in 0..2 {
        // A call about a task reaches an agent that never saw it.
        match conversation(&url).await {
            Err(e) => assert!(e.contains("-32001"), "round {round}: {e}"),
            Ok(done) => panic!("round {round} worked without affinity: {done:?}"),
        }
    }
}

// ---- the wire against forged ids and page tokens: in-process agents -------------------------
//
// TestBackend agents (harness) on 127.0.0.1:0, each knowing which calls reached it; the
// gateway built from a TOML file as the binary builds it. Nothing here needs the SDK peers.

/// The key of the forgery tests' gateways, and another one.
const WIRE_KEY: &str = "the wire tests' affinity key, 32+";
const OTHER_KEY: &str = "another gateway's key, also long";

/// A task of agent `name`, its status stamped `seconds`.
fn agent_task(id: String, name: &str, seconds: i64) -> Task {
    let mut task = harness::task(&id, TaskState::Completed);
    task.context_id = format!("{name}-ctx");
    if let Some(status) = &mut task.status {
        status.timestamp = Some(a2a_gateway::proto::Timestamp { seconds, nanos: 0 });
    }
    task
}

/// Agent `name`: SendMessage makes the task `{name}-task` in the context `{name}-ctx`; GetTask
/// answers the task asked for; SubscribeToTask one status event; ListTasks its two tasks,
/// `{name}-new` (stamped `newest`) before `{name}-old`, whatever the page asked for.
fn wire_agent(name: &'static str, newest: i64) -> TestBackend {
    TestBackend::new(move |request| match request {
        Request::Unary(UnaryRequest::SendMessage(_)) => {
            let task = agent_task(format!("{name}-task"), name, newest);
            Answer::Reply(Reply::SendMessage(SendMessageResponse {
                payload: Some(send_message_response::Payload::Task(task)),
            }))
        }
        Request::Unary(UnaryRequest::GetTask(get)) => {
            Answer::Reply(Reply::GetTask(agent_task(get.id.clone(), name, newest)))
        }
        Request::Stream(StreamRequest::SubscribeToTask(subscribe)) => {
            Answer::Stream(vec![Step::Event(harness::status_update(
                &subscribe.id,
                TaskState::Working,
            ))])
        }
        Request::Unary(UnaryRequest::ListTasks(_)) => {
            Answer::Reply(Reply::ListTasks(ListTasksResponse {
                tasks: vec![
                    agent_task(format!("{name}-new"), name, newest),
                    agent_task(format!("{name}-old"), name, newest - 10),
                ],
                next_page_token: String::new(),
                page_size: 2,
                total_size: 2,
            }))
        }
        _ => Answer::Error(tonic::Status::unimplemented("not in this test")),
    })
}

/// Running wire agents by name, and their backend URLs.
struct WireAgents(Vec<(&'static str, TestBackend, String)>);

impl WireAgents {
    async fn start(names: &[&'static str]) -> WireAgents {
        let mut agents = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let backend = wire_agent(name, 100 - 20 * i as i64);
            let url = format!("http://{}", backend.spawn().await);
            agents.push((*name, backend, url));
        }
        WireAgents(agents)
    }

    fn url(&self, name: &str) -> &str {
        &self.0.iter().find(|a| a.0 == name).unwrap().2
    }

    /// `backend = [...]` of the agents named.
    fn backends(&self, names: &[&str]) -> String {
        let urls: Vec<String> = names.iter().map(|n| format!("{:?}", self.url(n))).collect();
        format!("[{}]", urls.join(", "))
    }

    /// The calls each agent has seen, by name.
    fn calls(&self) -> Vec<(&'static str, usize)> {
        self.0
            .iter()
            .map(|(name, b, _)| (*name, b.calls()))
            .collect()
    }

    /// The agent's own id of the last call agent `name` saw (`GetTask`'s id).
    fn last_get(&self, name: &str) -> String {
        let agent = &self.0.iter().find(|a| a.0 == name).unwrap().1;
        match agent.last().request {
            Request::Unary(UnaryRequest::GetTask(get)) => get.id,
            _ => panic!("{name}'s last call was no GetTask"),
        }
    }
}

/// The gateway of the TOML `config`, built and served as the binary serves it: its origin.
async fn gateway_of(config: &str) -> String {
    let file = harness::process::TempFile::new("toml", config);
    let config = Settings::load(["a2a-gateway", "--config", file.path()]).unwrap();
    let template = Routes::new(&config, None).unwrap();
    let frontend = template.frontend(&Default::default()).unwrap();
    harness::serve_frontend(frontend).await
}

/// One route `name` at `/name` over `backends`, with affinity under the global key.
fn route(name: &str, backends: &str) -> String {
    format!("[[route]]\nname = {name:?}\npath = \"/{name}\"\nbackend = {backends}\n\n")
}

fn keyed(key: &str, routes: &[String]) -> String {
    format!(
        "affinity = \"task\"\naffinity-key = {key:?}\n\n{}",
        routes.concat()
    )
}

fn endpoint(origin: &str, route: &str) -> String {
    format!("{origin}/{route}/a2a/jsonrpc")
}

/// The JSON-RPC error object a call is refused with.
async fn refusal(url: &str, method: &str, params: Value) -> Value {
    let (status, _, text) = post(url, request(json!(1), method, params.clone())).await;
    // A page token may be 16 KiB long: failures show its start.
    let params: String = params.to_string().chars().take(300).collect();
    assert_eq!(status, 200, "{method} {params}: {text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    reply
        .get("error")
        .cloned()
        .unwrap_or_else(|| panic!("{method} {params} was not refused: {text}"))
}

/// `id` is refused as a task this agent does not know (the route's own -32001 for an id
/// that does not verify, echoing it), on a unary and on a streaming call, and a follow-up
/// message naming it, without any agent seeing a call.
async fn assert_unknown_everywhere(url: &str, id: &str, agents: &WireAgents, what: &str) {
    let before = agents.calls();
    for (method, params) in [
        ("GetTask", json!({"id": id})),
        ("SubscribeToTask", json!({"id": id})),
        ("SendMessage", harness::message_in("more", None, Some(id))),
    ] {
        let error = refusal(url, method, params).await;
        assert_eq!(error["code"], -32001, "{what}: {method}: {error}");
        let text = error["message"].as_str().unwrap_or_default();
        assert!(
            text.contains("is not a task or context of this agent") && text.contains(id),
            "{what}: {method}: not the refusal of an unverified id: {error}"
        );
    }
    assert_eq!(agents.calls(), before, "{what}: an agent saw the call");
}

/// An id's prefix, decoded: the endpoint tag and the MAC; and the agent's own id.
fn split_id(id: &str) -> ([u8; 8], [u8; 10], &str) {
    tag_of(id);
    let raw = URL_SAFE_NO_PAD.decode(&id[..24]).unwrap();
    (
        raw[..8].try_into().unwrap(),
        raw[8..].try_into().unwrap(),
        &id[25..],
    )
}

fn join_id(tag: [u8; 8], mac: [u8; 10], agent_id: &str) -> String {
    let mut raw = tag.to_vec();
    raw.extend_from_slice(&mac);
    format!("{}.{agent_id}", URL_SAFE_NO_PAD.encode(raw))
}

/// The id the first affinity format (commit f9acc6d, before keyed tags) made for `agent_id`
/// on the endpoint labelled `label`: the tag 8 bytes of plain SHA-256 of the label (anyone
/// can compute it), the MAC HMAC-SHA-256 with the key itself over version ‖ tag ‖ id.
fn first_format_id(key: &str, label: &str, agent_id: &str) -> String {
    use ring::{digest, hmac};
    let digest = digest::digest(&digest::SHA256, label.as_bytes());
    let tag: [u8; 8] = digest.as_ref()[..8].try_into().unwrap();
    let key = hmac::Key::new(hmac::HMAC_SHA256, key.as_bytes());
    let mut context = hmac::Context::with_key(&key);
    context.update(b"a2a-gateway task affinity v1\0");
    context.update(&tag);
    context.update(agent_id.as_bytes());
    let mac: [u8; 10] = context.sign().as_ref()[..10].try_into().unwrap();
    join_id(tag, mac, agent_id)
}

/// An unfiltered `ListTasks` on `url`: each task's id by the agent's own id.
async fn listed_ids(url: &str) -> BTreeMap<String, String> {
    let listed = call(url, "ListTasks", json!({"pageSize": 100}))
        .await
        .unwrap();
    listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let id = text(&t["id"]).to_owned();
            (id[25..].to_owned(), id)
        })
        .collect()
}

/// An id issued on route `a` is no id of route `b` (other agents) nor of route `c` (the
/// same agents, another route), under the same key: -32001, and no agent sees the call.
#[tokio::test]
async fn an_id_of_one_route_is_refused_on_another() {
    let agents = WireAgents::start(&["a1", "a2", "b1", "b2"]).await;
    let a = agents.backends(&["a1", "a2"]);
    let config = keyed(
        WIRE_KEY,
        &[
            route("a", &a),
            route("b", &agents.backends(&["b1", "b2"])),
            route("c", &a),
        ],
    );
    let origin = gateway_of(&config).await;
    let made = call(
        &endpoint(&origin, "a"),
        "SendMessage",
        harness::message_in("hi", None, None),
    )
    .await
    .unwrap();
    let (id, context) = (text(&made["task"]["id"]), text(&made["task"]["contextId"]));
    let owner = &id[25..27];
    // On its own route the id reaches its agent, as the agent's own.
    let got = call(&endpoint(&origin, "a"), "GetTask", json!({"id": id}))
        .await
        .unwrap();
    assert_eq!(got["id"], id);
    assert_eq!(agents.last_get(owner), format!("{owner}-task"));

    for other in ["b", "c"] {
        let url = endpoint(&origin, other);
        assert_unknown_everywhere(&url, id, &agents, &format!("route {other}")).await;
        assert_unknown_everywhere(&url, context, &agents, &format!("route {other}")).await;
    }
    let calls = agents.calls();
    assert!(
        calls
            .iter()
            .all(|(name, n)| !name.starts_with('b') || *n == 0),
        "route b's agents were called: {calls:?}"
    );
}

/// Ids the gateway did not issue reach no agent: one flipped byte of the MAC, one of the
/// tag; an id of the first, unkeyed format naming the other agent; and the other agent's
/// real tag spliced onto this id's MAC.
#[tokio::test]
async fn forged_ids_reach_no_agent() {
    let agents = WireAgents::start(&["a1", "a2"]).await;
    let config = keyed(WIRE_KEY, &[route("a", &agents.backends(&["a1", "a2"]))]);
    let url = endpoint(&gateway_of(&config).await, "a");
    let ids = listed_ids(&url).await;
    let (x, y) = (&ids["a1-new"], &ids["a2-new"]);
    // The real id works: the forgeries below differ from it in the one way each names.
    call(&url, "GetTask", json!({"id": x})).await.unwrap();
    assert_eq!(agents.last_get("a1"), "a1-new");

    let (tag, mac, agent_id) = split_id(x);
    let (other_tag, _, _) = split_id(y);
    assert_ne!(tag, other_tag);
    let mut flipped_mac = mac;
    flipped_mac[3] ^= 0x01;
    let mut flipped_tag = tag;
    flipped_tag[5] ^= 0x80;
    let forgeries = [
        ("a flipped MAC byte", join_id(tag, flipped_mac, agent_id)),
        ("a flipped tag byte", join_id(flipped_tag, mac, agent_id)),
        (
            "the first format, naming a2",
            first_format_id(WIRE_KEY, agents.url("a2"), agent_id),
        ),
        (
            "a2's real tag on a1's MAC",
            join_id(other_tag, mac, agent_id),
        ),
    ];
    for (what, forged) in &forgeries {
        assert_ne!(forged, x);
        assert_unknown_everywhere(&url, forged, &agents, what).await;
    }
}

/// A page token of this listing, from its first page of one task.
async fn first_page_token(url: &str) -> String {
    let page = call(url, "ListTasks", json!({"pageSize": 1}))
        .await
        .unwrap();
    assert_eq!(page["tasks"].as_array().map(Vec::len), Some(1), "{page}");
    let token = text(&page["nextPageToken"]).to_owned();
    assert!(!token.is_empty(), "{page}");
    token
}

/// `ListTasks` with `params` is refused as a bad `pageToken` (-32602 naming the field, in
/// the message and the `BadRequest` detail), and no agent sees the call; the message.
async fn assert_bad_page_token(url: &str, params: Value, agents: &WireAgents) -> String {
    let before = agents.calls();
    let error = refusal(url, "ListTasks", params).await;
    assert_eq!(error["code"], -32602, "{error}");
    let message = error["message"].as_str().unwrap().to_owned();
    assert!(message.contains("pageToken"), "{error}");
    let named = error["data"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|detail| {
            detail["fieldViolations"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["field"] == "pageToken")
        });
    assert!(named, "no BadRequest naming pageToken: {error}");
    assert_eq!(agents.calls(), before, "an agent was asked: {error}");
    message
}

/// A page token as the gateway seals one for route `route` under `WIRE_KEY`, over the
/// filters of a `ListTasks` that sets none: a token only its length can be refused for.
fn sealed_token(route: &str, json: &Value) -> String {
    let codec = IdCodec::new(WIRE_KEY.as_bytes(), route).unwrap();
    let filters = prost::Message::encode_to_vec(&ListTasksRequest::default());
    let json = serde_json::to_vec(json).unwrap();
    let mut raw = vec![1u8];
    raw.extend_from_slice(&codec.seal(&filters, &json));
    raw.extend_from_slice(&json);
    URL_SAFE_NO_PAD.encode(raw)
}

/// An altered page token, and one over 16,384 characters, are refused with -32602 naming
/// `pageToken`, before any agent is asked.
#[tokio::test]
async fn altered_and_overlong_page_tokens_are_refused() {
    let agents = WireAgents::start(&["a1", "a2"]).await;
    let config = keyed(WIRE_KEY, &[route("a", &agents.backends(&["a1", "a2"]))]);
    let url = endpoint(&gateway_of(&config).await, "a");
    let token = first_page_token(&url).await;
    let next = call(
        &url,
        "ListTasks",
        json!({"pageSize": 1, "pageToken": token}),
    )
    .await
    .unwrap();
    assert_eq!(next["tasks"].as_array().map(Vec::len), Some(1), "{next}");

    // The JSON inside edited (a total still in range) under the token's own seal; and one
    // byte of the seal flipped.
    let raw = URL_SAFE_NO_PAD.decode(&token).unwrap();
    let (head, json) = raw.split_at(17);
    let mut state: Value = serde_json::from_slice(json).unwrap();
    state["done"] = json!(state["done"].as_i64().unwrap() + 7);
    let mut edited = head.to_vec();
    edited.extend_from_slice(&serde_json::to_vec(&state).unwrap());
    let mut flipped = raw.clone();
    flipped[5] ^= 0x01;
    for altered in [edited, flipped] {
        let altered = URL_SAFE_NO_PAD.encode(altered);
        let params = json!({"pageSize": 1, "pageToken": altered});
        let message = assert_bad_page_token(&url, params, &agents).await;
        assert!(message.contains("altered"), "{message}");
    }

    // Sealed as the gateway seals, around an agent's long page token: read up to the bound,
    // refused past it for its length alone.
    let tag: String = split_id(&listed_ids(&url).await["a1-new"])
        .0
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let state = |agent_token: usize| json!({"at": [{"e": tag, "t": "x".repeat(agent_token), "s": 0}], "done": 0});
    let fits = sealed_token("a", &state(12_000));
    assert!(fits.len() <= 16_384, "{}", fits.len());
    let read = call(&url, "ListTasks", json!({"pageToken": fits})).await;
    assert!(read.is_ok(), "a sealed token within the bound: {read:?}");
    let long = sealed_token("a", &state(12_400));
    assert!(long.len() > 16_384, "{}", long.len());
    let message = assert_bad_page_token(&url, json!({"pageToken": long}), &agents).await;
    assert!(
        message.contains("longer than 16384 characters"),
        "{message}"
    );
}

/// A page token belongs to its listing: other filters (status, history length, artifacts),
/// or the same agents behind another route, get -32602 naming `pageToken`; another page
/// size does not change the listing.
#[tokio::test]
async fn a_page_token_is_sealed_to_its_filters_and_route() {
    let agents = WireAgents::start(&["a1", "a2"]).await;
    let a = agents.backends(&["a1", "a2"]);
    let config = keyed(WIRE_KEY, &[route("a", &a), route("c", &a)]);
    let origin = gateway_of(&config).await;
    let url = endpoint(&origin, "a");
    let token = first_page_token(&url).await;
    for (filter, value) in [
        ("status", json!("TASK_STATE_WORKING")),
        ("historyLength", json!(2)),
        ("includeArtifacts", json!(true)),
    ] {
        let mut params = json!({"pageSize": 1, "pageToken": token});
        params[filter] = value;
        let message = assert_bad_page_token(&url, params, &agents).await;
        assert!(message.contains("other filters"), "{filter}: {message}");
    }
    let params = json!({"pageSize": 1, "pageToken": token});
    assert_bad_page_token(&endpoint(&origin, "c"), params, &agents).await;
    let larger = call(
        &url,
        "ListTasks",
        json!({"pageSize": 10, "pageToken": token}),
    )
    .await
    .unwrap();
    assert_eq!(
        larger["tasks"].as_array().map(Vec::len),
        Some(3),
        "{larger}"
    );
}

/// Tags are keyed: a gateway with another key tags the same agents differently (and
/// refuses the first gateway's ids), a replica with the same key alike (and serves them);
/// no tag is the unkeyed SHA-256 of the agent's URL anyone could compute.
#[tokio::test]
async fn tags_are_keyed() {
    let agents = WireAgents::start(&["a1", "a2"]).await;
    let routes = [route("a", &agents.backends(&["a1", "a2"]))];
    let first = endpoint(&gateway_of(&keyed(WIRE_KEY, &routes)).await, "a");
    let other = endpoint(&gateway_of(&keyed(OTHER_KEY, &routes)).await, "a");
    let replica = endpoint(&gateway_of(&keyed(WIRE_KEY, &routes)).await, "a");
    let (ids, other_ids, replica_ids) = (
        listed_ids(&first).await,
        listed_ids(&other).await,
        listed_ids(&replica).await,
    );
    for name in ["a1", "a2"] {
        let agent_id = format!("{name}-new");
        let tag = split_id(&ids[&agent_id]).0;
        assert_ne!(
            tag,
            split_id(&other_ids[&agent_id]).0,
            "{name}: the same tag under another key"
        );
        assert_eq!(
            ids[&agent_id], replica_ids[&agent_id],
            "{name}: replicas disagree"
        );
        let digest = ring::digest::digest(&ring::digest::SHA256, agents.url(name).as_bytes());
        assert_ne!(&tag[..], &digest.as_ref()[..8], "{name}: an unkeyed tag");
    }
    assert_ne!(
        split_id(&ids["a1-new"]).0,
        split_id(&ids["a2-new"]).0,
        "two agents, one tag"
    );
    let id = &ids["a1-new"];
    assert_unknown_everywhere(&other, id, &agents, "another key").await;
    let got = call(&replica, "GetTask", json!({"id": id})).await.unwrap();
    assert_eq!(got["id"], id.as_str());
    assert_eq!(agents.last_get("a1"), "a1-new");
}

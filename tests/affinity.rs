//! Task affinity in front of three reference-SDK agents (`tests/peers/agent.py`), each
//! with the SDK's in-memory task store: a task exists only in the process that created
//! it. One conversation (send, get, stream, subscribe, cancel, a follow-up message to an
//! input-required task, push config CRUD, list by context) runs several times through
//! a gateway with `--affinity task` and must work every time; then an unfiltered
//! `ListTasks`, whole and page by page, must list every task of every agent in the
//! spec's order. The same conversation without affinity must fail: proof that the three
//! agents really do not share tasks, so the test is real.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::peer::Peer;
use common::{client, post, request};
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
    common::gateway_from_flags(&args).await
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

fn message(text: &str, context: Option<&str>, task: Option<&str>) -> Value {
    let mut message = json!({"messageId": uuid::Uuid::new_v4().to_string(),
                             "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    if let Some(task) = task {
        message["taskId"] = json!(task);
    }
    json!({ "message": message })
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
    let done = call(url, "SendMessage", message("task", None, None)).await?;
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
        message("stream", Some(&ctx), None),
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
    let mut params = message("slow:20", Some(&ctx), None);
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
    let waiting = call(url, "SendMessage", message("input", Some(&ctx), None)).await?;
    let t4 = text(&waiting["task"]["id"]).to_owned();
    expect(
        state(&waiting["task"]) == "TASK_STATE_INPUT_REQUIRED",
        || waiting.to_string(),
    )?;
    let answered = call(url, "SendMessage", message("more", Some(&ctx), Some(&t4))).await?;
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
    let params = message("more", None, Some(&tampered));
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

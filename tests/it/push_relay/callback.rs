//! Posts to the relay's callback: with the token they reach delivery, from any replica
//! with the key (and across a key rotation); forged and malformed ones are refused and
//! counted.

use super::*;

use std::time::Duration;

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
    assert_eq!(delivery.body, body, "the agent's event");
    assert_eq!(
        delivery.traceparent.as_deref(),
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    );
    // What A2A does not know is not passed on (nor signed): the event is written anew
    // from what was read.
    let mut padded: Value = serde_json::from_slice(&body).unwrap();
    padded["statusUpdate"]["injected"] = json!({"by": "the agent"});
    let padded = serde_json::to_vec(&padded).unwrap();
    assert_eq!(
        post_event(&gateway.callback, Some(&token), padded).await.0,
        204
    );
    assert_eq!(gateway.outbox.taken()[0].body, body);

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
    // Another task's: this gateway's config of t-1 is not the stranger's to replace.
    let foreign = registered(&stranger, &agent, "t-3").await;
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
    // Two tokens, each valid: no one sender.
    let twice = client()
        .post(callback)
        .header("content-type", "application/json")
        .header("x-a2a-notification-token", &token)
        .header("x-a2a-notification-token", &token)
        .body(event("t-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(twice.status(), 401);
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
        ("", "unauthorized", 6),
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

/// A post's body is charged to `global-max-body-bytes-in-flight` as its bytes arrive (a
/// slow post holds only what it sent, so it cannot pin the budget). Past the budget a post
/// gets 503 with `Retry-After` (counted as a global body-bytes refusal); at the budget it
/// is taken; once the held post is done, its bytes are given back.
#[tokio::test]
async fn posts_are_charged_to_the_gateways_body_budget() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let flags = [
        "--push-max-body",
        "1000",
        "--global-max-body-bytes-in-flight",
        "1200",
    ];
    let gateway = Gateway::start(&agent_url, &key, &flags).await;
    let token = registered(&gateway, &agent, "t-1").await;
    let callback = gateway.callback.clone();
    let padded = |len: usize| {
        let mut body = event("t-1");
        body.resize(len, b' ');
        body
    };
    let in_use = |origin: String| async move {
        let text = metrics_text(&origin).await;
        let series = "a2a_gateway_limit_in_use{limit=\"global-max-body-bytes-in-flight\"} ";
        text.lines()
            .find_map(|line| line.strip_prefix(series))
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };

    // A chunked post holds the 400 bytes it sent until it is read whole.
    let (chunks, held) = futures::channel::mpsc::unbounded::<Result<Vec<u8>, std::io::Error>>();
    chunks.unbounded_send(Ok(padded(400))).unwrap();
    let held_post = {
        let (callback, token) = (callback.clone(), token.clone());
        tokio::spawn(async move {
            post_event(&callback, Some(&token), reqwest::Body::wrap_stream(held)).await
        })
    };
    let started = std::time::Instant::now();
    while in_use(gateway.origin.clone()).await != 400 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the held post is not charged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // 400 + 801 is past the budget; 400 + 800 is at it.
    let past = post_response(&callback, Some(&token), padded(801)).await;
    assert_eq!(past.status(), 503);
    assert_eq!(past.headers()["retry-after"], "1");
    let text = past.text().await.unwrap();
    assert!(text.contains("body bytes in flight"), "{text}");
    assert_eq!(
        post_event(&callback, Some(&token), padded(800)).await.0,
        204
    );

    chunks.unbounded_send(Ok(vec![b' '; 100])).unwrap();
    drop(chunks);
    assert_eq!(held_post.await.unwrap().0, 204, "the held post is taken");
    assert_eq!(
        in_use(gateway.origin.clone()).await,
        0,
        "every byte given back"
    );
    assert_eq!(
        post_event(&callback, Some(&token), padded(801)).await.0,
        204
    );
    let metrics = metrics_text(&gateway.origin).await;
    let refused = "a2a_gateway_limit_rejections_total{route=\"default\",limit=\"global-max-body-bytes-in-flight\"} 1\n";
    assert!(metrics.contains(refused), "{metrics}");
    assert_eq!(gateway.outbox.taken().len(), 3);
}

/// A notification is the JSON of a `StreamResponse`: a post sent as `application/json` or
/// `application/a2a+json` (parameters allowed, the type in any case) is taken; any other
/// Content-Type, none, or two, gets 415, is counted and never reaches delivery.
#[tokio::test]
async fn a_post_not_sent_as_json_is_refused_with_415() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;
    let token = registered(&gateway, &agent, "t-1").await;
    let post = |types: &[&str]| {
        let mut request = client()
            .post(&gateway.callback)
            .header("x-a2a-notification-token", &token)
            .body(event("t-1"));
        for content_type in types {
            request = request.header("content-type", *content_type);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    for taken in [
        "application/json",
        "application/a2a+json",
        "application/json; charset=utf-8",
        "Application/A2A+JSON ; charset=UTF-8",
    ] {
        assert_eq!(post(&[taken]).await, (204, String::new()), "{taken}");
    }
    let refused: [&[&str]; 6] = [
        &["text/plain"],
        &["application/x-www-form-urlencoded"],
        &["application/jsonl"],
        &["application/problem+json"],
        &[],
        &["application/json", "application/json"],
    ];
    for types in refused {
        let (status, body) = post(types).await;
        assert_eq!(status, 415, "{types:?}: {body}");
        assert!(body.contains("application/a2a+json"), "{types:?}: {body}");
    }
    assert_eq!(gateway.outbox.taken().len(), 4, "only the JSON posts");
    let metrics = metrics_text(&gateway.origin).await;
    for (outcome, n) in [("accepted", 4), ("unsupported_type", 6)] {
        let line = format!(
            "a2a_gateway_push_callbacks_total{{route=\"default\",outcome=\"{outcome}\"}} {n}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
}

/// A message's config is sealed before the agent names its task, so its token is bound to
/// the message's context: the one the client gave, or a fresh one the relay gives a message
/// that names none. Events of that context are taken; an event of another task in another
/// context, or naming no context, gets 403, is counted and never reaches delivery.
#[tokio::test]
async fn a_message_configs_token_takes_only_the_events_of_its_conversation() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;
    let callback = gateway.callback.as_str();
    let sent = |context: Option<&str>| {
        let mut params = message_params("report");
        if let Some(context) = context {
            params["message"]["contextId"] = json!(context);
        }
        params["configuration"] =
            json!({"taskPushNotificationConfig": {"url": HOOK, "token": "client-token"}});
        let url = gateway.url.clone();
        let agent = &agent;
        async move {
            let sent = call(&url, "SendMessage", params).await;
            assert_eq!(sent["result"]["task"]["id"], "task-new", "{sent}");
            let Request::Unary(UnaryRequest::SendMessage(send)) = agent.last().request else {
                panic!("not a message");
            };
            (send.message.unwrap().context_id, agent_saw(agent).token)
        }
    };
    let of = |task: &str, context: &str| {
        let mut event = status_update(task, TaskState::Working);
        if let Some(stream_response::Payload::StatusUpdate(update)) = &mut event.payload {
            update.context_id = context.to_owned();
        }
        serde_json::to_vec(&event).unwrap()
    };

    // The client names its context: the agent gets it as it is.
    let (context, token) = sent(Some("ctx-client")).await;
    assert_eq!(context, "ctx-client");
    assert_eq!(
        post_event(callback, Some(&token), of("task-new", "ctx-client")).await,
        (204, String::new())
    );
    let (status, body) = post_event(callback, Some(&token), of("task-other", "ctx-other")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not of the conversation"), "{body}");
    // The client names none: the relay gives the message a fresh one, each its own.
    let (minted, token) = sent(None).await;
    assert!(minted.len() >= 22, "{minted}");
    assert_eq!(
        post_event(callback, Some(&token), of("task-new", &minted))
            .await
            .0,
        204
    );
    // (After the post: the agent's config of `task-new` is replaced, and with it the token.)
    assert_ne!(sent(None).await.0, minted);
    for (task, context) in [
        ("task-other", "ctx-other"),
        ("task-other", ""),
        ("task-new", "ctx-client"),
    ] {
        let (status, body) = post_event(callback, Some(&token), of(task, context)).await;
        assert_eq!(status, 403, "{task} in {context:?}: {body}");
    }
    let delivered = gateway.outbox.taken();
    assert_eq!(delivered.len(), 2, "only the conversation's events");
    assert!(delivered
        .iter()
        .all(|d| d.task_id == "task-new" && d.url == HOOK));
    let metrics = metrics_text(&gateway.origin).await;
    for (outcome, n) in [("accepted", 2), ("wrong_task", 4)] {
        let line = format!(
            "a2a_gateway_push_callbacks_total{{route=\"default\",outcome=\"{outcome}\"}} {n}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
}

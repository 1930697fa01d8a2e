//! The reference SDK agent behind the relay (the first check, up to delivery).

use super::*;

/// A gateway relaying the push configs of the agent `peer` (webhooks on loopback allowed),
/// served in-process; its notifications go to `outbox` when given, else to its own
/// delivery. Returns its JSON-RPC URL and its callback.
async fn relaying(peer: &Peer, key: &TempFile, outbox: Option<Arc<Recorded>>) -> (String, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let callback = format!("{origin}{CALLBACK_PATH}");
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
    let mut routes = Routes::new(&settings, None).unwrap();
    if let Some(outbox) = outbox {
        routes = routes.with_outbox("default", outbox);
    }
    let frontend = routes.frontend(&Arc::default()).unwrap();
    let second = std::time::Duration::from_secs(1);
    tokio::spawn(a2a_gateway::server::serve(
        listener,
        frontend,
        std::future::pending(),
        second,
    ));
    (format!("{origin}/a2a/jsonrpc"), callback)
}

/// The first check, up to delivery: the reference SDK agent behind the relay posts
/// a task's events to the callback with the sealed token, and each reaches the outbox bound
/// for the client's webhook with the client's token, in order; the agent never holds the
/// client's URL or token; another replica with the key takes the agent's posts as well.
#[tokio::test]
async fn the_reference_sdk_agent_posts_through_the_relay() {
    let peer = Peer::start();
    let key = key_file();
    let hook = "http://127.0.0.1:9/client-hook";
    let outbox = Arc::new(Recorded::default());
    let (url, callback) = relaying(&peer, &key, Some(outbox.clone())).await;

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

/// One POST a webhook received: its token, `Authorization` and body.
#[derive(Clone, Debug)]
struct Received {
    token: Option<String>,
    authorization: Option<String>,
    body: Value,
}

/// A client's webhook on loopback, recording every POST and answering 200.
async fn webhook() -> (String, Arc<Mutex<Vec<Received>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let kept = received.clone();
    let app = axum::Router::new().route(
        "/client-hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let header = |name: &str| {
                        (headers.get(name)).map(|v| v.to_str().unwrap_or_default().to_owned())
                    };
                    kept.lock().unwrap().push(Received {
                        token: header("x-a2a-notification-token"),
                        authorization: header("authorization"),
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    "ok"
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/client-hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// The first check end to end: the reference SDK agent's notifications for a task
/// reach the client's webhook through the relay and the gateway's delivery, in order, with
/// the client's token and credentials; the agent holds neither the webhook nor the token.
#[tokio::test]
async fn the_sdk_agents_notifications_reach_the_clients_webhook() {
    let peer = Peer::start();
    let key = key_file();
    let (hook, received) = webhook().await;
    let (url, callback) = relaying(&peer, &key, None).await;

    let mut params = message_in("stream", None, None);
    params["configuration"] = json!({"taskPushNotificationConfig": {
        "url": hook, "token": "client-token",
        "authentication": {"scheme": "Bearer", "credentials": "hook-secret"}}});
    let sent = call(&url, "SendMessage", params).await;
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let completed =
        |r: &Received| r.body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED";
    let got = loop {
        let got = received.lock().unwrap().clone();
        if got.iter().any(completed) {
            break got;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "not delivered: {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let kinds: Vec<&str> = (got.iter())
        .map(|r| r.body.as_object().unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(kinds.last(), Some(&"statusUpdate"), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "artifactUpdate").count(),
        3,
        "{kinds:?}"
    );
    // In the order the agent produced them: the three chunks, then the completion.
    let last_chunk = kinds.iter().rposition(|k| *k == "artifactUpdate").unwrap();
    assert!(last_chunk < kinds.len() - 1, "{kinds:?}");
    for r in &got {
        assert_eq!(r.token.as_deref(), Some("client-token"));
        assert_eq!(r.authorization.as_deref(), Some("Bearer hook-secret"));
        let id = (r.body.as_object().unwrap().values().next().unwrap())
            .get("taskId")
            .or_else(|| r.body.get("task").and_then(|t| t.get("id")))
            .and_then(Value::as_str);
        assert_eq!(id, Some(task.as_str()), "{}", r.body);
    }
    // The agent keeps the callback and a sealed token only.
    let kept = rpc(
        &peer.jsonrpc,
        &request(
            json!(1),
            "ListTaskPushNotificationConfigs",
            json!({"taskId": task}),
        ),
    )
    .await;
    assert_eq!(kept["result"]["configs"][0]["url"], callback.as_str());
    let kept = kept.to_string();
    assert!(
        !kept.contains("client-token") && !kept.contains("hook-secret") && !kept.contains(&hook),
        "{kept}"
    );
}

//! What the agent and the client see of a relayed push config: the agent the callback and
//! a sealed token, the client its own values, per route and caller; what is refused at
//! registration and at load.

use super::*;

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

    // What the gateway did not seal for this task and id is not shown: the agent's own
    // config, and the client's token copied to another task or id (a sealed token read
    // back would let its reader post to the client's webhook).
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
    keep_push_config(&store, own);
    keep_push_config(&store, copied("t-1", "copied"));
    keep_push_config(&store, copied("t-2", "cfg-1"));
    let listed = configs_of(&gateway.url, "t-1").await;
    assert_eq!(listed["result"]["configs"], json!([shown]), "{listed}");
    assert!(!listed.to_string().contains(&seen.token), "{listed}");
    let other = call(
        &gateway.url,
        "GetTaskPushNotificationConfig",
        json!({"taskId": "t-2", "id": "cfg-1"}),
    )
    .await;
    assert_eq!(other["error"]["code"], -32001, "{other}");

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
    // What delivery sends as headers must be sendable: a token or credentials with a line
    // break are refused at registration, naming the field.
    let calls_before = agent.calls();
    for (field, value) in [
        ("token", json!("a\r\nX-Injected: 1")),
        (
            "authentication",
            json!({"scheme": "Bearer\r\nX: 1", "credentials": "c"}),
        ),
        (
            "authentication",
            json!({"scheme": "Bearer", "credentials": "c\nX: 1"}),
        ),
    ] {
        let mut config = client_config("t-1");
        config[field] = value;
        let reply = call(&gateway.url, "CreateTaskPushNotificationConfig", config).await;
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{message}");
    }
    assert_eq!(agent.calls(), calls_before, "refused before the agent");
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
    // Asked for the config its id names (`another_caller_cannot_replace…`), then given it.
    assert_eq!(agent.calls(), calls + 2);
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
        calls + 2,
        "the refused config never reached the agent"
    );
    let metrics = metrics_text(&gateway.origin).await;
    // Every config the agent got was relayed; refused: the three with unsendable headers,
    // the loopback one and the two too large.
    // (each relayed one made two agent calls: the question, then the config).
    for (outcome, n) in [("relayed", agent.calls() / 2), ("refused", 6)] {
        let line = format!(
            "a2a_gateway_push_registrations_total{{route=\"default\",outcome=\"{outcome}\"}} {n}\n"
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
    // The token cache's validity: 0 (none) and 10m are taken, a second more is not.
    for ttl in ["0", "10m"] {
        let flags = [&both[..], &["--push-token-cache-ttl", ttl]].concat();
        assert_eq!(load(&flags), "", "{ttl}");
    }
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
        (
            &[&both[..], &["--push-token-cache-ttl", "601s"]].concat()[..],
            "--push-token-cache-ttl must be at most 600s",
        ),
    ] {
        let message = load(flags);
        assert!(message.contains(error), "{flags:?}: {message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }
}

#[tokio::test]
async fn a_token_opens_only_for_its_route_and_caller() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let callers = alice_and_bob();
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
    let (outbox, billing_box) = (Arc::new(Recorded::default()), Arc::new(Recorded::default()));
    let routes = Routes::new(&settings, None)
        .unwrap()
        .with_outbox("orders", outbox.clone())
        .with_outbox("billing", billing_box.clone());
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
    // Another caller, or the same caller on another route, never sees the config, nor
    // its sealed token (with which it could post to Alice's webhook), nor may delete it.
    let list = "ListTaskPushNotificationConfigs";
    let delete = "DeleteTaskPushNotificationConfig";
    for (url, caller) in [(&orders, "bob-key"), (&billing, "alice-key")] {
        let hidden = call_as(url, caller, get, named.clone()).await;
        assert_eq!(hidden["error"]["code"], -32001, "{url} {caller}: {hidden}");
        let listed = call_as(url, caller, list, json!({"taskId": "t-1"})).await;
        let configs = listed["result"]["configs"].as_array().map_or(0, Vec::len);
        assert_eq!(configs, 0, "{url} {caller}: {listed}");
        let deleted = call_as(url, caller, delete, named.clone()).await;
        assert_eq!(
            deleted["error"]["code"], -32001,
            "{url} {caller}: {deleted}"
        );
        for answer in [&hidden, &listed, &deleted] {
            let text = answer.to_string();
            assert!(!text.contains(orders_token.as_str()), "{text}");
            assert!(!text.contains("client-"), "{text}");
        }
    }
    let listed = call_as(&orders, "alice-key", list, json!({"taskId": "t-1"})).await;
    assert_eq!(listed["result"]["configs"][0]["url"], HOOK, "{listed}");

    let callback = format!("{origin}{CALLBACK_PATH}");
    assert_eq!(
        post_event(&callback, Some(&orders_token), event("t-1"))
            .await
            .0,
        204
    );
    let (status, _) = post_event(&callback, Some(&billing_token), event("t-9")).await;
    assert_eq!(status, 204);
    // Each token's notification goes to its own route's delivery only.
    let delivered = outbox.taken();
    assert_eq!(delivered.len(), 1);
    assert_eq!(&*delivered[0].route, "orders");
    let delivered = billing_box.taken();
    assert_eq!(delivered.len(), 1);
    assert_eq!(&*delivered[0].route, "billing");
    assert_eq!(delivered[0].task_id, "t-9");
}

/// A route that does not relay, to an agent a relaying route also reaches, never shows the
/// configs registered through the relay: their sealed tokens would let its callers post
/// notifications to the relay's clients' webhooks. Its own callers' configs it shows.
#[tokio::test]
async fn a_route_that_does_not_relay_never_shows_the_relays_sealed_configs() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let config = TempFile::new(
        "toml",
        &format!(
            "push-callback-url = \"{CALLBACK}\"\npush-key-file = \"{}\"\n\
             [[route]]\nname = \"relayed\"\npath = \"/relayed\"\nbackend = \"{agent_url}\"\n\
             push = \"relay\"\npush-allow = [\"hooks.example\"]\n\
             [[route]]\nname = \"plain\"\npath = \"/plain\"\nbackend = \"{agent_url}\"\n\
             push = \"pass\"\n",
            key.path(),
        ),
    );
    let origin = serve_config(config.path(), "relayed").await;
    let (relayed, plain) = (
        format!("{origin}/relayed/a2a/jsonrpc"),
        format!("{origin}/plain/a2a/jsonrpc"),
    );
    let created = call(
        &relayed,
        "CreateTaskPushNotificationConfig",
        client_config("t-1"),
    )
    .await;
    assert_eq!(created["result"]["url"], HOOK, "{created}");
    let sealed = agent_saw(&agent).token;
    let own = json!({"taskId": "t-2", "id": "cfg-2", "url": HOOK, "token": "plain-token"});
    let created = call(&plain, "CreateTaskPushNotificationConfig", own).await;
    assert_eq!(created["result"]["token"], "plain-token", "{created}");

    let get = json!({"taskId": "t-1", "id": "cfg-1"});
    let hidden = call(&plain, "GetTaskPushNotificationConfig", get).await;
    assert_eq!(hidden["error"]["code"], -32001, "{hidden}");
    let listed = configs_of(&plain, "t-1").await;
    assert_eq!(
        listed["result"]["configs"].as_array().map_or(0, Vec::len),
        0,
        "{listed}"
    );
    for answer in [&hidden, &listed] {
        assert!(!answer.to_string().contains(sealed.as_str()), "{answer}");
    }
    // The plain route's own config, unsealed, is shown as the agent holds it.
    let listed = configs_of(&plain, "t-2").await;
    assert_eq!(
        listed["result"]["configs"][0]["token"], "plain-token",
        "{listed}"
    );
    // Nor may it replace or delete one: the agent is asked first.
    let mut replacing = client_config("t-1");
    replacing["token"] = json!("plain-token");
    let refused = call(&plain, "CreateTaskPushNotificationConfig", replacing).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let deleting = json!({"taskId": "t-1", "id": "cfg-1"});
    let refused = call(&plain, "DeleteTaskPushNotificationConfig", deleting).await;
    assert_eq!(refused["error"]["code"], -32001, "{refused}");
    // The relaying route shows its caller the config as registered.
    let listed = configs_of(&relayed, "t-1").await;
    assert_eq!(
        listed["result"]["configs"][0]["token"], "client-token",
        "{listed}"
    );
}

/// Another caller cannot replace a caller's config on a relaying route: a Create, or a
/// message continuing the task, whose config has the id of another caller's (given, or the
/// task's id the agent names a config given none after) is refused after asking the agent,
/// before it could replace it. The first caller's webhook keeps its events; she may update
/// her own config.
#[tokio::test]
async fn another_caller_cannot_replace_a_callers_config() {
    let (agent, store, agent_url) = started_agent().await;
    let key = key_file();
    let callers = alice_and_bob();
    let config = TempFile::new(
        "toml",
        &format!(
            "push-callback-url = \"{CALLBACK}\"\npush-key-file = \"{}\"\n\
             [auth.api-keys]\nfile = \"{}\"\n\
             [[route]]\nname = \"orders\"\npath = \"/orders\"\nbackend = \"{agent_url}\"\n\
             push = \"relay\"\npush-allow = [\"hooks.example\"]\n",
            key.path(),
            callers.path(),
        ),
    );
    let origin = serve_config(config.path(), "orders").await;
    let orders = format!("{origin}/orders/a2a/jsonrpc");
    let create = "CreateTaskPushNotificationConfig";
    let config = |id: Option<&str>, token: &str| {
        let mut config = json!({"taskId": "t-1", "url": HOOK, "token": token});
        if let Some(id) = id {
            config["id"] = json!(id);
        }
        config
    };

    let alices = call_as(&orders, "alice-key", create, config(None, "alice-token")).await;
    assert_eq!(alices["result"]["id"], "t-1", "{alices}");
    let mut continued = message_params("more");
    continued["message"]["taskId"] = json!("t-1");
    continued["configuration"] =
        json!({"taskPushNotificationConfig": {"url": HOOK, "token": "bob-token"}});
    for (method, params) in [
        (create, config(None, "bob-token")),
        (create, config(Some("t-1"), "bob-token")),
        ("SendMessage", continued),
    ] {
        let calls = agent.calls();
        let refused = call_as(&orders, "bob-key", method, params).await;
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
        assert_eq!(
            agent.calls(),
            calls + 1,
            "{method}: only asked, not given one"
        );
    }
    let bobs = call_as(
        &orders,
        "bob-key",
        create,
        config(Some("bob-1"), "bob-token"),
    )
    .await;
    assert_eq!(bobs["result"]["id"], "bob-1", "{bobs}");
    assert_eq!(store.lock().unwrap().len(), 2);

    // Alice's config is as she registered it; she may update it herself.
    let get = json!({"taskId": "t-1", "id": "t-1"});
    let shown = call_as(&orders, "alice-key", "GetTaskPushNotificationConfig", get).await;
    assert_eq!(shown["result"]["token"], "alice-token", "{shown}");
    let updated = call_as(&orders, "alice-key", create, config(None, "alice-2")).await;
    assert_eq!(updated["result"]["token"], "alice-2", "{updated}");
}

/// An API-key file of two callers: `alice` (key `alice-key`) and `bob` (`bob-key`).
fn alice_and_bob() -> TempFile {
    let keys = format!(
        "alice {}\nbob {}\n",
        key_digest_hex(b"alice-key"),
        key_digest_hex(b"bob-key")
    );
    TempFile::new("keys", &keys)
}

/// What `route` lists of `task`'s push configs.
async fn configs_of(route: &str, task: &str) -> Value {
    let params = json!({"taskId": task});
    call(route, "ListTaskPushNotificationConfigs", params).await
}

/// Serves the routes of the configuration file at `path`, `relay`'s deliveries recorded
/// instead of sent; returns the origin.
async fn serve_config(path: &str, relay: &str) -> String {
    let settings = Settings::load(["a2a-gateway", "--config", path]).unwrap();
    let routes = Routes::new(&settings, None)
        .unwrap()
        .with_outbox(relay, Arc::new(Recorded::default()));
    serve_frontend(routes.frontend(&Arc::default()).unwrap()).await
}

//! A token delivers only while the agent holds the config carrying it: the callback asks
//! the agent for the task's configs (once per `push-token-cache-ttl`), refuses a token no
//! longer held (401) and never delivers when the agent cannot say (503).

use super::*;

use std::time::Duration;

/// The callbacks counted under `outcome` at `origin`'s /metrics line.
fn counted(outcome: &str, n: u32) -> String {
    format!("a2a_gateway_push_callbacks_total{{route=\"default\",outcome=\"{outcome}\"}} {n}\n")
}

/// Whether the agent's last call was a List of `task`'s push configs.
fn listed(agent: &TestBackend, task: &str) -> bool {
    matches!(agent.last().request,
        Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list)) if list.task_id == task)
}

/// An agent keeping push configs whose List of a task `slow` picks answers after 30 s,
/// of any other task fails (unavailable), and its URL.
async fn agent_slow_to_list(
    slow: impl Fn(&str) -> bool + Send + Sync + 'static,
) -> (TestBackend, String) {
    let store = PushStore::default();
    let agent = TestBackend::new(move |request| match request {
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(c)) => Answer::Reply(
            Reply::CreateTaskPushNotificationConfig(keep_push_config(&store, c.clone())),
        ),
        Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(_)) => {
            Answer::Error(Status::not_found("no such config"))
        }
        Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list))
            if slow(&list.task_id) =>
        {
            let listed = Reply::ListTaskPushNotificationConfigs(Default::default());
            Answer::After(Duration::from_secs(30), Box::new(Answer::Reply(listed)))
        }
        _ => Answer::Error(Status::unavailable("overloaded")),
    });
    let url = format!("http://{}", agent.spawn().await);
    (agent, url)
}

#[tokio::test]
async fn a_deleted_configs_token_is_refused_while_a_live_one_delivers() {
    let (agent, store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;
    let deleted = registered(&gateway, &agent, "t-1").await;
    let live = registered(&gateway, &agent, "t-2").await;
    // Delivered, and trusted for 30 s, before the config goes.
    assert_eq!(
        post_event(&gateway.callback, Some(&deleted), event("t-1")).await,
        (204, String::new())
    );
    assert_eq!(gateway.outbox.taken().len(), 1);

    let params = json!({"taskId": "t-1", "id": "cfg-1"});
    let reply = call(&gateway.url, "DeleteTaskPushNotificationConfig", params).await;
    assert!(
        reply["result"].is_null() && reply.get("error").is_none(),
        "{reply}"
    );
    assert_eq!(store.lock().unwrap().len(), 1, "the agent holds t-2's only");

    // This replica forgot it at the Delete: refused at once, nothing delivered.
    let (status, body) = post_event(&gateway.callback, Some(&deleted), event("t-1")).await;
    assert_eq!(
        (status, body.as_str()),
        (
            401,
            "{\"error\":\"the token's push config is no longer held by the agent\"}"
        )
    );
    let (status, _) = post_event(&gateway.callback, Some(&live), event("t-2")).await;
    assert_eq!(status, 204);
    let delivered = gateway.outbox.taken();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].task_id, "t-2");

    // A replica that trusts nothing (ttl 0) stops a token as soon as the agent drops its
    // config itself (the task ended).
    let replica = Gateway::start(&agent_url, &key, &["--push-token-cache-ttl", "0"]).await;
    let (status, _) = post_event(&replica.callback, Some(&live), event("t-2")).await;
    assert_eq!(status, 204);
    store.lock().unwrap().clear();
    let (status, body) = post_event(&replica.callback, Some(&live), event("t-2")).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(replica.outbox.taken().len(), 1, "only the post before");

    let metrics = metrics_text(&gateway.origin).await;
    assert!(metrics.contains(&counted("revoked", 1)), "{metrics}");
    assert!(metrics.contains(&counted("accepted", 2)), "{metrics}");
    let metrics = metrics_text(&replica.origin).await;
    assert!(metrics.contains(&counted("revoked", 1)), "{metrics}");
}

#[tokio::test]
async fn within_the_cache_time_a_token_costs_the_agent_one_lookup() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;
    let token = registered(&gateway, &agent, "t-1").await;

    let before = agent.calls();
    for _ in 0..3 {
        let (status, _) = post_event(&gateway.callback, Some(&token), event("t-1")).await;
        assert_eq!(status, 204);
    }
    assert_eq!(agent.calls(), before + 1, "one lookup for three posts");
    assert!(listed(&agent, "t-1"));
    assert_eq!(gateway.outbox.taken().len(), 3);

    // Past the validity time the agent is asked again, once.
    let short = Gateway::start(&agent_url, &key, &["--push-token-cache-ttl", "200ms"]).await;
    let before = agent.calls();
    let (status, _) = post_event(&short.callback, Some(&token), event("t-1")).await;
    assert_eq!(status, 204);
    assert_eq!(agent.calls(), before + 1);
    // Whatever the load, 300 ms on the entry is expired.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = post_event(&short.callback, Some(&token), event("t-1")).await;
    assert_eq!(status, 204);
    assert_eq!(agent.calls(), before + 2);
    assert!(listed(&agent, "t-1"));
}

#[tokio::test]
async fn an_agent_that_cannot_be_asked_gets_503_and_nothing_is_delivered() {
    // Fails every List: unavailable, or (task `t-slow`) too late.
    let (agent, agent_url) = agent_slow_to_list(|task| task == "t-slow").await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &["--timeout", "1s"]).await;
    let token = registered(&gateway, &agent, "t-1").await;
    let slow = registered(&gateway, &agent, "t-slow").await;

    for (token, task) in [(&token, "t-1"), (&slow, "t-slow")] {
        let response = post_response(&gateway.callback, Some(token), event(task)).await;
        assert_eq!(response.status(), 503, "{task}");
        assert_eq!(response.headers()["retry-after"], "5", "{task}");
        let body = response.text().await.unwrap();
        assert!(body.contains("could not be asked"), "{task}: {body}");
        assert!(listed(&agent, task));
    }
    assert!(gateway.outbox.taken().is_empty());
    let metrics = metrics_text(&gateway.origin).await;
    assert!(metrics.contains(&counted("unverified", 2)), "{metrics}");
}

/// Posts waiting for the agent's answer are bounded (per route and serving thread): at the
/// bound every one is asked about, one more is told at once to retry and asks nothing.
#[tokio::test]
async fn lookups_in_flight_are_bounded() {
    const MAX_LOOKUPS: usize = 32;
    // Answers every List after 30 s.
    let (agent, agent_url) = agent_slow_to_list(|_| true).await;
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &[]).await;
    let token = registered(&gateway, &agent, "t-1").await;
    let before = agent.calls();

    let waiting: Vec<_> = (0..MAX_LOOKUPS)
        .map(|_| {
            let (callback, token) = (gateway.callback.clone(), token.clone());
            tokio::spawn(async move { post_event(&callback, Some(&token), event("t-1")).await })
        })
        .collect();
    let asked = async {
        while agent.calls() < before + MAX_LOOKUPS {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .expect("every post at the bound asks the agent");

    let response = post_response(&gateway.callback, Some(&token), event("t-1")).await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    let body = response.text().await.unwrap();
    assert!(body.contains("too many notifications"), "{body}");
    assert_eq!(
        agent.calls(),
        before + MAX_LOOKUPS,
        "the one past asks nothing"
    );
    assert!(waiting.iter().all(|post| !post.is_finished()));
    assert!(gateway.outbox.taken().is_empty());
    let metrics = metrics_text(&gateway.origin).await;
    assert!(metrics.contains(&counted("unverified", 1)), "{metrics}");
    waiting.iter().for_each(|post| post.abort());
}

#[tokio::test]
async fn the_lookup_reads_a_bounded_number_of_pages() {
    // Lists a task's configs a page of strangers' at a time, endlessly; the held one on
    // the page `t-<n>` names (counted from 0), 100th on it (`t-<n>-late`: 101st).
    let pages = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let store = PushStore::default();
    let (kept, seen) = (store.clone(), pages.clone());
    let agent = TestBackend::new(move |request| match request {
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(c)) => Answer::Reply(
            Reply::CreateTaskPushNotificationConfig(keep_push_config(&kept, c.clone())),
        ),
        Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(_)) => {
            Answer::Error(Status::not_found("no such config"))
        }
        Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list)) => {
            let page: usize = list.page_token.parse().unwrap_or(0);
            seen.fetch_add(1, Ordering::SeqCst);
            let named = list.task_id.trim_start_matches("t-");
            let (named, late) = match named.strip_suffix("-late") {
                Some(named) => (named, true),
                None => (named, false),
            };
            let held_on: usize = named.parse().unwrap();
            let stranger = TaskPushNotificationConfig {
                task_id: list.task_id.clone(),
                id: format!("other-{page}"),
                url: CALLBACK.into(),
                token: format!("token-{page}"),
                ..Default::default()
            };
            // At the bound of a page: the held config is its 100th (`-late`: its 101st).
            let mut configs = vec![stranger; if late { 100 } else { 99 }];
            if page == held_on {
                configs.extend(kept.lock().unwrap().clone());
            }
            Answer::Reply(Reply::ListTaskPushNotificationConfigs(
                ListTaskPushNotificationConfigsResponse {
                    configs,
                    next_page_token: (page + 1).to_string(),
                },
            ))
        }
        other => Answer::Error(Status::unimplemented(format!("{other:?}"))),
    });
    let agent_url = format!("http://{}", agent.spawn().await);
    let key = key_file();
    let gateway = Gateway::start(&agent_url, &key, &["--push-token-cache-ttl", "0"]).await;
    // Held on the fourth page (the last one read, `page_size` 100 each): delivered. Held
    // on the fifth, or 101st on the fourth: never seen, refused; four pages asked each time.
    for (task, status) in [("t-3", 204), ("t-4", 401), ("t-3-late", 401)] {
        store.lock().unwrap().clear();
        let token = registered(&gateway, &agent, task).await;
        pages.store(0, Ordering::SeqCst);
        let (answered, body) = post_event(&gateway.callback, Some(&token), event(task)).await;
        assert_eq!(answered, status, "{task}: {body}");
        let asked = pages.load(Ordering::SeqCst);
        assert_eq!(asked, 4, "{task}");
        let last = agent.last().request;
        let Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list)) = last else {
            panic!("{task}: the last call is not a List");
        };
        assert_eq!(
            (list.page_size, list.page_token.as_str()),
            (100, "3"),
            "{task}"
        );
    }
}

/// The lookup asks as the route's calls do: under the config's tenant, with the route's
/// `set-header` values (an agent may require them), and nothing of the post's headers.
#[tokio::test]
async fn the_lookup_names_the_tenant_and_carries_the_routes_set_headers() {
    let (agent, _store, agent_url) = started_agent().await;
    let key = key_file();
    let flags = ["--set-header", "x-agent-key=route-secret"];
    let gateway = Gateway::start(&agent_url, &key, &flags).await;
    for tenant in ["acme", ""] {
        let mut config = client_config("t-1");
        config["tenant"] = json!(tenant);
        let created = call(&gateway.url, "CreateTaskPushNotificationConfig", config).await;
        assert!(created["result"].is_object(), "{created}");
        let token = agent_saw(&agent).token;
        let (status, _) = post_event(&gateway.callback, Some(&token), event("t-1")).await;
        assert_eq!(status, 204, "{tenant:?}");
        let Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list)) =
            agent.last().request
        else {
            panic!("{tenant:?}: the last call is not a List");
        };
        assert_eq!(list.tenant, tenant);
        let metadata = agent.last().metadata;
        assert_eq!(metadata.get("x-agent-key").unwrap(), "route-secret");
        assert!(metadata.get("traceparent").is_none(), "the post's");
        assert!(metadata.get("x-a2a-notification-token").is_none());
    }
}

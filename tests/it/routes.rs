//! Many agents behind one gateway process: routes from a config file, each leading to its
//! own backend (gRPC or HTTP+JSON), selected by path prefix or `Host`; a route's fixed
//! tenant; 404 and 405 with JSON bodies; `check-config`.

use crate::harness;
use crate::harness::rest_mock;

use std::process::{Command, Stdio};

use a2a_gateway::proto::TaskState;
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use harness::process::*;
use harness::*;
use serde_json::{json, Value};

/// A gRPC backend whose GetTask answers a task whose id names the backend, the tenant it
/// was sent and the requested id.
async fn naming_backend(name: &'static str) -> (TestBackend, String) {
    let backend = TestBackend::new(move |request| match request {
        Request::Unary(UnaryRequest::GetTask(get)) => {
            let id = format!("{name}:{}:{}", get.tenant, get.id);
            Answer::Reply(Reply::GetTask(task(&id, TaskState::Completed)))
        }
        _ => Answer::Error(tonic::Status::unimplemented("GetTask only")),
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

fn get_task(params: Value) -> String {
    request(json!(1), "GetTask", params)
}

#[tokio::test]
async fn each_route_leads_to_its_own_agent() {
    let (grpc, grpc_url) = naming_backend("grpc").await;
    let (hosted, hosted_url) = naming_backend("hosted").await;
    let rest = rest_mock::MockAgent::start(|recorded| {
        let task = json!({"id": format!("rest:{}", recorded.path), "contextId": "c",
                          "status": {"state": "TASK_STATE_COMPLETED"}});
        rest_mock::answer(200, "application/a2a+json", task.to_string())
    })
    .await;
    let config = TempFile::new(
        "toml",
        &format!(
            r#"
        timeout = "5s"

        [[route]]
        name = "grpc"
        path = "/agents/grpc"
        backend = "{grpc_url}"

        [[route]]
        name = "acme"
        path = "/agents/acme"
        backend = "{grpc_url}"
        tenant = "acme"

        [[route]]
        name = "rest"
        path = "/agents/rest"
        backend = "{rest}"
        binding = "HTTP+JSON"

        [[route]]
        name = "hosted"
        host = "billing.example"
        path = "/"
        backend = "{hosted_url}"
        "#,
            rest = rest.url
        ),
    );
    let gateway = start(&["--config", config.path()]).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let id = |reply: &Value| {
        reply["result"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let reply = rpc(
        &format!("{origin}/agents/grpc/a2a/jsonrpc"),
        &get_task(json!({"id": "t1"})),
    )
    .await;
    assert_eq!(id(&reply), "grpc::t1", "{reply}");
    let reply = rpc(
        &format!("{origin}/agents/rest/a2a/jsonrpc"),
        &get_task(json!({"id": "t2"})),
    )
    .await;
    assert_eq!(id(&reply), "rest:/tasks/t2", "{reply}");

    // The fixed tenant: injected when absent, accepted when equal, refused when another.
    let acme = format!("{origin}/agents/acme/a2a/jsonrpc");
    let reply = rpc(&acme, &get_task(json!({"id": "t3"}))).await;
    assert_eq!(id(&reply), "grpc:acme:t3", "{reply}");
    let reply = rpc(&acme, &get_task(json!({"id": "t4", "tenant": "acme"}))).await;
    assert_eq!(id(&reply), "grpc:acme:t4", "{reply}");
    let calls = grpc.calls();
    let reply = rpc(&acme, &get_task(json!({"id": "t5", "tenant": "globex"}))).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("tenant") && message.contains("acme"),
        "{message}"
    );
    assert_eq!(
        grpc.calls(),
        calls,
        "a refused tenant never reaches the agent"
    );

    // By host: the same path on another host is no route at all.
    let hosted_call = |host: &'static str| {
        client()
            .post(format!("{origin}/a2a/jsonrpc"))
            .header("host", host)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(get_task(json!({"id": "t6"})))
            .send()
    };
    let response = hosted_call("Billing.Example:8080").await.unwrap();
    let reply: Value = response.json().await.unwrap();
    assert_eq!(id(&reply), "hosted::t6", "{reply}");
    assert_eq!(hosted.calls(), 1);
    // A fully qualified name's trailing dot names the same host.
    let response = hosted_call("billing.example.:8080").await.unwrap();
    let reply: Value = response.json().await.unwrap();
    assert_eq!(id(&reply), "hosted::t6", "{reply}");
    assert_eq!(hosted.calls(), 2);
    let response = hosted_call("other.example").await.unwrap();
    assert_eq!(response.status(), 404);

    // Nothing else is served: a JSON 404, and 405 naming the method a path takes.
    for path in [
        "/agents",
        "/agents/grpcx/a2a/jsonrpc",
        "/agents/grpc/other",
        "/a2a/jsonrpc",
    ] {
        let response = client()
            .post(format!("{origin}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].is_string(), "{path}: {body}");
    }
    let response = client()
        .get(format!("{origin}/agents/grpc/a2a/jsonrpc"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "POST");
    let response = client()
        .post(format!("{origin}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "GET, HEAD");
    let response = client()
        .head(format!("{origin}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[test]
fn check_config_validates_without_serving() {
    let good = TempFile::new(
        "toml",
        r#"
        [[route]]
        name = "billing"
        path = "/agents/billing"
        backend = "http://billing.agents.svc:50051"
        "#,
    );
    let out = Command::new(BIN)
        .args(["check-config", good.path()])
        .stderr(Stdio::piped())
        .output_within(EXITS_WITHIN);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("ok, 1 route(s)"), "{stdout}");
    assert!(
        stdout.contains("billing: */agents/billing/a2a/jsonrpc"),
        "{stdout}"
    );

    let bad = TempFile::new(
        "toml",
        "[[route]]\nname = \"billing\"\npath = \"/b\"\nbackend = \"http://b:1\"\ntimeot = \"1s\"\n",
    );
    let missing = format!("{}.absent", bad.path());
    // A route's empty list would take the top level's: `[]` cannot say "none here".
    let empty = TempFile::new(
        "toml",
        "push-allow = [\"10.0.0.0/8\"]\n[[route]]\nname = \"billing\"\npath = \"/b\"\n\
         backend = \"http://b:1\"\npush-allow = []\n",
    );
    for (file, expected) in [
        (bad.path(), "line 5: key `route[0].timeot`"),
        (&missing, "No such file"),
        (
            empty.path(),
            "line 6: key `route[0].push-allow`: an empty list in a route means the top level's",
        ),
    ] {
        let out = Command::new(BIN)
            .args(["check-config", file])
            .output_within(EXITS_WITHIN);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}

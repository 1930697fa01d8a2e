//! Reload without restart (`route::reload`): a changed config file, or SIGHUP, adds, alters
//! and removes routes while calls and streams go on, a broken file changes nothing, and a
//! rotated CA bundle is taken up; all observed on the wire of a running gateway process.

use crate::harness;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::proto::TaskState;
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use harness::process::*;
use harness::tls_pki;
use harness::*;
use serde_json::{json, Value};

/// A gRPC backend whose GetTask answers a task id naming the backend, the tenant and the
/// id, and whose streams send one event and stay open.
async fn naming_backend(name: &'static str) -> (TestBackend, String) {
    let backend = TestBackend::new(move |request| match request {
        Request::Unary(UnaryRequest::GetTask(get)) => {
            let id = format!("{name}:{}:{}", get.tenant, get.id);
            Answer::Reply(Reply::GetTask(task(&id, TaskState::Completed)))
        }
        Request::Stream(StreamRequest::SendStreamingMessage(_)) => Answer::Stream(vec![
            Step::Event(status_update("streaming", TaskState::Working)),
            Step::Hang,
        ]),
        _ => Answer::Error(tonic::Status::unimplemented("GetTask only")),
    });
    let addr = backend.spawn().await;
    (backend, format!("http://{addr}"))
}

/// The task id a GetTask through `url` answers, or the JSON-RPC error's code.
async fn task_id(url: &str, id: &str) -> Result<String, Value> {
    let reply = rpc(url, &request(json!(1), "GetTask", json!({"id": id}))).await;
    match reply["result"]["id"].as_str() {
        Some(task) => Ok(task.to_owned()),
        None => Err(reply),
    }
}

/// The count of `a2a_gateway_config_reloads_total{outcome}`.
async fn reloads(origin: &str, outcome: &str) -> u64 {
    let text = metrics_text(origin).await;
    let series = format!("a2a_gateway_config_reloads_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no {series}in {text}"))
}

/// Waits until `outcome` has been counted `count` times; the poll is every 2 s, the load
/// a few milliseconds, so 30 s is only reached when the reload never comes.
async fn await_reloads(origin: &str, outcome: &str, count: u64) {
    let started = Instant::now();
    while reloads(origin, outcome).await < count {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no {outcome} reload"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes `text` as a new file and renames it over `path`, as a ConfigMap's update
/// swaps a symlink: the watcher sees old or new bytes, never half of them.
fn replace(path: &str, text: &str) {
    let next = format!("{path}.next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

fn config(routes: &[(&str, &str, &str)]) -> String {
    let mut text = String::from("timeout = \"5s\"\n");
    for (name, backend, tenant) in routes {
        text.push_str(&format!(
            "[[route]]\nname = \"{name}\"\npath = \"/agents/{name}\"\nbackend = \"{backend}\"\n"
        ));
        if !tenant.is_empty() {
            text.push_str(&format!("tenant = \"{tenant}\"\n"));
        }
    }
    text
}

#[tokio::test]
async fn a_changed_file_adds_alters_and_removes_routes_while_calls_and_streams_go_on() {
    let (_one, one) = naming_backend("one").await;
    let (_two, two) = naming_backend("two").await;
    let file = TempFile::new(
        "toml",
        &config(&[
            ("kept", &one, ""),
            ("altered", &one, "t1"),
            ("gone", &one, ""),
        ]),
    );
    let gateway = start(&["--config", file.path()]).await;
    let origin = gateway.origin().to_owned();
    let url = |route: &str| format!("{origin}/agents/{route}/a2a/jsonrpc");
    assert_eq!(task_id(&url("altered"), "x").await.unwrap(), "one:t1:x");
    assert_eq!(reloads(&origin, "applied").await, 0);

    // Calls on the kept route, without a pause, on kept-alive connections, for as long as
    // the reloads take; and a stream opened before them.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load = {
        let (stop, done, failed, kept) = (stop.clone(), done.clone(), failed.clone(), url("kept"));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match task_id(&kept, "k").await {
                    Ok(id) if id == "one::k" => done.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        })
    };
    let body = request(json!(2), "SendStreamingMessage", message_params("hi"));
    let (_, mut stream) = SseReader::open(&url("kept"), body).await;
    assert!(stream.data().await.is_some(), "the stream's first event");

    // Added, altered (another agent, another tenant) and removed, in one change.
    replace(
        file.path(),
        &config(&[
            ("kept", &one, ""),
            ("altered", &two, "t2"),
            ("added", &two, ""),
        ]),
    );
    await_reloads(&origin, "applied", 1).await;
    assert_eq!(task_id(&url("altered"), "x").await.unwrap(), "two:t2:x");
    assert_eq!(task_id(&url("added"), "y").await.unwrap(), "two::y");
    let reply = client()
        .post(url("gone"))
        .header("content-type", "application/json")
        .body(request(json!(1), "GetTask", json!({"id": "z"})))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 404, "a removed route is no route");

    // A broken file changes nothing served; fixing it applies it.
    replace(file.path(), "[[route]]\nname = \"broken\"\npath = 7\n");
    await_reloads(&origin, "refused", 1).await;
    assert_eq!(task_id(&url("added"), "y").await.unwrap(), "two::y");
    replace(
        file.path(),
        &config(&[("kept", &one, ""), ("added", &one, "")]),
    );
    await_reloads(&origin, "applied", 2).await;
    assert_eq!(task_id(&url("added"), "y").await.unwrap(), "one::y");

    // The stream opened before both reloads is still open: a cut one ends at once.
    let next = tokio::time::timeout(Duration::from_millis(500), stream.frame()).await;
    assert!(next.is_err(), "the stream ended: {next:?}");
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert!(done > 10, "{done} calls during the reloads");
    assert_eq!(failed, 0, "{failed} of {} calls failed", done + failed);
}

#[tokio::test]
async fn sighup_reloads_when_the_file_watch_is_off() {
    let (_one, one) = naming_backend("one").await;
    let (_two, two) = naming_backend("two").await;
    let file = TempFile::new("toml", &config(&[("r", &one, "")]));
    let gateway = start(&["--config", file.path(), "--watch-config=false"]).await;
    let origin = gateway.origin().to_owned();
    let url = format!("{origin}/agents/r/a2a/jsonrpc");
    replace(file.path(), &config(&[("r", &two, "")]));
    // Two polls' worth: the unwatched change is not applied...
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(task_id(&url, "a").await.unwrap(), "one::a");
    assert_eq!(reloads(&origin, "applied").await, 0);
    // ...until SIGHUP.
    let pid = rustix::process::Pid::from_raw(gateway.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    await_reloads(&origin, "applied", 1).await;
    assert_eq!(task_id(&url, "a").await.unwrap(), "two::a");
}

#[tokio::test]
async fn a_rotated_backend_ca_bundle_is_taken_up() {
    let pki = test_pki();
    let backend =
        TestBackend::new(|_| Answer::Reply(Reply::GetTask(task("over-tls", TaskState::Completed))));
    let addr = backend.spawn_tls(&pki.cert_pem, &pki.key_pem).await;
    // A CA that did not sign the backend's certificate: calls fail the handshake.
    let other = tls_pki::Ca::new("another CA");
    let dir = tls_pki::Dir::new("reload-ca");
    let ca = dir.write("ca.pem", &other.pem);
    let file = TempFile::new(
        "toml",
        &format!(
            "timeout = \"5s\"\nbackend = \"https://localhost:{}\"\nbackend-ca = \"{ca}\"\n",
            addr.port()
        ),
    );
    let gateway = start(&["--config", file.path()]).await;
    let origin = gateway.origin().to_owned();
    let url = format!("{origin}/a2a/jsonrpc");
    let refused = task_id(&url, "t").await.unwrap_err();
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    // cert-manager rotates the bundle in place: the right CA now.
    replace(&ca, &pki.ca_pem);
    await_reloads(&origin, "applied", 1).await;
    assert_eq!(task_id(&url, "t").await.unwrap(), "over-tls");
}

/// A reload holds for the gRPC front too, on `--grpc-listen` and on a connection opened
/// before it: its calls go through the same per-worker routes. A `grpc-listen` that the
/// new file changes takes effect at a restart only: the socket stays, and so does the port
/// the card names.
#[tokio::test]
async fn a_reload_applies_to_grpc_front_calls() {
    use a2a_gateway::proto::a2a_service_client::A2aServiceClient;
    let (_one, one) = naming_backend("one").await;
    let (_two, two) = naming_backend("two").await;
    let grpc_listen = free_listen_address();
    let card = json!({
        "name": "r", "description": "d", "version": "1.0.0",
        "supportedInterfaces": [
            {"url": "http://10.0.0.7:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": []
    });
    let card = TempFile::new("json", &card.to_string());
    let text_on = |backend: &str, listen: &str| {
        format!(
            "grpc-listen = \"{listen}\"\n{}fronts = [\"JSONRPC\", \"GRPC\"]\n\
             [route.card]\nsource = \"{}\"\n",
            config(&[("r", backend, "")]),
            card.path()
        )
    };
    let text = |backend: &str| text_on(backend, &grpc_listen);
    let file = TempFile::new("toml", &text(&one));
    let gateway = start(&["--config", file.path()]).await;
    let origin = gateway.origin().to_owned();
    let mut grpc = A2aServiceClient::connect(format!("http://{grpc_listen}"))
        .await
        .unwrap();
    let get = || a2a_gateway::proto::GetTaskRequest {
        id: "a".to_owned(),
        ..Default::default()
    };
    assert_eq!(
        grpc.get_task(get()).await.unwrap().into_inner().id,
        "one::a"
    );
    replace(file.path(), &text(&two));
    await_reloads(&origin, "applied", 1).await;
    assert_eq!(
        grpc.get_task(get()).await.unwrap().into_inner().id,
        "two::a"
    );

    let grpc_port = |card: Value| {
        let interfaces = card["supportedInterfaces"].as_array().unwrap().clone();
        let grpc = interfaces.iter().find(|i| i["protocolBinding"] == "GRPC");
        let url = grpc.unwrap_or_else(|| panic!("{card}"))["url"]
            .as_str()
            .unwrap()
            .to_owned();
        url.rsplit(':').next().unwrap().to_owned()
    };
    let card_url = format!("{origin}/agents/r/.well-known/agent-card.json");
    let port = grpc_listen.rsplit(':').next().unwrap();
    let served = || async {
        reqwest::get(&card_url)
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    assert_eq!(grpc_port(served().await), port);
    replace(file.path(), &text_on(&one, &free_listen_address()));
    await_reloads(&origin, "applied", 2).await;
    assert_eq!(
        grpc_port(served().await),
        port,
        "the card names the socket's port"
    );
    assert_eq!(
        grpc.get_task(get()).await.unwrap().into_inner().id,
        "one::a"
    );
}

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

/// A gRPC agent over TLS whose server certificate and trusted client CAs the test changes
/// while it serves (`serve`): each handshake takes the configuration of its accept, and
/// the client certificate of each accepted handshake is recorded. Open connections keep
/// the session they made.
struct RotatingAgent {
    config: Arc<std::sync::Mutex<Arc<rustls::ServerConfig>>>,
    /// The client certificate (DER) of each accepted handshake, in order.
    presented: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    addr: std::net::SocketAddr,
}

impl RotatingAgent {
    /// Serves `backend` presenting `server` and accepting clients of `clients`.
    async fn start(
        backend: &TestBackend,
        server: &tls_pki::Leaf,
        clients: &[&tls_pki::Ca],
    ) -> Self {
        use a2a_gateway::proto::a2a_service_server::A2aServiceServer;
        let config = Arc::new(std::sync::Mutex::new(agent_config(server, clients)));
        let presented = Arc::new(std::sync::Mutex::new(Vec::new()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (sessions, incoming) = tokio::sync::mpsc::channel(16);
        let (accepting, recording) = (config.clone(), presented.clone());
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let config = accepting.lock().unwrap().clone();
                let (sessions, recording) = (sessions.clone(), recording.clone());
                tokio::spawn(async move {
                    let acceptor = tokio_rustls::TlsAcceptor::from(config);
                    // A refused client certificate ends here: rustls sent the alert.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if let Some(chain) = tls.get_ref().1.peer_certificates() {
                        recording.lock().unwrap().push(chain[0].to_vec());
                    }
                    let _ = sessions.send(Ok::<_, std::io::Error>(tls)).await;
                });
            }
        });
        let serving = tonic::transport::Server::builder()
            .add_service(A2aServiceServer::new(backend.clone()))
            .serve_with_incoming(tokio_stream::wrappers::ReceiverStream::new(incoming));
        tokio::spawn(serving);
        RotatingAgent {
            config,
            presented,
            addr,
        }
    }

    /// New handshakes get `server` and must present a certificate of `clients`.
    fn rotate(&self, server: &tls_pki::Leaf, clients: &[&tls_pki::Ca]) {
        *self.config.lock().unwrap() = agent_config(server, clients);
    }

    /// How many handshakes were accepted so far.
    fn handshakes(&self) -> usize {
        self.presented.lock().unwrap().len()
    }
}

/// An agent's rustls configuration: `server`'s certificate, ALPN `h2`, client certificates
/// required and verified against `clients`.
fn agent_config(server: &tls_pki::Leaf, clients: &[&tls_pki::Ca]) -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in clients {
        roots
            .add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
            .unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

/// cert-manager's rotation of every certificate at once, under load: the agents' CA bundle
/// (`backend-ca`, the new CA added beside the old), the gateway's client certificate to the
/// agents (`backend-client-cert`/`-key`, replaced) and the listener's client CA bundle
/// (`--tls-client-ca`, the new CA added), while a caller of the old client CA calls without
/// pause over HTTPS and holds a stream open. No call fails, the stream stays open, and
/// what the gateway connects with afterwards is the new material: an agent that then
/// presents a certificate of the new CA only, and accepts only the new client certificate,
/// is reached; a caller of the new client CA is admitted.
#[tokio::test]
async fn a_rotation_of_every_certificate_under_load_fails_no_call_and_cuts_no_stream() {
    use tls_pki::{Ca, Dir};
    let listener_ca = Ca::new("listener CA");
    let (old_callers, new_callers) = (Ca::new("old callers CA"), Ca::new("new callers CA"));
    let (old_caller, new_caller) = (
        old_callers.client("old caller"),
        new_callers.client("new caller"),
    );
    let (old_agents, new_agents) = (Ca::new("old agents CA"), Ca::new("new agents CA"));
    let (old_identities, new_identities) = (Ca::new("old gateway CA"), Ca::new("new gateway CA"));
    let (old_identity, new_identity) = (
        old_identities.client("gateway"),
        new_identities.client("gateway"),
    );

    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(get)) => {
            Answer::Reply(Reply::GetTask(task(&get.id, TaskState::Completed)))
        }
        Request::Stream(StreamRequest::SendStreamingMessage(_)) => Answer::Stream(vec![
            Step::Event(status_update("streaming", TaskState::Working)),
            Step::Hang,
        ]),
        _ => Answer::Error(tonic::Status::unimplemented("GetTask and streams only")),
    });
    let agent = RotatingAgent::start(
        &backend,
        &old_agents.server("agent", 1),
        &[&old_identities, &new_identities],
    )
    .await;

    let dir = Dir::new("reload-rotation");
    let serving = listener_ca.server("gateway", 1);
    let agents_ca = dir.write("agents-ca.pem", &old_agents.pem);
    let client_cert = dir.write("client.crt", &old_identity.cert_pem);
    let client_key = dir.write("client.key", &old_identity.key_pem);
    let callers_ca = dir.write("callers-ca.pem", &old_callers.pem);
    let route = |name: &str| {
        format!(
            "[[route]]\nname = \"{name}\"\npath = \"/agents/{name}\"\nbackend = \"https://localhost:{}\"\n",
            agent.addr.port()
        )
    };
    let file = TempFile::new(
        "toml",
        &format!(
            "timeout = \"5s\"\nbackend-ca = \"{agents_ca}\"\nbackend-client-cert = \"{client_cert}\"\nbackend-client-key = \"{client_key}\"\n{}{}",
            route("load"),
            route("fresh")
        ),
    );
    let (listen, admin) = (free_listen_address(), free_listen_address());
    let args = [
        "--config",
        file.path(),
        // SIGHUP applies every rotated file at once: a file watch could take them in two
        // reloads, in either order.
        "--watch-config=false",
        "--admin-listen",
        &admin,
        "--tls-cert",
        &dir.write("tls.crt", &serving.cert_pem),
        "--tls-key",
        &dir.write("tls.key", &serving.key_pem),
        "--tls-client-ca",
        &callers_ca,
    ];
    let gateway = spawn(&args, &listen, &[], std::process::Stdio::null());
    await_serving(&admin).await;
    let admin = format!("http://{admin}");
    let url = |route: &str| format!("https://{listen}/agents/{route}/a2a/jsonrpc");
    let caller = |identity: &tls_pki::Leaf| {
        let root = reqwest::Certificate::from_pem(listener_ca.pem.as_bytes()).unwrap();
        let pem = format!("{}{}", identity.cert_pem, identity.key_pem);
        reqwest::Client::builder()
            .add_root_certificate(root)
            .identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap())
            .build()
            .unwrap()
    };
    let get_task = |client: reqwest::Client, url: String, id: &'static str| async move {
        let body = request(json!(1), "GetTask", json!({ "id": id }));
        let sent = client
            .post(url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        let reply: Value = sent.json().await.map_err(|e| e.to_string())?;
        match reply["result"]["id"].as_str() {
            Some(id) => Ok(id.to_owned()),
            None => Err(reply.to_string()),
        }
    };
    let old = caller(&old_caller);
    assert_eq!(get_task(old.clone(), url("load"), "k").await.unwrap(), "k");
    let refused = get_task(caller(&new_caller), url("load"), "n").await;
    assert!(
        refused.unwrap_err().contains("UnknownCA"),
        "a caller of the new CA, before"
    );

    // Calls without a pause on kept-alive connections, and a stream, from the old caller.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
    let load = {
        let (stop, done, failed, failures) =
            (stop.clone(), done.clone(), failed.clone(), failures.clone());
        let (client, load) = (old.clone(), url("load"));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match get_task(client.clone(), load.clone(), "k").await {
                    Ok(id) if id == "k" => done.fetch_add(1, Ordering::Relaxed),
                    other => {
                        failures.lock().unwrap().push(format!("{other:?}"));
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        })
    };
    let body = request(json!(2), "SendStreamingMessage", message_params("hi"));
    let (_, mut stream) = SseReader::open_with(&old, &url("load"), body).await;
    assert!(stream.data().await.is_some(), "the stream's first event");
    let before = done.load(Ordering::Relaxed);

    // Rotated in place, as a Secret volume is; then applied at once.
    dir.write(
        "agents-ca.pem",
        &format!("{}{}", old_agents.pem, new_agents.pem),
    );
    dir.write("client.crt", &new_identity.cert_pem);
    dir.write("client.key", &new_identity.key_pem);
    dir.write(
        "callers-ca.pem",
        &format!("{}{}", old_callers.pem, new_callers.pem),
    );
    let pid = rustix::process::Pid::from_raw(gateway.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    await_reloads(&admin, "applied", 1).await;

    // The agent now presents a certificate of the new CA only and admits the new client
    // certificate only: the route no call has used yet connects now, with the new material.
    let handshakes = agent.handshakes();
    agent.rotate(&new_agents.server("agent", 2), &[&new_identities]);
    assert_eq!(get_task(old.clone(), url("fresh"), "f").await.unwrap(), "f");
    let presented = agent.presented.lock().unwrap()[handshakes..].to_vec();
    let new_der = new_identity.der.clone();
    assert!(!presented.is_empty(), "the fresh route made no connection");
    assert!(
        presented.iter().all(|der| *der == new_der),
        "a connection after the rotation presented the old certificate"
    );

    // The listener's client CA reloads on its own poll: a caller of the new CA gets in.
    let started = Instant::now();
    while get_task(caller(&new_caller), url("load"), "n")
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the new callers' CA was not taken up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Calls went on through all of it; the stream opened before is still open (a cut one
    // ends at once).
    let after = done.load(Ordering::Relaxed);
    let next = tokio::time::timeout(Duration::from_millis(500), stream.frame()).await;
    assert!(next.is_err(), "the stream ended: {next:?}");
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    let failed = failed.load(Ordering::Relaxed);
    assert_eq!(
        failed,
        0,
        "{failed} calls failed: {:?}",
        failures.lock().unwrap()
    );
    assert!(
        after > before,
        "no call during the rotation ({before} before, {after} after)"
    );
}

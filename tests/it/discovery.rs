//! Discovery through the gateway with two independent SDK clients: the reference Python
//! SDK (a2a-sdk 1.3.0, `tests/peers/client_from_card.py`) and the official JS SDK
//! (@a2a-js/sdk 1.3.0, `tests/peers/js/client_from_card.mjs`). Each is given only the base
//! URL of a route, resolves `<base>/.well-known/agent-card.json` with its SDK's card
//! resolver, lets its SDK's client factory pick the card's JSONRPC interface and holds a
//! conversation (send, stream, get, cancel). One agent.py serves gRPC and HTTP+JSON; one
//! gateway process has three routes to it: gRPC, HTTP+JSON, and gRPC with a fixed tenant.
//! The interface each client chose and really called must be the gateway's JSON-RPC URL of
//! that route, and the agent must have been reached over the route's binding (and tenant).
//! A fourth route takes API keys and a fifth bearer JWTs of a test issuer: each card
//! declares the gateway's scheme, and each client, given a key or a token, sends it where
//! the card says (issue 22: the card tells the truth).
//!
//! Both clients also converse over a route's HTTP+JSON and gRPC fronts, each picking the
//! card's interface of its binding.
//!
//! Both scripts first talk to agent.py directly (its own card names its own JSON-RPC
//! endpoint), so a broken SDK install or script is told apart from a gateway failure.
//! Every client run is bounded (60 s) and killed when over; the agent and gateway are
//! killed on drop.

use crate::harness;
use crate::harness::key_digest_hex;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness::peer::{self, Peer};
use harness::process::start_with;
use serde_json::Value;

/// One client run may take this long (each takes 1–3 s when it works).
const CLIENT_LIMIT: Duration = Duration::from_secs(60);

/// A config file in a fresh temporary directory, removed when dropped.
struct ConfigFile(PathBuf);

impl ConfigFile {
    fn new(text: &str) -> ConfigFile {
        ConfigFile::named("toml", text)
    }

    fn named(extension: &str, text: &str) -> ConfigFile {
        let name = format!("a2a-discovery-{}.{extension}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, text).unwrap();
        ConfigFile(path)
    }
}

/// The API key the clients hold for the `keyed` route.
const KEY: &str = "sdk-client-key";

impl Drop for ConfigFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// A child process killed when dropped, so a failing test leaves no client behind.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The two clients, each as the command that runs it given a base URL.
#[derive(Clone, Copy, Debug)]
enum Sdk {
    Python,
    Js,
}

#[derive(Clone)]
struct Clients {
    python: PathBuf,
    node_runner: PathBuf,
}

impl Clients {
    /// Provisions both peers (cached under the target dir); a failure names its cause.
    fn provision() -> Clients {
        Clients {
            python: peer::python(),
            node_runner: peer::provision("provision_js.sh"),
        }
    }

    fn command(&self, sdk: Sdk) -> Command {
        match sdk {
            Sdk::Python => {
                let mut command = Command::new(&self.python);
                command.arg(peers_dir().join("client_from_card.py"));
                command
            }
            Sdk::Js => {
                let mut command = Command::new("node");
                command.arg(&self.node_runner);
                command
            }
        }
    }

    /// Runs one client against `base` (plus `args`) within `CLIENT_LIMIT`.
    fn run(&self, sdk: Sdk, base: &str, args: &[&str]) -> Run {
        let started = Instant::now();
        let mut child = Guard(
            self.command(sdk)
                .arg(base)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("discovery: cannot start the {sdk:?} client: {e}")),
        );
        // Readers on their own threads, so a chatty client cannot block on a full pipe.
        let read = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        };
        let stdout = read(Box::new(child.0.stdout.take().unwrap()));
        let stderr = read(Box::new(child.0.stderr.take().unwrap()));
        let success = loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                break status.success();
            }
            if started.elapsed() > CLIENT_LIMIT {
                let _ = child.0.kill();
                break false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(child);
        let mut stderr = stderr.join().unwrap();
        if started.elapsed() > CLIENT_LIMIT {
            stderr.push_str(&format!("\nkilled after {CLIENT_LIMIT:?}"));
        }
        Run {
            success,
            stdout: stdout.join().unwrap(),
            stderr,
            took: started.elapsed(),
        }
    }
}

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// What one client run printed (see the scripts' docs for the lines).
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Run {
    /// The rest of the stdout line starting with `key `.
    fn line(&self, key: &str) -> Option<&str> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
    }

    /// Why the run does not show what `want` says; `None` when it does.
    fn mismatch(&self, want: &Want) -> Option<String> {
        if !self.success {
            // The script's FAIL line (in stderr) says at which step and why.
            return Some("the client failed".to_owned());
        }
        let checks = [
            ("OK", "6 steps".to_owned()),
            ("CARD", want.card.clone()),
            (
                "INTERFACE",
                format!("{} 1.0 {}", want.binding, want.interface),
            ),
            ("AGENT", want.agent.clone()),
        ];
        let mut wrong: Vec<String> = checks
            .iter()
            .filter(|(key, value)| self.line(key) != Some(value))
            .map(|(key, value)| format!("{key}: want {value:?}, got {:?}", self.line(key)))
            .collect();
        // Every conversation request went to the chosen interface (the script checks the
        // set; here the URL itself).
        match self.line("CALLS").and_then(|c| c.split_once(' ')) {
            Some((_, url)) if url == want.interface => {}
            other => wrong.push(format!("CALLS: want … {}, got {other:?}", want.interface)),
        }
        (!wrong.is_empty()).then(|| wrong.join("; "))
    }
}

/// What a run must report.
struct Want {
    card: String,
    /// The binding of the interface the client chose.
    binding: &'static str,
    interface: String,
    agent: String,
}

/// The gateway's card of a route, fetched raw: its first interface is the gateway's.
async fn first_interface(card_url: &str) -> Result<Value, String> {
    let response = tokio::time::timeout(Duration::from_secs(20), reqwest::get(card_url))
        .await
        .map_err(|_| "no answer in 20 s".to_owned())?
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("HTTP {status}: {text}"));
    }
    let card: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    Ok(card["supportedInterfaces"][0].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn both_sdk_clients_discover_each_route_from_its_base_url() {
    let started = Instant::now();
    let clients = tokio::task::spawn_blocking(Clients::provision)
        .await
        .unwrap();
    let provisioned = started.elapsed();
    let agent = tokio::task::spawn_blocking(Peer::start).await.unwrap();
    let agent_http = agent.jsonrpc.trim_end_matches("/jsonrpc").to_owned();
    let card_source = format!("{agent_http}/.well-known/agent-card.json");
    let hex = key_digest_hex(KEY.as_bytes());
    let keys = ConfigFile::named("keys", &format!("sdk-client {hex}\n"));
    // The bearer route's issuer: its JWKS is fetched by the gateway, its token sent by the
    // clients as the card says.
    let issuer = harness::issuer::Issuer::start().await;
    let token = issuer.mint(&issuer.claims("sdk-client"), "ec-1", "ES256");
    let config = ConfigFile::new(&format!(
        r#"
        timeout = "20s"
        log-format = "json"

        [[route]]
        name = "grpc"
        path = "/agents/grpc"
        backend = "{grpc}"
        [route.card]
        source = "{card_source}"

        [[route]]
        name = "rest"
        path = "/agents/rest"
        backend = "{rest}"
        binding = "HTTP+JSON"
        [route.card]
        source = "{card_source}"

        [[route]]
        name = "tenant"
        path = "/agents/tenant"
        backend = "{grpc}"
        tenant = "acme"
        [route.card]
        source = "{card_source}"

        [[route]]
        name = "keyed"
        path = "/agents/keyed"
        backend = "{grpc}"
        [route.card]
        source = "{card_source}"
        [route.auth.api-keys]
        file = "{keys}"
        header = "x-agent-key"

        [[route]]
        name = "bearer"
        path = "/agents/bearer"
        backend = "{grpc}"
        [route.card]
        source = "{card_source}"
        [[route.auth.jwt]]
        issuer = "{issuer}"
        audiences = ["{audience}"]
        jwks-url = "{jwks}"
        "#,
        grpc = agent.grpc,
        rest = agent.rest,
        keys = keys.0.display(),
        issuer = issuer.url,
        audience = harness::issuer::AUDIENCE,
        jwks = issuer.jwks_url(),
    ));
    // The gateway's log goes to a file, shown when a check fails (card fetch errors etc.).
    let log_path = config.0.with_extension("log");
    let log = std::fs::File::create(&log_path).unwrap();
    let gateway = start_with(&["--config", config.0.to_str().unwrap()], &[], log.into()).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let ready = started.elapsed();
    let mut timings = vec![
        format!("provision both peers: {provisioned:.1?}"),
        format!("agent + gateway up: {:.1?}", ready - provisioned),
    ];

    // Self-check: both clients against agent.py's own card and JSON-RPC endpoint.
    let direct = Want {
        card: card_source.clone(),
        binding: "JSONRPC",
        interface: agent.jsonrpc.clone(),
        agent: "binding=jsonrpc tenant=-".to_owned(),
    };
    for sdk in [Sdk::Python, Sdk::Js] {
        let (clients, url) = (clients.clone(), agent_http.clone());
        let run = tokio::task::spawn_blocking(move || clients.run(sdk, &url, &[]))
            .await
            .unwrap();
        timings.push(format!("{sdk:?} direct: {:.1?}", run.took));
        if let Some(why) = run.mismatch(&direct) {
            panic!(
                "self-check: the {sdk:?} client cannot converse with agent.py directly, so \
                 nothing below could tell the gateway apart: {why}\n{}\n{}",
                run.stdout, run.stderr
            );
        }
    }

    // Through the gateway: every client × route is run, then all failures are reported.
    // 'static, as the clients' arguments move to their threads.
    let bearer: &'static str = format!("bearer={token}").leak();
    let routes = [
        ("grpc", "binding=grpc tenant=-", vec![]),
        ("rest", "binding=rest tenant=-", vec![]),
        (
            "tenant",
            "binding=grpc tenant=acme",
            vec!["--tenant", "acme"],
        ),
        (
            "keyed",
            "binding=grpc tenant=-",
            vec!["--credential", "api-key=sdk-client-key"],
        ),
        (
            "bearer",
            "binding=grpc tenant=-",
            vec!["--credential", bearer],
        ),
    ];
    let mut failures = Vec::new();
    for (route, agent_saw, args) in routes {
        let base = format!("{origin}/agents/{route}");
        let want = Want {
            card: format!("{base}/.well-known/agent-card.json"),
            binding: "JSONRPC",
            interface: format!("{base}/a2a/jsonrpc"),
            agent: agent_saw.to_owned(),
        };
        // The served card itself: supportedInterfaces[0] is the gateway's JSON-RPC URL.
        match first_interface(&want.card).await {
            Ok(first)
                if first["url"] == want.interface.as_str()
                    && first["protocolBinding"] == "JSONRPC"
                    && first["protocolVersion"] == "1.0" => {}
            Ok(first) => failures.push(format!("{route}: card's first interface is {first}")),
            Err(e) => failures.push(format!("{route}: card {}: {e}", want.card)),
        }
        for sdk in [Sdk::Python, Sdk::Js] {
            let (clients, base, args) = (clients.clone(), base.clone(), args.clone());
            let run = tokio::task::spawn_blocking(move || clients.run(sdk, &base, &args))
                .await
                .unwrap();
            timings.push(format!("{sdk:?} via /agents/{route}: {:.1?}", run.took));
            if let Some(why) = run.mismatch(&want) {
                failures.push(format!(
                    "{sdk:?} via /agents/{route}: {why}\n  stdout: {}\n  stderr: {}",
                    run.stdout.trim().replace('\n', "\n          "),
                    run.stderr.trim().replace('\n', "\n          ")
                ));
            }
            // The keyed route's card names the gateway's scheme, which the client used.
            let security = run.line("SECURITY");
            let declared = match route {
                "keyed" => "gateway-api-key:api-key:x-agent-key",
                "bearer" => "gateway-jwt:bearer",
                _ => "-",
            };
            if run.success && security != Some(declared) {
                failures.push(format!(
                    "{sdk:?} via /agents/{route}: SECURITY {security:?}"
                ));
            }
        }
    }
    timings.push(format!("total: {:.1?}", started.elapsed()));
    eprintln!("discovery timings:\n  {}", timings.join("\n  "));
    drop(gateway);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    std::fs::remove_file(&log_path).ok();
    let tail: Vec<&str> = log.lines().rev().take(20).collect();
    assert!(
        failures.is_empty(),
        "{} of 15 discovery checks failed:\n{}\ngateway log (last lines):\n{}",
        failures.len(),
        failures.join("\n"),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
}

/// Both SDKs' HTTP+JSON and gRPC clients (`client_from_card.{py,mjs} --binding`), given
/// only a route's base URL: each resolves the card, picks the gateway's interface of its
/// binding and holds the JSON-RPC clients' conversation through it. The HTTP+JSON front is in front
/// of the agent over gRPC, the gRPC front in front of it over HTTP+JSON: each client reaches
/// an agent that does not speak its binding.
#[tokio::test(flavor = "multi_thread")]
async fn both_sdk_clients_converse_over_the_http_json_and_grpc_fronts_from_the_card() {
    use harness::process::TempFile;
    let clients = tokio::task::spawn_blocking(Clients::provision)
        .await
        .unwrap();
    let agent = tokio::task::spawn_blocking(Peer::start).await.unwrap();
    // agent.py's own card, served by the gateway from a file (a URL source is fetched by
    // the binary's refresh task, which this in-process gateway does not run).
    let agent_http = agent.jsonrpc.trim_end_matches("/jsonrpc");
    let card_url = format!("{agent_http}/.well-known/agent-card.json");
    let card = reqwest::get(&card_url).await.unwrap().text().await.unwrap();
    let card = TempFile::new("json", &card);
    let fronts = ["--fronts", "JSONRPC,HTTP+JSON,GRPC", "--card", card.path()];
    let mut failures = Vec::new();
    for (binding, backend, agent_saw) in [
        (
            "HTTP+JSON",
            ["--backend", &agent.grpc, "--binding", "GRPC"],
            "binding=grpc tenant=-",
        ),
        (
            "GRPC",
            ["--backend", &agent.rest, "--binding", "HTTP+JSON"],
            "binding=rest tenant=-",
        ),
    ] {
        let flags: Vec<&str> = [&backend[..], &fronts, &["--timeout", "20s"]].concat();
        let origin = harness::serve_on_workers(&flags, None).await;
        let interface = match binding {
            // gRPC's address is `host:port`, which grpc-js dials as it stands.
            "GRPC" => origin.trim_start_matches("http://").to_owned(),
            _ => format!("{origin}/a2a/rest"),
        };
        let want = Want {
            card: format!("{origin}/.well-known/agent-card.json"),
            binding,
            interface,
            agent: agent_saw.to_owned(),
        };
        for sdk in [Sdk::Python, Sdk::Js] {
            let (clients, base) = (clients.clone(), origin.clone());
            let run = tokio::task::spawn_blocking(move || {
                clients.run(sdk, &base, &["--binding", binding])
            })
            .await
            .unwrap();
            if let Some(why) = run.mismatch(&want) {
                let (stdout, stderr) = (run.stdout, run.stderr);
                failures.push(format!("{sdk:?} over {binding}: {why}\n{stdout}\n{stderr}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

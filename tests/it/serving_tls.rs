//! HTTPS on the listener, against the built binary in front of its demo agent: HTTP/1.1
//! and HTTP/2 chosen by ALPN, each carrying a JSON-RPC call and an SSE stream; the
//! certificate replaced on disk while clients call without pause (no call fails, new
//! handshakes get the new certificate, a bad pair is logged and kept out); client
//! certificates required or optional; the handshake timeout, which holds up no other
//! client; and `check-config` naming the TLS flag at fault.

use crate::harness;
use crate::harness::tls_pki;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::process::{spawn, Running, BIN};
use harness::process::{OutputWithin, EXITS_WITHIN};
use harness::{free_listen_address, message_params, request};
use http::Version;
use serde_json::{json, Value};
use tls_pki::{handshake, Ca, Dir, Leaf};
use tokio::io::AsyncReadExt;

/// A gateway process serving HTTPS.
struct Https {
    _process: Running,
    /// `127.0.0.1:port`.
    listen: String,
    /// The JSON-RPC endpoint, `https://127.0.0.1:port/a2a/jsonrpc`.
    url: String,
}

/// Starts the binary with `args` on a free port; its log goes to `log` when given. Returns
/// once it accepts connections.
async fn start(args: &[String], log: Option<&std::fs::File>) -> Https {
    let listen = free_listen_address();
    let stderr = log.map_or_else(Stdio::null, |f| Stdio::from(f.try_clone().unwrap()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut process = spawn(&args, &listen, &[], stderr);
    let started = Instant::now();
    while tokio::net::TcpStream::connect(&listen).await.is_err() {
        assert!(process.running(), "the gateway exited");
        assert!(started.elapsed() < Duration::from_secs(10), "no listener");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Https {
        url: format!("https://{listen}/a2a/jsonrpc"),
        _process: process,
        listen,
    }
}

/// The listener's certificate and key written to `dir`: the flags that serve them.
fn tls_flags(dir: &Dir, leaf: &Leaf) -> Vec<String> {
    let cert = dir.write("tls.crt", &leaf.cert_pem);
    let key = dir.write("tls.key", &leaf.key_pem);
    vec!["--tls-cert".into(), cert, "--tls-key".into(), key]
}

fn args(fixed: &[&str], more: &[String]) -> Vec<String> {
    fixed
        .iter()
        .map(|a| a.to_string())
        .chain(more.iter().cloned())
        .collect()
}

/// An HTTPS client trusting `ca`: HTTP/1.1 only, or whatever ALPN gives (HTTP/2 first).
fn https_client(ca: &Ca, http1_only: bool, identity: Option<&Leaf>) -> reqwest::Client {
    let root = reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap();
    let mut builder = reqwest::Client::builder().add_root_certificate(root);
    if http1_only {
        builder = builder.http1_only();
    }
    if let Some(leaf) = identity {
        let pem = format!("{}{}", leaf.cert_pem, leaf.key_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

/// A SendMessage to the demo agent; the HTTP version and the JSON-RPC reply.
async fn send(
    client: &reqwest::Client,
    url: &str,
    text: &str,
) -> Result<(Version, Value), reqwest::Error> {
    let body = request(json!(7), "SendMessage", message_params(text));
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(body)
        .send()
        .await?;
    let version = response.version();
    Ok((version, response.json().await?))
}

/// The demo agent's echo, or why the call failed.
async fn echo(client: &reqwest::Client, url: &str) -> Result<Version, String> {
    match send(client, url, "hello").await {
        Ok((version, reply)) if reply["result"]["message"]["parts"][0]["text"] == "echo: hello" => {
            Ok(version)
        }
        Ok((_, reply)) => Err(reply.to_string()),
        Err(e) => Err(format!("{e:?}")),
    }
}

/// The demo agent's stream (six events) read to its end: the HTTP version and the data
/// frames.
async fn stream(client: &reqwest::Client, url: &str) -> (Version, Vec<Value>) {
    let body = request(json!(8), "SendStreamingMessage", message_params("stream"));
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let version = response.version();
    let text = response.text().await.unwrap();
    let frames = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    (version, frames)
}

#[tokio::test]
async fn https_serves_http1_and_http2_by_alpn() {
    let ca = Ca::new("listener CA");
    let dir = Dir::new("alpn");
    let gateway = start(
        &args(&["--demo"], &tls_flags(&dir, &ca.server("gateway", 1))),
        None,
    )
    .await;
    let offered = |alpn: &'static [&'static [u8]]| handshake(&gateway.listen, &ca.pem, alpn);
    assert_eq!(
        offered(&[b"h2", b"http/1.1"]).await.alpn.as_deref(),
        Some(&b"h2"[..])
    );
    assert_eq!(
        offered(&[b"http/1.1", b"h2"]).await.alpn.as_deref(),
        Some(&b"h2"[..])
    );
    assert_eq!(
        offered(&[b"http/1.1"]).await.alpn.as_deref(),
        Some(&b"http/1.1"[..])
    );

    for (http1_only, expected) in [(true, Version::HTTP_11), (false, Version::HTTP_2)] {
        let client = https_client(&ca, http1_only, None);
        assert_eq!(echo(&client, &gateway.url).await, Ok(expected));
        let (version, frames) = stream(&client, &gateway.url).await;
        assert_eq!(version, expected);
        assert_eq!(frames.len(), 6, "{frames:?}");
        assert!(frames.iter().all(|f| f["id"] == 8), "{frames:?}");
        let last = &frames[5]["result"]["statusUpdate"]["status"]["state"];
        assert_eq!(last, "TASK_STATE_COMPLETED", "{frames:?}");
    }
    // The port speaks TLS only.
    let cleartext = harness::client()
        .get(format!("http://{}/healthz", gateway.listen))
        .send()
        .await;
    assert!(cleartext.is_err(), "{cleartext:?}");
}

/// Clients call without pause, over kept-alive HTTP/1.1 and HTTP/2 connections and over a
/// new connection per call, while the certificate files are replaced (certificate first,
/// then key, as a careless operator would), then replaced by a pair that does not match,
/// then fixed. Not one call fails, and a stream open throughout goes on; each new
/// certificate reaches new handshakes within the poll interval; the bad pair is logged
/// and never served.
#[tokio::test]
async fn the_certificate_is_reloaded_under_load_without_a_failed_call() {
    let ca = Ca::new("listener CA");
    let dir = Dir::new("reload");
    let (one, two, three) = (
        ca.server("gateway one", 1),
        ca.server("gateway two", 2),
        ca.server("gateway three", 3),
    );
    let log_path = dir.path("gateway.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let flags = args(&["--demo", "--workers", "2"], &tls_flags(&dir, &one));
    let gateway = start(&flags, Some(&log)).await;
    let presented = || async {
        handshake(&gateway.listen, &ca.pem, &[b"h2"])
            .await
            .certificate
    };
    assert_eq!(presented().await, one.der);
    // A stream open across every reload (the demo's slow task: an event every 500 ms).
    let body = request(json!(9), "SendStreamingMessage", message_params("slow"));
    let mut open_stream = https_client(&ca, false, None)
        .post(&gateway.url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(open_stream.version(), Version::HTTP_2);
    let mut events_before = 0;
    while events_before == 0 {
        let chunk = open_stream.chunk().await.unwrap().unwrap();
        events_before = String::from_utf8_lossy(&chunk).matches("data: ").count();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let mut callers = Vec::new();
    for (http1_only, fresh_connections) in [(true, false), (false, false), (true, true)] {
        for _ in 0..2 {
            let mut builder = reqwest::Client::builder()
                .add_root_certificate(reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap());
            if http1_only {
                builder = builder.http1_only();
            }
            if fresh_connections {
                builder = builder.pool_max_idle_per_host(0);
            }
            let client = builder.build().unwrap();
            let (url, stop, failures) = (gateway.url.clone(), stop.clone(), failures.clone());
            callers.push(tokio::spawn(async move {
                let mut calls = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = echo(&client, &url).await {
                        failures.lock().unwrap().push(e);
                    }
                    calls += 1;
                }
                calls
            }));
        }
    }
    let served = |leaf: &Leaf| {
        let expected = leaf.der.clone();
        async move {
            let started = Instant::now();
            while presented().await != expected {
                assert!(started.elapsed() < Duration::from_secs(5), "not reloaded");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            started.elapsed()
        }
    };
    let unusable = || {
        let log = std::fs::read_to_string(&log_path).unwrap();
        log.matches("cannot be used").count()
    };
    tokio::time::sleep(Duration::from_millis(500)).await;

    dir.write("tls.crt", &two.cert_pem);
    dir.write("tls.key", &two.key_pem);
    let took = served(&two).await;
    assert!(
        took < Duration::from_millis(2500),
        "reloaded after {took:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    // A certificate whose key is still the old one: logged, and the last good pair stays.
    let before = unusable();
    dir.write("tls.crt", &three.cert_pem);
    let started = Instant::now();
    while unusable() == before {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the bad pair was not logged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        presented().await,
        two.der,
        "the bad pair must not be served"
    );
    dir.write("tls.key", &three.key_pem);
    served(&three).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Events buffered before now come at once; one arriving a while later is new.
    let reloaded = Instant::now();
    loop {
        let chunk = open_stream
            .chunk()
            .await
            .unwrap()
            .expect("the stream goes on");
        let event = String::from_utf8_lossy(&chunk).contains("data: ");
        if event && reloaded.elapsed() > Duration::from_millis(600) {
            break;
        }
    }
    drop(open_stream);

    stop.store(true, Ordering::Relaxed);
    let mut calls = Vec::new();
    for caller in callers {
        calls.push(caller.await.unwrap());
    }
    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..]
    );
    assert!(
        calls.iter().all(|n| *n >= 20),
        "every caller kept calling: {calls:?}"
    );
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(log.matches("TLS certificate reloaded").count(), 2, "{log}");
}

#[tokio::test]
async fn client_certificates_are_verified_against_the_client_ca() {
    let ca = Ca::new("listener CA");
    let clients = Ca::new("client CA");
    let (member, intruder) = (
        clients.client("member"),
        Ca::new("rogue CA").client("intruder"),
    );
    let dir = Dir::new("client-auth");
    let client_ca = dir.write("clients.pem", &clients.pem);
    let mut flags = args(&["--demo"], &tls_flags(&dir, &ca.server("gateway", 1)));
    flags.extend(["--tls-client-ca".to_owned(), client_ca]);

    let required = start(&flags, None).await;
    let with = https_client(&ca, false, Some(&member));
    assert_eq!(echo(&with, &required.url).await, Ok(Version::HTTP_2));
    let without = echo(&https_client(&ca, false, None), &required.url).await;
    assert!(
        without
            .as_ref()
            .unwrap_err()
            .contains("CertificateRequired"),
        "{without:?}"
    );
    let foreign = echo(&https_client(&ca, true, Some(&intruder)), &required.url).await;
    assert!(
        foreign.as_ref().unwrap_err().contains("UnknownCA"),
        "{foreign:?}"
    );

    flags.extend(["--tls-client-auth".to_owned(), "optional".to_owned()]);
    let optional = start(&flags, None).await;
    assert_eq!(echo(&with, &optional.url).await, Ok(Version::HTTP_2));
    let without = https_client(&ca, true, None);
    assert_eq!(echo(&without, &optional.url).await, Ok(Version::HTTP_11));
    let foreign = echo(&https_client(&ca, true, Some(&intruder)), &optional.url).await;
    assert!(
        foreign.as_ref().unwrap_err().contains("UnknownCA"),
        "{foreign:?}"
    );
}

#[tokio::test]
async fn a_rotated_client_ca_is_taken_up_without_a_restart() {
    let ca = Ca::new("listener CA");
    let (old, new) = (Ca::new("old client CA"), Ca::new("new client CA"));
    let (old_member, new_member) = (old.client("old member"), new.client("new member"));
    let dir = Dir::new("client-ca-reload");
    let client_ca = dir.write("clients.pem", &old.pem);
    let mut flags = args(&["--demo"], &tls_flags(&dir, &ca.server("gateway", 1)));
    flags.extend(["--tls-client-ca".to_owned(), client_ca.clone()]);
    let gateway = start(&flags, None).await;
    // Each attempt on a new client: a fresh connection, so a fresh handshake.
    let echo_as = |member: &Leaf| {
        let client = https_client(&ca, true, Some(member));
        let url = gateway.url.clone();
        async move { echo(&client, &url).await }
    };
    assert_eq!(echo_as(&old_member).await, Ok(Version::HTTP_11));
    let refused = echo_as(&new_member).await;
    assert!(refused.unwrap_err().contains("UnknownCA"));

    // A half-written file is not taken: the old CA still admits.
    std::fs::write(&client_ca, "-----BEGIN CERTIFICATE-----\nMIIB").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(echo_as(&old_member).await, Ok(Version::HTTP_11));

    std::fs::write(&client_ca, &new.pem).unwrap();
    let started = Instant::now();
    while echo_as(&new_member).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "not reloaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = echo_as(&old_member).await;
    assert!(refused.unwrap_err().contains("UnknownCA"));
}

/// A client that opens a connection and sends nothing is dropped at the handshake
/// timeout, and meanwhile the only worker serves others; one that starts its handshake
/// just before the timeout is served.
#[tokio::test]
async fn handshakes_time_out_on_their_own_task() {
    let ca = Ca::new("listener CA");
    let dir = Dir::new("handshake-timeout");
    let mut flags = args(
        &["--demo", "--workers", "1"],
        &tls_flags(&dir, &ca.server("gw", 1)),
    );
    flags.extend(["--tls-handshake-timeout".to_owned(), "1s".to_owned()]);
    let gateway = start(&flags, None).await;

    let mut silent = tokio::net::TcpStream::connect(&gateway.listen)
        .await
        .unwrap();
    let opened = Instant::now();
    let client = https_client(&ca, false, None);
    assert_eq!(echo(&client, &gateway.url).await, Ok(Version::HTTP_2));
    let served_after = opened.elapsed();

    let late = tokio::net::TcpStream::connect(&gateway.listen)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let config = tls_pki::client_config(&ca.pem, &[b"h2"], None);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    assert!(
        connector.connect(name, late).await.is_ok(),
        "a handshake within the timeout"
    );

    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut byte)).await;
    let closed_after = opened.elapsed();
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    assert!(
        closed_after >= Duration::from_millis(950) && closed_after < Duration::from_secs(3),
        "closed after {closed_after:?}"
    );
    assert!(
        served_after < closed_after,
        "{served_after:?} vs {closed_after:?}"
    );
}

/// `check-config` refuses TLS files that cannot serve, naming the flag (also when set in the
/// file or the environment).
#[test]
fn check_config_names_the_tls_flag_at_fault() {
    let ca = Ca::new("listener CA");
    let (leaf, other) = (ca.server("gateway", 1), ca.server("other", 2));
    let dir = Dir::new("tls-check");
    let cert = dir.write("tls.crt", &leaf.cert_pem);
    let key = dir.write("tls.key", &leaf.key_pem);
    let other_key = dir.write("other.key", &other.key_pem);
    let missing = dir.path("missing.pem");
    let check = |keys: &str, env: &[(&str, &str)]| {
        let file = dir.write(
            "gateway.toml",
            &format!("backend = \"http://127.0.0.1:1\"\n{keys}"),
        );
        let out = Command::new(BIN)
            .args(["check-config", &file])
            .envs(env.iter().copied())
            .output_within(EXITS_WITHIN);
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let pair = |c: &str, k: &str| format!("tls-cert = {c:?}\ntls-key = {k:?}\n");
    let cases = [
        (
            pair(&missing, &key),
            format!("--tls-cert {missing:?}: No such file"),
        ),
        (
            pair(&key, &key),
            "--tls-cert".to_owned() + &format!(" {key:?}: no PEM certificate"),
        ),
        (
            pair(&cert, &cert),
            format!("--tls-key {cert:?}: no PEM private key"),
        ),
        (
            pair(&cert, &other_key),
            format!("--tls-key {other_key:?}: not the private key of the --tls-cert certificate"),
        ),
        (
            format!("tls-cert = {cert:?}\n"),
            "--tls-cert needs --tls-key".to_owned(),
        ),
        (
            format!("tls-key = {key:?}\n"),
            "--tls-key needs --tls-cert".to_owned(),
        ),
        (
            format!("tls-client-ca = {cert:?}\n"),
            "--tls-client-ca needs --tls-cert".to_owned(),
        ),
        (
            pair(&cert, &key) + &format!("tls-client-ca = {key:?}\n"),
            format!("--tls-client-ca {key:?}: no PEM certificate"),
        ),
        (
            pair(&cert, &key) + "tls-handshake-timeout = \"0s\"\n",
            "--tls-handshake-timeout must be greater than 0".to_owned(),
        ),
        (
            pair(&cert, &key) + "tls-client-auth = \"sometimes\"\n",
            "key `tls-client-auth`".to_owned(),
        ),
    ];
    for (keys, expected) in cases {
        let (code, stderr) = check(&keys, &[]);
        assert_eq!(code, Some(2), "{keys}: {stderr}");
        assert!(
            stderr.contains(&expected),
            "{keys}\n→ {stderr}\nexpected: {expected}"
        );
    }
    let every = format!("tls-client-ca = {cert:?}\ntls-client-auth = \"optional\"\n");
    let (code, stderr) = check(&(pair(&cert, &key) + &every), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = check(&pair(&cert, &key), &[("A2A_GATEWAY_TLS_CERT", &missing)]);
    assert_eq!(
        code,
        Some(2),
        "the environment wins over the file: {stderr}"
    );
    assert!(
        stderr.contains(&format!("--tls-cert {missing:?}")),
        "{stderr}"
    );
}

/// Without --public-url, a TLS listener's cards name `https://` interfaces: a client
/// following the card never sends its credentials in cleartext.
#[tokio::test]
async fn a_tls_listeners_card_names_https() {
    let ca = Ca::new("listener CA");
    let dir = Dir::new("card-https");
    let gateway = start(
        &args(&["--demo"], &tls_flags(&dir, &ca.server("gateway", 1))),
        None,
    )
    .await;
    let client = https_client(&ca, true, None);
    let card_url = format!("https://{}/.well-known/agent-card.json", gateway.listen);
    let started = Instant::now();
    let card: Value = loop {
        let response = client.get(&card_url).send().await.unwrap();
        if response.status() == 200 {
            break response.json().await.unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no card");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(card["supportedInterfaces"][0]["url"], gateway.url, "{card}");
    let extended = client
        .post(&gateway.url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(request(json!(1), "GetExtendedAgentCard", json!({})))
        .send()
        .await
        .unwrap();
    let extended: Value = extended.json().await.unwrap();
    // The extended card through the route names the gateway's https interface too.
    let url = &extended["result"]["supportedInterfaces"][0]["url"];
    assert_eq!(url, &json!(gateway.url), "{extended}");
}

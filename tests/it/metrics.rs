//! `/metrics` at the wire: requests by route, method and JSON-RPC code, latency histograms,
//! rejected envelopes, open streams and frames, in Prometheus text format; on a gateway of
//! two routes served by two worker threads, each route's series carry its configured name.

use crate::harness;

use a2a_gateway::proto::TaskState;
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use harness::*;
use serde_json::json;
use tonic::{Code, Status};

/// `/metrics` of the gateway serving the wire suites' route at `url`.
async fn scrape(url: &str) -> String {
    scrape_origin(&url[..url.find(ROUTE_PREFIX).unwrap()]).await
}

async fn scrape_origin(origin: &str) -> String {
    let metrics = format!("{origin}/metrics");
    let response = client().get(metrics).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    response.text().await.unwrap()
}

scheme_tests!(requests_streams_and_rejections_are_counted);
async fn requests_streams_and_rejections_are_counted(scheme: Scheme) {
    let (_, url) = scheme
        .setup(|request| match request {
            Request::Unary(UnaryRequest::GetTask(r)) if r.id == "missing" => {
                Answer::Error(Status::new(Code::NotFound, "no"))
            }
            Request::Unary(UnaryRequest::GetTask(_)) => {
                Answer::Reply(Reply::GetTask(task("t-1", TaskState::Working)))
            }
            _ => Answer::Stream(vec![
                Step::Event(status_update("t-1", TaskState::Working)),
                Step::Hang,
            ]),
        })
        .await;
    rpc(&url, &request(json!(1), "GetTask", json!({"id": "t-1"}))).await;
    rpc(&url, &request(json!(2), "GetTask", json!({"id": "t-1"}))).await;
    rpc(
        &url,
        &request(json!(3), "GetTask", json!({"id": "missing"})),
    )
    .await;
    rpc(&url, "{not json").await;
    let (_, mut sse) = SseReader::open(
        &url,
        request(json!(4), "SendStreamingMessage", message_params("go")),
    )
    .await;
    sse.data().await.unwrap();
    assert!(
        scrape(&url)
            .await
            .contains("a2a_gateway_streams_open{route=\"default\"} 1\n"),
        "the stream is open"
    );
    drop(sse);
    let started = std::time::Instant::now();
    while !scrape(&url)
        .await
        .contains("a2a_gateway_streams_open{route=\"default\"} 0\n")
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "stream never counted closed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    let text = scrape(&url).await;
    for line in [
        "a2a_gateway_requests_total{route=\"default\",method=\"GetTask\",code=\"0\"} 2\n",
        "a2a_gateway_requests_total{route=\"default\",method=\"GetTask\",code=\"-32001\"} 1\n",
        "a2a_gateway_requests_total{route=\"default\",method=\"SendStreamingMessage\",code=\"0\"} 1\n",
        "a2a_gateway_requests_total{route=\"default\",method=\"\",code=\"-32700\"} 1\n",
        "a2a_gateway_request_duration_seconds_count{route=\"default\",method=\"GetTask\"} 3\n",
        "a2a_gateway_stream_frames_total{route=\"default\"} 1\n",
        "a2a_gateway_streams_open{route=\"default\"} 0\n",
        "a2a_gateway_stream_duration_seconds_count{route=\"default\"} 1\n",
        // The default 30 s call deadline and longer ones have buckets of their own.
        "a2a_gateway_request_duration_seconds_bucket{route=\"default\",method=\"GetTask\",le=\"30\"} 3\n",
        "a2a_gateway_request_duration_seconds_bucket{route=\"default\",method=\"GetTask\",le=\"300\"} 3\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

/// Two routes over one agent, on two worker threads: each call, rejection, stream and limit
/// counts under the route the client called, by its configured name, whichever thread
/// served it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_carry_the_route_they_were_served_on() {
    let backend = TestBackend::new(|request| match request {
        Request::Unary(UnaryRequest::GetTask(r)) if r.id == "missing" => {
            Answer::Error(Status::new(Code::NotFound, "no"))
        }
        Request::Unary(UnaryRequest::GetTask(r)) => {
            Answer::Reply(Reply::GetTask(task(&r.id, TaskState::Working)))
        }
        _ => Answer::Stream(vec![
            Step::Event(status_update("t-1", TaskState::Working)),
            Step::Hang,
        ]),
    });
    let agent = backend.spawn().await;
    let file = format!(
        "max-concurrent-streams = 5\n\
         [[route]]\nname = \"alpha\"\npath = \"/alpha\"\nbackend = \"http://{agent}\"\n\
         [[route]]\nname = \"beta\"\npath = \"/beta\"\nbackend = \"http://{agent}\"\n"
    );
    let origin = serve_on_workers(&[], Some(&file)).await;
    let (alpha, beta) = (
        format!("{origin}/alpha/a2a/jsonrpc"),
        format!("{origin}/beta/a2a/jsonrpc"),
    );
    for id in 1..=3 {
        rpc(&alpha, &request(json!(id), "GetTask", json!({"id": "t-1"}))).await;
    }
    rpc(
        &beta,
        &request(json!(4), "GetTask", json!({"id": "missing"})),
    )
    .await;
    rpc(&beta, "{not json").await;
    let (_, mut sse) = SseReader::open(
        &beta,
        request(json!(5), "SendStreamingMessage", message_params("go")),
    )
    .await;
    sse.data().await.unwrap();

    let text = scrape_origin(&origin).await;
    for line in [
        "a2a_gateway_requests_total{route=\"alpha\",method=\"GetTask\",code=\"0\"} 3\n",
        "a2a_gateway_requests_total{route=\"beta\",method=\"GetTask\",code=\"-32001\"} 1\n",
        "a2a_gateway_requests_total{route=\"beta\",method=\"\",code=\"-32700\"} 1\n",
        "a2a_gateway_requests_total{route=\"beta\",method=\"SendStreamingMessage\",code=\"0\"} 1\n",
        "a2a_gateway_request_duration_seconds_count{route=\"alpha\",method=\"GetTask\"} 3\n",
        "a2a_gateway_request_duration_seconds_count{route=\"beta\",method=\"GetTask\"} 1\n",
        "a2a_gateway_streams_open{route=\"alpha\"} 0\n",
        "a2a_gateway_streams_open{route=\"beta\"} 1\n",
        "a2a_gateway_stream_frames_total{route=\"alpha\"} 0\n",
        "a2a_gateway_stream_frames_total{route=\"beta\"} 1\n",
        "a2a_gateway_limit{route=\"alpha\",limit=\"max-concurrent-streams\"} 5\n",
        "a2a_gateway_limit_in_use{route=\"beta\",limit=\"max-concurrent-streams\"} 1\n",
        "a2a_gateway_limit_rejections_total{route=\"beta\",limit=\"max-concurrent-streams\"} 0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // Backend latency by route and the configured backend address; a stream counts at its
    // start, a parse error never reaches the agent.
    for (route, calls) in [("alpha", 3), ("beta", 2)] {
        let line = format!(
            "a2a_gateway_backend_call_duration_seconds_count{{route=\"{route}\",endpoint=\"http://{agent}\"}} {calls}\n"
        );
        assert!(text.contains(&line), "missing {line:?} in\n{text}");
    }
    for line in text
        .lines()
        .filter(|l| l.starts_with("a2a_gateway_request"))
    {
        assert!(
            line.contains("{route=\"alpha\",") || line.contains("{route=\"beta\","),
            "a request series without its route: {line}"
        );
    }
    assert!(
        !text.contains("route=\"alpha\",method=\"SendStreamingMessage\""),
        "{text}"
    );
    drop(sse);
}

/// `a2a_gateway_build_info` names the version and the commit checked out when it was built
/// (`unknown` without git).
#[tokio::test]
async fn build_info_names_the_version_and_commit() {
    let (_, url) = Scheme::Http
        .setup(|_| Answer::Error(Status::unimplemented("none")))
        .await;
    let text = scrape(&url).await;
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map_or("unknown".to_owned(), |out| {
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        });
    let line = format!(
        "a2a_gateway_build_info{{version=\"{}\",commit=\"{head}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&line), "missing {line:?} in\n{text}");
}

/// The PromQL expressions of `deploy/`: the dashboard's targets and template queries, and
/// the alert rules' `expr` (inline or a `|` block).
fn deploy_queries() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut queries = Vec::new();
    let dashboard = std::fs::read_to_string(root.join("grafana/a2a-gateway.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    fn walk(value: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value.as_str()) {
                        ("expr" | "definition", Some(expr)) => {
                            out.push(("dashboard".into(), expr.into()))
                        }
                        _ => walk(value, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&dashboard, &mut queries);
    let rules_path = root.join("kubernetes/optional/prometheusrule.yaml");
    let rules = std::fs::read_to_string(rules_path).unwrap();
    let mut lines = rules.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let mut expr = rest.trim().to_owned();
        if expr == "|" {
            let indent = line.len() - line.trim_start().len();
            expr.clear();
            while let Some(next) = lines.next_if(|l| l.len() - l.trim_start().len() > indent) {
                expr.push_str(next.trim());
                expr.push(' ');
            }
        }
        queries.push(("rules".into(), expr));
    }
    queries
}

/// The gateway's metric names in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("a2a_gateway_") || word.starts_with("process_"))
        .map(str::to_owned)
        .collect()
}

/// Every series the dashboard and the alert rules in `deploy/` name is one a running
/// gateway exports: a gateway with the features they watch (a balanced route, a card whose
/// source fails, limits, a stream) is scraped after a call and a stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_rules_name_only_exported_series() {
    let queries = deploy_queries();
    let dashboard = queries.iter().filter(|q| q.0 == "dashboard").count();
    let rules = queries.iter().filter(|q| q.0 == "rules").count();
    assert!(dashboard >= 10 && rules >= 7, "{queries:?}");
    let agent = || {
        TestBackend::new(|request| match request {
            Request::Unary(UnaryRequest::GetTask(r)) => {
                Answer::Reply(Reply::GetTask(task(&r.id, TaskState::Working)))
            }
            _ => Answer::Stream(vec![Step::Event(status_update("t-1", TaskState::Working))]),
        })
    };
    let (one, two) = (agent().spawn().await, agent().spawn().await);
    let closed = crate::harness::ClosedPort::new();
    let file = format!(
        "max-concurrent-calls = 5\n\
         [[route]]\nname = \"pods\"\npath = \"/pods\"\n\
         backend = [\"http://{one}\", \"http://{two}\"]\n\
         [route.card]\nsource = \"http://127.0.0.1:{}/card.json\"\n",
        closed.port()
    );
    let origin = serve_on_workers(&[], Some(&file)).await;
    let url = format!("{origin}/pods/a2a/jsonrpc");
    rpc(&url, &request(json!(1), "GetTask", json!({"id": "t-1"}))).await;
    let (_, mut sse) = SseReader::open(
        &url,
        request(json!(2), "SendStreamingMessage", message_params("go")),
    )
    .await;
    while sse.data().await.is_some() {}

    // A gateway serving TLS exports its certificate's expiry.
    let pki = test_pki();
    let cert = harness::process::TempFile::new("pem", &pki.cert_pem);
    let key = harness::process::TempFile::new("pem", &pki.key_pem);
    let tls_flags = ["--tls-cert", cert.path(), "--tls-key", key.path()];
    let backend = ["--backend", "http://127.0.0.1:9"];
    let tls_origin = serve_on_workers(&[&backend[..], &tls_flags].concat(), None).await;
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let tls_metrics = tls_origin.replace("http://", "https://") + "/metrics";
    let tls_text = https.get(tls_metrics).send().await.unwrap();
    let tls_text = tls_text.text().await.unwrap();
    let name = "a2a_gateway_serving_certificate_expiry_timestamp_seconds ";
    let line = tls_text.lines().find_map(|l| l.strip_prefix(name));
    let not_after: i64 = line.expect(&tls_text).parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    assert!(not_after > now.unwrap().as_secs() as i64, "{tls_text}");

    let started = std::time::Instant::now();
    let exported = loop {
        let text = scrape_origin(&origin).await + &tls_text;
        let series: std::collections::BTreeSet<String> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .map(str::to_owned)
            .collect();
        let missing: Vec<(&String, String)> = queries
            .iter()
            .flat_map(|(source, expr)| metric_names(expr).into_iter().map(move |n| (source, n)))
            .filter(|(_, name)| !series.contains(name))
            .collect();
        if missing.is_empty() {
            break series;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "named in deploy/ but not exported: {missing:?}\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    for (source, expr) in &queries {
        assert!(
            !metric_names(expr).is_empty(),
            "{source}: no metric in {expr}"
        );
    }
    assert!(exported.contains("a2a_gateway_card_refresh_failures_total"));
}

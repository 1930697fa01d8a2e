//! `/metrics` at the wire: requests by method and JSON-RPC code, latency histograms,
//! rejected envelopes, open streams and frames, in Prometheus text format.

use crate::harness;

use a2a_gateway::proto::TaskState;
use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
use harness::*;
use serde_json::json;
use tonic::{Code, Status};

async fn scrape(url: &str) -> String {
    let origin = &url[..url.find(ROUTE_PREFIX).unwrap()];
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
        scrape(&url).await.contains("a2a_gateway_streams_open 1\n"),
        "the stream is open"
    );
    drop(sse);
    let started = std::time::Instant::now();
    while !scrape(&url).await.contains("a2a_gateway_streams_open 0\n") {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "stream never counted closed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    let text = scrape(&url).await;
    for line in [
        "a2a_gateway_requests_total{method=\"GetTask\",code=\"0\"} 2\n",
        "a2a_gateway_requests_total{method=\"GetTask\",code=\"-32001\"} 1\n",
        "a2a_gateway_requests_total{method=\"SendStreamingMessage\",code=\"0\"} 1\n",
        "a2a_gateway_requests_total{method=\"\",code=\"-32700\"} 1\n",
        "a2a_gateway_request_duration_seconds_count{method=\"GetTask\"} 3\n",
        "a2a_gateway_stream_frames_total 1\n",
        "a2a_gateway_streams_open 0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

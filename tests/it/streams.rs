//! Streams at the wire (spec 9.4.2): each SSE `data:` a whole JSON-RPC response with the
//! request id, in order and live; an error after the first frame is one `event: error`
//! frame and the end; keepalives while idle; a client that leaves cancels the backend call.

use crate::harness;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use a2a_gateway::proto::TaskState;
use harness::*;
use serde_json::json;
use tonic::{Code, Status};

fn stream_request(id: serde_json::Value) -> String {
    request(id, "SendStreamingMessage", message_params("go"))
}

async fn wait_for(what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

scheme_tests!(frames_arrive_in_order_with_the_request_id);
async fn frames_arrive_in_order_with_the_request_id(scheme: Scheme) {
    let events: Vec<_> = (0..50).map(|i| format!("t-{i}")).collect();
    let script = events.clone();
    let (_, url) = scheme
        .setup(move |_| {
            Answer::Stream(
                script
                    .iter()
                    .map(|id| Step::Event(status_update(id, TaskState::Working)))
                    .collect(),
            )
        })
        .await;
    let (headers, mut sse) = SseReader::open(&url, stream_request(json!("abc"))).await;
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-store");
    for id in &events {
        let frame = sse.data().await.expect("frame");
        assert_eq!(frame["jsonrpc"], "2.0");
        assert_eq!(frame["id"], "abc");
        assert_eq!(frame["result"]["statusUpdate"]["taskId"], id.as_str());
    }
    assert!(sse.data().await.is_none(), "stream ends with the backend's");
}

scheme_tests!(error_after_the_first_frame_is_one_error_frame);
async fn error_after_the_first_frame_is_one_error_frame(scheme: Scheme) {
    let (_, url) = scheme
        .setup(|_| {
            Answer::Stream(vec![
                Step::Event(status_update("t-1", TaskState::Working)),
                Step::Error(Status::new(Code::NotFound, "task vanished")),
                Step::Event(status_update("t-1", TaskState::Completed)),
            ])
        })
        .await;
    let (_, mut sse) = SseReader::open(&url, stream_request(json!(5))).await;
    assert_eq!(
        sse.data().await.unwrap()["result"]["statusUpdate"]["taskId"],
        "t-1"
    );
    let frame = sse.frame().await.unwrap();
    let (event, data) = frame.split_once('\n').unwrap();
    assert_eq!(event, "event: error");
    let data: serde_json::Value =
        serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(
        data,
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32001, "message": "task vanished"}})
    );
    assert!(sse.frame().await.is_none(), "nothing after the error frame");
}

scheme_tests!(error_before_the_first_event_is_a_plain_reply);
async fn error_before_the_first_event_is_a_plain_reply(scheme: Scheme) {
    for answer in [0, 1] {
        let (_, url) = scheme
            .setup(move |_| {
                if answer == 0 {
                    Answer::Error(Status::new(Code::Unimplemented, "no streaming here"))
                } else {
                    Answer::Stream(vec![Step::Error(Status::new(
                        Code::Unimplemented,
                        "no streaming here",
                    ))])
                }
            })
            .await;
        let reply = rpc(&url, &stream_request(json!(1))).await;
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no streaming here"}})
        );
    }
}

scheme_tests!(idle_streams_get_keepalive_comments);
async fn idle_streams_get_keepalive_comments(scheme: Scheme) {
    let settings = Settings {
        keepalive: Duration::from_millis(100),
        ..Default::default()
    };
    let (_, url) = scheme
        .setup_with(
            |_| {
                Answer::Stream(vec![
                    Step::Event(status_update("t-1", TaskState::Working)),
                    Step::Sleep(Duration::from_millis(450)),
                    Step::Event(status_update("t-1", TaskState::Completed)),
                ])
            },
            settings,
        )
        .await;
    let (_, mut sse) = SseReader::open(&url, stream_request(json!(1))).await;
    let mut frames = Vec::new();
    while let Some(frame) = sse.frame().await {
        frames.push(frame);
    }
    let keepalives = frames.iter().filter(|f| f.starts_with(':')).count();
    assert!((2..=5).contains(&keepalives), "{frames:?}");
    assert!(frames.first().unwrap().starts_with("data: "));
    assert!(frames.last().unwrap().contains("TASK_STATE_COMPLETED"));
}

scheme_tests!(frames_are_forwarded_as_they_arrive);
async fn frames_are_forwarded_as_they_arrive(scheme: Scheme) {
    let (_, url) = scheme
        .setup(|_| {
            Answer::Stream(vec![
                Step::Event(status_update("t-1", TaskState::Working)),
                Step::Sleep(Duration::from_millis(600)),
                Step::Event(status_update("t-1", TaskState::Completed)),
            ])
        })
        .await;
    let started = Instant::now();
    let (_, mut sse) = SseReader::open(&url, stream_request(json!(1))).await;
    sse.data().await.unwrap();
    let first = started.elapsed();
    sse.data().await.unwrap();
    let second = started.elapsed();
    assert!(
        first < Duration::from_millis(500),
        "first frame held back: {first:?}"
    );
    assert!(second >= Duration::from_millis(600), "{second:?}");
}

scheme_tests!(client_disconnect_cancels_the_backend_call);
async fn client_disconnect_cancels_the_backend_call(scheme: Scheme) {
    let (backend, url) = scheme
        .setup(|_| {
            Answer::Stream(vec![
                Step::Event(status_update("t-1", TaskState::Working)),
                Step::Hang,
            ])
        })
        .await;
    let (_, mut sse) = SseReader::open(&url, stream_request(json!(1))).await;
    sse.data().await.unwrap();
    assert_eq!(backend.cancelled.load(Ordering::SeqCst), 0);
    drop(sse);
    wait_for("the backend to see the cancellation", || {
        backend.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
}

scheme_tests!(stream_deadline_ends_with_an_error_frame_and_cancels);
async fn stream_deadline_ends_with_an_error_frame_and_cancels(scheme: Scheme) {
    let settings = Settings {
        stream_timeout: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let (backend, url) = scheme
        .setup_with(
            |_| {
                Answer::Stream(vec![
                    Step::Event(status_update("t-1", TaskState::Working)),
                    Step::Hang,
                ])
            },
            settings,
        )
        .await;
    let (_, mut sse) = SseReader::open(&url, stream_request(json!(1))).await;
    sse.data().await.unwrap();
    let frame = sse.frame().await.unwrap();
    assert!(frame.starts_with("event: error\n"), "{frame}");
    assert!(frame.contains("BACKEND_DEADLINE_EXCEEDED"), "{frame}");
    assert!(sse.frame().await.is_none());
    wait_for("the backend call to be cancelled", || {
        backend.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
}

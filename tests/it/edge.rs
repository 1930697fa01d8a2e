//! The edge stack (`front::layers`) on real sockets: request ids generated or taken from
//! the client, echoed and forwarded; a panicking handler answered with JSON-RPC -32603
//! while the server goes on serving.

use crate::harness;

use std::sync::Arc;

use a2a_gateway::backend::{Answer as Answered, Backend, Call, Error, EventStream};
use a2a_gateway::proto::AgentCard;
use a2a_gateway::protocol::ops::{Reply, StreamRequest, UnaryRequest};
use futures::future::BoxFuture;
use futures::FutureExt;
use harness::*;
use serde_json::{json, Value};

fn card() -> Reply {
    Reply::GetExtendedAgentCard(AgentCard {
        name: "n".into(),
        ..Default::default()
    })
}

const CARD_REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}"#;

#[tokio::test]
async fn a_request_id_is_generated_echoed_and_forwarded() {
    let (backend, url) = setup(|_| Answer::Reply(card())).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, headers, text) = post(&url, CARD_REQUEST).await;
        assert_eq!(status, 200, "{text}");
        let id = headers["x-request-id"].to_str().unwrap().to_owned();
        let uuid = uuid::Uuid::parse_str(&id).unwrap_or_else(|e| panic!("{e}: {id}"));
        assert_eq!(uuid.get_version_num(), 4, "{id}");
        // The backend got the same id the client sees.
        let forwarded = backend.last().metadata;
        assert_eq!(forwarded.get("x-request-id").unwrap(), id.as_str());
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1], "each request has its own id");
}

#[tokio::test]
async fn a_client_request_id_is_echoed_and_forwarded() {
    let (backend, url) = setup(|_| Answer::Reply(card())).await;
    let (status, headers, text) = post_with(
        &url,
        CARD_REQUEST,
        &[("a2a-version", "1.0"), ("x-request-id", "client-id-42")],
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["x-request-id"], "client-id-42");
    let forwarded = backend.last().metadata;
    assert_eq!(forwarded.get("x-request-id").unwrap(), "client-id-42");
    // Rejected requests carry it too.
    let (_, headers, text) = post_with(&url, "{", &[("x-request-id", "bad-1")]).await;
    assert!(text.contains("-32700"), "{text}");
    assert_eq!(headers["x-request-id"], "bad-1");
}

/// Panics in `unary` for SendMessage; answers GetExtendedAgentCard.
struct Panicking;

impl Backend for Panicking {
    fn unary(
        &self,
        call: Call<UnaryRequest>,
    ) -> BoxFuture<'static, Result<Answered<Reply>, Error>> {
        if let UnaryRequest::SendMessage(_) = call.request {
            panic!("test backend panics on SendMessage");
        }
        std::future::ready(Ok(Answered {
            value: card(),
            status: None,
            extensions: None,
        }))
        .boxed()
    }

    fn stream(
        &self,
        _: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answered<EventStream>, Error>> {
        async { panic!("test backend panics in a stream call") }.boxed()
    }
}

#[tokio::test]
async fn a_panicking_handler_gets_a_jsonrpc_internal_error_and_serving_goes_on() {
    let settings = route_settings(&["--timeout", "5s", "--max-body", "1MiB", "--push", "pass"]);
    let gateway =
        a2a_gateway::route::handler_over(&settings, Arc::new(Panicking), Default::default())
            .unwrap();
    let url = serve(gateway, "/a2a/jsonrpc").await;
    // One client with one connection: the panic must not cost the connection either.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let call = |body: String| {
        let request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let content_type = response.headers()["content-type"].clone();
            let reply: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
            (status, content_type, reply)
        }
    };
    for (id, method, params) in [
        (7, "SendMessage", message_params("boom")),
        (8, "SendStreamingMessage", message_params("boom")),
    ] {
        let (status, content_type, reply) = call(request(json!(id), method, params)).await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(content_type, "application/json");
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(reply["id"], Value::Null, "{reply}");
        assert_eq!(reply["error"]["code"], -32603, "{reply}");
        assert!(reply.get("result").is_none(), "{reply}");
    }
    let (status, _, reply) = call(CARD_REQUEST.to_owned()).await;
    assert_eq!(status, 200);
    assert_eq!(reply["result"]["name"], "n", "{reply}");
}

//! Discovery through the gateway process: each route's agent card from its source (a URL
//! that changes and goes down, a file), rewritten to name the route's JSON-RPC endpoint,
//! with 503 before the first card, ETag/304/HEAD, the last good card while the source is
//! down, re-signed cards the reference SDK's verifier accepts, the API catalog listing
//! every card, and the one-route shorthand (`--card`, `--public-url`) without a file.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::process::*;
use common::*;
use serde_json::{json, Value};

/// An HTTP card source whose card the test sets (`None`: 503) and can take down.
struct CardSource {
    card: Arc<Mutex<Option<Value>>>,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl CardSource {
    async fn start() -> CardSource {
        let card: Arc<Mutex<Option<Value>>> = Arc::default();
        let served = card.clone();
        let app = axum::Router::new().route(
            "/.well-known/agent-card.json",
            axum::routing::get(move || {
                let card = served.lock().unwrap().clone();
                async move {
                    match card {
                        Some(card) => (http::StatusCode::OK, card.to_string()),
                        None => (http::StatusCode::SERVICE_UNAVAILABLE, String::new()),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/.well-known/agent-card.json",
            listener.local_addr().unwrap()
        );
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        CardSource { card, url, task }
    }

    fn set(&self, card: Option<Value>) {
        *self.card.lock().unwrap() = card;
    }
}

fn agent_card(name: &str) -> Value {
    json!({
        "name": name,
        "description": "an agent behind the gateway",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": "http://10.0.0.7:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {"id": "public", "name": "Public", "description": "d", "tags": ["t"]},
            {"id": "internal", "name": "Internal", "description": "d", "tags": ["t"]}
        ],
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2ln"}],
        "x-vendor-extra": {"kept": true}
    })
}

/// GETs `url` until `accept` takes the response (at most 5 s).
async fn until(
    url: &str,
    accept: impl Fn(u16, &Value) -> bool,
) -> (reqwest::header::HeaderMap, Value) {
    let started = Instant::now();
    loop {
        let response = client().get(url).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if accept(status, &body) {
            return (headers, body);
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{url}: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn routes_serve_their_cards_and_the_catalog_lists_them() {
    let source = CardSource::start().await;
    let file = TempFile::new("json", &agent_card("search").to_string());
    let config = TempFile::new(
        "toml",
        &format!(
            r#"
            [[route]]
            name = "billing"
            path = "/agents/billing"
            backend = "http://127.0.0.1:9"
            [route.card]
            source = "{url}"
            refresh = "100ms"
            max-age = "60s"

            [[route]]
            name = "search"
            path = "/agents/search"
            backend = "http://127.0.0.1:9"
            tenant = "acme"
            [route.card]
            source = "{file}"
            skills = ["public"]

            [[route]]
            name = "hosted"
            host = "hosted.example"
            path = "/"
            backend = "http://127.0.0.1:9"
            [route.card]
            source = "{file}"

            [[route]]
            name = "bare"
            path = "/agents/bare"
            backend = "http://127.0.0.1:9"
            "#,
            url = source.url,
            file = file.path()
        ),
    );
    let gateway = start(&["--config", config.path()]).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let billing = format!("{origin}/agents/billing/.well-known/agent-card.json");

    // Before the first card: 503 with Retry-After and a JSON body.
    let response = client().get(&billing).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");

    // The card, rewritten: the gateway's interface first and only, the rest kept.
    source.set(Some(agent_card("billing")));
    let (headers, card) = until(&billing, |status, _| status == 200).await;
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": format!("{origin}/agents/billing/a2a/jsonrpc"),
                "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(card["x-vendor-extra"], json!({"kept": true}));
    assert!(
        card.get("signatures").is_none(),
        "the agent's signatures no longer verify"
    );
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["cache-control"], "max-age=60");
    let etag = headers["etag"].to_str().unwrap().to_owned();

    // HTTP caching: 304 on the ETag, HEAD without a body.
    let response = client()
        .get(&billing)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 304);
    let response = client().head(&billing).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["etag"], etag.as_str());
    assert!(response.bytes().await.unwrap().is_empty());

    // The source changes: the new card, with a new ETag, after a refresh.
    source.set(Some(agent_card("billing v2")));
    let (headers, _) = until(&billing, |_, card| card["name"] == "billing v2").await;
    assert_ne!(headers["etag"].to_str().unwrap(), etag);

    // The source goes down: the last good card is still served.
    source.task.abort();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (_, card) = until(&billing, |status, _| status == 200).await;
    assert_eq!(card["name"], "billing v2");

    // A file source, a fixed tenant (no tenant on the interface), skills filtered.
    let search = format!("{origin}/agents/search/.well-known/agent-card.json");
    let (_, card) = until(&search, |status, _| status == 200).await;
    let interface = &card["supportedInterfaces"][0];
    assert_eq!(
        interface["url"],
        format!("{origin}/agents/search/a2a/jsonrpc")
    );
    assert!(interface.get("tenant").is_none(), "{interface}");
    assert_eq!(card["skills"].as_array().unwrap().len(), 1);

    // A route without a card source has no card.
    let response = client()
        .get(format!("{origin}/agents/bare/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);

    // The catalog: every card, the host route's under its own host.
    let response = client()
        .get(format!("{origin}/.well-known/api-catalog"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/linkset+json"
    );
    let catalog: Value = response.json().await.unwrap();
    let port = origin.rsplit(':').next().unwrap();
    assert_eq!(
        catalog,
        json!({"linkset": [{
            "anchor": format!("{origin}/.well-known/api-catalog"),
            "item": [
                {"href": billing, "type": "application/json", "title": "billing"},
                {"href": search, "type": "application/json", "title": "search"},
                {"href": format!("http://hosted.example:{port}/.well-known/agent-card.json"),
                 "type": "application/json", "title": "hosted"},
            ]
        }]})
    );
}

/// The shorthand without a file: `--card URL --public-url … --card-sign-key` re-signs the
/// card, and the reference SDK's verifier accepts the signature (ES256 and RS256).
#[tokio::test]
async fn the_shorthand_serves_a_resigned_card() {
    let source = CardSource::start().await;
    source.set(Some(agent_card("signed")));
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/card-signing");
    for (key, kid) in [
        ("p256.sec1.pem", "ec-key"),
        ("rsa2048.pkcs8.pem", "rsa-key"),
    ] {
        let key = fixtures.join(key);
        let gateway = start(&[
            "--backend",
            "http://127.0.0.1:9",
            "--card",
            &source.url,
            "--public-url",
            "https://agents.example.com/",
            "--card-sign-key",
            key.to_str().unwrap(),
            "--card-sign-kid",
            kid,
        ])
        .await;
        let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
        let (_, card) = until(&format!("{origin}/.well-known/agent-card.json"), |s, _| {
            s == 200
        })
        .await;
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            "https://agents.example.com/a2a/jsonrpc"
        );
        // Re-signed cards hold only the schema's members: what verifiers reconstruct.
        assert!(card.get("x-vendor-extra").is_none(), "{card}");
        let signatures = card["signatures"].as_array().unwrap();
        assert_eq!(signatures.len(), 1, "{card}");
        let pem = std::fs::read_to_string(&key).unwrap();
        let mut tampered = card.clone();
        tampered["supportedInterfaces"][0]["url"] = json!("https://evil.example/a2a/jsonrpc");
        let verdicts = peer::sdk_verify(&[(kid, &pem)], &[card.clone(), tampered]).verdicts;
        assert_eq!(verdicts[0], "valid", "{kid}: {card}");
        assert!(verdicts[1].starts_with("invalid"), "{kid}: {}", verdicts[1]);
    }
}

/// GetExtendedAgentCard through a route with a card: forwarded with the caller's
/// credentials, and its interfaces, signatures and skills treated as the public card's.
#[tokio::test]
async fn extended_cards_get_the_public_cards_treatment() {
    use a2a_gateway::proto::{AgentCard, AgentCardSignature, AgentInterface, AgentSkill};
    use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
    let skill = |id: &str| AgentSkill {
        id: id.to_owned(),
        name: id.to_owned(),
        description: "d".to_owned(),
        tags: vec!["t".to_owned()],
        ..Default::default()
    };
    let extended = AgentCard {
        name: "extended".to_owned(),
        description: "for callers with credentials".to_owned(),
        version: "1.0.0".to_owned(),
        supported_interfaces: vec![AgentInterface {
            url: "http://10.0.0.7:50051".to_owned(),
            protocol_binding: "GRPC".to_owned(),
            protocol_version: "1.0".to_owned(),
            ..Default::default()
        }],
        skills: vec![skill("public"), skill("internal")],
        signatures: vec![AgentCardSignature {
            protected: "eyJhbGciOiJFUzI1NiJ9".to_owned(),
            signature: "c2ln".to_owned(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let backend = TestBackend::new(move |request| match request {
        Request::Unary(UnaryRequest::GetExtendedAgentCard(_)) => {
            Answer::Reply(Reply::GetExtendedAgentCard(extended.clone()))
        }
        _ => Answer::Error(tonic::Status::unimplemented("cards only")),
    });
    let addr = backend.spawn().await;
    let file = TempFile::new("json", &agent_card("public").to_string());
    let config = TempFile::new(
        "toml",
        &format!(
            "[[route]]\nname = \"x\"\npath = \"/agents/x\"\nbackend = \"http://{addr}\"\n\
             [route.card]\nsource = \"{}\"\nskills = [\"public\"]\n",
            file.path()
        ),
    );
    let gateway = start(&["--config", config.path()]).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let endpoint = format!("{origin}/agents/x/a2a/jsonrpc");
    let reply: Value = client()
        .post(&endpoint)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("authorization", "Bearer caller-token")
        .body(request(json!(1), "GetExtendedAgentCard", json!({})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let card = &reply["result"];
    assert_eq!(card["name"], "extended", "{reply}");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert!(card.get("signatures").is_none(), "{card}");
    assert_eq!(card["skills"].as_array().unwrap().len(), 1, "{card}");
    let seen = backend.last();
    assert_eq!(
        seen.metadata.get("authorization").unwrap(),
        "Bearer caller-token"
    );
}

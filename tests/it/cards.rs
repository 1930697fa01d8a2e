//! Discovery through the gateway process: each route's agent card from its source (a URL
//! that changes and goes down, a file), rewritten to name the route's JSON-RPC endpoint,
//! with 503 before the first card, ETag/304/HEAD, the last good card while the source is
//! down, re-signed cards the reference SDK's verifier accepts, the API catalog listing
//! every card, and the one-route shorthand (`--card`, `--public-url`) without a file.

use crate::harness;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::process::*;
use harness::*;
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
            fronts = ["HTTP+JSON", "JSONRPC", "GRPC"]
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

    // The catalog: every card, the host route's under its own host; then each route's
    // entry, anchored at its card, linking every front it enables in the card's order.
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
    let hosted = format!("http://hosted.example:{port}");
    let hosted_card = format!("{hosted}/.well-known/agent-card.json");
    assert_eq!(
        catalog,
        json!({"linkset": [
            {
                "anchor": format!("{origin}/.well-known/api-catalog"),
                "item": [
                    {"href": billing, "type": "application/json", "title": "billing"},
                    {"href": search, "type": "application/json", "title": "search"},
                    {"href": hosted_card, "type": "application/json", "title": "hosted"},
                ]
            },
            {"anchor": billing, "describes": [
                {"href": format!("{origin}/agents/billing/a2a/jsonrpc"), "title": "JSONRPC"},
            ]},
            {"anchor": search, "describes": [
                {"href": format!("{origin}/agents/search/a2a/jsonrpc"), "title": "JSONRPC"},
            ]},
            {"anchor": hosted_card, "describes": [
                {"href": format!("{hosted}/a2a/rest"), "title": "HTTP+JSON"},
                {"href": format!("{hosted}/a2a/jsonrpc"), "title": "JSONRPC"},
                {"href": hosted, "title": "GRPC"},
            ]},
        ]})
    );
    // The host route's card lists the same URLs (its file source is read at the start).
    let host = format!("hosted.example:{port}");
    let mut card = Value::Null;
    for _ in 0..100 {
        let (status, body) = get(&origin, "/.well-known/agent-card.json", &[("host", &host)]).await;
        if status == 200 {
            card = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let urls: Vec<_> = (card["supportedInterfaces"].as_array().unwrap().iter())
        .map(|interface| interface["url"].clone())
        .collect();
    // The same, the gRPC front's as a URI in the catalog and as `host:port` in the card.
    let listed = catalog["linkset"][3]["describes"].as_array().unwrap();
    let listed: Vec<_> = (listed.iter())
        .map(|link| match link["title"] == "GRPC" {
            true => json!(link["href"].as_str().unwrap().trim_start_matches("http://")),
            false => link["href"].clone(),
        })
        .collect();
    assert_eq!(urls, listed);
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

/// GETs `path` of `origin` with `headers` (a `Host` among them replaces the real one).
async fn get(origin: &str, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = client().get(format!("{origin}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A signing gateway names only the configured origin, whatever the request's host
/// headers say: the public URL, or (`--allowed-hosts`) the allowed host the request used;
/// any other host is refused on every route path and the catalog, not on the probes.
#[tokio::test]
async fn signed_cards_name_only_the_vouched_origin() {
    let source = CardSource::start().await;
    source.set(Some(agent_card("signed")));
    let key = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/card-signing/p256.sec1.pem");
    let key = key.to_str().unwrap();
    let signing = [
        "--card",
        &source.url,
        "--card-sign-key",
        key,
        "--card-sign-kid",
        "ec-key",
    ];
    let with = |more: &[&'static str]| {
        let mut args = vec!["--backend", "http://127.0.0.1:9"];
        args.extend(signing);
        args.extend(more);
        args
    };
    let public = start(&with(&[
        "--public-url",
        "https://agents.example.com",
        "--trust-forwarded",
    ]))
    .await;
    let origin = public.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    until(&format!("{origin}{CARD}"), |s, _| s == 200).await;
    let mut cards = Vec::new();
    for headers in [
        &[("host", "evil.example")][..],
        &[
            ("host", "evil.example"),
            ("forwarded", "host=evil.example;proto=http"),
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-proto", "http"),
        ],
    ] {
        let (status, card) = get(&origin, CARD, headers).await;
        assert_eq!(status, 200, "{headers:?}");
        assert_eq!(
            card["supportedInterfaces"][0]["url"], "https://agents.example.com/a2a/jsonrpc",
            "{headers:?}"
        );
        assert!(!card.to_string().contains("evil"), "{card}");
        cards.push(card);
    }

    let allowed = start(&with(&["--allowed-hosts", "gw.example,gw.example:8443"])).await;
    let origin = allowed.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    let started = Instant::now();
    while get(&origin, CARD, &[("host", "gw.example")]).await.0 != 200 {
        assert!(started.elapsed() < Duration::from_secs(5), "no card");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (host, url) in [
        ("gw.example", "http://gw.example/a2a/jsonrpc"),
        ("GW.example:8443", "http://gw.example:8443/a2a/jsonrpc"),
    ] {
        let (status, card) = get(&origin, CARD, &[("host", host)]).await;
        assert_eq!(status, 200, "{host}: {card}");
        assert_eq!(card["supportedInterfaces"][0]["url"], url);
        cards.push(card);
    }
    let verdicts = peer::sdk_verify(
        &[("ec-key", &std::fs::read_to_string(key).unwrap())],
        &cards,
    );
    assert_eq!(verdicts.verdicts, ["valid"; 4], "{cards:?}");

    // Any other host (the listener's own address included) is refused everywhere but the
    // probes; the refusal does not quote the host.
    for host in ["evil.example", "gw.example:80", &origin["http://".len()..]] {
        let (status, body) = get(&origin, CARD, &[("host", host)]).await;
        assert_eq!(status, 400, "{host}");
        let why = body["error"].as_str().unwrap();
        assert!(
            why.contains("allowed-hosts") && !why.contains(host),
            "{why}"
        );
        let (status, _) = get(&origin, "/.well-known/api-catalog", &[("host", host)]).await;
        assert_eq!(status, 400, "catalog, {host}");
        let rpc = client()
            .post(format!("{origin}/a2a/jsonrpc"))
            .header("host", host)
            .header("content-type", "application/json")
            .body(request(json!(1), "GetTask", json!({"id": "t"})))
            .send()
            .await
            .unwrap();
        assert_eq!(rpc.status(), 400, "JSON-RPC, {host}");
        for probe in ["/healthz", "/metrics"] {
            let response = client()
                .get(format!("{origin}{probe}"))
                .header("host", host)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{probe}, {host}");
        }
    }
}

const CARD: &str = "/.well-known/agent-card.json";

/// A request's extra headers.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// With `--trust-forwarded` the origin is what the trusted proxies appended (the last
/// element, or `--trusted-proxy-hops` from the end), never the client's forged first one;
/// without a valid trusted element the card names the address the client reached (`LOCAL`
/// below), never the `Host`.
#[tokio::test]
async fn forwarded_origins_come_from_the_trusted_end() {
    let file = TempFile::new("json", &agent_card("forwarded").to_string());
    let base = [
        "--backend",
        "http://127.0.0.1:9",
        "--card",
        file.path(),
        "--trust-forwarded",
    ];
    let one = start(&base).await;
    let two = start(&[&base[..], &["--trusted-proxy-hops", "2"]].concat()).await;
    let host = ("host", "pod.internal:8080");
    let rows: &[(&Running, Headers, &str)] = &[
        (
            &one,
            &[
                host,
                (
                    "forwarded",
                    "host=evil.example;proto=http, host=gw.example;proto=https",
                ),
            ],
            "https://gw.example",
        ),
        (
            &one,
            &[
                host,
                ("forwarded", "host=evil.example"),
                ("forwarded", "host=gw.example;proto=https"),
            ],
            "https://gw.example",
        ),
        (
            &one,
            &[
                host,
                ("x-forwarded-host", "evil.example, gw.example"),
                ("x-forwarded-proto", "http, https"),
            ],
            "https://gw.example",
        ),
        (
            &one,
            &[host, ("forwarded", "host=evil.example, host=\"a@b\"")],
            LOCAL,
        ),
        (
            &one,
            &[host, ("x-forwarded-host", "evil.example, gw.example/x")],
            LOCAL,
        ),
        (
            &two,
            &[
                host,
                (
                    "forwarded",
                    "host=evil.example, host=gw.example;proto=https, host=lb",
                ),
            ],
            "https://gw.example",
        ),
        (
            &two,
            &[host, ("x-forwarded-host", "evil.example, gw.example, lb")],
            "http://gw.example",
        ),
        // Fewer elements than trusted hops: none is the proxies'.
        (&two, &[host, ("forwarded", "host=evil.example")], LOCAL),
    ];
    for (gateway, headers, expected) in rows {
        let origin = gateway.1.trim_end_matches("/a2a/jsonrpc");
        let expected = if *expected == LOCAL { origin } else { expected };
        let (status, card) = get(origin, CARD, headers).await;
        assert_eq!(status, 200, "{headers:?}");
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            format!("{expected}/a2a/jsonrpc"),
            "{headers:?}"
        );
    }
}

/// Marks the expected origin "the address the client reached" (the gateway's own).
const LOCAL: &str = "local";

/// Without `--public-url` or `--allowed-hosts` the card names the address the client
/// reached, whatever `Host` the request gives (`evil.example` included: design principle 8),
/// and renders for origins the configuration does not vouch for are not kept: 1000
/// distinct `Host`s leave the kept renders as they were (`/metrics`).
#[tokio::test]
async fn distinct_hosts_do_not_grow_the_card_cache() {
    let file = TempFile::new("json", &agent_card("hosts").to_string());
    let gateway = start(&["--backend", "http://127.0.0.1:9", "--card", file.path()]).await;
    let origin = gateway.1.trim_end_matches("/a2a/jsonrpc").to_owned();
    for n in 0..1000 {
        let host = format!("h{n}.example");
        let (status, card) = get(&origin, CARD, &[("host", &host)]).await;
        assert_eq!(status, 200);
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            format!("{origin}/a2a/jsonrpc")
        );
    }
    let metrics = client()
        .get(format!("{origin}/metrics"))
        .send()
        .await
        .unwrap();
    let metrics = metrics.text().await.unwrap();
    for line in [
        "a2a_gateway_card_renders_kept{route=\"default\"} 0\n",
        "a2a_gateway_card_answers_total{route=\"default\",render=\"new\"} 1000\n",
        "a2a_gateway_card_answers_total{route=\"default\",render=\"kept\"} 0\n",
    ] {
        assert!(metrics.contains(line), "{line}: {metrics}");
    }
}

/// GetExtendedAgentCard through a route that configures no card: the agent's internal
/// addresses never reach the client, in the v1.0 and in the v0.3 form.
#[tokio::test]
async fn extended_cards_name_the_gateway_on_every_route() {
    use a2a_gateway::proto::{AgentCard, AgentInterface};
    use a2a_gateway::protocol::ops::{Reply, Request, UnaryRequest};
    let extended = AgentCard {
        name: "extended".to_owned(),
        description: "d".to_owned(),
        version: "1.0.0".to_owned(),
        supported_interfaces: vec![AgentInterface {
            url: "http://10.0.0.7:50051".to_owned(),
            protocol_binding: "GRPC".to_owned(),
            protocol_version: "1.0".to_owned(),
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
    let gateway = start(&["--backend", &format!("http://{addr}")]).await;
    let endpoint = gateway.1.clone();
    let call = |version: Option<&'static str>, method: &'static str| {
        let mut post = client()
            .post(&endpoint)
            .header("content-type", "application/json")
            .body(request(json!(1), method, json!({})));
        if let Some(version) = version {
            post = post.header("a2a-version", version);
        }
        async move { post.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let v1 = call(Some("1.0"), "GetExtendedAgentCard").await;
    assert_eq!(
        v1["result"]["supportedInterfaces"],
        json!([{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]),
        "{v1}"
    );
    let v03 = call(None, "agent/getAuthenticatedExtendedCard").await;
    let card = &v03["result"];
    assert_eq!(card["url"], endpoint, "{v03}");
    assert_eq!(card["preferredTransport"], "JSONRPC", "{v03}");
    for reply in [&v1, &v03] {
        assert!(!reply.to_string().contains("10.0.0.7"), "{reply}");
    }
    // The well-known card stays unserved: the route configures none.
    let origin = endpoint.trim_end_matches("/a2a/jsonrpc");
    assert_eq!(get(origin, CARD, &[]).await.0, 404);
}

/// Two `Host` fields name no one host: the card is refused (400) rather than built for
/// the first of them, which a proxy in front may not have judged by.
#[tokio::test]
async fn two_hosts_get_no_card() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let file = TempFile::new("json", &agent_card("hosts").to_string());
    let gateway = start(&["--backend", "http://127.0.0.1:9", "--card", file.path()]).await;
    let addr = gateway
        .1
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    for hosts in [&["gw.example"][..], &["evil.example", "gw.example"]] {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let mut head = format!("GET {CARD} HTTP/1.1\r\nconnection: close\r\n");
        for host in hosts {
            head.push_str(&format!("host: {host}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        let expected = if hosts.len() == 1 {
            "HTTP/1.1 200"
        } else {
            "HTTP/1.1 400"
        };
        assert!(answer.starts_with(expected), "{hosts:?}: {answer}");
        assert!(!answer.contains("evil.example"), "{hosts:?}: {answer}");
    }
}

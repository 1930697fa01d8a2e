//! The edge stack (`front::layers`) on real sockets: request ids generated or taken from
//! the client, echoed and forwarded; a panicking handler answered with JSON-RPC -32603
//! while the server goes on serving; requests without one valid `Host` refused.

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

/// hyper's HTTP/1.1 connection tells a cleartext connection's protocol from its first bytes;
/// a request whose first byte could also begin HTTP/2's preface is answered as HTTP/1.1.
#[tokio::test]
async fn requests_that_begin_like_http2_are_answered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_backend, url) = setup(|_| Answer::Reply(card())).await;
    let url: http::Uri = url.parse().unwrap();
    let authority = url.authority().unwrap().as_str().to_owned();
    let head = format!(
        "POST {} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\n\
         a2a-version: 1.0\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{CARD_REQUEST}",
        url.path(),
        CARD_REQUEST.len()
    );
    let mut stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
    // "P" begins the preface too. Most likely the gateway has looked at it alone by the
    // time the rest arrives; either way the answer must be the same.
    stream.write_all(&head.as_bytes()[..1]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    stream.write_all(&head.as_bytes()[1..]).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(answer.contains(r#""name":"n""#), "{answer}");
}

/// HTTP/2 with prior knowledge on a cleartext connection is served once the whole preface
/// (RFC 9113 section 3.4) has arrived, also in pieces that stop before the HTTP/1.1 parser
/// can tell (here after "PRI"); a preface cut after its version, where the parser must
/// decide, gets HTTP/1.1's 400 and a closed connection rather than a wait.
#[tokio::test]
async fn http2_prior_knowledge_is_told_by_its_whole_preface() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_backend, url) = setup(|_| Answer::Reply(card())).await;
    let url: http::Uri = url.parse().unwrap();
    let authority = url.authority().unwrap().as_str().to_owned();
    // The preface, then an empty SETTINGS frame (RFC 9113 section 6.5).
    let start = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    for (cut, http2) in [(None, true), (Some(3), true), (Some(16), false)] {
        let mut stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let (first, rest) = start.split_at(cut.unwrap_or(start.len()));
        stream.write_all(first).await.unwrap();
        if !rest.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            stream.write_all(rest).await.unwrap();
        }
        let mut answer = vec![0; 9];
        stream.read_exact(&mut answer).await.unwrap();
        if http2 {
            // The server's SETTINGS frame: type 4 on stream 0, not an acknowledgement.
            assert_eq!(answer[3..], [4, 0, 0, 0, 0, 0], "cut {cut:?}: {answer:?}");
        } else {
            stream.read_to_end(&mut answer).await.unwrap();
            let answer = String::from_utf8_lossy(&answer);
            assert!(answer.starts_with("HTTP/1.1 400 "), "cut {cut:?}: {answer}");
        }
    }
}

/// RFC 9112 section 3.2: a request with two `Host` fields, an invalid one, or none over
/// HTTP/1.1 gets 400 on every path (the JSON-RPC endpoint, the card, the probes) and never
/// reaches the agent; HTTP/1.0 needs none, and a fully qualified name's trailing dot is valid.
#[tokio::test]
async fn requests_without_one_valid_host_are_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (backend, url) = setup(|_| Answer::Reply(card())).await;
    let url: http::Uri = url.parse().unwrap();
    let authority = url.authority().unwrap().as_str().to_owned();
    let rpc_path = url.path().to_owned();
    let card_path = rpc_path.replace("/a2a/jsonrpc", "/.well-known/agent-card.json");
    let status_of = |head: String| {
        let authority = authority.clone();
        async move {
            let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            // `Connection: close` in every head: the answer ends with the connection.
            stream.read_to_end(&mut answer).await.unwrap();
            let answer = String::from_utf8_lossy(&answer).into_owned();
            let status: u16 = answer.split(' ').nth(1).unwrap().parse().unwrap();
            (status, answer)
        }
    };
    let rpc = |hosts: &str, version: &str| {
        format!(
            "POST {rpc_path} HTTP/{version}\r\n{hosts}content-type: application/json\r\n\
             a2a-version: 1.0\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{CARD_REQUEST}",
            CARD_REQUEST.len()
        )
    };
    let get = |path: &str, hosts: &str| {
        format!("GET {path} HTTP/1.1\r\n{hosts}connection: close\r\n\r\n")
    };
    let one = format!("host: {authority}\r\n");
    for hosts in [
        format!("{one}{one}"),
        "host: a@b\r\n".to_owned(),
        "host: gw.example:port\r\n".to_owned(),
        "host: \r\n".to_owned(),
        String::new(),
    ] {
        for head in [
            rpc(&hosts, "1.1"),
            get(&card_path, &hosts),
            get("/healthz", &hosts),
        ] {
            let (status, answer) = status_of(head.clone()).await;
            assert_eq!(status, 400, "{head:?}: {answer}");
            assert!(answer.contains("Host"), "{answer}");
        }
    }
    assert_eq!(
        backend.calls(),
        0,
        "a refused request never reaches the agent"
    );
    for head in [
        rpc(&one, "1.1"),
        rpc("", "1.0"),
        rpc("host: gw.example.\r\n", "1.1"),
    ] {
        let (status, answer) = status_of(head.clone()).await;
        assert_eq!(status, 200, "{head:?}: {answer}");
    }
    assert_eq!(backend.calls(), 3);
}

/// Over HTTP/2 a request names its host in `:authority` and may send `Host` too: when they
/// differ (which one a proxy in front judged by is unknown) it gets 400 (RFC 9113 8.3.1);
/// when they agree, or `Host` is absent, it is served.
#[tokio::test]
async fn an_http2_authority_and_host_that_differ_are_refused() {
    let (backend, url) = setup(|_| Answer::Reply(card())).await;
    let url: http::Uri = url.parse().unwrap();
    let authority = url.authority().unwrap().as_str().to_owned();
    let tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let status = |host: Option<&str>| {
        let mut client = client.clone();
        let mut request = http::Request::post(url.to_string())
            .header("content-type", "application/json")
            .header("a2a-version", "1.0");
        if let Some(host) = host {
            request = request.header("host", host);
        }
        let request = request.body(()).unwrap();
        async move {
            client = client.ready().await.unwrap();
            let (response, mut body) = client.send_request(request, false).unwrap();
            body.send_data(CARD_REQUEST.into(), true).unwrap();
            response.await.unwrap().status().as_u16()
        }
    };
    assert_eq!(status(Some("other.example")).await, 400);
    assert_eq!(
        backend.calls(),
        0,
        "a refused request never reaches the agent"
    );
    assert_eq!(status(Some(&authority)).await, 200);
    assert_eq!(status(None).await, 200);
    assert_eq!(backend.calls(), 2);
}

/// The request id echoed to an HTTP/2 client is a never-indexed literal (RFC 7541 §6.2.3),
/// whether the gateway made it or the client sent it: it is new on every call, so indexing
/// it would grow the connection's HPACK table per response and evict the fixed headers.
/// Read from the raw frames, since an HPACK decoder does not tell how a field was sent.
#[tokio::test]
async fn request_ids_echoed_over_http2_stay_out_of_the_hpack_table() {
    use crate::harness::hostile::frames::{self, hpack};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_backend, url) = setup(|_| Answer::Reply(card())).await;
    let url: http::Uri = url.parse().unwrap();
    let authority = url.authority().unwrap().as_str().to_owned();
    let mut tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    tcp.write_all(&frames::settings(&[])).await.unwrap();
    let mut heads = Vec::new();
    for call in 0..6u32 {
        let stream = 2 * call + 1;
        let mut block = Vec::new();
        hpack::indexed(&mut block, 3); // :method: POST
        hpack::indexed(&mut block, 6); // :scheme: http
        hpack::literal(&mut block, b":path", url.path().as_bytes());
        hpack::literal(&mut block, b":authority", authority.as_bytes());
        hpack::literal(&mut block, b"content-type", b"application/json");
        hpack::literal(&mut block, b"a2a-version", b"1.0");
        if call % 2 == 1 {
            let id = format!("client-id-{call}");
            hpack::literal(&mut block, b"x-request-id", id.as_bytes());
        }
        tcp.write_all(&frames::headers(stream, &block, false))
            .await
            .unwrap();
        tcp.write_all(&frames::data(stream, CARD_REQUEST.as_bytes(), true))
            .await
            .unwrap();
        // Frames until this call's reply ends.
        loop {
            let mut head = [0u8; 9];
            tcp.read_exact(&mut head).await.unwrap();
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let (kind, flags) = (head[3], head[4]);
            let id = u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            tcp.read_exact(&mut payload).await.unwrap();
            match kind {
                frames::SETTINGS if flags & frames::ACK == 0 => {
                    tcp.write_all(&frames::settings_ack()).await.unwrap();
                }
                frames::HEADERS if id == stream => {
                    assert_ne!(flags & frames::END_HEADERS, 0, "a head in one frame");
                    heads.push(hpack::representations(&payload).expect("a well-formed block"));
                }
                _ => {}
            }
            if id == stream && flags & frames::END_STREAM != 0 {
                break;
            }
        }
    }
    assert_eq!(heads.len(), 6);
    for (call, head) in heads.iter().enumerate() {
        let never = head
            .iter()
            .filter(|r| **r == hpack::Representation::NeverIndexed)
            .count();
        assert_eq!(never, 1, "call {call}: the x-request-id only: {head:?}");
    }
}

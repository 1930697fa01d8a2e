//! The JSON-RPC endpoint's property: whatever the body, the route's service answers once,
//! with a valid JSON-RPC 2.0 response (or an array of them for a batch, an SSE stream of
//! them for a stream, 204 for notifications), the request's id echoed, in bounded time.
//!
//! The request goes through the route's real service (`server::router`, called with
//! `tower::ServiceExt::oneshot`: path match, body limit, envelope, params decoding,
//! version negotiation, tenant pinning, dispatch, response and SSE writers, card
//! rewriting) in front of `Scripted`, an in-process backend whose answers come from the
//! input and are decoded as the gRPC backend decodes an agent's: protobuf replies and
//! events, status codes and `google.rpc.Status` details through the error table.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http::{HeaderValue, StatusCode};
use http_body_util::BodyExt;
use prost::Message as _;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::Deserializer;
use serde_json::value::RawValue;
use serde_json::Value;
use tower::ServiceExt;

use super::check_response;
use super::model::{BackendScript, ErrorScript, JsonRpcCase, UnaryScript};
use crate::backend::fault::Fault;
use crate::backend::rest::sse::SseParser;
use crate::backend::{Answer, Backend, Call, Error, EventStream, Status};
use crate::card::{CardService, CardSettings, RouteCard, BACKEND_CARD_SOURCE};
use crate::proto::StreamResponse;
use crate::protocol::binding::Binding;
use crate::protocol::details;
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Reply, StreamRequest, UnaryRequest};
use crate::settings::{RouteSettings, Settings};

/// The JSON-RPC path of the fuzzed route.
const PATH: &str = "/a2a/jsonrpc";
/// Longest time one input may take (the backend answers at once: this is a hang).
const BOUND: Duration = Duration::from_secs(10);
/// Events of a scripted stream.
const MAX_EVENTS: usize = 8;

/// `jsonrpc` target: `body` as the request body, with the `A2A-Version: 1.0` header, in
/// front of a backend that answers every operation with its default reply.
pub fn jsonrpc(body: &[u8]) {
    let request = Exchange {
        body: body.to_vec(),
        version: (Some("1.0".to_owned()), None),
        chunks: 1,
        max_body: 1 << 20,
        fixed_tenant: false,
        card: false,
        backend: BackendScript::default(),
    };
    request.run();
}

/// `jsonrpc_model` target: the structure-aware model (`model::JsonRpcCase`).
pub fn jsonrpc_model(case: &JsonRpcCase) {
    let request = Exchange {
        body: case.body_bytes(),
        version: case.version(),
        chunks: usize::from(case.chunks % 8).max(1),
        max_body: case.small_limit.map_or(1 << 20, usize::from),
        fixed_tenant: case.fixed_tenant,
        card: case.card,
        backend: case.backend.clone(),
    };
    request.run();
}

/// One request to the route, and what it runs against.
struct Exchange {
    body: Vec<u8>,
    /// `A2A-Version` header, query string.
    version: (Option<String>, Option<String>),
    chunks: usize,
    max_body: usize,
    fixed_tenant: bool,
    card: bool,
    backend: BackendScript,
}

thread_local! {
    /// One runtime per thread for all inputs: nothing the route does outlives a request.
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

impl Exchange {
    fn run(self) {
        let answer = RUNTIME.with(|runtime| {
            let mut runtime = runtime.borrow_mut();
            let runtime = runtime.get_or_insert_with(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
            });
            runtime.block_on(async {
                tokio::time::timeout(BOUND, self.call())
                    .await
                    .unwrap_or_else(|_| panic!("no answer within {BOUND:?}"))
            })
        });
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_answer(&self.body, self.max_body, &answer)
        }));
        if let Err(panic) = checked {
            eprintln!("request body: {:?}", String::from_utf8_lossy(&self.body));
            std::panic::resume_unwind(panic);
        }
    }

    async fn call(&self) -> Answered {
        let backend: Arc<dyn Backend> = Arc::new(Scripted(self.backend.clone()));
        let card = self.card.then(|| Arc::new(card_service(backend.clone())));
        let mut settings = route_settings().clone();
        settings.max_body = self.max_body;
        settings.tenant = self.fixed_tenant.then(|| "fuzz-tenant".to_owned());
        let shared = crate::route::Shared {
            card,
            ..Default::default()
        };
        let gateway =
            crate::route::handler_over(&settings, backend, shared).expect("the fuzz route builds");
        let service = crate::server::router(gateway, PATH);
        let uri = match &self.version.1 {
            Some(query) => format!("{PATH}?{query}"),
            None => PATH.to_owned(),
        };
        let mut request = http::Request::post(uri)
            .header("content-type", "application/json")
            .header("host", "gateway.example");
        if let Some(version) = &self.version.0 {
            if let Ok(value) = HeaderValue::from_str(version) {
                request = request.header("a2a-version", value);
            }
        }
        let request = request
            .body(chunked(&self.body, self.chunks))
            .expect("a valid request");
        let response = service.oneshot(request).await.expect("infallible");
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let body = response
            .into_body()
            .collect()
            .await
            .expect("response bodies do not fail")
            .to_bytes();
        Answered {
            status,
            content_type,
            body,
        }
    }
}

/// The body in `chunks` pieces of about equal size.
fn chunked(body: &[u8], chunks: usize) -> Body {
    if chunks <= 1 {
        return Body::from(body.to_vec());
    }
    let size = body.len().div_ceil(chunks).max(1);
    let pieces: Vec<Result<Bytes, std::convert::Infallible>> = body
        .chunks(size)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Body::from_stream(futures::stream::iter(pieces))
}

/// A card service for the route: its extended card comes from the backend.
fn card_service(backend: Arc<dyn Backend>) -> CardService {
    let settings = CardSettings {
        source: Some(BACKEND_CARD_SOURCE.to_owned()),
        ..Default::default()
    };
    let route = RouteCard {
        legacy: true,
        route: "fuzz".to_owned(),
        jsonrpc_path: PATH.to_owned(),
        card_path: "/.well-known/agent-card.json".to_owned(),
        public_url: None,
        trust_forwarded: false,
        trusted_proxy_hops: 1,
        allowed_hosts: Vec::new(),
        tls: false,
        host: None,
        fixed_tenant: None,
        binding: Binding::Grpc,
        enforced: Default::default(),
        fronts: vec![Binding::JsonRpc],
        rest_path: "/a2a/rest".to_owned(),
        grpc_port: None,
    };
    CardService::new(&settings, route, Some(backend)).expect("a valid card route")
}

struct Answered {
    status: StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

impl fmt::Debug for Answered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HTTP {} {:?} {}",
            self.status,
            self.content_type,
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// An object's members in order, each with its raw value.
type Members = Vec<(String, Box<RawValue>)>;

/// What the request is, as a reference parser (serde_json) sees it.
enum Sent {
    /// A JSON object: its members when no envelope member repeats.
    Object(Option<Members>),
    /// A non-empty JSON array: each element's members, as for `Object`.
    Batch(Vec<Option<Members>>),
    /// Anything else.
    Other,
}

impl Sent {
    fn of(body: &[u8]) -> Sent {
        match body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => match serde_json::from_slice::<Vec<&RawValue>>(body) {
                Ok(elements) if !elements.is_empty() => Sent::Batch(
                    elements
                        .iter()
                        .map(|e| members(e.get().as_bytes()))
                        .collect(),
                ),
                _ => Sent::Other,
            },
            Some(b'{') if is_object(body) => Sent::Object(members(body)),
            _ => Sent::Other,
        }
    }
}

/// Whether `body` is one JSON object (member values not checked beyond their syntax).
fn is_object(body: &[u8]) -> bool {
    serde_json::from_slice::<BTreeMap<String, IgnoredAny>>(body).is_ok()
}

/// Whether an object's members (from `members`) make a notification: no `id` member.
fn lacks_id(body: &[u8]) -> bool {
    serde_json::from_slice::<BTreeMap<String, IgnoredAny>>(body)
        .is_ok_and(|members| !members.contains_key("id"))
}

/// The members of a JSON object in order, or `None` when it is no object, a value is not
/// valid UTF-8, or a member of the envelope repeats (other names may).
fn members(text: &[u8]) -> Option<Members> {
    struct Visit;
    impl<'de> Visitor<'de> for Visit {
        type Value = Members;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Members::new();
            while let Some((name, value)) = map.next_entry::<String, Box<RawValue>>()? {
                let envelope = ["jsonrpc", "id", "method", "params"].contains(&name.as_str());
                if envelope && out.iter().any(|(n, _)| *n == name) {
                    return Err(serde::de::Error::custom("duplicate member"));
                }
                out.push((name, value));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    let members = de.deserialize_map(Visit).ok()?;
    de.end().ok()?;
    Some(members)
}

/// The id a response must echo for a request with these members (as `id_key`): `Some`
/// when the request names a valid id (string, integer, null), `None` when it names none or
/// an invalid one (the response then says `null`).
fn expected_id(members: &Members) -> Option<String> {
    let (_, id) = members.iter().find(|(name, _)| name == "id")?;
    let text = id.get();
    super::is_valid_id(text).then(|| id_key(text))
}

/// An id's text in a comparable form: `1` and `1.0e0`, `"a"` and `"\u0061"` alike. Ids that
/// serde_json will not read as values (lone surrogates: valid JSON text, not Unicode)
/// compare as text; the gateway echoes ids byte for byte.
fn id_key(raw: &str) -> String {
    serde_json::from_str::<Value>(raw).map_or_else(|_| raw.to_owned(), |v| v.to_string())
}

/// The property, given the request body, the body limit and the answer.
fn check_answer(body: &[u8], max_body: usize, answer: &Answered) {
    if body.len() > max_body {
        // The body was not read: one error, and no id to echo.
        let text = std::str::from_utf8(&answer.body).expect("responses are UTF-8");
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(check_response(text), "null", "{answer:?}");
        return;
    }
    let sent = Sent::of(body);
    let json = answer.content_type.as_deref() == Some("application/json");
    let sse = answer.content_type.as_deref() == Some("text/event-stream");
    match answer.status {
        StatusCode::NO_CONTENT => {
            assert!(answer.body.is_empty(), "{answer:?}");
            // Only notifications go unanswered.
            let notification = match &sent {
                Sent::Object(_) => lacks_id(body),
                Sent::Batch(_) => serde_json::from_slice::<Vec<&RawValue>>(body)
                    .is_ok_and(|all| all.iter().all(|e| lacks_id(e.get().as_bytes()))),
                Sent::Other => false,
            };
            assert!(
                notification,
                "204 for a request that is no notification: {answer:?}"
            );
        }
        StatusCode::OK if json => {
            let text = std::str::from_utf8(&answer.body).expect("responses are UTF-8");
            match &sent {
                Sent::Batch(elements) => {
                    let responses: Vec<&RawValue> = serde_json::from_str(text)
                        .unwrap_or_else(|e| panic!("a batch answer is an array ({e}): {text}"));
                    assert!(!responses.is_empty(), "{text}");
                    assert!(
                        responses.len() <= elements.len(),
                        "more answers than requests"
                    );
                    let mut echoed: Vec<String> = responses
                        .iter()
                        .map(|r| check_response(r.get()))
                        .filter(|id| id != "null")
                        .map(|id| id_key(&id))
                        .collect();
                    let mut named: Vec<String> = elements
                        .iter()
                        .flatten()
                        .filter_map(expected_id)
                        .filter(|id| id != "null")
                        .collect();
                    echoed.sort();
                    named.sort();
                    assert_eq!(echoed, named, "each named id answered once: {text}");
                }
                _ => {
                    let id = check_response(text);
                    if let Sent::Object(Some(members)) = &sent {
                        let expected = expected_id(members).unwrap_or_else(|| "null".into());
                        assert_eq!(id_key(&id), expected, "the id is echoed: {text}");
                    }
                }
            }
        }
        StatusCode::OK if sse => {
            let Sent::Object(members) = &sent else {
                panic!("a stream for a request that is no object: {answer:?}");
            };
            let mut parser = SseParser::new(usize::MAX);
            parser.feed(&answer.body).expect("no limit");
            parser.finish();
            let mut frames = 0;
            let mut ended = false;
            while let Some(event) = parser.next_event() {
                assert!(!ended, "nothing after an error frame: {answer:?}");
                let id = check_response(&event.data);
                if let Some(members) = members {
                    let expected = expected_id(members).unwrap_or_else(|| "null".into());
                    assert_eq!(id_key(&id), expected, "each frame echoes the id");
                }
                ended = event.event == "error";
                frames += 1;
            }
            assert!(
                frames >= 1,
                "a stream carries at least one frame: {answer:?}"
            );
        }
        _ => panic!("not a JSON-RPC answer: {answer:?}"),
    }
}

/// The in-process backend: it answers from its script, decoding replies, events and
/// errors as the gRPC backend decodes an agent's.
struct Scripted(BackendScript);

impl Scripted {
    fn extensions(&self) -> Option<HeaderValue> {
        let bytes = self.0.extensions.as_deref()?;
        HeaderValue::from_bytes(bytes).ok()
    }
}

fn agent_error(script: &ErrorScript) -> Error {
    let code = tonic::Code::from_i32(script.code);
    let data = details::from_status_bytes(&script.details_bytes());
    let error = A2aError::from_backend(ErrorKind::from_grpc(code), &script.message(), data);
    Error::agent(error, Status::Grpc(code))
}

fn undecodable(what: &str, e: &prost::DecodeError) -> Error {
    Fault::BadResponse(format!("the backend's {what} cannot be decoded: {e}")).into()
}

impl Backend for Scripted {
    fn unary(&self, call: Call<UnaryRequest>) -> BoxFuture<'static, Result<Answer<Reply>, Error>> {
        let value = match &self.0.unary {
            UnaryScript::Empty => Ok(call
                .request
                .decode_reply(Bytes::new())
                .expect("an empty message decodes")),
            UnaryScript::Reply(bytes) => call
                .request
                .decode_reply(Bytes::copy_from_slice(bytes))
                .map_err(|e| undecodable("reply", &e)),
            UnaryScript::Error(script) => Err(agent_error(script)),
        };
        let extensions = self.extensions();
        let status = Some(Status::Grpc(tonic::Code::Ok));
        let answer = value.map(|value| Answer {
            value,
            status,
            extensions,
        });
        futures::future::ready(answer).boxed()
    }

    fn stream(
        &self,
        _call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>> {
        let script = &self.0.stream;
        if let Some(refused) = &script.refused {
            return futures::future::ready(Err(agent_error(refused))).boxed();
        }
        let mut events: Vec<Result<StreamResponse, Error>> = script
            .events
            .iter()
            .take(MAX_EVENTS)
            .map(|bytes| StreamResponse::decode(&bytes[..]).map_err(|e| undecodable("event", &e)))
            .collect();
        if let Some(end) = &script.end {
            events.push(Err(agent_error(end)));
        }
        let answer = Answer {
            value: futures::stream::iter(events).boxed(),
            status: Some(Status::Grpc(tonic::Code::Ok)),
            extensions: self.extensions(),
        };
        futures::future::ready(Ok(answer)).boxed()
    }
}

/// The route every case starts from: each deadline `BOUND`, and no push guard (fuzz inputs
/// must not query DNS; the guard's parsing has unit tests).
fn route_settings() -> &'static RouteSettings {
    static SETTINGS: std::sync::OnceLock<RouteSettings> = std::sync::OnceLock::new();
    SETTINGS.get_or_init(|| {
        let bound = format!("{}ms", BOUND.as_millis());
        let mut args = vec!["a2a-gateway", "--backend", "http://fuzz.invalid:1"];
        args.extend(["--push", "pass"]);
        for flag in [
            "--timeout",
            "--stream-timeout",
            "--first-event-timeout",
            "--keepalive",
        ] {
            args.extend([flag, &bound]);
        }
        let mut settings = Settings::load(args).expect("the fuzz route's flags");
        settings.routes.remove(0)
    })
}

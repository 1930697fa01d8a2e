//! The gRPC front ([spec §10](https://a2a-protocol.org/latest/specification/)):
//! `lf.a2a.v1.A2AService` over HTTP/2, on a route's listener (requests whose content type
//! is `application/grpc*`) when the route's `fronts` include `GRPC`. tonic frames the
//! messages (`codec`: the operation table's typed requests in, protobuf replies and
//! events out); a message past `max-body` gets the refusal a JSON-RPC body past it gets
//! (INVALID_REQUEST, in the route's profile), counted and logged as rejected; each call then goes through the same stack as a
//! JSON-RPC call (`call::stack`: authentication from the metadata, tenant, rules, owner,
//! push guard, limits, deadline, the backend), and its errors become gRPC statuses with
//! `google.rpc.Status` details through the error table, in the route's profile (`status`).
//!
//! What differs from JSON-RPC is only the wire: the request arrives decoded (`Params::
//! Decoded`), the reply is written as protobuf (`call::Wire::Grpc`), a client's
//! `grpc-timeout` bounds the call (and is passed on to the agent, `call::deadline`), and a
//! call of `lf.a2a.v1` is a v1.0 call without an `a2a-version` too (the reference SDK's
//! gRPC server checks none). `grpc.health.v1.Health` is the gateway's own (`health`), and so is
//! `grpc.reflection.v1` (`reflection`).

mod codec;
pub(crate) mod health;
pub(crate) mod reflection;
pub(crate) mod status;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::request::Parts;
use http::{HeaderName, HeaderValue};
use hyper::body::{Frame, SizeHint};
use prost::Message as _;
use tonic::codec::{EncodeBody, SingleMessageCompressionOverride};
use tonic::metadata::MetadataValue;

use crate::card::CardService;
use crate::front::call::observe::Watched;
use crate::front::call::{self, Answer, Exchange, Layer, Wire};
use crate::front::dialect::Dialect;
use crate::front::envelope::{client_gone, over_max_body, Params};
use crate::front::limits::{BodyCharge, RouteLimits};
use crate::front::sse::Watch;
use crate::front::Gateway;
use crate::proto::{AgentCard, StreamResponse};
use crate::protocol::error::{A2aError, ErrorKind, Profile};
use crate::protocol::ops::{Op, Reply, Request, TypedRequest};
use crate::protocol::params::EXTENSIONS;
use crate::telemetry::access::CallRecord;

use codec::{Out, OutEncoder};

/// The service's path prefix: a call's path ends with it and the method's name.
pub(crate) const SERVICE_PATH: &str = "/lf.a2a.v1.A2AService/";

const A2A_VERSION: HeaderName = HeaderName::from_static("a2a-version");
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
const GRPC_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");

/// Whether `request` is a gRPC call: HTTP/2 and a content type of `application/grpc` or
/// `application/grpc+…` (gRPC over HTTP/2, "Requests").
pub(crate) fn is_grpc<B>(request: &http::Request<B>) -> bool {
    // The version first: an HTTP/1.1 request (most JSON-RPC calls) is told without a
    // header lookup, and routing asks up to five times per request.
    if request.version() != http::Version::HTTP_2 {
        return false;
    }
    let Some(value) = request.headers().get(http::header::CONTENT_TYPE) else {
        return false;
    };
    let essence = value.as_bytes().split(|&b| b == b';').next().unwrap_or(b"");
    let grpc = b"application/grpc";
    essence.len() >= grpc.len()
        && essence[..grpc.len()].eq_ignore_ascii_case(grpc)
        && matches!(essence.get(grpc.len()), None | Some(b'+'))
}

/// One gRPC call on `gateway`'s route, under the route's `limits`: the method from the
/// path's last segment, the message read by tonic's framing (`Streaming`), the call
/// through its stack, the answer written by tonic's framing (`EncodeBody`).
///
/// Not an `async fn`: the request is taken apart before the future exists, which then
/// holds its head once, not the request too (bytes per call, tests/it/cost_budget.rs).
/// tonic's `server::Grpc` is not used: it copies the head into a request of its own, and
/// boxes the response body once more; it also answers a message past `max-body` itself,
/// where the gateway's own refusal is wanted (counted and logged as the other fronts').
pub fn handle(
    gateway: Arc<Gateway>,
    limits: Option<Arc<RouteLimits>>,
    request: http::Request<Body>,
) -> impl Future<Output = Response> + Send {
    let started = Instant::now();
    let (mut parts, body) = request.into_parts();
    async move {
        // From the head on: a client that leaves while its message arrives is logged too.
        let mut record = CallRecord::start(gateway.route_metrics.name(), &parts, 0, None);
        let method = parts.uri.path().rsplit_once(SERVICE_PATH).map(|(_, m)| m);
        let Some(op) = method.and_then(Op::from_name) else {
            let why = "no such method in lf.a2a.v1.A2AService";
            let err = A2aError::a2a(ErrorKind::MethodNotFound, why);
            return rejected(&gateway, record, &err);
        };
        if let Some(status) = parts
            .headers
            .get(GRPC_ENCODING)
            .and_then(unsupported_encoding)
        {
            record.failed(ErrorKind::from_grpc(status.code()));
            return status.into_http();
        }
        // A call of `lf.a2a.v1` is a v1.0 call; an explicit other version is still refused.
        if !parts.headers.contains_key(A2A_VERSION) {
            (parts.headers).insert(A2A_VERSION, HeaderValue::from_static("1.0"));
        }
        let deadline = match parts.headers.get(GRPC_TIMEOUT).map(grpc_timeout) {
            None => None,
            Some(Some(timeout)) => Some(tokio::time::Instant::now() + timeout),
            Some(None) => {
                let why =
                    "grpc-timeout is not a gRPC timeout (1 to 8 digits and a unit of H, M, S, m, u, n)";
                return rejected(&gateway, record, &A2aError::invalid_request(why));
            }
        };
        let request = match message(op, &gateway, body).await {
            Ok(request) => request,
            Err(Unread::OverLimit) => {
                return rejected(&gateway, record, &over_max_body(gateway.max_body));
            }
            Err(Unread::NotRequest(why)) => {
                let err = A2aError::invalid_params("", &why);
                return rejected(&gateway, record, &err);
            }
            Err(Unread::Malformed(why)) => {
                let why = format!("the gRPC request is malformed: {why}");
                return rejected(&gateway, record, &A2aError::invalid_request(&why));
            }
            Err(Unread::Framing(status)) => {
                // A stream or connection the client broke leaves the record unanswered:
                // the client's leaving is logged.
                let source = std::error::Error::source(&status);
                match source.and_then(|e| e.downcast_ref::<ClientLeft>()) {
                    Some(left) => record.received(left.0),
                    None => record.failed(ErrorKind::from_grpc(status.code())),
                }
                return status.into_http();
            }
        };
        let x = Exchange {
            gateway: &gateway,
            head: &parts,
            limits: limits.as_ref(),
            wire: Wire::Grpc,
            id: None,
            op,
            dialect: Dialect::V1_0,
            in_batch: false,
            started,
            deadline,
            principal: None,
            owner: None,
            record,
        };
        match op.is_streaming() {
            false => match unary(x, request).await {
                Ok((reply, extensions)) => {
                    let encoder = OutEncoder::reply(&reply);
                    let length = Some(tonic::codec::HEADER_SIZE + reply.len());
                    let messages = futures::stream::iter([Ok(Out::Reply(reply))]);
                    answer(encoder, messages, extensions, length)
                }
                Err(status) => status.into_http(),
            },
            true => match stream(x, request).await {
                Ok((events, extensions)) => answer(OutEncoder::events(), events, extensions, None),
                Err(status) => status.into_http(),
            },
        }
    }
}

/// Why a call's message was not read.
enum Unread {
    /// Longer than `max-body`.
    OverLimit,
    /// Not a request of the call's operation: why.
    NotRequest(String),
    /// Not one whole message: cut short, a bad flag, none, or more than one (every
    /// operation takes one): why.
    Malformed(String),
    /// The body could not be read (the stream reset): tonic's status.
    Framing(tonic::Status),
}

/// The call's one message, within `max-body`; a unary call's request body is read to its
/// end (as tonic's server reads it), so a second message is decoded and bounded too.
async fn message(op: Op, gateway: &Gateway, body: Body) -> Result<Box<Request>, Unread> {
    let unread = |status: tonic::Status| match status.code() {
        // tonic's `Streaming` gives OUT_OF_RANGE only for a message longer than the bound
        // (read from its length prefix, before the message is buffered).
        tonic::Code::OutOfRange => Unread::OverLimit,
        // Only the decoder gives INVALID_ARGUMENT (`codec`).
        tonic::Code::InvalidArgument => Unread::NotRequest(status.message().to_owned()),
        // tonic's framing says INTERNAL for what the client sent wrong (an end inside a
        // message, a compression flag other than 0 or 1); its words are its own, not the
        // client's.
        tonic::Code::Internal => Unread::Malformed(status.message().to_owned()),
        _ => Unread::Framing(status),
    };
    let mut messages = codec::requests(op, Arriving(body, 0), gateway.max_body);
    let request = messages.message().await.map_err(unread)?;
    let request = request.ok_or_else(|| Unread::Malformed("no message".to_owned()))?;
    if messages.message().await.map_err(unread)?.is_some() {
        return Err(Unread::Malformed("more than one message".to_owned()));
    }
    messages.trailers().await.map_err(unread)?;
    Ok(request)
}

/// The client's connection or stream broke while its message arrived, after this many of
/// the body's bytes.
#[derive(Debug, thiserror::Error)]
#[error("the client left before its message was whole")]
struct ClientLeft(usize);

/// A call's request body and its bytes so far, whose errors say when the client left
/// (`ClientLeft`): tonic's framing reads a CANCEL of the client's as the body's end, and an
/// end inside a message as malformed, so the client's leaving is told apart before tonic
/// sees it.
struct Arriving(Body, usize);

impl HttpBody for Arriving {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let frame = ready!(Pin::new(&mut self.0).poll_frame(cx));
        if let Some(Ok(frame)) = &frame {
            self.1 += frame.data_ref().map_or(0, Bytes::len);
        }
        Poll::Ready(frame.map(|frame| {
            frame.map_err(|e| match client_gone(&e) {
                true => ClientLeft(self.1).into(),
                false => e.into(),
            })
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// The status of a message compressed with anything but `identity`: the gateway accepts
/// no compression (gRPC's compression spec: UNIMPLEMENTED, naming what it accepts).
fn unsupported_encoding(encoding: &HeaderValue) -> Option<tonic::Status> {
    if encoding.as_bytes() == b"identity" {
        return None;
    }
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert(
        "grpc-accept-encoding",
        MetadataValue::from_static("identity"),
    );
    let why = format!(
        "Content is compressed with `{}` which isn't supported",
        String::from_utf8_lossy(encoding.as_bytes())
    );
    Some(tonic::Status::with_metadata(
        tonic::Code::Unimplemented,
        why,
        metadata,
    ))
}

/// The gRPC response of `messages`, written by tonic's framing with `encoder`, with the
/// agent's activated extensions as `a2a-extensions` metadata; an error among `messages`
/// ends it with its status in the trailers. `length`: a unary reply's framed bytes.
fn answer<S>(
    encoder: OutEncoder,
    messages: S,
    extensions: Option<HeaderValue>,
    length: Option<usize>,
) -> Response
where
    S: Stream<Item = Result<Out, tonic::Status>> + Send + 'static,
{
    let framed = EncodeBody::new_server(
        encoder,
        messages,
        None,
        SingleMessageCompressionOverride::default(),
        None,
    );
    // A unary reply's body says its length as an upper bound (not exact: hyper would add
    // a content-length), so the connection sends it as a whole reply, not as a stream to
    // read ahead on a task of its own (`server::clients::Tracked`): that task made every
    // unary call three more task polls and one more write, its head flushed alone.
    let body = match length {
        Some(length) => Body::new(http_body_util::Limited::new(framed, length)),
        None => Body::new(framed),
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, GRPC_CONTENT_TYPE);
    if let Some(value) = extensions {
        headers.insert(EXTENSIONS, value);
    }
    response
}

/// The status of a call refused before it entered its stack, counted as rejected and
/// logged in its `record`.
fn rejected(gateway: &Gateway, mut record: CallRecord, err: &A2aError) -> Response {
    gateway.route_metrics.rejected(err.kind);
    record.failed(err.kind);
    status::of_error(err, gateway.profile).into_http()
}

/// The message's bytes counted against the gateway's request bytes in flight
/// (`global-max-body-bytes-in-flight`) until the call is answered, as a JSON-RPC body is;
/// tonic has read the message already (within `max-body`), so this bounds what calls hold,
/// not what one reads. A refusal is counted and logged.
fn charge(x: &mut Exchange<'_>, bytes: usize) -> Result<Option<BodyCharge>, tonic::Status> {
    let Some(limits) = x.limits else {
        return Ok(None);
    };
    let mut charge = limits.body_charge();
    match charge.grow_to(bytes) {
        Ok(()) => Ok(Some(charge)),
        Err(refusal) => {
            x.gateway.route_metrics.rejected(refusal.error.kind);
            x.record.failed(refusal.error.kind);
            Err(status::of_refusal(&refusal, x.gateway.profile))
        }
    }
}

/// A unary call through the stack: its reply message and the agent's extensions, or its
/// status. Not an `async fn`: its future would hold the exchange twice, as its argument
/// and as its variable (bytes per call, tests/it/cost_budget.rs).
fn unary<'a>(
    mut x: Exchange<'a>,
    request: Box<Request>,
) -> impl Future<Output = Result<Extended<Vec<u8>>, tonic::Status>> + Send + 'a {
    let profile = x.gateway.profile;
    let bytes_in = encoded_len(&request);
    async move {
        x.record.received(bytes_in);
        let _charge = charge(&mut x, bytes_in)?;
        let answer = call::stack()
            .call(&mut x, Some(Params::Decoded(request)))
            .await;
        match answer {
            Ok(Answer::Json(out, extensions)) => {
                x.record.sent(out.len());
                Ok((out, extensions))
            }
            Ok(Answer::Refused(refusal)) => Err(status::of_refusal(&refusal, profile)),
            Ok(Answer::Unstarted(err, _)) | Err(err) => Err(status::of_error(&err, profile)),
            // Only a JSON-RPC notification is skipped, or answers with a stream.
            Ok(Answer::Skipped | Answer::Stream(_)) => {
                x.record.failed(ErrorKind::Internal);
                let err = A2aError::new(ErrorKind::Internal);
                Err(status::of_error(&err, profile))
            }
        }
    }
}

/// A streaming call through the stack: its events once the first arrived and the agent's
/// extensions, or its status. Not an `async fn`, as `unary`.
fn stream<'a>(
    mut x: Exchange<'a>,
    request: Box<Request>,
) -> impl Future<Output = Result<Extended<Events>, tonic::Status>> + Send + 'a {
    let profile = x.gateway.profile;
    let bytes_in = encoded_len(&request);
    async move {
        x.record.received(bytes_in);
        let _charge = charge(&mut x, bytes_in)?;
        let answer = call::stack()
            .call(&mut x, Some(Params::Decoded(request)))
            .await;
        match answer {
            Ok(Answer::Stream(started)) => {
                let watch = Watched::new(Some(x.record), &x.gateway.route_metrics);
                let events = Events {
                    first: Some(started.first),
                    events: started.events.boxed(),
                    watch,
                    profile,
                    ended: false,
                };
                Ok((events, started.extensions))
            }
            Ok(Answer::Refused(refusal)) => Err(status::of_refusal(&refusal, profile)),
            Ok(Answer::Unstarted(err, _)) | Err(err) => Err(status::of_error(&err, profile)),
            Ok(Answer::Skipped | Answer::Json(..)) => {
                let err = A2aError::new(ErrorKind::Internal);
                Err(status::of_error(&err, profile))
            }
        }
    }
}

/// The protobuf size of a request, for the access line's bytes in.
fn encoded_len(request: &Request) -> usize {
    match request {
        Request::Unary(r) => r.encoded_len(),
        Request::Stream(r) => r.encoded_len(),
    }
}

/// An answer and the agent's activated extensions (`a2a-extensions`).
type Extended<T> = (T, Option<HeaderValue>);

/// A stream's events for tonic: the first, then the rest, each counted by the call's
/// observer; an error ends the stream with its status.
pub(crate) struct Events {
    first: Option<Box<StreamResponse>>,
    events: futures::stream::BoxStream<'static, Result<StreamResponse, A2aError>>,
    watch: Watched,
    profile: Profile,
    ended: bool,
}

impl Stream for Events {
    type Item = Result<Out, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let event = match self.first.take() {
            Some(first) => Ok(first),
            None => match futures::ready!(self.events.poll_next_unpin(cx)) {
                Some(Ok(event)) => Ok(Box::new(event)),
                Some(Err(err)) => Err(err),
                None => {
                    self.watch.ended();
                    self.ended = true;
                    return Poll::Ready(None);
                }
            },
        };
        Poll::Ready(Some(match event {
            Ok(event) => {
                self.watch.event(&event);
                self.watch.sent(event.encoded_len(), 1);
                Ok(Out::Event(event))
            }
            Err(err) => {
                self.ended = true;
                self.watch.error(&err);
                Err(status::of_error(&err, self.profile))
            }
        }))
    }
}

/// The reply's protobuf message; an extended card is rewritten by the route's `card`
/// service first, as the JSON-RPC front rewrites it.
pub(crate) fn reply_bytes(
    reply: &Reply,
    card: Option<&CardService>,
    head: &Parts,
) -> Result<Vec<u8>, A2aError> {
    match (reply, card) {
        (Reply::GetExtendedAgentCard(agent_card), Some(service)) => {
            let bad = |e: serde_json::Error| {
                crate::backend::fault::Fault::BadResponse(format!(
                    "the card cannot be rewritten: {e}"
                ))
            };
            let json = serde_json::to_value(agent_card).map_err(bad)?;
            let rewritten = service.rewrite_extended(json, head);
            let rewritten: AgentCard = serde_json::from_value(rewritten).map_err(bad)?;
            Ok(rewritten.encode_to_vec())
        }
        _ => Ok(reply.to_proto()),
    }
}

/// A `grpc-timeout` value: at most 8 digits and a unit (gRPC over HTTP/2, "Requests").
fn grpc_timeout(value: &HeaderValue) -> Option<Duration> {
    let bytes = value.as_bytes();
    let (&unit, digits) = bytes.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_are_read_as_the_grpc_spec_writes_them() {
        let read = |text: &str| grpc_timeout(&HeaderValue::from_str(text).unwrap());
        assert_eq!(read("1S"), Some(Duration::from_secs(1)));
        assert_eq!(
            read("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        assert_eq!(read("250m"), Some(Duration::from_millis(250)));
        assert_eq!(read("7n"), Some(Duration::from_nanos(7)));
        for bad in ["", "S", "100000000S", "1s", "-1S", "1.5S", "1 S"] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_grpc_content_types_over_http2_are_grpc() {
        let request = |kind: &str, version| {
            let mut r = http::Request::new(());
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_str(kind).unwrap(),
            );
            *r.version_mut() = version;
            r
        };
        let h2 = http::Version::HTTP_2;
        for kind in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC; x=y",
        ] {
            assert!(is_grpc(&request(kind, h2)), "{kind}");
        }
        for kind in [
            "application/grpc-web",
            "application/json",
            "application/grpcx",
        ] {
            assert!(!is_grpc(&request(kind, h2)), "{kind}");
        }
        assert!(!is_grpc(&request(
            "application/grpc",
            http::Version::HTTP_11
        )));
    }
}

//! The wire form and version one call is made in: JSON-RPC v1.0, JSON-RPC v0.3 (README
//! "v0.3 clients"), or HTTP+JSON v1.0 (`front::rest`). Everything that differs between
//! them is decided here, once per call: which operation a method names, how params decode,
//! whether `A2A-Version` is negotiated, which extension header is forwarded, which
//! push-URL field a refusal names, and how results, errors and SSE events are written. The
//! v0.3 shapes themselves are the mapping table's (`protocol/legacy.rs`); the envelope's
//! bytes are `envelope`'s, the HTTP+JSON error body `rest::status`'s.

use http::request::Parts;
use http::{HeaderName, HeaderValue};

use crate::backend::fault::Fault;
use crate::card::CardService;
use crate::front::envelope::{error_bytes_as, warn_internal, write_error_object, write_response};
use crate::front::rest::status;
use crate::proto::StreamResponse;
use crate::protocol::binding::Binding;
use crate::protocol::error::{A2aError, Profile};
use crate::protocol::legacy::{self, Method};
use crate::protocol::ops::{Op, Reply, Request};
use crate::protocol::params::{legacy_extensions, legacy_requested, negotiate_version};

/// The wire form and version of one call; a v0.3 call carries its v0.3 method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    V1_0,
    V0_3(Method),
    /// v1.0 over the HTTP+JSON front: bare results, `google.rpc.Status` errors with the
    /// HTTP status of the route's `spec-profile`, SSE of bare `StreamResponse`s.
    Rest(Profile),
}

impl Dialect {
    /// The dialect of a call of method `name` on `head`: v0.3 when the route serves v0.3
    /// clients (`legacy`), `name` is a v0.3 method and the client asks for v0.3 (no
    /// `A2A-Version`, or `0.3`); v1.0 otherwise.
    pub fn of(name: &str, legacy: bool, head: &Parts) -> Dialect {
        match Method::from_name(name) {
            Some(method) if legacy && legacy_requested(&head.headers, head.uri.query()) => {
                Dialect::V0_3(method)
            }
            _ => Dialect::V1_0,
        }
    }

    /// The v1.0 operation that serves the call of method `name`.
    pub fn op(self, name: &str) -> Option<Op> {
        match self {
            Dialect::V1_0 | Dialect::Rest(_) => Op::from_name(name),
            Dialect::V0_3(method) => Some(method.op()),
        }
    }

    /// The version as metrics and logs label it.
    pub fn label(self) -> &'static str {
        match self {
            Dialect::V1_0 | Dialect::Rest(_) => "1.0",
            Dialect::V0_3(_) => "0.3",
        }
    }

    /// The front the call came through.
    pub fn binding(self) -> Binding {
        match self {
            Dialect::V1_0 | Dialect::V0_3(_) => Binding::JsonRpc,
            Dialect::Rest(_) => Binding::HttpJson,
        }
    }

    /// The v0.3 method of a v0.3 call (its own metric counts it).
    pub fn legacy_method(self) -> Option<Method> {
        match self {
            Dialect::V1_0 | Dialect::Rest(_) => None,
            Dialect::V0_3(method) => Some(method),
        }
    }

    /// `params` (their JSON text) decoded into `op`'s typed request.
    pub fn decode(self, op: Op, params: Option<&str>) -> Result<Request, A2aError> {
        match self {
            Dialect::V1_0 | Dialect::Rest(_) => Request::decode(op, params),
            Dialect::V0_3(method) => method.decode(params),
        }
    }

    /// Refuses a v1.0 call in a version the gateway does not serve; a v0.3 call was
    /// recognised by its version already.
    pub fn negotiate(self, head: &Parts) -> Result<(), A2aError> {
        match self {
            Dialect::V1_0 | Dialect::Rest(_) => negotiate_version(&head.headers, head.uri.query()),
            Dialect::V0_3(_) => Ok(()),
        }
    }

    /// Adds what the dialect forwards besides the route's policy: a v0.3 client's
    /// extensions under their v1.0 header name.
    pub fn forward(self, head: &Parts, forwarded: &mut Vec<(HeaderName, HeaderValue)>) {
        if let Dialect::V0_3(_) = self {
            legacy_extensions(&head.headers, forwarded);
        }
    }

    /// The push URL `request` gives the agent, and the params field that holds it, as
    /// this dialect names it.
    pub fn pushed_url(self, request: &Request) -> Option<(&str, &'static str)> {
        crate::push::pushed_url(request, matches!(self, Dialect::V0_3(_)))
    }

    /// The response object of `id` for `reply` (over HTTP+JSON: the bare result). An
    /// extended card is rewritten by the route's `card` service (its endpoint serves v0.3
    /// too).
    pub fn reply_bytes(
        self,
        id: &str,
        reply: &Reply,
        card: Option<&CardService>,
        head: &Parts,
    ) -> Result<Vec<u8>, A2aError> {
        // Written once, straight into the body's buffer.
        let mut out = Vec::with_capacity(reply.json_capacity() + id.len() + 40);
        let written = match (reply, card, self) {
            (Reply::GetExtendedAgentCard(card), Some(service), Dialect::Rest(_)) => {
                serde_json::to_value(card).and_then(|card| {
                    serde_json::to_writer(&mut out, &service.rewrite_extended(card, head))
                })
            }
            // ProtoJSON's `Empty` is `{}` (JSON-RPC's result is `null`, as the reference
            // SDK writes it).
            (Reply::DeleteTaskPushNotificationConfig(empty), _, Dialect::Rest(_)) => {
                crate::protocol::json::write_json(&mut out, empty)
            }
            (_, _, Dialect::Rest(_)) => reply.write_json(&mut out),
            (Reply::GetExtendedAgentCard(card), service, Dialect::V0_3(_)) => {
                let card = extended_card_v03(card, service, head)?;
                write_response(&mut out, Some(id), |out| serde_json::to_writer(out, &card))
            }
            (Reply::GetExtendedAgentCard(card), Some(service), Dialect::V1_0) => {
                write_response(&mut out, Some(id), |out| {
                    let card = serde_json::to_value(card)?;
                    serde_json::to_writer(out, &service.rewrite_extended(card, head))
                })
            }
            _ => write_response(&mut out, Some(id), |out| self.write_result(out, reply)),
        };
        written
            .map_err(|e| Fault::BadResponse(format!("the reply cannot be encoded as JSON: {e}")))?;
        Ok(out)
    }

    /// Appends the result for `reply`: its ProtoJSON, or the v0.3 shape of it.
    fn write_result(self, out: &mut Vec<u8>, reply: &Reply) -> Result<(), serde_json::Error> {
        match self {
            Dialect::V1_0 | Dialect::Rest(_) => reply.write_json(out),
            Dialect::V0_3(method) => method.write_result(out, |v1| reply.write_json(v1)),
        }
    }

    /// A whole error response object of `id` (internal errors are logged); over
    /// HTTP+JSON the `google.rpc.Status` body.
    pub fn error_bytes(self, id: Option<&str>, err: &A2aError) -> Vec<u8> {
        match self {
            Dialect::Rest(profile) => {
                warn_internal(err);
                status::body(err, status::http_status(err.kind, profile), profile)
            }
            _ => error_bytes_as(id, err, &self.error_object(err)),
        }
    }

    /// The JSON-RPC error object of `err`: v0.3 knows fewer codes (`legacy::error`).
    fn error_object(self, err: &A2aError) -> serde_json::Value {
        match self {
            Dialect::V1_0 | Dialect::Rest(_) => err.to_json(),
            Dialect::V0_3(_) => legacy::error(err),
        }
    }

    /// Appends one SSE event carrying the response object of `id` for `event` (over
    /// HTTP+JSON: the bare `StreamResponse`, spec 11.7); on an encoding failure nothing is
    /// appended and the error says why.
    pub fn write_event(
        self,
        out: &mut Vec<u8>,
        id: &str,
        event: &StreamResponse,
    ) -> Result<(), A2aError> {
        let start = out.len();
        out.extend_from_slice(b"data: ");
        let v1 = |out: &mut Vec<u8>| crate::protocol::json::write_json(out, event);
        let written = match self {
            Dialect::Rest(_) => v1(out),
            _ => write_response(out, Some(id), |out| match self {
                Dialect::V0_3(method) => method.write_result(out, v1),
                _ => v1(out),
            }),
        };
        match written {
            Ok(()) => {
                out.extend_from_slice(b"\n\n");
                Ok(())
            }
            Err(e) => {
                out.truncate(start);
                Err(Fault::BadResponse(format!("an event cannot be encoded as JSON: {e}")).into())
            }
        }
    }

    /// Appends the SSE event that ends a stream with `err`: `event: error` in v1.0 (as the
    /// reference SDK writes it; over HTTP+JSON its data is the `google.rpc.Status` body), a
    /// plain `data:` event in v0.3 (as its v0.3 endpoint does).
    pub fn write_error_event(self, out: &mut Vec<u8>, id: &str, err: &A2aError) {
        out.extend_from_slice(match self {
            Dialect::V1_0 | Dialect::Rest(_) => b"event: error\ndata: ",
            Dialect::V0_3(_) => b"data: ",
        });
        match self {
            Dialect::Rest(profile) => {
                let status = status::http_status(err.kind, profile);
                out.extend(status::body(err, status, profile));
            }
            _ => write_error_object(out, Some(id), &self.error_object(err)),
        }
        out.extend_from_slice(b"\n\n");
    }
}

/// The v0.3 form of an extended card (`agent/getAuthenticatedExtendedCard`): rewritten by
/// the route's card service, whose endpoint (the gateway's) serves v0.3.
fn extended_card_v03(
    card: &crate::proto::AgentCard,
    service: Option<&CardService>,
    head: &Parts,
) -> Result<serde_json::Value, A2aError> {
    let card = serde_json::to_value(card)
        .map_err(|e| Fault::BadResponse(format!("the card cannot be encoded as JSON: {e}")))?;
    match service {
        Some(service) => {
            let endpoint = service.endpoint_url(head);
            legacy::card(service.rewrite_extended(card, head), Some(&endpoint))
        }
        None => legacy::card(card, None),
    }
}

//! JSON-RPC batches (spec 9): at most `max-batch-size` members, counted before any is
//! decoded; members run concurrently but boundedly, answered in request order; the reply
//! holds at most `max-batch-reply` bytes of results, later members getting an error in
//! place of theirs.

use std::cell::Cell;
use std::future::{ready, Future, Ready};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use axum::response::{IntoResponse, Response};
use futures::future::Either;
use futures::StreamExt;
use http::StatusCode;
use serde::de::{DeserializeSeed, IgnoredAny, SeqAccess, Visitor};
use serde_json::json;
use serde_json::value::RawValue;

use super::{handle_one, rejected_response, Context, Handled};
use crate::front::envelope::{
    envelope_error, error_bytes, invalid_request, json_response, parse_error, valid_id,
    write_error, Envelope,
};
use crate::front::Gateway;
use crate::protocol::error::{A2aError, ErrorKind, GatewayFault};
use crate::telemetry::access::CallRecord;

/// Batch members in flight at once.
const BATCH_CONCURRENCY: usize = 16;

/// The reply to the batch `bytes`: its members' replies, in order. The request's `record`
/// logs a batch refused whole; otherwise each member is a call logged on its own. Not an
/// `async fn`: the record is not an argument its future would keep.
pub(super) fn handle<'a>(
    gateway: &'a Gateway,
    ctx: &'a Context<'a>,
    bytes: &'a [u8],
    record: CallRecord,
) -> Either<Ready<Response>, impl Future<Output = Response> + Send + 'a> {
    let max = gateway.batch.size;
    let over = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = BatchMembers { max, over: &over }
        .deserialize(&mut de)
        .and_then(|elements| de.end().map(|()| elements));
    let err = match parsed {
        Ok(elements) if !elements.is_empty() => {
            record.discard();
            return Either::Right(members(gateway, ctx, elements));
        }
        Ok(_) => invalid_request("empty batch"),
        Err(_) if over.get() => invalid_request(&format!(
            "the batch has more than {max} members, the limit of this endpoint \
             (max-batch-size); no member was called"
        )),
        Err(e) => parse_error(&e),
    };
    Either::Left(ready(rejected_response(gateway, record, &err)))
}

/// The batch's `elements` called, and their replies in order.
async fn members(gateway: &Gateway, ctx: &Context<'_>, elements: Vec<&RawValue>) -> Response {
    // Members run concurrently, but boundedly: one request must not open a backend call per
    // element at once. `buffered` keeps the answers in request order, and each is added to
    // the reply (or dropped) as it comes, so at most the bound and the members in flight
    // are held.
    // Collected first (at most `max-batch-size` futures): a lazy map here makes the
    // handler's future not `Send` for every lifetime, as axum needs.
    // Set once the reply is full: members not yet started are then answered without being
    // called, so a batch whose replies are large costs at most the bound and the members in
    // flight at that moment, not every member's reply.
    let full = AtomicBool::new(false);
    let members: Vec<_> = elements
        .iter()
        .map(|raw| batch_member(gateway, ctx, raw, &full))
        .collect();
    let mut answers = futures::stream::iter(members).buffered(BATCH_CONCURRENCY);
    let mut body = Vec::new();
    while let Some((id, member, made)) = answers.next().await {
        // A member a limit refused answers in the batch; the batch itself is answered.
        let (Handled::Json(mut response, _) | Handled::Refused(_, mut response)) = member else {
            continue;
        };
        if response.is_empty() {
            continue;
        }
        // From the first reply that does not fit on, replies are replaced by an error: the
        // client gets a prefix of results and knows which calls' results it lacks.
        let over = body.len() + response.len() + 2 > gateway.batch.reply;
        if made && (full.load(Relaxed) || over) {
            full.store(true, Relaxed);
            let made = Some(response.len());
            response = reply_too_large(id.as_deref(), made, gateway.batch.reply);
        }
        body.push(if body.is_empty() { b'[' } else { b',' });
        body.extend_from_slice(&response);
    }
    if full.load(Relaxed) {
        tracing::debug!(
            limit = gateway.batch.reply,
            "batch reply bound reached (max-batch-reply)"
        );
    }
    if body.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    body.push(b']');
    json_response(body, None)
}

/// The top-level array of a batch as its members' raw texts, at most `max` of them: the
/// first member past `max` is skipped, sets `over` and stops the parse, so a batch of
/// millions costs a scan of `max + 1` members and no more than `max` slices.
struct BatchMembers<'a> {
    max: usize,
    over: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for BatchMembers<'_> {
    type Value = Vec<&'de RawValue>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BatchMembers<'_> {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC batch")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while members.len() < self.max {
            match seq.next_element::<&'de RawValue>()? {
                Some(member) => members.push(member),
                None => return Ok(members),
            }
        }
        if seq.next_element::<IgnoredAny>()?.is_some() {
            self.over.set(true);
            return Err(serde::de::Error::custom("too many batch members"));
        }
        Ok(members)
    }
}

/// The error in place of a member's reply past the batch reply's bound: of the call made,
/// whose reply had `bytes`, or (`None`) of one not made because the reply was full.
fn reply_too_large(id: Option<&str>, bytes: Option<usize>, max: usize) -> Vec<u8> {
    let message = match bytes {
        Some(bytes) => format!(
            "the call was made, but its reply ({bytes} bytes) does not fit in the batch \
             reply's limit of {max} bytes (max-batch-reply); send it alone or in a smaller batch"
        ),
        None => format!(
            "the call was not made: the batch reply had reached its limit of {max} bytes \
             (max-batch-reply); send it alone or in a smaller batch"
        ),
    };
    let mut error = A2aError::gateway(GatewayFault::ReplyTooLarge, message);
    if let Some(info) = error.data.first_mut() {
        info["metadata"] = json!({"limit": "max-batch-reply", "value": max.to_string()});
    }
    let mut out = Vec::with_capacity(320);
    write_error(&mut out, id, &error);
    out
}

/// One batch member: its id (for an error in place of its reply), what handling it gave,
/// and whether that was a call (not an answer for a member the full reply left uncalled).
async fn batch_member(
    gateway: &Gateway,
    ctx: &Context<'_>,
    raw: &RawValue,
    full: &AtomicBool,
) -> (Option<Box<str>>, Handled, bool) {
    // A member answered with an error without a call: counted, logged, and its bytes.
    let answered = |id: Option<&str>, kind: ErrorKind, out: Vec<u8>| {
        gateway.route_metrics.rejected(kind);
        let mut record = CallRecord::start(
            gateway.route_metrics.name(),
            ctx.request,
            raw.get().len(),
            id,
        );
        record.failed(kind);
        record.sent(out.len());
        Handled::Json(out, None)
    };
    let rejected = |err: A2aError| answered(None, err.kind, error_bytes(None, &err));
    if !raw.get().starts_with('{') {
        let err = invalid_request("each batch element must be a JSON object");
        return (None, rejected(err), true);
    }
    match Envelope::parse(raw.get().as_bytes()) {
        Ok(envelope) => {
            let id = envelope
                .id
                .as_deref()
                .filter(|id| valid_id(id))
                .map(Box::from);
            if full.load(Relaxed) {
                let out = match envelope.id {
                    Some(_) => reply_too_large(id.as_deref(), None, gateway.batch.reply),
                    None => Vec::new(),
                };
                let handled = answered(id.as_deref(), ErrorKind::Internal, out);
                return (id, handled, false);
            }
            let record = CallRecord::start(
                gateway.route_metrics.name(),
                ctx.request,
                raw.get().len(),
                None,
            );
            let handled = handle_one(gateway, ctx, envelope, true, record).await;
            (id, handled, true)
        }
        Err(e) => (None, rejected(envelope_error(&e)), true),
    }
}

//! The relay's callback endpoint (`push-callback-url`), where agents post notifications.
//! A post is authenticated by the token the relay sealed (`X-A2A-Notification-Token`,
//! the header the reference SDK sends a config's token in), which names its route; its
//! body, read up to `push-max-body` (and, as every request body, within
//! `client-body-timeout` and charged to `global-max-body-bytes-in-flight` as it arrives),
//! must be an A2A `StreamResponse` of the sealed task (a message's config, sealed before
//! its task existed: of the message's context, else 403). The token must still be one the
//! agent holds: the route's agent is asked for the task's push configs (`held`), unless
//! this replica found it there within `push-token-cache-ttl` (`verified`), so a token
//! whose config was deleted stops delivering. Then the event goes to the route's `Outbox`
//! for delivery to the client's webhook. Any replica with the key accepts any token it
//! finds held.
//!
//! Answers: 204 accepted, 401 no token, one that does not open, or one the agent no longer
//! holds, 415 a Content-Type other than `application/json` or `application/a2a+json`
//! (parameters allowed), 400 a body that is not a `StreamResponse` of the token's task,
//! 403 an event of another context than a message's token is bound to, 413 a body past
//! the bound, 503 delivery's queues full or closing, the gateway's body bytes in flight at
//! their limit, the agent not answering whether it holds the token, or `MAX_LOOKUPS`
//! such questions in flight (these three with `Retry-After`), 405 anything but POST. Each post gets one access line (`CallRecord`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;

use crate::backend::{Backend, Call};
use crate::front::limits::{BodyCharge, RouteLimits};
use crate::proto::stream_response::Payload;
use crate::proto::{ListTaskPushNotificationConfigsRequest, StreamResponse};
use crate::protocol::error::ErrorKind;
use crate::protocol::ops::{Reply, UnaryRequest};
use crate::push::outbox::{Delivery, Outbox, Refused};
use crate::push::relay::RelaySettings;
use crate::telemetry::access::CallRecord;
use crate::telemetry::{Metrics, PushCallback, RouteMetrics};

/// The header a notification's token comes in (the reference SDK's; the spec names no
/// header for `token`).
pub(crate) const TOKEN_HEADER: &str = "x-a2a-notification-token";

/// The longest `traceparent` passed on to delivery (W3C Trace Context: 55 characters).
const MAX_TRACEPARENT: usize = 64;

/// One relaying route's delivery and counters.
#[derive(Clone)]
pub(crate) struct RouteOutbox {
    pub(crate) outbox: Arc<dyn Outbox>,
    pub(crate) metrics: Arc<RouteMetrics>,
    /// The route's limits, whose gateway-wide body budget a post's body is charged to.
    pub(crate) limits: Option<Arc<RouteLimits>>,
    /// The thread's client of the route's agent (the one the route's calls use), asked
    /// whether it still holds a posted token.
    pub(crate) agent: Arc<dyn Backend>,
    /// How long that question may take: the route's deadline of unary calls (`None`:
    /// `LOOKUP_TIMEOUT`).
    pub(crate) timeout: Option<Duration>,
    /// The route's `set-header` values, sent with the question as with every call to the
    /// agent (an agent may require them).
    pub(crate) set_headers: Vec<(http::HeaderName, HeaderValue)>,
    /// The route's fixed tenant (empty: none), which the question names for a token that
    /// names none (sealed before tokens named their tenant).
    pub(crate) tenant: String,
    /// Questions to the agent this thread may have in flight for the route
    /// (`MAX_LOOKUPS`).
    pub(crate) lookups: Arc<tokio::sync::Semaphore>,
}

/// The callback endpoint: the relay's settings and each relaying route's outbox.
pub(crate) struct Callback {
    settings: Arc<RelaySettings>,
    routes: HashMap<Arc<str>, RouteOutbox>,
    metrics: Arc<Metrics>,
}

/// Why a post was refused: its status, what the agent reads, the count it goes to, and
/// when the agent may try again (`Retry-After`), if it may.
struct Refusal {
    status: StatusCode,
    why: &'static str,
    outcome: PushCallback,
    retry_after: Option<&'static str>,
}

impl Refusal {
    fn new(status: StatusCode, why: &'static str, outcome: PushCallback) -> Refusal {
        Refusal {
            status,
            why,
            outcome,
            retry_after: None,
        }
    }

    /// The same refusal, telling the agent to try again after `seconds`.
    fn retry_after(self, seconds: &'static str) -> Refusal {
        Refusal {
            retry_after: Some(seconds),
            ..self
        }
    }
}

/// The wait a post refused for the gateway's body budget is told (`Retry-After`).
const BUDGET_RETRY_AFTER: &str = "1";

/// The wait a post is told when its agent could not say whether it holds the token.
const LOOKUP_RETRY_AFTER: &str = "5";

/// How long asking the agent may take on a route without a deadline.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The most pages of a task's push configs asked for, and configs read per page: a token
/// not among the first `MAX_PAGES * PAGE_SIZE` is taken as not held (no client registers
/// that many configs for one task; an agent listing more, or endlessly, is not followed).
const MAX_PAGES: usize = 4;
const PAGE_SIZE: usize = 100;

/// Questions to a route's agent each serving thread has in flight at most; a post past
/// them is told to retry (503). Whoever holds a token that opens (also one whose config is
/// gone) can post it as often as it likes, and each post not yet verified asks the agent:
/// this bounds what such posts hold of the gateway and send to the agent.
pub(crate) const MAX_LOOKUPS: usize = 32;

/// What a post past `MAX_LOOKUPS` is told.
const LOOKUPS_BUSY: &str = "too many notifications are being checked with the agent";

/// What a post whose token the agent no longer holds is told.
const REVOKED: &str = "the token's push config is no longer held by the agent";

/// What a post is told when its agent could not say whether it holds the token.
const UNVERIFIED: &str = "the agent could not be asked whether it still holds the token";

impl Callback {
    pub(crate) fn new(
        settings: Arc<RelaySettings>,
        routes: HashMap<Arc<str>, RouteOutbox>,
        metrics: Arc<Metrics>,
    ) -> Callback {
        Callback {
            settings,
            routes,
            metrics,
        }
    }

    /// The path it is served at.
    pub(crate) fn path(&self) -> &str {
        self.settings.callback_path()
    }

    /// Answers one post, and writes its access line (route, path, status, duration,
    /// bytes, why it was refused: nothing of its token or headers).
    pub(crate) async fn handle(&self, request: http::Request<Body>) -> Response {
        let (parts, body) = request.into_parts();
        let mut record = CallRecord::start("", &parts, 0, None);
        let mut bytes_in = 0;
        let (route, answer) = self.accept(&parts, body, &mut bytes_in).await;
        let outcome = match &answer {
            Ok(()) => PushCallback::Accepted,
            Err(refusal) => refusal.outcome,
        };
        match route {
            Some((_, route)) => route.metrics.push_callback(outcome),
            None => self.metrics.push_callback_unrouted(outcome),
        }
        let route = route.map_or("", |(name, _)| &**name);
        let Err(Refusal {
            status,
            why,
            retry_after,
            ..
        }) = answer
        else {
            record.push_callback(route, bytes_in, StatusCode::NO_CONTENT.as_u16(), None);
            return StatusCode::NO_CONTENT.into_response();
        };
        tracing::debug!(route, %status, "push notification refused: {why}");
        record.push_callback(route, bytes_in, status.as_u16(), Some(why));
        let body = serde_json::json!({ "error": why }).to_string();
        record.sent(body.len());
        let mut response = (
            status,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            let allow = HeaderValue::from_static("POST");
            response.headers_mut().insert(http::header::ALLOW, allow);
        }
        if let Some(wait) = retry_after {
            let wait = HeaderValue::from_static(wait);
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, wait);
        }
        response
    }

    /// The post's route, once its token named one, and whether it was handed to delivery;
    /// the body's bytes read are counted in `bytes_in`.
    async fn accept(
        &self,
        parts: &http::request::Parts,
        body: Body,
        bytes_in: &mut usize,
    ) -> (Option<(&Arc<str>, &RouteOutbox)>, Result<(), Refusal>) {
        use PushCallback as Outcome;
        if parts.method != Method::POST {
            let refusal = Refusal::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed here",
                Outcome::BadRequest,
            );
            return (None, Err(refusal));
        }
        let unauthorized = Refusal::new(
            StatusCode::UNAUTHORIZED,
            "no valid notification token",
            Outcome::Unauthorized,
        );
        let headers = &parts.headers;
        // Two tokens name no one sender.
        let mut tokens = headers.get_all(TOKEN_HEADER).iter();
        let token = match (tokens.next(), tokens.next()) {
            (Some(token), None) => token.to_str().ok(),
            _ => None,
        };
        let Some((token, sealed)) =
            token.and_then(|token| Some((token, self.settings.keys.open(token)?)))
        else {
            return (None, Err(unauthorized));
        };
        // A token of a route that no longer relays opens, but has nowhere to go.
        let Some(named) = self.routes.get_key_value(sealed.route.as_str()) else {
            return (None, Err(unauthorized));
        };
        let (route_name, route) = named;
        // A notification is the JSON of a StreamResponse (spec §4.3.3): what is sent as
        // anything else is not one, whatever its bytes.
        if !crate::front::rest::is_a2a_json(headers) {
            let refusal = Refusal::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the Content-Type must be application/a2a+json or application/json",
                Outcome::UnsupportedType,
            );
            return (Some(named), Err(refusal));
        }
        let traceparent = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= MAX_TRACEPARENT)
            .map(str::to_owned);
        // The bytes read are charged as they arrive (as a client's body is), and given back
        // once the event is written anew: a slow post holds only what it sent.
        let mut charge = route.limits.as_ref().map(|limits| limits.body_charge());
        let body = match self.read(body, charge.as_mut(), bytes_in).await {
            Ok(body) => body,
            Err(refusal) => return (Some(named), Err(refusal)),
        };
        let (ids, body) = match event_task(&body) {
            Ok(event) => event,
            Err(why) => {
                let refusal = Refusal::new(StatusCode::BAD_REQUEST, why, Outcome::BadRequest);
                return (Some(named), Err(refusal));
            }
        };
        drop(charge);
        let EventIds {
            task: task_id,
            context,
        } = ids;
        if !sealed.task_id.is_empty() && sealed.task_id != task_id {
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                "the event is not of the token's task",
                Outcome::WrongTask,
            );
            return (Some(named), Err(refusal));
        }
        // A message's config, sealed before its task existed, is bound to the message's
        // context; one of a token from before contexts were sealed is bound to nothing the
        // event can be checked against, and refused too.
        if sealed.task_id.is_empty()
            && (sealed.context_id.is_empty() || sealed.context_id != context)
        {
            let refusal = Refusal::new(
                StatusCode::FORBIDDEN,
                "the event is not of the conversation the token was given for",
                Outcome::WrongTask,
            );
            return (Some(named), Err(refusal));
        }
        let verified = &self.settings.verified;
        if !verified.fresh(token) {
            let tenant = match sealed.tenant.is_empty() {
                true => &route.tenant,
                false => &sealed.tenant,
            };
            let Ok(_lookup) = route.lookups.try_acquire() else {
                let busy = StatusCode::SERVICE_UNAVAILABLE;
                let refusal = Refusal::new(busy, LOOKUPS_BUSY, PushCallback::Unverified)
                    .retry_after(LOOKUP_RETRY_AFTER);
                return (Some(named), Err(refusal));
            };
            if let Err(refusal) = held(route, tenant, &task_id, token).await {
                return (Some(named), Err(refusal));
            }
            verified.insert(token);
        }
        let delivery = Delivery {
            route: route_name.clone(),
            event_key: event_key(&task_id, &body),
            task_id,
            url: sealed.url,
            token: Some(sealed.token).filter(|t| !t.is_empty()),
            authentication: sealed.authentication,
            body,
            traceparent,
        };
        let answer = route
            .outbox
            .enqueue(delivery)
            .map_err(|refused| match refused {
                Refused::Full => Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "delivery queue full",
                    Outcome::Full,
                ),
                Refused::Closed => Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "shutting down",
                    Outcome::Closed,
                ),
            });
        (Some(named), answer)
    }

    /// The body, up to `push-max-body` bytes, each frame charged to `charge` as it comes
    /// and counted in `bytes_in`.
    async fn read(
        &self,
        body: Body,
        mut charge: Option<&mut BodyCharge>,
        bytes_in: &mut usize,
    ) -> Result<Bytes, Refusal> {
        let limit = self.settings.max_body;
        let too_large = || {
            Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "notification larger than push-max-body",
                PushCallback::TooLarge,
            )
        };
        if hyper::body::Body::size_hint(&body)
            .exact()
            .is_some_and(|declared| declared > limit as u64)
        {
            return Err(too_large());
        }
        let mut body = std::pin::pin!(body);
        let mut read = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| {
                Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "the body could not be read",
                    PushCallback::BadRequest,
                )
            })?;
            // Trailers carry no bytes of the event.
            let Ok(data) = frame.into_data() else {
                continue;
            };
            *bytes_in += data.len();
            if read.len() + data.len() > limit {
                return Err(too_large());
            }
            if let Some(charge) = charge.as_deref_mut() {
                charge.grow_to(read.len() + data.len()).map_err(|_| {
                    Refusal::new(StatusCode::SERVICE_UNAVAILABLE, BUDGET, PushCallback::Full)
                        .retry_after(BUDGET_RETRY_AFTER)
                })?;
            }
            read.extend_from_slice(&data);
        }
        Ok(read.freeze())
    }
}

/// Whether the route's agent still holds a push config of task `task_id` (of `tenant`)
/// carrying exactly `token`, asked within the route's deadline; else the post's refusal:
/// 401 when it does not (or the task is gone), 503 when it could not say (never
/// accepted unasked).
///
/// The task's configs are listed rather than one fetched by id: a message's config is
/// sealed before its task exists, with the id the client gave or none, and then the agent
/// chooses it (the reference SDK names it after the task, another agent may not), so the
/// sealed id does not always name the agent's config; the token itself does.
async fn held(
    route: &RouteOutbox,
    tenant: &str,
    task_id: &str,
    token: &str,
) -> Result<(), Refusal> {
    use subtle::ConstantTimeEq;
    let timeout = route.timeout.unwrap_or(LOOKUP_TIMEOUT);
    let deadline = tokio::time::Instant::now() + timeout;
    let unverified = || {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            UNVERIFIED,
            PushCallback::Unverified,
        )
        .retry_after(LOOKUP_RETRY_AFTER)
    };
    let revoked = || Refusal::new(StatusCode::UNAUTHORIZED, REVOKED, PushCallback::Revoked);
    let lookup = async {
        let mut page_token = String::new();
        for _ in 0..MAX_PAGES {
            let list = ListTaskPushNotificationConfigsRequest {
                tenant: tenant.to_owned(),
                task_id: task_id.to_owned(),
                page_size: PAGE_SIZE as i32,
                page_token: std::mem::take(&mut page_token),
            };
            // No header of the post goes to the agent: they are the agent's own.
            let call = Call {
                request: UnaryRequest::ListTaskPushNotificationConfigs(list),
                forwarded: route.set_headers.clone(),
                deadline: Some(deadline),
                trace: None,
            };
            let list = match route.agent.unary(call).await.map(|answer| answer.value) {
                Ok(Reply::ListTaskPushNotificationConfigs(list)) => list,
                Ok(_) => return Err(unverified()),
                // A task gone, or an agent without push notifications, holds no config.
                Err(err) => match err.kind() {
                    ErrorKind::TaskNotFound | ErrorKind::PushNotificationNotSupported => {
                        return Err(revoked())
                    }
                    _ => return Err(unverified()),
                },
            };
            let configs = list.configs.iter().take(PAGE_SIZE);
            if configs.fold(false, |found, config| {
                found | bool::from(config.token.as_bytes().ct_eq(token.as_bytes()))
            }) {
                return Ok(());
            }
            if list.next_page_token.is_empty() {
                break;
            }
            page_token = list.next_page_token;
        }
        Err(revoked())
    };
    tokio::time::timeout_at(deadline, lookup)
        .await
        .unwrap_or_else(|_| Err(unverified()))
}

/// What a post refused for the gateway's body budget is told.
const BUDGET: &str = "the gateway's request body bytes in flight are at their limit";

/// The ids an event names.
struct EventIds {
    task: String,
    context: String,
}

/// The task and context ids of the A2A `StreamResponse` in `body`, and the event written
/// anew from what was read, or why it is none. Delivered as written anew: what is unknown
/// to A2A (extra fields) is not passed on, nor signed.
fn event_task(body: &[u8]) -> Result<(EventIds, Bytes), &'static str> {
    use crate::protocol::json::{nesting_exceeds, MAX_NESTING};
    if nesting_exceeds(body, MAX_NESTING) {
        return Err("the body nests too deep for an A2A StreamResponse");
    }
    let event: StreamResponse =
        serde_json::from_slice(body).map_err(|_| "the body is not an A2A StreamResponse")?;
    let written = serde_json::to_vec(&event).map_err(|_| "the event cannot be written")?;
    let (task, context) = match event.payload {
        Some(Payload::Task(task)) => (task.id, task.context_id),
        Some(Payload::Message(message)) => (message.task_id, message.context_id),
        Some(Payload::StatusUpdate(update)) => (update.task_id, update.context_id),
        Some(Payload::ArtifactUpdate(update)) => (update.task_id, update.context_id),
        None => return Err("the StreamResponse holds no event"),
    };
    match task.is_empty() {
        true => Err("the event names no task"),
        false => Ok((EventIds { task, context }, written.into())),
    }
}

/// The digest that tells a repeated post of an event from a new one: its task and bytes.
fn event_key(task_id: &str, body: &[u8]) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(&(task_id.len() as u64).to_be_bytes());
    context.update(task_id.as_bytes());
    context.update(body);
    let mut key = [0; 32];
    key.copy_from_slice(context.finish().as_ref());
    key
}

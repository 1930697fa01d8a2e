//! Invoke, the innermost layer: the backend call. The forwarded headers (the route's
//! policy, the dialect's, the caller's identity: `auth::forward`), the server span's context, the call itself (`unary`, `stream`),
//! the backend's status for the access line, and a unary reply written for its front: in
//! the call's dialect, or as gRPC's protobuf message (its ids sealed for the caller on a
//! `task-owner` route, its push configs shown as the client registered them on a relaying
//! route). Here a `backend::Error` becomes the client's `A2aError`: the one conversion,
//! through the fault table (`Fault::gateway_fault`) and the error table.

use futures::stream::MapErr;
use futures::{StreamExt, TryStreamExt};

use crate::auth::owner::Caller;
use crate::auth::Principal;
use crate::backend::fault::Fault;
use crate::backend::{self, Backend, Call, EventStream, Status};
use crate::front::call::{Answer, Exchange, Layer, Started, Wire};
use crate::front::grpc;
use crate::proto::{GetTaskPushNotificationConfigRequest, TaskPushNotificationConfig};
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use crate::telemetry::access::CallRecord;

/// A backend's events with their errors as the client's.
pub type ClientEvents = MapErr<EventStream, fn(backend::Error) -> A2aError>;

/// Calls the backend.
pub struct Invoke;

impl Layer<Box<Request>> for Invoke {
    type Events = ClientEvents;

    async fn call(
        &self,
        x: &mut Exchange<'_>,
        request: Box<Request>,
    ) -> Result<Answer<ClientEvents>, A2aError> {
        let gateway = x.gateway;
        let (mut forwarded, dropped) = forwarded(x);
        gateway.metrics.caller_headers_dropped(dropped);
        x.record.request(&request);
        let trace = x.record.propagate(&mut forwarded);
        let deadline = x.deadline;
        match *request {
            Request::Unary(request) => {
                let call = Call {
                    request,
                    forwarded,
                    deadline,
                    trace,
                };
                let owner = x.owner.as_deref();
                let answer = match owner {
                    // Boxed: only a task-owner route carries its (larger) future.
                    Some(owner) => Box::pin(owner.unary(&*gateway.backend, call)).await,
                    None => gateway.backend.unary(call).await,
                };
                let (mut reply, extensions) = answered(&mut x.record, answer)?;
                if !x.answered() {
                    return Ok(Answer::Json(Vec::new(), extensions));
                }
                if let Some(relay) = &gateway.relay {
                    relay.show_out(&mut reply, x.principal.as_ref())?;
                } else if let Some(relayed) = &gateway.relayed_elsewhere {
                    relayed.hide_sealed(&mut reply)?;
                }
                if let Some(owner) = owner {
                    owner.seal_out(&mut reply);
                }
                x.record.reply(&reply);
                let card = gateway.card.as_deref();
                let out = match (x.wire, x.id.as_deref()) {
                    (Wire::Grpc, _) => grpc::reply_bytes(&reply, card, x.head)?,
                    (Wire::Json, id) => {
                        let id = id.unwrap_or_default();
                        x.dialect.reply_bytes(id, &reply, card, x.head)?
                    }
                };
                Ok(Answer::Json(out, extensions))
            }
            Request::Stream(request) => {
                let call = Call {
                    request,
                    forwarded,
                    deadline,
                    trace,
                };
                let owner = x.owner.take();
                // Boxed: the stream's start is a large future, and unary calls should not
                // carry its size (bytes per call, tests/it/cost_budget.rs).
                Ok(Box::pin(stream(&*gateway.backend, call, owner, &mut x.record)).await)
            }
        }
    }
}

/// A unary call's reply and the backend's activated extensions, or the client's error; the
/// backend's status goes to the access line either way.
/// The request headers the agent gets: those the forward policy selects, the dialect's,
/// and the caller's identity; with the identity values that could not be sent.
fn forwarded(x: &Exchange<'_>) -> (Vec<(http::HeaderName, http::HeaderValue)>, usize) {
    let gateway = x.gateway;
    let mut forwarded = gateway.forward.select(&x.head.headers);
    x.dialect.forward(x.head, &mut forwarded);
    let dropped = match &x.principal {
        Some(principal) => gateway.caller_headers.add(principal, &mut forwarded),
        None => 0,
    };
    (forwarded, dropped)
}

/// Whose push configs held by the agent a route's callers may not replace or delete: on a
/// relaying route another caller's (its token says whose); on a route that does not relay,
/// in a gateway where another does, those the relay sealed (registered through that route).
pub(super) enum Keeper<'a> {
    Relay(&'a crate::push::relay::Relay),
    Elsewhere(&'a crate::push::relay::RelaySettings),
}

impl<'a> Keeper<'a> {
    /// The route's keeper, if a relay is configured.
    pub(super) fn of(gateway: &'a crate::front::Gateway) -> Option<Keeper<'a>> {
        match (&gateway.relay, &gateway.relayed_elsewhere) {
            (Some(relay), _) => Some(Keeper::Relay(relay)),
            (None, Some(relayed)) => Some(Keeper::Elsewhere(relayed)),
            (None, None) => None,
        }
    }

    /// Whether `config` is not the caller's (`principal`) to replace or delete.
    fn foreign(&self, config: &TaskPushNotificationConfig, principal: Option<&Principal>) -> bool {
        match self {
            Keeper::Relay(relay) => !relay.owns(config, principal),
            Keeper::Elsewhere(relayed) => relayed.sealed(config),
        }
    }
}

/// A Delete goes on only for a config that is not `foreign` to the caller: the agent cannot
/// tell the callers apart, so it is asked for the config first (with the headers the Delete
/// will carry). A foreign one is answered as an unknown one; a failed lookup fails the
/// Delete. The config's token, as the agent holds it, for the caller to forget.
pub(super) async fn deletable(
    x: &mut Exchange<'_>,
    keeper: &Keeper<'_>,
    delete: &crate::proto::DeleteTaskPushNotificationConfigRequest,
) -> Result<String, A2aError> {
    let held = held_config(x, &delete.tenant, &delete.task_id, &delete.id).await?;
    match held {
        Reply::GetTaskPushNotificationConfig(config)
            if !keeper.foreign(&config, x.principal.as_ref()) =>
        {
            Ok(config.token)
        }
        _ => Err(A2aError::new(ErrorKind::TaskNotFound)),
    }
}

/// Whether an agent's answer to a config lookup says it shows no such config.
fn absent(kind: ErrorKind) -> bool {
    use ErrorKind::{MethodNotFound, TaskNotFound, UnsupportedOperation};
    matches!(kind, TaskNotFound | MethodNotFound | UnsupportedOperation)
}

/// A push config for an existing task (a Create, or a message continuing the task)
/// replaces the agent's config of the same id, and with it the webhook of whoever
/// registered that one: refused when the agent holds one `foreign` to the caller, asked
/// first, as for `deletable`. A config given no id is looked for under its task's id,
/// which is what an agent names it after (the reference SDK does). One the agent does not
/// hold is the call's to answer; a message starting a task replaces nothing.
pub(super) async fn creatable(
    x: &mut Exchange<'_>,
    keeper: &Keeper<'_>,
    request: &Request,
) -> Result<(), A2aError> {
    let (tenant, task_id, config) = match request {
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(config)) => {
            (&config.tenant, &config.task_id, config)
        }
        Request::Unary(UnaryRequest::SendMessage(send))
        | Request::Stream(StreamRequest::SendStreamingMessage(send)) => {
            let pushed = send.configuration.as_ref();
            let config = pushed.and_then(|c| c.task_push_notification_config.as_ref());
            match (config, send.message.as_ref()) {
                (Some(config), Some(message)) if !message.task_id.is_empty() => {
                    (&send.tenant, &message.task_id, config)
                }
                _ => return Ok(()),
            }
        }
        _ => return Ok(()),
    };
    let id = match config.id.is_empty() {
        true => task_id,
        false => &config.id,
    };
    match held_config(x, tenant, task_id, id).await {
        Ok(Reply::GetTaskPushNotificationConfig(config))
            if keeper.foreign(&config, x.principal.as_ref()) =>
        {
            let why = "another caller's push config of this task has this id";
            let field = x
                .dialect
                .pushed_url(request)
                .map_or("id".into(), |(_, url)| {
                    crate::push::relay::sibling(url, "id")
                });
            Err(A2aError::invalid_params(&field, why))
        }
        Ok(_) => Ok(()),
        // None held, or none the agent shows (it keeps configs it cannot be asked for):
        // the call goes on. Any other failure to ask (an id the binding cannot carry in a
        // lookup, an overloaded agent) must not let it replace one unseen.
        Err(err) if absent(err.kind) => Ok(()),
        Err(err) => Err(err),
    }
}

/// The agent's config `id` of task `task_id`, asked with the headers the call itself will
/// carry.
async fn held_config(
    x: &mut Exchange<'_>,
    tenant: &str,
    task_id: &str,
    id: &str,
) -> Result<Reply, A2aError> {
    let get = GetTaskPushNotificationConfigRequest {
        tenant: tenant.to_owned(),
        task_id: task_id.to_owned(),
        id: id.to_owned(),
    };
    let (forwarded, _) = forwarded(x);
    let probe = Call {
        request: UnaryRequest::GetTaskPushNotificationConfig(get),
        forwarded,
        deadline: x.deadline,
        trace: None,
    };
    let (held, _) = answered(&mut x.record, x.gateway.backend.unary(probe).await)?;
    Ok(held)
}

fn answered(
    record: &mut CallRecord,
    answer: Result<backend::Answer<Reply>, backend::Error>,
) -> Result<(Reply, Option<http::HeaderValue>), A2aError> {
    match answer {
        Ok(answer) => {
            record.backend_status(answer.status.map(Status::number));
            Ok((answer.value, answer.extensions))
        }
        Err(err) => {
            record.backend_status(err.status().map(Status::number));
            Err(err.into())
        }
    }
}

/// Starts a stream and waits for its first event, so an early error is a plain reply. The
/// backend's status is the stream start's (a later error is the stream's end), recorded
/// before the first event is awaited, so a first-event deadline keeps it. On a
/// `task-owner` route, `owner` seals the events' ids.
async fn stream(
    backend: &dyn Backend,
    call: Call<StreamRequest>,
    owner: Option<Box<Caller>>,
    record: &mut CallRecord,
) -> Answer<ClientEvents> {
    let answer = backend.stream(call).await;
    let status = match &answer {
        Ok(answer) => answer.status,
        Err(err) => err.status(),
    };
    record.backend_status(status.map(Status::number));
    let answer = match answer {
        Ok(answer) => answer,
        Err(err) => return Answer::Unstarted(err.into(), None),
    };
    let events = match owner {
        Some(owner) => (*owner).seal_events(answer.value),
        None => answer.value,
    };
    let mut events = events.map_err(A2aError::from as fn(backend::Error) -> A2aError);
    match events.next().await {
        Some(Ok(first)) => Answer::Stream(Started {
            first: Box::new(first),
            events,
            extensions: answer.extensions,
        }),
        Some(Err(err)) => Answer::Unstarted(err, answer.extensions),
        // An empty stream would leave the request without any answer (found by fuzzing,
        // fuzz/README.md): the backend broke the stream's contract.
        None => Answer::Unstarted(
            Fault::BadResponse("the backend's stream ended before its first event".into()).into(),
            answer.extensions,
        ),
    }
}

//! THE id table of task affinity: where task and context ids live in each request, reply
//! and event type (spec 3, 4.1: `Task.id`, `contextId`, the update events, a `Message`'s
//! `taskId`/`contextId`/`referenceTaskIds`, a push config's `taskId`, and the request
//! params that name a task or context). One row per type; the rows of a type that holds
//! others visit theirs, so a field is named once. The same rows serve both directions:
//! `backend::affinity` rewrites ids out (agent → client) and restores them in (client →
//! agent) through `Ids::each_id`; caller-bound tasks (`auth::owner`) seal and open the
//! same rows. A push config's own `id`, message and artifact ids are
//! not task ids: they are unique only within their task, which already routes the call.
//!
//! `ListTasksRequest.context_id` is a row here; its `page_token` is not an id (a fan-out
//! over endpoints carries its own, `affinity::list`).
//!
//! The same rows bound the ids every route takes from clients (`overlong`).

use crate::proto::*;
use crate::protocol::ops::{Reply, StreamRequest, UnaryRequest};

/// Types that carry task or context ids.
pub trait Ids {
    /// Calls `visit` on every non-empty id field (an empty one is unset).
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String));
}

fn id(field: &mut String, visit: &mut dyn FnMut(&mut String)) {
    if !field.is_empty() {
        visit(field);
    }
}

fn each<T: Ids>(items: &mut [T], visit: &mut dyn FnMut(&mut String)) {
    for item in items {
        item.each_id(visit);
    }
}

impl<T: Ids> Ids for Option<T> {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        if let Some(inner) = self {
            inner.each_id(visit);
        }
    }
}

// ---- what agents send: the rows rewritten out -------------------------------------

impl Ids for Message {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        id(&mut self.task_id, visit);
        id(&mut self.context_id, visit);
        for reference in &mut self.reference_task_ids {
            id(reference, visit);
        }
    }
}

impl Ids for TaskStatus {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        self.message.each_id(visit);
    }
}

impl Ids for Task {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        id(&mut self.id, visit);
        id(&mut self.context_id, visit);
        self.status.each_id(visit);
        each(&mut self.history, visit);
    }
}

impl Ids for TaskStatusUpdateEvent {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        id(&mut self.task_id, visit);
        id(&mut self.context_id, visit);
        self.status.each_id(visit);
    }
}

impl Ids for TaskArtifactUpdateEvent {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        id(&mut self.task_id, visit);
        id(&mut self.context_id, visit);
    }
}

impl Ids for TaskPushNotificationConfig {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        id(&mut self.task_id, visit);
    }
}

impl Ids for StreamResponse {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        use stream_response::Payload;
        match &mut self.payload {
            Some(Payload::Task(task)) => task.each_id(visit),
            Some(Payload::Message(message)) => message.each_id(visit),
            Some(Payload::StatusUpdate(event)) => event.each_id(visit),
            Some(Payload::ArtifactUpdate(event)) => event.each_id(visit),
            None => {}
        }
    }
}

impl Ids for SendMessageResponse {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        use send_message_response::Payload;
        match &mut self.payload {
            Some(Payload::Task(task)) => task.each_id(visit),
            Some(Payload::Message(message)) => message.each_id(visit),
            None => {}
        }
    }
}

impl Ids for ListTasksResponse {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        each(&mut self.tasks, visit);
    }
}

impl Ids for ListTaskPushNotificationConfigsResponse {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        each(&mut self.configs, visit);
    }
}

impl Ids for Reply {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        match self {
            Reply::SendMessage(reply) => reply.each_id(visit),
            Reply::GetTask(task) | Reply::CancelTask(task) => task.each_id(visit),
            Reply::ListTasks(list) => list.each_id(visit),
            Reply::CreateTaskPushNotificationConfig(config)
            | Reply::GetTaskPushNotificationConfig(config) => config.each_id(visit),
            Reply::ListTaskPushNotificationConfigs(list) => list.each_id(visit),
            Reply::DeleteTaskPushNotificationConfig(_) | Reply::GetExtendedAgentCard(_) => {}
        }
    }
}

// ---- what clients send: the rows restored in --------------------------------------

impl Ids for SendMessageRequest {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        self.message.each_id(visit);
        if let Some(configuration) = &mut self.configuration {
            configuration.task_push_notification_config.each_id(visit);
        }
    }
}

impl Ids for UnaryRequest {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        match self {
            UnaryRequest::SendMessage(request) => request.each_id(visit),
            UnaryRequest::GetTask(GetTaskRequest { id: task, .. })
            | UnaryRequest::CancelTask(CancelTaskRequest { id: task, .. }) => id(task, visit),
            UnaryRequest::ListTasks(request) => id(&mut request.context_id, visit),
            UnaryRequest::CreateTaskPushNotificationConfig(config) => config.each_id(visit),
            UnaryRequest::GetTaskPushNotificationConfig(request) => id(&mut request.task_id, visit),
            UnaryRequest::ListTaskPushNotificationConfigs(request) => {
                id(&mut request.task_id, visit)
            }
            UnaryRequest::DeleteTaskPushNotificationConfig(request) => {
                id(&mut request.task_id, visit)
            }
            UnaryRequest::GetExtendedAgentCard(_) => {}
        }
    }
}

impl Ids for StreamRequest {
    fn each_id(&mut self, visit: &mut dyn FnMut(&mut String)) {
        match self {
            StreamRequest::SendStreamingMessage(request) => request.each_id(visit),
            StreamRequest::SubscribeToTask(request) => id(&mut request.id, visit),
        }
    }
}

/// The longest task or context id a client may send. Agents repeat ids in their errors,
/// and a gRPC error's message travels in a header: a client's 64 KB id echoed there
/// overflows the header block, which breaks the HTTP/2 connection every other call to
/// that agent shares.
pub const MAX_ID_BYTES: usize = 1024;

/// The length of the first id of `value` longer than `MAX_ID_BYTES`, if any.
pub fn overlong(value: &mut impl Ids) -> Option<usize> {
    let mut found = None;
    value.each_id(&mut |id| {
        if id.len() > MAX_ID_BYTES {
            found = found.or(Some(id.len()));
        }
    });
    found
}

#[cfg(test)]
mod tests {
    //! Every row in both directions: a value with every id field set (each id distinct)
    //! is rewritten out, and then no agent id may be left bare anywhere in its JSON (a
    //! field the row forgot would be); restored in, it is the agent's value again and
    //! names the endpoint. Requests and replies are sampled per operation with an
    //! exhaustive `match`, so an operation added without its row fails to compile here.

    use super::*;
    use crate::backend::affinity::{restore_in, rewrite_out, IdCodec};
    use crate::protocol::error::ErrorKind;
    use crate::protocol::ops::{Op, Request, TypedRequest};

    /// Hands out distinct ids: `agent-id-1`, `agent-id-2`, …
    #[derive(Default)]
    struct Issuer(usize);

    impl Issuer {
        fn next(&mut self) -> String {
            self.0 += 1;
            format!("agent-id-{}", self.0)
        }

        fn message(&mut self) -> Message {
            Message {
                message_id: "message-id".into(),
                task_id: self.next(),
                context_id: self.next(),
                reference_task_ids: vec![self.next(), self.next()],
                ..Default::default()
            }
        }

        fn status(&mut self) -> Option<TaskStatus> {
            Some(TaskStatus {
                message: Some(self.message()),
                ..Default::default()
            })
        }

        fn task(&mut self) -> Task {
            Task {
                id: self.next(),
                context_id: self.next(),
                status: self.status(),
                history: vec![self.message()],
                ..Default::default()
            }
        }

        fn config(&mut self) -> TaskPushNotificationConfig {
            TaskPushNotificationConfig {
                id: "config-id".into(),
                task_id: self.next(),
                url: "https://hook.example/".into(),
                ..Default::default()
            }
        }

        fn status_update(&mut self) -> TaskStatusUpdateEvent {
            TaskStatusUpdateEvent {
                task_id: self.next(),
                context_id: self.next(),
                status: self.status(),
                ..Default::default()
            }
        }

        fn artifact_update(&mut self) -> TaskArtifactUpdateEvent {
            TaskArtifactUpdateEvent {
                task_id: self.next(),
                context_id: self.next(),
                ..Default::default()
            }
        }
    }

    fn codec() -> IdCodec {
        IdCodec::new(b"a key of sixteen bytes or more", "r").unwrap()
    }

    /// One row both ways; `json` is how the value appears on the wire.
    fn both_ways<T: Ids + Clone + PartialEq + std::fmt::Debug>(
        row: &str,
        value: T,
        issued: usize,
        json: impl Fn(&T) -> String,
    ) {
        let codec = codec();
        let tag = codec.tag("10.1.2.3:50051");
        let mut out = value.clone();
        rewrite_out(&mut out, &codec, tag);
        let text = json(&out);
        for n in 1..=issued {
            let bare = format!("\"agent-id-{n}\"");
            assert!(!text.contains(&bare), "{row}: {bare} left bare in {text}");
            assert!(
                text.contains(&format!(".agent-id-{n}\"")),
                "{row}: {n} in {text}"
            );
        }
        let mut back = out.clone();
        let owner = restore_in(&mut back, &codec, false).unwrap();
        assert_eq!(back, value, "{row}");
        assert_eq!(owner, (issued > 0).then_some(tag), "{row}");
    }

    fn serde<T: serde::Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    #[test]
    fn the_rows_of_agent_values() {
        let mut ids = Issuer::default();
        both_ways("Message", ids.message(), 4, serde);
        let mut ids = Issuer::default();
        both_ways("Task", ids.task(), 10, serde);
        let mut ids = Issuer::default();
        both_ways("TaskStatusUpdateEvent", ids.status_update(), 6, serde);
        let mut ids = Issuer::default();
        both_ways("TaskArtifactUpdateEvent", ids.artifact_update(), 2, serde);
        let mut ids = Issuer::default();
        both_ways("TaskPushNotificationConfig", ids.config(), 1, serde);
        use stream_response::Payload as Event;
        type Sample = fn(&mut Issuer) -> Event;
        let events: [(Sample, usize); 4] = [
            (|ids| Event::Task(ids.task()), 10),
            (|ids| Event::Message(ids.message()), 4),
            (|ids| Event::StatusUpdate(ids.status_update()), 6),
            (|ids| Event::ArtifactUpdate(ids.artifact_update()), 2),
        ];
        for (event, issued) in events {
            let mut ids = Issuer::default();
            let value = StreamResponse {
                payload: Some(event(&mut ids)),
            };
            both_ways("StreamResponse", value, issued, serde);
        }
    }

    /// A reply of `op` with every id field set, and how many ids it holds.
    fn reply(op: Op, ids: &mut Issuer) -> Option<(Reply, usize)> {
        use send_message_response::Payload;
        Some(match op {
            Op::SendMessage => (
                Reply::SendMessage(SendMessageResponse {
                    payload: Some(Payload::Task(ids.task())),
                }),
                10,
            ),
            Op::GetTask => (Reply::GetTask(ids.task()), 10),
            Op::CancelTask => (Reply::CancelTask(ids.task()), 10),
            Op::ListTasks => (
                Reply::ListTasks(ListTasksResponse {
                    tasks: vec![ids.task(), ids.task()],
                    ..Default::default()
                }),
                20,
            ),
            Op::CreateTaskPushNotificationConfig => {
                (Reply::CreateTaskPushNotificationConfig(ids.config()), 1)
            }
            Op::GetTaskPushNotificationConfig => {
                (Reply::GetTaskPushNotificationConfig(ids.config()), 1)
            }
            Op::ListTaskPushNotificationConfigs => (
                Reply::ListTaskPushNotificationConfigs(ListTaskPushNotificationConfigsResponse {
                    configs: vec![ids.config(), ids.config()],
                    ..Default::default()
                }),
                2,
            ),
            Op::DeleteTaskPushNotificationConfig => (
                Reply::DeleteTaskPushNotificationConfig(Default::default()),
                0,
            ),
            Op::GetExtendedAgentCard => (Reply::GetExtendedAgentCard(Default::default()), 0),
            Op::SendStreamingMessage | Op::SubscribeToTask => return None,
        })
    }

    /// A request of `op` with every id field set, and how many ids it holds.
    fn request(op: Op, ids: &mut Issuer) -> (Request, usize) {
        let mut request = Request::decode(op, None).unwrap();
        let issued = match &mut request {
            Request::Unary(UnaryRequest::SendMessage(send))
            | Request::Stream(StreamRequest::SendStreamingMessage(send)) => {
                send.message = Some(ids.message());
                send.configuration = Some(SendMessageConfiguration {
                    task_push_notification_config: Some(ids.config()),
                    ..Default::default()
                });
                5
            }
            Request::Unary(UnaryRequest::GetTask(GetTaskRequest { id, .. }))
            | Request::Unary(UnaryRequest::CancelTask(CancelTaskRequest { id, .. }))
            | Request::Stream(StreamRequest::SubscribeToTask(SubscribeToTaskRequest {
                id, ..
            })) => {
                *id = ids.next();
                1
            }
            Request::Unary(UnaryRequest::ListTasks(list)) => {
                list.context_id = ids.next();
                1
            }
            Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(config)) => {
                *config = ids.config();
                1
            }
            Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(get)) => {
                get.task_id = ids.next();
                1
            }
            Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list)) => {
                list.task_id = ids.next();
                1
            }
            Request::Unary(UnaryRequest::DeleteTaskPushNotificationConfig(delete)) => {
                delete.task_id = ids.next();
                1
            }
            Request::Unary(UnaryRequest::GetExtendedAgentCard(_)) => 0,
        };
        (request, issued)
    }

    #[test]
    fn the_rows_of_every_operation() {
        for &op in Op::ALL {
            let (request, issued) = request(op, &mut Issuer::default());
            let json = |r: &Request| match r {
                Request::Unary(r) => String::from_utf8(r.to_json().unwrap()).unwrap(),
                Request::Stream(r) => String::from_utf8(r.to_json().unwrap()).unwrap(),
            };
            match request {
                Request::Unary(r) => both_ways(op.name(), r, issued, |r| json(&r.clone().into())),
                Request::Stream(r) => both_ways(op.name(), r, issued, |r| json(&r.clone().into())),
            }
            if let Some((reply, issued)) = reply(op, &mut Issuer::default()) {
                both_ways(op.name(), reply, issued, |r| {
                    let mut out = Vec::new();
                    r.write_json(&mut out).unwrap();
                    String::from_utf8(out).unwrap()
                });
            }
        }
    }

    #[test]
    fn foreign_and_mixed_ids_are_tasks_not_found() {
        let codec = codec();
        let (a, b) = (codec.tag("10.0.0.1:1"), codec.tag("10.0.0.2:1"));
        let mut get = UnaryRequest::GetTask(GetTaskRequest {
            id: "made-up".into(),
            ..Default::default()
        });
        let err = restore_in(&mut get, &codec, false).unwrap_err();
        assert_eq!(
            (err.kind, err.kind.code()),
            (ErrorKind::TaskNotFound, -32001)
        );
        let mut send = SendMessageRequest {
            message: Some(Message {
                task_id: codec.wrap(a, "t"),
                context_id: codec.wrap(b, "c"),
                ..Default::default()
            }),
            ..Default::default()
        };
        let err = restore_in(&mut send, &codec, false).unwrap_err();
        assert_eq!(err.kind, ErrorKind::TaskNotFound);
        // A new conversation names no id: any endpoint may take it.
        let mut fresh = SendMessageRequest {
            message: Some(Message::default()),
            ..Default::default()
        };
        assert_eq!(restore_in(&mut fresh, &codec, false).unwrap(), None);
    }
}

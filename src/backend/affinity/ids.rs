//! THE id table of task affinity: where task and context ids live in each request, reply
//! and event type (spec 3, 4.1: `Task.id`, `contextId`, the update events, a `Message`'s
//! `taskId`/`contextId`/`referenceTaskIds`, a push config's `taskId`, and the request
//! params that name a task or context). One row per type; the rows of a type that holds
//! others visit theirs, so a field is named once. The same rows serve both directions:
//! `backend::affinity` rewrites ids out (agent → client) and restores them in (client →
//! agent) through `Ids::each_id`. A push config's own `id`, message and artifact ids are
//! not task ids: they are unique only within their task, which already routes the call.
//!
//! `ListTasksRequest.context_id` is a row here; its `page_token` is not an id (a fan-out
//! over endpoints carries its own, `affinity::list`).

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

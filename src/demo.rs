//! The embedded demo agent behind `a2a-gateway --demo`: a real tonic gRPC server on a
//! loopback port with an in-memory task store, so every operation can be tried with curl.
//!
//! The first text part of a message selects the behaviour:
//! - `task`: a completed task with an artifact (text and data parts);
//! - `stream`: status updates and three artifact chunks, then completed (best with
//!   `SendStreamingMessage`);
//! - `input`: an input-required task; a follow-up message with its `taskId` completes it;
//! - `slow`: a task that works for 30 s, reporting progress every 500 ms; cancel it with
//!   `CancelTask` or watch it with `SubscribeToTask`;
//! - `fail`, `reject`: a failed or rejected task;
//! - anything else: a direct reply message echoing the text.
//!
//! Push notification configs are stored (CRUD works) but not delivered; the extended agent
//! card is always available.

mod script;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::proto::a2a_service_server::{A2aService, A2aServiceServer};
use crate::proto::*;
use crate::protocol::error::A2A_DOMAIN;
use crate::telemetry::untrusted::echoed;

use self::script::{agent_message, first_text, new_id, script, status, status_event, Scenario};

/// Starts the demo agent on `127.0.0.1:0`; returns its address.
pub async fn spawn() -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tonic::transport::Server::builder()
        .add_service(A2aServiceServer::new(DemoAgent::default()))
        .serve_with_incoming(TcpListenerStream::new(listener));
    tokio::spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "demo agent stopped");
        }
    });
    Ok(addr)
}

/// The demo agent's state: tasks in creation order, their push configs and live events.
#[derive(Clone, Default)]
pub struct DemoAgent {
    store: Arc<Mutex<HashMap<String, Entry>>>,
}

struct Entry {
    seq: usize,
    task: Task,
    configs: Vec<TaskPushNotificationConfig>,
    events: broadcast::Sender<StreamResponse>,
}

type Events = Pin<Box<dyn Stream<Item = Result<StreamResponse, Status>> + Send>>;

/// A task just created or continued: its snapshot, the scripted steps still to come, and a
/// receiver subscribed before any of them is published.
type Started = (
    Task,
    Vec<(Duration, StreamResponse)>,
    broadcast::Receiver<StreamResponse>,
);

fn a2a_error(code: Code, reason: &str, message: String, task_id: &str) -> Status {
    let metadata = HashMap::from([("taskId".to_owned(), task_id.to_owned())]);
    Status::with_error_details(
        code,
        message,
        ErrorDetails::with_error_info(reason, A2A_DOMAIN, metadata),
    )
}

/// A task this agent does not know. The id is repeated only so far: a client's is unbounded,
/// and one repeated whole in `grpc-message` and the details would not fit a header block.
fn not_found(task_id: &str) -> Status {
    let shown = echoed(task_id);
    a2a_error(
        Code::NotFound,
        "TASK_NOT_FOUND",
        format!("task {shown:?} not found"),
        &shown,
    )
}

fn is_terminal(state: i32) -> bool {
    matches!(
        TaskState::try_from(state),
        Ok(TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
    )
}

fn is_final(state: i32) -> bool {
    is_terminal(state)
        || matches!(
            TaskState::try_from(state),
            Ok(TaskState::InputRequired | TaskState::AuthRequired)
        )
}

impl DemoAgent {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one event to the stored task and publishes it; false once the task is final.
    fn apply(&self, task_id: &str, event: &StreamResponse) -> bool {
        let mut store = self.lock();
        let Some(entry) = store.get_mut(task_id) else {
            return false;
        };
        if is_terminal(entry.task.status.as_ref().map_or(0, |s| s.state)) {
            return false;
        }
        match &event.payload {
            Some(stream_response::Payload::StatusUpdate(update)) => {
                if let Some(message) = update.status.as_ref().and_then(|s| s.message.clone()) {
                    entry.task.history.push(message);
                }
                entry.task.status = update.status.clone();
            }
            Some(stream_response::Payload::ArtifactUpdate(update)) => {
                if let Some(artifact) = update.artifact.clone() {
                    match entry
                        .task
                        .artifacts
                        .iter_mut()
                        .find(|a| a.artifact_id == artifact.artifact_id)
                    {
                        Some(existing) if update.append => existing.parts.extend(artifact.parts),
                        Some(existing) => *existing = artifact,
                        None => entry.task.artifacts.push(artifact),
                    }
                }
            }
            _ => {}
        }
        let _ = entry.events.send(event.clone());
        !is_final(entry.task.status.as_ref().map_or(0, |s| s.state))
    }

    fn task(&self, task_id: &str) -> Result<Task, Status> {
        self.lock()
            .get(task_id)
            .map(|e| e.task.clone())
            .ok_or_else(|| not_found(task_id))
    }

    /// Creates the task for `message`, or continues the input-required task it names.
    fn start(&self, message: Message) -> Result<Started, Status> {
        let text = first_text(&message).to_owned();
        if !message.task_id.is_empty() {
            let mut task = self.task(&message.task_id)?;
            let state = task.status.as_ref().map_or(0, |s| s.state);
            if state != TaskState::InputRequired as i32 {
                return Err(a2a_error(
                    Code::FailedPrecondition,
                    "UNSUPPORTED_OPERATION",
                    format!("task {:?} is not waiting for input", task.id),
                    &task.id,
                ));
            }
            let mut store = self.lock();
            let entry = store
                .get_mut(&task.id)
                .ok_or_else(|| not_found(&message.task_id))?;
            entry.task.history.push(message);
            task = entry.task.clone();
            let steps = vec![(
                Duration::ZERO,
                status_event(
                    &task,
                    status(
                        TaskState::Completed,
                        Some(agent_message(
                            &task.context_id,
                            &task.id,
                            format!("thanks, got: {text}"),
                        )),
                    ),
                ),
            )];
            return Ok((task, steps, entry.events.subscribe()));
        }
        let context_id = if message.context_id.is_empty() {
            new_id()
        } else {
            message.context_id.clone()
        };
        let task = Task {
            id: new_id(),
            context_id,
            status: Some(status(TaskState::Submitted, None)),
            history: vec![Message {
                task_id: String::new(),
                ..message
            }],
            ..Default::default()
        };
        let steps = script(Scenario::of(&text), &task, &text);
        let (events, receiver) = broadcast::channel(256);
        let mut store = self.lock();
        let seq = store.len();
        store.insert(
            task.id.clone(),
            Entry {
                seq,
                task: task.clone(),
                configs: Vec::new(),
                events,
            },
        );
        Ok((task, steps, receiver))
    }

    /// Runs the steps in the background, pausing as scripted; stops when the task is final.
    fn run(&self, task_id: String, steps: Vec<(Duration, StreamResponse)>) {
        let agent = self.clone();
        tokio::spawn(async move {
            for (pause, event) in steps {
                tokio::time::sleep(pause).await;
                if !agent.apply(&task_id, &event) {
                    break;
                }
            }
        });
    }

    fn live(
        first: StreamResponse,
        first_may_end: bool,
        receiver: broadcast::Receiver<StreamResponse>,
    ) -> Events {
        Box::pin(follow(first, first_may_end, receiver))
    }
}

fn ends(event: &StreamResponse) -> bool {
    match &event.payload {
        Some(stream_response::Payload::StatusUpdate(u)) => {
            u.status.as_ref().is_some_and(|s| is_final(s.state))
        }
        Some(stream_response::Payload::Task(t)) => {
            t.status.as_ref().is_some_and(|s| is_final(s.state))
        }
        Some(stream_response::Payload::Message(_)) => true,
        _ => false,
    }
}

/// The first event, then the task's published events until one carries a final state.
fn follow(
    first: StreamResponse,
    first_may_end: bool,
    receiver: broadcast::Receiver<StreamResponse>,
) -> impl Stream<Item = Result<StreamResponse, Status>> {
    let done = first_may_end && ends(&first);
    futures::stream::unfold(
        (Some(first), done, receiver),
        |(first, done, mut receiver)| async move {
            if let Some(first) = first {
                return Some((Ok(first), (None, done, receiver)));
            }
            if done {
                return None;
            }
            loop {
                match receiver.recv().await {
                    Ok(event) => {
                        let done = ends(&event);
                        return Some((Ok(event), (None, done, receiver)));
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    )
}

fn page<T>(items: Vec<T>, token: &str, size: usize) -> Result<(Vec<T>, String), Status> {
    let start: usize = if token.is_empty() {
        0
    } else {
        token.parse().map_err(|_| {
            Status::invalid_argument(format!("invalid page token {:?}", echoed(token)))
        })?
    };
    let end = (start + size).min(items.len());
    let next = if end < items.len() {
        end.to_string()
    } else {
        String::new()
    };
    Ok((
        items
            .into_iter()
            .skip(start)
            .take(end.saturating_sub(start))
            .collect(),
        next,
    ))
}

fn trim_history(task: &mut Task, history_length: Option<i32>) {
    if let Some(n) = history_length {
        let keep = n.max(0) as usize;
        let drop = task.history.len().saturating_sub(keep);
        task.history.drain(..drop);
    }
}

/// The message of a send request and its first text.
fn incoming(request: Request<SendMessageRequest>) -> Result<(Message, String), Status> {
    let message = request
        .into_inner()
        .message
        .ok_or_else(|| Status::invalid_argument("message is required"))?;
    let text = first_text(&message).to_owned();
    Ok((message, text))
}

/// The echo reply for a new message that selects no task scenario.
fn direct_reply(message: &Message, text: &str) -> Option<Message> {
    if !message.task_id.is_empty() || Scenario::of(text) != Scenario::Reply {
        return None;
    }
    let context_id = if message.context_id.is_empty() {
        new_id()
    } else {
        message.context_id.clone()
    };
    Some(agent_message(&context_id, "", format!("echo: {text}")))
}

#[tonic::async_trait]
impl A2aService for DemoAgent {
    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let (message, text) = incoming(request)?;
        if let Some(reply) = direct_reply(&message, &text) {
            return Ok(Response::new(SendMessageResponse {
                payload: Some(send_message_response::Payload::Message(reply)),
            }));
        }
        let (task, steps, _) = self.start(message)?;
        let slow = steps.iter().any(|(pause, _)| !pause.is_zero())
            && Scenario::of(&text) == Scenario::Slow;
        if slow {
            self.run(task.id.clone(), steps);
        } else {
            for (_, event) in &steps {
                self.apply(&task.id, event);
            }
        }
        let task = self.task(&task.id)?;
        Ok(Response::new(SendMessageResponse {
            payload: Some(send_message_response::Payload::Task(task)),
        }))
    }

    type SendStreamingMessageStream = Events;

    async fn send_streaming_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<Events>, Status> {
        let (message, text) = incoming(request)?;
        if let Some(reply) = direct_reply(&message, &text) {
            let event = StreamResponse {
                payload: Some(stream_response::Payload::Message(reply)),
            };
            return Ok(Response::new(Box::pin(futures::stream::iter([Ok(event)]))));
        }
        let (task, steps, receiver) = self.start(message)?;
        self.run(task.id.clone(), steps);
        let first = StreamResponse {
            payload: Some(stream_response::Payload::Task(task)),
        };
        Ok(Response::new(Self::live(first, true, receiver)))
    }

    async fn get_task(&self, request: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        let request = request.into_inner();
        let mut task = self.task(&request.id)?;
        trim_history(&mut task, request.history_length);
        Ok(Response::new(task))
    }

    async fn list_tasks(
        &self,
        request: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        let request = request.into_inner();
        let size = request.page_size.unwrap_or(50);
        if !(1..=100).contains(&size) {
            return Err(Status::invalid_argument(format!(
                "pageSize must be between 1 and 100, got {size}"
            )));
        }
        let mut entries: Vec<(usize, Task)> = self
            .lock()
            .values()
            .map(|e| (e.seq, e.task.clone()))
            .collect();
        entries.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        let after = request.status_timestamp_after;
        let tasks: Vec<Task> = entries
            .into_iter()
            .map(|(_, t)| t)
            .filter(|t| request.context_id.is_empty() || t.context_id == request.context_id)
            .filter(|t| {
                request.status == 0 || t.status.as_ref().is_some_and(|s| s.state == request.status)
            })
            .filter(|t| {
                after.is_none_or(|a| {
                    t.status
                        .as_ref()
                        .and_then(|s| s.timestamp)
                        .is_some_and(|ts| (ts.seconds, ts.nanos) >= (a.seconds, a.nanos))
                })
            })
            .collect();
        let total_size = tasks.len() as i32;
        let (mut tasks, next_page_token) = page(tasks, &request.page_token, size as usize)?;
        for task in &mut tasks {
            trim_history(task, request.history_length);
            if !request.include_artifacts.unwrap_or(false) {
                task.artifacts.clear();
            }
        }
        Ok(Response::new(ListTasksResponse {
            tasks,
            next_page_token,
            page_size: size,
            total_size,
        }))
    }

    async fn cancel_task(
        &self,
        request: Request<CancelTaskRequest>,
    ) -> Result<Response<Task>, Status> {
        let id = request.into_inner().id;
        let task = self.task(&id)?;
        if is_terminal(task.status.as_ref().map_or(0, |s| s.state)) {
            return Err(a2a_error(
                Code::FailedPrecondition,
                "TASK_NOT_CANCELABLE",
                format!("task {id:?} is already in a terminal state"),
                &id,
            ));
        }
        self.apply(&id, &status_event(&task, status(TaskState::Canceled, None)));
        Ok(Response::new(self.task(&id)?))
    }

    type SubscribeToTaskStream = Events;

    async fn subscribe_to_task(
        &self,
        request: Request<SubscribeToTaskRequest>,
    ) -> Result<Response<Events>, Status> {
        let id = request.into_inner().id;
        let store = self.lock();
        let entry = store.get(&id).ok_or_else(|| not_found(&id))?;
        if is_terminal(entry.task.status.as_ref().map_or(0, |s| s.state)) {
            return Err(a2a_error(
                Code::FailedPrecondition,
                "UNSUPPORTED_OPERATION",
                format!("task {id:?} is in a terminal state"),
                &id,
            ));
        }
        let first = StreamResponse {
            payload: Some(stream_response::Payload::Task(entry.task.clone())),
        };
        let receiver = entry.events.subscribe();
        drop(store);
        // The snapshot never ends a subscription: an interrupted task stays open until it moves on.
        Ok(Response::new(Self::live(first, false, receiver)))
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<TaskPushNotificationConfig>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        let mut config = request.into_inner();
        if config.url.is_empty() {
            return Err(Status::invalid_argument("url is required"));
        }
        let mut store = self.lock();
        let entry = store
            .get_mut(&config.task_id)
            .ok_or_else(|| not_found(&config.task_id))?;
        if config.id.is_empty() {
            config.id = config.task_id.clone();
        }
        entry.configs.retain(|c| c.id != config.id);
        entry.configs.push(config.clone());
        Ok(Response::new(config))
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        let request = request.into_inner();
        let store = self.lock();
        let entry = store
            .get(&request.task_id)
            .ok_or_else(|| not_found(&request.task_id))?;
        entry
            .configs
            .iter()
            .find(|c| c.id == request.id)
            .cloned()
            .map(Response::new)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "push notification config {:?} not found",
                    echoed(&request.id)
                ))
            })
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigsResponse>, Status> {
        let request = request.into_inner();
        let configs = self
            .lock()
            .get(&request.task_id)
            .map(|e| e.configs.clone())
            .ok_or_else(|| not_found(&request.task_id))?;
        let size = if request.page_size <= 0 {
            100
        } else {
            request.page_size as usize
        };
        let (configs, next_page_token) = page(configs, &request.page_token, size)?;
        Ok(Response::new(ListTaskPushNotificationConfigsResponse {
            configs,
            next_page_token,
        }))
    }

    async fn get_extended_agent_card(
        &self,
        _request: Request<GetExtendedAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        Ok(Response::new(AgentCard {
            name: "a2a-gateway demo agent".to_owned(),
            description:
                "Embedded demo agent: send task, stream, input, slow, fail, reject or any text."
                    .to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: Some(AgentCapabilities {
                streaming: Some(true),
                push_notifications: Some(true),
                extended_agent_card: Some(true),
                ..Default::default()
            }),
            default_input_modes: vec!["text/plain".to_owned()],
            default_output_modes: vec!["text/plain".to_owned(), "application/json".to_owned()],
            skills: vec![AgentSkill {
                id: "demo".to_owned(),
                name: "Demo".to_owned(),
                description: "Shows every A2A operation.".to_owned(),
                tags: vec!["demo".to_owned()],
                examples: vec!["task".to_owned(), "stream".to_owned(), "slow".to_owned()],
                ..Default::default()
            }],
            ..Default::default()
        }))
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        let request = request.into_inner();
        let mut store = self.lock();
        let entry = store
            .get_mut(&request.task_id)
            .ok_or_else(|| not_found(&request.task_id))?;
        entry.configs.retain(|c| c.id != request.id);
        Ok(Response::new(pbjson_types::Empty {}))
    }
}

//! The scriptable tonic A2A backend: it records every call it receives (request and
//! metadata) and answers as the test's handler says: a reply, an error, a pause, or a
//! scripted stream; and the tasks and events the suites answer with.

// Answer enums are built once per call.
#![allow(clippy::large_enum_variant)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::proto::a2a_service_server::{A2aService, A2aServiceServer};
use a2a_gateway::proto::*;
use a2a_gateway::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use futures::Stream;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::{test_pki, Scheme};

/// What the test backend does for one call.
pub enum Answer {
    Reply(Reply),
    /// The inner answer after a pause (the backend is slow).
    After(Duration, Box<Answer>),
    Error(Status),
    Stream(Vec<Step>),
}

/// One step of a scripted stream.
pub enum Step {
    Event(StreamResponse),
    Error(Status),
    Sleep(Duration),
    /// Never ends: the stream stays open until the client goes away.
    Hang,
}

/// One call the backend received.
#[derive(Clone)]
pub struct Seen {
    pub request: Request,
    pub metadata: MetadataMap,
}

type Handler = dyn Fn(&Request) -> Answer + Send + Sync;

/// A scriptable A2A gRPC backend.
#[derive(Clone)]
pub struct TestBackend {
    handler: Arc<Handler>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Streams the server dropped before their script ended (client went away).
    pub cancelled: Arc<AtomicUsize>,
}

impl TestBackend {
    pub fn new(handler: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Self {
        Self {
            handler: Arc::new(handler),
            seen: Arc::default(),
            cancelled: Arc::default(),
        }
    }

    /// Serves on 127.0.0.1:0; returns the address.
    pub async fn spawn(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tonic::transport::Server::builder()
            .add_service(A2aServiceServer::new(self.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
        tokio::spawn(server);
        addr
    }

    /// Serves on 127.0.0.1:0 with `scheme`; returns the address.
    pub async fn spawn_scheme(&self, scheme: Scheme) -> SocketAddr {
        match scheme {
            Scheme::Http => self.spawn().await,
            Scheme::Https => {
                let pki = test_pki();
                self.spawn_tls(&pki.cert_pem, &pki.key_pem).await
            }
        }
    }

    /// Serves on `listener` with `server`'s HTTP/2 settings (and TLS, see `Scheme::server`) until `stop` resolves, then
    /// shuts down gracefully (GOAWAY); the task ends once the server has.
    pub fn spawn_on(
        &self,
        server: tonic::transport::Server,
        listener: tokio::net::TcpListener,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let mut server = server;
        let serving = server
            .add_service(A2aServiceServer::new(self.clone()))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                stop,
            );
        tokio::spawn(async move {
            let _ = serving.await;
        })
    }

    /// Serves over TLS with the given PEM identity on 127.0.0.1:0; returns the address.
    pub async fn spawn_tls(&self, cert_pem: &str, key_pem: &str) -> SocketAddr {
        use tonic::transport::{Identity, ServerTlsConfig};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = ServerTlsConfig::new().identity(Identity::from_pem(cert_pem, key_pem));
        let server = tonic::transport::Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(A2aServiceServer::new(self.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
        tokio::spawn(server);
        addr
    }

    pub fn last(&self) -> Seen {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("backend saw no call")
    }

    pub fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn answer(&self, request: Request, metadata: MetadataMap) -> (Answer, MetadataMap) {
        let answer = (self.handler)(&request);
        let mut reply_md = MetadataMap::new();
        // Like an agent that activates every extension the client asked for.
        if let Some(ext) = metadata.get("a2a-extensions") {
            reply_md.insert("a2a-extensions", ext.clone());
        }
        self.seen.lock().unwrap().push(Seen { request, metadata });
        (answer, reply_md)
    }

    fn stream(&self, answer: Answer, md: MetadataMap) -> Result<tonic::Response<Events>, Status> {
        let steps = match answer {
            Answer::Stream(steps) => steps,
            Answer::Error(status) => return Err(status),
            Answer::Reply(_) | Answer::After(..) => panic!("unary answer for a streaming call"),
        };
        let guard = CancelGuard(self.cancelled.clone(), true);
        let events = futures::stream::unfold(
            (steps.into_iter(), guard),
            |(mut steps, mut guard)| async move {
                loop {
                    match steps.next() {
                        None => {
                            guard.disarm();
                            return None;
                        }
                        Some(Step::Event(e)) => return Some((Ok(e), (steps, guard))),
                        Some(Step::Error(s)) => {
                            guard.disarm();
                            return Some((Err(s), (Vec::new().into_iter(), guard)));
                        }
                        Some(Step::Sleep(d)) => tokio::time::sleep(d).await,
                        Some(Step::Hang) => std::future::pending::<()>().await,
                    }
                }
            },
        );
        let mut response = tonic::Response::new(Box::pin(events) as Events);
        *response.metadata_mut() = md;
        Ok(response)
    }
}

/// Counts a stream dropped before its script ended.
struct CancelGuard(Arc<AtomicUsize>, bool);

impl CancelGuard {
    fn disarm(&mut self) {
        self.1 = false;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

type Events = Pin<Box<dyn Stream<Item = Result<StreamResponse, Status>> + Send>>;

// `async_trait` must see the methods, so the macro writes the whole impl.
macro_rules! test_service {
    ($( $rpc:ident($req:ty) -> $resp:ty = $variant:ident; )*) => {
        #[tonic::async_trait]
        impl A2aService for TestBackend {
            $(
            async fn $rpc(&self, request: tonic::Request<$req>) -> Result<tonic::Response<$resp>, Status> {
                let (metadata, _, message) = request.into_parts();
                let (mut answer, md) = self.answer(Request::Unary(UnaryRequest::$variant(message)), metadata);
                while let Answer::After(pause, inner) = answer {
                    tokio::time::sleep(pause).await;
                    answer = *inner;
                }
                match (answer, md) {
                    (Answer::Reply(Reply::$variant(reply)), md) => {
                        let mut response = tonic::Response::new(reply);
                        *response.metadata_mut() = md;
                        Ok(response)
                    }
                    (Answer::Error(status), _) => Err(status),
                    _ => panic!(concat!("wrong answer for ", stringify!($variant))),
                }
            }
            )*

            type SendStreamingMessageStream = Events;
            type SubscribeToTaskStream = Events;

            async fn send_streaming_message(
                &self,
                request: tonic::Request<SendMessageRequest>,
            ) -> Result<tonic::Response<Events>, Status> {
                let (metadata, _, message) = request.into_parts();
                let (answer, md) = self.answer(Request::Stream(StreamRequest::SendStreamingMessage(message)), metadata);
                self.stream(answer, md)
            }

            async fn subscribe_to_task(
                &self,
                request: tonic::Request<SubscribeToTaskRequest>,
            ) -> Result<tonic::Response<Events>, Status> {
                let (metadata, _, message) = request.into_parts();
                let (answer, md) = self.answer(Request::Stream(StreamRequest::SubscribeToTask(message)), metadata);
                self.stream(answer, md)
            }
        }
    };
}

test_service! {
    send_message(SendMessageRequest) -> SendMessageResponse = SendMessage;
    get_task(GetTaskRequest) -> Task = GetTask;
    list_tasks(ListTasksRequest) -> ListTasksResponse = ListTasks;
    cancel_task(CancelTaskRequest) -> Task = CancelTask;
    create_task_push_notification_config(TaskPushNotificationConfig) -> TaskPushNotificationConfig = CreateTaskPushNotificationConfig;
    get_task_push_notification_config(GetTaskPushNotificationConfigRequest) -> TaskPushNotificationConfig = GetTaskPushNotificationConfig;
    list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest) -> ListTaskPushNotificationConfigsResponse = ListTaskPushNotificationConfigs;
    delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest) -> pbjson_types::Empty = DeleteTaskPushNotificationConfig;
    get_extended_agent_card(GetExtendedAgentCardRequest) -> AgentCard = GetExtendedAgentCard;
}

/// The push configs an agent keeps, shared by the test and the agent.
pub type PushStore = Arc<Mutex<Vec<TaskPushNotificationConfig>>>;

/// Keeps `config` as the reference SDK does: a config without an id gets its task's id,
/// and replaces the one of the same task and id.
pub fn keep_push_config(
    store: &PushStore,
    mut config: TaskPushNotificationConfig,
) -> TaskPushNotificationConfig {
    if config.id.is_empty() {
        config.id.clone_from(&config.task_id);
    }
    let mut store = store.lock().unwrap();
    store.retain(|c| (&c.task_id, &c.id) != (&config.task_id, &config.id));
    store.push(config.clone());
    config
}

/// A handler answering SendMessage with the message it was sent, anything else with
/// UNIMPLEMENTED.
pub fn echo_message(request: &Request) -> Answer {
    match request {
        Request::Unary(UnaryRequest::SendMessage(send)) => {
            Answer::Reply(Reply::SendMessage(SendMessageResponse {
                payload: send
                    .message
                    .clone()
                    .map(send_message_response::Payload::Message),
            }))
        }
        _ => Answer::Error(Status::unimplemented("SendMessage only")),
    }
}

/// An agent keeping push configs in `store`, which answers a message with task `task-new`.
pub fn push_config_agent(store: PushStore) -> TestBackend {
    TestBackend::new(move |request| {
        let kept = || store.lock().unwrap().clone();
        match request {
            Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(c)) => Answer::Reply(
                Reply::CreateTaskPushNotificationConfig(keep_push_config(&store, c.clone())),
            ),
            Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(get)) => {
                let found = kept()
                    .into_iter()
                    .find(|c| c.task_id == get.task_id && c.id == get.id);
                match found {
                    Some(c) => Answer::Reply(Reply::GetTaskPushNotificationConfig(c)),
                    None => Answer::Error(Status::not_found("no such config")),
                }
            }
            Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(list)) => {
                let configs = kept().into_iter().filter(|c| c.task_id == list.task_id);
                Answer::Reply(Reply::ListTaskPushNotificationConfigs(
                    ListTaskPushNotificationConfigsResponse {
                        configs: configs.collect(),
                        next_page_token: String::new(),
                    },
                ))
            }
            Request::Unary(UnaryRequest::DeleteTaskPushNotificationConfig(delete)) => {
                let mut store = store.lock().unwrap();
                store.retain(|c| (&c.task_id, &c.id) != (&delete.task_id, &delete.id));
                Answer::Reply(Reply::DeleteTaskPushNotificationConfig(Default::default()))
            }
            Request::Unary(UnaryRequest::SendMessage(send)) => {
                let pushed = send.configuration.as_ref();
                if let Some(config) = pushed.and_then(|c| c.task_push_notification_config.clone()) {
                    let task_id = "task-new".into();
                    keep_push_config(&store, TaskPushNotificationConfig { task_id, ..config });
                }
                let task = task("task-new", TaskState::Submitted);
                Answer::Reply(Reply::SendMessage(SendMessageResponse {
                    payload: Some(send_message_response::Payload::Task(task)),
                }))
            }
            other => Answer::Error(Status::unimplemented(format!("{other:?}"))),
        }
    })
}

pub fn task(id: &str, state: TaskState) -> Task {
    Task {
        id: id.to_owned(),
        context_id: "ctx-1".to_owned(),
        status: Some(TaskStatus {
            state: state as i32,
            message: None,
            timestamp: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 123_000_000,
            }),
        }),
        ..Default::default()
    }
}

pub fn status_update(task_id: &str, state: TaskState) -> StreamResponse {
    StreamResponse {
        payload: Some(stream_response::Payload::StatusUpdate(
            TaskStatusUpdateEvent {
                task_id: task_id.to_owned(),
                context_id: "ctx-1".to_owned(),
                status: task(task_id, state).status,
                metadata: None,
            },
        )),
    }
}

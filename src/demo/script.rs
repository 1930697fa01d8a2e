//! The demo agent's scenarios: which behaviour a message text selects, and the events
//! each scenario goes through, built from the generated types.

use std::time::Duration;

use crate::proto::*;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scenario {
    Reply,
    Task,
    Stream,
    Input,
    Slow,
    Fail,
    Reject,
}

impl Scenario {
    pub(super) fn of(text: &str) -> Self {
        match text.trim().to_ascii_lowercase().as_str() {
            "task" => Self::Task,
            "stream" => Self::Stream,
            "input" => Self::Input,
            "slow" => Self::Slow,
            "fail" => Self::Fail,
            "reject" => Self::Reject,
            _ => Self::Reply,
        }
    }
}

pub(super) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(super) fn text_part(text: impl Into<String>) -> Part {
    Part {
        content: Some(part::Content::Text(text.into())),
        ..Default::default()
    }
}

pub(super) fn agent_message(context_id: &str, task_id: &str, text: impl Into<String>) -> Message {
    Message {
        message_id: new_id(),
        context_id: context_id.to_owned(),
        task_id: task_id.to_owned(),
        role: Role::Agent as i32,
        parts: vec![text_part(text)],
        ..Default::default()
    }
}

pub(super) fn status(state: TaskState, message: Option<Message>) -> TaskStatus {
    TaskStatus {
        state: state as i32,
        message,
        timestamp: Some(Timestamp::now()),
    }
}

pub(super) fn status_event(task: &Task, status: TaskStatus) -> StreamResponse {
    StreamResponse {
        payload: Some(stream_response::Payload::StatusUpdate(
            TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: Some(status),
                metadata: None,
            },
        )),
    }
}

pub(super) fn artifact_event(
    task: &Task,
    artifact: Artifact,
    append: bool,
    last: bool,
) -> StreamResponse {
    StreamResponse {
        payload: Some(stream_response::Payload::ArtifactUpdate(
            TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact: Some(artifact),
                append,
                last_chunk: last,
                metadata: None,
            },
        )),
    }
}

pub(super) fn first_text(message: &Message) -> &str {
    message
        .parts
        .iter()
        .find_map(|p| match &p.content {
            Some(part::Content::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .unwrap_or("")
}

/// The steps a scenario goes through after the task is created, with the pause before each.
pub(super) fn script(
    scenario: Scenario,
    task: &Task,
    text: &str,
) -> Vec<(Duration, StreamResponse)> {
    let quick = Duration::from_millis(50);
    let working = |t: &str| {
        status_event(
            task,
            status(
                TaskState::Working,
                Some(agent_message(&task.context_id, &task.id, t)),
            ),
        )
    };
    let done = |t: &str| {
        status_event(
            task,
            status(
                TaskState::Completed,
                Some(agent_message(&task.context_id, &task.id, t)),
            ),
        )
    };
    let artifact = |id: &str, parts: Vec<Part>| Artifact {
        artifact_id: id.to_owned(),
        name: "result".to_owned(),
        parts,
        ..Default::default()
    };
    match scenario {
        Scenario::Reply => Vec::new(),
        Scenario::Task => {
            let data = pbjson_types::Value::from(pbjson_types::Struct {
                fields: [
                    (
                        "words".to_owned(),
                        pbjson_types::Value::from(text.split_whitespace().count() as f64),
                    ),
                    (
                        "echo".to_owned(),
                        pbjson_types::Value::from(text.to_owned()),
                    ),
                ]
                .into(),
            });
            let parts = vec![
                text_part(format!("done: {text}")),
                Part {
                    content: Some(part::Content::Data(data)),
                    ..Default::default()
                },
            ];
            vec![
                (Duration::ZERO, working("working")),
                (
                    Duration::ZERO,
                    artifact_event(task, artifact("result", parts), false, true),
                ),
                (Duration::ZERO, done("completed")),
            ]
        }
        Scenario::Stream => {
            let mut steps = vec![(quick, working("streaming"))];
            for (i, chunk) in ["one ", "two ", "three"].iter().enumerate() {
                let event = artifact_event(
                    task,
                    artifact("stream", vec![text_part(*chunk)]),
                    i > 0,
                    i == 2,
                );
                steps.push((quick, event));
            }
            steps.push((quick, done("stream complete")));
            steps
        }
        Scenario::Input => vec![(
            Duration::ZERO,
            status_event(
                task,
                status(
                    TaskState::InputRequired,
                    Some(agent_message(
                        &task.context_id,
                        &task.id,
                        "what should I do next?",
                    )),
                ),
            ),
        )],
        Scenario::Slow => {
            let tick = Duration::from_millis(500);
            let mut steps: Vec<_> = (1..60)
                .map(|i| (tick, working(&format!("step {i} of 60"))))
                .collect();
            steps.push((tick, done("slow task complete")));
            steps
        }
        Scenario::Fail => vec![(
            Duration::ZERO,
            status_event(
                task,
                status(
                    TaskState::Failed,
                    Some(agent_message(
                        &task.context_id,
                        &task.id,
                        "the demo agent failed on purpose",
                    )),
                ),
            ),
        )],
        Scenario::Reject => vec![(
            Duration::ZERO,
            status_event(
                task,
                status(
                    TaskState::Rejected,
                    Some(agent_message(
                        &task.context_id,
                        &task.id,
                        "the demo agent rejects this task",
                    )),
                ),
            ),
        )],
    }
}

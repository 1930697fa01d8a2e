//! An unfiltered `ListTasks` on a route with task affinity: each endpoint knows only its
//! own tasks, so every endpoint is asked and the pages are merged in the spec's order
//! (3.1.4: by status timestamp, most recent first; ties keep endpoint order).
//!
//! The page token clients get is the gateway's: for each endpoint that has more tasks,
//! the agent's page token its next tasks start at and how many of that page the client
//! has already seen, plus the total of the endpoints that have no more (for
//! `totalSize`). A continuation asks each listed endpoint for that page again, larger by
//! what was seen, and skips those. A task is only placed once every endpoint with more
//! tasks has shown what comes next, so a page may be shorter than `pageSize` when an
//! agent's own page ends; it is never out of order. Endpoints that joined after the
//! first page are not listed by that listing; those that left take their tasks with them.
//! Any endpoint's error fails the call: a listing that silently lacks one pod's tasks
//! would be an answer the agent never gave.

use std::collections::VecDeque;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{rewrite_out, IdCodec};
use crate::backend::endpoints::balance::Balanced;
use crate::backend::endpoints::EndpointTag;
use crate::backend::fault::Fault;
use crate::backend::{Answer, Call};
use crate::proto::{ListTasksRequest, ListTasksResponse, Task};
use crate::protocol::error::A2aError;
use crate::protocol::ops::{Reply, UnaryRequest};

/// The page size when the request names none, and the largest (spec: `ListTasksRequest`).
const DEFAULT_PAGE: i32 = 50;
const MAX_PAGE: i32 = 100;

/// The gateway's page token (base64url of this as JSON).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct PageToken {
    /// Each endpoint that has more tasks.
    at: Vec<Position>,
    /// The tasks of the endpoints that have no more.
    done: i32,
}

/// Where one endpoint's next tasks start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Position {
    /// The endpoint's tag, hex.
    e: String,
    /// The agent's page token.
    t: String,
    /// Tasks of that page already returned.
    s: usize,
}

impl PageToken {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(text: &str) -> Result<PageToken, A2aError> {
        let bad = || A2aError::invalid_params("pageToken", "not a page token of this listing");
        let json = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
        serde_json::from_slice(&json).map_err(|_| bad())
    }
}

fn hex(tag: EndpointTag) -> String {
    tag.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// One endpoint's page during a merge.
struct Source {
    tag: EndpointTag,
    /// The agent's token of this page, and how many of it the client saw before.
    token: String,
    skip: usize,
    /// Tasks not returned yet, in the agent's order.
    tasks: VecDeque<Task>,
    taken: usize,
    next: String,
    total: i32,
}

/// Most recent first; a task without status timestamp sorts last.
fn recency(task: &Task) -> (i64, i32) {
    let stamp = task.status.as_ref().and_then(|s| s.timestamp.as_ref());
    stamp.map_or((i64::MIN, 0), |t| (t.seconds, t.nanos))
}

/// Asks every endpoint (or those the page token lists) and merges their pages.
pub async fn every_endpoint(
    balanced: &Balanced,
    codec: &IdCodec,
    call: Call<ListTasksRequest>,
) -> Result<Answer<Reply>, A2aError> {
    let request = call.request;
    let token = match request.page_token.as_str() {
        "" => None,
        text => Some(PageToken::decode(text)?),
    };
    let endpoints = balanced.every().await;
    let started: Vec<_> = endpoints
        .iter()
        .filter_map(|pinned| {
            let position = match &token {
                None => Position {
                    e: hex(pinned.tag()),
                    t: String::new(),
                    s: 0,
                },
                Some(token) => token.at.iter().find(|p| p.e == hex(pinned.tag()))?.clone(),
            };
            let mut asked = request.clone();
            asked.page_token = position.t.clone();
            if position.s > 0 {
                // The page the client is inside of, again, with room for the rest of it.
                let size = request.page_size.unwrap_or(DEFAULT_PAGE) as usize + position.s;
                asked.page_size = Some(size.min(MAX_PAGE as usize) as i32);
            }
            let call = Call {
                request: UnaryRequest::ListTasks(asked),
                forwarded: call.forwarded.clone(),
                timeout: call.timeout,
            };
            Some(async move { (pinned.tag(), position, pinned.unary(call).await) })
        })
        .collect();
    let mut extensions = None;
    let mut sources = Vec::with_capacity(started.len());
    for (tag, position, result) in futures::future::join_all(started).await {
        let answer = result?;
        extensions = extensions.or(answer.extensions);
        let Reply::ListTasks(page) = answer.value else {
            return Err(Fault::BadResponse("ListTasks answered with another reply".into()).into());
        };
        let mut tasks = VecDeque::from(page.tasks);
        tasks.drain(..position.s.min(tasks.len()));
        sources.push(Source {
            tag,
            token: position.t,
            skip: position.s,
            tasks,
            taken: 0,
            next: page.next_page_token,
            total: page.total_size,
        });
    }
    let size = request.page_size.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let tasks = merge(&mut sources, size as usize, codec);
    let done = token.as_ref().map_or(0, |t| t.done);
    let total = done + sources.iter().map(|s| s.total).sum::<i32>();
    let next = advance(sources, done);
    let next_page_token = if next.at.is_empty() {
        String::new()
    } else {
        next.encode()
    };
    Ok(Answer {
        value: Reply::ListTasks(ListTasksResponse {
            tasks,
            next_page_token,
            page_size: size,
            total_size: total,
        }),
        extensions,
    })
}

/// The token of the next page: where each endpoint with more tasks stands after the
/// merge, and the totals of those that have no more (`done`: of earlier pages).
fn advance(sources: Vec<Source>, done: i32) -> PageToken {
    let mut next = PageToken {
        at: Vec::new(),
        done,
    };
    for source in sources {
        let e = hex(source.tag);
        if !source.tasks.is_empty() {
            let s = source.skip + source.taken;
            next.at.push(Position {
                e,
                t: source.token,
                s,
            });
        } else if !source.next.is_empty() {
            next.at.push(Position {
                e,
                t: source.next,
                s: 0,
            });
        } else {
            next.done += source.total;
        }
    }
    next
}

/// Takes up to `size` tasks, most recent first, while every endpoint with more tasks has
/// one to compare; each gets the ids of its endpoint.
fn merge(sources: &mut [Source], size: usize, codec: &IdCodec) -> Vec<Task> {
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        if sources
            .iter()
            .any(|s| s.tasks.is_empty() && !s.next.is_empty())
        {
            break;
        }
        let mut best: Option<usize> = None;
        for (i, source) in sources.iter().enumerate() {
            let Some(task) = source.tasks.front() else {
                continue;
            };
            let newer = best.is_none_or(|b| {
                let front = sources[b].tasks.front().map(recency);
                Some(recency(task)) > front
            });
            if newer {
                best = Some(i);
            }
        }
        let Some(best) = best else { break };
        let source = &mut sources[best];
        let Some(mut task) = source.tasks.pop_front() else {
            break;
        };
        source.taken += 1;
        rewrite_out(&mut task, codec, source.tag);
        out.push(task);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::TaskStatus;

    fn task(id: &str, seconds: i64) -> Task {
        Task {
            id: id.into(),
            status: Some(TaskStatus {
                timestamp: Some(crate::proto::Timestamp { seconds, nanos: 0 }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn source(label: &str, tasks: Vec<Task>, skip: usize, next: &str, total: i32) -> Source {
        let mut tasks = VecDeque::from(tasks);
        tasks.drain(..skip);
        Source {
            tag: EndpointTag::of(label),
            token: format!("{label}-page"),
            skip,
            tasks,
            taken: 0,
            next: next.into(),
            total,
        }
    }

    fn ids(tasks: &[Task], codec: &IdCodec) -> Vec<String> {
        let ids = tasks
            .iter()
            .map(|t| codec.unwrap(&t.id).unwrap().1.to_owned());
        ids.collect()
    }

    #[test]
    fn pages_merge_by_recency_and_resume_where_they_stopped() {
        let codec = IdCodec::new(b"sixteen bytes or more").unwrap();
        // `a` has two more pages' worth; `b`'s page ends with more behind it.
        let mut sources = vec![
            source(
                "a",
                vec![task("a1", 10), task("a2", 5), task("a3", 1)],
                1,
                "",
                3,
            ),
            source("b", vec![task("b1", 8)], 0, "b-next", 4),
            source("c", vec![], 0, "", 2),
        ];
        let page = merge(&mut sources, 10, &codec);
        // After b1, `b` has more tasks that may be newer than a2: the page stops there.
        assert_eq!(ids(&page, &codec), ["b1"]);
        let token = advance(sources, 7);
        let at = |label: &str, t: &str, s| Position {
            e: hex(EndpointTag::of(label)),
            t: t.into(),
            s,
        };
        assert_eq!(token.at, [at("a", "a-page", 1), at("b", "b-next", 0)]);
        assert_eq!(token.done, 9, "c has no more");
        assert_eq!(PageToken::decode(&token.encode()).unwrap(), token);

        // A full page stops at its size; ties keep endpoint order.
        let mut sources = vec![
            source("a", vec![task("a1", 3), task("a2", 2)], 0, "", 2),
            source("b", vec![task("b1", 3)], 0, "", 1),
        ];
        assert_eq!(ids(&merge(&mut sources, 2, &codec), &codec), ["a1", "b1"]);
        assert!(PageToken::decode("not a token").is_err());
    }
}

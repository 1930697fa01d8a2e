//! An unfiltered `ListTasks` on a route with task affinity: each endpoint knows only its
//! own tasks, so every endpoint is asked and the pages are merged in the spec's order
//! (3.1.4: by status timestamp, most recent first; ties keep endpoint order).
//!
//! The page token clients get is the gateway's: for each endpoint that has more tasks,
//! the agent's page token its next tasks start at and how many of that page the client
//! has already seen, plus the total of the endpoints that have no more (for
//! `totalSize`). It is `base64url(version ‖ MAC ‖ JSON)`, the MAC (the route key's,
//! `IdCodec::seal`) over the JSON and the listing's filters: a client can neither edit
//! it, nor make one up, nor carry it to another listing or route (`-32602` naming
//! `pageToken`). Its length and every number in it are checked all the same. A continuation asks each listed endpoint for that page again, larger by
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

use super::codec::SEAL_LEN;
use super::{rewrite_out, IdCodec};
use crate::backend::endpoints::balance::Balanced;
use crate::backend::endpoints::EndpointTag;
use crate::backend::fault::Fault;
use crate::backend::{Answer, Call, Error};
use crate::proto::{ListTasksRequest, ListTasksResponse, Task};
use crate::protocol::error::A2aError;
use crate::protocol::ops::{Reply, UnaryRequest};

/// The page size when the request names none, and the largest (spec: `ListTasksRequest`).
const DEFAULT_PAGE: i32 = 50;
const MAX_PAGE: i32 = 100;

/// The longest page token, in characters, the gateway reads or issues.
pub const MAX_TOKEN_CHARS: usize = 16_384;
/// The first byte of a page token of this format.
const TOKEN_VERSION: u8 = 1;

/// The gateway's page token (sealed JSON of this).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageToken {
    /// Each endpoint that has more tasks.
    at: Vec<Position>,
    /// The tasks of the endpoints that have no more.
    done: i32,
}

/// Where one endpoint's next tasks start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Position {
    /// The endpoint's tag, hex.
    e: String,
    /// The agent's page token.
    t: String,
    /// Tasks of that page already returned.
    s: usize,
}

/// A page token that is not one this listing issued.
fn bad_token(why: &str) -> A2aError {
    A2aError::invalid_params(
        "pageToken",
        &format!("not a page token of this listing: {why}"),
    )
}

/// What a page token is sealed to: every field of the request but the page itself, so a
/// token is refused when the filters (status, time, tenant, …) differ from its listing's.
fn filters(request: &ListTasksRequest) -> Vec<u8> {
    let filters = ListTasksRequest {
        page_token: String::new(),
        page_size: None,
        ..request.clone()
    };
    prost::Message::encode_to_vec(&filters)
}

impl PageToken {
    /// The token text, or `None` when the agents' own tokens make it longer than
    /// `MAX_TOKEN_CHARS` (a token the gateway could not read back).
    fn seal(&self, codec: &IdCodec, filters: &[u8]) -> Option<String> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let mut raw = Vec::with_capacity(1 + SEAL_LEN + json.len());
        raw.push(TOKEN_VERSION);
        raw.extend_from_slice(&codec.seal(filters, &json));
        raw.extend_from_slice(&json);
        let text = URL_SAFE_NO_PAD.encode(raw);
        (text.len() <= MAX_TOKEN_CHARS).then_some(text)
    }

    fn open(text: &str, codec: &IdCodec, filters: &[u8]) -> Result<PageToken, A2aError> {
        if text.len() > MAX_TOKEN_CHARS {
            return Err(bad_token(&format!(
                "longer than {MAX_TOKEN_CHARS} characters"
            )));
        }
        let raw = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| bad_token("not base64url"))?;
        let (version, rest) = raw.split_first().ok_or_else(|| bad_token("empty"))?;
        if *version != TOKEN_VERSION || rest.len() < SEAL_LEN {
            return Err(bad_token("unknown format"));
        }
        let (seal, json) = rest.split_at(SEAL_LEN);
        if !codec.opens(seal, filters, json) {
            return Err(bad_token("issued for other filters, or altered"));
        }
        let token: PageToken = serde_json::from_slice(json).map_err(|_| bad_token("unreadable"))?;
        token.check()?;
        Ok(token)
    }

    /// The ranges a token the gateway issued keeps to, checked even under a valid seal
    /// (a token issued by a gateway of another version, or with a leaked key, must not
    /// make a listing overflow or index past a page).
    fn check(&self) -> Result<(), A2aError> {
        if self.done < 0 {
            return Err(bad_token("negative total"));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.at.len());
        for position in &self.at {
            if position.s > MAX_PAGE as usize {
                return Err(bad_token("position past a page"));
            }
            let hex_tag =
                position.e.len() == 16 && position.e.bytes().all(|b| b.is_ascii_hexdigit());
            if !hex_tag || !seen.insert(position.e.as_str()) {
                return Err(bad_token("bad endpoint"));
            }
        }
        Ok(())
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
) -> Result<Answer<Reply>, Error> {
    let request = call.request;
    let filters = filters(&request);
    let token = match request.page_token.as_str() {
        "" => None,
        text => Some(PageToken::open(text, codec, &filters).map_err(Error::unsent)?),
    };
    let size = request.page_size.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
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
                // Both at most `MAX_PAGE` (`PageToken::check`): no overflow.
                let asked_size = size as usize + position.s;
                asked.page_size = Some(asked_size.min(MAX_PAGE as usize) as i32);
            }
            let call = Call {
                request: UnaryRequest::ListTasks(asked),
                forwarded: call.forwarded.clone(),
                deadline: call.deadline,
                trace: call.trace.clone(),
            };
            Some(async move { (pinned.tag(), position, pinned.unary(call).await) })
        })
        .collect();
    let (mut extensions, mut status) = (None, None);
    let mut sources = Vec::with_capacity(started.len());
    for (tag, position, result) in futures::future::join_all(started).await {
        let answer = result?;
        extensions = extensions.or(answer.extensions);
        status = status.or(answer.status);
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
    let tasks = merge(&mut sources, size as usize, codec);
    let done = token.as_ref().map_or(0, |t| t.done);
    // Agents' totals are theirs to get wrong: summed without overflow, never negative.
    let total = sources.iter().fold(done, |sum, s| add_total(sum, s.total));
    let next = advance(sources, done);
    let next_page_token = if next.at.is_empty() {
        String::new()
    } else {
        next.seal(codec, &filters).ok_or_else(|| {
            Fault::BadResponse(format!(
                "the agents' page tokens make a listing token over {MAX_TOKEN_CHARS} characters"
            ))
        })?
    };
    Ok(Answer {
        value: Reply::ListTasks(ListTasksResponse {
            tasks,
            next_page_token,
            page_size: size,
            total_size: total,
        }),
        status,
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
            next.done = add_total(next.done, source.total);
        }
    }
    next
}

/// `sum + total`, a negative total counting 0 and the sum stopping at `i32::MAX`.
fn add_total(sum: i32, total: i32) -> i32 {
    sum.saturating_add(total.max(0))
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

    fn codec() -> IdCodec {
        IdCodec::new(b"sixteen bytes or more", "r").unwrap()
    }

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
            tag: codec().tag(label),
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

    fn position(label: &str, t: &str, s: usize) -> Position {
        Position {
            e: hex(codec().tag(label)),
            t: t.into(),
            s,
        }
    }

    #[test]
    fn pages_merge_by_recency_and_resume_where_they_stopped() {
        let codec = codec();
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
        let expected = [position("a", "a-page", 1), position("b", "b-next", 0)];
        assert_eq!(token.at, expected);
        assert_eq!(token.done, 9, "c has no more");
        let sealed = token.seal(&codec, b"filters").unwrap();
        assert_eq!(PageToken::open(&sealed, &codec, b"filters").unwrap(), token);

        // A full page stops at its size; ties keep endpoint order.
        let mut sources = vec![
            source("a", vec![task("a1", 3), task("a2", 2)], 0, "", 2),
            source("b", vec![task("b1", 3)], 0, "", 1),
        ];
        assert_eq!(ids(&merge(&mut sources, 2, &codec), &codec), ["a1", "b1"]);
    }

    #[test]
    fn totals_do_not_overflow() {
        for (sum, total, expected) in [
            (0, 5, 5),
            (3, -7, 3),
            (i32::MAX - 1, 1, i32::MAX),
            (i32::MAX, i32::MAX, i32::MAX),
        ] {
            assert_eq!(add_total(sum, total), expected, "{sum} + {total}");
        }
        let sources = vec![source("a", vec![], 0, "", i32::MAX)];
        assert_eq!(advance(sources, i32::MAX).done, i32::MAX);
    }

    fn refusal(text: &str, filters: &[u8]) -> String {
        let err = PageToken::open(text, &codec(), filters).unwrap_err();
        assert_eq!(err.kind.code(), -32602, "{err:?}");
        assert!(err.message.contains("pageToken"), "{}", err.message);
        err.message
    }

    /// A token sealed as the gateway seals one, with `json` inside.
    fn sealed_json(json: &str) -> String {
        let mut raw = vec![TOKEN_VERSION];
        raw.extend_from_slice(&codec().seal(b"f", json.as_bytes()));
        raw.extend_from_slice(json.as_bytes());
        URL_SAFE_NO_PAD.encode(raw)
    }

    #[test]
    fn tokens_are_sealed_to_their_filters() {
        let token = PageToken {
            at: vec![position("a", "agent-token", 3)],
            done: 4,
        };
        let sealed = token.seal(&codec(), b"f").unwrap();
        assert!(refusal(&sealed, b"g").contains("other filters"));
        let sibling = IdCodec::new(b"sixteen bytes or more", "other route").unwrap();
        assert!(PageToken::open(&sealed, &sibling, b"f").is_err());
        // Every single-byte change of the token's bytes is refused.
        let raw = URL_SAFE_NO_PAD.decode(&sealed).unwrap();
        for at in 0..raw.len() {
            let mut altered = raw.clone();
            altered[at] ^= 1;
            refusal(&URL_SAFE_NO_PAD.encode(&altered), b"f");
        }
        for text in ["not a token", "", "AQ", &sealed[..sealed.len() - 4]] {
            refusal(text, b"f");
        }
    }

    #[test]
    fn token_length_is_bounded() {
        // The longest token is read (and refused by its seal alone); one more character is
        // refused before decoding.
        let at_limit = "A".repeat(MAX_TOKEN_CHARS);
        assert!(!refusal(&at_limit, b"f").contains("longer"));
        let past = "A".repeat(MAX_TOKEN_CHARS + 1);
        assert!(refusal(&past, b"f").contains("longer than 16384"));
        // A token the agents' tokens would make too long is not issued.
        let long = PageToken {
            at: vec![position("a", &"t".repeat(MAX_TOKEN_CHARS), 0)],
            done: 0,
        };
        assert_eq!(long.seal(&codec(), b"f"), None);
        let fits = PageToken {
            at: vec![position("a", &"t".repeat(MAX_TOKEN_CHARS / 2), 0)],
            done: 0,
        };
        let text = fits.seal(&codec(), b"f").unwrap();
        assert!(text.len() <= MAX_TOKEN_CHARS);
        assert_eq!(PageToken::open(&text, &codec(), b"f").unwrap(), fits);
    }

    #[test]
    fn every_number_of_a_token_is_range_checked() {
        let e = hex(codec().tag("a"));
        let f = hex(codec().tag("b"));
        let rows = [
            (
                format!(r#"{{"at":[{{"e":"{e}","t":"x","s":0}}],"done":0}}"#),
                true,
            ),
            (
                format!(r#"{{"at":[{{"e":"{e}","t":"x","s":100}}],"done":0}}"#),
                true,
            ),
            (
                format!(r#"{{"at":[{{"e":"{e}","t":"x","s":101}}],"done":0}}"#),
                false,
            ),
            (
                format!(r#"{{"at":[{{"e":"{e}","t":"x","s":-1}}],"done":0}}"#),
                false,
            ),
            (
                format!(r#"{{"at":[{{"e":"{e}","t":"x","s":1e30}}],"done":0}}"#),
                false,
            ),
            (r#"{"at":[],"done":2147483647}"#.to_owned(), true),
            (r#"{"at":[],"done":2147483648}"#.to_owned(), false),
            (r#"{"at":[],"done":-1}"#.to_owned(), false),
            (
                format!(
                    r#"{{"at":[{{"e":"{e}","t":"x","s":0}},{{"e":"{f}","t":"y","s":0}}],"done":0}}"#
                ),
                true,
            ),
            (
                format!(
                    r#"{{"at":[{{"e":"{e}","t":"x","s":0}},{{"e":"{e}","t":"y","s":0}}],"done":0}}"#
                ),
                false,
            ),
            (
                r#"{"at":[{"e":"zz","t":"x","s":0}],"done":0}"#.to_owned(),
                false,
            ),
            (
                r#"{"at":[{"e":"0123456789abcdeg","t":"x","s":0}],"done":0}"#.to_owned(),
                false,
            ),
            (r#"{"at":[],"done":0,"extra":1}"#.to_owned(), false),
        ];
        for (json, ok) in rows {
            let opened = PageToken::open(&sealed_json(&json), &codec(), b"f");
            assert_eq!(opened.is_ok(), ok, "{json}: {opened:?}");
        }
    }
}

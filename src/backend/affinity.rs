//! Task affinity without shared state (`affinity = "task"` on a balanced route): agents
//! that keep tasks in memory (the reference SDK's default store) only know the tasks they
//! created, so every call about a task must reach the endpoint that created it.
//!
//! The ids a client sees name their endpoint (`codec`: an authenticated prefix over the
//! agent's own id), in every place the id table lists (`ids`). Out, every id of every
//! reply and event gets the prefix of the endpoint that answered; in, every id of a
//! request is restored to the agent's own and the call goes to the endpoint the ids name
//! (`Balanced::pinned`), never elsewhere. A request without ids (a `SendMessage` starting
//! a new context, `GetExtendedAgentCard`) is balanced as usual. An unfiltered `ListTasks`
//! asks every endpoint and merges (`list`).
//!
//! An id that does not verify, whose endpoint the route no longer has, or that names
//! another endpoint than the request's other ids is a task the agent cannot know: the
//! agent's own task-not-found (-32001), not a gateway fault. A route without affinity
//! never comes here (`tests/it/cost_budget.rs`).

mod codec;
pub(crate) mod ids;
pub(crate) mod list;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};

pub use codec::IdCodec;
pub(crate) use codec::{ForeignId, OwnerTag};
// The owner tests tell a minted id from a wrapped one.
#[cfg(test)]
pub(crate) use codec::minted_shape;
pub(crate) use codec::{MAX_KEY_LEN, MINTED_LEN, NONCE_LEN, WRAP_LEN};
use ids::Ids;

use super::endpoints::balance::Balanced;
use super::endpoints::EndpointTag;
use super::{Answer, Backend, Call, Error, EventStream};
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Reply, StreamRequest, UnaryRequest};
use crate::telemetry::untrusted::echoed;

/// Whether a route keeps tasks on the endpoint that created them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Affinity {
    /// Every call is balanced on its own.
    #[default]
    None,
    /// Task-scoped calls follow their task's ids to its endpoint.
    Task,
}

/// The secret that authenticates affinity ids (`affinity-key`), as configured; kept out
/// of `Debug` output, so a logged configuration does not leak it.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct AffinityKey(pub String);

impl std::fmt::Debug for AffinityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AffinityKey(<redacted>)")
    }
}

impl std::str::FromStr for AffinityKey {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(AffinityKey(text.to_owned()))
    }
}

/// Route `route`'s id codec from `affinity-key` or the file of `affinity-key-file`. The
/// key is its bytes as written (a base64 text such as `openssl rand -base64 32` prints
/// is used as those characters, not decoded); a file's trailing whitespace, such as the
/// newline `echo` leaves, is not part of it.
pub(crate) fn load_codec(
    key: Option<&AffinityKey>,
    file: Option<&std::path::Path>,
    route: &str,
) -> Result<IdCodec, String> {
    match (key, file) {
        (Some(key), None) => IdCodec::new(key.0.as_bytes(), route),
        (None, Some(path)) => {
            let limit = codec::MAX_KEY_LEN + KEY_FILE_SLACK;
            let bytes = read_key_file(path, limit).map_err(|e| format!("{path:?}: {e}"))?;
            let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace());
            IdCodec::new(&bytes[..end.map_or(0, |e| e + 1)], route)
                .map_err(|e| format!("{path:?}: {e}"))
        }
        (Some(_), Some(_)) => Err("set affinity-key or affinity-key-file, not both".into()),
        (None, None) => Err(
            "affinity = \"task\" needs a key every gateway replica shares: affinity-key, \
             affinity-key-file or A2A_GATEWAY_AFFINITY_KEY"
                .into(),
        ),
    }
}

/// A key file's bytes, reading no more than `limit` (what its keys may hold, plus
/// trailing whitespace), so a wrong path such as a device or a large file is refused
/// without reading it all.
pub(crate) fn read_key_file(path: &std::path::Path, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let limit = limit as u64;
    crate::watched::note(path);
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "more than {limit} bytes; a key has at most {} bytes",
            codec::MAX_KEY_LEN
        )));
    }
    Ok(bytes)
}

/// Trailing whitespace a key file may have beyond the longest key (newlines, CRLF).
pub(crate) const KEY_FILE_SLACK: usize = 16;

/// A balanced route's backend with task affinity, for one worker.
pub(crate) struct Affine {
    balanced: Balanced,
    codec: Arc<IdCodec>,
    /// The route is `task-owner`: the owner layer checked every id of a request, and a
    /// context it minted for a new conversation (`auth::owner`) names no endpoint yet.
    minted: bool,
}

impl Affine {
    pub(crate) fn new(balanced: Balanced, codec: Arc<IdCodec>, minted: bool) -> Affine {
        Affine {
            balanced,
            codec,
            minted,
        }
    }

    fn restore(&self, value: &mut impl Ids) -> Result<Option<EndpointTag>, A2aError> {
        restore_in(value, &self.codec, self.minted)
    }
}

/// The error of an id the route cannot serve: the agent's own for a task it does not know.
/// The id is repeated only so far (`untrusted::echoed`): a client's id is unbounded.
fn unknown_id(id: &str) -> A2aError {
    A2aError::with_message(
        ErrorKind::TaskNotFound,
        format!(
            "Task not found: {:?} is not a task or context of this agent",
            echoed(id)
        ),
    )
}

/// Rewrites every id of an agent's `value` to the one clients see for endpoint `tag`.
pub(crate) fn rewrite_out(value: &mut impl Ids, codec: &IdCodec, tag: EndpointTag) {
    value.each_id(&mut |id| *id = codec.wrap(tag, id));
}

/// Restores every id of a client's `value` to the agent's own; returns the endpoint they
/// name (`None`: no id). Ids that do not verify, or that name different endpoints, fail;
/// with `minted`, an id of a minted context's shape (`codec::minted_shape`) names none.
pub(crate) fn restore_in(
    value: &mut impl Ids,
    codec: &IdCodec,
    minted: bool,
) -> Result<Option<EndpointTag>, A2aError> {
    let mut owner = None;
    let mut failed = None;
    value.each_id(&mut |id| {
        if failed.is_some() {
            return;
        }
        match codec.unwrap(id) {
            Ok((tag, agent_id)) if owner.is_none_or(|owner| owner == tag) => {
                owner = Some(tag);
                // The agent's id is the tail: dropping the prefix in place needs no allocation.
                let prefix = id.len() - agent_id.len();
                id.drain(..prefix);
            }
            Err(ForeignId) if minted && codec::minted_shape(id) => {}
            _ => failed = Some(unknown_id(id)),
        }
    });
    match failed {
        Some(err) => Err(err),
        None => Ok(owner),
    }
}

impl Affine {
    async fn unary_call(&self, mut call: Call<UnaryRequest>) -> Result<Answer<Reply>, Error> {
        if let UnaryRequest::ListTasks(request) = &mut call.request {
            if request.context_id.is_empty() {
                let call = Call {
                    request: std::mem::take(request),
                    forwarded: call.forwarded,
                    deadline: call.deadline,
                    trace: call.trace,
                };
                return list::every_endpoint(&self.balanced, &self.codec, call).await;
            }
        }
        let owner = self.restore(&mut call.request).map_err(Error::unsent)?;
        let (tag, mut answer) = match owner {
            Some(tag) => {
                let pinned = self.balanced.pinned(tag).await.ok_or_else(gone)?;
                (tag, pinned.unary(call).await?)
            }
            None => self.balanced.unary_tagged(call).await?,
        };
        rewrite_out(&mut answer.value, &self.codec, tag);
        Ok(answer)
    }

    async fn stream_call(
        &self,
        mut call: Call<StreamRequest>,
    ) -> Result<Answer<EventStream>, Error> {
        let owner = self.restore(&mut call.request).map_err(Error::unsent)?;
        let (tag, answer) = match owner {
            Some(tag) => {
                let pinned = self.balanced.pinned(tag).await.ok_or_else(gone)?;
                (tag, pinned.stream(call).await?)
            }
            None => self.balanced.stream_tagged(call).await?,
        };
        let codec = self.codec.clone();
        let events = answer.value.map(move |event| {
            event.map(|mut event| {
                rewrite_out(&mut event, &codec, tag);
                event
            })
        });
        Ok(Answer {
            value: events.boxed(),
            status: answer.status,
            extensions: answer.extensions,
        })
    }
}

/// The error of an id whose endpoint left the route (its pod, and its tasks, are gone).
fn gone() -> Error {
    Error::unsent(A2aError::with_message(
        ErrorKind::TaskNotFound,
        "Task not found: the agent instance that held it is gone",
    ))
}

impl Backend for Affine {
    fn unary(&self, call: Call<UnaryRequest>) -> BoxFuture<'static, Result<Answer<Reply>, Error>> {
        let this = Affine::new(self.balanced.clone(), self.codec.clone(), self.minted);
        async move { this.unary_call(call).await }.boxed()
    }

    fn stream(
        &self,
        call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>> {
        let this = Affine::new(self.balanced.clone(), self.codec.clone(), self.minted);
        async move { this.stream_call(call).await }.boxed()
    }

    /// An unfiltered `ListTasks` asks every endpoint (`list::every_endpoint`).
    fn width(&self, request: &UnaryRequest) -> usize {
        match request {
            UnaryRequest::ListTasks(list) if list.context_id.is_empty() => self.balanced.width(),
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::untrusted::ECHO_CHARS;

    #[test]
    fn the_key_comes_from_the_setting_or_a_file() {
        let path = std::env::temp_dir().join(format!("a2a-affinity-key-{}", std::process::id()));
        std::fs::write(&path, "a key of sixteen bytes\n").unwrap();
        let from_file = load_codec(None, Some(&path), "r").unwrap();
        let key = AffinityKey("a key of sixteen bytes".into());
        let from_setting = load_codec(Some(&key), None, "r").unwrap();
        let tag = from_setting.tag("10.0.0.1:50051");
        // The file's newline is not part of the key: both verify each other's ids.
        assert!(from_setting.unwrap(&from_file.wrap(tag, "t")).is_ok());
        assert!(load_codec(Some(&key), Some(&path), "r").is_err());
        std::fs::write(&path, "short\n").unwrap();
        let err = load_codec(None, Some(&path), "r").unwrap_err();
        assert!(err.contains("16 to 1024"), "{err}");
        // The longest key with its slack of whitespace is read; one byte more is not.
        let longest = "k".repeat(codec::MAX_KEY_LEN) + &"\n".repeat(KEY_FILE_SLACK);
        std::fs::write(&path, &longest).unwrap();
        assert!(load_codec(None, Some(&path), "r").is_ok());
        std::fs::write(&path, longest + "\n").unwrap();
        let err = load_codec(None, Some(&path), "r").unwrap_err();
        assert!(err.contains("at most 1024"), "{err}");
        std::fs::remove_file(&path).unwrap();
        assert!(load_codec(None, Some(&path), "r").is_err());
        let err = load_codec(None, None, "r").unwrap_err();
        assert!(err.contains("A2A_GATEWAY_AFFINITY_KEY"), "{err}");
        assert_eq!(format!("{key:?}"), "AffinityKey(<redacted>)");
    }

    #[test]
    fn an_unknown_id_is_repeated_only_so_far() {
        for (id, shown) in [
            ("t".repeat(ECHO_CHARS), format!("{:?}", "t".repeat(64))),
            (
                "ü".repeat(ECHO_CHARS + 1),
                format!("\"{}…(+2 bytes)\"", "ü".repeat(64)),
            ),
            (
                "x".repeat(100_000),
                format!("\"{}…(+99936 bytes)\"", "x".repeat(64)),
            ),
        ] {
            let text = unknown_id(&id).message;
            assert!(text.contains(&shown), "{text}");
            assert!(text.len() < 64 * 2 + 100, "{}", text.len());
        }
    }

    #[test]
    fn a_minted_context_names_no_endpoint_on_a_task_owner_route() {
        use crate::proto::{Message, SendMessageRequest};
        let codec = IdCodec::new(b"a key of sixteen bytes or more", "r").unwrap();
        let minted = format!("{}.{}", "A".repeat(24), "b".repeat(22));
        assert_eq!(minted.len(), MINTED_LEN);
        let send = |context: &str| SendMessageRequest {
            message: Some(Message {
                context_id: context.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(restore_in(&mut send(&minted), &codec, true).unwrap(), None);
        // Only with task-owner (whose layer checked the seal), and only that shape.
        assert!(restore_in(&mut send(&minted), &codec, false).is_err());
        for other in [
            &minted[1..],
            &format!("{minted}x"),
            &minted.replace('.', "-"),
        ] {
            assert!(
                restore_in(&mut send(other), &codec, true).is_err(),
                "{other}"
            );
        }
        // An affinity id is still one, whatever its shape.
        let tag = codec.tag("10.0.0.1:1");
        let mut pinned = send(&codec.wrap(tag, "ctx"));
        assert_eq!(restore_in(&mut pinned, &codec, true).unwrap(), Some(tag));
    }
}

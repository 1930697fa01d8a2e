//! Caller-bound tasks (`task-owner`, issue 22 item 3), without shared state: every task
//! and context id a client gets carries its owner, sealed with the route's owner key
//! (the affinity id format, `backend::affinity::codec`, with the principal's keyed digest
//! in place of the endpoint), so any replica that has the key checks any id.
//!
//! In (`Caller::restore_in`, the `owner` layer): every id of a request, at every place the
//! id table (`affinity::ids`) lists, must be sealed for the caller; the seal is taken off
//! and the rest (the agent's id, or the affinity id) goes on. Anything else is answered
//! as an unknown task and never reaches the agent. Out (`Caller::seal_out`, `seal_events`,
//! from `invoke`): every id of a reply or event is sealed for the caller.
//! Composed with affinity, the owner seal is the outer one: `owner(affinity(agent id))`.
//!
//! Listing: an agent does not know who owns a task, so the gateway gives every new
//! conversation (a message naming neither task nor context) a context id of its own
//! minting, `owner(random)`: the agent keeps it (spec 3.4.1: an agent that cannot keep a
//! client's `contextId` must refuse the message), and a `ListTasks` reply keeps only the
//! tasks whose context the caller minted (`keep_own`, `list`).
//!
//! The owner is the principal's scheme, issuer (a JWT's `iss`) and name (an API key
//! "alice" is not the JWT subject "alice", nor one issuer's "alice" another's). A route that authenticates nobody, and anonymous callers of a route
//! that lets them in, are one owner: their ids are sealed (no made-up or altered id
//! reaches the agent) but not told apart.

use std::path::Path;
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures::StreamExt;

use crate::auth::{Principal, Scheme};
use crate::backend::affinity::ids::Ids;
use crate::backend::affinity::{read_key_file, IdCodec, OwnerTag, KEY_FILE_SLACK, MAX_KEY_LEN};
use crate::backend::affinity::{MINTED_LEN, NONCE_LEN, WRAP_LEN};
use crate::backend::{self, Backend, Call, EventStream};
use crate::proto::ListTasksResponse;
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};

/// The most keys an `owner-key-file` may hold (one mints, the others are still accepted).
pub(crate) const MAX_KEYS: usize = 8;

/// A route's owner keys (`owner-key-file`): the first seals, every one opens. Never
/// empty (`load` refuses a file without a key).
pub(crate) struct OwnerKeys {
    codecs: Vec<IdCodec>,
}

impl std::fmt::Debug for OwnerKeys {
    /// The keys stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OwnerKeys({} keys)", self.codecs.len())
    }
}

impl OwnerKeys {
    /// Route `route`'s keys from `path`: one key a line, as the affinity key file holds
    /// one (its bytes as written, trailing whitespace not part of it, 16 to 1024 bytes);
    /// blank lines are skipped.
    pub(crate) fn load(path: &Path, route: &str) -> Result<OwnerKeys, String> {
        let limit = MAX_KEYS * (MAX_KEY_LEN + KEY_FILE_SLACK);
        let bytes = read_key_file(path, limit).map_err(|e| format!("{path:?}: {e}"))?;
        let mut codecs = Vec::new();
        for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let end = line.iter().rposition(|b| !b.is_ascii_whitespace());
            let Some(end) = end else { continue };
            if codecs.len() == MAX_KEYS {
                return Err(format!("{path:?}: more than {MAX_KEYS} keys"));
            }
            let codec = IdCodec::owner(&line[..=end], route)
                .map_err(|e| format!("{path:?} line {}: {e}", n + 1))?;
            codecs.push(codec);
        }
        if codecs.is_empty() {
            return Err(format!("{path:?}: no key"));
        }
        Ok(OwnerKeys { codecs })
    }

    /// The owner tags of `principal` under each key (`None`: the route authenticates
    /// nobody, the anonymous owner).
    pub(crate) fn caller(self: &Arc<Self>, principal: Option<&Principal>) -> Caller {
        let (scheme, name) = principal.map_or((Scheme::Anonymous, ""), |p| (p.scheme, &p.name));
        // Two trusted issuers may both have a subject "alice": a token's verified `iss`
        // is part of its owner.
        let issuer = principal.map_or("", Principal::issuer);
        let scheme = scheme.as_str();
        let mut owner = Vec::with_capacity(scheme.len() + issuer.len() + name.len() + 2);
        for part in [scheme, issuer] {
            owner.extend_from_slice(part.as_bytes());
            owner.push(0);
        }
        owner.extend_from_slice(name.as_bytes());
        let tags = self.codecs.iter().map(|c| c.owner_tag(&owner)).collect();
        Caller {
            keys: self.clone(),
            tags,
        }
    }
}

/// The answer to `request` naming an id that is not the caller's: the reference SDK's
/// to an unknown id, byte for byte but the id (its `ErrorInfo`, and "Task not found", or
/// for a message naming a task `"Task <id> not found"`), so a caller cannot tell another's
/// task from none (spec 3.3.2). The id is the client's own, already bounded (`decode`).
pub(crate) fn unknown_task(request: &Request) -> A2aError {
    let kind = ErrorKind::TaskNotFound;
    let task = match request {
        Request::Unary(UnaryRequest::SendMessage(send))
        | Request::Stream(StreamRequest::SendStreamingMessage(send)) => {
            send.message.as_ref().map(|m| m.task_id.as_str())
        }
        _ => None,
    };
    match task {
        Some(task) if !task.is_empty() => A2aError::a2a(kind, format!("Task {task} not found")),
        _ => A2aError::a2a(kind, kind.message()),
    }
}

/// Calls `visit` on every id of `request` (the id table's rows).
fn each_id(request: &mut Request, visit: &mut dyn FnMut(&mut String)) {
    match request {
        Request::Unary(request) => request.each_id(visit),
        Request::Stream(request) => request.each_id(visit),
    }
}

/// One call's owner: its tag under each of the route's keys.
pub(crate) struct Caller {
    keys: Arc<OwnerKeys>,
    tags: Vec<OwnerTag>,
}

impl Caller {
    fn pairs(&self) -> impl Iterator<Item = (&IdCodec, OwnerTag)> {
        self.keys.codecs.iter().zip(self.tags.iter().copied())
    }

    /// Whether `id` is sealed for the caller under any key.
    fn opens(&self, id: &str) -> bool {
        self.pairs()
            .any(|(codec, tag)| codec.unwrap_owned(tag, id).is_ok())
    }

    /// Takes the caller's seal off every id of `request`; an id without it is an unknown
    /// task, and the request is left as it came (the refusal names its task). A new
    /// conversation then gets a minted context.
    pub(crate) fn restore_in(&self, request: &mut Request) -> Result<(), A2aError> {
        let mut foreign = false;
        each_id(request, &mut |id| foreign = foreign || !self.opens(id));
        if foreign {
            return Err(unknown_task(request));
        }
        // Every id verified: the sealed id is the tail, and dropping the prefix in place
        // needs no allocation.
        each_id(request, &mut |id| drop(id.drain(..WRAP_LEN)));
        self.mint_context(request)
    }

    /// Gives a message naming neither task nor context a context id sealed for the caller.
    fn mint_context(&self, request: &mut Request) -> Result<(), A2aError> {
        let message = match request {
            Request::Unary(UnaryRequest::SendMessage(send))
            | Request::Stream(StreamRequest::SendStreamingMessage(send)) => &mut send.message,
            _ => return Ok(()),
        };
        let Some(message) = message else {
            return Ok(());
        };
        if message.task_id.is_empty() && message.context_id.is_empty() {
            let mut nonce = [0; NONCE_LEN];
            // Only a broken host's random source fails; a guessable context must not result.
            ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
                .map_err(|_| A2aError::new(ErrorKind::Internal))?;
            let (codec, tag) = self.minting();
            message.context_id = codec.wrap_owned(tag, &URL_SAFE_NO_PAD.encode(nonce));
        }
        Ok(())
    }

    /// The first key and the caller's tag under it: what seals.
    fn minting(&self) -> (&IdCodec, OwnerTag) {
        (&self.keys.codecs[0], self.tags[0])
    }

    /// Whether the caller minted `context` (an agent's id, or an affinity id around one).
    fn owns_context(&self, context: &str) -> bool {
        let Some(start) = context.len().checked_sub(MINTED_LEN) else {
            return false;
        };
        context.is_char_boundary(start) && self.opens(&context[start..])
    }

    /// Keeps the caller's own tasks of a listing's page.
    fn keep_own(&self, list: &mut ListTasksResponse) {
        list.tasks
            .retain(|task| self.owns_context(&task.context_id));
    }

    /// The backend call of a unary `call`: a listing keeps the caller's own tasks, filling
    /// its page from the agent's next pages (`list`). The agent's `totalSize` counts every
    /// caller's tasks, which is not the caller's to learn: it becomes the page's count.
    pub(crate) async fn unary(
        &self,
        backend: &dyn Backend,
        mut call: Call<UnaryRequest>,
    ) -> Result<backend::Answer<Reply>, backend::Error> {
        if let UnaryRequest::ListTasks(request) = &mut call.request {
            let request = std::mem::take(request);
            return list::own_tasks(self, backend, request, &call).await;
        }
        backend.unary(call).await
    }

    /// Seals every id of `value` for the caller.
    pub(crate) fn seal_out(&self, value: &mut impl Ids) {
        let (codec, tag) = self.minting();
        value.each_id(&mut |id| *id = codec.wrap_owned(tag, id));
    }

    /// A stream's events with their ids sealed for the caller.
    pub(crate) fn seal_events(self, events: EventStream) -> EventStream {
        events
            .map(move |event| {
                event.map(|mut event| {
                    self.seal_out(&mut event);
                    event
                })
            })
            .boxed()
    }
}

mod list;

pub use list::MORE_PAGES;
#[cfg(test)]
mod tests;

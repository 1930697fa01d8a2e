//! The push relay (`push = "relay"`): the agent never learns where a client's webhook is.
//! A push config a client hands the agent (CreateTaskPushNotificationConfig, or a
//! message's config) is checked by the guard as on any guarded route, then rewritten
//! (`Relay::seal_in`): its URL becomes the gateway's callback (`push-callback-url`), its
//! token the client's URL, token and authentication sealed (`seal`), its authentication
//! none. The configs the agent returns (Create, Get, List) are shown to the client as the
//! client registered them (`Relay::show_out`); one that does not open for the caller, on
//! this route and task (another caller's or route's, or not relayed), is not shown, and
//! only the caller who registered a config may delete it.
//! The agent posts its notifications to the callback (`callback`), which hands each to
//! delivery (`outbox`).

pub(crate) mod callback;
pub(crate) mod verified;

use std::path::Path;
use std::sync::Arc;

use base64::Engine;

use crate::auth::Principal;
use crate::proto::{AuthenticationInfo, Message, TaskPushNotificationConfig};
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Reply, Request, StreamRequest, UnaryRequest};
use crate::push::seal::{owner_digest, PushKeys, Registration, SealError};

/// The relay's process-wide settings: where agents post, with what keys, how much.
#[derive(Debug)]
pub struct RelaySettings {
    /// The callback URL agents are given (`push-callback-url`).
    pub(crate) callback_url: String,
    /// Its path, which the listener serves.
    pub(crate) callback_path: String,
    /// The keys that seal and open tokens (`push-key-file`).
    pub(crate) keys: PushKeys,
    /// The largest notification body accepted (`push-max-body`).
    pub(crate) max_body: usize,
    /// The tokens lately found held by their agent (`push-token-cache-ttl`), which the
    /// callback does not ask about again: shared by every route and thread.
    pub(crate) verified: verified::Verified,
}

impl RelaySettings {
    /// Whether the relay sealed `config`'s token (with any of its keys).
    pub(crate) fn sealed(&self, config: &TaskPushNotificationConfig) -> bool {
        self.keys.open(&config.token).is_some()
    }

    /// On a route that does not relay: leaves out of `reply` the configs whose tokens the
    /// relay sealed (registered through a relaying route to the same agent). Whoever holds
    /// such a token can post notifications to its client's webhook, so only the relaying
    /// route shows them, and only to their caller (`Relay::show_out`). List leaves them
    /// out; Get answers as for an unknown task.
    pub(crate) fn hide_sealed(&self, reply: &mut Reply) -> Result<(), A2aError> {
        let sealed = |config: &TaskPushNotificationConfig| self.sealed(config);
        match reply {
            Reply::CreateTaskPushNotificationConfig(config)
            | Reply::GetTaskPushNotificationConfig(config)
                if sealed(config) =>
            {
                Err(A2aError::new(ErrorKind::TaskNotFound))
            }
            Reply::ListTaskPushNotificationConfigs(list) => {
                list.configs.retain(|config| !sealed(config));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The relay's settings: `callback_url` must be an absolute `http(s)` URL without
    /// credentials or fragment; `key_file` must hold a key (`PushKeys::load`);
    /// `token_cache_ttl` is at most `verified::MAX_TTL`.
    pub(crate) fn new(
        callback_url: Option<&str>,
        key_file: Option<&Path>,
        max_body: usize,
        token_cache_ttl: std::time::Duration,
    ) -> Result<RelaySettings, String> {
        let callback_url = callback_url
            .ok_or("--push-callback-url is required: the URL agents post notifications to")?;
        let bad = |why: &str| format!("--push-callback-url {callback_url:?}: {why}");
        let url = url::Url::parse(callback_url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(bad("an http or https URL is needed"));
        }
        if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
            return Err(bad("no user name, password or fragment"));
        }
        if url.query().is_some() {
            return Err(bad("no query: the gateway serves the URL's path"));
        }
        let key_file = key_file.ok_or(
            "--push-key-file is required: the key that seals clients' webhooks into tokens",
        )?;
        crate::watched::note(key_file);
        let keys = PushKeys::load(key_file).map_err(|e| format!("--push-key-file {e}"))?;
        if max_body == 0 {
            return Err("--push-max-body must be greater than 0".into());
        }
        if token_cache_ttl > verified::MAX_TTL {
            return Err(format!(
                "--push-token-cache-ttl must be at most {:?}: a deleted config's token is trusted that long",
                verified::MAX_TTL
            ));
        }
        Ok(RelaySettings {
            callback_path: url.path().to_owned(),
            callback_url: url.into(),
            keys,
            max_body,
            verified: verified::Verified::new(token_cache_ttl),
        })
    }

    /// The path the callback is served at.
    pub(crate) fn callback_path(&self) -> &str {
        &self.callback_path
    }
}

/// One relaying route's side of the relay: its name, bound into every token it seals.
pub(crate) struct Relay {
    pub(crate) route: Arc<str>,
    pub(crate) settings: Arc<RelaySettings>,
}

/// A push config a request hands the agent, and the message it comes in (a
/// SendMessage's: its task, or its context when it starts one).
fn pushed_config(
    request: &mut Request,
) -> Option<(&mut TaskPushNotificationConfig, Option<&mut Message>)> {
    match request {
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(config)) => {
            Some((config, None))
        }
        Request::Unary(UnaryRequest::SendMessage(send))
        | Request::Stream(StreamRequest::SendStreamingMessage(send)) => {
            let config = send.configuration.as_mut()?;
            let config = config.task_push_notification_config.as_mut()?;
            Some((config, send.message.as_mut()))
        }
        _ => None,
    }
}

/// The random bytes of a context the relay gives a message that starts a conversation.
const CONTEXT_BYTES: usize = 16;

/// The context a config sealed without a task is bound to: `message`'s, or, when it
/// names none, a fresh random one put in it (spec §3.4.1: the agent keeps a client's
/// `contextId` or refuses the message). Every event of the task the message starts
/// carries it, so the callback can tell that task's events from another's.
fn bound_context(message: Option<&mut Message>) -> Result<String, A2aError> {
    let Some(message) = message else {
        return Ok(String::new());
    };
    if message.context_id.is_empty() {
        let mut random = [0; CONTEXT_BYTES];
        // Only a broken host's random source fails; a guessable context must not result.
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random)
            .map_err(|_| A2aError::new(ErrorKind::Internal))?;
        message.context_id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random);
    }
    Ok(message.context_id.clone())
}

impl Relay {
    /// Replaces the push config `request` hands the agent, if any, with the gateway's
    /// callback and a token sealing the client's: bound to this route, the config's task
    /// (or the message's; a message that starts a task: its context, `bound_context`),
    /// the config's id and `owner`, naming the request's tenant. A config too large to seal is refused, naming `field`
    /// (the URL's, as the client's dialect writes it).
    pub(crate) fn seal_in(
        &self,
        request: &mut Request,
        owner: &[u8; 32],
        field: &str,
    ) -> Result<(), A2aError> {
        let tenant = request.tenant().to_owned();
        let Some((config, message)) = pushed_config(request) else {
            return Ok(());
        };
        let message_task = message.as_ref().map(|m| m.task_id.clone());
        let task_id = match config.task_id.is_empty() {
            true => message_task.unwrap_or_default(),
            false => config.task_id.clone(),
        };
        // What delivery will send as headers must be sendable: refused now, not dropped
        // silently at each delivery.
        let sendable = |value: &str| http::HeaderValue::from_str(value).is_ok();
        if !sendable(&config.token) {
            let why = "not a valid HTTP header value";
            return Err(A2aError::invalid_params(&sibling(field, "token"), why));
        }
        if let Some(auth) = &config.authentication {
            let header = format!("{} {}", auth.scheme, auth.credentials);
            if auth.scheme.is_empty() || auth.scheme.contains(' ') || !sendable(&header) {
                let why = "scheme and credentials must make a valid Authorization header";
                return Err(A2aError::invalid_params(
                    &sibling(field, "authentication"),
                    why,
                ));
            }
        }
        let authentication = config
            .authentication
            .take()
            .map(|auth| (auth.scheme, auth.credentials));
        let context_id = match task_id.is_empty() {
            true => bound_context(message)?,
            false => String::new(),
        };
        let registration = Registration {
            route: self.route.to_string(),
            task_id,
            context_id,
            config_id: config.id.clone(),
            tenant,
            owner: *owner,
            url: std::mem::take(&mut config.url),
            token: std::mem::take(&mut config.token),
            authentication,
        };
        config.token = self
            .settings
            .keys
            .seal(&registration)
            .map_err(|e| match e {
                SealError::TooLarge(_) => A2aError::invalid_params(field, &e.to_string()),
                SealError::Random => A2aError::new(crate::protocol::error::ErrorKind::Internal),
            })?;
        config.url.clone_from(&self.settings.callback_url);
        Ok(())
    }

    /// Shows the client the configs of `reply` as it registered them. One that does not
    /// open for the caller (`principal`) on this route and its task is not shown at all:
    /// its sealed token would let whoever reads it post notifications to another client's
    /// webhook. List leaves it out; Get answers as for an unknown task.
    pub(crate) fn show_out(
        &self,
        reply: &mut Reply,
        principal: Option<&Principal>,
    ) -> Result<(), A2aError> {
        let owner = owner_digest(principal);
        let shown = match reply {
            Reply::CreateTaskPushNotificationConfig(config)
            | Reply::GetTaskPushNotificationConfig(config) => self.show(config, &owner),
            Reply::ListTaskPushNotificationConfigs(list) => {
                list.configs.retain_mut(|config| self.show(config, &owner));
                true
            }
            _ => true,
        };
        match shown {
            true => Ok(()),
            false => Err(A2aError::new(ErrorKind::TaskNotFound)),
        }
    }

    /// Whether `config`, as the agent has it, was registered through this route for its
    /// task by the caller `principal`: only that caller may delete it.
    pub(crate) fn owns(
        &self,
        config: &TaskPushNotificationConfig,
        principal: Option<&Principal>,
    ) -> bool {
        self.opened(config, &owner_digest(principal)).is_some()
    }

    /// What `config`'s token seals, if it opens for `owner` on this route, its task and
    /// its id.
    fn opened(
        &self,
        config: &TaskPushNotificationConfig,
        owner: &[u8; 32],
    ) -> Option<Registration> {
        let sealed = self.settings.keys.open(&config.token)?;
        let same_id = sealed.config_id.is_empty() || sealed.config_id == config.id;
        (same_id && sealed.binds(&self.route, &config.task_id, owner)).then_some(sealed)
    }

    /// Shows `config` as its client registered it, whatever URL the agent holds (a config
    /// registered before `push-callback-url` changed is still the client's); false when
    /// it does not open for `owner` here.
    fn show(&self, config: &mut TaskPushNotificationConfig, owner: &[u8; 32]) -> bool {
        let Some(sealed) = self.opened(config, owner) else {
            return false;
        };
        config.url = sealed.url;
        config.token = sealed.token;
        config.authentication =
            sealed
                .authentication
                .map(|(scheme, credentials)| AuthenticationInfo {
                    scheme,
                    credentials,
                });
        true
    }
}

/// The field beside `field` named `name` (`configuration.x.url` → `configuration.x.token`).
pub(crate) fn sibling(field: &str, name: &str) -> String {
    match field.rsplit_once('.') {
        Some((parent, _)) => format!("{parent}.{name}"),
        None => name.to_owned(),
    }
}

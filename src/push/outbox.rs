//! What the relay hands delivery: one notification, already authenticated and checked,
//! bound for the webhook the client registered. The relay (`push/relay*`) produces these;
//! delivery (`push/deliver*`) queues, sends and retries them.

use std::sync::Arc;

use bytes::Bytes;

/// One notification to deliver to a client's webhook.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The route's name, for metrics and logs.
    pub route: Arc<str>,
    /// The task the event belongs to: events of one task are delivered in order.
    pub task_id: String,
    /// A digest of the event's bytes and task, so a duplicate post is delivered once.
    pub event_key: [u8; 32],
    /// The client's webhook URL, as it registered it (checked again at connect time).
    pub url: String,
    /// The client's token, sent as `X-A2A-Notification-Token` (the header the reference
    /// SDK sends a config's token in; the specification names none).
    pub token: Option<String>,
    /// The client's authentication for its webhook: scheme and credentials, sent as
    /// `Authorization: <scheme> <credentials>`.
    pub authentication: Option<(String, String)>,
    /// The body to post: the A2A `StreamResponse` the agent posted, written anew from what
    /// was read (nothing unknown to A2A passes).
    pub body: Bytes,
    /// The trace context of the agent's post, so the delivery's span links to it.
    pub traceparent: Option<String>,
}

/// Why a delivery was not accepted for sending.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The queues are full and the policy drops the newest.
    #[error("delivery queue full")]
    Full,
    /// The gateway is shutting down.
    #[error("shutting down")]
    Closed,
}

/// Where the relay puts deliveries.
pub trait Outbox: Send + Sync + 'static {
    /// Queues `delivery`; returns at once (sending happens elsewhere).
    fn enqueue(&self, delivery: Delivery) -> Result<(), Refused>;
}

//! The push relay's counters: what became of the push configs clients handed the agent
//! (`a2a_gateway_push_registrations_total`) and of the notifications agents posted to the
//! callback (`a2a_gateway_push_callbacks_total`), per route. A post whose token names no
//! relaying route is counted under `route=""`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What became of a push config a client handed the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PushRegistration {
    /// `push = "pass"`: handed on unchecked.
    Passed,
    /// The guard admitted its URL; handed on as sent.
    Guarded,
    /// The guard admitted its URL; the agent got the gateway's callback and a sealed token.
    Relayed,
    /// Refused (-32602): the guard refused its URL, or it was too large to seal.
    Refused,
}

impl PushRegistration {
    const ALL: [PushRegistration; 4] = [
        PushRegistration::Passed,
        PushRegistration::Guarded,
        PushRegistration::Relayed,
        PushRegistration::Refused,
    ];

    fn as_str(self) -> &'static str {
        match self {
            PushRegistration::Passed => "passed",
            PushRegistration::Guarded => "guarded",
            PushRegistration::Relayed => "relayed",
            PushRegistration::Refused => "refused",
        }
    }
}

/// What became of a notification an agent posted to the relay's callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PushCallback {
    /// Handed to delivery (204).
    Accepted,
    /// No token, or one that does not open or names no relaying route (401).
    Unauthorized,
    /// Not a POST, or a body that is not a `StreamResponse` naming a task (405, 400).
    BadRequest,
    /// An event of another task than the token's (400), or, for a message's config sealed
    /// before its task existed, of another context than the message's (403).
    WrongTask,
    /// A Content-Type other than `application/json` or `application/a2a+json` (415).
    UnsupportedType,
    /// A body past `push-max-body` (413).
    TooLarge,
    /// Delivery's queues were full (503).
    Full,
    /// The gateway was shutting down (503).
    Closed,
    /// A token whose push config the agent no longer holds (401).
    Revoked,
    /// The agent could not be asked whether it still holds the token (503).
    Unverified,
}

impl PushCallback {
    const ALL: [PushCallback; 10] = [
        PushCallback::Accepted,
        PushCallback::Unauthorized,
        PushCallback::BadRequest,
        PushCallback::WrongTask,
        PushCallback::UnsupportedType,
        PushCallback::TooLarge,
        PushCallback::Full,
        PushCallback::Closed,
        PushCallback::Revoked,
        PushCallback::Unverified,
    ];

    fn as_str(self) -> &'static str {
        match self {
            PushCallback::Accepted => "accepted",
            PushCallback::Unauthorized => "unauthorized",
            PushCallback::BadRequest => "bad_request",
            PushCallback::WrongTask => "wrong_task",
            PushCallback::UnsupportedType => "unsupported_type",
            PushCallback::TooLarge => "too_large",
            PushCallback::Full => "queue_full",
            PushCallback::Closed => "closed",
            PushCallback::Revoked => "revoked",
            PushCallback::Unverified => "unverified",
        }
    }
}

/// One route's push counts (or the posts of no route).
#[derive(Default)]
pub(crate) struct PushCounters {
    registrations: [AtomicU64; PushRegistration::ALL.len()],
    callbacks: [AtomicU64; PushCallback::ALL.len()],
}

impl PushCounters {
    /// `ALL` lists each enum in declaration order: a variant's number is its index.
    pub(crate) fn registration(&self, outcome: PushRegistration) {
        self.registrations[outcome as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn callback(&self, outcome: PushCallback) {
        self.callbacks[outcome as usize].fetch_add(1, Relaxed);
    }

    fn any(&self) -> bool {
        (self.registrations.iter().chain(&self.callbacks)).any(|n| n.load(Relaxed) > 0)
    }
}

/// Both families, for the routes that counted anything (`route`, counts).
pub(crate) fn render(out: &mut String, routes: &[(&str, &PushCounters)]) {
    if !routes.iter().any(|(_, counts)| counts.any()) {
        return;
    }
    out.push_str("# HELP a2a_gateway_push_registrations_total Push configs clients handed the agent, by what became of them.\n");
    out.push_str("# TYPE a2a_gateway_push_registrations_total counter\n");
    for (route, counts) in routes {
        for (outcome, n) in PushRegistration::ALL.iter().zip(&counts.registrations) {
            let n = n.load(Relaxed);
            if n > 0 {
                let outcome = outcome.as_str();
                let _ = writeln!(
                    out,
                    "a2a_gateway_push_registrations_total{{route=\"{route}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
    }
    out.push_str("# HELP a2a_gateway_push_callbacks_total Notifications agents posted to the push relay's callback, by what became of them.\n");
    out.push_str("# TYPE a2a_gateway_push_callbacks_total counter\n");
    for (route, counts) in routes {
        for (outcome, n) in PushCallback::ALL.iter().zip(&counts.callbacks) {
            let n = n.load(Relaxed);
            if n > 0 {
                let outcome = outcome.as_str();
                let _ = writeln!(
                    out,
                    "a2a_gateway_push_callbacks_total{{route=\"{route}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
    }
}

//! THE transport fault table: every way the gateway's own path to a backend fails (I/O,
//! TLS, HTTP/2, the HTTP client of the HTTP+JSON binding, a deadline, bytes that break the
//! binding) becomes one `Fault`, and each `Fault` one `GatewayFault` row: -32603 with an
//! `ErrorInfo` of domain `a2a-gateway`, so clients never mistake it for an agent's error.
//! Errors are classified by matching on their own accessors (`h2::Error::reason`,
//! `reqwest::Error::is_connect`), never by inventing a gRPC status. The one downcast: a
//! TLS alert from the backend reaches us only as a `rustls::Error` inside an
//! `std::io::Error` (`tls_alert`), and it is what tells an operator that the backend
//! wants a client certificate.

use std::time::Duration;

use rustls::AlertDescription;

use crate::protocol::error::{A2aError, GatewayFault, GATEWAY_DOMAIN};

/// A failure of the path to the backend, with what people need to know about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No connection could be made: refused, unresolvable, timed out, TLS refused.
    Connect(String),
    /// The backend declined the call before processing it (GOAWAY below its stream,
    /// REFUSED_STREAM) on every connection tried: nothing reached the agent.
    Refused(String),
    /// The connection or the stream ended before the answer was complete.
    Lost(String),
    /// The deadline passed before the answer (or the stream's first event) arrived.
    Deadline(String),
    /// The backend's bytes break HTTP/2, gRPC or the binding (oversize headers or
    /// messages, a missing or garbled status, undecodable messages).
    BadResponse(String),
    /// The backend ended the TLS session with an alert (`tls_alert`), e.g. because it
    /// requires a client certificate: nothing reached the agent.
    TlsRefused(String),
}

/// TLS alerts (RFC 8446 §6.2) a backend sends about the gateway's client certificate: the
/// alert's name and what it tells the operator. With TLS 1.3 a server that requires a
/// certificate and got none sends `certificate_required` after the handshake, so the
/// alert may end the first call rather than the connection attempt.
const CLIENT_CERTIFICATE_ALERTS: [(AlertDescription, &str, &str); 9] = [
    (
        AlertDescription::CertificateRequired,
        "certificate_required",
        "the backend requires a client certificate (set --backend-client-cert and --backend-client-key)",
    ),
    (
        AlertDescription::HandshakeFailure,
        "handshake_failure",
        "no TLS parameters in common, or (TLS 1.2) the backend requires a client certificate \
         (--backend-client-cert)",
    ),
    (
        AlertDescription::BadCertificate,
        "bad_certificate",
        "the backend refused the gateway's client certificate (--backend-client-cert)",
    ),
    (
        AlertDescription::UnknownCA,
        "unknown_ca",
        "the backend does not trust the issuer of the gateway's client certificate (--backend-client-cert)",
    ),
    (
        AlertDescription::CertificateExpired,
        "certificate_expired",
        "the gateway's client certificate has expired or is not yet valid (--backend-client-cert)",
    ),
    (
        AlertDescription::CertificateRevoked,
        "certificate_revoked",
        "the gateway's client certificate was revoked (--backend-client-cert)",
    ),
    (
        AlertDescription::CertificateUnknown,
        "certificate_unknown",
        "the backend refused the gateway's client certificate (--backend-client-cert)",
    ),
    (
        AlertDescription::UnsupportedCertificate,
        "unsupported_certificate",
        "the backend does not support the gateway's client certificate (--backend-client-cert)",
    ),
    (
        AlertDescription::AccessDenied,
        "access_denied",
        "the backend denies access to the gateway's client certificate (--backend-client-cert)",
    ),
];

/// The TLS alert the backend sent, if `err` or an error it was caused by is one.
pub fn tls_alert(err: &(dyn std::error::Error + 'static)) -> Option<AlertDescription> {
    let mut next = Some(err);
    while let Some(err) = next {
        let inner = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if let Some(rustls::Error::AlertReceived(alert)) = inner.or(err.downcast_ref()) {
            return Some(*alert);
        }
        next = err.source();
    }
    None
}

impl Fault {
    /// The fault table: each fault's row and what its message starts with.
    fn row(&self) -> (GatewayFault, &'static str, &str) {
        match self {
            Fault::Connect(why) => (GatewayFault::BackendUnavailable, "backend unreachable", why),
            Fault::Refused(why) => (
                GatewayFault::BackendUnavailable,
                "backend refused the call before processing it",
                why,
            ),
            Fault::Lost(why) => (
                GatewayFault::BackendConnectionReset,
                "connection to backend lost",
                why,
            ),
            Fault::Deadline(why) => (
                GatewayFault::BackendDeadlineExceeded,
                "backend deadline exceeded",
                why,
            ),
            Fault::BadResponse(why) => (
                GatewayFault::BackendBadResponse,
                "unusable backend answer",
                why,
            ),
            Fault::TlsRefused(why) => (
                GatewayFault::BackendUnavailable,
                "backend refused the TLS connection",
                why,
            ),
        }
    }

    /// The backend sent TLS `alert`; the message names it and, for one about the client
    /// certificate, what to do.
    pub fn tls_refused(alert: AlertDescription) -> Fault {
        let row = CLIENT_CERTIFICATE_ALERTS.iter().find(|(a, ..)| *a == alert);
        Fault::TlsRefused(match row {
            Some((_, name, meaning)) => format!("TLS alert {name}: {meaning}"),
            None => format!("TLS alert {alert:?}"),
        })
    }

    /// A TLS handshake with the backend failed: its alert, when it sent one.
    pub fn tls_handshake(err: &std::io::Error) -> Fault {
        match tls_alert(err) {
            Some(alert) => Fault::tls_refused(alert),
            None => Fault::Connect(format!("TLS handshake failed: {err}")),
        }
    }

    /// The deadline `limit` passed.
    pub fn deadline(limit: Duration) -> Fault {
        Fault::Deadline(format!("no answer within {limit:?}"))
    }

    /// A connection attempt failed (TCP connect or TLS handshake).
    pub fn connect(err: &std::io::Error) -> Fault {
        Fault::Connect(err.to_string())
    }

    /// An HTTP/2 error of a sent call. `Refused` when the server reset the stream with
    /// REFUSED_STREAM (RFC 9113 §8.7: not processed, so sending it again is safe);
    /// `BadResponse` when h2 found the backend breaking the protocol or our limits; `Lost`
    /// otherwise. A GOAWAY is `Lost` too: h2 does not say whether the stream was below the
    /// frame's last-stream-id, and a call that may have reached the agent is not repeated.
    pub fn h2(err: &h2::Error) -> Fault {
        let refused =
            err.is_remote() && err.is_reset() && err.reason() == Some(h2::Reason::REFUSED_STREAM);
        if refused {
            Fault::Refused(err.to_string())
        } else if err.is_library() {
            Fault::BadResponse(format!("the backend broke HTTP/2: {err}"))
        } else {
            Fault::Lost(err.to_string())
        }
    }

    /// A failure of the HTTP+JSON binding's HTTP client. `None` for a request the client
    /// could not even build: a gateway bug, not a transport fault.
    pub fn reqwest(err: &reqwest::Error) -> Option<Fault> {
        let mut cause: &dyn std::error::Error = err;
        while let Some(next) = cause.source() {
            cause = next;
        }
        let why = cause.to_string();
        if err.is_builder() {
            None
        } else if let Some(alert) = tls_alert(err) {
            Some(Fault::tls_refused(alert))
        } else if err.is_connect() {
            Some(Fault::Connect(why))
        } else if err.is_timeout() {
            Some(Fault::Deadline(why))
        } else {
            Some(Fault::Lost(why))
        }
    }

    /// The `GatewayFault` row of this fault.
    pub fn gateway_fault(&self) -> GatewayFault {
        self.row().0
    }
}

/// The gateway fault `err` reports, read back from its `ErrorInfo` (domain `a2a-gateway`);
/// `None` for an agent's error, which says nothing about the path to the agent. Balancing
/// uses it to judge endpoints (`backend::endpoints`).
pub fn reported(err: &A2aError) -> Option<GatewayFault> {
    let info = err.data.first()?;
    if info.get("domain")?.as_str()? != GATEWAY_DOMAIN {
        return None;
    }
    let reason = info.get("reason")?.as_str()?;
    [
        GatewayFault::BackendUnavailable,
        GatewayFault::BackendConnectionReset,
        GatewayFault::BackendDeadlineExceeded,
        GatewayFault::BackendBadResponse,
        GatewayFault::ShuttingDown,
    ]
    .into_iter()
    .find(|fault| fault.reason() == reason)
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (_, what, why) = self.row();
        write!(f, "{what}: {why}")
    }
}

impl From<Fault> for A2aError {
    fn from(fault: Fault) -> A2aError {
        A2aError::gateway(fault.gateway_fault(), fault.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row, with the reason a client sees.
    #[test]
    fn every_fault_has_its_row() {
        let rows = [
            (Fault::Connect("x".into()), "BACKEND_UNAVAILABLE"),
            (Fault::Refused("x".into()), "BACKEND_UNAVAILABLE"),
            (Fault::Lost("x".into()), "BACKEND_CONNECTION_RESET"),
            (
                Fault::deadline(Duration::from_secs(1)),
                "BACKEND_DEADLINE_EXCEEDED",
            ),
            (Fault::BadResponse("x".into()), "BACKEND_BAD_RESPONSE"),
            (
                Fault::tls_refused(AlertDescription::CertificateRequired),
                "BACKEND_UNAVAILABLE",
            ),
        ];
        for (fault, reason) in rows {
            let fault_row = fault.gateway_fault();
            let message = fault.to_string();
            let err = A2aError::from(fault);
            assert_eq!(err.kind.code(), -32603);
            assert_eq!(err.message, message);
            assert_eq!(err.data[0]["reason"], reason);
            assert_eq!(err.data[0]["domain"], "a2a-gateway");
            assert_eq!(reported(&err), Some(fault_row));
        }
    }

    #[test]
    fn agent_errors_report_no_fault() {
        let agent = A2aError::a2a(crate::protocol::error::ErrorKind::TaskNotFound, "gone");
        assert_eq!(reported(&agent), None);
    }

    /// An alert as tokio-rustls reports it (inside an `io::Error`, under other errors)
    /// is found and named; every client-certificate row names its alert.
    #[test]
    fn tls_alerts_are_named() {
        let alert = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, alert);
        assert_eq!(tls_alert(&io), Some(AlertDescription::CertificateRequired));
        let fault = Fault::tls_handshake(&io);
        let message = fault.to_string();
        assert!(
            message.contains("certificate_required") && message.contains("--backend-client-cert"),
            "{message}"
        );
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(matches!(Fault::tls_handshake(&plain), Fault::Connect(_)));
        for (alert, name, _) in CLIENT_CERTIFICATE_ALERTS {
            assert!(Fault::tls_refused(alert).to_string().contains(name));
        }
        let other = Fault::tls_refused(AlertDescription::ProtocolVersion).to_string();
        assert!(other.contains("ProtocolVersion"), "{other}");
    }

    #[test]
    fn h2_errors_are_classified_by_their_accessors() {
        let reason = h2::Error::from(h2::Reason::INTERNAL_ERROR);
        assert!(matches!(Fault::h2(&reason), Fault::Lost(_)));
    }
}

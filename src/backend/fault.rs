//! THE transport fault table: every way the gateway's own path to a backend fails (I/O,
//! TLS, HTTP/2, the HTTP client of the HTTP+JSON binding, a deadline, bytes that break the
//! binding) becomes one `Fault`, which stays typed (`backend::Error::Fault`) for retry and
//! ejection until the front makes it its `GatewayFault` row: -32603 with an `ErrorInfo` of
//! domain `a2a-gateway`, so clients never mistake it for an agent's error.
//! Errors are classified by matching on their own accessors (`h2::Error::reason`,
//! `reqwest::Error::is_connect`), never by downcasting or by inventing a gRPC status. The
//! one exception is a TLS alert from the backend (`tls_alert`): h2 keeps only the text of
//! an I/O error, so an alert is recognised by rustls's own rendering of it.

use std::time::Duration;

use rustls::AlertDescription;

use crate::protocol::error::{A2aError, GatewayFault};

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
    /// The HTTP+JSON backend answered with something that is not the binding's answer (a
    /// proxy's error page, a redirect, an empty 404, a body that does not decode): the
    /// status and what came with it, e.g. `502 Bad Gateway with an empty body`.
    Unusable(String),
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

/// The client-certificate alert the backend sent, if `err` or an error it was caused by
/// is one: its text is what rustls renders for that alert (whatever carried it, tokio-rustls
/// or h2, which keeps only the text).
fn tls_alert(err: &(dyn std::error::Error + 'static)) -> Option<Fault> {
    let mut next = Some(err);
    while let Some(err) = next {
        let text = err.to_string();
        let row = CLIENT_CERTIFICATE_ALERTS
            .iter()
            .find(|(alert, ..)| text == rustls::Error::AlertReceived(*alert).to_string());
        if let Some((_, name, meaning)) = row {
            return Some(Fault::TlsRefused(format!("TLS alert {name}: {meaning}")));
        }
        next = err.source();
    }
    None
}

impl Fault {
    /// The fault table: each fault's row and what its message starts with.
    fn row(&self) -> (GatewayFault, &'static str, &str) {
        match self {
            Fault::Connect(why) => (
                GatewayFault::BackendUnavailable,
                "backend unreachable: ",
                why,
            ),
            Fault::Refused(why) => (
                GatewayFault::BackendUnavailable,
                "backend refused the call before processing it: ",
                why,
            ),
            Fault::Lost(why) => (
                GatewayFault::BackendConnectionReset,
                "connection to backend lost: ",
                why,
            ),
            Fault::Deadline(why) => (
                GatewayFault::BackendDeadlineExceeded,
                "backend deadline exceeded: ",
                why,
            ),
            Fault::BadResponse(why) => (
                GatewayFault::BackendBadResponse,
                "unusable backend answer: ",
                why,
            ),
            Fault::TlsRefused(why) => (
                GatewayFault::BackendUnavailable,
                "backend refused the TLS connection: ",
                why,
            ),
            Fault::Unusable(why) => (
                GatewayFault::BackendBadResponse,
                "backend answered HTTP ",
                why,
            ),
        }
    }

    /// A TLS handshake with the backend failed: refused with an alert about the
    /// gateway's client certificate, or unable to connect.
    pub fn tls_handshake(err: &std::io::Error) -> Fault {
        tls_alert(err).unwrap_or_else(|| Fault::Connect(format!("TLS handshake failed: {err}")))
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
        if let Some(refused) = err.get_io().and_then(|io| tls_alert(io)) {
            return refused;
        }
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
        } else if let Some(refused) = tls_alert(err) {
            Some(refused)
        } else if err.is_connect() {
            Some(Fault::Connect(why))
        } else if err.is_timeout() {
            Some(Fault::Deadline(why))
        } else {
            Some(Fault::Lost(why))
        }
    }

    /// The `GatewayFault` row of this fault.
    pub(crate) fn gateway_fault(&self) -> GatewayFault {
        self.row().0
    }

    /// Whether the call certainly never reached the agent (so it may go to another
    /// endpoint, and this one may be gone).
    pub fn unreached(&self) -> bool {
        match self {
            Fault::Connect(_) | Fault::Refused(_) | Fault::TlsRefused(_) => true,
            Fault::Lost(_) | Fault::Deadline(_) | Fault::BadResponse(_) | Fault::Unusable(_) => {
                false
            }
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (_, what, why) = self.row();
        write!(f, "{what}{why}")
    }
}

impl From<Fault> for A2aError {
    /// The fault's row: -32603, its `GatewayFault` reason, its message.
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
            (Fault::TlsRefused("x".into()), "BACKEND_UNAVAILABLE"),
            (Fault::Unusable("x".into()), "BACKEND_BAD_RESPONSE"),
        ];
        for (fault, reason) in rows {
            let message = fault.to_string();
            let typed = crate::backend::Error::from(fault.clone());
            assert_eq!(typed.fault(), Some(&fault));
            let err = A2aError::from(typed);
            assert_eq!(err.kind.code(), -32603);
            assert_eq!(err.message, message);
            assert_eq!(err.data[0]["reason"], reason);
            assert_eq!(err.data[0]["domain"], "a2a-gateway");
            let unavailable = fault.gateway_fault() == GatewayFault::BackendUnavailable;
            assert_eq!(fault.unreached(), unavailable, "{fault:?}");
        }
    }

    #[test]
    fn agent_errors_report_no_fault() {
        use crate::backend::error::{Error, Status};
        let not_found = Status::Grpc(tonic::Code::NotFound);
        let agent = A2aError::a2a(crate::protocol::error::ErrorKind::TaskNotFound, "gone");
        assert_eq!(Error::agent(agent, not_found).fault(), None);
        // An agent's error that names the gateway's domain and a fault's reason is still
        // the agent's: it ejects no endpoint and is not retried.
        let claimed = serde_json::json!({
            "@type": crate::protocol::details::ERROR_INFO,
            "reason": "BACKEND_UNAVAILABLE",
            "domain": crate::protocol::error::GATEWAY_DOMAIN,
        });
        let forged = A2aError::from_backend(
            crate::protocol::error::ErrorKind::Internal,
            "claims to be the gateway",
            vec![claimed],
        );
        let internal = Status::Grpc(tonic::Code::Internal);
        assert_eq!(Error::agent(forged, internal).fault(), None);
    }

    /// Every client-certificate alert is recognised as tokio-rustls reports it (a
    /// `rustls::Error` in an `io::Error`) and as h2 does (its text only; through h2 in
    /// tests/it/backend_mtls.rs), and named; other alerts and I/O errors stay what they were.
    #[test]
    fn client_certificate_alerts_are_named() {
        use std::io::{Error, ErrorKind};
        for (alert, name, _) in CLIENT_CERTIFICATE_ALERTS {
            let typed = Error::new(ErrorKind::InvalidData, rustls::Error::AlertReceived(alert));
            let text = Error::new(ErrorKind::InvalidData, typed.to_string());
            for err in [typed, text] {
                let Fault::TlsRefused(why) = Fault::tls_handshake(&err) else {
                    panic!("{err} not recognised");
                };
                assert!(why.starts_with(&format!("TLS alert {name}: ")), "{why}");
                assert!(why.contains("--backend-client-cert"), "{why}");
            }
        }
        let other = rustls::Error::AlertReceived(AlertDescription::ProtocolVersion);
        let other = Error::new(ErrorKind::InvalidData, other);
        assert!(matches!(Fault::tls_handshake(&other), Fault::Connect(_)));
        let plain = Error::new(ErrorKind::ConnectionReset, "reset");
        assert!(matches!(Fault::tls_handshake(&plain), Fault::Connect(_)));
    }

    #[test]
    fn h2_errors_are_classified_by_their_accessors() {
        let reason = h2::Error::from(h2::Reason::INTERNAL_ERROR);
        assert!(matches!(Fault::h2(&reason), Fault::Lost(_)));
    }
}

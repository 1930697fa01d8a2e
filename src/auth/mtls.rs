//! mTLS identity (`[auth.mtls]`): the names of the client certificate the listener's TLS
//! verified (`--tls-client-ca`), read once per connection (`PeerIdentity::of`, by the
//! server) and carried in each request's extensions; the route's `identity` chooses which
//! name is the principal.

use std::sync::Arc;

use x509_parser::extensions::GeneralName;

/// Which name of the certificate is the principal (`[auth.mtls] identity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// The first URI SAN (a SPIFFE ID, `spiffe://trust-domain/path`).
    Uri,
    /// The first DNS SAN.
    Dns,
    /// The subject's distinguished name (RFC 4514, `CN=…, O=…`).
    Subject,
}

impl Identity {
    /// The `identity` setting's value (`uri` when not given).
    pub fn parse(value: Option<&str>) -> Result<Identity, String> {
        match value.unwrap_or("uri") {
            "uri" => Ok(Identity::Uri),
            "dns" => Ok(Identity::Dns),
            "subject" => Ok(Identity::Subject),
            other => Err(format!(
                "{other:?} is not an identity (uri, dns or subject)"
            )),
        }
    }

    /// What the principal is named by, for a refusal (`URI SAN`).
    pub fn label(self) -> &'static str {
        match self {
            Identity::Uri => "URI SAN",
            Identity::Dns => "DNS SAN",
            Identity::Subject => "subject",
        }
    }
}

/// The names of a connection's verified client certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerIdentity {
    pub uri: Option<Arc<str>>,
    pub dns: Option<Arc<str>>,
    pub subject: Option<Arc<str>>,
}

impl PeerIdentity {
    /// The names of the certificate `der` (the leaf the TLS layer verified); none of those
    /// it does not carry (or that `x509-parser` cannot read).
    pub fn of(der: &[u8]) -> PeerIdentity {
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
            return PeerIdentity::default();
        };
        let mut identity = PeerIdentity::default();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::URI(uri) if identity.uri.is_none() => {
                        identity.uri = Some(Arc::from(*uri));
                    }
                    GeneralName::DNSName(dns) if identity.dns.is_none() => {
                        identity.dns = Some(Arc::from(*dns));
                    }
                    _ => {}
                }
            }
        }
        let subject = cert.subject().to_string();
        identity.subject = (!subject.is_empty()).then(|| Arc::from(subject));
        identity
    }

    /// The name `identity` chooses, if the certificate has it.
    pub fn name(&self, identity: Identity) -> Option<&Arc<str>> {
        match identity {
            Identity::Uri => self.uri.as_ref(),
            Identity::Dns => self.dns.as_ref(),
            Identity::Subject => self.subject.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificates_names_are_read_once_the_first_of_each_kind() {
        let mut params =
            rcgen::CertificateParams::new(vec!["a.example".into(), "b.example".into()]).unwrap();
        let uri = |u: &str| rcgen::SanType::URI(rcgen::string::Ia5String::try_from(u).unwrap());
        params.subject_alt_names.push(uri("spiffe://td/one"));
        params.subject_alt_names.push(uri("spiffe://td/two"));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let peer = PeerIdentity::of(cert.der());
        assert_eq!(
            peer.name(Identity::Uri).map(|n| &**n),
            Some("spiffe://td/one")
        );
        assert_eq!(peer.name(Identity::Dns).map(|n| &**n), Some("a.example"));
        assert_eq!(peer.name(Identity::Subject).map(|n| &**n), Some("CN=alice"));
        assert_eq!(
            PeerIdentity::of(b"not a certificate"),
            PeerIdentity::default()
        );
        assert_eq!(Identity::parse(None), Ok(Identity::Uri));
        assert!(Identity::parse(Some("email")).is_err());
    }
}

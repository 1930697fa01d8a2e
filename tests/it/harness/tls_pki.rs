//! Certificates for the TLS suites (rcgen): CAs that sign server and client certificates
//! with chosen names and serials, files the gateway reads (replaced atomically, as a
//! Kubernetes Secret volume does), and a raw TLS client that reports what the server
//! presented and what ALPN chose.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::POD_NAME;

/// A certificate authority of the test.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// Its certificate, PEM.
    pub pem: String,
}

/// A certificate signed by a `Ca`, with its key.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    /// The certificate as the peer sends it.
    pub der: Vec<u8>,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let pem = issuer.pem();
        Ca { issuer, pem }
    }

    /// A server certificate for `localhost`, `127.0.0.1` and the test pods' DNS name.
    pub fn server(&self, common_name: &str, serial: u64) -> Leaf {
        let names = ["localhost", "127.0.0.1", POD_NAME].map(str::to_owned);
        let mut params = CertificateParams::new(names.to_vec()).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params, common_name, serial)
    }

    /// A client certificate.
    pub fn client(&self, common_name: &str) -> Leaf {
        self.client_with(common_name, &[], &[])
    }

    /// A client certificate with these URI SANs (a SPIFFE ID) and DNS SANs.
    pub fn client_with(&self, common_name: &str, uris: &[&str], dns: &[&str]) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let ia5 = |name: &&str| rcgen::string::Ia5String::try_from(*name).unwrap();
        params.subject_alt_names = uris.iter().map(|u| SanType::URI(ia5(u))).collect();
        params
            .subject_alt_names
            .extend(dns.iter().map(|d| SanType::DnsName(ia5(d))));
        self.sign(params, common_name, 1)
    }

    fn sign(&self, mut params: CertificateParams, common_name: &str, serial: u64) -> Leaf {
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.serial_number = Some(SerialNumber::from(serial));
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

/// A directory of files for one test, removed when dropped.
pub struct Dir(PathBuf);

impl Dir {
    pub fn new(test: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("a2a-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    /// Writes `name` atomically (a new file renamed over the old one) and returns its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        let staged = self.0.join(format!(".{name}.new"));
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &path).unwrap();
        path.to_str().unwrap().to_owned()
    }

    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// What a TLS server presented in one handshake.
pub struct Handshake {
    /// The leaf certificate, DER.
    pub certificate: Vec<u8>,
    /// The protocol ALPN chose, if any.
    pub alpn: Option<Vec<u8>>,
}

/// A rustls client trusting `ca_pem`, offering `alpn`, presenting `identity` if given.
pub fn client_config(
    ca_pem: &str,
    alpn: &[&[u8]],
    identity: Option<&Leaf>,
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// One TLS handshake with the server at `addr` (named `localhost`), offering `alpn`.
pub async fn handshake(addr: &str, ca_pem: &str, alpn: &[&[u8]]) -> Handshake {
    let config = client_config(ca_pem, alpn, None);
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let session = tls.get_ref().1;
    Handshake {
        certificate: session.peer_certificates().unwrap()[0].to_vec(),
        alpn: session.alpn_protocol().map(<[u8]>::to_vec),
    }
}

//! HTTPS on the listener (rustls, ring): the certificate chain and key of `--tls-cert` and
//! `--tls-key`; HTTP/2 and HTTP/1.1 offered by ALPN, each served by hyper's builder of the
//! protocol ALPN chose (without ALPN, as cleartext: `server::serve_http`); client certificates
//! verified against `--tls-client-ca` when it is set.
//!
//! The certificate is reloaded without a restart: a thread reads both files every second
//! and, when either changed and the pair is usable, swaps the certificate the resolver
//! hands to new handshakes; open connections keep their session. A pair that cannot be
//! used (a key of another certificate, a half-written file) is logged once and the
//! previous certificate stays in service. Contents are compared rather than modification
//! times: a Kubernetes Secret volume swaps a symlink, and coarse timestamps hide quick
//! rewrites. The client CA bundle reloads the same way: new handshakes get a rustls
//! configuration with the new CAs.
//!
//! A handshake runs on its connection's own task, never in the accept loop, and must
//! finish within `--tls-handshake-timeout`.
//!
//! Also here: reading a PEM certificate chain and its key, checked to belong together,
//! for the listener and for the client certificates the gateway presents to backends.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;

/// How often the certificate files are read for changes.
const RELOAD_POLL: Duration = Duration::from_secs(1);

/// ALPN protocols offered to clients, preferred first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The crypto provider of every TLS endpoint of the gateway.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What is wrong with a certificate chain and key.
#[derive(Debug, thiserror::Error)]
enum IdentityError {
    #[error("{0}")]
    Cert(String),
    #[error("{0}")]
    Key(String),
    #[error("it is not the private key of the certificate")]
    Mismatch,
}

/// A PEM certificate chain and its PEM private key, as read from their files. No `Debug`:
/// the key must not reach a log.
#[derive(Clone, PartialEq, Eq)]
struct PemPair {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl PemPair {
    fn read(cert: &Path, key: &Path) -> Result<PemPair, IdentityError> {
        crate::watched::note(cert);
        crate::watched::note(key);
        Ok(PemPair {
            cert: std::fs::read(cert).map_err(|e| IdentityError::Cert(e.to_string()))?,
            key: std::fs::read(key).map_err(|e| IdentityError::Key(e.to_string()))?,
        })
    }

    /// The chain and key as rustls uses them, checked to belong together.
    fn certified_key(&self) -> Result<CertifiedKey, IdentityError> {
        use rustls::pki_types::pem::Error as PemError;
        let chain = CertificateDer::pem_slice_iter(&self.cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| IdentityError::Cert(e.to_string()))?;
        if chain.is_empty() {
            return Err(IdentityError::Cert("no PEM certificate in the file".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key).map_err(|e| {
            IdentityError::Key(match e {
                PemError::NoItemsFound => "no PEM private key in the file".into(),
                e => e.to_string(),
            })
        })?;
        let signing = provider()
            .key_provider
            .load_private_key(key)
            .map_err(|e| IdentityError::Key(e.to_string()))?;
        let certified = CertifiedKey::new(chain, signing);
        match certified.keys_match() {
            // Unknown: the key type cannot tell its public key; the handshake will.
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
                Ok(certified)
            }
            Err(rustls::Error::InconsistentKeys(_)) => Err(IdentityError::Mismatch),
            Err(e) => Err(IdentityError::Cert(e.to_string())),
        }
    }

    /// The chain, then the key, in one PEM text: how the backend clients take an identity.
    fn identity_pem(&self) -> Vec<u8> {
        let mut pem = self.cert.clone();
        if !pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend_from_slice(&self.key);
        pem
    }
}

/// A pair of certificate and key flags, and their configuration errors.
struct IdentityFlags {
    cert: fn(PathBuf, String) -> TlsConfigError,
    key: fn(PathBuf, String) -> TlsConfigError,
    cert_flag: &'static str,
    key_flag: &'static str,
}

/// A TLS file or setting that cannot be served with; the message names the flag.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("--tls-cert {0:?}: {1}")]
    Cert(PathBuf, String),
    #[error("--tls-key {0:?}: {1}")]
    Key(PathBuf, String),
    #[error("--tls-client-ca {0:?}: {1}")]
    ClientCa(PathBuf, String),
    #[error("--tls-handshake-timeout must be greater than 0")]
    HandshakeTimeout,
    #[error("--backend-client-cert {0:?}: {1}")]
    BackendClientCert(PathBuf, String),
    #[error("--backend-client-key {0:?}: {1}")]
    BackendClientKey(PathBuf, String),
    #[error("{0} needs {1}")]
    Needs(&'static str, &'static str),
}

/// Whether clients of the HTTPS listener must present a certificate (`--tls-client-auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    Required,
    Optional,
}

/// The listener's `--tls-cert` and `--tls-key`.
const LISTENER: IdentityFlags = IdentityFlags {
    cert: TlsConfigError::Cert,
    key: TlsConfigError::Key,
    cert_flag: "--tls-cert",
    key_flag: "--tls-key",
};

/// The `--backend-client-cert` and `--backend-client-key` of a route.
const BACKEND_CLIENT: IdentityFlags = IdentityFlags {
    cert: TlsConfigError::BackendClientCert,
    key: TlsConfigError::BackendClientKey,
    cert_flag: "--backend-client-cert",
    key_flag: "--backend-client-key",
};

/// The client certificate chain and key a route's backend clients present
/// (`--backend-client-cert`, `--backend-client-key`), read and checked now, as one PEM text.
pub fn backend_identity(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<Vec<u8>>, TlsConfigError> {
    let paths = BACKEND_CLIENT.paths(cert, key)?;
    let Some((cert, key)) = paths else {
        return Ok(None);
    };
    let (pair, _) = BACKEND_CLIENT.read(cert, key)?;
    Ok(Some(pair.identity_pem()))
}

impl IdentityFlags {
    /// `cert` and `key` given together (or neither); an error names the flag at fault.
    fn paths<'a>(
        &self,
        cert: Option<&'a Path>,
        key: Option<&'a Path>,
    ) -> Result<Option<(&'a Path, &'a Path)>, TlsConfigError> {
        match (cert, key) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(TlsConfigError::Needs(self.cert_flag, self.key_flag)),
            (None, Some(_)) => Err(TlsConfigError::Needs(self.key_flag, self.cert_flag)),
            (Some(cert), Some(key)) => Ok(Some((cert, key))),
        }
    }

    /// Reads and checks the pair; an error names the flag and file at fault.
    fn read(&self, cert: &Path, key: &Path) -> Result<(PemPair, CertifiedKey), TlsConfigError> {
        let checked = PemPair::read(cert, key)
            .and_then(|pair| pair.certified_key().map(|certified| (pair, certified)));
        checked.map_err(|e| match e {
            IdentityError::Cert(why) => (self.cert)(cert.to_owned(), why),
            IdentityError::Key(why) => (self.key)(key.to_owned(), why),
            IdentityError::Mismatch => (self.key)(
                key.to_owned(),
                format!("not the private key of the {} certificate", self.cert_flag),
            ),
        })
    }
}

/// The HTTPS side of the listener. Clones share the certificate and its reloading.
#[derive(Clone)]
pub struct ServerTls {
    listener: Arc<Listener>,
    handshake_timeout: Duration,
}

/// What every clone of a `ServerTls` shares, and the reload thread keeps current.
struct Listener {
    certificate: Arc<Certificate>,
    /// The rustls configuration new handshakes get: replaced when the client CA changes.
    acceptor: RwLock<tokio_rustls::TlsAcceptor>,
    client_ca: Option<ClientCa>,
}

/// `--tls-client-ca`: the file, how it is applied, and what it held when last read.
struct ClientCa {
    path: PathBuf,
    auth: ClientAuth,
    pem: Mutex<Vec<u8>>,
}

/// The listener's TLS settings, as given.
pub struct ListenerTlsSettings<'a> {
    pub cert: Option<&'a Path>,
    pub key: Option<&'a Path>,
    /// Client certificates must chain to these CAs.
    pub client_ca: Option<&'a Path>,
    pub client_auth: ClientAuth,
    pub handshake_timeout: Duration,
}

impl ServerTls {
    /// The listener's TLS from `--tls-cert`, `--tls-key` and `--tls-client-ca`, every
    /// file read and checked now; `None` without them (cleartext).
    pub fn new(settings: &ListenerTlsSettings<'_>) -> Result<Option<ServerTls>, TlsConfigError> {
        let Some((cert, key)) = LISTENER.paths(settings.cert, settings.key)? else {
            return match settings.client_ca {
                Some(_) => Err(TlsConfigError::Needs("--tls-client-ca", "--tls-cert")),
                None => Ok(None),
            };
        };
        if settings.handshake_timeout.is_zero() {
            return Err(TlsConfigError::HandshakeTimeout);
        }
        let (pair, certified) = LISTENER.read(cert, key)?;
        let certificate = Arc::new(Certificate {
            cert_path: cert.to_owned(),
            key_path: key.to_owned(),
            current: RwLock::new(Arc::new(certified)),
            files: Mutex::new(Files {
                pair,
                unreadable: false,
            }),
        });
        let (verifier, client_ca) = match settings.client_ca {
            None => (None, None),
            Some(path) => {
                let (verifier, pem) = client_verifier(path, settings.client_auth)?;
                let client_ca = ClientCa {
                    path: path.to_owned(),
                    auth: settings.client_auth,
                    pem: Mutex::new(pem),
                };
                (Some(verifier), Some(client_ca))
            }
        };
        let acceptor = acceptor(&certificate, verifier)
            .map_err(|e| TlsConfigError::Cert(cert.to_owned(), e.to_string()))?;
        Ok(Some(ServerTls {
            listener: Arc::new(Listener {
                certificate,
                acceptor: RwLock::new(acceptor),
                client_ca,
            }),
            handshake_timeout: settings.handshake_timeout,
        }))
    }

    /// When the certificate new handshakes get expires, in seconds since the Unix epoch
    /// (its leaf's notAfter), read anew at each call; `None` once this `ServerTls` is gone.
    pub fn not_after(&self) -> impl Fn() -> Option<i64> + Send + Sync + 'static {
        let certificate: Weak<Certificate> = Arc::downgrade(&self.listener.certificate);
        move || {
            let certificate = certificate.upgrade()?;
            let current = certificate
                .current
                .read()
                .unwrap_or_else(|e| e.into_inner());
            let (_, leaf) = x509_parser::parse_x509_certificate(current.cert.first()?).ok()?;
            Some(leaf.validity().not_after.timestamp())
        }
    }

    /// Starts the thread that reloads the certificate and the client CA when their files
    /// change; it ends once every clone of this `ServerTls` is gone.
    pub fn watch(&self) -> std::io::Result<()> {
        let listener: Weak<Listener> = Arc::downgrade(&self.listener);
        std::thread::Builder::new()
            .name("a2a-tls-reload".into())
            .spawn(move || loop {
                std::thread::sleep(RELOAD_POLL);
                match listener.upgrade() {
                    Some(listener) => listener.reload(),
                    None => return,
                }
            })?;
        Ok(())
    }

    /// The TLS session over `tcp` once the client's handshake is done; `None` when it
    /// fails (rustls has sent the client its alert), times out, or `stop` turns true first.
    pub async fn accept(
        &self,
        tcp: TcpStream,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<TlsStream<TcpStream>> {
        let peer = tcp.peer_addr().ok();
        let acceptor = self.listener.acceptor.read().map(|a| a.clone());
        let acceptor = acceptor.unwrap_or_else(|e| e.into_inner().clone());
        let accept = acceptor.accept(tcp).into_fallible();
        let handshake = tokio::time::timeout(self.handshake_timeout, accept);
        let done = tokio::select! {
            done = handshake => done,
            _ = stop.wait_for(|stop| *stop) => return None,
        };
        match done {
            Ok(Ok(session)) => Some(session),
            // The client's problem, so not above debug: scanners would flood the log.
            Ok(Err((e, tcp))) => {
                tracing::debug!(?peer, error = %e, "TLS handshake failed");
                linger(tcp).await;
                None
            }
            Err(_) => {
                tracing::debug!(?peer, timeout = ?self.handshake_timeout, "TLS handshake timed out");
                None
            }
        }
    }
}

/// How long a connection whose handshake failed is kept for the client to read the alert.
const LINGER: Duration = Duration::from_secs(1);

/// Closes a connection whose handshake failed so that the client reads the alert (e.g.
/// `certificate_required`): with TLS 1.3 the client may already have sent its request,
/// and closing with those bytes unread would reset the connection, which can destroy the
/// alert before the client reads it. So our side is shut and what arrives is read and
/// dropped until the client closes, for at most `LINGER`.
async fn linger(mut tcp: TcpStream) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let _ = tcp.shutdown().await;
    let drain = async {
        let mut buf = [0u8; 4096];
        while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// The listener's rustls configuration: `certificate` (which reloads itself), client
/// certificates checked by `verifier` when there is one, HTTP/2 and HTTP/1.1 by ALPN.
fn acceptor(
    certificate: &Arc<Certificate>,
    verifier: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<tokio_rustls::TlsAcceptor, rustls::Error> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let builder = match verifier {
        None => builder.with_no_client_auth(),
        Some(verifier) => builder.with_client_cert_verifier(verifier),
    };
    let mut config = builder.with_cert_resolver(certificate.clone());
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

impl Listener {
    /// Reloads the certificate, then the client CA: when its file changed and holds
    /// usable CAs, new handshakes check client certificates against them; otherwise the
    /// previous CAs stay, and the problem is logged.
    fn reload(&self) {
        self.certificate.reload();
        let Some(ca) = &self.client_ca else {
            return;
        };
        let mut pem = ca.pem.lock().unwrap_or_else(|e| e.into_inner());
        let changed = std::fs::read(&ca.path).is_ok_and(|now| now != *pem);
        if !changed {
            return;
        }
        let rebuilt = client_verifier(&ca.path, ca.auth).and_then(|(verifier, read)| {
            let acceptor = acceptor(&self.certificate, Some(verifier))
                .map_err(|e| TlsConfigError::ClientCa(ca.path.clone(), e.to_string()))?;
            Ok((acceptor, read))
        });
        match rebuilt {
            Ok((acceptor, read)) => {
                *self.acceptor.write().unwrap_or_else(|e| e.into_inner()) = acceptor;
                *pem = read;
                tracing::info!(ca = %ca.path.display(), "TLS client CA reloaded");
            }
            Err(e) => {
                if let Ok(now) = std::fs::read(&ca.path) {
                    // Logged once per change of the file.
                    *pem = now;
                }
                tracing::warn!(error = %e, "TLS client CA changed but cannot be used; still checking clients against the previous CAs");
            }
        }
    }
}

/// The verifier of client certificates: chains to a CA of `path`; `optional` also lets
/// clients without a certificate in. Returns it with the file's bytes.
fn client_verifier(
    path: &Path,
    auth: ClientAuth,
) -> Result<(Arc<dyn ClientCertVerifier>, Vec<u8>), TlsConfigError> {
    let fail = |why: String| TlsConfigError::ClientCa(path.to_owned(), why);
    crate::watched::note(path);
    let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate = certificate.map_err(|e| fail(e.to_string()))?;
        roots.add(certificate).map_err(|e| fail(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(fail("no PEM certificate in the file".into()));
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
    let builder = match auth {
        ClientAuth::Required => builder,
        ClientAuth::Optional => builder.allow_unauthenticated(),
    };
    let verifier = builder.build().map_err(|e| fail(e.to_string()))?;
    Ok((verifier, pem))
}

/// The certificate new handshakes get, and the files it is reloaded from.
struct Certificate {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    files: Mutex<Files>,
}

/// What the reload thread last read.
struct Files {
    pair: PemPair,
    /// A read failed and was logged; logged again only after a read succeeded.
    unreadable: bool,
}

impl Certificate {
    /// Reads the files; when they changed and hold a usable pair, new handshakes get it.
    fn reload(&self) {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let pair = match PemPair::read(&self.cert_path, &self.key_path) {
            Ok(pair) => pair,
            Err(e) => {
                if !std::mem::replace(&mut files.unreadable, true) {
                    tracing::warn!(
                        cert = %self.cert_path.display(),
                        key = %self.key_path.display(),
                        error = %e,
                        "TLS certificate files unreadable; still serving the previous certificate"
                    );
                }
                return;
            }
        };
        files.unreadable = false;
        if pair == files.pair {
            return;
        }
        match pair.certified_key() {
            Ok(certified) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(certified);
                tracing::info!(cert = %self.cert_path.display(), "TLS certificate reloaded");
            }
            Err(e) => {
                let file = match e {
                    IdentityError::Cert(_) => &self.cert_path,
                    IdentityError::Key(_) | IdentityError::Mismatch => &self.key_path,
                };
                tracing::warn!(
                    file = %file.display(),
                    error = %e,
                    "TLS certificate files changed but cannot be used; still serving the previous certificate"
                );
            }
        }
        files.pair = pair;
    }
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

//! gRPC backend (spec 10) for `http://` and `https://` agents alike, on the `h2` crate
//! (`grpc/connection.rs`). Requests are encoded and replies decoded by the operation
//! table; statuses by `grpc/status.rs`; every transport failure goes through the fault
//! table (`backend/fault.rs`).
//!
//! Wire rules (gRPC over HTTP/2): `POST /lf.a2a.v1.A2AService/{Method}`, `content-type:
//! application/grpc`, `te: trailers`, messages framed as 1 flag byte (0: not compressed),
//! 4 length bytes and the protobuf; the status comes in the trailers, or in the headers of
//! a trailers-only reply.

mod connection;
pub(crate) mod health;
pub(crate) mod status;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http::header::{CONTENT_TYPE, TE, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use prost::Message as _;
use tonic::Code;

use super::fault::Fault;
use super::{Answer, Backend, Call, Error, EventStream, Status};
use crate::backend::observed::BackendCall;
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Reply, StreamRequest, TypedRequest, UnaryRequest};
use crate::protocol::params::{
    never_index_per_call, response_extensions, SUPPORTED_VERSION, VERSION,
};
use crate::telemetry::trace::Hop;
use connection::{Connector, InFlight, Keepalive, Pool, Tls};

/// How the gateway talks to a gRPC backend.
#[derive(Clone, Debug)]
pub struct GrpcSettings {
    /// Deadline of connecting (TCP and TLS) to the backend.
    pub connect_timeout: Duration,
    /// Keepalive ping after this long without reading anything.
    pub keepalive_interval: Duration,
    /// A ping unanswered this long closes the connection.
    pub keepalive_timeout: Duration,
    /// Ping also while no call is in flight.
    pub keepalive_while_idle: bool,
    /// Largest message accepted from the backend (a reply or one stream event).
    pub max_message: usize,
}

impl Default for GrpcSettings {
    fn default() -> Self {
        GrpcSettings {
            connect_timeout: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(300),
            keepalive_timeout: Duration::from_secs(20),
            keepalive_while_idle: false,
            max_message: 16 << 20,
        }
    }
}

/// A backend reached over gRPC: one pool of connections per instance (each worker has its
/// own, `connection::Pool`).
pub struct GrpcBackend(Arc<Client>);

struct Client {
    pool: Pool,
    /// The request URIs' scheme and authority; each call's URI is made of them and the
    /// operation's static path, without allocating (a table of the eleven URIs was 1 KiB a
    /// route and worker).
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    max_message: usize,
}

/// The backend address cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid gRPC backend {uri:?}: {reason}")]
pub struct GrpcConfigError {
    uri: String,
    reason: String,
}

impl GrpcBackend {
    /// A backend at `uri` (`http://host[:port]` or `https://host[:port]`). For TLS the
    /// system roots are trusted, plus the PEM certificates in `ca_pem` (e.g. a cluster's
    /// internal CA). The connection is made on first use, so a backend that is down at
    /// start is not fatal.
    pub fn new(
        uri: &str,
        settings: &GrpcSettings,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, GrpcConfigError> {
        Self::with_identity(uri, settings, ca_pem, None)
    }

    /// As `new`; over TLS the client certificate chain and key in `identity_pem` (PEM, the
    /// chain first) are presented to a backend that asks for one (mTLS).
    pub(crate) fn with_identity(
        uri: &str,
        settings: &GrpcSettings,
        ca_pem: Option<&[u8]>,
        identity_pem: Option<&[u8]>,
    ) -> Result<Self, GrpcConfigError> {
        let err = |reason: String| GrpcConfigError {
            uri: uri.to_owned(),
            reason,
        };
        let parsed: Uri = uri.parse().map_err(|e| err(format!("{e}")))?;
        let tls = match parsed.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(err("expected http:// or https://".into())),
        };
        let authority = parsed
            .authority()
            .ok_or_else(|| err("no host".into()))?
            .clone();
        if parsed.path() != "/" && !parsed.path().is_empty() {
            return Err(err("a gRPC backend URL has no path".into()));
        }
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let address = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let tls = match tls {
            false => None,
            true => Some(tls_connector(host, ca_pem, identity_pem).map_err(err)?),
        };
        let keepalive = Keepalive::new(
            settings.keepalive_interval,
            settings.keepalive_timeout,
            settings.keepalive_while_idle,
        );
        let connector = Connector::new(address, tls, settings.connect_timeout, keepalive);
        let scheme = parsed.scheme().cloned().unwrap_or(http::uri::Scheme::HTTP);
        Ok(GrpcBackend(Arc::new(Client {
            pool: Pool::new(Arc::new(connector)),
            scheme,
            authority,
            max_message: settings.max_message,
        })))
    }
}

impl GrpcBackend {
    /// Another instance for another serving thread: the same target, TLS setup and
    /// keepalive policy (what one connection learns of the backend's ping policy applies to
    /// all), with a connection of its own.
    pub(crate) fn for_worker(&self) -> GrpcBackend {
        GrpcBackend(Arc::new(Client {
            pool: self.0.pool.sibling(),
            scheme: self.0.scheme.clone(),
            authority: self.0.authority.clone(),
            max_message: self.0.max_message,
        }))
    }
}

impl GrpcBackend {
    /// The same backend (`:authority`, TLS name = the URL's host) reached at `address`:
    /// one pod behind a DNS name (`backend::endpoints`). Its connections are its own.
    pub(crate) fn at(&self, address: std::net::SocketAddr) -> GrpcBackend {
        GrpcBackend(Arc::new(Client {
            pool: self.0.pool.at(address.to_string()),
            scheme: self.0.scheme.clone(),
            authority: self.0.authority.clone(),
            max_message: self.0.max_message,
        }))
    }
}

impl Client {
    /// The URI of a request to `path` (`Op::grpc_path`, or the health service's).
    fn uri(&self, path: &'static str) -> Uri {
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static(path));
        // Scheme, authority and an absolute path: `from_parts` has nothing to refuse.
        Uri::from_parts(parts).unwrap_or_default()
    }

    /// The request head: path, fixed metadata, the deadline, forwarded headers, the trace
    /// context.
    fn head<R: TypedRequest>(&self, call: &Call<R>) -> http::Request<()> {
        let op = call.request.op();
        let mut request = http::Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri(op.grpc_path());
        let headers = request.headers_mut();
        headers.reserve(6 + call.forwarded.len());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(TE, HeaderValue::from_static("trailers"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION"))),
        );
        headers.insert(VERSION, HeaderValue::from_static(SUPPORTED_VERSION));
        if let Some(timeout) = call.timeout() {
            if let Ok(mut value) = HeaderValue::try_from(grpc_timeout(timeout)) {
                let name = HeaderName::from_static("grpc-timeout");
                never_index_per_call(&name, &mut value);
                headers.insert(name, value);
            }
        }
        for (name, value) in &call.forwarded {
            if metadata_ok(name, value) {
                headers.append(name.clone(), value.clone());
            } else {
                tracing::debug!(header = %name, "header not representable as gRPC metadata");
            }
        }
        if let Some(trace) = &call.trace {
            trace.write(headers);
        }
        request
    }

    /// Sends the call; returns the response head and body once the head is in. A call the
    /// backend did not process (it was never sent, or REFUSED_STREAM) is sent once more,
    /// on a fresh connection, with its head built again (h2 takes it by value; building
    /// it twice only on a retry saves a copy on every call).
    async fn start<R: TypedRequest>(&self, call: &Call<R>) -> Result<(HeaderMap, Reading), Error> {
        let body = encode(&call.request)?;
        let mut attempt = 0;
        let (response, in_flight) = loop {
            attempt += 1;
            let connection = self.pool.connection().await?;
            let refused = match connection.send(self.head(call), body.clone()).await {
                Ok(head) => match head.await {
                    (Ok(response), in_flight) => break (response, in_flight),
                    (Err(e), in_flight) => in_flight.fault(&e),
                },
                Err(fault) => fault,
            };
            match refused {
                Fault::Refused(_) if attempt < 2 => self.pool.retire(&connection),
                fault => return Err(fault.into()),
            }
        };
        let (parts, body) = response.into_parts();
        // A trailers-only reply carries its status in the headers.
        let in_head = status::check(&parts.headers);
        if let Some(Err(err)) = in_head {
            return Err(err);
        }
        if parts.status != http::StatusCode::OK {
            return Err(status::from_http(parts.status));
        }
        let reading = Reading {
            body,
            messages: Messages::new(self.max_message),
            ok_in_head: in_head.is_some(),
            call: in_flight,
        };
        Ok((parts.headers, reading))
    }

    async fn unary_call(&self, call: Call<UnaryRequest>) -> Result<Answer<Reply>, Error> {
        let (headers, mut reading) = self.start(&call).await?;
        while reading.fill().await? {}
        reading.finish().await?;
        let message = reading
            .messages
            .next()?
            .ok_or_else(|| Fault::BadResponse("the reply holds no message".into()))?;
        let value = call
            .request
            .decode_reply(message)
            .map_err(|e| Fault::BadResponse(format!("the reply cannot be decoded: {e}")))?;
        Ok(Answer {
            extensions: response_extensions(&headers),
            status: Some(Status::Grpc(Code::Ok)),
            value,
        })
    }

    async fn stream_call(&self, call: Call<StreamRequest>) -> Result<Answer<EventStream>, Error> {
        let (headers, reading) = self.start(&call).await?;
        let events = futures::stream::unfold(Some(reading), |reading| async move {
            let mut reading = reading?;
            match reading.next_event().await {
                Ok(Some(event)) => Some((Ok(event), Some(reading))),
                Ok(None) => None,
                Err(err) => Some((Err(err), None)),
            }
        });
        Ok(Answer {
            extensions: response_extensions(&headers),
            status: Some(Status::Grpc(Code::Ok)),
            value: events.boxed(),
        })
    }
}

impl Backend for GrpcBackend {
    fn unary(
        &self,
        mut call: Call<UnaryRequest>,
    ) -> BoxFuture<'static, Result<Answer<Reply>, Error>> {
        let client = self.0.clone();
        let observed = client.observe(&mut call);
        async move { observed.unary(client.unary_call(call).await) }.boxed()
    }

    fn stream(
        &self,
        mut call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, Error>> {
        let client = self.0.clone();
        let observed = client.observe(&mut call);
        async move { observed.stream(client.stream_call(call).await) }.boxed()
    }
}

impl Client {
    /// The call's client span and status (`backend::observed::BackendCall`).
    fn observe<R: TypedRequest>(&self, call: &mut Call<R>) -> BackendCall {
        let op = call.request.op();
        let authority = self.authority.as_str();
        BackendCall::start(op, Hop::Grpc { authority }, &mut call.trace)
    }
}

/// The request as one gRPC message: flag byte, length, protobuf.
fn encode(request: &impl TypedRequest) -> Result<Bytes, Error> {
    let len = request.encoded_len();
    let Ok(prefix) = u32::try_from(len) else {
        return Err(Error::unsent(A2aError::with_message(
            ErrorKind::InvalidRequest,
            format!("request of {len} bytes exceeds gRPC's message size"),
        )));
    };
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(prefix);
    // The buffer has room for the whole message, so encoding cannot fail.
    request
        .encode(&mut out)
        .map_err(|e| Error::unsent(A2aError::with_message(ErrorKind::Internal, e.to_string())))?;
    Ok(out.freeze())
}

/// A response body being read: its messages, and the call's hold on its connection.
struct Reading {
    body: h2::RecvStream,
    messages: Messages,
    /// The head held an OK status (a trailers-only reply: no body, no trailers follow).
    ok_in_head: bool,
    call: InFlight,
}

impl Reading {
    /// Reads one more DATA chunk into `messages`; `false` at the end of the body. The
    /// window is returned as data is taken, so a slow reader holds the backend back.
    async fn fill(&mut self) -> Result<bool, Error> {
        match self.body.data().await {
            None => Ok(false),
            Some(Err(e)) => Err(self.call.fault(&e).into()),
            Some(Ok(chunk)) => {
                let _ = self.body.flow_control().release_capacity(chunk.len());
                self.messages.push(chunk)?;
                Ok(true)
            }
        }
    }

    /// Reads the trailers and checks the status in them.
    async fn finish(&mut self) -> Result<(), Error> {
        let trailers = self
            .body
            .trailers()
            .await
            .map_err(|e| self.call.fault(&e))?;
        match trailers.as_ref().and_then(status::check) {
            Some(result) => result,
            None if self.ok_in_head => Ok(()),
            None => Err(Fault::BadResponse("the reply ended without a grpc-status".into()).into()),
        }
    }

    /// The next stream event; `None` once the stream ended with an OK status.
    async fn next_event(&mut self) -> Result<Option<StreamResponse>, Error> {
        loop {
            if let Some(message) = self.messages.next()? {
                return StreamResponse::decode(message).map(Some).map_err(|e| {
                    Fault::BadResponse(format!("a stream event cannot be decoded: {e}")).into()
                });
            }
            if !self.fill().await? {
                self.finish().await?;
                if !self.messages.is_empty() {
                    return Err(
                        Fault::BadResponse("the stream ends inside a message".into()).into(),
                    );
                }
                return Ok(None);
            }
        }
    }
}

/// Received bytes, cut into gRPC messages of at most `max` bytes.
struct Messages {
    buf: BytesMut,
    /// A chunk not yet copied into `buf` (the common case: one chunk, one message).
    whole: Option<Bytes>,
    max: usize,
}

impl Messages {
    fn new(max: usize) -> Self {
        Messages {
            buf: BytesMut::new(),
            whole: None,
            max,
        }
    }

    /// Adds a chunk (at most one HTTP/2 DATA frame, 16 KiB). The next message's declared
    /// length is checked as soon as its prefix is in, so a backend declaring a message over
    /// the limit is refused before its bytes are buffered; buffered bytes never exceed one
    /// message of the limit, its prefix and one chunk.
    fn push(&mut self, chunk: Bytes) -> Result<(), Error> {
        if self.buf.is_empty() && self.whole.is_none() {
            message_len(&chunk, self.max)?;
            self.whole = Some(chunk);
            return Ok(());
        }
        if let Some(whole) = self.whole.take() {
            self.buf.extend_from_slice(&whole);
        }
        if self.buf.len() > 5 + self.max {
            return Err(too_large(self.buf.len(), self.max));
        }
        self.buf.extend_from_slice(&chunk);
        message_len(&self.buf, self.max)?;
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.whole.as_ref().is_none_or(Bytes::is_empty)
    }

    /// The next complete message, if one is buffered.
    fn next(&mut self) -> Result<Option<Bytes>, Error> {
        if let Some(whole) = self.whole.as_mut() {
            match message_len(whole, self.max)? {
                Some(len) if whole.len() >= 5 + len => {
                    whole.advance(5);
                    let message = whole.split_to(len);
                    if whole.is_empty() {
                        self.whole = None;
                    }
                    return Ok(Some(message));
                }
                _ => {
                    let whole = self.whole.take().unwrap_or_default();
                    self.buf.extend_from_slice(&whole);
                }
            }
        }
        match message_len(&self.buf, self.max)? {
            Some(len) if self.buf.len() >= 5 + len => {
                self.buf.advance(5);
                Ok(Some(self.buf.split_to(len).freeze()))
            }
            _ => Ok(None),
        }
    }
}

/// The length of the message at the start of `buf`, once its prefix is in.
fn message_len(buf: &[u8], max: usize) -> Result<Option<usize>, Error> {
    if buf.len() < 5 {
        return Ok(None);
    }
    if buf[0] != 0 {
        return Err(Fault::BadResponse(
            "a compressed message, but no compression was offered".into(),
        )
        .into());
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > max {
        return Err(too_large(len, max));
    }
    Ok(Some(len))
}

fn too_large(len: usize, max: usize) -> Error {
    Fault::BadResponse(format!(
        "a message of {len} bytes exceeds the limit of {max} bytes"
    ))
    .into()
}

/// ASCII gRPC metadata: printable values, and no `-bin` (binary) names.
fn metadata_ok(name: &HeaderName, value: &HeaderValue) -> bool {
    !name.as_str().ends_with("-bin") && value.as_bytes().iter().all(|b| (0x20..0x7f).contains(b))
}

/// `grpc-timeout`: the most precise unit that keeps the value within 8 digits.
fn grpc_timeout(timeout: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let units: [(char, u128); 6] = [
        ('n', timeout.as_nanos()),
        ('u', timeout.as_micros()),
        ('m', timeout.as_millis()),
        ('S', u128::from(timeout.as_secs())),
        ('M', u128::from(timeout.as_secs() / 60)),
        ('H', u128::from(timeout.as_secs() / 3600)),
    ];
    let (unit, value) = units
        .into_iter()
        .find(|(_, v)| *v <= MAX)
        .unwrap_or(('H', MAX));
    format!("{value}{unit}")
}

/// The TLS client for a backend named `host`: system roots plus `ca_pem`, ALPN `h2`, and
/// the client certificate of `identity_pem` when given.
fn tls_connector(
    host: &str,
    ca_pem: Option<&[u8]>,
    identity_pem: Option<&[u8]>,
) -> Result<Tls, String> {
    let config = shared_client_config(ca_pem, identity_pem, Alpn::H2)?;
    let name =
        rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
    Ok((tokio_rustls::TlsConnector::from(config), name))
}

/// The protocols a backend client offers in TLS (ALPN).
#[derive(Clone, Copy)]
pub(crate) enum Alpn {
    /// gRPC: HTTP/2 only.
    H2,
    /// HTTP+JSON: HTTP/2 or HTTP/1.1, as the agent prefers.
    H2OrHttp1,
}

/// The rustls configuration of `ca_pem`, `identity_pem` and `alpn`, one for every backend
/// made of the same: each holds the system's roots, about 100 KiB, which per route made
/// 2,000 `https://` routes take 200 MiB (benches/README.md, many routes). Held weakly, so
/// a reload's rotated files make a new one and the old one goes with its last route.
pub(crate) fn shared_client_config(
    ca_pem: Option<&[u8]>,
    identity_pem: Option<&[u8]>,
    alpn: Alpn,
) -> Result<Arc<rustls::ClientConfig>, String> {
    type Shared = std::collections::HashMap<Vec<u8>, std::sync::Weak<rustls::ClientConfig>>;
    static SHARED: std::sync::LazyLock<std::sync::Mutex<Shared>> =
        std::sync::LazyLock::new(Default::default);
    // The key: a digest of the inputs, each told apart from its absence and its length.
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    digest.update(&[alpn as u8]);
    for part in [ca_pem, identity_pem] {
        match part {
            None => digest.update(&[0]),
            Some(bytes) => {
                digest.update(&[1]);
                digest.update(&(bytes.len() as u64).to_le_bytes());
                digest.update(bytes);
            }
        }
    }
    let key = digest.finish().as_ref().to_vec();
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(config) = shared.get(&key).and_then(std::sync::Weak::upgrade) {
        return Ok(config);
    }
    let config = Arc::new(client_config(ca_pem, identity_pem, alpn)?);
    shared.retain(|_, config| config.strong_count() > 0);
    shared.insert(key, Arc::downgrade(&config));
    Ok(config)
}

/// A rustls configuration trusting the system roots plus `ca_pem`, offering `alpn`,
/// presenting the client certificate of `identity_pem` when given.
fn client_config(
    ca_pem: Option<&[u8]>,
    identity_pem: Option<&[u8]>,
    alpn: Alpn,
) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped, as a browser would; a private CA is
    // what `--backend-ca` is for.
    let (added, _) =
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(pem) = ca_pem {
        for certificate in CertificateDer::pem_slice_iter(pem) {
            let certificate = certificate.map_err(|e| format!("CA certificates: {e}"))?;
            roots
                .add(certificate)
                .map_err(|e| format!("CA certificates: {e}"))?;
        }
    } else if added == 0 {
        tracing::warn!("no system CA certificates found; https:// backends need --backend-ca");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match identity_pem {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let fail = |e: &dyn std::fmt::Display| format!("client certificate: {e}");
            let chain = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| fail(&e))?;
            let key = PrivateKeyDer::from_pem_slice(pem).map_err(|e| fail(&e))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| fail(&e))?
        }
    };
    config.alpn_protocols = match alpn {
        Alpn::H2 => vec![b"h2".to_vec()],
        Alpn::H2OrHttp1 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_of_the_same_tls_files_share_one_rustls_configuration() {
        let ca = |name: &str| {
            let made = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
            made.cert.pem()
        };
        let (one, other) = (ca("one.test"), ca("other.test"));
        let first = shared_client_config(Some(one.as_bytes()), None, Alpn::H2).unwrap();
        let again = shared_client_config(Some(one.as_bytes()), None, Alpn::H2).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let rotated = shared_client_config(Some(other.as_bytes()), None, Alpn::H2).unwrap();
        assert!(!Arc::ptr_eq(&first, &rotated));
        let without = shared_client_config(None, None, Alpn::H2).unwrap();
        assert!(!Arc::ptr_eq(&first, &without));
        assert!(Arc::ptr_eq(
            &without,
            &shared_client_config(None, None, Alpn::H2).unwrap()
        ));
        // HTTP+JSON clients offer HTTP/1.1 too: a configuration of their own.
        let rest = shared_client_config(None, None, Alpn::H2OrHttp1).unwrap();
        assert!(!Arc::ptr_eq(&without, &rest));
        assert_eq!(rest.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
    }

    #[test]
    fn timeouts_fit_eight_digits() {
        assert_eq!(grpc_timeout(Duration::from_millis(50)), "50000000n");
        assert_eq!(grpc_timeout(Duration::from_millis(500)), "500000u");
        assert_eq!(grpc_timeout(Duration::from_secs(7)), "7000000u");
        assert_eq!(grpc_timeout(Duration::from_secs(30)), "30000000u");
        assert_eq!(grpc_timeout(Duration::from_secs(3600)), "3600000m");
    }

    fn wire(messages: &[&[u8]]) -> Bytes {
        let mut wire = BytesMut::new();
        for text in messages {
            wire.put_u8(0);
            wire.put_u32(text.len() as u32);
            wire.extend_from_slice(text);
        }
        wire.freeze()
    }

    /// Stream ids run out after about 2^30 streams: the connection is replaced before,
    /// without failing a call. Here after 3 streams, against the demo agent.
    #[tokio::test]
    async fn connections_roll_over_before_their_stream_ids_run_out() {
        let addr = crate::demo::spawn().await.unwrap();
        let backend =
            GrpcBackend::new(&format!("http://{addr}"), &GrpcSettings::default(), None).unwrap();
        let client = Client {
            pool: backend.0.pool.with_max_streams(3),
            scheme: backend.0.scheme.clone(),
            authority: backend.0.authority.clone(),
            max_message: backend.0.max_message,
        };
        let mut connections = Vec::new();
        for _ in 0..7 {
            let call = Call {
                request: UnaryRequest::GetExtendedAgentCard(Default::default()),
                forwarded: Vec::new(),
                deadline: Some(tokio::time::Instant::now() + Duration::from_secs(5)),
                trace: None,
            };
            let answer = client.unary_call(call).await.unwrap();
            assert!(matches!(answer.value, Reply::GetExtendedAgentCard(_)));
            connections.push(client.pool.current_state().unwrap());
        }
        connections.dedup();
        assert_eq!(
            connections.len(),
            3,
            "streams 1-3, 4-6, 7: three connections"
        );
    }

    #[test]
    fn messages_split_and_join() {
        let mut messages = Messages::new(1024);
        let wire = wire(&[b"ab", b"", b"cde"]);
        messages.push(wire.slice(..4)).unwrap();
        assert_eq!(messages.next().unwrap(), None);
        messages.push(wire.slice(4..)).unwrap();
        assert_eq!(messages.next().unwrap().as_deref(), Some(&b"ab"[..]));
        assert_eq!(messages.next().unwrap().as_deref(), Some(&b""[..]));
        assert_eq!(messages.next().unwrap().as_deref(), Some(&b"cde"[..]));
        assert_eq!(messages.next().unwrap(), None);
        assert!(messages.is_empty());
        let compressed = messages.push(Bytes::from_static(&[1, 0, 0, 0, 0]));
        assert!(compressed.is_err(), "refused as soon as its prefix is in");
    }

    #[test]
    fn messages_at_the_limit() {
        let at = vec![b'x'; 64];
        let mut messages = Messages::new(64);
        messages.push(wire(&[&at])).unwrap();
        assert_eq!(messages.next().unwrap().map(|m| m.len()), Some(64));
        let over = vec![b'x'; 65];
        let mut messages = Messages::new(64);
        messages.push(wire(&[&over]).slice(..3)).unwrap();
        let err = messages.push(wire(&[&over]).slice(3..5)).unwrap_err();
        let err = A2aError::from(err);
        assert_eq!(err.data[0]["reason"], "BACKEND_BAD_RESPONSE");
        // A 4 GiB prefix is refused before anything is buffered.
        let mut messages = Messages::new(64);
        let err = messages.push(Bytes::from_static(&[0, 0xff, 0xff, 0xff, 0xff]));
        assert!(err.is_err());
    }
}

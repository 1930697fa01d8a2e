//! gRPC backend (spec 10): calls are derived from the operation table. Cleartext
//! (`http://`) backends are called over one shared HTTP/2 connection of the gateway's own
//! client (`grpc/h2c.rs`, the fast path); TLS backends over one lazily connected tonic
//! channel.

mod h2c;

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http::HeaderValue;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status};

use super::{Answer, Backend, Call, EventStream};
use crate::proto::a2a_service_client::A2aServiceClient;
use crate::protocol::details;
use crate::protocol::error::{A2aError, ErrorKind, GatewayFault};
use crate::protocol::ops::{with_operations, Reply, Request};
use crate::protocol::params::{joined_extensions, EXTENSIONS, SUPPORTED_VERSION, VERSION};

/// A backend reached over gRPC.
#[derive(Clone, Debug)]
pub struct GrpcBackend {
    channel: Channel,
    /// Cleartext (`http://`) backends are called over the own HTTP/2 client (see `h2c.rs`).
    h2c: Option<Arc<h2c::H2c>>,
}

/// The backend address cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid gRPC backend {uri:?}: {source}")]
pub struct GrpcConfigError {
    uri: String,
    source: tonic::transport::Error,
}

impl GrpcBackend {
    /// A backend at `uri` (`http://` or `https://`). For TLS the system roots are trusted,
    /// plus the PEM certificates in `ca_pem` (e.g. a cluster's internal CA). The connection
    /// is made on first use, so a backend that is down at start is not fatal.
    pub fn new(
        uri: &str,
        connect_timeout: Duration,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, GrpcConfigError> {
        Self::with_keepalive(uri, connect_timeout, ca_pem, Duration::from_secs(30))
    }

    /// `new` with HTTP/2 keepalive pings every `keepalive`; a ping unanswered within
    /// `keepalive` (at most 10 s) closes the connection and fails its calls.
    pub fn with_keepalive(
        uri: &str,
        connect_timeout: Duration,
        ca_pem: Option<&[u8]>,
        keepalive: Duration,
    ) -> Result<Self, GrpcConfigError> {
        let ping_timeout = keepalive.min(Duration::from_secs(10));
        let err = |source| GrpcConfigError {
            uri: uri.to_owned(),
            source,
        };
        let mut endpoint = Endpoint::from_shared(uri.to_owned())
            .map_err(err)?
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(keepalive)
            .keep_alive_timeout(ping_timeout)
            .keep_alive_while_idle(true);
        if uri.starts_with("https://") {
            let mut tls = ClientTlsConfig::new().with_native_roots();
            if let Some(pem) = ca_pem {
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            endpoint = endpoint.tls_config(tls).map_err(err)?;
        }
        let h2c = match uri.starts_with("http://") {
            true => uri
                .parse()
                .ok()
                .and_then(|u| h2c::H2c::new(&u, connect_timeout, keepalive, ping_timeout)),
            false => None,
        };
        Ok(Self {
            channel: endpoint.connect_lazy(),
            h2c,
        })
    }

    fn client(&self) -> A2aServiceClient<Channel> {
        A2aServiceClient::new(self.channel.clone())
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }
}

macro_rules! grpc_calls {
    (
        unary { $( $u:ident : $urpc:ident ($ureq:ty) -> $uresp:ty, $um:ident $upath:literal; )* }
        stream { $( $s:ident : $srpc:ident ($sreq:ty), $sm:ident $spath:literal; )* }
    ) => {
        async fn call_unary(
            mut client: A2aServiceClient<Channel>,
            call: Call,
        ) -> Result<Answer<Reply>, A2aError> {
            let Call { request, forwarded, timeout } = call;
            match request {
                $( Request::$u(msg) => {
                    let response = client
                        .$urpc(outgoing(msg, &forwarded, timeout))
                        .await
                        .map_err(|s| status_to_error(&s))?;
                    Ok(Answer {
                        extensions: extensions(response.metadata()),
                        value: Reply::$u(response.into_inner()),
                    })
                } )*
                other => Err(super::not_of_kind(other.op(), "unary")),
            }
        }

        async fn call_stream(
            mut client: A2aServiceClient<Channel>,
            call: Call,
        ) -> Result<Answer<EventStream>, A2aError> {
            let Call { request, forwarded, timeout } = call;
            match request {
                $( Request::$s(msg) => {
                    let response = client
                        .$srpc(outgoing(msg, &forwarded, timeout))
                        .await
                        .map_err(|s| status_to_error(&s))?;
                    let extensions = extensions(response.metadata());
                    let events = response
                        .into_inner()
                        .map(|event| event.map_err(|s| status_to_error(&s)))
                        .boxed();
                    Ok(Answer { value: events, extensions })
                } )*
                other => Err(super::not_of_kind(other.op(), "streaming")),
            }
        }
    };
}

with_operations!(grpc_calls);

impl Backend for GrpcBackend {
    fn unary(&self, call: Call) -> BoxFuture<'static, Result<Answer<Reply>, A2aError>> {
        match &self.h2c {
            Some(h2c) => h2c.clone().unary(call).boxed(),
            None => call_unary(self.client(), call).boxed(),
        }
    }

    fn stream(&self, call: Call) -> BoxFuture<'static, Result<Answer<EventStream>, A2aError>> {
        match &self.h2c {
            Some(h2c) => h2c.clone().stream(call).boxed(),
            None => call_stream(self.client(), call).boxed(),
        }
    }
}

/// The tonic request: message, `a2a-version`, forwarded headers as metadata, deadline.
fn outgoing<T>(
    msg: T,
    forwarded: &[(http::HeaderName, HeaderValue)],
    timeout: Option<Duration>,
) -> tonic::Request<T> {
    let mut request = tonic::Request::new(msg);
    let metadata = request.metadata_mut();
    metadata.insert(VERSION, AsciiMetadataValue::from_static(SUPPORTED_VERSION));
    for (name, value) in forwarded {
        let key = AsciiMetadataKey::from_bytes(name.as_str().as_bytes());
        let value = AsciiMetadataValue::try_from(value.as_bytes());
        match (key, value) {
            (Ok(key), Ok(value)) => {
                metadata.append(key, value);
            }
            _ => tracing::debug!(header = %name, "header not representable as gRPC metadata"),
        }
    }
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    request
}

fn extensions(metadata: &MetadataMap) -> Option<HeaderValue> {
    joined_extensions(
        metadata
            .get_all(EXTENSIONS)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// A backend `Status` through the error table; transport failures of the gateway's own
/// connection become gateway faults instead.
pub fn status_to_error(status: &Status) -> A2aError {
    if let Some((fault, what)) = transport_fault(status) {
        tracing::warn!(code = ?status.code(), error = %status, "backend call failed: {what}");
        return A2aError::gateway(fault, format!("{what}: {}", status.message()));
    }
    let data = details::from_status_bytes(status.details());
    A2aError::from_backend(ErrorKind::from_grpc(status.code()), status.message(), data)
}

fn transport_fault(status: &Status) -> Option<(GatewayFault, &'static str)> {
    const DEADLINE: (GatewayFault, &str) = (
        GatewayFault::BackendDeadlineExceeded,
        "backend deadline exceeded",
    );
    if status.code() == Code::DeadlineExceeded && status.details().is_empty() {
        return Some(DEADLINE);
    }
    // Statuses made by tonic's client from a transport error carry that error as source;
    // statuses the backend sent do not.
    let mut source = status.source();
    let mut seen = false;
    while let Some(err) = source {
        seen = true;
        if err.is::<tonic::TimeoutExpired>() {
            return Some(DEADLINE);
        }
        let refused = err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        if refused || err.is::<tonic::ConnectError>() {
            return Some((GatewayFault::BackendUnavailable, "backend unreachable"));
        }
        source = err.source();
    }
    seen.then_some((
        GatewayFault::BackendConnectionReset,
        "connection to backend lost",
    ))
}

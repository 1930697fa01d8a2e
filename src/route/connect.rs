//! One connector per binding: how a route's backend clients are made, the same for one
//! URL, each URL of a list and each address of a `dns:///` name. A connector is built and
//! checked once (a bad URL, CA bundle or client identity fails the start); each worker
//! takes clients of its own from it (`client`), and `/readyz` its probes.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::backend::endpoints::NewClient;
use crate::backend::grpc::{shared_client_config, Alpn, GrpcBackend};
use crate::backend::rest::{RestBackend, RestConfigError};
use crate::backend::{self, Answer, Backend, Call, EventStream};
use crate::protocol::binding::Binding;
use crate::protocol::error::{A2aError, ErrorKind};
use crate::protocol::ops::{Reply, StreamRequest, UnaryRequest};
use crate::settings::ClientSettings;

use super::RouteError;

/// The clients of one backend URL (or of one address behind a DNS name).
#[derive(Clone)]
pub enum Connector {
    /// gRPC: the shared part of the client (TLS, the keepalive policy every worker's
    /// connections follow); its own connections are the readiness probe's.
    Grpc(Arc<GrpcBackend>),
    /// HTTP+JSON: what each worker's client is made of.
    Rest(Arc<RestTarget>),
}

/// An HTTP+JSON backend's URL and client settings.
pub struct RestTarget {
    url: String,
    /// The address to connect to instead of resolving the URL's host (a `dns:///` pod).
    address: Option<SocketAddr>,
    client: ClientSettings,
    /// The TLS configuration its clients share, held while the route is: the cache
    /// (`shared_client_config`) holds it only weakly, and clients are made at their first
    /// call, so without this every route built it again (the system's roots read anew).
    _tls: Arc<rustls::ClientConfig>,
}

impl Connector {
    /// The connector of `url` over `binding`, checked now.
    pub fn new(
        url: &str,
        binding: Binding,
        client: &ClientSettings,
    ) -> Result<Connector, RouteError> {
        let (ca, identity) = (client.ca.as_deref(), client.identity.as_deref());
        Ok(match binding {
            Binding::Grpc => {
                let grpc = GrpcBackend::with_identity(url, &client.grpc(), ca, identity)?;
                Connector::Grpc(Arc::new(grpc))
            }
            // `--binding` is read by `Binding::backend`, which refuses it.
            Binding::JsonRpc => unreachable!("a JSON-RPC backend is refused by the settings"),
            Binding::HttpJson => {
                let tls = shared_client_config(ca, identity, Alpn::H2OrHttp1)
                    .map_err(|reason| RestConfigError::new(url, reason))?;
                let target = RestTarget {
                    url: url.to_owned(),
                    address: None,
                    client: client.clone(),
                    _tls: tls,
                };
                // A client made and dropped: its URL, CA and identity are checked now, not
                // in a worker.
                target.client()?;
                Connector::Rest(Arc::new(target))
            }
        })
    }

    /// The connector of the same backend at `address` (one address of a `dns:///` name:
    /// the name stays the URL's, for `:authority`, `Host` and TLS).
    pub fn at(&self, address: SocketAddr) -> Connector {
        match self {
            Connector::Grpc(grpc) => Connector::Grpc(Arc::new(grpc.at(address))),
            Connector::Rest(target) => Connector::Rest(Arc::new(RestTarget {
                url: target.url.clone(),
                address: Some(address),
                client: target.client.clone(),
                _tls: target._tls.clone(),
            })),
        }
    }

    /// A client with connections of its own, for the worker (runtime) calling.
    pub fn client(&self) -> Result<Arc<dyn Backend>, RestConfigError> {
        Ok(match self {
            Connector::Grpc(grpc) => Arc::new(grpc.for_worker()),
            Connector::Rest(target) => Arc::new(LazyRest {
                target: target.clone(),
                client: OnceLock::new(),
            }),
        })
    }

    /// How a balanced endpoint makes its worker clients.
    pub fn new_client(self) -> NewClient {
        Box::new(move || self.client().map_err(|e| e.to_string()))
    }
}

/// A worker's HTTP+JSON client, made at its first call: a reqwest client is several KiB,
/// and of 10,000 routes most workers call few (benches/README.md, many routes). Its
/// settings were checked when the connector was made (`Connector::new`).
struct LazyRest {
    target: Arc<RestTarget>,
    client: OnceLock<Option<RestBackend>>,
}

impl LazyRest {
    /// The client, made now if this is the first call; `None` if it cannot be made.
    fn get(&self) -> Option<&RestBackend> {
        let made = self.client.get_or_init(|| {
            let client = self.target.client();
            // Made from the settings `Connector::new` checked: only a host that can no
            // longer load its TLS roots fails here.
            client
                .inspect_err(|e| tracing::error!("HTTP+JSON client not made: {e}"))
                .ok()
        });
        made.as_ref()
    }

    fn unsent<T: Send + 'static>() -> BoxFuture<'static, Result<T, backend::Error>> {
        let error = A2aError::new(ErrorKind::Internal);
        futures::future::ready(Err(backend::Error::Unsent(Box::new(error)))).boxed()
    }
}

impl Backend for LazyRest {
    fn unary(
        &self,
        call: Call<UnaryRequest>,
    ) -> BoxFuture<'static, Result<Answer<Reply>, backend::Error>> {
        match self.get() {
            Some(client) => client.unary(call),
            None => Self::unsent(),
        }
    }

    fn stream(
        &self,
        call: Call<StreamRequest>,
    ) -> BoxFuture<'static, Result<Answer<EventStream>, backend::Error>> {
        match self.get() {
            Some(client) => client.stream(call),
            None => Self::unsent(),
        }
    }
}

impl RestTarget {
    fn client(&self) -> Result<RestBackend, RestConfigError> {
        let client = &self.client;
        let (timeout, ca, id) = (
            client.connect_timeout,
            client.ca.as_deref(),
            client.identity.as_deref(),
        );
        let rest = match self.address {
            None => RestBackend::with_identity(&self.url, timeout, ca, id)?,
            Some(address) => RestBackend::at(&self.url, timeout, ca, id, address)?,
        };
        Ok(rest.max_message(client.max_message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Two HTTP+JSON routes of the same TLS files share one configuration, built once: each
    /// built its own (the system's roots read anew) when nothing held the cache's.
    #[test]
    fn http_json_connectors_of_the_same_files_share_one_tls_configuration() {
        let client = ClientSettings {
            connect_timeout: Duration::from_secs(1),
            max_message: 1 << 20,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            keepalive_while_idle: false,
            ca: None,
            identity: None,
        };
        let tls = |url: &str| match Connector::new(url, Binding::HttpJson, &client).unwrap() {
            Connector::Rest(target) => target._tls.clone(),
            Connector::Grpc(_) => unreachable!("an HTTP+JSON connector"),
        };
        let first = tls("http://127.0.0.1:1");
        assert!(Arc::ptr_eq(&first, &tls("https://agent.example/a2a")));
    }
}

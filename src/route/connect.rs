//! One connector per binding: how a route's backend clients are made, the same for one
//! URL, each URL of a list and each address of a `dns:///` name. A connector is built and
//! checked once (a bad URL, CA bundle or client identity fails the start); each worker
//! takes clients of its own from it (`client`), and `/readyz` its probes.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::backend::endpoints::NewClient;
use crate::backend::grpc::GrpcBackend;
use crate::backend::rest::{RestBackend, RestConfigError};
use crate::backend::Backend;
use crate::protocol::binding::Binding;
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
                let target = RestTarget {
                    url: url.to_owned(),
                    address: None,
                    client: client.clone(),
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
            })),
        }
    }

    /// A client with connections of its own, for the worker (runtime) calling.
    pub fn client(&self) -> Result<Arc<dyn Backend>, RestConfigError> {
        Ok(match self {
            Connector::Grpc(grpc) => Arc::new(grpc.for_worker()),
            Connector::Rest(target) => Arc::new(target.client()?),
        })
    }

    /// How a balanced endpoint makes its worker clients.
    pub fn new_client(self) -> NewClient {
        Box::new(move || self.client().map_err(|e| e.to_string()))
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

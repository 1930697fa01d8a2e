//! Backends the test can kill as a pod dies: each serves on a runtime of its own, and
//! `kill` shuts that runtime down, so its listener and every connection close at once (no
//! graceful GOAWAY, streams cut mid-way). Pods of one DNS name share a port on distinct
//! loopback addresses (127.0.0.1, 127.0.0.2, …: Linux routes all of 127/8 to `lo`).

use std::net::{Ipv4Addr, SocketAddr};

use super::{Scheme, TestBackend};

/// A gRPC test backend on its own runtime.
pub struct Pod {
    pub addr: SocketAddr,
    pub backend: TestBackend,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Pod {
    /// Serves `backend` with `scheme` on `addr` (port 0: any).
    pub async fn start(backend: TestBackend, scheme: Scheme, addr: SocketAddr) -> Pod {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (bound_tx, bound) = tokio::sync::oneshot::channel();
        let served = backend.clone();
        runtime.spawn(async move {
            let listener = listen(addr);
            let _ = bound_tx.send(listener.local_addr().unwrap());
            let server = scheme.server(tonic::transport::Server::builder());
            served.spawn_on(server, listener, std::future::pending());
        });
        Pod {
            addr: bound.await.unwrap(),
            backend,
            runtime: Some(runtime),
        }
    }

    /// Dies: the listener and every connection close.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    pub fn calls(&self) -> usize {
        self.backend.calls()
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A listener on `addr` that a killed pod's successor may take over at once.
fn listen(addr: SocketAddr) -> tokio::net::TcpListener {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(addr).unwrap();
    socket.listen(1024).unwrap()
}

/// `n` loopback addresses sharing one free port: 127.0.0.1:P, 127.0.0.2:P, …
pub fn pod_addresses(n: u8) -> Vec<SocketAddr> {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addrs: Vec<SocketAddr> = (1..=n)
            .map(|i| SocketAddr::from((Ipv4Addr::new(127, 0, 0, i), port)))
            .collect();
        // Taken on another address by someone else: try another port.
        if addrs.iter().all(|a| std::net::TcpListener::bind(a).is_ok()) {
            return addrs;
        }
    }
}

/// The IPv4 address of each socket address.
pub fn ips(addrs: &[SocketAddr]) -> Vec<Ipv4Addr> {
    addrs
        .iter()
        .map(|a| match a.ip() {
            std::net::IpAddr::V4(ip) => ip,
            std::net::IpAddr::V6(_) => panic!("pods are IPv4"),
        })
        .collect()
}

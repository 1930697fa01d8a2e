//! A test DNS server on 127.0.0.1 (UDP, hickory-server): it answers A queries for
//! one name with the addresses the test sets, changed at will during the test, so a
//! `dns:///` backend sees pods come and go as a headless Service's name shows them. Other
//! names are NXDOMAIN; other record types of the name have no records.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Header, Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::A;
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;

/// A running test DNS server; it stops with the test's runtime.
pub struct TestDns {
    /// Where it listens (UDP), for `--backend-resolver`.
    pub addr: SocketAddr,
    answers: Arc<Mutex<Vec<Ipv4Addr>>>,
    queries: Arc<AtomicUsize>,
}

struct Answers {
    name: LowerName,
    answers: Arc<Mutex<Vec<Ipv4Addr>>>,
    queries: Arc<AtomicUsize>,
}

impl TestDns {
    /// Serves `name` (e.g. `agents.a2a.test`) with `addresses`.
    pub async fn start(name: &str, addresses: &[Ipv4Addr]) -> TestDns {
        let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = udp.local_addr().unwrap();
        let answers = Arc::new(Mutex::new(addresses.to_vec()));
        let queries = Arc::new(AtomicUsize::new(0));
        let handler = Answers {
            name: LowerName::from(Name::from_ascii(format!("{name}.")).unwrap()),
            answers: answers.clone(),
            queries: queries.clone(),
        };
        let mut server = Server::new(handler);
        server.register_socket(udp);
        // Dropping the server would stop it; the test's runtime ends it.
        tokio::spawn(async move {
            let _ = server.block_until_done().await;
        });
        TestDns {
            addr,
            answers,
            queries,
        }
    }

    /// From now on the name resolves to `addresses`.
    pub fn set(&self, addresses: &[Ipv4Addr]) {
        *self.answers.lock().unwrap() = addresses.to_vec();
    }

    /// Queries answered so far.
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

#[tonic::async_trait]
impl RequestHandler for Answers {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        self.queries.fetch_add(1, Ordering::SeqCst);
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = true;
        let mut records = Vec::new();
        match request.queries.queries().first() {
            Some(query) if query.name() == &self.name => {
                if query.query_type() == RecordType::A {
                    for ip in self.answers.lock().unwrap().iter() {
                        let name = Name::from(query.name().clone());
                        records.push(Record::from_rdata(name, 0, RData::A(A(*ip))));
                    }
                }
            }
            _ => metadata.response_code = ResponseCode::NXDomain,
        }
        let builder = MessageResponseBuilder::from_message_request(request);
        let message = builder.build(metadata, records.iter(), [], [], []);
        match response.send_response(message).await {
            Ok(info) => info,
            Err(_) => ResponseInfo::from(Header {
                metadata,
                counts: Default::default(),
            }),
        }
    }
}

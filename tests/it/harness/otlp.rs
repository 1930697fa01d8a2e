//! An in-process OTLP trace receiver for the tests: the collector's gRPC service
//! (`TraceService/Export`) or its http/protobuf endpoint (`POST /v1/traces`), keeping every
//! export request it receives.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// The export requests received so far.
#[derive(Clone, Default)]
pub struct Collector {
    exports: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

/// A received span with the `service.name` of its resource.
#[derive(Clone, Debug)]
pub struct Received {
    pub service: String,
    pub span: Span,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.exports.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Collector {
    /// A gRPC receiver on 127.0.0.1:0; returns it and its endpoint URL.
    pub async fn grpc() -> (Collector, String) {
        let collector = Collector::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
        tokio::spawn(server);
        (collector, format!("http://{addr}"))
    }

    /// An http/protobuf receiver on 127.0.0.1:0 (`POST /v1/traces`); returns it and its
    /// base URL.
    pub async fn http() -> (Collector, String) {
        let collector = Collector::default();
        let exports = collector.exports.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: http::HeaderMap, body: bytes::Bytes| {
                let exports = exports.clone();
                async move {
                    assert_eq!(headers["content-type"], "application/x-protobuf");
                    let request = ExportTraceServiceRequest::decode(body).unwrap();
                    exports.lock().unwrap().push(request);
                    let reply = ExportTraceServiceResponse::default().encode_to_vec();
                    ([("content-type", "application/x-protobuf")], reply)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (collector, format!("http://{addr}"))
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        let exports = self.exports.lock().unwrap();
        let mut out = Vec::new();
        for export in exports.iter() {
            for resource in &export.resource_spans {
                let service = resource
                    .resource
                    .as_ref()
                    .and_then(|r| attr_of(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for scope in &resource.scope_spans {
                    for span in &scope.spans {
                        out.push(Received {
                            service: service.clone(),
                            span: span.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Everything received, as text (to search it for what must not be there).
    pub fn dump(&self) -> String {
        format!("{:?}", self.exports.lock().unwrap())
    }

    /// Waits until at least `n` spans were received (at most `limit`).
    pub async fn wait_for(&self, n: usize, limit: Duration) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let spans = self.spans();
            if spans.len() >= n || started.elapsed() > limit {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn attr_of(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    Some(match value.value.as_ref()? {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        Value::BoolValue(b) => b.to_string(),
        Value::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

/// A span's attribute as text.
pub fn attr(span: &Span, key: &str) -> Option<String> {
    attr_of(&span.attributes, key)
}

/// Lowercase hex of an id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

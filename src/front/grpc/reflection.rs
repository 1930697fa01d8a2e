//! gRPC server reflection (`grpc.reflection.v1`) of `lf.a2a.v1.A2AService`, for tools such
//! as grpcurl: answered from the descriptor set the build compiled (`proto/a2a.proto` and
//! its imports), built once per process. Its requests name a symbol or a file: each is
//! bounded (`MAX_REQUEST`), whatever the routes' `max-body`, since an unknown symbol is
//! quoted back in the answer.

use std::convert::Infallible;
use std::sync::OnceLock;

use axum::body::Body;
use tower::util::BoxCloneSyncService;

/// The path prefix of the reflection service's method.
pub(crate) const REFLECTION_PATH: &str = "/grpc.reflection.v1.ServerReflection/";

/// The reflection service, as a service of requests.
pub(crate) type Reflection =
    BoxCloneSyncService<http::Request<Body>, http::Response<tonic::body::Body>, Infallible>;

/// The largest reflection request taken: a symbol's or file's name, with room to spare.
const MAX_REQUEST: usize = 16 * 1024;

/// The descriptor set `build.rs` wrote (with imports, as prost-build asks protoc).
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));

/// The process's reflection service; `None` if the build's descriptor set could not be
/// read (a unit test holds it readable).
pub(crate) fn service() -> Option<Reflection> {
    static SERVICE: OnceLock<Option<Reflection>> = OnceLock::new();
    SERVICE
        .get_or_init(|| {
            let built = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(DESCRIPTORS)
                .with_service_name("lf.a2a.v1.A2AService")
                .build_v1();
            match built {
                Ok(server) => Some(BoxCloneSyncService::new(
                    server.max_decoding_message_size(MAX_REQUEST),
                )),
                Err(e) => {
                    tracing::error!(error = %e, "gRPC reflection is off: the descriptor set cannot be read");
                    None
                }
            }
        })
        .clone()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_build_s_descriptor_set_serves_reflection() {
        assert!(super::service().is_some());
    }
}

//! The standard gRPC health check, `grpc.health.v1.Health/Check`, over the backend's own
//! HTTP/2 connection, for `/readyz` (`backend::readiness`). The messages are tonic-health's
//! generated types. The reply's status is read here, not through the A2A error table: a
//! health answer is not an A2A error, and UNIMPLEMENTED (no health service) has a meaning
//! of its own.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CONTENT_TYPE, TE, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method};
use prost::Message as _;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use super::{grpc_timeout, GrpcBackend, Messages, Reading};

const PATH: &str = "/grpc.health.v1.Health/Check";

/// A health answer is a few bytes; anything much larger is not one.
const MAX_MESSAGE: usize = 1024;

/// What a backend answered to a health check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthAnswer {
    /// The status it reports for the service.
    Status(ServingStatus),
    /// It does not offer the health service (UNIMPLEMENTED).
    Unimplemented,
}

impl GrpcBackend {
    /// Asks the backend for the health of `service` ("": the server as a whole) within
    /// `deadline`, which is sent as `grpc-timeout` too. `Err` says why there is no answer
    /// (no connection, no answer in time, a status other than OK and UNIMPLEMENTED).
    pub(crate) async fn check_health(
        &self,
        service: &str,
        deadline: Duration,
    ) -> Result<HealthAnswer, String> {
        match tokio::time::timeout(deadline, self.health_call(service, deadline)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no health answer within {deadline:?}")),
        }
    }

    async fn health_call(&self, service: &str, deadline: Duration) -> Result<HealthAnswer, String> {
        let client = &self.0;
        let mut request = http::Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = client.uri(PATH);
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(TE, HeaderValue::from_static("trailers"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION"))),
        );
        if let Ok(value) = HeaderValue::try_from(grpc_timeout(deadline)) {
            headers.insert("grpc-timeout", value);
        }
        let message = HealthCheckRequest {
            service: service.to_owned(),
        }
        .encode_to_vec();
        let mut body = BytesMut::with_capacity(5 + message.len());
        body.put_u8(0);
        body.put_u32(message.len() as u32);
        body.extend_from_slice(&message);

        let connection = client.pool.connection().await.map_err(|f| f.to_string())?;
        let head = connection
            .send(request, body.freeze())
            .await
            .map_err(|f| f.to_string())?;
        let (response, in_flight) = head.await;
        let response = response.map_err(|e| in_flight.fault(&e).to_string())?;
        let (parts, body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(format!(
                "the health check got HTTP {}",
                parts.status.as_u16()
            ));
        }
        // A trailers-only reply carries its status in the headers.
        if parts.headers.contains_key("grpc-status") {
            return answer(&parts.headers, None);
        }
        let mut reading = Reading {
            body,
            messages: Messages::new(MAX_MESSAGE),
            ok_in_head: false,
            call: in_flight,
        };
        while reading.fill().await.map_err(|e| e.to_string())? {}
        let trailers = reading
            .body
            .trailers()
            .await
            .map_err(|e| reading.call.fault(&e).to_string())?
            .unwrap_or_default();
        let message = reading.messages.next().map_err(|e| e.to_string())?;
        answer(&trailers, message)
    }
}

/// The answer in a reply whose status is in `headers` and whose message, if any, is
/// `message`.
fn answer(headers: &HeaderMap, message: Option<Bytes>) -> Result<HealthAnswer, String> {
    let Some(status) = headers.get("grpc-status") else {
        return Err("the health answer has no grpc-status".into());
    };
    match Code::from_bytes(status.as_bytes()) {
        Code::Ok => {
            let message = message.ok_or("the health answer holds no message")?;
            let response = HealthCheckResponse::decode(message)
                .map_err(|e| format!("the health answer cannot be decoded: {e}"))?;
            Ok(HealthAnswer::Status(response.status()))
        }
        Code::Unimplemented => Ok(HealthAnswer::Unimplemented),
        code => {
            let text = headers.get("grpc-message").map_or(String::new(), |m| {
                let text = percent_encoding::percent_decode(m.as_bytes()).decode_utf8_lossy();
                format!(": {text}")
            });
            Err(format!("the health check failed with {code:?}{text}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static(code));
        headers
    }

    #[test]
    fn answers() {
        let serving = HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        };
        let message = Bytes::from(serving.encode_to_vec());
        assert_eq!(
            answer(&status("0"), Some(message)),
            Ok(HealthAnswer::Status(ServingStatus::Serving))
        );
        assert!(answer(&status("0"), None).is_err(), "OK without a message");
        assert_eq!(answer(&status("12"), None), Ok(HealthAnswer::Unimplemented));
        let mut not_found = status("5");
        not_found.insert(
            "grpc-message",
            HeaderValue::from_static("unknown%20service"),
        );
        let err = answer(&not_found, None).unwrap_err();
        assert_eq!(
            err,
            "the health check failed with NotFound: unknown service"
        );
        assert!(answer(&HeaderMap::new(), None).is_err());
    }
}

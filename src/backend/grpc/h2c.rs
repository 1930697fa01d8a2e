//! gRPC over cleartext HTTP/2 (`http://` backends) straight on the `h2` crate.
//!
//! The calling task encodes the request, writes it and reads the reply itself: no buffer
//! task, dispatch channel or per-call spawned task sits in between. tonic's `Channel` has
//! all three (tower `Buffer` worker, hyper's client dispatch, one spawned task per call);
//! their wake-ups were most of the gateway's CPU per unary call (see benches/README.md).
//! One connection is shared by all calls; it is made on first use, so a backend that is
//! down at start is not fatal, and made again after it fails. TLS backends keep tonic.
//!
//! Wire rules (gRPC over HTTP/2): `POST /lf.a2a.v1.A2AService/{Method}`, `content-type:
//! application/grpc`, `te: trailers`, messages framed as 1 flag byte (0: not compressed),
//! 4 length bytes and the protobuf; the status comes in the trailers, or in the headers of
//! a trailers-only reply. The error mapping is the one of `grpc.rs`.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::StreamExt;
use h2::client::SendRequest;
use h2::RecvStream;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use prost::Message as _;
use tokio::net::TcpStream;
use tonic::{Code, Status};

use super::status_to_error;
use crate::backend::{Answer, Call, EventStream};
use crate::proto::*;
use crate::protocol::error::{A2aError, GatewayFault};
use crate::protocol::ops::{with_operations, Op, Reply, Request};
use crate::protocol::params::{response_extensions, SUPPORTED_VERSION, VERSION};

/// Largest message accepted from or sent to the backend.
const MAX_MESSAGE: usize = 64 << 20;
/// HTTP/2 windows, as hyper's client sets them (h2's 64 KiB default throttles streams).
const STREAM_WINDOW: u32 = 2 << 20;
const CONNECTION_WINDOW: u32 = 5 << 20;
/// Keepalive pings on the connection, idle or not.
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(10);
const SERVICE: &str = "/lf.a2a.v1.A2AService/";

/// The shared connection to one backend.
pub struct H2c {
    authority: String,
    /// The request URI of each operation, in `Op::ALL` order.
    uris: Vec<Uri>,
    connect_timeout: Duration,
    /// The live connection and its generation.
    current: Mutex<Option<(u64, SendRequest<Bytes>)>>,
    /// Serializes connecting, so a burst of calls makes one connection.
    connecting: tokio::sync::Mutex<u64>,
}

impl std::fmt::Debug for H2c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2c")
            .field("authority", &self.authority)
            .finish()
    }
}

impl H2c {
    /// A backend at `uri`, which must be `http://host:port`.
    pub fn new(uri: &Uri, connect_timeout: Duration) -> Option<Arc<H2c>> {
        let authority = uri.authority()?;
        let port = authority.port_u16().unwrap_or(80);
        let base = format!("http://{}:{port}", authority.host());
        let uris = Op::ALL
            .iter()
            .map(|op| format!("{base}{SERVICE}{}", op.name()).parse().ok())
            .collect::<Option<Vec<Uri>>>()?;
        Some(Arc::new(H2c {
            authority: format!("{}:{port}", authority.host()),
            uris,
            connect_timeout,
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(0),
        }))
    }

    fn live(&self) -> Option<(u64, SendRequest<Bytes>)> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn forget(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            *current = None;
        }
    }

    /// The live connection, or a new one.
    async fn sender(self: &Arc<Self>) -> Result<(u64, SendRequest<Bytes>), A2aError> {
        if let Some(live) = self.live() {
            return Ok(live);
        }
        let mut generation = self.connecting.lock().await;
        if let Some(live) = self.live() {
            return Ok(live);
        }
        *generation += 1;
        let sender = self.connect(*generation).await?;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((*generation, sender.clone()));
        Ok((*generation, sender))
    }

    async fn connect(self: &Arc<Self>, generation: u64) -> Result<SendRequest<Bytes>, A2aError> {
        let unreachable = |why: String| {
            tracing::warn!(backend = %self.authority, "backend call failed: backend unreachable: {why}");
            A2aError::gateway(
                GatewayFault::BackendUnavailable,
                format!("backend unreachable: {why}"),
            )
        };
        let tcp =
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.authority))
                .await
            {
                Ok(Ok(tcp)) => tcp,
                Ok(Err(e)) => return Err(unreachable(e.to_string())),
                Err(_) => {
                    return Err(unreachable(format!(
                        "connect timed out after {:?}",
                        self.connect_timeout
                    )))
                }
            };
        let _ = tcp.set_nodelay(true);
        let handshake = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_send_buffer_size(1 << 20)
            .handshake::<_, Bytes>(tcp);
        let (sender, mut connection) =
            match tokio::time::timeout(self.connect_timeout, handshake).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => return Err(unreachable(e.to_string())),
                Err(_) => return Err(unreachable("HTTP/2 handshake timed out".into())),
            };
        let pings = connection.ping_pong();
        let shared: Weak<H2c> = Arc::downgrade(self);
        tokio::spawn(async move {
            let (dead_tx, dead_rx) = tokio::sync::oneshot::channel::<()>();
            if let Some(mut pings) = pings {
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(PING_INTERVAL).await;
                        let pong =
                            tokio::time::timeout(PING_TIMEOUT, pings.ping(h2::Ping::opaque()));
                        match pong.await {
                            Ok(Ok(_)) => {}
                            Ok(Err(_)) => return,
                            Err(_) => {
                                let _ = dead_tx.send(());
                                return;
                            }
                        }
                    }
                });
            }
            tokio::select! {
                result = &mut connection => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "backend connection closed");
                    }
                }
                Ok(()) = dead_rx => tracing::warn!("backend keepalive ping timed out; reconnecting"),
            }
            if let Some(shared) = shared.upgrade() {
                shared.forget(generation);
            }
        });
        Ok(sender)
    }

    /// Sends the call; returns the response head and body once the headers are in.
    async fn start(self: &Arc<Self>, call: Call) -> Result<(HeaderMap, RecvStream), A2aError> {
        let op = call.request.op();
        let head = self.head(op, &call);
        let mut body = BytesMut::with_capacity(5 + request_len(&call.request));
        encode_request(&call.request, &mut body)?;
        let body = body.freeze();
        // A connection that died while idle fails before anything is sent: retry once.
        let mut attempt = 0;
        let (response, generation) = loop {
            attempt += 1;
            let (generation, sender) = self.sender().await?;
            let sent = async {
                let mut sender = sender.ready().await?;
                let (response, mut stream) = sender.send_request(head.clone(), false)?;
                stream.send_data(body.clone(), true)?;
                Ok::<_, h2::Error>(response)
            };
            match sent.await {
                Ok(response) => break (response, generation),
                Err(e) => {
                    self.forget(generation);
                    if attempt >= 2 {
                        return Err(lost(&e));
                    }
                }
            }
        };
        let response = response.await.map_err(|e| {
            if e.is_io() || e.is_go_away() {
                self.forget(generation);
            }
            lost(&e)
        })?;
        let (parts, body) = response.into_parts();
        // A trailers-only reply carries its status in the headers.
        if let Some(status) = Status::from_header_map(&parts.headers) {
            if status.code() != Code::Ok {
                return Err(status_to_error(&status));
            }
        }
        if parts.status != http::StatusCode::OK {
            let code = code_from_http(parts.status);
            let status = Status::new(
                code,
                format!(
                    "grpc-status header missing, mapped from HTTP status code {}",
                    parts.status.as_u16()
                ),
            );
            return Err(status_to_error(&status));
        }
        Ok((parts.headers, body))
    }

    fn head(&self, op: Op, call: &Call) -> http::Request<()> {
        let index = Op::ALL.iter().position(|o| *o == op).unwrap_or(0);
        let mut request = http::Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uris[index].clone();
        let headers = request.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
        headers.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION"))),
        );
        headers.insert(VERSION, HeaderValue::from_static(SUPPORTED_VERSION));
        for (name, value) in &call.forwarded {
            if metadata_ok(name, value) {
                headers.append(name.clone(), value.clone());
            } else {
                tracing::debug!(header = %name, "header not representable as gRPC metadata");
            }
        }
        if let Some(timeout) = call.timeout {
            if let Ok(value) = HeaderValue::try_from(grpc_timeout(timeout)) {
                headers.insert("grpc-timeout", value);
            }
        }
        request
    }

    /// Performs a unary call.
    pub async fn unary(self: Arc<Self>, call: Call) -> Result<Answer<Reply>, A2aError> {
        let op = call.request.op();
        if op.is_streaming() {
            return Err(crate::backend::not_of_kind(call.request.op(), "unary"));
        }
        let (headers, mut body) = self.start(call).await?;
        let mut message = Frames::default();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| lost(&e))?;
            let _ = body.flow_control().release_capacity(chunk.len());
            message.push(chunk);
        }
        let trailers = body.trailers().await.map_err(|e| lost(&e))?;
        check_trailers(trailers.as_ref())?;
        let frame = message
            .next()?
            .ok_or_else(|| bad_response("the reply holds no message".into()))?;
        let value = decode_reply(op, frame)
            .map_err(|e| bad_response(format!("reply cannot be decoded: {e}")))?;
        Ok(Answer {
            extensions: response_extensions(&headers),
            value,
        })
    }

    /// Starts a server-streaming call.
    pub async fn stream(self: Arc<Self>, call: Call) -> Result<Answer<EventStream>, A2aError> {
        if !call.request.op().is_streaming() {
            return Err(crate::backend::not_of_kind(call.request.op(), "streaming"));
        }
        let (headers, body) = self.start(call).await?;
        let state = (body, Frames::default(), false);
        let events = futures::stream::unfold(state, |(mut body, mut frames, done)| async move {
            if done {
                return None;
            }
            loop {
                match frames.next() {
                    Ok(Some(frame)) => {
                        let event = StreamResponse::decode(frame).map_err(|e| {
                            bad_response(format!("stream event cannot be decoded: {e}"))
                        });
                        let done = event.is_err();
                        return Some((event, (body, frames, done)));
                    }
                    Ok(None) => {}
                    Err(err) => return Some((Err(err), (body, frames, true))),
                }
                match body.data().await {
                    Some(Ok(chunk)) => {
                        let _ = body.flow_control().release_capacity(chunk.len());
                        frames.push(chunk);
                    }
                    Some(Err(e)) => return Some((Err(lost(&e)), (body, frames, true))),
                    None => {
                        let end = match body.trailers().await {
                            Ok(trailers) => check_trailers(trailers.as_ref()),
                            Err(e) => Err(lost(&e)),
                        };
                        let end = end.and_then(|()| match frames.is_empty() {
                            true => Ok(()),
                            false => Err(bad_response("stream ends inside a message".into())),
                        });
                        return end.err().map(|err| (Err(err), (body, frames, true)));
                    }
                }
            }
        });
        Ok(Answer {
            extensions: response_extensions(&headers),
            value: events.boxed(),
        })
    }
}

/// Received bytes, cut into gRPC messages.
#[derive(Default)]
struct Frames {
    buf: BytesMut,
    /// A chunk not yet copied into `buf` (the common case: one chunk, one message).
    whole: Option<Bytes>,
}

impl Frames {
    fn push(&mut self, chunk: Bytes) {
        if self.buf.is_empty() && self.whole.is_none() {
            self.whole = Some(chunk);
            return;
        }
        if let Some(whole) = self.whole.take() {
            self.buf.extend_from_slice(&whole);
        }
        self.buf.extend_from_slice(&chunk);
    }

    fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.whole.as_ref().is_none_or(Bytes::is_empty)
    }

    /// The next complete message, if one is buffered.
    fn next(&mut self) -> Result<Option<Bytes>, A2aError> {
        if let Some(whole) = self.whole.as_mut() {
            match frame_len(whole)? {
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
        match frame_len(&self.buf)? {
            Some(len) if self.buf.len() >= 5 + len => {
                self.buf.advance(5);
                Ok(Some(self.buf.split_to(len).freeze()))
            }
            _ => Ok(None),
        }
    }
}

/// The message length of the frame at the start of `buf`, once its header is in.
fn frame_len(buf: &[u8]) -> Result<Option<usize>, A2aError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    if buf[0] != 0 {
        return Err(bad_response(
            "compressed message, but no compression was offered".into(),
        ));
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > MAX_MESSAGE {
        return Err(bad_response(format!(
            "message of {len} bytes exceeds the limit of {MAX_MESSAGE}"
        )));
    }
    Ok(Some(len))
}

fn check_trailers(trailers: Option<&HeaderMap>) -> Result<(), A2aError> {
    let status = trailers
        .and_then(Status::from_header_map)
        .unwrap_or_else(|| {
            Status::new(
                Code::Unknown,
                "the backend's reply ended without a grpc-status",
            )
        });
    if status.code() == Code::Ok {
        Ok(())
    } else {
        Err(status_to_error(&status))
    }
}

/// As the gRPC spec maps HTTP statuses of replies without `grpc-status`.
fn code_from_http(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

fn lost(e: &h2::Error) -> A2aError {
    tracing::warn!(error = %e, "backend call failed: connection to backend lost");
    A2aError::gateway(
        GatewayFault::BackendConnectionReset,
        format!("connection to backend lost: {e}"),
    )
}

fn bad_response(why: String) -> A2aError {
    A2aError::gateway(GatewayFault::BackendBadResponse, why)
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

macro_rules! h2c_codec {
    (
        unary { $( $u:ident : $urpc:ident ($ureq:ty) -> $uresp:ty, $um:ident $upath:literal; )* }
        stream { $( $s:ident : $srpc:ident ($sreq:ty), $sm:ident $spath:literal; )* }
    ) => {
        fn request_len(request: &Request) -> usize {
            match request {
                $( Request::$u(m) => m.encoded_len(), )*
                $( Request::$s(m) => m.encoded_len(), )*
            }
        }

        /// Appends the request as one gRPC message frame.
        fn encode_request(request: &Request, out: &mut BytesMut) -> Result<(), A2aError> {
            let len = request_len(request);
            if len > MAX_MESSAGE {
                return Err(A2aError::with_message(
                    crate::protocol::error::ErrorKind::InvalidRequest,
                    format!("request of {len} bytes exceeds the limit of {MAX_MESSAGE}"),
                ));
            }
            out.put_u8(0);
            out.put_u32(len as u32);
            // The buffer grows as needed, so encoding cannot fail.
            let _ = match request {
                $( Request::$u(m) => m.encode(out), )*
                $( Request::$s(m) => m.encode(out), )*
            };
            Ok(())
        }

        fn decode_reply(op: Op, message: Bytes) -> Result<Reply, String> {
            match op {
                $( Op::$u => <$uresp>::decode(message).map(Reply::$u).map_err(|e| e.to_string()), )*
                $( Op::$s => Err(concat!(stringify!($s), " is a stream").to_owned()), )*
            }
        }
    };
}

with_operations!(h2c_codec);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_fit_eight_digits() {
        assert_eq!(grpc_timeout(Duration::from_millis(50)), "50000000n");
        assert_eq!(grpc_timeout(Duration::from_millis(500)), "500000u");
        assert_eq!(grpc_timeout(Duration::from_secs(7)), "7000000u");
        assert_eq!(grpc_timeout(Duration::from_secs(30)), "30000000u");
        assert_eq!(grpc_timeout(Duration::from_secs(3600)), "3600000m");
    }

    #[test]
    fn frames_split_and_join() {
        let mut frames = Frames::default();
        let mut wire = BytesMut::new();
        for text in [&b"ab"[..], b"", b"cde"] {
            wire.put_u8(0);
            wire.put_u32(text.len() as u32);
            wire.extend_from_slice(text);
        }
        let wire = wire.freeze();
        frames.push(wire.slice(..4));
        assert_eq!(frames.next().unwrap(), None);
        frames.push(wire.slice(4..));
        assert_eq!(frames.next().unwrap().as_deref(), Some(&b"ab"[..]));
        assert_eq!(frames.next().unwrap().as_deref(), Some(&b""[..]));
        assert_eq!(frames.next().unwrap().as_deref(), Some(&b"cde"[..]));
        assert_eq!(frames.next().unwrap(), None);
        assert!(frames.is_empty());
        frames.push(Bytes::from_static(&[1, 0, 0, 0, 0]));
        assert!(frames.next().is_err());
    }
}

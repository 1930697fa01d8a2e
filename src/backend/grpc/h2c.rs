//! gRPC over cleartext HTTP/2 (`http://` backends) on the gateway's own HTTP/2 client
//! (`h2c/wire.rs`).
//!
//! The calling task encodes the request, queues it and reads the reply itself: no buffer
//! task, dispatch channel or per-call spawned task sits in between (tonic's `Channel` has
//! all three), and the request head is mostly bytes computed once per operation. One
//! connection is shared by the calls of a worker; it is made on first use, so a backend
//! that is down at start is not fatal, and made again once it fails or the server sends
//! GOAWAY. TLS backends keep tonic.
//!
//! Wire rules (gRPC over HTTP/2): `POST /lf.a2a.v1.A2AService/{Method}`, `content-type:
//! application/grpc`, `te: trailers`, messages framed as 1 flag byte (0: not compressed),
//! 4 length bytes and the protobuf; the status comes in the trailers, or in the headers of
//! a trailers-only reply. The error mapping is the one of `grpc.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue};
use prost::Message as _;
use tokio::net::TcpStream;
use tonic::{Code, Status};

use super::status_to_error;
use crate::backend::{Answer, Call, EventStream};
use crate::proto::*;
use crate::protocol::error::{A2aError, GatewayFault};
use crate::protocol::ops::{with_operations, Op, Reply, Request};
use crate::protocol::params::{response_extensions, SUPPORTED_VERSION, VERSION};

mod wire;

use wire::{hpack, Connection};

/// Largest message accepted from or sent to the backend.
const MAX_MESSAGE: usize = 64 << 20;
/// HTTP/2 windows, as hyper's client sets them (the 64 KiB default throttles streams).
const STREAM_WINDOW: u32 = 2 << 20;
const CONNECTION_WINDOW: u32 = 5 << 20;
const SERVICE: &str = "/lf.a2a.v1.A2AService/";

/// The shared connection to one backend.
pub struct H2c {
    authority: String,
    /// The constant part of each operation's request head (an HPACK block), indexed by
    /// `Op as usize` (`Op::ALL` order).
    heads: Vec<Vec<u8>>,
    connect_timeout: Duration,
    config: wire::Config,
    current: Mutex<Option<Connection>>,
    /// Serializes connecting, so a burst of calls makes one connection.
    connecting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for H2c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2c")
            .field("authority", &self.authority)
            .finish()
    }
}

impl H2c {
    /// A backend at `uri`, which must be `http://host:port`, pinged every `ping_interval`.
    pub fn new(
        uri: &http::Uri,
        connect_timeout: Duration,
        ping_interval: Duration,
        ping_timeout: Duration,
    ) -> Option<Arc<H2c>> {
        let authority = uri.authority()?;
        let port = authority.port_u16().unwrap_or(80);
        let authority = format!("{}:{port}", authority.host());
        let heads = Op::ALL
            .iter()
            .map(|op| {
                let mut head = Vec::with_capacity(128);
                hpack::indexed(&mut head, hpack::METHOD_POST);
                hpack::indexed(&mut head, hpack::SCHEME_HTTP);
                let path = format!("{SERVICE}{}", op.name());
                hpack::literal_indexed_name(&mut head, hpack::PATH, path.as_bytes());
                hpack::literal_indexed_name(&mut head, hpack::AUTHORITY, authority.as_bytes());
                hpack::literal_indexed_name(&mut head, hpack::CONTENT_TYPE, b"application/grpc");
                hpack::literal(&mut head, b"te", b"trailers");
                let agent = concat!("a2a-gateway/", env!("CARGO_PKG_VERSION"));
                hpack::literal_indexed_name(&mut head, hpack::USER_AGENT, agent.as_bytes());
                hpack::literal(&mut head, VERSION.as_bytes(), SUPPORTED_VERSION.as_bytes());
                head
            })
            .collect();
        Some(Arc::new(H2c {
            authority,
            heads,
            connect_timeout,
            config: wire::Config {
                stream_window: STREAM_WINDOW,
                connection_window: CONNECTION_WINDOW,
                ping_interval,
                ping_timeout,
            },
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }))
    }

    fn live(&self) -> Option<Connection> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(Connection::is_open)
    }

    /// The live connection, or a new one.
    async fn connection(&self) -> Result<Connection, A2aError> {
        if let Some(live) = self.live() {
            return Ok(live);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(live) = self.live() {
            return Ok(live);
        }
        let connection = self.connect().await?;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(connection.clone());
        Ok(connection)
    }

    async fn connect(&self) -> Result<Connection, A2aError> {
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
        Ok(Connection::start(tcp, self.config))
    }

    /// Sends the call; returns the response headers and stream once the head is in.
    async fn start(&self, call: Call) -> Result<(HeaderMap, wire::Stream), A2aError> {
        let op = call.request.op();
        let head = self.head(op, &call);
        let mut body = BytesMut::with_capacity(5 + request_len(&call.request));
        encode_request(&call.request, &mut body)?;
        let body = body.freeze();
        // A stream the server never processed (the connection was already gone, or a
        // GOAWAY or REFUSED_STREAM said so) is sent once more, on a fresh connection.
        let mut attempt = 0;
        let (response, stream) = loop {
            attempt += 1;
            let connection = self.connection().await?;
            let sent = async {
                let mut stream = connection.send(&head, body.clone()).await?;
                Ok::<_, wire::Error>((stream.head().await?, stream))
            };
            match sent.await {
                Ok(pair) => break pair,
                Err(wire::Error::Refused) if attempt < 2 => continue,
                Err(e) => return Err(lost(&e)),
            }
        };
        // A trailers-only reply carries its status in the headers.
        if let Some(status) = Status::from_header_map(&response.headers) {
            if status.code() != Code::Ok {
                return Err(status_to_error(&status));
            }
        }
        if response.status != http::StatusCode::OK {
            let code = code_from_http(response.status);
            let status = Status::new(
                code,
                format!(
                    "grpc-status header missing, mapped from HTTP status code {}",
                    response.status.as_u16()
                ),
            );
            return Err(status_to_error(&status));
        }
        Ok((response.headers, stream))
    }

    /// The request head: the operation's constant part, the deadline, forwarded headers.
    fn head(&self, op: Op, call: &Call) -> Vec<u8> {
        let constant = &self.heads[op as usize];
        let mut head = Vec::with_capacity(constant.len() + 64);
        head.extend_from_slice(constant);
        if let Some(timeout) = call.timeout {
            hpack::literal(&mut head, b"grpc-timeout", grpc_timeout(timeout).as_bytes());
        }
        for (name, value) in &call.forwarded {
            if metadata_ok(name, value) {
                hpack::literal(&mut head, name.as_str().as_bytes(), value.as_bytes());
            } else {
                tracing::debug!(header = %name, "header not representable as gRPC metadata");
            }
        }
        head
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
            message.push(chunk.map_err(|e| lost(&e))?);
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
                    Some(Ok(chunk)) => frames.push(chunk),
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

fn lost(e: &wire::Error) -> A2aError {
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

//! The gRPC front's message coding for tonic's framing (`tonic::codec::Streaming` reads a
//! call's message, `tonic::codec::EncodeBody` writes the answer): a call's message decoded
//! straight from tonic's buffer into the operation table's typed request
//! (`Op::decode_request`), its answer encoded as protobuf: a unary reply arrives encoded
//! already (`invoke` wrote it), a stream's events are encoded here.

use axum::body::HttpBody;
use bytes::BufMut;
use prost::Message as _;
use tonic::codec::{
    BufferSettings, DecodeBuf, Decoder, EncodeBuf, Encoder, Streaming, HEADER_SIZE,
};
use tonic::Status;

use crate::proto::StreamResponse;
use crate::protocol::ops::{Op, Request};

/// Where tonic's write buffer for a stream's events starts: most events are a few hundred
/// bytes (a larger one grows it).
const EVENT_BUFFER: usize = 1024;

/// What the front sends: a unary reply's message, or one event of a stream.
pub(crate) enum Out {
    Reply(Vec<u8>),
    Event(Box<StreamResponse>),
}

/// Writes `Out`s, into a buffer of `capacity` bytes to start with.
pub(crate) struct OutEncoder {
    capacity: usize,
}

impl OutEncoder {
    /// The encoder of a unary reply: its buffer holds exactly the framed reply.
    pub(crate) fn reply(reply: &[u8]) -> Self {
        OutEncoder {
            capacity: HEADER_SIZE + reply.len(),
        }
    }

    /// The encoder of a stream's events.
    pub(crate) fn events() -> Self {
        OutEncoder {
            capacity: EVENT_BUFFER,
        }
    }
}

impl Encoder for OutEncoder {
    type Item = Out;
    type Error = Status;

    fn encode(&mut self, item: Out, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        match item {
            Out::Reply(bytes) => dst.put_slice(&bytes),
            Out::Event(event) => event
                .encode(dst)
                .map_err(|e| Status::internal(format!("an event cannot be encoded: {e}")))?,
        }
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(self.capacity, 32 << 10)
    }
}

/// Reads the call's messages into typed requests of the operation at `OP` in `Op::ALL`.
/// Zero-sized: tonic boxes a call's decoder, and a box of nothing allocates nothing (bytes
/// per call, tests/it/cost_budget.rs). A message that is not such a request is
/// INVALID_ARGUMENT with the reason, which `tonic`'s framing never gives.
struct RequestDecoder<const OP: usize>;

impl<const OP: usize> Decoder for RequestDecoder<OP> {
    type Item = Box<Request>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Box<Request>>, Status> {
        let op = Op::ALL[OP];
        match op.decode_request(src) {
            Ok(request) => Ok(Some(Box::new(request))),
            Err(e) => Err(Status::invalid_argument(format!(
                "the message is not a {} request: {e}",
                op.name()
            ))),
        }
    }

    /// No buffer before the first bytes arrive: the first frame sizes it, and a message's
    /// length prefix reserves the rest (most A2A messages are a few hundred bytes; tonic's
    /// default of 8 KiB was most of a call's allocated bytes, tests/it/cost_budget.rs).
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(0, 32 << 10)
    }
}

/// The messages of `body` as `op`'s requests, each at most `max` bytes (tonic's framing:
/// one longer is OUT_OF_RANGE, from its length prefix).
pub(crate) fn requests<B>(op: Op, body: B, max: usize) -> Streaming<Box<Request>>
where
    B: HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    /// The decoder of the operation at the index `op as usize`, one arm per index.
    macro_rules! by_index {
        ($($index:literal)*) => {
            match op as usize {
                $($index => Streaming::new_request(RequestDecoder::<$index>, body, None, Some(max)),)*
                _ => unreachable!("Op::ALL has 11 operations"),
            }
        };
    }
    const _: () = assert!(Op::ALL.len() == 11, "one arm per operation");
    by_index!(0 1 2 3 4 5 6 7 8 9 10)
}

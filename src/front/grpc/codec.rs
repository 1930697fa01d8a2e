//! The gRPC front's message coding for tonic's framing (`tonic::codec::Streaming` reads a
//! call's message, `tonic::codec::EncodeBody` writes the answer): a call's message decoded
//! straight from tonic's buffer into the operation table's typed request
//! (`Op::decode_request`), its answer encoded as protobuf: a unary reply arrives encoded
//! already (`invoke` wrote it), a stream's events are encoded here.

use bytes::BufMut;
use prost::Message as _;
use tonic::codec::{BufferSettings, DecodeBuf, Decoder, EncodeBuf, Encoder, HEADER_SIZE};
use tonic::Status;

use crate::front::grpc::status;
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, Profile};
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

/// Reads the call's one message into its typed request; a message that is not one is
/// INVALID_PARAMS in `profile`.
pub(crate) struct RequestDecoder {
    op: Op,
    profile: Profile,
}

impl RequestDecoder {
    pub(crate) fn new(op: Op, profile: Profile) -> Self {
        RequestDecoder { op, profile }
    }
}

impl Decoder for RequestDecoder {
    type Item = Box<Request>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Box<Request>>, Status> {
        match self.op.decode_request(src) {
            Ok(request) => Ok(Some(Box::new(request))),
            Err(e) => {
                let why = format!("the message is not a {} request: {e}", self.op.name());
                Err(status::of_error(
                    &A2aError::invalid_params("", &why),
                    self.profile,
                ))
            }
        }
    }

    /// No buffer before the first bytes arrive: the first frame sizes it, and a message's
    /// length prefix reserves the rest (most A2A messages are a few hundred bytes; tonic's
    /// default of 8 KiB was most of a call's allocated bytes, tests/it/cost_budget.rs).
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(0, 32 << 10)
    }
}

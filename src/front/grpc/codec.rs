//! The gRPC front's codec for tonic: a call's message decoded straight into the operation
//! table's typed request (`Op::decode_request`), its answer encoded as protobuf: a unary
//! reply arrives encoded already (`invoke` wrote it), a stream's events are encoded here.

use bytes::{Buf, BufMut};
use prost::Message as _;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use crate::front::grpc::status;
use crate::proto::StreamResponse;
use crate::protocol::error::{A2aError, Profile};
use crate::protocol::ops::{Op, Request};

/// The buffers tonic starts each call's reading and writing with: most A2A messages are a
/// few hundred bytes, and tonic's default (8 KiB each way) was most of a call's allocated
/// bytes (tests/it/cost_budget.rs); a larger message grows its buffer.
fn buffer() -> BufferSettings {
    BufferSettings::new(1024, 32 << 10)
}

/// What the front sends: a unary reply's message, or one event of a stream.
pub(crate) enum Out {
    Reply(Vec<u8>),
    Event(Box<StreamResponse>),
}

/// The codec of one call of `op`, whose decoding errors are statuses in `profile`.
pub(crate) struct TypedCodec {
    op: Op,
    profile: Profile,
}

impl TypedCodec {
    pub(crate) fn new(op: Op, profile: Profile) -> Self {
        TypedCodec { op, profile }
    }
}

impl Codec for TypedCodec {
    type Encode = Out;
    type Decode = Box<Request>;
    type Encoder = OutEncoder;
    type Decoder = RequestDecoder;

    fn encoder(&mut self) -> OutEncoder {
        OutEncoder
    }

    fn decoder(&mut self) -> RequestDecoder {
        RequestDecoder {
            op: self.op,
            profile: self.profile,
        }
    }
}

/// Writes `Out`s.
pub(crate) struct OutEncoder;

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
        buffer()
    }
}

/// Reads the call's one message into its typed request.
pub(crate) struct RequestDecoder {
    op: Op,
    profile: Profile,
}

impl Decoder for RequestDecoder {
    type Item = Box<Request>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Box<Request>>, Status> {
        let message = src.copy_to_bytes(src.remaining());
        match self.op.decode_request(message) {
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

    fn buffer_settings(&self) -> BufferSettings {
        buffer()
    }
}

//! HTTP/2 frames (RFC 9113 §4.1, §6) and HPACK representations (RFC 7541 §5, §6) written by
//! hand, so the hostile server can send exactly the bytes a case needs, valid or not.

use prost::Message as _;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

pub const REFUSED_STREAM: u32 = 0x7;

/// The smallest MAX_FRAME_SIZE a peer may advertise; header blocks are cut to it.
pub const MIN_FRAME: usize = 16_384;

/// A frame header: 24-bit length, type, flags, 31-bit stream id.
pub fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + payload.len());
    head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = params
        .iter()
        .flat_map(|(id, value)| id.to_be_bytes().into_iter().chain(value.to_be_bytes()))
        .collect();
    frame(SETTINGS, 0, 0, &payload)
}

pub fn settings_ack() -> Vec<u8> {
    frame(SETTINGS, ACK, 0, &[])
}

pub fn ping(flags: u8, payload: &[u8]) -> Vec<u8> {
    frame(PING, flags, 0, payload)
}

pub fn goaway(last_stream: u32, code: u32) -> Vec<u8> {
    let mut payload = last_stream.to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    frame(GOAWAY, 0, 0, &payload)
}

pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

pub fn data(stream: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    frame(
        DATA,
        if end_stream { END_STREAM } else { 0 },
        stream,
        payload,
    )
}

/// A whole header block: one HEADERS frame, then CONTINUATION frames of at most
/// `MIN_FRAME` bytes; END_HEADERS on the last.
pub fn headers(stream: u32, block: &[u8], end_stream: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + 9 * (1 + block.len() / MIN_FRAME));
    let mut chunks = block.chunks(MIN_FRAME).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if chunks.peek().is_none() {
        head(&mut out, 0, kind, flags | END_HEADERS, stream);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        head(
            &mut out,
            chunk.len(),
            kind,
            flags | if last { END_HEADERS } else { 0 },
            stream,
        );
        out.extend_from_slice(chunk);
        kind = CONTINUATION;
        flags = 0;
    }
    out
}

/// One gRPC message: compressed flag 0, 4-byte length, the bytes.
pub fn grpc_message(msg: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    out
}

/// HPACK representations, never Huffman-coded.
pub mod hpack {
    /// `:status: 200` in the static table.
    pub const STATUS_200: usize = 8;
    /// The first dynamic table index.
    pub const FIRST_DYNAMIC: usize = 62;

    /// An integer with an N-bit prefix (RFC 7541 §5.1); `first` holds the pattern bits.
    pub fn int(out: &mut Vec<u8>, prefix_bits: u8, first: u8, value: usize) {
        let max = (1usize << prefix_bits) - 1;
        if value < max {
            out.push(first | value as u8);
            return;
        }
        out.push(first | max as u8);
        let mut rest = value - max;
        while rest >= 128 {
            out.push((rest % 128) as u8 | 0x80);
            rest /= 128;
        }
        out.push(rest as u8);
    }

    pub fn string(out: &mut Vec<u8>, s: &[u8]) {
        int(out, 7, 0, s.len());
        out.extend_from_slice(s);
    }

    /// Indexed header field (§6.1).
    pub fn indexed(out: &mut Vec<u8>, index: usize) {
        int(out, 7, 0x80, index);
    }

    /// Literal without indexing, new name (§6.2.2).
    pub fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        out.push(0);
        string(out, name);
        string(out, value);
    }

    /// Literal with incremental indexing, new name (§6.2.1): enters the dynamic table.
    pub fn literal_indexed(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        out.push(0x40);
        string(out, name);
        string(out, value);
    }

    /// Dynamic table size update (§6.3).
    pub fn size_update(out: &mut Vec<u8>, size: usize) {
        int(out, 5, 0x20, size);
    }

    /// How a header field of a block is represented (§6), strings left undecoded.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Representation {
        Indexed,
        IncrementalIndexing,
        WithoutIndexing,
        NeverIndexed,
        SizeUpdate,
    }

    /// The representations of a header block, in order; `None` if it is malformed.
    pub fn representations(block: &[u8]) -> Option<Vec<Representation>> {
        let mut at = 0;
        let mut out = Vec::new();
        while at < block.len() {
            let first = block[at];
            let (kind, prefix_bits) = match first {
                b if b & 0x80 != 0 => (Representation::Indexed, 7),
                b if b & 0xc0 == 0x40 => (Representation::IncrementalIndexing, 6),
                b if b & 0xe0 == 0x20 => (Representation::SizeUpdate, 5),
                b if b & 0xf0 == 0x10 => (Representation::NeverIndexed, 4),
                _ => (Representation::WithoutIndexing, 4),
            };
            let name_index = read_int(block, &mut at, prefix_bits)?;
            if matches!(kind, Representation::Indexed | Representation::SizeUpdate) {
                out.push(kind);
                continue;
            }
            if name_index == 0 {
                skip_string(block, &mut at)?;
            }
            skip_string(block, &mut at)?;
            out.push(kind);
        }
        Some(out)
    }

    /// Reads an N-bit prefix integer (§5.1) at `at`, moving past it.
    fn read_int(block: &[u8], at: &mut usize, prefix_bits: u8) -> Option<usize> {
        let max = (1usize << prefix_bits) - 1;
        let mut value = usize::from(*block.get(*at)?) & max;
        *at += 1;
        if value < max {
            return Some(value);
        }
        let mut shift = 0;
        loop {
            let byte = *block.get(*at)?;
            *at += 1;
            value += usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 || shift > 28 {
                return (byte & 0x80 == 0).then_some(value);
            }
        }
    }

    /// Moves past a string literal (§5.2), Huffman-coded or not.
    fn skip_string(block: &[u8], at: &mut usize) -> Option<()> {
        let len = read_int(block, at, 7)?;
        *at = at.checked_add(len).filter(|end| *end <= block.len())?;
        Some(())
    }
}

/// The header block of a gRPC response head: `:status: 200`, `content-type`.
pub fn response_head() -> Vec<u8> {
    let mut block = Vec::new();
    hpack::indexed(&mut block, hpack::STATUS_200);
    hpack::literal(&mut block, b"content-type", b"application/grpc");
    block
}

/// A header block of literal fields.
pub fn fields(list: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in list {
        hpack::literal(&mut block, name.as_bytes(), value.as_bytes());
    }
    block
}

/// A reply message that is both a valid `SendMessageResponse` and a valid
/// `StreamResponse` (field 2, `message`, in both).
pub fn reply_message() -> Vec<u8> {
    use a2a_gateway::proto::*;
    SendMessageResponse {
        payload: Some(send_message_response::Payload::Message(Message {
            message_id: "r-1".into(),
            role: Role::Agent as i32,
            parts: vec![Part {
                content: Some(part::Content::Text("ok".into())),
                ..Default::default()
            }],
            ..Default::default()
        })),
    }
    .encode_to_vec()
}

/// `reply_message` with a text of about `size` bytes.
pub fn big_message(size: usize) -> Vec<u8> {
    use a2a_gateway::proto::*;
    SendMessageResponse {
        payload: Some(send_message_response::Payload::Message(Message {
            message_id: "r-big".into(),
            role: Role::Agent as i32,
            parts: vec![Part {
                content: Some(part::Content::Text("x".repeat(size))),
                ..Default::default()
            }],
            ..Default::default()
        })),
    }
    .encode_to_vec()
}

/// A whole, well-formed unary reply on `stream`: head, one message, `grpc-status: 0`.
pub fn good_reply(stream: u32) -> Vec<u8> {
    let mut out = headers(stream, &response_head(), false);
    out.extend(data(stream, &grpc_message(&reply_message()), false));
    out.extend(headers(stream, &fields(&[("grpc-status", "0")]), true));
    out
}

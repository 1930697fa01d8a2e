//! The id codec of task affinity: the task and context ids clients see are the agent's
//! own ids behind a prefix naming the endpoint that owns them, authenticated with a key
//! every gateway replica shares, so any replica routes any id without shared state.
//!
//! Format: `base64url(tag ‖ mac) "." agent-id`, where `tag` is the endpoint's
//! `EndpointTag` (8 bytes) and `mac` the first 10 bytes of HMAC-SHA-256 over a version
//! label, the tag and the agent's id. The prefix is 24 characters plus the dot. The MAC
//! stops a client from sending a task id to an endpoint it did not come from (an agent
//! that trusts ids it issued never sees one it did not), and keeps clients from making
//! ids up: an id that does not verify is a task the gateway never returned (-32001).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::hmac;

use crate::backend::endpoints::EndpointTag;

/// The shortest key accepted: 128 bits.
pub const MIN_KEY_LEN: usize = 16;

const TAG_LEN: usize = 8;
const MAC_LEN: usize = 10;
/// `base64url` of `TAG_LEN + MAC_LEN` (18) bytes: 24 characters, no padding.
const PREFIX_LEN: usize = 24;
const SEPARATOR: u8 = b'.';
/// Bound into every MAC, so a later format never verifies under this one.
const VERSION: &[u8] = b"a2a-gateway task affinity v1\0";

/// Wraps and unwraps ids with the route's key.
pub struct IdCodec {
    key: hmac::Key,
}

impl std::fmt::Debug for IdCodec {
    /// The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdCodec")
    }
}

/// An id the gateway did not issue, or whose endpoint the route does not have.
#[derive(Debug, PartialEq, Eq)]
pub struct ForeignId;

impl IdCodec {
    /// A codec for `secret`; refused when shorter than `MIN_KEY_LEN` bytes.
    pub fn new(secret: &[u8]) -> Result<IdCodec, String> {
        if secret.len() < MIN_KEY_LEN {
            return Err(format!(
                "the affinity key has {} bytes; at least {MIN_KEY_LEN} are needed",
                secret.len()
            ));
        }
        Ok(IdCodec {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        })
    }

    fn mac(&self, tag: EndpointTag, id: &str) -> [u8; MAC_LEN] {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(VERSION);
        context.update(&tag.0);
        context.update(id.as_bytes());
        let mut mac = [0; MAC_LEN];
        mac.copy_from_slice(&context.sign().as_ref()[..MAC_LEN]);
        mac
    }

    /// The id clients see for the agent's `id` on the endpoint `tag`.
    pub fn wrap(&self, tag: EndpointTag, id: &str) -> String {
        let mut raw = [0; TAG_LEN + MAC_LEN];
        raw[..TAG_LEN].copy_from_slice(&tag.0);
        raw[TAG_LEN..].copy_from_slice(&self.mac(tag, id));
        let mut out = String::with_capacity(PREFIX_LEN + 1 + id.len());
        URL_SAFE_NO_PAD.encode_string(raw, &mut out);
        out.push(SEPARATOR as char);
        out.push_str(id);
        out
    }

    /// The endpoint and the agent's own id behind a client's `id`, if the gateway issued it.
    pub fn unwrap<'a>(&self, id: &'a str) -> Result<(EndpointTag, &'a str), ForeignId> {
        let bytes = id.as_bytes();
        if bytes.len() <= PREFIX_LEN || bytes[PREFIX_LEN] != SEPARATOR {
            return Err(ForeignId);
        }
        let mut raw = [0; TAG_LEN + MAC_LEN];
        let decoded = URL_SAFE_NO_PAD.decode_slice(&bytes[..PREFIX_LEN], &mut raw);
        if decoded != Ok(raw.len()) {
            return Err(ForeignId);
        }
        let mut tag = EndpointTag([0; TAG_LEN]);
        tag.0.copy_from_slice(&raw[..TAG_LEN]);
        let agent_id = &id[PREFIX_LEN + 1..];
        // Compared without an early exit, so timing does not tell how much of a MAC is right.
        let expected = self.mac(tag, agent_id);
        let differ = expected
            .iter()
            .zip(&raw[TAG_LEN..])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if differ != 0 {
            return Err(ForeignId);
        }
        Ok((tag, agent_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> IdCodec {
        IdCodec::new(b"0123456789abcdef-shared-key").unwrap()
    }

    #[test]
    fn wraps_and_unwraps() {
        let tag = EndpointTag::of("10.0.0.7:50051");
        for id in ["task-1", "a", "uuid-with.dots.and/slashes", "ünïcode"] {
            let wrapped = codec().wrap(tag, id);
            assert_eq!(wrapped.len(), PREFIX_LEN + 1 + id.len());
            assert_eq!(codec().unwrap(&wrapped), Ok((tag, id)));
        }
    }

    #[test]
    fn tampering_is_refused() {
        let tag = EndpointTag::of("10.0.0.7:50051");
        let wrapped = codec().wrap(tag, "task-1");
        // Every single-character change of the prefix, and of the agent's id.
        for at in (0..wrapped.len()).filter(|&i| i != PREFIX_LEN) {
            let mut bytes = wrapped.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(bytes).unwrap();
            assert_eq!(codec().unwrap(&tampered), Err(ForeignId), "{tampered}");
        }
        // The prefix moved onto another endpoint's tag, another key, plain ids.
        let other = codec().wrap(EndpointTag::of("10.0.0.8:50051"), "task-1");
        let spliced = format!("{}{}", &other[..PREFIX_LEN + 1], "task-2");
        assert_eq!(codec().unwrap(&spliced), Err(ForeignId));
        let stranger = IdCodec::new(b"another key, also long").unwrap();
        assert_eq!(stranger.unwrap(&wrapped), Err(ForeignId));
        for plain in [
            "",
            "task-1",
            &wrapped[..PREFIX_LEN],
            &wrapped[..PREFIX_LEN + 1],
        ] {
            assert_eq!(codec().unwrap(plain), Err(ForeignId), "{plain:?}");
        }
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(IdCodec::new(b"short").is_err());
        assert!(IdCodec::new(&[7; MIN_KEY_LEN]).is_ok());
    }
}

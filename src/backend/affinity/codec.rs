//! The id codec of task affinity: the task and context ids clients see are the agent's
//! own ids behind a prefix naming the endpoint that owns them, authenticated with a key
//! every gateway replica shares, so any replica routes any id without shared state.
//!
//! Everything is keyed by the route's key: HMAC-SHA-256 with `affinity-key` over a label
//! and the route's name, so two routes never share tags, MACs or page tokens.
//!
//! Format: `base64url(tag ‖ mac) "." agent-id`. `tag` (8 bytes) is HMAC-SHA-256 with the
//! route's key over the endpoint's label: only someone with the key can tell which pod
//! an id names. `mac` is the first 10 bytes of HMAC-SHA-256 with the route's key over a
//! version label, the tag and the agent's id. The prefix is 24 characters plus the dot.
//! The MAC stops a client from sending a task id to an endpoint it did not come from (an
//! agent that trusts ids it issued never sees one it did not), from carrying an id to
//! another route, and from making ids up: an id that does not verify is a task the
//! gateway never returned (-32001).
//!
//! The same route key seals the page tokens of a fan-out `ListTasks` (`seal`, `open`).
//!
//! Caller-bound tasks (`task-owner`, `auth::owner`) use the same format with an owner in
//! place of the endpoint: `tag` is HMAC-SHA-256 over the principal (a keyed digest: ids
//! stay short, and a name is not readable from them, nor guessable without the key), and
//! the MAC binds the id to it. An owner codec's route key is derived under another label
//! (`IdCodec::owner`), so the same secret never makes an id of one kind verify as the other.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::hmac;

use crate::backend::endpoints::EndpointTag;

/// The shortest key accepted: 128 bits.
pub const MIN_KEY_LEN: usize = 16;
/// The longest key accepted (HMAC hashes longer keys anyway; this bounds what is read).
pub(crate) const MAX_KEY_LEN: usize = 1024;

const TAG_LEN: usize = 8;
const MAC_LEN: usize = 10;
/// `base64url` of `TAG_LEN + MAC_LEN` (18) bytes: 24 characters, no padding.
const PREFIX_LEN: usize = 24;
const SEPARATOR: u8 = b'.';
/// Bound into every MAC, so a later format never verifies under this one.
const VERSION: &[u8] = b"a2a-gateway task affinity v1\0";
/// Labels of the route key's uses, so a tag is never a valid MAC or seal and back.
const ROUTE_LABEL: &[u8] = b"a2a-gateway affinity route v1\0";
const TAG_LABEL: &[u8] = b"endpoint tag\0";
const OWNER_ROUTE_LABEL: &[u8] = b"a2a-gateway owner route v1\0";
const OWNER_TAG_LABEL: &[u8] = b"owner tag\0";
const SEAL_LABEL: &[u8] = b"list page token v1\0";
/// The bytes of a sealed value's MAC.
pub const SEAL_LEN: usize = 16;

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
pub(crate) struct ForeignId;

/// The keyed digest of a principal that owner-bound ids carry (`IdCodec::owner_tag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OwnerTag([u8; TAG_LEN]);

/// The length of `wrap`'s prefix and its separator: what an id grows by when wrapped.
pub(crate) const WRAP_LEN: usize = PREFIX_LEN + 1;
/// The random bytes of a minted context (`auth::owner`: an owner-sealed nonce).
pub(crate) const NONCE_LEN: usize = 16;
/// The characters of a minted context id: the seal and `base64url(NONCE_LEN bytes)`.
pub(crate) const MINTED_LEN: usize = WRAP_LEN + 22;

/// Whether `id` has the shape of a minted context: a seal and a nonce, nothing else. Only
/// the owner key tells whose; a route with affinity passes one on as naming no endpoint,
/// once the owner layer has checked it.
pub(crate) fn minted_shape(id: &str) -> bool {
    let bytes = id.as_bytes();
    bytes.len() == MINTED_LEN
        && bytes[PREFIX_LEN] == SEPARATOR
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == PREFIX_LEN || b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
}

/// Checks a configured key's length (`MIN_KEY_LEN..=MAX_KEY_LEN` bytes).
pub fn check_key(secret: &[u8]) -> Result<(), String> {
    if (MIN_KEY_LEN..=MAX_KEY_LEN).contains(&secret.len()) {
        return Ok(());
    }
    Err(format!(
        "the key has {} bytes; {MIN_KEY_LEN} to {MAX_KEY_LEN} are needed",
        secret.len()
    ))
}

impl IdCodec {
    /// The codec of route `route` for `secret` (checked by `check_key`).
    pub fn new(secret: &[u8], route: &str) -> Result<IdCodec, String> {
        IdCodec::derived(ROUTE_LABEL, secret, route)
    }

    /// The owner-id codec of route `route` for `secret` (one `owner-key-file` line).
    pub(crate) fn owner(secret: &[u8], route: &str) -> Result<IdCodec, String> {
        IdCodec::derived(OWNER_ROUTE_LABEL, secret, route)
    }

    fn derived(label: &[u8], secret: &[u8], route: &str) -> Result<IdCodec, String> {
        check_key(secret)?;
        let master = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let mut context = hmac::Context::with_key(&master);
        context.update(label);
        context.update(route.as_bytes());
        Ok(IdCodec {
            key: hmac::Key::new(hmac::HMAC_SHA256, context.sign().as_ref()),
        })
    }

    /// The tag of the principal `owner` (its scheme and name, as `auth::owner` writes them).
    pub(crate) fn owner_tag(&self, owner: &[u8]) -> OwnerTag {
        OwnerTag(self.tag_of(OWNER_TAG_LABEL, owner))
    }

    /// The id clients see for `id` owned by `owner`.
    pub(crate) fn wrap_owned(&self, owner: OwnerTag, id: &str) -> String {
        self.wrap_tagged(owner.0, id)
    }

    /// The id behind a client's `id`, if this codec issued it to `owner`.
    pub(crate) fn unwrap_owned<'a>(
        &self,
        owner: OwnerTag,
        id: &'a str,
    ) -> Result<&'a str, ForeignId> {
        match self.unwrap_tagged(id)? {
            (tag, inner) if equal(&tag, &owner.0) => Ok(inner),
            _ => Err(ForeignId),
        }
    }

    /// The tag of the endpoint labelled `label` (its address, or its URL in a list).
    pub(crate) fn tag(&self, label: &str) -> EndpointTag {
        EndpointTag(self.tag_of(TAG_LABEL, label.as_bytes()))
    }

    fn tag_of(&self, use_label: &[u8], value: &[u8]) -> [u8; TAG_LEN] {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(use_label);
        context.update(value);
        let mut tag = [0; TAG_LEN];
        tag.copy_from_slice(&context.sign().as_ref()[..TAG_LEN]);
        tag
    }

    /// The MAC of `parts` under `label`, each part length-prefixed so that no two
    /// different part lists hash alike.
    fn sign(&self, label: &[u8], parts: &[&[u8]]) -> hmac::Tag {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(label);
        for part in parts {
            context.update(&(part.len() as u64).to_be_bytes());
            context.update(part);
        }
        context.sign()
    }

    fn mac(&self, tag: [u8; TAG_LEN], id: &str) -> [u8; MAC_LEN] {
        let mut mac = [0; MAC_LEN];
        mac.copy_from_slice(&self.sign(VERSION, &[&tag, id.as_bytes()]).as_ref()[..MAC_LEN]);
        mac
    }

    /// The MAC sealing `state` to `context` (a page token to its listing's filters).
    pub fn seal(&self, context: &[u8], state: &[u8]) -> [u8; SEAL_LEN] {
        let mut seal = [0; SEAL_LEN];
        seal.copy_from_slice(&self.sign(SEAL_LABEL, &[context, state]).as_ref()[..SEAL_LEN]);
        seal
    }

    /// Whether `seal` is `seal(context, state)`, compared in constant time.
    pub(crate) fn opens(&self, seal: &[u8], context: &[u8], state: &[u8]) -> bool {
        equal(&self.seal(context, state), seal)
    }

    /// The id clients see for the agent's `id` on the endpoint `tag`.
    pub(crate) fn wrap(&self, tag: EndpointTag, id: &str) -> String {
        self.wrap_tagged(tag.0, id)
    }

    /// The endpoint and the agent's own id behind a client's `id`, if the gateway issued it.
    pub(crate) fn unwrap<'a>(&self, id: &'a str) -> Result<(EndpointTag, &'a str), ForeignId> {
        let (tag, agent_id) = self.unwrap_tagged(id)?;
        Ok((EndpointTag(tag), agent_id))
    }

    fn wrap_tagged(&self, tag: [u8; TAG_LEN], id: &str) -> String {
        let mut raw = [0; TAG_LEN + MAC_LEN];
        raw[..TAG_LEN].copy_from_slice(&tag);
        raw[TAG_LEN..].copy_from_slice(&self.mac(tag, id));
        let mut out = String::with_capacity(PREFIX_LEN + 1 + id.len());
        URL_SAFE_NO_PAD.encode_string(raw, &mut out);
        out.push(SEPARATOR as char);
        out.push_str(id);
        out
    }

    fn unwrap_tagged<'a>(&self, id: &'a str) -> Result<([u8; TAG_LEN], &'a str), ForeignId> {
        let bytes = id.as_bytes();
        if bytes.len() <= PREFIX_LEN || bytes[PREFIX_LEN] != SEPARATOR {
            return Err(ForeignId);
        }
        let mut raw = [0; TAG_LEN + MAC_LEN];
        let decoded = URL_SAFE_NO_PAD.decode_slice(&bytes[..PREFIX_LEN], &mut raw);
        if decoded != Ok(raw.len()) {
            return Err(ForeignId);
        }
        let mut tag = [0; TAG_LEN];
        tag.copy_from_slice(&raw[..TAG_LEN]);
        let agent_id = &id[PREFIX_LEN + 1..];
        if !equal(&self.mac(tag, agent_id), &raw[TAG_LEN..]) {
            return Err(ForeignId);
        }
        Ok((tag, agent_id))
    }
}

/// Compared without an early exit, so timing does not tell how much of a MAC is right.
fn equal(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> IdCodec {
        IdCodec::new(b"0123456789abcdef-shared-key", "route-a").unwrap()
    }

    #[test]
    fn wraps_and_unwraps() {
        let tag = codec().tag("10.0.0.7:50051");
        for id in ["task-1", "a", "uuid-with.dots.and/slashes", "ünïcode"] {
            let wrapped = codec().wrap(tag, id);
            assert_eq!(wrapped.len(), PREFIX_LEN + 1 + id.len());
            assert_eq!(codec().unwrap(&wrapped), Ok((tag, id)));
        }
    }

    #[test]
    fn tags_are_keyed_by_the_key_and_the_route() {
        let label = "10.0.0.7:50051";
        let tag = codec().tag(label);
        assert_eq!(tag, codec().tag(label), "the same on every replica");
        assert_ne!(tag, codec().tag("10.0.0.8:50051"));
        let other_route = IdCodec::new(b"0123456789abcdef-shared-key", "route-b").unwrap();
        assert_ne!(tag, other_route.tag(label));
        let other_key = IdCodec::new(b"0123456789abcdef-other-key!", "route-a").unwrap();
        assert_ne!(tag, other_key.tag(label));
        // Not the unkeyed hash of the address anyone could compute.
        let digest = ring::digest::digest(&ring::digest::SHA256, label.as_bytes());
        assert_ne!(&tag.0[..], &digest.as_ref()[..TAG_LEN]);
    }

    #[test]
    fn tampering_is_refused() {
        let tag = codec().tag("10.0.0.7:50051");
        let wrapped = codec().wrap(tag, "task-1");
        // Every single-character change of the prefix, and of the agent's id.
        for at in (0..wrapped.len()).filter(|&i| i != PREFIX_LEN) {
            let mut bytes = wrapped.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(bytes).unwrap();
            assert_eq!(codec().unwrap(&tampered), Err(ForeignId), "{tampered}");
        }
        // The prefix moved onto another endpoint's tag, another key, another route, plain ids.
        let other = codec().wrap(codec().tag("10.0.0.8:50051"), "task-1");
        let spliced = format!("{}{}", &other[..PREFIX_LEN + 1], "task-2");
        assert_eq!(codec().unwrap(&spliced), Err(ForeignId));
        let stranger = IdCodec::new(b"another key, also long", "route-a").unwrap();
        assert_eq!(stranger.unwrap(&wrapped), Err(ForeignId));
        let sibling = IdCodec::new(b"0123456789abcdef-shared-key", "route-b").unwrap();
        assert_eq!(sibling.unwrap(&wrapped), Err(ForeignId));
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
    fn seals_bind_their_context() {
        let seal = codec().seal(b"filters", b"state");
        assert!(codec().opens(&seal, b"filters", b"state"));
        assert!(!codec().opens(&seal, b"other filters", b"state"));
        assert!(!codec().opens(&seal, b"filters", b"other state"));
        // Length-prefixed parts: moving a byte across the boundary changes the MAC.
        assert!(!codec().opens(&seal, b"filter", b"sstate"));
        assert!(!codec().opens(&seal[..SEAL_LEN - 1], b"filters", b"state"));
        let sibling = IdCodec::new(b"0123456789abcdef-shared-key", "route-b").unwrap();
        assert!(!sibling.opens(&seal, b"filters", b"state"));
    }

    #[test]
    fn keys_have_bounded_lengths() {
        for (len, ok) in [
            (0, false),
            (MIN_KEY_LEN - 1, false),
            (MIN_KEY_LEN, true),
            (MAX_KEY_LEN, true),
            (MAX_KEY_LEN + 1, false),
        ] {
            assert_eq!(check_key(&vec![7; len]).is_ok(), ok, "{len}");
            assert_eq!(IdCodec::new(&vec![7; len], "r").is_ok(), ok, "{len}");
        }
    }
}

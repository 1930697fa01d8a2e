//! The relay's tokens: what a client registered for its webhook (URL, token,
//! authentication), sealed with the gateway's push key and handed to the agent as the
//! push config's `token`, so the gateway stores no registration and any replica holding
//! the key opens any token; whether the agent still holds it, the callback asks the agent
//! (`relay::callback`). docs/security.md, "Push relay", tells operators.
//!
//! A token is base64url (no padding) of `version ‖ nonce ‖ AES-256-GCM(fields) ‖ tag`:
//! a random 96-bit nonce per token, the key derived from the key file's with HKDF-SHA256,
//! the version byte authenticated as associated data. The sealed fields bind the token to
//! its route, task (or, for a message's config sealed before its task exists, the
//! message's context), push config id and caller, which `relay` and the callback check
//! after opening; and it names the tenant the config was registered under, which the
//! callback asks the agent about. The token is at most `MAX_TOKEN` characters: an agent sends it back in a
//! header.

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

use crate::auth::Principal;

/// The longest token, in characters: far below any header bound, and room for a URL of
/// 2 KiB with its token and credentials.
pub(crate) const MAX_TOKEN: usize = 4096;

/// The bytes of one push key.
pub(crate) const KEY_LEN: usize = 32;

/// The most keys a key file holds: the one that seals, and the previous one, still
/// opened while the tokens it sealed live.
pub(crate) const MAX_KEYS: usize = 2;

/// The token format; a new format takes a new byte. Version 2 added the context
/// (`Registration::context_id`), version 3 the tenant (`Registration::tenant`); tokens of
/// the versions before still open, without them.
const VERSION: u8 = 3;

/// The format before the context was sealed, still opened.
const VERSION_1: u8 = 1;

/// The format before the tenant was sealed, still opened.
const VERSION_2: u8 = 2;

/// What the file key is stretched with, so the sealing key is the relay's alone.
const HKDF_SALT: &[u8] = b"a2a-gateway push relay";
const HKDF_INFO: &[u8] = b"token v1";

const TAG_LEN: usize = 16;

/// The most bytes a key file is read for: its keys, blank lines and spaces.
const MAX_KEY_FILE: usize = 1024;

/// The gateway's push keys (`push-key-file`): the first seals, each one opens.
pub(crate) struct PushKeys {
    keys: Vec<LessSafeKey>,
    random: SystemRandom,
}

impl std::fmt::Debug for PushKeys {
    /// The keys stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PushKeys({} keys)", self.keys.len())
    }
}

/// What a client registered, and what it is bound to.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Registration {
    /// The route the client registered through.
    pub(crate) route: String,
    /// The task, as the agent names it (empty: a message's config, before its task exists).
    pub(crate) task_id: String,
    /// Without a task: the context of the message that starts it, the only id the gateway
    /// knows before the agent names the task, and one every event of it carries (empty
    /// with a task, and in a version 1 token).
    pub(crate) context_id: String,
    /// The config's id as the client gave it (empty: the agent chooses one).
    pub(crate) config_id: String,
    /// The tenant the config was registered under (empty: none, and in tokens of
    /// versions 1 and 2).
    pub(crate) tenant: String,
    /// The caller's digest (`owner_digest`).
    pub(crate) owner: [u8; 32],
    /// The client's webhook URL.
    pub(crate) url: String,
    /// The client's token (empty: none).
    pub(crate) token: String,
    /// The client's scheme and credentials.
    pub(crate) authentication: Option<(String, String)>,
}

impl Registration {
    /// Whether this registration belongs to `task_id` of `route`, registered by `owner`;
    /// one sealed without a task (a message's, before the task existed) to any task.
    pub(crate) fn binds(&self, route: &str, task_id: &str, owner: &[u8; 32]) -> bool {
        self.route == route
            && (self.task_id.is_empty() || self.task_id == task_id)
            && self.owner == *owner
    }
}

impl std::fmt::Debug for Registration {
    /// The client's token and credentials stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("route", &self.route)
            .field("task_id", &self.task_id)
            .field("context_id", &self.context_id)
            .field("config_id", &self.config_id)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

/// Why a registration was not sealed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SealError {
    /// The client's URL, token and credentials are too long for a token.
    #[error("the URL, token and credentials take {0} bytes sealed, more than {MAX_TOKEN}")]
    TooLarge(usize),
    /// The host's random source failed.
    #[error("no random nonce")]
    Random,
}

/// The digest of a caller (scheme, issuer, name; `None`: anonymous) a token is bound to.
pub(crate) fn owner_digest(principal: Option<&Principal>) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    if let Some(principal) = principal {
        for part in [principal.scheme.as_str(), principal.issuer()] {
            context.update(part.as_bytes());
            context.update(&[0]);
        }
        context.update(principal.name.as_bytes());
    }
    let mut out = [0; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

impl PushKeys {
    /// The keys of `path`: one or two lines, each the base64 (standard or URL-safe,
    /// padded or not) of 32 random bytes; blank lines skipped.
    pub(crate) fn load(path: &Path) -> Result<PushKeys, String> {
        use std::io::Read;
        let limit = MAX_KEY_FILE;
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(limit as u64 + 1).read_to_end(&mut bytes))
            .map_err(|e| format!("{path:?}: {e}"))?;
        if bytes.len() > limit {
            return Err(format!(
                "{path:?}: more than {limit} bytes; it holds at most {MAX_KEYS} keys in base64, one a line"
            ));
        }
        let mut keys = Vec::new();
        for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| format!("{path:?} line {}: {why}", n + 1);
            if keys.len() == MAX_KEYS {
                return Err(bad("more than 2 keys"));
            }
            let line = line.strip_suffix(b"=").unwrap_or(line);
            let line = line.strip_suffix(b"=").unwrap_or(line);
            let key = URL_SAFE_NO_PAD
                .decode(line)
                .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(line))
                .map_err(|_| bad("not base64 (the key is the base64 of 32 random bytes)"))?;
            let key: [u8; KEY_LEN] = key.try_into().map_err(|key: Vec<u8>| {
                bad(&format!("a key of {} bytes; it must have 32", key.len()))
            })?;
            keys.push(key);
        }
        if keys.is_empty() {
            return Err(format!("{path:?}: no key"));
        }
        Ok(PushKeys::new(&keys))
    }

    /// The keys `keys`, the first sealing.
    pub(crate) fn new(keys: &[[u8; KEY_LEN]]) -> PushKeys {
        let keys = keys.iter().map(derive).collect();
        PushKeys {
            keys,
            random: SystemRandom::new(),
        }
    }

    /// `registration` sealed as a token.
    pub(crate) fn seal(&self, registration: &Registration) -> Result<String, SealError> {
        let raw_len = 1 + NONCE_LEN + encoded_len(registration) + TAG_LEN;
        let sealed_len = (raw_len * 4).div_ceil(3);
        if sealed_len > MAX_TOKEN {
            return Err(SealError::TooLarge(sealed_len));
        }
        let mut plain = encode(registration);
        let mut nonce = [0; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let key = &self.keys[0];
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from([VERSION]),
            &mut plain,
        )
        .map_err(|_| SealError::TooLarge(sealed_len))?;
        let mut raw = Vec::with_capacity(raw_len);
        raw.push(VERSION);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&plain);
        Ok(URL_SAFE_NO_PAD.encode(raw))
    }

    /// The registration sealed in `token`, if one of the keys sealed it unchanged.
    pub(crate) fn open(&self, token: &str) -> Option<Registration> {
        if token.len() > MAX_TOKEN {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
        let (&version, rest) = raw.split_first()?;
        if !matches!(version, VERSION | VERSION_1 | VERSION_2) || rest.len() < NONCE_LEN + TAG_LEN {
            return None;
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().ok()?;
        self.keys.iter().find_map(|key| {
            let mut sealed = sealed.to_vec();
            let plain = key
                .open_in_place(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from([version]),
                    &mut sealed,
                )
                .ok()?;
            decode(plain, version)
        })
    }
}

/// The AEAD key of a file key.
fn derive(key: &[u8; KEY_LEN]) -> LessSafeKey {
    let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, HKDF_SALT);
    let prk = salt.extract(key);
    let okm = prk
        .expand(&[HKDF_INFO], &AES_256_GCM)
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    LessSafeKey::new(UnboundKey::from(okm))
}

/// The bytes `encode` writes for `r`, counted before anything is copied.
fn encoded_len(r: &Registration) -> usize {
    let strings = [
        &r.route,
        &r.task_id,
        &r.config_id,
        &r.url,
        &r.token,
        &r.context_id,
        &r.tenant,
    ];
    let auth = (r.authentication.as_ref()).map_or(0, |(s, c)| 4 + s.len() + c.len());
    strings.iter().map(|s| 2 + s.len()).sum::<usize>() + 32 + 1 + auth
}

/// The fields, each string as its length (two bytes) and bytes; authentication after a
/// presence byte, then the context and the tenant. Only called under `MAX_TOKEN`, so every length fits
/// two bytes.
fn encode(r: &Registration) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(r));
    let field = |out: &mut Vec<u8>, text: &str| {
        out.extend_from_slice(&(text.len() as u16).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    };
    for text in [&r.route, &r.task_id, &r.config_id, &r.url, &r.token] {
        field(&mut out, text);
    }
    out.extend_from_slice(&r.owner);
    match &r.authentication {
        None => out.push(0),
        Some((scheme, credentials)) => {
            out.push(1);
            field(&mut out, scheme);
            field(&mut out, credentials);
        }
    }
    field(&mut out, &r.context_id);
    field(&mut out, &r.tenant);
    out
}

/// The fields `encode` wrote in the format `version`, all of them and nothing after.
fn decode(mut bytes: &[u8], version: u8) -> Option<Registration> {
    fn field(bytes: &mut &[u8]) -> Option<String> {
        let (len, rest) = bytes.split_first_chunk::<2>()?;
        let len = u16::from_be_bytes(*len) as usize;
        let (text, rest) = rest.split_at_checked(len)?;
        *bytes = rest;
        String::from_utf8(text.to_vec()).ok()
    }
    let route = field(&mut bytes)?;
    let task_id = field(&mut bytes)?;
    let config_id = field(&mut bytes)?;
    let url = field(&mut bytes)?;
    let token = field(&mut bytes)?;
    let (owner, rest) = bytes.split_first_chunk::<32>()?;
    let (&has_auth, mut rest) = rest.split_first()?;
    let authentication = match has_auth {
        0 => None,
        1 => Some((field(&mut rest)?, field(&mut rest)?)),
        _ => return None,
    };
    let context_id = match version {
        VERSION_1 => String::new(),
        _ => field(&mut rest)?,
    };
    let tenant = match version {
        VERSION_1 | VERSION_2 => String::new(),
        _ => field(&mut rest)?,
    };
    rest.is_empty().then_some(Registration {
        route,
        task_id,
        context_id,
        config_id,
        tenant,
        owner: *owner,
        url,
        token,
        authentication,
    })
}

/// `key` as a key file line (tests and docs write keys this way).
#[cfg(test)]
pub(crate) fn key_line(key: &[u8; KEY_LEN]) -> String {
    base64::engine::general_purpose::STANDARD.encode(key)
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    fn registration() -> Registration {
        Registration {
            route: "orders".into(),
            task_id: "task-1".into(),
            context_id: String::new(),
            config_id: "cfg-1".into(),
            tenant: String::new(),
            owner: owner_digest(None),
            url: "https://hooks.example/a2a?x=1".into(),
            token: "client-token".into(),
            authentication: Some(("Bearer".into(), "secret".into())),
        }
    }

    #[test]
    fn a_sealed_registration_opens_as_it_was() {
        let keys = PushKeys::new(&[[7; 32]]);
        let token = keys.seal(&registration()).unwrap();
        assert!(token.len() <= MAX_TOKEN);
        assert!(!token.contains("hooks.example") && !token.contains("secret"));
        assert_eq!(keys.open(&token), Some(registration()));
        // Without authentication and token, too.
        let bare = Registration {
            token: String::new(),
            authentication: None,
            ..registration()
        };
        assert_eq!(keys.open(&keys.seal(&bare).unwrap()), Some(bare));
        // A fresh nonce each time: the same registration never seals the same twice.
        assert_ne!(token, keys.seal(&registration()).unwrap());
    }

    /// A message's config seals its context, and a config its tenant; a token of the
    /// formats before (version 1: neither, version 2: no tenant) still opens, without them,
    /// and a version it does not know does not.
    #[test]
    fn a_context_and_tenant_are_sealed_and_older_tokens_open_without_them() {
        let keys = PushKeys::new(&[[7; 32]]);
        let unborn = Registration {
            task_id: String::new(),
            context_id: "ctx-1".into(),
            tenant: "acme".into(),
            ..registration()
        };
        assert_eq!(keys.open(&keys.seal(&unborn).unwrap()), Some(unborn));
        // Versions 1 and 2: the fields without the context and tenant, or the tenant (both
        // empty in `registration`, two bytes of length each), the version byte as
        // associated data.
        let seal_as = |version: u8| {
            let mut plain = encode(&registration());
            let dropped = match version {
                VERSION_2 => 2,
                _ => 4,
            };
            plain.truncate(plain.len() - dropped);
            let nonce = [9; NONCE_LEN];
            keys.keys[0]
                .seal_in_place_append_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from([version]),
                    &mut plain,
                )
                .unwrap();
            let mut raw = vec![version];
            raw.extend_from_slice(&nonce);
            raw.extend_from_slice(&plain);
            URL_SAFE_NO_PAD.encode(raw)
        };
        assert_eq!(keys.open(&seal_as(VERSION_1)), Some(registration()));
        assert_eq!(keys.open(&seal_as(VERSION_2)), Some(registration()));
        assert_eq!(keys.open(&seal_as(4)), None);
    }

    #[test]
    fn every_changed_byte_fails_to_open() {
        let keys = PushKeys::new(&[[7; 32]]);
        let raw = URL_SAFE_NO_PAD
            .decode(keys.seal(&registration()).unwrap())
            .unwrap();
        for i in 0..raw.len() {
            for flip in [0x01, 0x80] {
                let mut changed = raw.clone();
                changed[i] ^= flip;
                assert_eq!(
                    keys.open(&URL_SAFE_NO_PAD.encode(&changed)),
                    None,
                    "byte {i}"
                );
            }
        }
        for cut in 0..raw.len() {
            assert_eq!(
                keys.open(&URL_SAFE_NO_PAD.encode(&raw[..cut])),
                None,
                "{cut}"
            );
        }
        let mut longer = raw.clone();
        longer.push(0);
        assert_eq!(keys.open(&URL_SAFE_NO_PAD.encode(&longer)), None);
        for token in ["", "not base64!", "=="] {
            assert_eq!(keys.open(token), None, "{token}");
        }
    }

    #[test]
    fn another_key_does_not_open_and_the_previous_key_still_does() {
        let old = PushKeys::new(&[[1; 32]]);
        let token = old.seal(&registration()).unwrap();
        assert_eq!(PushKeys::new(&[[2; 32]]).open(&token), None);
        let rotated = PushKeys::new(&[[2; 32], [1; 32]]);
        assert_eq!(rotated.open(&token), Some(registration()));
        // The new key seals: the old one alone no longer opens what it seals.
        let fresh = rotated.seal(&registration()).unwrap();
        assert_eq!(old.open(&fresh), None);
        assert_eq!(PushKeys::new(&[[2; 32]]).open(&fresh), Some(registration()));
    }

    #[test]
    fn a_registration_is_bound_to_its_route_task_and_caller() {
        let keys = PushKeys::new(&[[7; 32]]);
        let opened = keys.open(&keys.seal(&registration()).unwrap()).unwrap();
        let anyone = owner_digest(None);
        assert!(opened.binds("orders", "task-1", &anyone));
        assert!(!opened.binds("other-route", "task-1", &anyone));
        assert!(!opened.binds("orders", "task-2", &anyone));
        let alice = Principal {
            name: "alice".into(),
            scheme: crate::auth::Scheme::ApiKey,
            claims: None,
        };
        let alice = owner_digest(Some(&alice));
        assert!(!opened.binds("orders", "task-1", &alice));
        // A message's config is sealed before its task exists: any task of the caller.
        let unborn = Registration {
            task_id: String::new(),
            owner: alice,
            ..registration()
        };
        assert!(unborn.binds("orders", "task-9", &alice));
        assert!(!unborn.binds("orders", "task-9", &anyone));
    }

    #[test]
    fn a_registration_too_large_to_seal_is_refused() {
        let keys = PushKeys::new(&[[7; 32]]);
        // The largest URL that seals, found by trying, and one byte more.
        let with_url = |len: usize| Registration {
            url: format!("https://hooks.example/{}", "a".repeat(len)),
            ..registration()
        };
        let largest = (0..MAX_TOKEN)
            .rev()
            .find(|&len| keys.seal(&with_url(len)).is_ok())
            .unwrap();
        let token = keys.seal(&with_url(largest)).unwrap();
        assert!(token.len() > MAX_TOKEN - 4 && token.len() <= MAX_TOKEN);
        assert_eq!(keys.open(&token), Some(with_url(largest)));
        assert!(matches!(
            keys.seal(&with_url(largest + 1)),
            Err(SealError::TooLarge(n)) if n > MAX_TOKEN
        ));
        // Huge values are refused without being cut into a token that opens wrong.
        let huge = Registration {
            token: "t".repeat(1 << 20),
            ..registration()
        };
        assert!(matches!(keys.seal(&huge), Err(SealError::TooLarge(_))));
        assert_eq!(keys.open(&"A".repeat(MAX_TOKEN + 1)), None);
    }

    #[test]
    fn key_files_hold_one_or_two_base64_keys() {
        let dir = std::env::temp_dir().join(format!("push-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let (a, b) = ([3; 32], [4; 32]);
        let one = file("one", &format!("{}\n", key_line(&a)));
        let keys = PushKeys::load(&one).unwrap();
        let token = keys.seal(&registration()).unwrap();
        let url_safe = URL_SAFE_NO_PAD.encode(b);
        let two = file("two", &format!("{url_safe}\r\n\n{}\n", key_line(&a)));
        assert_eq!(
            PushKeys::load(&two).unwrap().open(&token),
            Some(registration())
        );
        let three = format!("{}\n{}\n{}\n", key_line(&a), key_line(&b), key_line(&a));
        for (text, error) in [
            ("", "no key"),
            ("\n \n", "no key"),
            ("not base64 at all!", "line 1: not base64"),
            (
                &STANDARD.encode([1; 16]),
                "line 1: a key of 16 bytes; it must have 32",
            ),
            (&three, "line 3: more than 2 keys"),
            (&"A".repeat(MAX_KEY_FILE + 1), "more than 1024 bytes"),
            (&"A".repeat(MAX_KEY_FILE), "line 1: a key of 768 bytes"),
        ] {
            let err = PushKeys::load(&file("bad", text)).unwrap_err();
            assert!(err.contains(error), "{text:?}: {err}");
        }
        let err = PushKeys::load(&dir.join("absent")).unwrap_err();
        assert!(err.contains("absent"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

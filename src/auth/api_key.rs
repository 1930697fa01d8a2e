//! API keys (`[auth.api-keys]`): named keys, of which only SHA-256 digests are configured
//! and kept, one `NAME SHA256-HEX` per line of a file and/or an environment variable. A
//! presented key is hashed and looked up by its digest; the key's name is the principal.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use ring::digest::{digest, SHA256};

/// The longest key accepted: a longer one is refused before it is hashed (a key is a
/// random token, not a document; the header's own bound is `max-header-size`).
pub const MAX_KEY: usize = 512;

/// The longest key name: it is the principal, written in logs and forwarded headers.
const MAX_NAME: usize = 128;

/// A problem with the configured keys: says where, never the digest.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeysError {
    /// A file or variable of keys cannot be read.
    #[error("auth.api-keys {source_name}: {why}")]
    Source {
        /// `file "PATH"` or `env NAME`.
        source_name: String,
        /// Why it cannot be read.
        why: String,
    },
    /// A line is not `NAME SHA256-HEX`, or repeats a digest.
    #[error("auth.api-keys {source_name} line {line}: {why}")]
    Line {
        /// `file "PATH"` or `env NAME`.
        source_name: String,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Neither the file nor the variable holds a key.
    #[error(
        "auth.api-keys: no key configured (no `NAME SHA256-HEX` line in its file or variable)"
    )]
    Empty,
}

/// Why a presented key proves nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyRefusal {
    Empty,
    TooLong,
    Unknown,
}

impl KeyRefusal {
    /// What the client is told (never the key).
    pub(crate) fn why(self) -> &'static str {
        match self {
            KeyRefusal::Empty => "the API key is empty",
            KeyRefusal::TooLong => "the API key is longer than 512 bytes",
            KeyRefusal::Unknown => "the API key is not valid",
        }
    }
}

/// The digests of a route's keys and their names.
///
/// A presented key is found by a map lookup on its digest rather than by a constant-time
/// comparison with every digest: the lookup's timing depends only on the digest of what
/// the client sent, and learning how a digest of its own guess compares to a stored one
/// tells it nothing about a key (that would take a SHA-256 preimage).
/// The largest key file or variable read (about 50,000 keys): the keys are held in memory.
pub(crate) const MAX_KEYS_SOURCE: usize = 4 << 20;

/// The text of the key file at `path`, at most `MAX_KEYS_SOURCE` bytes.
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    crate::watched::note(path);
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    let limit = MAX_KEYS_SOURCE as u64 + 1;
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() > MAX_KEYS_SOURCE {
        return Err(format!("larger than {MAX_KEYS_SOURCE} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not valid UTF-8".to_owned())
}

#[derive(Debug)]
pub(crate) struct ApiKeys {
    by_digest: HashMap<[u8; 32], Arc<str>>,
}

impl ApiKeys {
    /// The keys of `file` and of the environment variable `env` (both, when both given).
    pub(crate) fn load(file: Option<&Path>, env: Option<&str>) -> Result<ApiKeys, ApiKeysError> {
        let mut keys = ApiKeys {
            by_digest: HashMap::new(),
        };
        if let Some(path) = file {
            let source_name = format!("file {path:?}");
            let fail = |why: String| ApiKeysError::Source {
                source_name: source_name.clone(),
                why,
            };
            let text = read_bounded(path).map_err(fail)?;
            keys.add_lines(&source_name, &text)?;
        }
        if let Some(var) = env {
            let source_name = format!("env {var}");
            // The variable's value is never part of the error: it holds the digests.
            let why = match std::env::var(var) {
                Ok(text) if text.len() > MAX_KEYS_SOURCE => {
                    Some(format!("larger than {MAX_KEYS_SOURCE} bytes"))
                }
                Ok(text) => {
                    keys.add_lines(&source_name, &text)?;
                    None
                }
                Err(std::env::VarError::NotPresent) => Some("not set".to_owned()),
                Err(std::env::VarError::NotUnicode(_)) => Some("not valid UTF-8".to_owned()),
            };
            if let Some(why) = why {
                return Err(ApiKeysError::Source { source_name, why });
            }
        }
        if keys.by_digest.is_empty() {
            return Err(ApiKeysError::Empty);
        }
        Ok(keys)
    }

    /// Adds each `NAME SHA256-HEX` line of `text` (blank lines and `#` comments skipped).
    fn add_lines(&mut self, source_name: &str, text: &str) -> Result<(), ApiKeysError> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |why| ApiKeysError::Line {
                source_name: source_name.to_owned(),
                line: i + 1,
                why,
            };
            let (name, digest) = parse_line(line).map_err(fail)?;
            if self.by_digest.insert(digest, name.into()).is_some() {
                return Err(fail("the digest is given twice (one key, one name)"));
            }
        }
        Ok(())
    }

    /// The name of the key `presented`, or why it has none.
    pub(crate) fn verify(&self, presented: &[u8]) -> Result<Arc<str>, KeyRefusal> {
        if presented.is_empty() {
            return Err(KeyRefusal::Empty);
        }
        if presented.len() > MAX_KEY {
            return Err(KeyRefusal::TooLong);
        }
        let digest = digest(&SHA256, presented);
        let digest: &[u8; 32] = digest.as_ref().try_into().expect("SHA-256 has 32 bytes");
        self.by_digest
            .get(digest)
            .cloned()
            .ok_or(KeyRefusal::Unknown)
    }
}

/// A line's name and digest; the error says what is wrong without the digest.
fn parse_line(line: &str) -> Result<(&str, [u8; 32]), &'static str> {
    let mut words = line.split_ascii_whitespace();
    let (Some(name), Some(hex), None) = (words.next(), words.next(), words.next()) else {
        return Err("expected `NAME SHA256-HEX`");
    };
    if name.len() > MAX_NAME || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the name must be at most 128 visible ASCII characters");
    }
    let bytes = data_encoding::HEXLOWER_PERMISSIVE
        .decode(hex.as_bytes())
        .map_err(|_| "the digest is not hexadecimal")?;
    let digest = bytes
        .try_into()
        .map_err(|_| "the digest is not 64 hexadecimal digits (SHA-256)")?;
    Ok((name, digest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn hex_of(key: &[u8]) -> String {
        data_encoding::HEXLOWER.encode(digest(&SHA256, key).as_ref())
    }

    fn keys(text: &str) -> Result<ApiKeys, ApiKeysError> {
        let mut keys = ApiKeys {
            by_digest: HashMap::new(),
        };
        keys.add_lines("file \"k\"", text)?;
        Ok(keys)
    }

    #[test]
    fn a_key_is_known_by_its_digest_and_named() {
        let text = format!(
            "# comment\n\nalice {}\n  bob {}  \n",
            hex_of(b"k1"),
            hex_of(b"k2").to_uppercase()
        );
        let keys = keys(&text).unwrap();
        assert_eq!(&*keys.verify(b"k1").unwrap(), "alice");
        assert_eq!(&*keys.verify(b"k2").unwrap(), "bob");
        assert_eq!(keys.verify(b"k3"), Err(KeyRefusal::Unknown));
        assert_eq!(keys.verify(b""), Err(KeyRefusal::Empty));
        let long = vec![b'a'; MAX_KEY + 1];
        assert_eq!(keys.verify(&long), Err(KeyRefusal::TooLong));
        assert_eq!(keys.verify(&long[..MAX_KEY]), Err(KeyRefusal::Unknown));
    }

    #[test]
    fn key_sources_are_bounded_and_never_echoed() {
        let dir = std::env::temp_dir().join(format!("a2a-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = format!("alice {}\n", hex_of(b"k"));
        // At the bound a file is read; one byte more and it is refused unread.
        let at = dir.join("at");
        let padding = "#".repeat(MAX_KEYS_SOURCE - line.len() - 1);
        std::fs::write(&at, format!("{line}{padding}\n")).unwrap();
        assert!(ApiKeys::load(Some(&at), None).is_ok());
        let over = dir.join("over");
        std::fs::write(&over, format!("{line}{padding}#\n")).unwrap();
        let err = ApiKeys::load(Some(&over), None).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
        // A variable that is not UTF-8 is named, its digests are not.
        let var = "A2A_GATEWAY_TEST_KEYS_NOT_UTF8";
        let mut bytes = line.into_bytes();
        bytes.push(0xff);
        let value = std::ffi::OsString::from_vec(bytes);
        // A variable of this test's own: no other test reads it.
        std::env::set_var(var, value);
        let err = ApiKeys::load(None, Some(var)).unwrap_err().to_string();
        assert!(err.contains("not valid UTF-8"), "{err}");
        assert!(!err.contains(&hex_of(b"k")[..16]), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_line_is_named_without_its_digest() {
        let digest = hex_of(b"k");
        for (text, line, why) in [
            (format!("alice {digest} extra"), 2, "expected"),
            (digest.clone(), 2, "expected"),
            (format!("alice {}", &digest[..62]), 2, "64 hexadecimal"),
            (format!("alice {}zz", &digest[..62]), 2, "not hexadecimal"),
            (format!("al\u{e9}ce {digest}"), 2, "visible ASCII"),
            (format!("a {digest}\nb {digest}"), 3, "twice"),
        ] {
            let err = keys(&format!("# one\n{text}")).unwrap_err().to_string();
            let at = format!("file \"k\" line {line}: ");
            assert!(err.contains(&at) && err.contains(why), "{err}");
            assert!(!err.contains(&digest[..16]), "{err}");
        }
    }
}

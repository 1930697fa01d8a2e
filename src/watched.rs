//! The files a configuration is read from. Loading the settings notes every file it reads
//! (`note`, within `collect`): the config file, keys, CA bundles, certificates, cards. A
//! running gateway compares their contents (`Fingerprint`) to tell when one changed and the
//! configuration must be loaded again, as a Kubernetes ConfigMap or a cert-manager Secret
//! mounted as files changes under it.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

thread_local! {
    /// The files noted by the `collect` running on this thread, if one is.
    static NOTED: RefCell<Option<BTreeSet<PathBuf>>> = const { RefCell::new(None) };
}

/// Notes that the configuration being loaded reads `path`. Outside `collect` (a card or a
/// key set refreshed while serving), nothing is noted.
pub(crate) fn note(path: &Path) {
    NOTED.with(|noted| {
        if let Some(noted) = noted.borrow_mut().as_mut() {
            noted.insert(path.to_owned());
        }
    });
}

/// Runs `load` and returns, with its result, every file it noted (also when it failed:
/// a broken file is watched until it is fixed).
pub fn collect<T>(load: impl FnOnce() -> T) -> (T, Vec<PathBuf>) {
    let outer = NOTED.with(|noted| noted.borrow_mut().replace(BTreeSet::new()));
    let loaded = load();
    let files = NOTED.with(|noted| std::mem::replace(&mut *noted.borrow_mut(), outer));
    (loaded, files.unwrap_or_default().into_iter().collect())
}

/// The most of each file the fingerprint reads: a configuration file past it is refused
/// when loaded anyway, and a change beyond it in a larger one goes unnoticed.
const MAX_READ: u64 = 64 << 20;

/// What the watched files hold now: their contents' digest, a missing or unreadable file
/// counting as such.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(Vec<u8>);

impl Fingerprint {
    /// The fingerprint of `files` now.
    pub fn of(files: &[PathBuf]) -> Fingerprint {
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        let mut buf = Vec::new();
        for file in files {
            buf.clear();
            let read = std::fs::File::open(file)
                .and_then(|f| f.take(MAX_READ).read_to_end(&mut buf).map(|_| ()));
            digest.update(file.as_os_str().as_encoded_bytes());
            match read {
                // The length first, so no two files' bytes run into each other's.
                Ok(()) => digest.update(&(buf.len() as u64 + 1).to_le_bytes()),
                Err(_) => digest.update(&0u64.to_le_bytes()),
            }
            digest.update(&buf);
        }
        Fingerprint(digest.finish().as_ref().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_what_was_noted_and_nests() {
        let (value, files) = collect(|| {
            note(Path::new("/b"));
            let ((), inner) = collect(|| note(Path::new("/c")));
            assert_eq!(inner, [PathBuf::from("/c")]);
            note(Path::new("/a"));
            note(Path::new("/b"));
            7
        });
        assert_eq!(value, 7);
        assert_eq!(files, [PathBuf::from("/a"), PathBuf::from("/b")]);
        // Outside a collection nothing is kept.
        note(Path::new("/d"));
        assert_eq!(collect(|| ()).1, Vec::<PathBuf>::new());
    }

    #[test]
    fn the_fingerprint_changes_with_any_file() {
        let dir = std::env::temp_dir().join(format!("a2a-watched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "one").unwrap();
        std::fs::write(&b, "two").unwrap();
        let files = [a.clone(), b.clone()];
        let first = Fingerprint::of(&files);
        assert_eq!(Fingerprint::of(&files), first);
        std::fs::write(&b, "three").unwrap();
        let second = Fingerprint::of(&files);
        assert_ne!(second, first);
        // Bytes moved from one file to the next are a change too.
        std::fs::write(&a, "onet").unwrap();
        std::fs::write(&b, "hree").unwrap();
        assert_ne!(Fingerprint::of(&files), second);
        std::fs::remove_file(&a).unwrap();
        let gone = Fingerprint::of(&files);
        std::fs::write(&a, "").unwrap();
        assert_ne!(Fingerprint::of(&files), gone, "missing is not empty");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

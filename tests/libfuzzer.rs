//! The fuzz targets under libFuzzer for a few seconds each (`fuzz/ci.sh`: stable toolchain
//! with `RUSTC_BOOTSTRAP=1`, no sanitizer). Without cargo-fuzz it fails, saying how to
//! install it (scripts/test does); `A2A_SKIP_LIBFUZZER=1` skips it, saying so. The same
//! properties run on stable in the `it` crate (`cargo test --test it fuzz_smoke::`).
//!
//! A test binary of its own: `fuzz/ci.sh` builds every dependency in release mode and then
//! runs the fuzzers, minutes of both cores that would run beside the `it` crate's
//! time-bound tests if it were one of them.

use std::path::Path;
use std::process::Command;

/// `fuzz/ci.sh`: every target under libFuzzer for a few seconds (stable toolchain with
/// `RUSTC_BOOTSTRAP=1`, no sanitizer).
#[test]
fn libfuzzer_targets_run_briefly() {
    if std::env::var_os("A2A_SKIP_LIBFUZZER").is_some() {
        eprintln!("skipped: A2A_SKIP_LIBFUZZER is set");
        return;
    }
    let installed = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        installed,
        "cargo-fuzz is not installed: run scripts/test, or `cargo install cargo-fuzz --locked` \
         (A2A_SKIP_LIBFUZZER=1 skips this test)"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/ci.sh");
    let mut command = Command::new("bash");
    command.arg(&script);
    // This test's own cargo variables (CARGO_PKG_*, CARGO_MANIFEST_*, …) are not the fuzz
    // workspace's; left in, they may make cargo rebuild the cached fuzz build.
    for (name, _) in std::env::vars_os() {
        let own = name.to_str().is_some_and(|n| {
            (n == "CARGO" || n.starts_with("CARGO_"))
                && n != "CARGO_HOME"
                && n != "CARGO_TARGET_DIR"
        });
        if own {
            command.env_remove(name);
        }
    }
    let status = command.status().expect("bash runs fuzz/ci.sh");
    assert!(status.success(), "fuzz/ci.sh failed: {status}");
}

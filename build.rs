//! Generates one set of `lf.a2a.v1` types serving both tonic (prost) and ProtoJSON (pbjson),
//! and names the commit built (`A2A_GATEWAY_COMMIT`, for `a2a_gateway_build_info`).

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if env::var_os("PROTOC").is_none() {
        // Vendored protoc keeps the build offline and independent of Debian packages.
        env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    }
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let descriptors = out.join("a2a_descriptor.bin");
    let include = protoc_bin_vendored::include_path()?;

    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptors)
        .compile_well_known_types(true)
        // Our own Timestamp prints UTC `Z` (spec 5.6.1); pbjson_types would print `+00:00`.
        .extern_path(".google.protobuf.Timestamp", "crate::proto::Timestamp")
        .extern_path(".google.protobuf", "::pbjson_types")
        .compile_protos(
            &[PathBuf::from("proto/a2a.proto")],
            &[PathBuf::from("proto"), include],
        )?;

    let descriptor_bytes = std::fs::read(&descriptors)?;
    pbjson_build::Builder::new()
        .register_descriptors(&descriptor_bytes)?
        .ignore_unknown_fields()
        .build(&[".lf.a2a.v1"])?;

    println!("cargo:rerun-if-changed=proto/a2a.proto");
    println!("cargo:rustc-env=A2A_GATEWAY_COMMIT={}", commit());
    Ok(())
}

/// The short hash of the commit checked out: `A2A_GATEWAY_COMMIT` when set (an image
/// build, whose context has no `.git`, gets it as the Dockerfile's `COMMIT`), else git's,
/// or `unknown` without either. Local only: git never fetches here.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=A2A_GATEWAY_COMMIT");
    let given = std::env::var("A2A_GATEWAY_COMMIT").ok();
    if let Some(hash) = given.filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return hash;
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        out.status.success().then(|| text.trim().to_owned())
    };
    // Rebuilt when HEAD moves: a commit changes the branch's ref, a checkout HEAD itself.
    let branch = git(&["rev-parse", "--symbolic-full-name", "HEAD"]);
    for name in ["HEAD"].into_iter().chain(branch.as_deref()) {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    git(&["rev-parse", "--short", "HEAD"])
        .filter(|hash| !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned())
}

//! `proto/a2a.proto` must carry the normative schema's wire facts exactly: package,
//! service, rpcs, messages, fields (name, number, type, label, json name, oneof,
//! proto3 optional) and enum values. Both files are compiled with protoc and their
//! descriptors compared with options and comments removed.
//!
//! The normative schema is read from `../shared/spec` (or `A2A_SPEC_DIR`).

use std::path::{Path, PathBuf};
use std::process::Command;

use prost::Message;
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto, FileDescriptorSet};

fn compile(dir: &Path, out: &Path) -> FileDescriptorProto {
    let protoc = protoc_bin_vendored::protoc_bin_path().unwrap();
    let include = protoc_bin_vendored::include_path().unwrap();
    let status = Command::new(protoc)
        .arg(format!("--descriptor_set_out={}", out.display()))
        .arg(format!("-I{}", dir.display()))
        .arg(format!("-I{}", include.display()))
        .arg(dir.join("a2a.proto"))
        .status()
        .unwrap();
    assert!(status.success(), "protoc failed on {}", dir.display());
    let set = FileDescriptorSet::decode(std::fs::read(out).unwrap().as_slice()).unwrap();
    set.file
        .into_iter()
        .find(|f| f.name() == "a2a.proto")
        .unwrap()
}

fn strip_enum(e: &mut EnumDescriptorProto) {
    e.options = None;
    e.value.iter_mut().for_each(|v| v.options = None);
}

fn strip_message(m: &mut DescriptorProto) {
    m.options = None;
    m.field.iter_mut().for_each(|f| f.options = None);
    m.oneof_decl.iter_mut().for_each(|o| o.options = None);
    m.nested_type.iter_mut().for_each(strip_message);
    m.enum_type.iter_mut().for_each(strip_enum);
}

/// Only the wire facts: no options, comments or imports (option-only imports differ).
fn wire_facts(mut file: FileDescriptorProto) -> FileDescriptorProto {
    file.options = None;
    file.source_code_info = None;
    file.dependency.clear();
    file.message_type.iter_mut().for_each(strip_message);
    file.enum_type.iter_mut().for_each(strip_enum);
    for service in &mut file.service {
        service.options = None;
        service.method.iter_mut().for_each(|m| m.options = None);
    }
    file
}

#[test]
fn wire_facts_equal_the_normative_schema() {
    let spec = match std::env::var_os("A2A_SPEC_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/spec");
            // A clone of the repository alone has no spec beside it; CI has.
            if !beside.join("a2a.proto").exists() {
                eprintln!(
                    "skipped: ../shared/spec not found (set A2A_SPEC_DIR to check the schema)"
                );
                return;
            }
            beside
        }
    };
    assert!(
        spec.join("a2a.proto").exists(),
        "normative schema not found at {} (set A2A_SPEC_DIR)",
        spec.display()
    );
    let tmp = std::env::temp_dir().join(format!("a2a-schema-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let ours = wire_facts(compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("proto"),
        &tmp.join("ours.pb"),
    ));
    let normative = wire_facts(compile(&spec, &tmp.join("normative.pb")));
    std::fs::remove_dir_all(&tmp).ok();

    assert_eq!(ours.package, normative.package);
    assert_eq!(ours.syntax, normative.syntax);
    assert_eq!(ours.service, normative.service, "service and rpcs");
    assert_eq!(ours.enum_type, normative.enum_type, "enums");
    let names = |f: &FileDescriptorProto| {
        f.message_type
            .iter()
            .map(|m| m.name().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&ours), names(&normative), "message names and order");
    for (a, b) in ours.message_type.iter().zip(&normative.message_type) {
        assert_eq!(a, b, "message {}", a.name());
    }
    assert_eq!(ours, normative);
}

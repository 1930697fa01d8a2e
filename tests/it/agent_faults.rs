//! Agents that fail, with real processes: the gateway binary in front of agents that are
//! not started, SIGKILLed mid-call, silent, restarted, not gRPC at all, or HTTP+JSON
//! agents answering HTML, truncated JSON, the wrong content type, an endless body or a
//! redirect loop (`harness/faults/`). Each row of `fault_cases!` is one row of `docs/errors.md`'s
//! "When agents fail" table and one test, `grpc::<name>` or `http_json::<name>`; the
//! doc test checks that the two lists agree, reasons and time bounds included.
//!
//! All selected cases run at once (`harness/faults/runner.rs`); `cargo test --test it
//! agent_faults:: -- --nocapture` prints what each case observed.

use crate::harness::faults;

use faults::Agent::*;
use faults::Outcome::*;
use faults::When::*;
use faults::{Binding, Case, BAD, DEADLINE, RESET, UNAVAILABLE};

macro_rules! fault_cases {
    (
        grpc { $( $g:ident { $($gf:tt)* } )* }
        http_json { $( $h:ident { $($hf:tt)* } )* }
    ) => {
        const CASES: &[Case] = &[
            $( Case { name: stringify!($g), binding: Binding::Grpc, $($gf)* }, )*
            $( Case { name: stringify!($h), binding: Binding::HttpJson, $($hf)* }, )*
        ];
        /// Where the tests are (the runner matches their names against the command line).
        const SUITE: &str = module_path!();

        mod grpc {
            $( #[test] fn $g() { super::faults::verdict(super::SUITE, super::CASES, concat!("grpc::", stringify!($g))) } )*
        }

        mod http_json {
            $( #[test] fn $h() { super::faults::verdict(super::SUITE, super::CASES, concat!("http_json::", stringify!($h))) } )*
        }
    };
}

fault_cases! {
    grpc {
        not_started {
            agent: NotStarted,
            unary: Some(Reply(UNAVAILABLE, AtOnce)),
            stream: Some(Reply(UNAVAILABLE, AtOnce)),
        }
        killed_mid_unary {
            agent: KilledMidUnary, unary: Some(Reply(RESET, AtOnce)), stream: None,
        }
        killed_mid_stream {
            agent: KilledMidStream, unary: None, stream: Some(ErrorFrame(RESET, AtOnce)),
        }
        restarted {
            agent: Restarted, unary: Some(Reply(UNAVAILABLE, AtOnce)), stream: None,
        }
        accepts_never_answers {
            agent: Scripted("silent"),
            unary: Some(Reply(DEADLINE, Deadline)),
            stream: Some(Reply(DEADLINE, Deadline)),
        }
        http2_never_replies {
            agent: Scripted("h2-never-replies"),
            unary: Some(Reply(DEADLINE, Deadline)),
            stream: Some(Reply(DEADLINE, Deadline)),
        }
        http2_proxy_502 {
            agent: Scripted("h2-502"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(Reply(BAD, AtOnce)),
        }
        http1_server {
            agent: Scripted("html-502"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(Reply(BAD, AtOnce)),
        }
        ssh_banner {
            agent: Scripted("banner"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(Reply(BAD, AtOnce)),
        }
        tls_on_cleartext_url {
            agent: Scripted("tls"),
            unary: Some(Reply(RESET, AtOnce)),
            stream: Some(Reply(RESET, AtOnce)),
        }
        cleartext_on_tls_url {
            agent: ScriptedAtHttps("html-502"),
            unary: Some(Reply(UNAVAILABLE, ConnectTimeout)),
            stream: Some(Reply(UNAVAILABLE, ConnectTimeout)),
        }
    }
    http_json {
        not_started {
            agent: NotStarted,
            unary: Some(Reply(UNAVAILABLE, AtOnce)),
            stream: Some(Reply(UNAVAILABLE, AtOnce)),
        }
        killed_mid_unary {
            agent: KilledMidUnary, unary: Some(Reply(RESET, AtOnce)), stream: None,
        }
        killed_mid_stream {
            agent: KilledMidStream, unary: None, stream: Some(ErrorFrame(RESET, AtOnce)),
        }
        restarted {
            agent: Restarted, unary: Some(Reply(UNAVAILABLE, AtOnce)), stream: None,
        }
        accepts_never_answers {
            agent: Scripted("silent"),
            unary: Some(Reply(DEADLINE, Deadline)),
            stream: Some(Reply(DEADLINE, Deadline)),
        }
        http_never_replies {
            agent: Scripted("never-replies"),
            unary: Some(Reply(DEADLINE, Deadline)),
            stream: Some(Reply(DEADLINE, Deadline)),
        }
        html_502 {
            agent: Scripted("html-502"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(Reply(BAD, AtOnce)),
        }
        truncated_json {
            agent: Scripted("truncated-json"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(ErrorFrame(BAD, AtOnce)),
        }
        body_cut_short {
            agent: Scripted("cut-body"),
            unary: Some(Reply(RESET, AtOnce)),
            stream: Some(ErrorFrame(RESET, AtOnce)),
        }
        wrong_content_type {
            agent: Scripted("wrong-type"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(Reply(BAD, AtOnce)),
        }
        endless_body {
            agent: Scripted("endless"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(Reply(BAD, AtOnce)),
        }
        redirect_loop {
            agent: Scripted("redirect-loop"),
            unary: Some(Reply(BAD, AtOnce)),
            stream: Some(Reply(BAD, AtOnce)),
        }
        ssh_banner {
            agent: Scripted("banner"),
            unary: Some(Reply(RESET, AtOnce)),
            stream: Some(Reply(RESET, AtOnce)),
        }
        tls_on_cleartext_url {
            agent: Scripted("tls"),
            unary: Some(Reply(RESET, AtOnce)),
            stream: Some(Reply(RESET, AtOnce)),
        }
        cleartext_on_tls_url {
            agent: ScriptedAtHttps("html-502"),
            unary: Some(Reply(UNAVAILABLE, ConnectTimeout)),
            stream: Some(Reply(UNAVAILABLE, ConnectTimeout)),
        }
    }
}

/// The "When agents fail" table of `docs/errors.md` and `CASES` list the same rows, and each row
/// names the reasons and the time bound its test asserts.
#[test]
fn errors_doc_lists_every_case() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/errors.md")).unwrap();
    let section = doc
        .split("\n## When agents fail")
        .nth(1)
        .expect("docs/errors.md has a section \"When agents fail\"");
    let section = section.split("\n## ").next().unwrap();
    let rows: Vec<Vec<&str>> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    let mut unmatched: Vec<String> = rows.iter().map(|r| format!("{} {}", r[0], r[1])).collect();
    for case in CASES {
        let name = format!("`{}`", case.name);
        let row = rows
            .iter()
            .find(|r| r[0].starts_with(&name) && r[1] == case.binding.label())
            .unwrap_or_else(|| panic!("docs/errors.md has no row for {}", case.key()));
        unmatched.retain(|u| *u != format!("{} {}", row[0], row[1]));
        let (gets, bound) = (row[2], row[3]);
        for outcome in [case.unary, case.stream].into_iter().flatten() {
            for reason in outcome.reasons() {
                assert!(
                    gets.contains(reason),
                    "{}: docs/errors.md does not name {reason}",
                    case.key()
                );
            }
            let when = match outcome.when() {
                AtOnce => "at once",
                Deadline => "`--timeout`",
                ConnectTimeout => "`--connect-timeout`",
            };
            assert!(
                bound.contains(when),
                "{}: docs/errors.md bound {bound:?} lacks {when:?}",
                case.key()
            );
        }
        if case.stream.is_some() && case.unary.is_some() {
            assert!(
                gets.contains("stream"),
                "{}: docs/errors.md says nothing of the stream",
                case.key()
            );
        }
    }
    assert!(
        unmatched.is_empty(),
        "docs/errors.md rows without a case: {unmatched:?}"
    );
}

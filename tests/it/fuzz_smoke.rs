//! The fuzz targets' properties (`a2a_gateway::fuzzing`, the same functions libFuzzer runs
//! in `fuzz/`) on stable: every seed of `fuzz/corpus/<target>/` (regressions included),
//! then seeded random inputs for a few seconds per target: random bytes, corpus entries
//! mutated byte-wise, and for `jsonrpc_model` the structure-aware model built by
//! `arbitrary` from random bytes. A failure prints the seed and the input, and saves the
//! input for `cargo fuzz run TARGET FILE`.
//!
//! `A2A_FUZZ_SEED` replays a seed, `A2A_FUZZ_SMOKE_SECS` sets the time per target. The
//! targets under libFuzzer itself are the test binary `libfuzzer` (`tests/libfuzzer.rs`).

use crate::harness;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use a2a_gateway::fuzzing;
use a2a_gateway::fuzzing::model::JsonRpcCase;
use arbitrary::{Arbitrary, Unstructured};

/// Longest time one input may take in this (debug) build.
const INPUT_BOUND: Duration = Duration::from_secs(5);

/// splitmix64: a small deterministic generator, enough to drive the inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn seed() -> u64 {
    match std::env::var("A2A_FUZZ_SEED") {
        Ok(seed) => seed.parse().expect("A2A_FUZZ_SEED is a number"),
        Err(_) => 0x5eed_a2a0,
    }
}

fn budget() -> Duration {
    let secs = std::env::var("A2A_FUZZ_SMOKE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    Duration::from_secs_f64(secs)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// A corpus entry with a few byte-level mutations (and a splice from another entry).
fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut input = corpus[rng.below(corpus.len())].clone();
    for _ in 0..=rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(6) {
            0 if at < input.len() => input[at] ^= 1 << rng.below(8),
            1 => input.insert(at, rng.next() as u8),
            2 if at < input.len() => {
                input.remove(at);
            }
            3 => input.truncate(at),
            4 => {
                let other = &corpus[rng.below(corpus.len())];
                let start = rng.below(other.len() + 1);
                let end = start + rng.below(other.len() - start + 1);
                input.splice(at..at, other[start..end].iter().copied());
            }
            _ => {
                let tokens = b"{}[]\",:\\0-e.\n\r";
                input.insert(at, tokens[rng.below(tokens.len())]);
            }
        }
    }
    input
}

/// Runs `property` on the corpus, then on random and mutated inputs for the budget.
fn smoke(target: &str, property: impl Fn(&[u8])) {
    let seed = seed();
    let corpus = corpus(target);
    assert!(!corpus.is_empty(), "fuzz/corpus/{target} has seeds");
    let mut rng = Rng(seed
        ^ target
            .bytes()
            .fold(0, |h: u64, b| h.wrapping_mul(31).wrapping_add(u64::from(b))));
    let started = Instant::now();
    let mut runs = 0usize;
    let mut run = |input: &[u8], what: &str| {
        let begun = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| property(input)));
        let took = begun.elapsed();
        if outcome.is_err() || took > INPUT_BOUND {
            let saved = std::env::temp_dir().join(format!("fuzz-smoke-{target}-{seed}-{runs}"));
            let _ = std::fs::write(&saved, input);
            eprintln!(
                "fuzz smoke: target {target} failed on {what} input #{runs} (seed \
                 A2A_FUZZ_SEED={seed}, took {took:?}), saved to {}: {:?}",
                saved.display(),
                String::from_utf8_lossy(input)
            );
            match outcome {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => panic!("input #{runs} took {took:?}, more than {INPUT_BOUND:?}"),
            }
        }
        runs += 1;
    };
    for input in &corpus {
        run(input, "corpus");
    }
    while started.elapsed() < budget() {
        let input = if rng.below(4) == 0 {
            let len = rng.below(512);
            rng.bytes(len)
        } else {
            mutate(&mut rng, &corpus)
        };
        run(&input, "generated");
    }
    eprintln!(
        "fuzz smoke: {target}: {runs} inputs in {:?}",
        started.elapsed()
    );
}

#[test]
fn jsonrpc() {
    smoke("jsonrpc", fuzzing::jsonrpc);
}

/// The model's inputs are `arbitrary` bytes: random and mutated bytes become requests.
#[test]
fn jsonrpc_model() {
    smoke("jsonrpc_model", |bytes| {
        if let Ok(case) = JsonRpcCase::arbitrary_take_rest(Unstructured::new(bytes)) {
            fuzzing::jsonrpc_model(&case);
        }
    });
}

#[test]
fn sse() {
    smoke("sse", fuzzing::sse);
}

#[test]
fn error_body() {
    smoke("error_body", fuzzing::error_body);
}

#[test]
fn status_details() {
    smoke("status_details", fuzzing::status_details);
}

#[test]
fn card() {
    smoke("card", fuzzing::card);
}

#[test]
fn signing() {
    smoke("signing", fuzzing::signing);
}

/// Finding of the `jsonrpc` target (fuzz/README.md): a backend stream that ended before its
/// first event left a request with an id without any answer (an empty SSE body). Over the
/// real gRPC backend, it is now a JSON-RPC error saying what the backend did.
#[tokio::test]
async fn a_stream_without_events_is_answered_with_an_error() {
    let (_backend, url) = harness::setup(|_| harness::Answer::Stream(Vec::new())).await;
    let body = harness::request(
        serde_json::json!(7),
        "SendStreamingMessage",
        harness::message_params("stream"),
    );
    let reply = harness::rpc(&url, &body).await;
    assert_eq!(reply["id"], 7, "{reply}");
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert_eq!(
        reply["error"]["data"][0]["reason"], "BACKEND_BAD_RESPONSE",
        "{reply}"
    );
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("ended before its first event"), "{reply}");
}

/// Finding of the `jsonrpc_model` target (fuzz/README.md): an id whose `\u` escape has no
/// hex digits passed the fast envelope parser and was echoed into a response that was not
/// JSON. It is a parse error now, as serde_json says.
#[tokio::test]
async fn an_id_with_a_broken_escape_is_a_parse_error() {
    let (_backend, url) =
        harness::setup(|_| harness::Answer::Error(tonic::Status::not_found("t"))).await;
    let body = r#"{"jsonrpc":"2.0","id":"\u001W","method":"GetTask","params":{"id":"t"}}"#;
    let (status, _, text) = harness::post(&url, body).await;
    assert_eq!(status, 200, "{text}");
    let reply: serde_json::Value = serde_json::from_str(&text).expect("the answer is JSON");
    assert_eq!(reply["id"], serde_json::Value::Null, "{reply}");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
}

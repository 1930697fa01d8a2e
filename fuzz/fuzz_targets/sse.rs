//! `sse` target: the property is `a2a_gateway::fuzzing::sse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_gateway::fuzzing::sse(data));

//! `error_body` target: the property is `a2a_gateway::fuzzing::error_body`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_gateway::fuzzing::error_body(data));

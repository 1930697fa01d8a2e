//! `signing` target: the property is `a2a_gateway::fuzzing::signing`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_gateway::fuzzing::signing(data));

//! `card` target: the property is `a2a_gateway::fuzzing::card`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_gateway::fuzzing::card(data));

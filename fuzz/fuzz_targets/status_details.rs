//! `status_details` target: the property is `a2a_gateway::fuzzing::status_details`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_gateway::fuzzing::status_details(data));

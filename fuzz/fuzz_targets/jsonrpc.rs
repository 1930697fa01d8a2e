//! `jsonrpc` target: the property is `a2a_gateway::fuzzing::jsonrpc`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| a2a_gateway::fuzzing::jsonrpc(data));

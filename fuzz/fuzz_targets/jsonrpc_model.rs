//! `jsonrpc_model` target: structure-aware requests (`a2a_gateway::fuzzing::model`); the
//! property is `a2a_gateway::fuzzing::jsonrpc_model`.
#![no_main]

use a2a_gateway::fuzzing::model::JsonRpcCase;

libfuzzer_sys::fuzz_target!(|case: JsonRpcCase| a2a_gateway::fuzzing::jsonrpc_model(&case));

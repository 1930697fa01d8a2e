//! The integration tests, as one crate: one binary to link instead of one per suite. Each
//! module is a suite (`cargo test --test it limits::` runs one), `harness` is what they
//! share: the test backends, the gateway in-process and as a child process, DNS, pods,
//! PKI, the reference-SDK peers. The few tests that need a process of their own run in a
//! child process of this binary (`harness::own_process`); the suites that must not run
//! beside the others at all are separate test targets (see `Cargo.toml`).

mod harness;

mod abuse;
mod access_log;
mod affinity;
mod agent_faults;
mod auth;
mod auth_jwt;
mod authz;
mod backend_mtls;
mod batches;
mod caller_headers;
mod card_security;
mod card_service;
mod card_signing;
mod cards;
mod cli;
mod cors;
mod cost_budget;
mod cross_front;
mod discovery;
mod docs;
mod edge;
mod endpoints;
mod errors;
mod examples;
mod fuzz_smoke;
mod grpc_front;
mod grpc_interop;
mod grpc_wire;
mod hostile_backend;
mod interop;
mod jsonrpc;
mod jwt;
mod keepalive;
mod legacy;
mod limits;
mod manifests;
mod metrics;
mod operations;
mod owner;
mod proto_schema;
mod push;
mod push_delivery;
mod push_relay;
mod readiness;
mod readiness_modes;
mod reload;
mod rest_backend;
mod rest_front;
mod routes;
mod sdk_refusals;
mod service_params;
mod serving_tls;
mod soak;
mod streams;
mod tls;
mod traces;

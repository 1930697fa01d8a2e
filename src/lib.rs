//! a2a-gateway: a JSON-RPC 2.0 edge gateway in front of A2A v1.0 agents that speak gRPC
//! or HTTP+JSON. The request path: `front::jsonrpc` → typed `protocol::ops::Request` →
//! `backend::{grpc,rest}` → typed reply, stream or `backend::Error` → JSON-RPC (the front
//! makes a `protocol::error::A2aError` of an error, once).

pub mod auth;
pub mod backend;
pub mod card;
pub(crate) mod config;
pub mod demo;
pub mod front;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub(crate) mod lifecycle;
pub mod proto;
pub mod protocol;
pub mod push;
pub mod route;
pub mod server;
pub mod settings;
pub mod signing;
pub mod telemetry;
pub mod units;
pub mod watched;

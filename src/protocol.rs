//! A2A protocol facts independent of any transport: the operation table, the error
//! table, error details, service parameters, and the message schema.

pub mod binding;
pub mod details;
pub mod error;
pub mod json;
pub mod legacy;
pub mod ops;
pub mod params;
pub mod schema;

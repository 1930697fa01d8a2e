//! A2A protocol facts independent of any transport: the operation table, the error
//! table, error details, service parameters, and the message schema.

pub mod binding;
pub(crate) mod details;
pub mod error;
pub(crate) mod json;
pub(crate) mod legacy;
pub mod ops;
pub mod params;
pub(crate) mod schema;

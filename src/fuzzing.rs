//! The fuzz targets' properties (issue 13), behind the `fuzzing` feature: each function
//! takes one input, runs the real code path on it and panics when a property breaks, so
//! libFuzzer (`fuzz/`) and the stable smoke test (`tests/it/fuzz_smoke.rs`) check the same
//! thing with the same code.
//!
//! - `jsonrpc` / `jsonrpc_model`: a request body, raw or from the structure-aware model
//!   (`model`), through the route's tower service (`server::router`) in front of an
//!   in-process backend that answers from the input (`jsonrpc::Scripted`). Every input
//!   gets exactly one valid JSON-RPC 2.0 answer, or 204 for notifications, in bounded time.
//! - `sse`, `error_body`, `status_details`: the HTTP+JSON backend's event-stream and error
//!   parsers, and the `google.rpc.Status` details decoder.
//! - `card`, `signing`: the agent card rewriting and the signing canonicalisation.
//!
//! Every function panics only on a broken property; anything a target refuses is fine.

mod card;
mod jsonrpc;
pub mod model;
mod parsers;

use serde_json::value::RawValue;
use serde_json::Value;

pub use card::{card, signing};
pub use jsonrpc::{jsonrpc, jsonrpc_model};
pub use parsers::{error_body, sse, status_details};

/// Asserts that `text` is one JSON-RPC 2.0 response object (spec 9.4): `jsonrpc: "2.0"`,
/// an `id` that is a string, an integer or null, exactly one of `result` and `error`, an
/// error with an integer `code` and a string `message`. Returns the id's raw text.
fn check_response(text: &str) -> String {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Response<'a> {
        jsonrpc: String,
        #[serde(borrow)]
        id: &'a RawValue,
        #[serde(default, borrow, deserialize_with = "present")]
        result: Option<&'a RawValue>,
        #[serde(default)]
        error: Option<ErrorObject>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ErrorObject {
        code: i64,
        #[allow(dead_code)] // only its type is checked
        message: String,
        #[serde(default)]
        #[allow(dead_code)]
        data: Option<Value>,
    }
    let response: Response = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("not a JSON-RPC response ({e}): {text}"));
    assert_eq!(response.jsonrpc, "2.0", "{text}");
    let id = response.id.get();
    assert!(
        is_valid_id(id),
        "the response id {id} is not a JSON-RPC id: {text}"
    );
    // `"result": null` is a result (`present`), not an absent member.
    assert!(
        response.result.is_some() != response.error.is_some(),
        "exactly one of result and error: {text}"
    );
    if let Some(error) = &response.error {
        assert!(i32::try_from(error.code).is_ok(), "{text}");
    }
    id.to_owned()
}

/// A member that is present, even as `null`, is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// A JSON-RPC id's text: a string, null, or an integer (no fraction, no exponent).
fn is_valid_id(raw: &str) -> bool {
    match raw.as_bytes() {
        [b'"', ..] => true,
        b"null" => true,
        [b'-', digits @ ..] | digits => !digits.is_empty() && digits.iter().all(u8::is_ascii_digit),
    }
}

/// Asserts that an `A2aError` becomes a valid JSON-RPC error object; with `typed`, that
/// each of its details is an object with `@type` (those the gateway decoded itself).
fn check_error(err: &crate::protocol::error::A2aError, typed: bool) {
    let mut out = Vec::new();
    crate::front::envelope::write_error(&mut out, None, err);
    let text = std::str::from_utf8(&out).expect("responses are UTF-8");
    check_response(text);
    for detail in err.data.iter().filter(|_| typed) {
        assert!(
            detail.get("@type").and_then(Value::as_str).is_some(),
            "every error.data entry has an @type: {detail}"
        );
    }
}

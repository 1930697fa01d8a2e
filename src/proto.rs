//! Generated `lf.a2a.v1` types (prost for gRPC, pbjson for ProtoJSON), plus the
//! ProtoJSON fixes pbjson needs: UTC `Z` timestamps.

use std::fmt;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use time::{format_description::well_known::Rfc3339, OffsetDateTime, UtcOffset};

pub use generated::*;

/// The output of `build.rs` (prost and tonic, then pbjson, from `proto/a2a.proto`). Its
/// lints are the generators' business, and it has no docs where the schema has no comment
/// (the schema is the reference).
#[allow(clippy::all, missing_docs)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
}

/// `google.protobuf.Timestamp` with ProtoJSON text in UTC `Z` form (spec 5.6.1).
///
/// pbjson's own type prints `+00:00`; A2A requires `Z`. Fractions print as 0, 3, 6 or 9
/// digits, the shortest that holds the value, as the ProtoJSON spec asks.
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Timestamp {
    /// Seconds since the Unix epoch (UTC).
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Nanoseconds within the second, 0 to 999,999,999.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The current wall-clock time, in the millisecond precision spec 5.6.1 recommends.
    pub(crate) fn now() -> Self {
        let now = OffsetDateTime::now_utc();
        Self {
            seconds: now.unix_timestamp(),
            nanos: (now.nanosecond() / 1_000_000 * 1_000_000) as i32,
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Ok(dt) = OffsetDateTime::from_unix_timestamp(self.seconds) else {
            return Err(fmt::Error);
        };
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second()
        )?;
        let nanos = self.nanos.clamp(0, 999_999_999);
        if nanos == 0 {
            f.write_str("Z")
        } else if nanos % 1_000_000 == 0 {
            write!(f, ".{:03}Z", nanos / 1_000_000)
        } else if nanos % 1_000 == 0 {
            write!(f, ".{:06}Z", nanos / 1_000)
        } else {
            write!(f, ".{nanos:09}Z")
        }
    }
}

impl std::str::FromStr for Timestamp {
    type Err = time::error::Parse;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let dt = OffsetDateTime::parse(text, &Rfc3339)?.to_offset(UtcOffset::UTC);
        Ok(Self {
            seconds: dt.unix_timestamp(),
            nanos: dt.nanosecond() as i32,
        })
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp such as 2025-10-28T10:30:00.000Z")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Timestamp, E> {
                text.parse()
                    .map_err(|e| E::custom(format!("{e}: {text:?}")))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Restores JSON `null`s that pbjson decodes as an empty `google.protobuf.Value`
/// (`kind: None`) instead of `NullValue`; without this a `null` inside a data part or
/// metadata would not reach the backend as null.
pub(crate) trait RestoreNulls {
    /// Turns each empty `Value` inside `self` into a JSON `null`.
    fn restore_nulls(&mut self) {}
}

impl RestoreNulls for pbjson_types::Value {
    fn restore_nulls(&mut self) {
        use pbjson_types::value::Kind;
        match &mut self.kind {
            None => self.kind = Some(Kind::NullValue(0)),
            Some(Kind::StructValue(s)) => s.restore_nulls(),
            Some(Kind::ListValue(list)) => list.values.iter_mut().for_each(|v| v.restore_nulls()),
            Some(_) => {}
        }
    }
}

impl RestoreNulls for pbjson_types::Struct {
    fn restore_nulls(&mut self) {
        self.fields.values_mut().for_each(|v| v.restore_nulls());
    }
}

impl<T: RestoreNulls> RestoreNulls for Option<T> {
    fn restore_nulls(&mut self) {
        if let Some(inner) = self {
            inner.restore_nulls();
        }
    }
}

impl RestoreNulls for Message {
    fn restore_nulls(&mut self) {
        self.metadata.restore_nulls();
        for part in &mut self.parts {
            part.metadata.restore_nulls();
            if let Some(part::Content::Data(value)) = &mut part.content {
                value.restore_nulls();
            }
        }
    }
}

impl RestoreNulls for SendMessageRequest {
    fn restore_nulls(&mut self) {
        self.message.restore_nulls();
        self.metadata.restore_nulls();
    }
}

impl RestoreNulls for CancelTaskRequest {
    fn restore_nulls(&mut self) {
        self.metadata.restore_nulls();
    }
}

/// Requests without `google.protobuf.Value` fields have nothing to restore.
macro_rules! no_values {
    ($($ty:ty),*) => { $( impl RestoreNulls for $ty {} )* };
}
no_values!(
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest
);

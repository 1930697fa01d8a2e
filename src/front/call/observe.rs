//! Observe, the outermost layer: the call's metrics (`Meter`), its server span and access
//! log line (`CallRecord`; `invoke` records the backend's status in it). Every outcome of the
//! layers inside, refusals included, is counted here, once. A stream's record goes on to
//! its SSE body (`Watched`), which finishes it when the stream ends. A record the layers
//! below never answered (the client left while they ran) is logged as the client's leaving.

use std::sync::Arc;

use crate::front::call::{Answer, Exchange, Layer};
use crate::front::dialect::Dialect;
use crate::front::sse::Watch;
use crate::proto::StreamResponse;
use crate::protocol::error::A2aError;
use crate::telemetry::access::CallRecord;
use crate::telemetry::{Meter, Outcome, RouteMetrics, StreamGuard};

/// Counts, logs and traces the call the layer inside handles.
pub struct Observe<L>(pub L);

impl<In: Send, L: Layer<In> + Sync> Layer<In> for Observe<L> {
    type Events = L::Events;

    async fn call(&self, x: &mut Exchange<'_>, input: In) -> Result<Answer<L::Events>, A2aError> {
        let method = x.dialect.legacy_method().map_or(x.op.name(), |m| m.name());
        tracing::debug!(a2a_version = x.dialect.label(), method, "call");
        let mut meter = Meter::start(&x.gateway.route_metrics, x.op, x.started)
            .in_v03(x.dialect.legacy_method());
        // An HTTP+JSON call has no JSON-RPC id.
        let id =
            x.id.as_deref()
                .filter(|_| !matches!(x.dialect, Dialect::Rest(_)));
        x.record
            .method(x.op, x.head, id, (x.binding(), x.gateway.profile));
        let answer = self.0.call(x, input).await;
        let outcome = match &answer {
            Ok(Answer::Json(..) | Answer::Stream(_)) => Outcome::Ok,
            Ok(Answer::Unstarted(err, _)) | Err(err) => Outcome::Error(err.kind),
            Ok(Answer::Refused(refusal)) => {
                let by = refusal.by.name();
                tracing::debug!(method = x.op.name(), by, "call refused");
                Outcome::Error(refusal.error.kind)
            }
            Ok(Answer::Skipped) => {
                meter.uncounted();
                x.record.answered();
                return answer;
            }
        };
        meter.record(outcome);
        match outcome {
            Outcome::Error(kind) => x.record.failed(kind),
            // A stream is answered once it ends (`Watched`).
            _ if matches!(answer, Ok(Answer::Stream(_))) => {}
            _ => x.record.answered(),
        }
        answer
    }
}

/// A stream's observer: its record (`None`: finished already) and its count of open
/// streams and events. A stream dropped before its end (its client left) is logged so.
pub struct Watched {
    record: Option<CallRecord>,
    meter: StreamGuard,
}

impl Watched {
    /// Watches a stream opened now; `record` is finished when the stream ends.
    pub fn new(record: Option<CallRecord>, metrics: &Arc<RouteMetrics>) -> Self {
        Watched {
            record,
            meter: metrics.stream_opened(),
        }
    }
}

impl Watch for Watched {
    fn event(&mut self, event: &StreamResponse) {
        if let Some(record) = &mut self.record {
            record.event(event);
        }
    }

    fn error(&mut self, err: &A2aError) {
        if let Some(record) = &mut self.record {
            record.error_event(err);
        }
    }

    fn ended(&mut self) {
        if let Some(record) = &mut self.record {
            record.answered();
        }
    }

    fn sent(&mut self, bytes: usize, events: u64) {
        if let Some(record) = &mut self.record {
            record.sent(bytes);
        }
        if events > 0 {
            self.meter.events(events);
        }
    }
}

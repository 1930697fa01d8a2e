//! OpenTelemetry traces: one server span per JSON-RPC call (`ServerSpan`) and one client
//! span per backend call (`ClientSpan`), exported over OTLP (gRPC or http/protobuf) in
//! batches. The client's W3C `traceparent`/`tracestate` is continued, and the backend gets
//! the gateway's client span as its parent, so the agent's spans join the same trace.
//!
//! How the context travels: as a typed value beside the backend call (`TraceContext`, a
//! field of `backend::Call`). The handler takes its server span's (`ServerSpan::context`)
//! and drops the client's own `traceparent`/`tracestate` from the forwarded headers; each
//! backend call starts its client span as the child of that context and puts its own in
//! its place (`ClientSpan::start`); the backend writes it as `traceparent`/`tracestate`
//! when it builds the outgoing head (`TraceContext::write`). A balanced call sent to a
//! second endpoint thus gets a second client span under the same server span.
//!
//! Attributes follow the drafted A2A conventions (`a2a.*`) and the RPC/HTTP ones for the
//! hops. No header value, message part or push-config field other than ids is ever an
//! attribute: credentials cannot end up in a span.
//!
//! Off unless an endpoint is configured (`--otlp-endpoint` or `OTEL_EXPORTER_OTLP_*`): then
//! nothing is built and each call pays one load of `TRACER`.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, TraceId, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, Span, SpanData};
use opentelemetry_sdk::Resource;
use serde::Deserialize;

use super::untrusted::{clip_message, clipped, without_credentials};
use crate::proto::{send_message_response, stream_response, Message, Task, TaskState};
use crate::protocol::binding::Binding;
use crate::protocol::error::{A2aError, ErrorKind, Profile};
use crate::protocol::ops::{Op, Reply, Request, StreamRequest, UnaryRequest};
use crate::protocol::params::SUPPORTED_VERSION;

/// The gRPC service of every A2A call (`rpc.service`).
const SERVICE: &str = "lf.a2a.v1.A2AService";
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// The process's tracer, set once at start when traces are configured. Process-wide (as
/// OpenTelemetry's own global provider is) because spans start in the JSON-RPC handler and
/// in both backends, which share no configuration; unset, a call pays one load.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// OTLP transports (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Deserialize)]
pub enum OtlpProtocol {
    /// OTLP over gRPC (`grpc`).
    #[value(name = "grpc")]
    #[serde(rename = "grpc")]
    Grpc,
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`, the default).
    #[value(name = "http/protobuf")]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

/// Trace export as configured: where, how, and which traces.
#[derive(Clone, Debug)]
pub struct TraceSettings {
    /// The full URL spans are sent to (`…/v1/traces` for http/protobuf).
    pub endpoint: String,
    /// The OTLP transport.
    pub protocol: OtlpProtocol,
    /// Which traces are recorded and exported.
    pub sampler: SamplerChoice,
}

/// `OTEL_TRACES_SAMPLER` with its argument, checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SamplerChoice {
    /// Every trace (`always_on`).
    AlwaysOn,
    /// No trace (`always_off`).
    AlwaysOff,
    /// This fraction of traces, chosen by trace id (`traceidratio`).
    Ratio(f64),
    /// The caller's `traceparent` decides; every trace without one
    /// (`parentbased_always_on`, the default).
    ParentBasedAlwaysOn,
    /// The caller's `traceparent` decides; no trace without one
    /// (`parentbased_always_off`).
    ParentBasedAlwaysOff,
    /// The caller's `traceparent` decides; this fraction of the others
    /// (`parentbased_traceidratio`).
    ParentBasedRatio(f64),
}

/// A trace setting that cannot be used; names the flag or variable.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct TraceConfigError {
    source_name: String,
    message: String,
}

fn config_error(source_name: &str, message: impl Into<String>) -> TraceConfigError {
    TraceConfigError {
        source_name: source_name.to_owned(),
        message: message.into(),
    }
}

/// What the flags and file set; the standard variables fill the rest.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TraceFlags<'a> {
    pub(crate) endpoint: Option<&'a str>,
    pub(crate) protocol: Option<OtlpProtocol>,
    pub(crate) sampler: Option<&'a str>,
    pub(crate) sampler_arg: Option<f64>,
}

impl TraceSettings {
    /// The settings from `flags`, else the standard `OTEL_*` variables read through `env`;
    /// `None` when no endpoint is configured (or `OTEL_SDK_DISABLED=true`,
    /// `OTEL_TRACES_EXPORTER=none`).
    pub(crate) fn resolve(
        flags: TraceFlags<'_>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceSettings>, TraceConfigError> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match var("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                let why = format!("{other:?} is not supported (otlp or none)");
                return Err(config_error("OTEL_TRACES_EXPORTER", why));
            }
        }
        let protocol = match flags.protocol {
            Some(protocol) => protocol,
            None => match [
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ]
            .into_iter()
            .find_map(|name| var(name).map(|value| (name, value)))
            {
                None => OtlpProtocol::HttpProtobuf,
                Some((name, value)) => match value.trim() {
                    "grpc" => OtlpProtocol::Grpc,
                    "http/protobuf" => OtlpProtocol::HttpProtobuf,
                    other => {
                        let why = format!("{other:?} is not supported (grpc or http/protobuf)");
                        return Err(config_error(name, why));
                    }
                },
            },
        };
        // The signal's own variable is the whole URL; the general one (and the flag) a
        // base to which http/protobuf adds `/v1/traces` (OTLP exporter specification).
        let (name, base, whole) = if let Some(endpoint) = flags.endpoint {
            ("--otlp-endpoint", endpoint.to_owned(), false)
        } else if let Some(endpoint) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint, true)
        } else if let Some(endpoint) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint, false)
        } else {
            return Ok(None);
        };
        let base = base.trim();
        match base.parse::<http::Uri>() {
            Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) => {}
            _ => {
                return Err(config_error(
                    name,
                    format!("{base:?} is not an http(s) URL"),
                ))
            }
        }
        let endpoint = match protocol {
            OtlpProtocol::HttpProtobuf if !whole => {
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
            _ => base.to_owned(),
        };
        let sampler = sampler_choice(flags, &var)?;
        Ok(Some(TraceSettings {
            endpoint,
            protocol,
            sampler,
        }))
    }
}

fn sampler_choice(
    flags: TraceFlags<'_>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<SamplerChoice, TraceConfigError> {
    let (name, sampler) = match flags.sampler {
        Some(sampler) => ("--trace-sampler", sampler.to_owned()),
        None => match var("OTEL_TRACES_SAMPLER") {
            Some(sampler) => ("OTEL_TRACES_SAMPLER", sampler),
            None => return Ok(SamplerChoice::ParentBasedAlwaysOn),
        },
    };
    let ratio = || -> Result<f64, TraceConfigError> {
        let (arg_name, arg) = match flags.sampler_arg {
            Some(arg) => ("--trace-sampler-arg", Some(arg)),
            None => match var("OTEL_TRACES_SAMPLER_ARG") {
                None => ("OTEL_TRACES_SAMPLER_ARG", None),
                Some(text) => {
                    let parsed = text.trim().parse::<f64>().map_err(|_| {
                        config_error(
                            "OTEL_TRACES_SAMPLER_ARG",
                            format!("{text:?} is not a number"),
                        )
                    })?;
                    ("OTEL_TRACES_SAMPLER_ARG", Some(parsed))
                }
            },
        };
        match arg {
            None => Ok(1.0),
            Some(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
            Some(ratio) => Err(config_error(
                arg_name,
                format!("{ratio} is not a ratio between 0 and 1"),
            )),
        }
    };
    Ok(match sampler.trim() {
        "always_on" => SamplerChoice::AlwaysOn,
        "always_off" => SamplerChoice::AlwaysOff,
        "traceidratio" => SamplerChoice::Ratio(ratio()?),
        "parentbased_always_on" => SamplerChoice::ParentBasedAlwaysOn,
        "parentbased_always_off" => SamplerChoice::ParentBasedAlwaysOff,
        "parentbased_traceidratio" => SamplerChoice::ParentBasedRatio(ratio()?),
        other => {
            let why = format!(
                "{other:?} is not one of always_on, always_off, traceidratio, \
                 parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
            );
            return Err(config_error(name, why));
        }
    })
}

impl SamplerChoice {
    fn sampler(self) -> Sampler {
        match self {
            SamplerChoice::AlwaysOn => Sampler::AlwaysOn,
            SamplerChoice::AlwaysOff => Sampler::AlwaysOff,
            SamplerChoice::Ratio(r) => Sampler::TraceIdRatioBased(r),
            SamplerChoice::ParentBasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            SamplerChoice::ParentBasedAlwaysOff => {
                Sampler::ParentBased(Box::new(Sampler::AlwaysOff))
            }
            SamplerChoice::ParentBasedRatio(r) => {
                Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(r)))
            }
        }
    }
}

/// Running trace export; `shutdown` exports what is still buffered.
pub struct Tracing {
    provider: SdkTracerProvider,
    /// The exporter's own runtime: the OTLP clients (tonic, hyper) need one, and the
    /// serving threads' runtimes must not carry export work.
    runtime: tokio::runtime::Runtime,
}

impl Tracing {
    /// Builds the exporter and sets the process's tracer. Call once, outside any runtime.
    pub fn start(settings: &TraceSettings) -> Result<Tracing, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-export")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the trace exporter's runtime: {e}"))?;
        let exporter = {
            // The tonic channel spawns its worker on the runtime it is built in.
            let _inside = runtime.enter();
            let built = match settings.protocol {
                OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(&settings.endpoint)
                    .build(),
                OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_endpoint(&settings.endpoint)
                    .with_headers(Default::default())
                    .build(),
            };
            built.map_err(|e| {
                let endpoint = without_credentials(&settings.endpoint);
                format!("--otlp-endpoint {endpoint}: {e}")
            })?
        };
        let exporter = OnRuntime {
            exporter: Arc::new(exporter),
            runtime: runtime.handle().clone(),
        };
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("a2a-gateway");
        }
        let resource = resource
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(settings.sampler.sampler())
            .with_resource(resource)
            .build();
        let _ = TRACER.set(provider.tracer("a2a-gateway"));
        Ok(Tracing { provider, runtime })
    }

    /// Exports the spans still buffered (bounded by the exporter's timeout), then stops.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!(error = %e, "exporting the last spans failed");
        }
        self.runtime.shutdown_timeout(Duration::from_secs(1));
    }
}

/// The OTLP exporter, run on the exporter's runtime: the batch processor calls `export`
/// from its own thread, which has no runtime.
#[derive(Debug)]
struct OnRuntime {
    exporter: Arc<opentelemetry_otlp::SpanExporter>,
    runtime: tokio::runtime::Handle,
}

impl opentelemetry_sdk::trace::SpanExporter for OnRuntime {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let exporter = self.exporter.clone();
        let task = self
            .runtime
            .spawn(async move { exporter.export(batch).await });
        match task.await {
            Ok(result) => result,
            Err(e) => Err(OTelSdkError::InternalFailure(e.to_string())),
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.exporter.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Called while the provider is built, before any export shares the exporter.
        if let Some(exporter) = Arc::get_mut(&mut self.exporter) {
            exporter.set_resource(resource);
        }
    }
}

/// The process's tracer, when traces are on.
fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// Header names and values as the W3C propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// An outgoing head as the W3C propagator writes it.
struct Head<'a>(&'a mut HeaderMap);

impl Injector for Head<'_> {
    fn set(&mut self, key: &str, value: String) {
        let (Ok(name), Ok(mut value)) = (HeaderName::try_from(key), HeaderValue::try_from(value))
        else {
            return;
        };
        crate::protocol::params::never_index_per_call(&name, &mut value);
        self.0.insert(name, value);
    }
}

/// The trace context a backend call continues: the server span's, then (once the backend
/// has started it) its client span's.
#[derive(Clone, Debug)]
pub struct TraceContext(SpanContext);

impl TraceContext {
    /// Writes the context into an outgoing head as `traceparent` (and `tracestate`).
    pub(crate) fn write(&self, head: &mut HeaderMap) {
        let cx = Context::new().with_remote_span_context(self.0.clone());
        TraceContextPropagator::new().inject_context(&cx, &mut Head(head));
    }
}

/// Whether `name` is a W3C trace context header (`traceparent`, `tracestate`).
fn is_trace_header(name: &HeaderName) -> bool {
    name == TRACEPARENT || name == TRACESTATE
}

/// The server span of one call, over the JSON-RPC or the HTTP+JSON front. Ended when dropped (a stream's when its body is).
/// The task's ids and state change along a stream; each is set once, its last value, as
/// the span ends (an attribute set twice would be listed twice).
pub(crate) struct ServerSpan {
    span: Span,
    /// The front the call came through.
    binding: Binding,
    /// The error table's column its errors are written in (`spec-profile`).
    profile: Profile,
    frames: u64,
    task: Option<String>,
    state: Option<&'static str>,
    message: Option<String>,
}

impl ServerSpan {
    /// Starts the span of a call of `op` (`None` when traces are off), the child of the
    /// client's `traceparent` if it sent one.
    pub(crate) fn start(
        op: Op,
        request: &http::request::Parts,
        id: Option<&str>,
        (binding, profile): (Binding, Profile),
    ) -> Option<ServerSpan> {
        let tracer = tracer()?;
        let parent = TraceContextPropagator::new().extract(&Headers(&request.headers));
        let mut attributes = vec![
            KeyValue::new("a2a.method.name", op.name()),
            KeyValue::new("a2a.protocol.version", SUPPORTED_VERSION),
            KeyValue::new("a2a.protocol.binding", binding.name()),
        ];
        match binding {
            Binding::JsonRpc => attributes.extend([
                KeyValue::new("rpc.system", "jsonrpc"),
                KeyValue::new("rpc.method", op.name()),
                KeyValue::new("rpc.jsonrpc.version", "2.0"),
            ]),
            Binding::Grpc => {
                let (service, method) = (op.grpc_path()[1..]).split_once('/').unwrap_or_default();
                attributes.extend([
                    KeyValue::new("rpc.system", "grpc"),
                    KeyValue::new("rpc.service", service),
                    KeyValue::new("rpc.method", method),
                ]);
            }
            Binding::HttpJson => {
                attributes.push(KeyValue::new("url.template", op.http_rule().path));
            }
        }
        attributes.extend([
            KeyValue::new("http.request.method", request.method.as_str().to_owned()),
            KeyValue::new("url.path", clipped(request.uri.path()).into_owned()),
        ]);
        if let Some(client) = request.extensions.get::<super::ConnectionAddrs>() {
            attributes.push(KeyValue::new(
                "client.address",
                client.client.ip().to_string(),
            ));
            attributes.push(KeyValue::new(
                "client.port",
                i64::from(client.client.port()),
            ));
        }
        if let Some(id) = id {
            attributes.push(KeyValue::new(
                "rpc.jsonrpc.request_id",
                clipped(id.trim_matches('"')).into_owned(),
            ));
        }
        let span = tracer
            .span_builder(op.name())
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        Some(ServerSpan {
            span,
            binding,
            profile,
            frames: 0,
            task: None,
            state: None,
            message: None,
        })
    }

    /// The trace id, for the access log.
    pub(crate) fn trace_id(&self) -> TraceId {
        self.span.span_context().trace_id()
    }

    /// Records the caller: `enduser.id` (its name, bounded and escaped; none for an
    /// anonymous caller) and the scheme that proved it.
    pub(crate) fn principal(&mut self, principal: &crate::auth::Principal) {
        if !principal.name.is_empty() {
            let name = clipped(&principal.name).into_owned();
            self.span.set_attribute(KeyValue::new("enduser.id", name));
        }
        let scheme = principal.scheme.as_str();
        self.span
            .set_attribute(KeyValue::new("a2a_gateway.auth.scheme", scheme));
    }

    /// Records the decoded request's tenant, task and message ids.
    pub(crate) fn request(&mut self, request: &Request) {
        let tenant = request.tenant();
        if !tenant.is_empty() {
            self.span
                .set_attribute(KeyValue::new("a2a.tenant", clipped(tenant).into_owned()));
        }
        let (task, message) = request_ids(request);
        self.ids(task, message);
    }

    /// The context that makes the backend call a child of this span; the client's own
    /// `traceparent`/`tracestate` leave the forwarded headers (the backend writes this one).
    pub(crate) fn context(
        &self,
        forwarded: &mut Vec<(HeaderName, HeaderValue)>,
    ) -> Box<TraceContext> {
        forwarded.retain(|(name, _)| !is_trace_header(name));
        Box::new(TraceContext(self.span.span_context().clone()))
    }

    /// Records what a unary reply says about its task.
    pub(crate) fn reply(&mut self, reply: &Reply) {
        match reply {
            Reply::SendMessage(response) => match &response.payload {
                Some(send_message_response::Payload::Task(task)) => self.task(task),
                Some(send_message_response::Payload::Message(message)) => self.message(message),
                None => {}
            },
            Reply::GetTask(task) | Reply::CancelTask(task) => self.task(task),
            _ => {}
        }
    }

    /// Counts one stream event sent to the client and records its task state.
    pub(crate) fn event(&mut self, event: &crate::proto::StreamResponse) {
        self.frames += 1;
        match &event.payload {
            Some(stream_response::Payload::Task(task)) => self.task(task),
            Some(stream_response::Payload::StatusUpdate(update)) => {
                self.ids(Some(&update.task_id), None);
                if let Some(status) = &update.status {
                    self.state(status.state);
                }
            }
            Some(stream_response::Payload::ArtifactUpdate(update)) => {
                self.ids(Some(&update.task_id), None);
            }
            Some(stream_response::Payload::Message(message)) => self.message(message),
            None => {}
        }
    }

    /// Counts a final error event sent to the client.
    pub(crate) fn error_event(&mut self) {
        self.frames += 1;
    }

    /// Records how the call ended: its JSON-RPC error code (over gRPC its status code,
    /// over HTTP+JSON its HTTP status, in the route's profile) and message as the status.
    pub(crate) fn failed(&mut self, err: &A2aError) {
        let profile = self.profile;
        self.span.set_attribute(match self.binding {
            Binding::JsonRpc => KeyValue::new("rpc.jsonrpc.error_code", i64::from(err.kind.code())),
            Binding::Grpc => {
                let code = err.kind.grpc(profile) as i32;
                KeyValue::new("rpc.grpc.status_code", i64::from(code))
            }
            Binding::HttpJson => KeyValue::new(
                "http.response.status_code",
                i64::from(err.kind.http(profile)),
            ),
        });
        self.span.set_status(Status::error(format!(
            "{}: {}",
            err.kind.code(),
            clip_message(&err.message)
        )));
    }

    fn task(&mut self, task: &Task) {
        self.ids(Some(&task.id), None);
        if let Some(status) = &task.status {
            self.state(status.state);
        }
    }

    fn message(&mut self, message: &Message) {
        let task = Some(message.task_id.as_str());
        self.ids(task, Some(&message.message_id));
    }

    fn state(&mut self, state: i32) {
        if let Ok(state) = TaskState::try_from(state) {
            self.state = Some(state.as_str_name());
        }
    }

    fn ids(&mut self, task: Option<&str>, message: Option<&str>) {
        for (field, value) in [(&mut self.task, task), (&mut self.message, message)] {
            if let Some(value) = value.filter(|v| !v.is_empty()).map(clipped) {
                if field.as_deref() != Some(&*value) {
                    *field = Some(value.into_owned());
                }
            }
        }
    }
}

impl Drop for ServerSpan {
    fn drop(&mut self) {
        for (key, value) in [
            ("a2a.task.id", self.task.take()),
            ("a2a.message.id", self.message.take()),
        ] {
            if let Some(value) = value {
                self.span.set_attribute(KeyValue::new(key, value));
            }
        }
        if let Some(state) = self.state {
            self.span
                .set_attribute(KeyValue::new("a2a.task.state", state));
        }
        if self.frames > 0 {
            let frames = i64::try_from(self.frames).unwrap_or(i64::MAX);
            self.span
                .set_attribute(KeyValue::new("a2a.stream.frames_sent", frames));
        }
        self.span.end();
    }
}

/// The task and message ids a request names (spec 3.1: where each operation names them).
fn request_ids(request: &Request) -> (Option<&str>, Option<&str>) {
    fn message(m: &Option<Message>) -> (Option<&str>, Option<&str>) {
        match m {
            Some(m) => (Some(m.task_id.as_str()), Some(m.message_id.as_str())),
            None => (None, None),
        }
    }
    match request {
        Request::Unary(UnaryRequest::SendMessage(r))
        | Request::Stream(StreamRequest::SendStreamingMessage(r)) => message(&r.message),
        Request::Unary(UnaryRequest::GetTask(r)) => (Some(&r.id), None),
        Request::Unary(UnaryRequest::CancelTask(r)) => (Some(&r.id), None),
        Request::Stream(StreamRequest::SubscribeToTask(r)) => (Some(&r.id), None),
        Request::Unary(UnaryRequest::CreateTaskPushNotificationConfig(r)) => {
            (Some(&r.task_id), None)
        }
        Request::Unary(UnaryRequest::GetTaskPushNotificationConfig(r)) => (Some(&r.task_id), None),
        Request::Unary(UnaryRequest::ListTaskPushNotificationConfigs(r)) => {
            (Some(&r.task_id), None)
        }
        Request::Unary(UnaryRequest::DeleteTaskPushNotificationConfig(r)) => {
            (Some(&r.task_id), None)
        }
        Request::Unary(UnaryRequest::ListTasks(_) | UnaryRequest::GetExtendedAgentCard(_)) => {
            (None, None)
        }
    }
}

/// The span of one push delivery (`push::deliver`): the child of the agent's post, whose
/// `traceparent` the relay keeps, so the call to the webhook joins the task's trace; its own
/// context goes to the webhook as `traceparent`. Covers every attempt.
pub(crate) struct DeliverySpan(Span);

impl DeliverySpan {
    /// Starts the span of a delivery to `host` (`None` when traces are off).
    pub(crate) fn start(traceparent: Option<&str>, host: &str) -> Option<DeliverySpan> {
        let tracer = tracer()?;
        let mut head = HeaderMap::new();
        if let Some(value) = traceparent.and_then(|v| HeaderValue::from_str(v).ok()) {
            head.insert(TRACEPARENT, value);
        }
        let parent = TraceContextPropagator::new().extract(&Headers(&head));
        let attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("server.address", clipped(host).into_owned()),
        ];
        let span = tracer
            .span_builder("POST")
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        Some(DeliverySpan(span))
    }

    /// Writes the span's context into the webhook's request head.
    pub(crate) fn write(&self, head: &mut HeaderMap) {
        TraceContext(self.0.span_context().clone()).write(head);
    }

    /// Ends the span with how the delivery ended.
    pub(crate) fn ended(mut self, outcome: &'static str, status: Option<u16>, attempts: u32) {
        self.0
            .set_attribute(KeyValue::new("a2a.push.outcome", outcome));
        self.0
            .set_attribute(KeyValue::new("a2a.push.attempts", i64::from(attempts)));
        if let Some(code) = status {
            self.0
                .set_attribute(KeyValue::new("http.response.status_code", i64::from(code)));
        }
        if outcome != "delivered" {
            self.0.set_status(Status::error(outcome));
        }
        self.0.end();
    }
}

/// The hop a client span describes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hop<'a> {
    /// gRPC to `authority` (`host:port`).
    Grpc { authority: &'a str },
    /// HTTP+JSON: `method` on the agent at `base` (its URL); the path is the operation's
    /// rule (`url.template`), never the filled one.
    Http { method: &'a str, base: &'a str },
}

/// The client span of one backend call. Ended when dropped (a stream's when the stream is),
/// with the last status the backend answered with.
pub(crate) struct ClientSpan {
    span: Span,
    http: bool,
    status: Option<u16>,
}

impl ClientSpan {
    /// Starts the span of a call of `op` over `hop` (`None` when traces are off), the child
    /// of the call's `trace` context (the server span's; a root without one), which it then
    /// replaces with its own.
    pub(crate) fn start(
        op: Op,
        hop: Hop<'_>,
        trace: &mut Option<Box<TraceContext>>,
    ) -> Option<ClientSpan> {
        let tracer = tracer()?;
        let parent = match trace.as_deref() {
            Some(TraceContext(parent)) => Context::new().with_remote_span_context(parent.clone()),
            None => Context::new(),
        };
        let mut attributes = vec![
            KeyValue::new("a2a.method.name", op.name()),
            KeyValue::new("a2a.protocol.version", SUPPORTED_VERSION),
        ];
        let (name, http): (Cow<'static, str>, bool) = match hop {
            Hop::Grpc { authority } => {
                attributes.extend([
                    KeyValue::new("a2a.protocol.binding", Binding::Grpc.name()),
                    KeyValue::new("rpc.system", "grpc"),
                    KeyValue::new("rpc.service", SERVICE),
                    KeyValue::new("rpc.method", op.name()),
                ]);
                server_address(&mut attributes, authority);
                (Cow::Borrowed(op.grpc_path().trim_start_matches('/')), false)
            }
            Hop::Http { method, base } => {
                attributes.extend([
                    KeyValue::new("a2a.protocol.binding", Binding::HttpJson.name()),
                    KeyValue::new("http.request.method", method.to_owned()),
                    KeyValue::new("url.template", op.http_rule().path),
                ]);
                if let Ok(uri) = base.parse::<http::Uri>() {
                    if let Some(authority) = uri.authority() {
                        server_address(&mut attributes, authority.as_str());
                    }
                }
                (
                    Cow::Owned(format!("{method} {}", op.http_rule().path)),
                    true,
                )
            }
        };
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        let own = TraceContext(span.span_context().clone());
        match trace {
            Some(context) => **context = own,
            None => *trace = Some(Box::new(own)),
        }
        Some(ClientSpan {
            span,
            http,
            status: None,
        })
    }

    /// Records the backend's answer: its `status` (`None` when it was not reached or its
    /// answer was unusable) and, for a failure, the client error's row and message.
    pub(crate) fn answered(&mut self, status: Option<u16>, failure: Option<(ErrorKind, &str)>) {
        self.status = status;
        if let Some((kind, message)) = failure {
            self.span.set_status(Status::error(format!(
                "{}: {}",
                kind.code(),
                clip_message(message)
            )));
        }
    }

    /// Counts one event received on a stream.
    pub(crate) fn event(&mut self) {
        self.span.add_event("a2a.stream.event", Vec::new());
    }
}

impl Drop for ClientSpan {
    fn drop(&mut self) {
        if let Some(code) = self.status {
            let key = if self.http {
                "http.response.status_code"
            } else {
                "rpc.grpc.status_code"
            };
            self.span.set_attribute(KeyValue::new(key, i64::from(code)));
        }
        self.span.end();
    }
}

fn server_address(attributes: &mut Vec<KeyValue>, authority: &str) {
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
            (host, port.parse::<i64>().ok())
        }
        _ => (authority, None),
    };
    attributes.push(KeyValue::new(
        "server.address",
        host.trim_matches(['[', ']']).to_owned(),
    ));
    if let Some(port) = port {
        attributes.push(KeyValue::new("server.port", port));
    }
}

/// The trace id of a W3C `traceparent` value (`00-<trace id>-<span id>-<flags>`).
pub(crate) fn traceparent_trace_id(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(const { HeaderName::from_static(TRACEPARENT) })?
        .to_str()
        .ok()?;
    let mut parts = value.split('-');
    let (_version, trace_id) = (parts.next()?, parts.next()?);
    (trace_id.len() == 32 && trace_id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(trace_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        flags: TraceFlags<'_>,
        vars: &[(&str, &str)],
    ) -> Result<Option<TraceSettings>, String> {
        let env = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        };
        TraceSettings::resolve(flags, &env).map_err(|e| e.to_string())
    }

    #[test]
    fn settings_from_flags_and_standard_variables() {
        assert!(resolve(TraceFlags::default(), &[]).unwrap().is_none());
        let s = resolve(
            TraceFlags::default(),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "http://c:4318/v1/traces");
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(s.sampler, SamplerChoice::ParentBasedAlwaysOn);
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ];
        let s = resolve(TraceFlags::default(), &vars).unwrap().unwrap();
        assert_eq!(s.endpoint, "http://c:4317");
        assert_eq!(s.protocol, OtlpProtocol::Grpc);
        assert_eq!(s.sampler, SamplerChoice::ParentBasedRatio(0.25));
        let flags = TraceFlags {
            endpoint: Some("http://flag:4318"),
            protocol: Some(OtlpProtocol::HttpProtobuf),
            sampler: Some("always_off"),
            sampler_arg: None,
        };
        let s = resolve(flags, &vars).unwrap().unwrap();
        assert_eq!(s.endpoint, "http://flag:4318/v1/traces");
        assert_eq!(s.sampler, SamplerChoice::AlwaysOff);
        let whole = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom")];
        let s = resolve(TraceFlags::default(), &whole).unwrap().unwrap();
        assert_eq!(s.endpoint, "http://c:4318/custom");
        let off = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert!(resolve(TraceFlags::default(), &off).unwrap().is_none());
    }

    #[test]
    fn bad_settings_name_their_source() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                &[endpoint, ("OTEL_TRACES_SAMPLER", "sometimes")],
                "OTEL_TRACES_SAMPLER:",
            ),
            (
                &[
                    endpoint,
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "2"),
                ],
                "OTEL_TRACES_SAMPLER_ARG",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                &[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")],
                "OTEL_TRACES_EXPORTER",
            ),
        ];
        for (vars, named) in cases {
            let err = resolve(TraceFlags::default(), vars).unwrap_err();
            assert!(err.starts_with(named), "{err}");
        }
    }

    #[test]
    fn trace_ids_of_traceparent_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(traceparent_trace_id(&headers), None);
        headers.insert(
            TRACEPARENT,
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        assert_eq!(
            traceparent_trace_id(&headers),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        headers.insert(
            TRACEPARENT,
            HeaderValue::from_static("00-xyz-00f067aa0ba902b7-01"),
        );
        assert_eq!(traceparent_trace_id(&headers), None);
    }

    /// The call's context goes out as a W3C `traceparent`, never indexed by HPACK (new on
    /// every call), and the client's own trace headers leave the forwarded ones.
    #[test]
    fn trace_context_is_written_into_the_head() {
        use opentelemetry::trace::{SpanId, TraceFlags as Flags, TraceState};
        let context = TraceContext(SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            Flags::SAMPLED,
            false,
            TraceState::default(),
        ));
        let mut head = HeaderMap::new();
        context.write(&mut head);
        let written = &head[TRACEPARENT];
        assert_eq!(
            written,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert!(written.is_sensitive());
        assert!(is_trace_header(&HeaderName::from_static(TRACESTATE)));
        assert!(!is_trace_header(&HeaderName::from_static("x-request-id")));
    }
}

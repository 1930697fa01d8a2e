//! Agents that fail, as real processes, in front of the real gateway binary: the case
//! table's types, the agents (`scripted_agent.py`, and the reference SDK agent
//! `tests/peers/agent.py` that gets SIGKILLed or restarted), the calls a case makes and
//! what is checked after it. `runner.rs` runs the selected cases in parallel.
//!
//! Every case starts its own gateway with two routes: `/faulty` in front of the failing
//! agent (`--timeout` and `--first-event-timeout` `TIMEOUT`, `--connect-timeout` 1 s,
//! `--backend-max-message` 1 MiB) and `/good` in front of one well-behaved reference agent
//! shared by all cases. After the case the gateway must still run, answer `/healthz`,
//! serve a call on `/good`, and have logged no panic.

pub mod agents;
mod runner;

use std::time::{Duration, Instant};

use serde_json::Value;

use self::agents::{Scripted, SdkAgent};
use crate::harness::calls::{
    frame_data, healthz, stream, summary, unary, Answered, Sse, Streamed, HARD_LIMIT,
};
use crate::harness::process::{TempFile, Watched};
use crate::harness::verdicts::Report;
pub use runner::verdict;

/// `--timeout` and `--first-event-timeout` of the failing route.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// `--connect-timeout` of the failing route.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// What "at once" means: well below `TIMEOUT`, with room for a loaded machine.
pub const AT_ONCE: Duration = Duration::from_secs(2);
/// How late after `TIMEOUT` a deadline answer may come.
const LATE: Duration = Duration::from_millis(1500);
/// `--backend-max-message` of the failing route.
pub const MAX_MESSAGE: usize = 1 << 20;
/// A restarted agent is served again this soon after it is up.
pub const RECONNECT: Duration = Duration::from_secs(2);

pub const UNAVAILABLE: &[&str] = &["BACKEND_UNAVAILABLE"];
pub const RESET: &[&str] = &["BACKEND_CONNECTION_RESET"];
pub const DEADLINE: &[&str] = &["BACKEND_DEADLINE_EXCEEDED"];
pub const BAD: &[&str] = &["BACKEND_BAD_RESPONSE"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Grpc,
    HttpJson,
}

impl Binding {
    /// The `--binding` value.
    fn flag(self) -> &'static str {
        match self {
            Binding::Grpc => "GRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }

    /// The name of the binding's test module and of its column in the table of `docs/errors.md`.
    pub fn module(self) -> &'static str {
        match self {
            Binding::Grpc => "grpc",
            Binding::HttpJson => "http_json",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Binding::Grpc => "gRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }
}

/// The failing agent.
#[derive(Clone, Copy, Debug)]
pub enum Agent {
    /// Nothing listens on the port.
    NotStarted,
    /// `scripted_agent.py` in this mode, reached at an `http://` URL.
    Scripted(&'static str),
    /// The same, reached at an `https://` URL (the route trusts the test CA).
    ScriptedAtHttps(&'static str),
    /// The reference agent, SIGKILLed one second into a blocking `SendMessage`.
    KilledMidUnary,
    /// The reference agent, SIGKILLed after a stream's first event.
    KilledMidStream,
    /// The reference agent, SIGKILLed between calls and started again on its ports.
    Restarted,
}

/// When the answer comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Within `AT_ONCE` of the call (of the SIGKILL for the killed agents).
    AtOnce,
    /// At the route's deadline: `TIMEOUT` (`--timeout`, or `--first-event-timeout` for a
    /// stream), not before and at most `LATE` after.
    Deadline,
    /// At `CONNECT_TIMEOUT` (`--connect-timeout`), not before and at most `LATE` after.
    ConnectTimeout,
}

/// What the client gets: -32603 with an `ErrorInfo` of domain `a2a-gateway` and one of
/// the reasons...
#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    /// ...as the JSON-RPC reply (for a stream: before any event, so no stream opens);
    Reply(&'static [&'static str], When),
    /// ...as the `event: error` frame that ends a stream after its first events.
    ErrorFrame(&'static [&'static str], When),
}

impl Outcome {
    pub fn reasons(self) -> &'static [&'static str] {
        match self {
            Outcome::Reply(reasons, _) | Outcome::ErrorFrame(reasons, _) => reasons,
        }
    }

    pub fn when(self) -> When {
        match self {
            Outcome::Reply(_, when) | Outcome::ErrorFrame(_, when) => when,
        }
    }
}

/// One row of the table (and of "When agents fail" in `docs/errors.md`).
pub struct Case {
    pub name: &'static str,
    pub binding: Binding,
    pub agent: Agent,
    /// A `SendMessage`, when the case has one.
    pub unary: Option<Outcome>,
    /// A `SendStreamingMessage`, when the case has one.
    pub stream: Option<Outcome>,
}

impl Case {
    /// `grpc::not_started`: the test's path.
    pub fn key(&self) -> String {
        format!("{}::{}", self.binding.module(), self.name)
    }
}

/// The well-behaved agent of every case's `/good` route.
pub struct Good {
    pub grpc: String,
    pub rest: String,
}

/// Runs one case: the agent, the gateway, the calls, then the checks that the gateway
/// is unharmed.
pub(crate) async fn run_case(case: &'static Case, good: &Good) -> Result<String, String> {
    let mut report = Report::default();
    let mut agent = Started::start(case).await?;
    let good_url = match case.binding {
        Binding::Grpc => &good.grpc,
        Binding::HttpJson => &good.rest,
    };
    let config = TempFile::new("toml", &routes(case.binding, &agent.url, good_url));
    let deadline = format!("{}ms", TIMEOUT.as_millis());
    let connect_timeout = format!("{}ms", CONNECT_TIMEOUT.as_millis());
    let max_message = MAX_MESSAGE.to_string();
    let args = [
        "--config",
        config.path(),
        "--workers",
        "2",
        "--timeout",
        &deadline,
        "--first-event-timeout",
        &deadline,
        "--connect-timeout",
        &connect_timeout,
        "--backend-max-message",
        &max_message,
    ];
    let log_name = format!("faults-{}-{}", case.binding.module(), case.name);
    let mut gw = Watched::start(&args, &log_name).await;
    let faulty = format!("{}/faulty/a2a/jsonrpc", gw.origin());
    match case.agent {
        Agent::NotStarted | Agent::Scripted(_) | Agent::ScriptedAtHttps(_) => {
            let (unary, stream) = tokio::join!(
                async {
                    let mut report = Report::default();
                    if let Some(expect) = case.unary {
                        let started = Instant::now();
                        let answer = unary(&faulty, "hello").await;
                        check_reply(expect, "unary", &answer, started, &mut report);
                    }
                    report
                },
                async {
                    let mut report = Report::default();
                    if let Some(expect) = case.stream {
                        check_stream(expect, &faulty, "stream", &mut report).await;
                    }
                    report
                },
            );
            report.extend(unary);
            report.extend(stream);
        }
        Agent::KilledMidUnary => killed_mid_unary(case, &mut agent, &faulty, &mut report).await,
        Agent::KilledMidStream => killed_mid_stream(case, &mut agent, &faulty, &mut report).await,
        Agent::Restarted => restarted(case, &mut agent, &faulty, &mut report).await,
    }
    let good_route = format!("{}/good/a2a/jsonrpc", gw.origin());
    check_alive(&mut gw, &good_route, &mut report).await;
    report.outcome()
}

/// The gateway's config: the failing route (trusting the test CA) and the good one, whose
/// own deadlines are the defaults (a loaded machine must not make the good agent look slow).
fn routes(binding: Binding, faulty: &str, good: &str) -> String {
    let binding = binding.flag();
    let ca = crate::harness::test_pki().ca_file.display();
    format!(
        r#"
[[route]]
name = "faulty"
path = "/faulty"
binding = "{binding}"
backend = "{faulty}"
backend-ca = "{ca}"

[[route]]
name = "good"
path = "/good"
binding = "{binding}"
backend = "{good}"
timeout = "30s"
first-event-timeout = "30s"
"#
    )
}

/// The failing agent of a case, running (or not) for as long as the case.
struct Started {
    /// The failing route's backend URL.
    url: String,
    /// Kept for the case's lifetime (the process is killed when dropped).
    _scripted: Option<Scripted>,
    /// The port a not-started agent would have, kept closed.
    _closed: Option<crate::harness::ClosedPort>,
    sdk: Option<SdkAgent>,
}

impl Started {
    async fn start(case: &Case) -> Result<Started, String> {
        let rest = |url: String| match case.binding {
            Binding::Grpc => url,
            Binding::HttpJson => format!("{url}/rest"),
        };
        Ok(match case.agent {
            Agent::NotStarted => {
                let closed = crate::harness::ClosedPort::new();
                Started {
                    url: rest(format!("http://127.0.0.1:{}", closed.port())),
                    _closed: Some(closed),
                    _scripted: None,
                    sdk: None,
                }
            }
            Agent::Scripted(mode) | Agent::ScriptedAtHttps(mode) => {
                let scripted = Scripted::start(mode).await?;
                let scheme = match case.agent {
                    Agent::ScriptedAtHttps(_) => "https",
                    _ => "http",
                };
                Started {
                    url: rest(format!("{scheme}://127.0.0.1:{}", scripted.port)),
                    _scripted: Some(scripted),
                    _closed: None,
                    sdk: None,
                }
            }
            Agent::KilledMidUnary | Agent::KilledMidStream | Agent::Restarted => {
                let sdk = SdkAgent::start(0, 0).await?;
                Started {
                    url: match case.binding {
                        Binding::Grpc => sdk.grpc.clone(),
                        Binding::HttpJson => sdk.rest.clone(),
                    },
                    _scripted: None,
                    _closed: None,
                    sdk: Some(sdk),
                }
            }
        })
    }

    fn sdk(&mut self) -> &mut SdkAgent {
        self.sdk.as_mut().expect("a reference agent case")
    }
}

async fn killed_mid_unary(case: &Case, agent: &mut Started, url: &str, report: &mut Report) {
    let expect = case.unary.expect("a unary outcome");
    // 30 s of work: the blocking SendMessage is in flight when the agent dies.
    let call = unary(url, "slow:30");
    tokio::pin!(call);
    let early = tokio::time::timeout(Duration::from_secs(1), &mut call).await;
    if let Ok(answer) = early {
        return report.failures.push(format!(
            "the call ended before the kill: {}",
            answer.shown()
        ));
    }
    agent.sdk().sigkill();
    let killed = Instant::now();
    let answer = call.await;
    check_reply(expect, "unary after SIGKILL", &answer, killed, report);
}

async fn killed_mid_stream(case: &Case, agent: &mut Started, url: &str, report: &mut Report) {
    let expect = case.stream.expect("a stream outcome");
    let mut sse = match stream(url, "slow:30").await {
        Ok(Streamed::Events(sse)) => sse,
        Ok(Streamed::Json(reply)) => {
            return report.failures.push(format!("no stream opened: {reply}"));
        }
        Err(e) => return report.failures.push(format!("no stream opened: {e}")),
    };
    match sse.data(HARD_LIMIT).await {
        Ok(Some(first)) if first.get("result").is_some() => {}
        other => return report.failures.push(format!("first event: {other:?}")),
    }
    agent.sdk().sigkill();
    let killed = Instant::now();
    check_error_frame(expect, "stream after SIGKILL", &mut sse, killed, report).await;
}

async fn restarted(case: &Case, agent: &mut Started, url: &str, report: &mut Report) {
    let expect = case.unary.expect("a unary outcome while the agent is down");
    let before = unary(url, "hello").await;
    report.check(before.is_result(), || {
        format!("before the kill: {}", before.shown())
    });
    let (grpc_port, http_port) = agent.sdk().ports();
    agent.sdk().sigkill();
    // The gateway learns of the lost connection (a FIN from the dead process's socket)
    // asynchronously; the call while the agent is down is about the refused reconnect.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let down = unary(url, "hello").await;
    check_reply(expect, "unary while down", &down, started, report);
    match SdkAgent::start(grpc_port, http_port).await {
        Ok(again) => agent.sdk = Some(again),
        Err(e) => return report.failures.push(format!("restart: {e}")),
    }
    let up = Instant::now();
    let after = unary(url, "hello").await;
    let streamed = match stream(url, "stream").await {
        Ok(Streamed::Events(mut sse)) => sse
            .data(HARD_LIMIT)
            .await
            .map(|d| d.is_some())
            .map_err(|e| e.to_string()),
        Ok(Streamed::Json(reply)) => Err(format!("no stream: {reply}")),
        Err(e) => Err(e),
    };
    let took = up.elapsed();
    report.notes.push(format!(
        "after the restart: unary {}, stream {streamed:?}, within {} ms of READY",
        after.shown(),
        took.as_millis()
    ));
    report.check(after.is_result(), || {
        format!("first call after the restart: {}", after.shown())
    });
    report.check(streamed == Ok(true), || {
        format!("first stream after the restart: {streamed:?}")
    });
    report.check(took <= RECONNECT, || {
        format!("served again after {took:?}, bound {RECONNECT:?}")
    });
}

/// Checks a JSON-RPC reply against `expect` and its time against `since`.
fn check_reply(
    expect: Outcome,
    what: &str,
    answer: &Answered,
    since: Instant,
    report: &mut Report,
) {
    let took = since.elapsed();
    report.notes.push(format!(
        "{what}: {} after {} ms",
        answer.shown(),
        took.as_millis()
    ));
    match (&answer.reply, expect) {
        (Ok(reply), Outcome::Reply(reasons, _)) => check_fault(what, reply, reasons, report),
        (_, Outcome::ErrorFrame(..)) => report
            .failures
            .push(format!("{what}: expected a stream, got {}", answer.shown())),
        (Err(e), _) => report.failures.push(format!("{what}: {e}")),
    }
    check_time(what, expect.when(), took, report);
}

fn check_fault(what: &str, reply: &Value, reasons: &[&str], report: &mut Report) {
    let error = &reply["error"];
    let info = &error["data"][0];
    let ok = error["code"] == -32603
        && info["domain"] == "a2a-gateway"
        && reasons.iter().any(|r| info["reason"] == *r);
    report.check(ok, || {
        format!("{what}: expected -32603 with a reason in {reasons:?}, got {reply}")
    });
}

fn check_time(what: &str, when: When, took: Duration, report: &mut Report) {
    let ok = match when {
        When::AtOnce => took <= AT_ONCE,
        When::Deadline => took >= TIMEOUT - Duration::from_millis(100) && took <= TIMEOUT + LATE,
        When::ConnectTimeout => {
            took >= CONNECT_TIMEOUT - Duration::from_millis(100) && took <= CONNECT_TIMEOUT + LATE
        }
    };
    report.check(ok, || {
        format!("{what}: answered after {took:?}, expected {when:?}")
    });
}

/// A `SendStreamingMessage` against `expect`.
async fn check_stream(expect: Outcome, url: &str, text: &str, report: &mut Report) {
    let started = Instant::now();
    match stream(url, text).await {
        Ok(Streamed::Json(reply)) => {
            let answer = Answered {
                elapsed: started.elapsed(),
                reply: Ok(reply),
            };
            check_reply(expect, "stream", &answer, started, report);
        }
        Ok(Streamed::Events(mut sse)) => {
            check_error_frame(expect, "stream", &mut sse, started, report).await
        }
        Err(e) => report.failures.push(format!("stream: {e}")),
    }
}

/// Reads a stream's events up to its `event: error` frame.
async fn check_error_frame(
    expect: Outcome,
    what: &str,
    sse: &mut Sse,
    since: Instant,
    report: &mut Report,
) {
    let Outcome::ErrorFrame(reasons, when) = expect else {
        return report.failures.push(format!(
            "{what}: a stream opened where {expect:?} was expected"
        ));
    };
    let mut events = 0;
    loop {
        match sse.frame(HARD_LIMIT).await {
            Ok(Some(frame)) if frame.starts_with(':') => {}
            Ok(Some(frame)) if frame.starts_with("event: error") => {
                let took = since.elapsed();
                let data = frame_data(&frame).unwrap_or(Value::Null);
                report.notes.push(format!(
                    "{what}: {events} events, then error frame {} after {} ms",
                    summary(&data),
                    took.as_millis()
                ));
                check_fault(what, &data, reasons, report);
                check_time(what, when, took, report);
                let end = sse.frame(AT_ONCE).await;
                return report.check(end == Ok(None), || {
                    format!("{what}: after the error frame: {end:?}")
                });
            }
            Ok(Some(_)) => events += 1,
            other => {
                return report.failures.push(format!(
                    "{what}: {events} events, then {other:?} instead of an error frame"
                ))
            }
        }
    }
}

/// The gateway still runs, answers `/healthz` and a call on the good route, and logged
/// no panic.
async fn check_alive(gw: &mut Watched, good: &str, report: &mut Report) {
    if !gw.process.running() {
        return report.failures.push("the gateway exited".into());
    }
    let health = healthz(gw.origin(), Duration::from_secs(2)).await;
    report.check(health.is_some(), || "no /healthz answer within 2 s".into());
    let started = Instant::now();
    let next = unary(good, "hello").await;
    let took = started.elapsed();
    report.check(next.is_result() && took <= Duration::from_secs(3), || {
        format!("the next good call got {} after {took:?}", next.shown())
    });
    let panics = gw.panics();
    report.check(panics.is_empty(), || {
        format!("panics: {}", panics.join(" | "))
    });
}

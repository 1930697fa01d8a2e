//! The hostile-backend suite's machinery: the case table's types and one case run against
//! the real gateway binary with every check. `runner.rs` runs the selected cases in
//! parallel, `server.rs` is the scripted HTTP/2 server, `frames.rs` its frames and HPACK.
//! The verdicts and reports it shares with the agent-fault runner are in
//! `harness/verdicts.rs`; the gateway is a `process::Watched` process, called through `calls`.

pub mod frames;
mod runner;
pub mod server;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::calls::{
    frame_data, healthz, stream, summary, unary, unary_within, Answered, SseError, Streamed,
    HARD_LIMIT,
};
use crate::harness::process::Watched;
use crate::harness::verdicts::Report;
use crate::harness::vitals::cpu_time;
pub use crate::harness::Scheme;
pub use runner::verdict;
pub use server::{Hostile, Peer, Script, Server};

/// The call after a case, to a well-behaved connection, must succeed within this.
const FOLLOW_UP: Duration = Duration::from_secs(3);

/// The gateway's unary deadline in every case (`--timeout`).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// What the client does in a case.
#[derive(Clone, Copy, Debug)]
pub enum Call {
    /// One `SendMessage`.
    Unary,
    /// One `SendMessage` of 100 KB: more than the 64 KiB an HTTP/2 stream may send before
    /// the server's SETTINGS arrive.
    LargeUnary,
    /// One `SendStreamingMessage` that must fail before its first event (a JSON reply).
    Stream,
    /// `SendStreamingMessage` whose SSE body is left unread for 3 s (so the gateway cannot
    /// pass events on), then read to its end, which must be an error frame.
    StalledStream,
    /// `SendStreamingMessage` that gets its first event and then nothing: the SSE stream
    /// must stay open with keepalive comments (`--keepalive 1s`, read for 3 s).
    QuietStream,
    /// This many `SendMessage` calls one after the other; the gateway's open descriptors
    /// must stay roughly constant.
    Repeated(usize),
    /// Two concurrent `SendMessage` calls on fresh connections, which the gateway's
    /// acceptor deals to its two workers.
    BothWorkers,
}

/// The answer a case expects.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// -32603 whose `error.data[0]` is an `ErrorInfo` of domain `a2a-gateway` with one of
    /// these reasons.
    Fault(&'static [&'static str]),
    /// A mapped A2A error: this code, with `error.data` present.
    Code(i64),
    /// A stream that stays open (`Call::QuietStream`).
    OpenStream,
    /// A result (the hostile part is what comes after the call).
    Reply,
}

/// One row of the table.
#[derive(Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub script: Script,
    pub hostile: Hostile,
    pub call: Call,
    pub expect: Expect,
    /// The answer must come within this time (for `StalledStream`: the error frame, once
    /// reading starts)...
    pub within: Duration,
    /// ...and not before this one (cases that must wait for the deadline).
    pub not_before: Duration,
    /// Bound on the gateway's peak RSS (VmHWM), MiB.
    pub rss_mib: u64,
    /// Bound on the gateway's CPU time over the case. Such cases run alone, and `/healthz`
    /// must answer within 1 s every 250 ms while the hostile call runs.
    pub cpu: Option<Duration>,
}

/// One case against one scheme: the hostile call, the answer and its timing, then the
/// gateway's health, memory, CPU (and descriptors) afterwards.
pub(crate) async fn run_case(case: &'static Case, scheme: Scheme) -> Result<String, String> {
    let server = Server::spawn(case.script, case.hostile, scheme).await;
    let backend = format!("{}://127.0.0.1:{}", scheme.as_str(), server.addr.port());
    let ca_flags = scheme.ca_flags();
    let timeout = format!("{}ms", DEADLINE.as_millis());
    let mut args = vec![
        "--backend",
        &backend,
        "--timeout",
        &timeout,
        "--workers",
        "2",
        "--keepalive",
        "1s",
    ];
    args.extend(ca_flags.iter().map(String::as_str));
    let mut gw = Watched::start(&args, &format!("{}-{}", case.name, scheme.as_str())).await;
    let mut report = Report::default();
    let cpu_before = cpu_time(gw.process.pid());

    let probe = case
        .cpu
        .map(|_| tokio::spawn(probe_health(gw.origin().to_owned())));
    hostile_call(case, &gw, &mut report).await;
    if let Some(probe) = probe {
        match probe.is_finished() {
            true => {
                if let Ok(Err(e)) = probe.await {
                    report.fail(e);
                }
            }
            false => probe.abort(),
        }
    }

    server.release();
    tokio::time::sleep(Duration::from_millis(300)).await;
    check_alive(case, &mut gw, &mut report).await;

    let violations = server.violations();
    report.check(violations.is_empty(), || violations.join(", "));
    let peak = gw.peak_rss_mib();
    report.note(format!("peak RSS {peak:.0} MiB"));
    report.check(peak <= case.rss_mib as f64, || {
        format!("peak RSS {peak:.0} MiB > {} MiB", case.rss_mib)
    });
    let used = cpu_time(gw.process.pid()).saturating_sub(cpu_before);
    report.note(format!("CPU {:.2} s", used.as_secs_f64()));
    if let Some(limit) = case.cpu {
        report.check(used <= limit, || {
            format!(
                "CPU {:.2} s > {:.2} s",
                used.as_secs_f64(),
                limit.as_secs_f64()
            )
        });
    }
    report.outcome()
}

/// `/healthz` every 250 ms until aborted; an error once it takes over 1 s.
async fn probe_health(origin: String) -> Result<(), String> {
    let mut worst = Duration::ZERO;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match healthz(&origin, Duration::from_secs(1)).await {
            Some(took) => worst = worst.max(took),
            None => return Err(format!("/healthz gave no answer within 1 s during the hostile call (worst before: {worst:?})")),
        }
    }
}

/// The message text of every call but `LargeUnary`'s.
const TEXT: &str = "hi";

async fn hostile_call(case: &Case, gw: &Watched, report: &mut Report) {
    let url = gw.jsonrpc();
    match case.call {
        Call::Unary => {
            let answered = unary(url, TEXT).await;
            check_answer(case, &answered, report);
        }
        Call::LargeUnary => {
            let answered = unary_within(url, &"hi".repeat(50_000), HARD_LIMIT).await;
            check_answer(case, &answered, report);
        }
        Call::BothWorkers => {
            let (a, b) = tokio::join!(unary(url, TEXT), unary(url, TEXT));
            check_answer(case, &a, report);
            check_answer(case, &b, report);
        }
        Call::Repeated(calls) => {
            let mut before = 0;
            let mut bad = 0;
            let started = Instant::now();
            for i in 0..calls {
                // A client that answers these calls slowly must not hold the suite up.
                if bad >= 3 || started.elapsed() > Duration::from_secs(30) {
                    report.fail(format!(
                        "gave up after {i} calls ({bad} answered wrongly) in {:.1} s",
                        started.elapsed().as_secs_f64()
                    ));
                    break;
                }
                if i == 10 {
                    before = gw.fds();
                }
                let mut each = Report::default();
                let answered = unary(url, TEXT).await;
                check_answer(case, &answered, &mut each);
                if i == 0 || !each.failures.is_empty() && bad == 0 {
                    report.notes.append(&mut each.notes);
                }
                if !each.failures.is_empty() {
                    bad += 1;
                    if bad == 1 {
                        report.fail(format!("call {i}: {}", each.failures.join(", ")));
                    }
                }
            }
            let after = gw.fds();
            report.note(format!("{bad}/{calls} calls answered wrongly; open fds {before} after 10 calls, {after} after {calls}"));
            report.check(after <= before + 10, || {
                format!("open descriptors grew from {before} to {after} over {calls} calls")
            });
        }
        Call::Stream => {
            let started = Instant::now();
            let reply = match stream(url, TEXT).await {
                Ok(Streamed::Json(v)) => Ok(v),
                Ok(Streamed::Events(mut sse)) => Err(format!(
                    "an event stream opened; first frame {:?}",
                    sse.frame(Duration::from_secs(1)).await
                )),
                Err(e) => Err(e),
            };
            let answered = Answered {
                elapsed: started.elapsed(),
                reply,
            };
            check_answer(case, &answered, report);
        }
        Call::StalledStream => stalled_stream(case, gw, report).await,
        Call::QuietStream => quiet_stream(gw, report).await,
    }
}

/// Checks one JSON-RPC reply and its timing against the case.
fn check_answer(case: &Case, answered: &Answered, report: &mut Report) {
    let secs = answered.elapsed.as_secs_f64();
    match &answered.reply {
        Ok(reply) => {
            report.note(format!("answer {} in {secs:.2} s", summary(reply)));
            check_reply(case.expect, reply, report);
        }
        Err(e) => {
            report.note(format!("no JSON-RPC answer after {secs:.2} s: {e}"));
            report.fail(format!("no JSON-RPC answer: {e}"));
        }
    }
    report.check(answered.elapsed <= case.within, || {
        format!("answered after {secs:.2} s, bound {:?}", case.within)
    });
    report.check(answered.elapsed >= case.not_before, || {
        format!("answered after {secs:.2} s, before {:?}", case.not_before)
    });
}

fn check_reply(expect: Expect, reply: &Value, report: &mut Report) {
    let error = &reply["error"];
    match expect {
        Expect::Fault(reasons) => {
            let info = &error["data"][0];
            let ok = error["code"] == -32603
                && info["domain"] == "a2a-gateway"
                && reasons.iter().any(|r| info["reason"] == *r);
            report.check(ok, || {
                format!("expected -32603 with reason in {reasons:?}, got {reply}")
            });
        }
        Expect::Code(code) => {
            let ok =
                error["code"] == code && error["data"].as_array().is_some_and(|d| !d.is_empty());
            report.check(ok, || {
                format!("expected {code} with error.data, got {reply}")
            });
        }
        Expect::OpenStream => report.fail(format!("expected a stream, got {reply}")),
        Expect::Reply => report.check(reply.get("result").is_some(), || {
            format!("expected a result, got {reply}")
        }),
    }
}

async fn stalled_stream(case: &Case, gw: &Watched, report: &mut Report) {
    let mut sse = match stream(gw.jsonrpc(), TEXT).await {
        Ok(Streamed::Events(sse)) => sse,
        Ok(Streamed::Json(reply)) => {
            report.note(format!("answer {} before any event", summary(&reply)));
            return check_reply(case.expect, &reply, report);
        }
        Err(e) => return report.fail(format!("no answer: {e}")),
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    report.note(format!(
        "RSS after 3 s unread: peak {:.0} MiB",
        gw.peak_rss_mib()
    ));
    let started = Instant::now();
    let mut events = 0usize;
    loop {
        let left = HARD_LIMIT.saturating_sub(started.elapsed());
        match sse.frame(left).await {
            Ok(Some(frame)) if frame.starts_with(':') => {}
            Ok(Some(frame)) => {
                let data = frame_data(&frame).unwrap_or(Value::Null);
                if frame.starts_with("event: error") || !data["error"].is_null() {
                    let secs = started.elapsed().as_secs_f64();
                    report.note(format!(
                        "{events} events, then error frame {} ({secs:.2} s of reading)",
                        summary(&data)
                    ));
                    check_reply(case.expect, &data, report);
                    report.check(started.elapsed() <= case.within, || {
                        format!(
                            "error frame after {secs:.2} s of reading, bound {:?}",
                            case.within
                        )
                    });
                    return;
                }
                events += 1;
            }
            Ok(None) => {
                return report.fail(format!(
                    "stream ended after {events} events without an error frame"
                ))
            }
            Err(e) => return report.fail(format!("after {events} events: {e} (no error frame)")),
        }
    }
}

async fn quiet_stream(gw: &Watched, report: &mut Report) {
    let started = Instant::now();
    let mut sse = match stream(gw.jsonrpc(), TEXT).await {
        Ok(Streamed::Events(sse)) => sse,
        Ok(Streamed::Json(reply)) => {
            return report.fail(format!("expected a stream, got {}", summary(&reply)))
        }
        Err(e) => return report.fail(format!("no answer: {e}")),
    };
    match sse.frame(Duration::from_secs(2)).await {
        Ok(Some(f)) if frame_data(&f).is_some_and(|d| d.get("result").is_some()) => {}
        other => return report.fail(format!("first frame: {other:?}")),
    }
    let first = started.elapsed().as_secs_f64();
    let mut keepalives = 0;
    let quiet_until = Instant::now() + Duration::from_secs(3);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        match sse.frame(left).await {
            Ok(Some(f)) if f.starts_with(':') => keepalives += 1,
            Ok(Some(f)) => return report.fail(format!("unexpected frame {f:?}")),
            Ok(None) => return report.fail("the quiet stream was ended".into()),
            Err(SseError::Timeout(_)) => break,
            Err(e) => return report.fail(format!("the quiet stream broke: {e}")),
        }
    }
    report.note(format!(
        "first event after {first:.2} s, then {keepalives} keepalives in 3 s, still open"
    ));
    report.check(keepalives >= 2, || {
        format!("{keepalives} keepalive comments in 3 s with --keepalive 1s")
    });
}

/// The gateway lives, answers `/healthz` at once, did not panic, and (if the hostile
/// server serves later connections well) answers the next call.
async fn check_alive(case: &Case, gw: &mut Watched, report: &mut Report) {
    if !gw.process.running() {
        let why = match gw.killed_for_memory() {
            true => "killed by the test's watchdog for its RSS",
            false => "exited",
        };
        return report.fail(format!("gateway {why}"));
    }
    // 2 s, not the 1 s of the probes during CPU cases (which run alone): the other cases
    // running beside this one load the machine's 2 cores; a wedged worker never answers.
    match healthz(gw.origin(), Duration::from_secs(2)).await {
        Some(took) => report.note(format!("/healthz after in {} ms", took.as_millis())),
        None => report.fail("/healthz gave no answer within 2 s after the case".into()),
    }
    if case.hostile == Hostile::First {
        let next = unary_within(gw.jsonrpc(), TEXT, FOLLOW_UP).await;
        let ok = next.elapsed <= FOLLOW_UP && next.is_result();
        let secs = next.elapsed.as_secs_f64();
        let got = next.shown();
        report.check(ok, || {
            format!("the next call to a well-behaved connection got {got} in {secs:.2} s")
        });
    }
    let panics = gw.panics();
    report.check(panics.is_empty(), || {
        format!("gateway log: {}", panics.join(" | "))
    });
}

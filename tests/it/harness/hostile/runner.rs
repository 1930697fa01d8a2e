//! Runs every case the test harness selected, in parallel, on a thread of its own, while
//! each `#[test]` waits for its own verdict: the harness runs tests two at a time on two
//! cores, and most cases wait for a 5 s deadline, so one case per test thread would take
//! minutes.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::{run_case, Case, Scheme};
use crate::harness::test_name;
use crate::harness::verdicts::{judge, selected_by_args, Verdicts};

/// The test body of one row and scheme of the suite whose `module_path!()` is `suite`:
/// waits for the runner's verdict, panics on failure.
pub fn verdict(suite: &str, cases: &'static [Case], name: &str, scheme: Scheme) {
    let runner = RUNNER.get_or_init(|| Runner::start(suite, cases));
    let key = format!("{}::{name}", scheme.as_str());
    if !runner.selected.contains(&key) {
        // The harness runs a test the runner did not expect (a command line form that
        // `selected_by_args` does not know): run it here.
        let case = cases.iter().find(|c| c.name == name).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        return judge(&key, rt.block_on(run_case(case, scheme)));
    }
    runner
        .verdicts
        .await_verdict(&key, Duration::from_secs(900));
}

static RUNNER: OnceLock<Runner> = OnceLock::new();

/// Cases running at once (each has its own gateway process and server).
const PARALLEL: u32 = 8;

struct Runner {
    /// The tests the runner runs (`http::name`).
    selected: HashSet<String>,
    verdicts: Arc<Verdicts>,
}

impl Runner {
    /// Runs, on a thread of its own, every case the test harness was asked to run (its
    /// name filters and `--skip`, `--exact` as in `cargo test`); CPU-bound cases first
    /// and alone.
    fn start(suite: &str, cases: &'static [Case]) -> Runner {
        let verdicts = Arc::new(Verdicts::default());
        let mut selected: Vec<(&'static Case, Scheme)> = cases
            .iter()
            .flat_map(|c| [(c, Scheme::Http), (c, Scheme::Https)])
            .filter(|(c, s)| {
                selected_by_args(&test_name(suite, &format!("{}::{}", s.as_str(), c.name)))
            })
            .collect();
        selected.sort_by_key(|(c, _)| c.cpu.is_none());
        let keys = selected
            .iter()
            .map(|(c, s)| format!("{}::{}", s.as_str(), c.name))
            .collect();
        let reported = verdicts.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let slots = Arc::new(tokio::sync::Semaphore::new(PARALLEL as usize));
                let mut tasks = Vec::new();
                for (case, scheme) in selected {
                    let need = if case.cpu.is_some() { PARALLEL } else { 1 };
                    // In table order: a CPU case waits for the running ones, then runs alone.
                    let permit = slots.clone().acquire_many_owned(need).await.unwrap();
                    let reported = reported.clone();
                    tasks.push(tokio::spawn(async move {
                        let _permit = permit;
                        let run = tokio::spawn(run_case(case, scheme)).await;
                        let outcome = run.unwrap_or_else(|e| Err(format!("case panicked: {e}")));
                        let key = format!("{}::{}", scheme.as_str(), case.name);
                        reported.report(key, outcome);
                    }));
                }
                for task in tasks {
                    let _ = task.await;
                }
            });
        });
        Runner {
            selected: keys,
            verdicts,
        }
    }
}

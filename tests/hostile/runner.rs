//! Runs every case the test harness selected, in parallel, on a thread of its own, while
//! each `#[test]` waits for its own verdict: the harness runs tests two at a time on two
//! cores, and most cases wait for a 5 s deadline, so one case per test thread would take
//! minutes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{run_case, Case, Scheme};

/// The test body of one row and scheme: waits for the runner's verdict, panics on failure.
pub fn verdict(cases: &'static [Case], name: &str, scheme: Scheme) {
    let runner = RUNNER.get_or_init(|| Runner::start(cases));
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
        return report_verdict(&key, rt.block_on(run_case(case, scheme)));
    }
    let mut results = runner.results.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let outcome = loop {
        if let Some(outcome) = results.remove(&key) {
            break outcome;
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "{key}: the runner gave no verdict"
        );
        results = runner
            .done
            .wait_timeout(results, Duration::from_secs(1))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    };
    drop(results);
    report_verdict(&key, outcome);
}

fn report_verdict(key: &str, outcome: Result<String, String>) {
    match outcome {
        Ok(summary) => println!("PASS {key}: {summary}"),
        Err(summary) => panic!("FAIL {key}: {summary}"),
    }
}

static RUNNER: OnceLock<Runner> = OnceLock::new();

/// Cases running at once (each has its own gateway process and server).
const PARALLEL: u32 = 8;

struct Runner {
    /// The tests the runner runs (`http::name`).
    selected: HashSet<String>,
    results: Arc<Mutex<HashMap<String, Result<String, String>>>>,
    done: Arc<Condvar>,
}

impl Runner {
    /// Runs, on a thread of its own, every case the test harness was asked to run (its
    /// name filters and `--skip`, `--exact` as in `cargo test`); CPU-bound cases first
    /// and alone.
    fn start(cases: &'static [Case]) -> Runner {
        let results = Arc::new(Mutex::new(HashMap::new()));
        let done = Arc::new(Condvar::new());
        let mut selected: Vec<(&'static Case, Scheme)> = cases
            .iter()
            .flat_map(|c| [(c, Scheme::Http), (c, Scheme::Https)])
            .filter(|(c, s)| selected_by_args(&format!("{}::{}", s.as_str(), c.name)))
            .collect();
        selected.sort_by_key(|(c, _)| c.cpu.is_none());
        let keys = selected
            .iter()
            .map(|(c, s)| format!("{}::{}", s.as_str(), c.name))
            .collect();
        let (r, d) = (results.clone(), done.clone());
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
                    let (r, d) = (r.clone(), d.clone());
                    tasks.push(tokio::spawn(async move {
                        let _permit = permit;
                        let run = tokio::spawn(run_case(case, scheme)).await;
                        let outcome = run.unwrap_or_else(|e| Err(format!("case panicked: {e}")));
                        let key = format!("{}::{}", scheme.as_str(), case.name);
                        r.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key, outcome);
                        d.notify_all();
                    }));
                }
                for task in tasks {
                    let _ = task.await;
                }
            });
        });
        Runner {
            selected: keys,
            results,
            done,
        }
    }
}

/// Whether the test harness's command line selects the test `name`.
fn selected_by_args(name: &str) -> bool {
    let mut filters = Vec::new();
    let mut skips = Vec::new();
    let mut exact = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--exact" => exact = true,
            "--skip" => skips.extend(args.next()),
            a if a.starts_with("--skip=") => skips.push(a["--skip=".len()..].to_owned()),
            "--test-threads" | "--color" | "--format" | "--logfile" | "-Z" | "--shuffle-seed" => {
                args.next();
            }
            a if a.starts_with('-') => {}
            a => filters.push(a.to_owned()),
        }
    }
    let hit = |f: &String| {
        if exact {
            name == f
        } else {
            name.contains(f.as_str())
        }
    };
    (filters.is_empty() || filters.iter().any(hit))
        && !skips.iter().any(|s| name.contains(s.as_str()))
}

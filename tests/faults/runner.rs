//! Runs every case the test harness selected at once, on a thread of its own, while each
//! `#[test]` waits for its own verdict: the harness runs two tests at a time on two
//! cores, and many cases wait for a deadline or for Python to start.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::agents::SdkAgent;
use super::{run_case, Case, Good};

/// The test body of one row: waits for the runner's verdict, panics on a failure.
pub fn verdict(cases: &'static [Case], key: &str) {
    let runner = RUNNER.get_or_init(|| Runner::start(cases));
    assert!(
        runner.selected.contains(key),
        "{key}: not selected by the command line as the runner read it"
    );
    let mut results = runner.results.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let outcome = loop {
        if let Some(outcome) = results.remove(key) {
            break outcome;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{key}: the runner gave no verdict"
        );
        results = runner
            .done
            .wait_timeout(results, Duration::from_secs(1))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    };
    match outcome {
        Ok(summary) => println!("PASS {key}: {summary}"),
        Err(summary) => panic!("FAIL {key}: {summary}"),
    }
}

static RUNNER: OnceLock<Runner> = OnceLock::new();

struct Runner {
    selected: HashSet<String>,
    results: Arc<Mutex<HashMap<String, Result<String, String>>>>,
    done: Arc<Condvar>,
}

impl Runner {
    /// Starts the good agent, then every selected case at once.
    fn start(cases: &'static [Case]) -> Runner {
        let selected: Vec<&'static Case> = cases
            .iter()
            .filter(|c| selected_by_args(&c.key()))
            .collect();
        let results = Arc::new(Mutex::new(HashMap::new()));
        let done = Arc::new(Condvar::new());
        let keys = selected.iter().map(|c| c.key()).collect();
        let (r, d) = (results.clone(), done.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let report = move |key: String, outcome: Result<String, String>| {
                    r.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key, outcome);
                    d.notify_all();
                };
                let good = match SdkAgent::start(0, 0).await {
                    Ok(agent) => agent,
                    Err(e) => {
                        for case in selected {
                            report(case.key(), Err(format!("the good agent: {e}")));
                        }
                        return;
                    }
                };
                let urls = Arc::new(Good {
                    grpc: good.grpc.clone(),
                    rest: good.rest.clone(),
                });
                // Killed before the last verdict: the test process exits once every test
                // has its verdict, without running this thread's destructors.
                let good = Arc::new(Mutex::new(Some(good)));
                let left = Arc::new(AtomicUsize::new(selected.len()));
                let tasks: Vec<_> = selected
                    .into_iter()
                    .map(|case| {
                        let (urls, good) = (urls.clone(), good.clone());
                        let (left, report) = (left.clone(), report.clone());
                        tokio::spawn(async move {
                            let run = tokio::spawn(async move { run_case(case, &urls).await });
                            let outcome = run
                                .await
                                .unwrap_or_else(|e| Err(format!("case panicked: {e}")));
                            if left.fetch_sub(1, Ordering::SeqCst) == 1 {
                                drop(good.lock().unwrap_or_else(|e| e.into_inner()).take());
                            }
                            report(case.key(), outcome);
                        })
                    })
                    .collect();
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

/// Whether the test harness's command line selects the test `name` (its filters,
/// `--skip` and `--exact`, as `cargo test` passes them).
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

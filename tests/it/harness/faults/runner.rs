//! Runs every case the test harness selected at once, on a thread of its own, while each
//! `#[test]` waits for its own verdict: the harness runs two tests at a time on two
//! cores, and many cases wait for a deadline or for Python to start.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::agents::SdkAgent;
use super::{run_case, Case, Good};
use crate::harness::test_name;
use crate::harness::verdicts::{selected_by_args, Outcome, Verdicts};

/// The test body of one row of the suite whose `module_path!()` is `suite`: waits for the
/// runner's verdict, panics on a failure.
pub fn verdict(suite: &str, cases: &'static [Case], key: &str) {
    let runner = RUNNER.get_or_init(|| Runner::start(suite, cases));
    assert!(
        runner.selected.contains(key),
        "{key}: not selected by the command line as the runner read it"
    );
    runner.verdicts.await_verdict(key, Duration::from_secs(300));
}

static RUNNER: OnceLock<Runner> = OnceLock::new();

struct Runner {
    selected: HashSet<String>,
    verdicts: Arc<Verdicts>,
}

impl Runner {
    /// Starts the good agent, then every selected case at once.
    fn start(suite: &str, cases: &'static [Case]) -> Runner {
        let selected: Vec<&'static Case> = cases
            .iter()
            .filter(|c| selected_by_args(&test_name(suite, &c.key())))
            .collect();
        let verdicts = Arc::new(Verdicts::default());
        let keys = selected.iter().map(|c| c.key()).collect();
        let reported = verdicts.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let report = move |key: String, outcome: Outcome| reported.report(key, outcome);
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
            verdicts,
        }
    }
}

//! What the two case runners (`hostile/runner.rs`, `faults/runner.rs`) share: which cases
//! the test harness's command line selects, what a case reports, and the verdicts their
//! cases report on the runner's thread, awaited by each case's own test.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A case's outcome: a summary either way.
pub type Outcome = Result<String, String>;

/// What a case observed, and what it found wrong.
#[derive(Default)]
pub struct Report {
    pub notes: Vec<String>,
    pub failures: Vec<String>,
}

impl Report {
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    pub fn fail(&mut self, failure: String) {
        self.failures.push(failure);
    }

    pub fn check(&mut self, ok: bool, failure: impl FnOnce() -> String) {
        if !ok {
            self.fail(failure());
        }
    }

    /// Adds what another part of the case reported.
    pub fn extend(&mut self, part: Report) {
        self.notes.extend(part.notes);
        self.failures.extend(part.failures);
    }

    /// The notes, and the failures if any.
    pub fn outcome(self) -> Outcome {
        let summary = self.notes.join("; ");
        if self.failures.is_empty() {
            Ok(summary)
        } else {
            Err(format!(
                "{summary}\n  failures: {}",
                self.failures.join("\n    ")
            ))
        }
    }
}

/// The verdicts reported so far, by case key.
#[derive(Default)]
pub struct Verdicts {
    results: Mutex<HashMap<String, Outcome>>,
    done: Condvar,
}

impl Verdicts {
    pub fn report(&self, key: String, outcome: Outcome) {
        self.results
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, outcome);
        self.done.notify_all();
    }

    /// Waits for `key`'s verdict (at most `limit`), then passes or panics with it.
    pub fn await_verdict(&self, key: &str, limit: Duration) {
        let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let outcome = loop {
            if let Some(outcome) = results.remove(key) {
                break outcome;
            }
            assert!(
                started.elapsed() < limit,
                "{key}: the runner gave no verdict"
            );
            results = self
                .done
                .wait_timeout(results, Duration::from_secs(1))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        drop(results);
        judge(key, outcome);
    }
}

/// Passes (printing the summary) or panics with it.
pub fn judge(key: &str, outcome: Outcome) {
    match outcome {
        Ok(summary) => println!("PASS {key}: {summary}"),
        Err(summary) => panic!("FAIL {key}: {summary}"),
    }
}

/// Whether the test harness's command line selects the test `name`.
pub fn selected_by_args(name: &str) -> bool {
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

//! Tests that need a process of their own run in a child process of this test binary,
//! which the test starts with the test harness's filter narrowed to it. The suites of the
//! crate share one process and run in parallel; a test that counts the allocations of the
//! whole process, measures its peak memory or needs variables in its environment would
//! see the other tests' work (or race them for the environment).

use std::process::Command;

/// Set in the child process to the name of the test it runs.
const OWN_PROCESS: &str = "A2A_TEST_OWN_PROCESS";

/// Whether the calling test, `name` in the module `module` (its `module_path!()`), is in
/// its own process and goes on with its body. If not, it runs itself in a child process
/// (with `env` added to its environment), asserts that it ran there and passed, and
/// returns false: the caller returns at once.
pub fn in_own_process(module: &str, name: &str, env: &[(&str, &str)]) -> bool {
    let test = super::test_name(module, name);
    if std::env::var(OWN_PROCESS).is_ok_and(|running| running == test) {
        return true;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([&test, "--exact", "--nocapture", "--test-threads=1"])
        .env(OWN_PROCESS, &test)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "{test} failed in its own process ({})",
        output.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{test} did not run in its own process"
    );
    false
}

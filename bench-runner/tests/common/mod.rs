#![allow(dead_code)] // each test binary uses part of this

//! What the runner's tests share: whether a tool this test needs is here, and a visible skip
//! when it is not (never a silent pass; never a skip where CI requires the engine).

/// True when `available`; otherwise fails under RXBENCH_REQUIRE_DOCKER (set by .ci/run once
/// the engine answers) and else says SKIPPED on the real stderr and returns false.
pub fn available_or_skip(available: bool, test: &str, what: &str) -> bool {
    if available {
        return true;
    }
    assert!(
        std::env::var_os("RXBENCH_REQUIRE_DOCKER").is_none(),
        "{test}: RXBENCH_REQUIRE_DOCKER is set but {what}"
    );
    // Straight to fd 2: the test harness captures eprintln!, and a skip must be seen.
    let line = format!("SKIPPED {test}: {what}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    false
}

pub fn docker_reachable() -> bool {
    std::process::Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Every file a run writes into its folder.
pub const RUN_FILES: [&str; 7] = [
    "raw.json",
    "summary.json",
    "table.md",
    "results.csv",
    "comparisons.csv",
    "chart.svg",
    "report.html",
];

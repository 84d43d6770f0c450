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

/// Containers of the runner's (label `rxbench`) the engine holds.
pub fn rxbench_containers() -> usize {
    let out = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", "label=rxbench"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// The folder a run is writing into, before `latest` points at it (that comes at its end).
pub fn run_folder(out: &std::path::Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(out)
        .ok()?
        .flatten()
        .find(|e| e.file_name() != "latest")
        .map(|e| e.path())
}

/// Waits (up to 4 minutes) until the run writing into `out` has at least `n` slices in its
/// raw.json; how many it had then.
pub fn wait_for_slices(out: &std::path::Path, n: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        let slices = run_folder(out)
            .and_then(|dir| std::fs::read_to_string(dir.join("raw.json")).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|r| r["slices"].as_array().map(Vec::len));
        if let Some(seen) = slices.filter(|&s| s >= n) {
            return seen;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never got going"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `bench-runner report DIR` re-renders a run that did not finish, and says so.
pub fn assert_re_renders_incomplete(dir: &std::path::Path) {
    let report = std::process::Command::new(env!("CARGO_BIN_EXE_bench-runner"))
        .arg("report")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(String::from_utf8_lossy(&report.stdout).contains("incomplete run"));
}

/// A run that lost its engine mid-run (engine_lost.rs cuts a proxy, daemon_restart.rs stops
/// the daemon): it failed naming the cause, and kept at least the `before` slices it had in
/// a whole raw.json marked incomplete, whose last slice says `engine_lost` and which
/// re-renders. Returns the run's folder.
pub fn assert_run_lost_its_engine(
    finished: &std::process::Output,
    out: &std::path::Path,
    before: usize,
) -> std::path::PathBuf {
    let stderr = String::from_utf8_lossy(&finished.stderr);
    assert!(!finished.status.success(), "{stderr}");
    assert!(
        stderr.contains("the Docker engine stopped answering at unix://")
            && stderr.contains("the run stops")
            && stderr.contains("bench-runner clean"),
        "{stderr}"
    );
    let dir = run_folder(out).expect("the run's folder");
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("raw.json")).unwrap()).unwrap();
    let slices = raw["slices"].as_array().unwrap();
    assert!(slices.len() >= before, "{} < {before}", slices.len());
    assert_eq!(raw["complete"], false);
    assert_eq!(
        slices.last().unwrap()["error"]["kind"],
        "engine_lost",
        "{}",
        slices.last().unwrap()
    );
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "half-written files: {leftovers:?}");
    assert_re_renders_incomplete(&dir);
    dir
}

/// Whether a connection-per-request run from `first_port` on may aim at loopback here: the
/// runner refuses while netfilter tracks those ports (Docker loads the tracker). Where it
/// does, the test exempts its 64 ports as the runner would (driver::notrack; the rules go when
/// the returned value is dropped: hold it for the test), and skips visibly, as
/// [`available_or_skip`] does, only where that cannot be done (no root, no iptables).
pub fn loopback_untracked_or_skip(
    test: &str,
    first_port: u16,
) -> Option<Option<driver::notrack::Exemption>> {
    match driver::notrack::untracked_or_exempt(first_port..=first_port.saturating_add(63)) {
        Ok(exemption) => Some(exemption),
        Err(tracked) => {
            available_or_skip(false, test, &tracked.to_string());
            None
        }
    }
}

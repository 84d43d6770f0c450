//! A connection per request on a machine whose connection tracking counts loopback (Docker
//! loads it): the runner exempts its own servers' ports for the run, measures per-request
//! slices without a drop, and leaves the rule set exactly as it found it — when the run ends,
//! when it is stopped with SIGTERM, and (`bench-runner clean`) when a killed run left rules.
//!
//! It changes this machine's firewall for its length: the blanket loopback exemption .ci/run
//! adds is taken out (so that loopback is tracked, as on a fresh machine with Docker) and put
//! back however the test ends. Its own test binary, so no other test runs beside it.
//! Needs root, iptables and a loaded tracker; SKIPPED otherwise unless RXBENCH_REQUIRE_DOCKER.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

mod common;

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");

fn raw_rules() -> String {
    let out = Command::new("iptables")
        .args(["-w", "-t", "raw", "-S"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn iptables(args: &[&str]) -> bool {
    Command::new("iptables")
        .args(["-w", "-t", "raw"])
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

/// The blanket loopback rules .ci/run adds, taken out for the test and put back on drop.
struct BlanketOut(Vec<[&'static str; 5]>);

impl BlanketOut {
    fn take() -> BlanketOut {
        let mut taken = Vec::new();
        for rule in [
            ["PREROUTING", "-i", "lo", "-j", "NOTRACK"],
            ["OUTPUT", "-o", "lo", "-j", "NOTRACK"],
        ] {
            while iptables(&[&["-D"][..], &rule[..]].concat()) {
                taken.push(rule);
            }
        }
        BlanketOut(taken)
    }
}

impl Drop for BlanketOut {
    fn drop(&mut self) {
        for rule in &self.0 {
            iptables(&[&["-I"][..], &rule[..]].concat());
        }
    }
}

fn can_run() -> bool {
    let root = is_root();
    let iptables = Command::new("iptables")
        .args(["-w", "-t", "raw", "-S"])
        .output()
        .is_ok_and(|o| o.status.success());
    let tracker = std::path::Path::new("/proc/sys/net/netfilter/nf_conntrack_max").exists();
    common::available_or_skip(
        root && iptables && tracker,
        "the_runner_exempts_only_its_ports_and_leaves_the_firewall_as_it_found_it",
        &format!("needs root ({root}), iptables' raw table ({iptables}) and a loaded connection tracker ({tracker})"),
    )
}

/// Whether this process runs as root (from /proc: no unsafe call needed).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|u| u.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}

fn run_args(out: &std::path::Path, rounds: &str) -> Command {
    let mut c = Command::new(RUNNER);
    c.args([
        "--engine",
        "native",
        "--profiles",
        "relaxed",
        "--configs",
        "rx",
    ])
    .args([
        "--load",
        "per-request",
        "--instances",
        "1",
        "--rounds",
        rounds,
        "--relaunch",
        "once",
    ])
    .args([
        "--slice",
        "300ms",
        "--slice-warmup",
        "100ms",
        "--port",
        "3350",
    ])
    .arg("--out")
    .arg(out);
    c
}

#[test]
fn the_runner_exempts_only_its_ports_and_leaves_the_firewall_as_it_found_it() {
    if !can_run() {
        return;
    }
    let _blanket = BlanketOut::take();
    let before = raw_rules();
    assert!(
        driver::conntrack::check_loopback().is_err(),
        "loopback is not tracked even without the blanket rules: nothing to test\n{before}"
    );
    let out = std::env::temp_dir().join(format!("rxbench-notrack-{}", std::process::id()));

    // A run to its end: per-request measured, every slice without a drop, the rules gone.
    let run = run_args(&out, "2").output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert!(
        err.contains("exempted this run's ports 3350–3350 on lo"),
        "{err}"
    );
    assert!(!err.contains("per-request left out"), "{err}");
    let raw: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::run_folder(&out).unwrap().join("raw.json")).unwrap(),
    )
    .unwrap();
    let slices = raw["slices"].as_array().unwrap();
    assert!(!slices.is_empty());
    for s in slices {
        assert_eq!(s["load"], "per-request");
        assert!(s["error"].is_null(), "a slice failed: {s}");
    }
    assert_eq!(raw_rules(), before, "the run left the rule set changed");

    // A run stopped with SIGTERM once its rules are in: they go with it.
    let mut child = run_args(&out, "200")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let exempted = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("exempted this run's ports"));
    assert!(exempted, "the run never said it exempted its ports");
    assert!(
        raw_rules().contains("rxbench-notrack-"),
        "no rule while the run goes"
    );
    // SAFETY: kill sends a signal to the child we spawned; no memory is involved.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = lines.count(); // drain until the runner exits
    child.wait().unwrap();
    assert_eq!(raw_rules(), before, "SIGTERM left the rule set changed");

    // What a killed run leaves, `clean` removes (a tagged rule of a process that is gone).
    let gone = "rxbench-notrack-4000000"; // above any pid_max
    assert!(iptables(&[
        "-I",
        "OUTPUT",
        "-o",
        "lo",
        "-p",
        "tcp",
        "--dport",
        "1:1",
        "-m",
        "comment",
        "--comment",
        gone,
        "-j",
        "NOTRACK"
    ]));
    let clean = Command::new(RUNNER).arg("clean").output().unwrap();
    assert!(
        String::from_utf8_lossy(&clean.stdout)
            .contains("removed 1 connection-tracking exemption rule"),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    assert_eq!(raw_rules(), before, "clean left the stale rule");
    std::fs::remove_dir_all(&out).ok();
}

//! bench-runner end to end, on the real Docker engine and natively: a quick run of every
//! profile, the observed backends, every output file against the schema, nothing left behind.

mod common;

use std::path::{Path, PathBuf};

use common::{available_or_skip, docker_reachable};
use std::process::Command;

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");

/// The quick runs use the same CPUs (server half, load half): one at a time.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rxbench_containers() -> usize {
    let out = Command::new("docker")
        .args(["ps", "-aq", "--filter", "label=rxbench"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

fn quick_run(engine: &str, port: u16) -> (PathBuf, serde_json::Value) {
    quick_run_with(engine, port, &["--configs", "rx,io_uring"])
}

fn quick_run_with(engine: &str, port: u16, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    let _one_at_a_time = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let tag: String = extra
        .concat()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let out_dir =
        std::env::temp_dir().join(format!("rxbench-e2e-{engine}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::new(RUNNER)
        .args(["--engine", engine, "--quick", "--conns", "64"])
        .args(extra)
        .args(["--port", &port.to_string(), "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench-runner failed:\n{stderr}");
    let latest = out_dir.join("latest");
    assert!(latest.is_symlink(), "results/latest must point at the run");
    let dir = out_dir.join(std::fs::read_link(&latest).unwrap());
    for f in [
        "raw.json",
        "summary.json",
        "table.md",
        "results.csv",
        "chart.svg",
    ] {
        let len = std::fs::metadata(dir.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} missing or empty in {}", dir.display());
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    (dir, summary)
}

fn check_schema(summary: &serde_json::Value, expect_engine_prefix: &str) {
    assert!(
        summary["engine"]
            .as_str()
            .unwrap()
            .starts_with(expect_engine_prefix),
        "{}",
        summary["engine"]
    );
    for key in ["cpu_model", "cores", "kernel"] {
        assert!(!summary["machine"][key].is_null(), "machine.{key}");
    }
    let rows = summary["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        for key in [
            "profile",
            "config",
            "backend_observed",
            "conns",
            "rps_median",
            "rps_min",
            "rps_max",
            "p50_us_median",
            "p99_us_median",
            "server_cpu",
            "syscalls_per_request",
        ] {
            assert!(r.get(key).is_some(), "row lacks {key}: {r}");
        }
        assert!(r["rps_median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["rps_min"].as_f64() <= r["rps_median"].as_f64()
                && r["rps_median"].as_f64() <= r["rps_max"].as_f64()
        );
        assert!(
            r["syscalls_per_request"]["total"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        assert!(r["flag"].is_null(), "unexpected flag: {r}");
    }
}

fn row<'a>(summary: &'a serde_json::Value, profile: &str, config: &str) -> &'a serde_json::Value {
    summary["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["profile"] == profile && r["config"] == config)
        .unwrap_or_else(|| panic!("no row {profile}/{config}"))
}

fn check_rerender(dir: &Path) {
    std::fs::remove_file(dir.join("table.md")).unwrap();
    let out = Command::new(RUNNER)
        .arg("report")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_to_string(dir.join("table.md"))
        .unwrap()
        .contains("## Evidence"));
}

#[test]
fn docker_quick_run_of_every_profile() {
    if !available_or_skip(
        docker_reachable(),
        "docker_quick_run_of_every_profile",
        "no Docker engine answers",
    ) {
        return;
    }
    let (dir, summary) = quick_run("docker", 3941);
    check_schema(&summary, "docker ");
    assert_eq!(rxbench_containers(), 0, "containers left behind");

    let denied = row(&summary, "no-io-uring", "io_uring");
    assert_eq!(denied["backend_observed"], "epoll/rx");
    assert_eq!(denied["io_uring"], "unavailable(EPERM)");
    assert!(denied["note"].as_str().unwrap().contains("EPERM"));
    let relaxed = row(&summary, "relaxed", "io_uring");
    assert_eq!(relaxed["backend_observed"], "io_uring");
    // Debian's 20.10 engine still allows io_uring under its default profile; a >= 25 engine
    // would deny it. Either way the row says what really ran.
    let default = row(&summary, "default", "io_uring");
    let b = default["backend_observed"].as_str().unwrap();
    assert!(
        b == "io_uring"
            || (b == "epoll/rx"
                && default["io_uring"]
                    .as_str()
                    .unwrap()
                    .starts_with("unavailable(")),
        "{default}"
    );
    let rx_ctl = row(&summary, "relaxed", "rx")["syscalls_per_request"]["epoll_ctl"]
        .as_f64()
        .unwrap();
    assert!(rx_ctl < 0.01, "rx registers once per connection: {rx_ctl}");
    check_rerender(&dir);
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

#[test]
fn native_quick_run_without_docker() {
    let (dir, summary) = quick_run("native", 3942);
    check_schema(&summary, "native");
    assert!(summary["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["profile"] != "default"));
    let denied = row(&summary, "no-io-uring", "io_uring");
    assert_eq!(
        (
            denied["backend_observed"].as_str(),
            denied["io_uring"].as_str()
        ),
        (Some("epoll/rx"), Some("unavailable(EPERM)"))
    );
    assert_eq!(
        row(&summary, "relaxed", "io_uring")["backend_observed"],
        "io_uring"
    );
    let notes = summary["notes"].as_array().unwrap();
    assert!(notes
        .iter()
        .any(|n| n.as_str().unwrap().starts_with("native mode")));
    check_rerender(&dir);
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

#[test]
fn dry_run_prints_the_plan_and_eta_and_runs_nothing() {
    let out = Command::new(RUNNER).arg("--dry-run").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "3 rounds x 3 profiles x 5 configurations x 3 connection counts = 135 measurements"
        ),
        "{text}"
    );
    assert!(text.contains("ETA: about"));
    assert!(
        text.contains("round 2: default/rx"),
        "rounds rotate: {text}"
    );
}

#[test]
fn bad_arguments_fail_with_a_reason() {
    for (args, needle) in [
        (
            vec!["--dry-run", "--profiles", "strict"],
            "unknown profile 'strict'",
        ),
        (
            vec!["--dry-run", "--network", "overlay"],
            "expected host or bridge",
        ),
        (vec!["report", "/nonexistent"], "raw.json"),
    ] {
        let out = Command::new(RUNNER).args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn ctrl_c_mid_run_leaves_no_container_and_keeps_what_was_measured() {
    if !available_or_skip(
        docker_reachable(),
        "ctrl_c_mid_run",
        "no Docker engine answers",
    ) {
        return;
    }
    let _one_at_a_time = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let out_dir = std::env::temp_dir().join(format!("rxbench-e2e-int-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut child = Command::new(RUNNER)
        .args([
            "--engine",
            "docker",
            "--quick",
            "--conns",
            "64",
            "--configs",
            "rx,oneshot,legacy",
            "--profiles",
            "relaxed",
            "--port",
            "3943",
            "--out",
        ])
        .arg(&out_dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the second measurement's container runs: one measurement is already written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        let raw = std::fs::read_dir(&out_dir)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path().join("raw.json")).ok());
        if raw.is_some_and(|r| r.contains("\"round\"")) && rxbench_containers() > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never got going"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "an interrupted run must not report success"
    );
    assert_eq!(
        rxbench_containers(),
        0,
        "containers left behind after Ctrl-C"
    );
    let dir = out_dir.join(std::fs::read_link(out_dir.join("latest")).unwrap());
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("raw.json")).unwrap()).unwrap();
    assert!(
        !raw["measurements"].as_array().unwrap().is_empty(),
        "what was measured is kept"
    );
    assert!(dir.join("table.md").exists());
    std::fs::remove_dir_all(&out_dir).ok();
}

#[test]
fn docker_bridge_network_puts_the_driver_in_a_container_and_cleans_up() {
    if !available_or_skip(
        docker_reachable(),
        "docker_bridge_network",
        "no Docker engine answers",
    ) {
        return;
    }
    let (dir, summary) = quick_run_with(
        "docker",
        3944,
        &[
            "--network",
            "bridge",
            "--configs",
            "rx",
            "--profiles",
            "relaxed",
        ],
    );
    check_schema(&summary, "docker ");
    assert_eq!(summary["settings"]["network"], "bridge");
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("raw.json")).unwrap()).unwrap();
    let url = raw["measurements"][0]["report"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    // The driver aimed at the server container's address on the run's network, not loopback.
    assert!(!url.contains("127.0.0.1"), "{url}");
    assert_eq!(rxbench_containers(), 0, "containers left behind");
    let nets = Command::new("docker")
        .args(["network", "ls", "-q", "--filter", "label=rxbench"])
        .output()
        .unwrap();
    assert!(nets.stdout.is_empty(), "the run's network was not removed");
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

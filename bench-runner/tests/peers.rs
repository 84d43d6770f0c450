//! `bench-runner peers`: every peer starts, is measured with the same slices as this project's
//! server, and gets a syscall profile; the results land in their own folder.

mod common;

use std::path::PathBuf;
use std::process::Command;

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");
const PEERS: [&str; 7] = [
    "floor",
    "uring-floor",
    "nginx",
    "haproxy",
    "hyper",
    "actix",
    "may-minihttp",
];

fn installed(program: &str) -> bool {
    Command::new(program).arg("-v").output().is_ok()
}

fn json(path: PathBuf) -> serde_json::Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_plan_holds_every_peer_beside_ours_and_the_control() {
    let out = Command::new(RUNNER)
        .args(["peers", "--dry-run", "--quick"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let servers = text.lines().find(|l| l.starts_with("servers: ")).unwrap();
    for name in ["io_uring", "io_uring-control", "rx", "legacy"]
        .iter()
        .chain(&PEERS)
    {
        assert!(
            servers.contains(&format!("relaxed/{name}")),
            "{name}: {servers}"
        );
    }
    // Without nginx or HAProxy on the machine, the dry run still shows the plan and names
    // what a real run would lack (a fresh machine's test run must not fail on it).
    let stderr = String::from_utf8_lossy(&out.stderr);
    for program in ["nginx", "haproxy"] {
        assert_eq!(
            installed(program),
            !stderr.contains(&format!("{program} is not installed")),
            "{stderr}"
        );
    }
    let bad = Command::new(RUNNER)
        .args(["peers", "--only", "lighttpd"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("lighttpd"));
}

#[test]
fn a_quick_peers_run_measures_every_peer_and_profiles_its_syscalls() {
    let missing: Vec<&str> = ["nginx", "haproxy"]
        .into_iter()
        .filter(|p| !installed(p))
        .collect();
    if !missing.is_empty() {
        // The run refuses, naming what to install; the rest of the test needs them.
        let out = Command::new(RUNNER)
            .args(["peers", "--quick"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("apt-get install"),
            "{err}"
        );
        assert!(
            std::env::var_os("RXBENCH_REQUIRE_DOCKER").is_none(),
            "CI installs {missing:?} (.ci/run)"
        );
        let line = format!("SKIPPED a_quick_peers_run: {missing:?} not installed\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    }
    let Some(_untracked) = common::loopback_untracked_or_skip("a_quick_peers_run", 3930) else {
        return;
    };
    let out_dir = std::env::temp_dir().join(format!("rxbench-peers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let result = Command::new(RUNNER)
        .args([
            "peers",
            "--quick",
            "--conns",
            "64",
            "--load",
            "keepalive,per-request",
            "--port",
            "3930",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{err}");
    let latest = out_dir.join("peers-latest");
    let folder = std::fs::read_link(&latest).expect("peers-latest points at the run");
    assert!(folder.to_string_lossy().starts_with("peers-"), "{folder:?}");
    let dir = out_dir.join(folder);
    let summary = json(dir.join("summary.json"));
    let raw = json(dir.join("raw.json"));
    for name in ["io_uring", "rx", "legacy"].iter().chain(&PEERS) {
        // Every server in both connection modes: kept alive, and a connection per request
        // (the client closing, whether or not the server honours `Connection: close`).
        for load in ["keepalive", "per-request"] {
            let row = summary["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["config"] == *name && r["load"] == load)
                .unwrap_or_else(|| panic!("no {load} row for {name}"));
            assert!(row["flag"].is_null(), "{name} {load}: {row}");
            // Two instances over the quick run's 3 rounds.
            assert_eq!(row["rounds_ok"], 6, "{name} {load}: {row}");
            assert!(
                row["cpu_us_per_request"].as_f64().unwrap() > 0.0,
                "{name} {load}"
            );
        }
        let record = raw["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"]["config"] == *name)
            .unwrap();
        let strace = &record["strace"];
        assert!(strace["error"].is_null(), "{name}: {strace}");
        assert!(strace["requests"].as_u64().unwrap() > 0, "{name}: {strace}");
    }
    // The floor pays one recv and one send a request, and little else.
    let floor = raw["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"]["config"] == "floor")
        .unwrap();
    let requests = floor["strace"]["requests"].as_f64().unwrap();
    let per = |name: &str| floor["strace"]["calls"][name].as_f64().unwrap_or(0.0) / requests;
    assert!((0.9..1.2).contains(&per("recvfrom")), "{}", floor["strace"]);
    assert!((0.9..1.2).contains(&per("sendto")), "{}", floor["strace"]);
    // The io_uring floor: every request's work is an SQE, entered in batches.
    let uring = raw["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"]["config"] == "uring-floor")
        .unwrap();
    let requests = uring["strace"]["requests"].as_f64().unwrap();
    let calls = &uring["strace"]["calls"];
    let enters = calls["io_uring_enter"].as_f64().unwrap_or(0.0) / requests;
    assert!(enters > 0.0 && enters < 1.2, "{}", uring["strace"]);
    for syscall in ["recvfrom", "sendto", "accept4", "close", "epoll_wait"] {
        assert!(
            calls[syscall].as_f64().unwrap_or(0.0) / requests < 0.01,
            "{syscall}: {}",
            uring["strace"]
        );
    }
    // Every configuration of ours is compared with every peer, and the control gives the
    // resolution.
    let comparisons = summary["comparisons"].as_array().unwrap();
    for peer in PEERS {
        assert!(
            comparisons.iter().any(|c| c["config"] == "rx"
                && c["baseline"] == peer
                && c["metric"] == "cpu_per_request"),
            "rx vs {peer}"
        );
        // The floor is the reference: every other peer is set against it too.
        let against_floor = comparisons.iter().any(|c| {
            c["config"] == "floor" && c["baseline"] == peer && c["metric"] == "cpu_per_request"
        });
        assert_eq!(against_floor, peer != "floor", "floor vs {peer}");
    }
    assert_eq!(raw["references"], serde_json::json!(["floor"]));
    assert!(summary["resolution_worst"]["cpu_per_request"]
        .as_f64()
        .is_some());
    std::fs::remove_dir_all(&out_dir).ok();
}

//! compose.yaml: it parses with the installed Compose (Debian's docker-compose 1.29 here), and
//! `docker-compose up` runs the benchmark itself — a quick run from the images `build-images`
//! made, results in the folder given, every file there, no server container left.

mod common;

use std::path::Path;
use std::process::Command;

use common::{available_or_skip, docker_reachable};

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn compose_installed() -> bool {
    Command::new("docker-compose")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn compose_file_parses_and_up_starts_the_runner_with_servers_behind_a_profile() {
    let test = "compose_file_parses";
    if !available_or_skip(compose_installed(), test, "docker-compose is not installed") {
        return;
    }
    let config = |args: &[&str]| {
        let out = Command::new("docker-compose")
            .current_dir(root())
            .args(["-f", "compose.yaml"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let text = config(&["config"]);
    for needle in [
        "runner:",
        "server-default:",
        "server-no-io-uring:",
        "server-relaxed:",
        "seccomp=unconfined",
        "no-io-uring.json",
        "/var/run/docker.sock",
        "/sys/fs/cgroup",
        "pid: host",
        "--no-build",
        "dockerfile: docker/Dockerfile.runner",
        "dockerfile: docker/Dockerfile",
    ] {
        assert!(
            text.contains(needle),
            "{needle} missing from the parsed compose file:\n{text}"
        );
    }
    // Plain `up` starts the runner only: the three servers for poking by hand are behind the
    // `servers` profile, the runner behind none.
    assert_eq!(text.matches("- servers").count(), 3, "{text}");
    let runner = text
        .split("  runner:")
        .nth(1)
        .unwrap()
        .split("\n  server-")
        .next()
        .unwrap();
    assert!(!runner.contains("profiles:"), "{runner}");
}

#[test]
fn compose_up_runs_a_quick_benchmark_and_leaves_no_server_behind() {
    let test = "compose_up_runs_a_quick_benchmark";
    if !available_or_skip(
        compose_installed() && docker_reachable(),
        test,
        "docker-compose or the Docker engine is missing",
    ) {
        return;
    }
    let built = Command::new(RUNNER).arg("build-images").output().unwrap();
    assert!(
        built.status.success(),
        "build-images: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let results = std::env::temp_dir().join(format!("rxbench-compose-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&results).unwrap();
    let project = format!("rxbenchtest{}", std::process::id());
    let compose = |args: &[&str]| {
        Command::new("docker-compose")
            .current_dir(root())
            .args(["-f", "compose.yaml", "-p", &project])
            .args(args)
            .env(
                "RXBENCH_ARGS",
                "--quick --profiles relaxed --configs rx,io_uring --conns 64 --load keepalive",
            )
            .env("RXBENCH_RESULTS", &results)
            .output()
            .unwrap()
    };
    let up = compose(&["up", "--exit-code-from", "runner"]);
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    let down = compose(&["down"]);
    assert!(up.status.success(), "docker-compose up failed:\n{log}");
    assert!(
        !log.contains("server-default"),
        "plain up started the hand-poking servers:\n{log}"
    );
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    let run = std::fs::read_dir(&results)
        .unwrap()
        .flatten()
        .find(|e| e.file_name() != "latest")
        .unwrap_or_else(|| panic!("no run folder in {}:\n{log}", results.display()))
        .path();
    for f in common::RUN_FILES {
        assert!(
            run.join(f).exists(),
            "{f} missing in {}:\n{log}",
            run.display()
        );
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["rows"].as_array().unwrap().len(), 2, "{summary}");
    // Inside the runner's container the cgroup counter is read as it is outside.
    assert!(
        summary["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("server CPU time from cgroup")),
        "{}",
        summary["notes"]
    );
    let left = Command::new("docker")
        .args(["ps", "-aq", "--filter", "label=rxbench"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "server containers left behind");
    let project_left = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.docker.compose.project={project}"),
        ])
        .output()
        .unwrap();
    assert!(
        project_left.stdout.is_empty(),
        "compose containers left after down"
    );
    let _ = std::fs::remove_dir_all(&results);
}

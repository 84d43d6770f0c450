//! compose.yaml parses with the installed Compose (Debian's docker-compose 1.29 here) and
//! defines the three server profiles and the runner.

mod common;

use std::process::Command;

use common::available_or_skip;

#[test]
fn compose_file_parses_and_has_the_services() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let run = Command::new("docker-compose")
        .current_dir(root)
        .args(["-f", "compose.yaml", "config"])
        .output();
    let test = "compose_file_parses_and_has_the_services";
    if !available_or_skip(run.is_ok(), test, "docker-compose is not installed") {
        return;
    }
    let out = run.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "server-default:",
        "server-no-io-uring:",
        "server-relaxed:",
        "runner:",
        "seccomp=unconfined",
        "no-io-uring.json",
        "/var/run/docker.sock",
        "--no-build",
    ] {
        assert!(
            text.contains(needle),
            "{needle} missing from the parsed compose file:\n{text}"
        );
    }
}

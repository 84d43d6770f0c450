//! compose.yaml parses with the installed Compose (Debian's docker-compose 1.29 here) and
//! defines the three server profiles and the runner.

use std::process::Command;

#[test]
fn compose_file_parses_and_has_the_services() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let out = match Command::new("docker-compose")
        .current_dir(root)
        .args(["-f", "compose.yaml", "config"])
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            assert!(
                std::env::var_os("RXBENCH_REQUIRE_DOCKER").is_none(),
                "docker-compose is not installed"
            );
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"SKIPPED compose_file_parses_and_has_the_services: docker-compose not installed\n",
            );
            return;
        }
    };
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

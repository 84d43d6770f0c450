//! The the-benchmarker export builds from a clean copy of what their Rust template copies
//! (`**/*.rs` and the root Cargo.toml) with `cargo build --release`, and serves the contract.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");

/// Copies what their template copies: every .rs file, the root Cargo.toml, and the other
/// plain paths `framework.files` lists (`extra`, relative to the entry).
fn template_copy(from: &Path, to: &Path, root: bool, extra: &[String]) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap();
        if p.is_dir() {
            template_copy(&p, &to.join(name), false, &[]);
        } else if p.extension().is_some_and(|x| x == "rs") || (root && name == "Cargo.toml") {
            std::fs::copy(&p, to.join(name)).unwrap();
        }
    }
    for file in extra {
        std::fs::create_dir_all(to.join(file).parent().unwrap()).unwrap();
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
}

fn cargo(dir: &Path) -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"));
    c
}

fn rs_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rs_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

fn get_at(host: &str, port: u16, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect((host, port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

fn get(port: u16, request: &str) -> (u16, String) {
    get_at("127.0.0.1", port, request)
}

/// The lines of a top-level YAML block, unindented (`framework:` and what is under it).
fn yaml_block(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| *l != format!("{key}:"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn without_a_project_link_the_export_warns_and_bad_links_are_refused() {
    let base = std::env::temp_dir().join(format!("rxbench-export-warn-{}", std::process::id()));
    let out = Command::new(RUNNER)
        .arg("export-benchmarker")
        .arg(&base)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: neither --github nor --website"),
        "{err}"
    );
    for bad in [["--github", "just-a-name"], ["--website", "not a host"]] {
        let out = Command::new(RUNNER)
            .arg("export-benchmarker")
            .arg(&base)
            .args(bad)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(bad[0]),
            "{bad:?}"
        );
    }
    std::fs::remove_dir_all(&base).ok();
}

#[test]
fn exported_crate_builds_from_a_clean_copy_and_serves_the_contract() {
    let base = std::env::temp_dir().join(format!("rxbench-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let out = Command::new(RUNNER)
        .arg("export-benchmarker")
        .arg(&base)
        .args(["--github", "rxbench/rxbench"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported = base.join("rust/rxbench");
    let config = std::fs::read_to_string(exported.join("config.yaml")).unwrap();
    // Their Rakefile reads `files` and `github` under `framework:` only.
    let framework = yaml_block(&config, "framework");
    assert!(
        framework.contains(&"github: rxbench/rxbench".to_string()),
        "{config}"
    );
    assert!(framework.contains(&"files:".to_string()), "{config}");
    assert!(
        config.lines().all(|l| !l.starts_with("files:")),
        "a top-level files: is ignored by their Rakefile: {config}"
    );
    // Resolution honours rust-version only with resolver 3 (edition 2021 defaults to 2).
    let manifest = std::fs::read_to_string(exported.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("resolver = \"3\""), "{manifest}");
    assert!(manifest.contains("rust-version = \"1.92\""));
    assert!(manifest.contains("libc = \"0.2.172\"") && manifest.contains("io-uring = \"0.7.13\""));
    // The entry's comments point at its own README, which it carries.
    let readme = std::fs::read_to_string(exported.join("README.md")).unwrap();
    assert!(readme.contains("APP_BACKEND") && readme.contains("EPERM"));
    let main_rs = std::fs::read_to_string(exported.join("app/src/main.rs")).unwrap();
    assert!(!main_rs.contains("docs/runtime-config.md") && main_rs.contains("README.md"));
    // Test- and fuzz-only files stay home, and with them the `fuzzing` cfg; every other docs
    // page a comment names is rxbench's, linked at the project.
    for dropped in [
        "app/src/http/tests.rs",
        "app/src/http/invariants.rs",
        "app/src/framing_reference.rs",
    ] {
        assert!(
            !exported.join(dropped).exists(),
            "{dropped} ships in the entry"
        );
    }
    for source in rs_files(&exported) {
        let text = std::fs::read_to_string(&source).unwrap();
        assert!(!text.contains("fuzzing"), "{}", source.display());
        for (at, _) in text.match_indices("docs/") {
            assert!(
                text[..at].ends_with("https://github.com/rxbench/rxbench/blob/main/"),
                "{} points at a docs/ page the entry does not carry",
                source.display()
            );
        }
    }

    let clean = base.join("clean");
    // `files:` entries other than the template's own globs, as their build copies them.
    let listed: Vec<String> = framework
        .iter()
        .skip_while(|l| *l != "files:")
        .skip(1)
        .take_while(|l| l.starts_with("- "))
        .map(|l| l.trim_start_matches("- ").trim_matches('"').to_string())
        .filter(|f| f != "**/*.rs" && f != "Cargo.toml")
        .collect();
    assert_eq!(listed, ["wire/Cargo.toml"], "{config}");
    template_copy(&exported, &clean, true, &listed);
    assert!(!clean.join("config.yaml").exists());
    let build = cargo(&clean)
        .args(["build", "--release", "--quiet"])
        .status()
        .unwrap();
    assert!(build.success());
    // Their image builds with rust:1.92 while this machine has one newer toolchain: clippy's
    // incompatible_msrv lint checks every std API the entry uses against its declared
    // rust-version (1.92), and warnings (unexpected cfgs among them) are errors here.
    let lint = cargo(&clean)
        .args(["clippy", "--release", "--quiet", "--", "-D", "warnings"])
        .args(["-D", "clippy::incompatible_msrv"])
        .output()
        .unwrap();
    assert!(
        lint.status.success(),
        "the entry does not hold to rust-version 1.92:\n{}",
        String::from_utf8_lossy(&lint.stderr)
    );
    let bin = clean.join("target/release/server");
    assert!(bin.exists(), "their template expects target/release/server");

    let mut child = Command::new(&bin)
        .env("APP_PORT", "0")
        .env("APP_WORKERS", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split(':')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let close = "Connection: close\r\n\r\n";
    assert_eq!(
        get(
            port,
            &format!("GET / HTTP/1.1\r\nHost: localhost\r\n{close}")
        ),
        (200, String::new())
    );
    assert_eq!(
        get(
            port,
            &format!("GET /user/77 HTTP/1.1\r\nHost: localhost\r\n{close}")
        ),
        (200, "77".into())
    );
    assert_eq!(
        get(
            port,
            &format!(
                "POST /user HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n{close}"
            )
        ),
        (200, String::new())
    );
    assert_eq!(
        get(
            port,
            &format!("GET /nope HTTP/1.1\r\nHost: localhost\r\n{close}")
        )
        .0,
        404
    );
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&base).ok();
}

/// Their pipeline, as their files run it: the entry built with `cargo build --release` (here
/// static, into a `FROM scratch` image: no registry to pull their `rust`/`debian` images
/// from), the binary at their path, an exec-form `ENTRYPOINT` (their config.rake turns
/// `command` into a JSON array), started with `docker run -td IMAGE --network host` — so the
/// server receives `--network host` as arguments, and the container sits on the default bridge.
/// Their route spec then checks the three routes.
#[test]
fn the_exported_entry_starts_the_way_their_pipeline_runs_it() {
    if !common::available_or_skip(
        common::docker_reachable(),
        "the_exported_entry_starts_the_way_their_pipeline_runs_it",
        "no Docker engine answers",
    ) {
        return;
    }
    let base = std::env::temp_dir().join(format!("rxbench-export-docker-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let out = Command::new(RUNNER)
        .arg("export-benchmarker")
        .arg(&base)
        .args(["--github", "rxbench/rxbench"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let exported = base.join("rust/rxbench");
    let clean = base.join("clean");
    template_copy(&exported, &clean, true, &["wire/Cargo.toml".to_string()]);
    let target = "x86_64-unknown-linux-gnu";
    let build = cargo(&clean)
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .args(["build", "--release", "--quiet", "--target", target])
        .status()
        .unwrap();
    assert!(build.success());
    let context = base.join("context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::copy(
        clean.join(format!("target/{target}/release/server")),
        context.join("server"),
    )
    .unwrap();
    std::fs::write(
        context.join("Dockerfile"),
        "FROM scratch\nCOPY server /usr/src/app/target/release/server\nENTRYPOINT [\"/usr/src/app/target/release/server\"]\n",
    )
    .unwrap();
    let tag = format!("rxbench-export-test:{}", std::process::id());
    let built = Command::new("docker")
        .args(["build", "-q", "-t", &tag])
        .arg(&context)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    /// Removes the container and the image however the test ends.
    struct Cleanup(String, Option<String>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(id) = &self.1 {
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
            }
            let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
        }
    }
    let mut cleanup = Cleanup(tag.clone(), None);
    // Exactly their command line (plus our label, which CI's leftover check looks for).
    let run = Command::new("docker")
        .args([
            "run",
            "-td",
            "--label",
            "rxbench=export-test",
            &tag,
            "--network",
            "host",
        ])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let id = String::from_utf8_lossy(&run.stdout).trim().to_string();
    cleanup.1 = Some(id.clone());
    let inspect = |format: &str| {
        let o = Command::new("docker")
            .args(["inspect", "-f", format, &id])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let ip = inspect("{{.NetworkSettings.IPAddress}}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while TcpStream::connect((ip.as_str(), 3000)).is_err() {
        let logs = Command::new("docker").args(["logs", &id]).output().unwrap();
        assert!(
            inspect("{{.State.Running}}") == "true" && std::time::Instant::now() < deadline,
            "the entry never became ready (their CI's failure):\n{}",
            String::from_utf8_lossy(&logs.stdout)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let close = "Connection: close\r\n\r\n";
    assert_eq!(
        get_at(&ip, 3000, &format!("GET / HTTP/1.1\r\nHost: x\r\n{close}")),
        (200, String::new())
    );
    assert_eq!(
        get_at(
            &ip,
            3000,
            &format!("GET /user/0 HTTP/1.1\r\nHost: x\r\n{close}")
        ),
        (200, "0".into())
    );
    assert_eq!(
        get_at(
            &ip,
            3000,
            &format!("POST /user HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n{close}")
        ),
        (200, String::new())
    );
    // `-t` gives the container a terminal: its stderr reaches the log as stdout.
    let logs = Command::new("docker").args(["logs", &id]).output().unwrap();
    let logs =
        String::from_utf8_lossy(&logs.stdout).to_string() + &String::from_utf8_lossy(&logs.stderr);
    assert!(
        logs.contains("ignoring arguments") && logs.contains("--network"),
        "{logs}"
    );
    drop(cleanup);
    std::fs::remove_dir_all(&base).ok();
}

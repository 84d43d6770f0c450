//! The the-benchmarker export builds from a clean copy of what their Rust template copies
//! (`**/*.rs` and the root Cargo.toml) with `cargo build --release`, and serves the contract.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

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

fn get(port: u16, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
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
    for bad in [["--github", "just-a-name"], ["--website", "example.com"]] {
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
    let build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&clean)
        .env("CARGO_TARGET_DIR", clean.join("target"))
        .args(["build", "--release", "--quiet"])
        .status()
        .unwrap();
    assert!(build.success());
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

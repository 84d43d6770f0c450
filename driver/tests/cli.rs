//! The rxload binary: wrk's interface, its report, JSON, and one-line errors.

mod common;

use std::process::Command;

use common::{Mode, TestServer};

const RXLOAD: &str = env!("CARGO_BIN_EXE_rxload");

fn rxload(args: &[&str]) -> std::process::Output {
    Command::new(RXLOAD).args(args).output().unwrap()
}

#[test]
fn text_report_has_wrk_layout_and_parses_back() {
    let server = TestServer::start(Mode::Length);
    let out = rxload(&[
        "-t",
        "1",
        "-c",
        "2",
        "-d",
        "1s",
        "--latency",
        &server.url("/"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("Running 1s test @ {}", server.url("/")));
    assert_eq!(lines[1], "  1 threads and 2 connections");
    assert_eq!(
        lines[2],
        "  Thread Stats   Avg      Stdev     Max   +/- Stdev"
    );
    assert!(lines[3].starts_with("    Latency   "));
    assert!(lines[4].starts_with("    Req/Sec   "));
    assert_eq!(lines[5], "  Latency Distribution");
    assert!(lines[6].starts_with("     50%"));
    assert!(lines.iter().any(|l| l.starts_with("Requests/sec: ")));
    assert!(lines.last().unwrap().starts_with("Transfer/sec: "));
    let report = driver::report::parse_wrk_text(&text).unwrap();
    assert!(report.requests > 0);
    assert_eq!(report.connections, 2);
}

#[test]
fn json_has_the_schema() {
    let server = TestServer::start(Mode::Chunked);
    let out = rxload(&[
        "-t1",
        "-c2",
        "-d",
        "1s",
        "--engine",
        "epoll",
        "--json",
        "--routes",
        "GET:/,POST:/user",
        &server.url("/"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "url",
        "engine",
        "io_uring",
        "threads",
        "connections",
        "duration_s",
        "requests",
        "elapsed_s",
        "bytes_read",
        "requests_per_s",
        "transfer_per_s",
        "latency",
        "req_per_thread",
        "errors",
        "reconnects",
        "driver_cpu_s",
        "driver_syscalls",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    for key in [
        "mean_us", "stdev_us", "max_us", "p50_us", "p75_us", "p90_us", "p99_us", "p999_us",
    ] {
        assert!(v["latency"][key].is_number(), "latency.{key}");
    }
    for key in ["connect", "read", "write", "timeout", "status"] {
        assert!(v["errors"][key].is_u64(), "errors.{key}");
    }
    assert_eq!(v["engine"], "epoll/rx");
    assert_eq!(
        v["io_uring"], "not-tried",
        "--engine epoll does not try io_uring"
    );
    // Round-trips through the library's type.
    let r: driver::report::Report = serde_json::from_value(v).unwrap();
    assert!(r.requests > 0);
}

#[test]
fn goose_engine_from_the_command_line() {
    let server = TestServer::start(Mode::Length);
    let out = rxload(&[
        "-t1",
        "-c2",
        "-d",
        "1s",
        "--engine",
        "goose",
        "--json",
        &server.url("/"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let r: driver::report::Report = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.engine, "goose");
    assert!(r.requests > 0);
    let out = rxload(&[
        "-c2",
        "-d",
        "1s",
        "-n",
        "5",
        "--engine",
        "goose",
        &server.url("/"),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("runs for --duration only"));
}

#[test]
fn bad_input_gets_one_line_and_a_non_zero_exit() {
    // A port nothing listens on: bind one, note it, free it.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let refused = format!("http://{free}/");
    for (args, needle) in [
        (vec!["-d", "1s", refused.as_str()], "cannot connect to"),
        (vec!["-d", "1s", "ftp://x/"], "not an http:// URL"),
        (
            vec!["-c", "0", "-d", "1s", "http://127.0.0.1:1/"],
            "connections (0) must be at least threads",
        ),
        (
            vec!["-t", "4", "-c", "2", "http://127.0.0.1:1/"],
            "connections (2) must be at least threads (4)",
        ),
        (vec!["-d", "soon", "http://127.0.0.1:1/"], "not a duration"),
        (
            vec!["--routes", "GET/", "http://127.0.0.1:1/"],
            "not a route",
        ),
        (vec!["--engine", "kqueue", "http://127.0.0.1:1/"], "kqueue"),
        (vec![], "required"),
    ] {
        let out = rxload(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("rxload: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn io_uring_options_from_the_command_line() {
    let server = TestServer::start(Mode::Length);
    for (args, multishot) in [
        (vec!["--engine", "io_uring"], true),
        (vec!["--engine", "io-uring", "--recv", "single"], false),
        (vec!["--engine", "io_uring", "--batch-wait-us", "0"], true),
    ] {
        let url = server.url("/");
        let mut all = vec!["-t", "1", "-c", "4", "-n", "200", "--json"];
        all.extend(&args);
        all.push(&url);
        let out = rxload(&all);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["engine"], "io_uring", "{args:?}");
        assert_eq!(v["requests"], 200, "{args:?}");
        let status = v["io_uring"].as_str().unwrap();
        assert_eq!(status.contains(",recv_multishot)"), multishot, "{status}");
    }
    let out = rxload(&["--batch-wait-us", "1000000", &server.url("/")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--batch-wait-us"));
}

#[test]
fn disable_keepalive_says_who_closed_in_text_and_json_and_still_parses_as_wrk() {
    let server = TestServer::start(Mode::Close);
    let Some(_untracked) =
        common::loopback_untracked_or_skip("disable_keepalive_says_who_closed", server.port())
    else {
        return;
    };
    let url = server.url("/");
    let text = rxload(&["-t1", "-c2", "-n", "30", "--disable-keepalive", &url]);
    assert!(text.status.success(), "{text:?}");
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("  A connection per request: ")
            && text.contains("closed by the server 30, by the client 0"),
        "{text}"
    );
    assert_eq!(driver::report::parse_wrk_text(&text).unwrap().requests, 30);

    let json = rxload(&[
        "-t1",
        "-c2",
        "-n",
        "30",
        "--disable-keepalive",
        "--json",
        &url,
    ]);
    let report: driver::report::Report = serde_json::from_slice(&json.stdout).unwrap();
    let closes = report.closes.expect("closes in per-request mode");
    assert_eq!((closes.server, closes.client), (30, 0));
    assert_eq!(server.counts.lock().unwrap().most_on_a_connection, 1);
}

#[test]
fn rate_prints_the_open_loop_line_and_json_carries_both_latencies() {
    let server = TestServer::start(Mode::Length);
    let url = server.url("/");
    let out = rxload(&["-t1", "-c4", "-d1s", "-R", "400", &url]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("  Open loop: target 400 req/s, achieved "),
        "{text}"
    );
    assert!(driver::report::parse_wrk_text(&text).unwrap().requests > 0);
    let json = rxload(&["-t1", "-c4", "-d1s", "-R", "400", "--json", &url]);
    let report: driver::report::Report = serde_json::from_slice(&json.stdout).unwrap();
    let open = report.open_loop.expect("open-loop report");
    assert_eq!(open.target_rps, 400.0);
    assert!(open.uncorrected.p50_us > 0.0, "{open:?}");
    let bad = rxload(&["--deadline", "10ms", &url]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--deadline needs --rate"));
    // An open loop with a connection per request: both reports in one.
    let Some(_untracked) =
        common::loopback_untracked_or_skip("rate_with_a_connection_per_request", server.port())
    else {
        return;
    };
    let fresh = rxload(&[
        "-t1",
        "-c4",
        "-d1s",
        "-R",
        "200",
        "--disable-keepalive",
        "--json",
        &url,
    ]);
    assert!(fresh.status.success(), "{fresh:?}");
    let report: driver::report::Report = serde_json::from_slice(&fresh.stdout).unwrap();
    assert_eq!(
        report.open_loop.expect("open-loop report").target_rps,
        200.0
    );
    assert!(
        report.closes.expect("who closed").opened > 100,
        "{report:?}"
    );
}

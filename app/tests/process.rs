//! The process around the contract: start-up errors, timeouts, workers, healthcheck, signals.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn no_env<'a>() -> Launch<'a> {
    Launch {
        env: &[],
        deny_io_uring: None,
    }
}

#[test]
fn a_bad_knob_is_a_start_up_error_that_names_it() {
    for (knob, value) in [
        ("APP_WORKERS", "lots"),
        ("APP_BACKEND", "kqueue"),
        ("APP_EPOLL_MODE", "turbo"),
        ("APP_PORT", "99999"),
        ("APP_PIN", "maybe"),
        ("APP_BIND", "localhost"),
    ] {
        let out = Command::new(SERVER).env(knob, value).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{knob}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("server: {knob}='{value}' is invalid")),
            "{err}"
        );
    }
    // A word on the command line does not hide a bad knob (words are ignored, knobs are not).
    let out = Command::new(SERVER)
        .arg("--bogus")
        .env("APP_WORKERS", "lots")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn forced_io_uring_without_io_uring_refuses_to_start() {
    let mut cmd = Command::new(SERVER);
    cmd.env("APP_BACKEND", "io_uring").env("APP_PORT", "0");
    sandbox::deny_io_uring_in_child(&mut cmd, libc::EPERM).unwrap();
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("io_uring was requested but is unavailable") && err.contains("EPERM"),
        "{err}"
    );
    assert!(!err.contains("listening"), "{err}");
}

#[test]
fn slow_and_idle_clients_are_closed_on_time() {
    for backend in ["io_uring", "epoll"] {
        let env = [
            ("APP_BACKEND", backend),
            ("APP_HEADER_TIMEOUT", "1"),
            ("APP_KEEPALIVE_TIMEOUT", "2"),
        ];
        let server = Server::start(Launch {
            env: &env,
            deny_io_uring: None,
        });
        // Header timeout: half a request, then silence.
        let mut slow = server.connect();
        slow.set_read_timeout(Duration::from_secs(5));
        let t0 = Instant::now();
        slow.send(b"GET / HTTP/1.1\r\nHost:");
        assert!(slow.closed_by_server(), "{backend}: slow client kept open");
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(900) && waited < Duration::from_millis(3000),
            "{backend}: {waited:?}"
        );

        // Keep-alive timeout: a complete request, then idle.
        let mut idle = server.connect();
        idle.set_read_timeout(Duration::from_secs(6));
        assert_eq!(idle.get("/").status, 200);
        let t0 = Instant::now();
        assert!(idle.closed_by_server(), "{backend}: idle client kept open");
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(1900) && waited < Duration::from_millis(4000),
            "{backend}: {waited:?}"
        );

        // An active client is not cut off by either timer.
        let mut busy = server.connect();
        for _ in 0..30 {
            assert_eq!(busy.get("/").status, 200);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// CPU ticks (user + system) the process has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn out_of_descriptors_the_server_keeps_serving_backs_off_and_recovers() {
    use std::io::{BufRead, Read, Write};
    for backend in ["epoll", "io_uring"] {
        // 48 descriptors: room for about 40 connections.
        let mut server = Server::start_through(
            &["prlimit", "--nofile=48:48"],
            Launch {
                env: &[("APP_BACKEND", backend)],
                deny_io_uring: None,
            },
        );
        let (port, stderr) = (server.port, server.take_stderr());
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        // 80 connections: the kernel queues the ones the server cannot accept.
        let mut conns: Vec<std::net::TcpStream> = (0..80)
            .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        // No busy loop: a second of exhaustion costs the server almost no CPU.
        let before = cpu_ticks(server.pid());
        std::thread::sleep(Duration::from_secs(1));
        let spent = cpu_ticks(server.pid()) - before;
        assert!(
            spent < 20,
            "{backend}: {spent} ticks in 1 s while out of descriptors"
        );
        // Connections already accepted are served.
        let ask = |c: &mut std::net::TcpStream| -> String {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(b"GET /user/ok HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            let mut buf = [0u8; 512];
            let n = c.read(&mut buf).unwrap_or(0);
            String::from_utf8_lossy(&buf[..n]).to_string()
        };
        assert!(ask(&mut conns[0]).starts_with("HTTP/1.1 200"), "{backend}");
        // Free descriptors: the queued connections are accepted and served.
        let mut last = conns.pop().unwrap();
        conns.truncate(10);
        let answer = ask(&mut last);
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"),
            "{backend}: {answer:?}"
        );
        // The server writes its line before it serves; the thread reading its stderr may
        // not have taken it from the pipe yet, so wait for it (bounded).
        let lines = log_once_it_holds(&log, "accepting again", Duration::from_secs(5));
        assert!(
            lines.iter().any(|l| l.contains("accepting paused: EMFILE")),
            "{backend}: {lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("accepting again")),
            "{backend}: {lines:?}"
        );
        assert!(
            lines.len() < 10,
            "{backend}: one line per episode, not per retry: {lines:?}"
        );
        drop(conns);
        server.signal(libc::SIGTERM);
        assert!(server.wait().success());
    }
}

/// The lines `log` holds once one of them contains `needle`, or when `patience` is spent.
fn log_once_it_holds(
    log: &std::sync::Mutex<Vec<String>>,
    needle: &str,
    patience: Duration,
) -> Vec<String> {
    let until = Instant::now() + patience;
    loop {
        let lines = log.lock().unwrap().clone();
        if lines.iter().any(|l| l.contains(needle)) || Instant::now() >= until {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first stderr line of `server` started through `prlimit LIMIT`.
fn first_line_under_prlimit(limit: &str) -> String {
    Server::start_through(&["prlimit", limit], no_env())
        .first_line
        .clone()
}

#[test]
fn the_descriptor_limit_is_raised_to_the_hard_limit_and_logged() {
    let line = first_line_under_prlimit("--nofile=256:4096");
    assert!(line.contains(" nofile=4096 "), "{line}");
    let line = first_line_under_prlimit("--nofile=300:300");
    assert!(line.contains(" nofile=300 "), "{line}");
}

/// A client that pipelines requests until the server stops reading, and never reads: its
/// connection then has a send in flight that cannot finish.
fn stalled_client(port: u16) -> std::net::TcpStream {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let req = b"GET /user/0123456789abcdef0123456789abcdef HTTP/1.1\r\nHost: t\r\n\r\n".repeat(256);
    let started = std::time::Instant::now();
    let mut sent = 0usize;
    while started.elapsed() < Duration::from_secs(10) {
        match c.write(&req) {
            Ok(n) => sent += n,
            Err(_) => break, // blocked: the server is not reading any more
        }
    }
    assert!(sent > 1 << 20, "only {sent} bytes went out before blocking");
    c
}

#[test]
fn a_second_stop_signal_exits_at_once() {
    let mut server = Server::start(no_env());
    let _stalled = stalled_client(server.port);
    // The first SIGTERM waits (up to its grace period) for the stalled response...
    server.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        server.running(),
        "the first signal waits for responses in flight"
    );
    // ...the second ends it now.
    let t = std::time::Instant::now();
    server.signal(libc::SIGTERM);
    let status = server.wait();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
}

#[test]
fn a_client_that_never_reads_is_closed_at_the_send_timeout() {
    use std::io::Read;
    for backend in ["epoll", "io_uring"] {
        let server = Server::start(Launch {
            env: &[("APP_BACKEND", backend), ("APP_SEND_TIMEOUT", "2")],
            deny_io_uring: None,
        });
        let mut c = stalled_client(server.port);
        let blocked_at = std::time::Instant::now();
        // Still not reading for the send timeout plus a sweep (and slack): by then the server
        // has given up, so draining what it had queued ends in EOF or a reset — not in a read
        // that waits forever once the last answer is in.
        std::thread::sleep(Duration::from_secs(4));
        c.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let closed = loop {
            match c.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break false
                }
                Err(_) => break true, // reset: closed with our requests unread
            }
        };
        assert!(
            closed,
            "{backend}: the connection was still open {:?} after the client stalled",
            blocked_at.elapsed()
        );
        assert!(blocked_at.elapsed() < Duration::from_secs(12), "{backend}");
        // The server still serves others.
        let mut other = server.connect();
        assert_eq!(other.get("/").status, 200);
        drop(other);
        let (status, _, _) = server.stop();
        assert!(status.success());
    }
}

#[test]
fn sigusr1_prints_the_counters_so_far_and_the_server_keeps_serving() {
    for backend in ["epoll", "io_uring"] {
        let mut server = Server::start(Launch {
            env: &[("APP_WORKERS", "2"), ("APP_BACKEND", backend)],
            deny_io_uring: None,
        });
        let requests = |json: &serde_json::Value| -> u64 {
            let workers = json["workers"].as_array().unwrap();
            workers
                .iter()
                .map(|w| w["requests"].as_u64().unwrap())
                .sum()
        };
        let syscalls = |json: &serde_json::Value| -> u64 {
            let workers = json["workers"].as_array().unwrap();
            workers
                .iter()
                .map(|w| w["syscalls_total"].as_u64().unwrap())
                .sum()
        };
        let mut client = server.connect();
        for _ in 0..10 {
            assert_eq!(client.get("/").status, 200);
        }
        let first = server.snapshot();
        assert_eq!(first["event"], "snapshot", "{first}");
        assert_eq!(first["seq"], 1);
        assert_eq!(first["workers"].as_array().unwrap().len(), 2, "{first}");
        assert_eq!(first["missing_workers"], serde_json::json!([]));
        assert_eq!(requests(&first), 10, "{first}");
        // The same connection still works: a snapshot neither stops nor disturbs serving.
        for _ in 0..5 {
            assert_eq!(client.get("/user/7").body, b"7");
        }
        let second = server.snapshot();
        assert_eq!((second["seq"].as_u64(), requests(&second)), (Some(2), 15));
        assert!(syscalls(&second) > syscalls(&first), "{first} {second}");
        drop(client);
        let (status, last, _) = server.stop();
        assert!(status.success(), "{backend}: {status:?}");
        assert_eq!(
            (last["event"].as_str(), requests(&last)),
            (Some("shutdown"), 15)
        );
    }
}

#[test]
fn workers_default_to_the_affinity_mask_and_share_one_port() {
    if Command::new("taskset").arg("-V").output().is_err() {
        panic!("taskset (util-linux) is needed to restrict the affinity mask");
    }
    // Signalled once it has said it listens (a fixed delay loses the race on a loaded machine).
    let mut child = Command::new("taskset")
        .args(["-c", "0", SERVER])
        .env("APP_BIND", "127.0.0.1")
        .env("APP_PORT", "0")
        .env_remove("APP_WORKERS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    // Kept open until the child exits: its later log lines must not hit a closed pipe.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    assert!(first.contains(" workers=1 "), "{first}");
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    drop(stderr);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["workers"].as_array().unwrap().len(), 1);

    // Several workers with APP_PIN: every one accepts on the same port.
    let server = Server::start(Launch {
        env: &[("APP_WORKERS", "3"), ("APP_PIN", "1")],
        deny_io_uring: None,
    });
    assert!(
        server.first_line.contains(" workers=3 "),
        "{}",
        server.first_line
    );
    let mut clients: Vec<Client> = (0..60).map(|_| server.connect()).collect();
    for c in clients.iter_mut() {
        assert_eq!(c.get("/").status, 200);
    }
    drop(clients);
    let (status, json, _) = server.stop();
    assert!(status.success());
    let workers = json["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 3);
    let total: u64 = workers
        .iter()
        .map(|w| w["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 60);
    assert!(
        workers
            .iter()
            .filter(|w| w["requests"].as_u64().unwrap() > 0)
            .count()
            >= 2,
        "SO_REUSEPORT spreads connections: {json}"
    );
}

#[test]
fn healthcheck_exits_0_on_2xx_and_1_otherwise() {
    let server = Server::start(no_env());
    let url = format!("http://127.0.0.1:{}/", server.port);
    let ok = Command::new(SERVER)
        .args(["--healthcheck", &url])
        .status()
        .unwrap();
    assert_eq!(ok.code(), Some(0));
    let miss = format!("http://127.0.0.1:{}/missing", server.port);
    let out = Command::new(SERVER)
        .args(["--healthcheck", &miss])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("404"), "{err}");
    let port = server.port.to_string();
    let default_url = Command::new(SERVER)
        .arg("--healthcheck")
        .env("APP_PORT", &port)
        .status()
        .unwrap();
    assert_eq!(default_url.code(), Some(0));
    drop(server);
    let down = Command::new(SERVER)
        .args(["--healthcheck", &url])
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(1));
    let bad = Command::new(SERVER)
        .args(["--healthcheck", "ftp://x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn sigint_stops_cleanly_and_responses_in_flight_end_whole() {
    let server = Server::start(no_env());
    let mut c = server.connect();
    // A large pipelined batch: responses are still being written when the signal lands.
    let mut writer = c.stream.try_clone().unwrap();
    let feeder = std::thread::spawn(move || {
        let batch = b"GET /user/123456789 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(20_000);
        let _ = std::io::Write::write_all(&mut writer, &batch); // the server may close first
    });
    assert_eq!(c.read_response().status, 200);
    server.signal(libc::SIGINT);
    let mut answered = 1u64;
    while let Some(r) = c.try_read_response() {
        assert_eq!(
            r.body, b"123456789",
            "a truncated or garbled response after the signal"
        );
        answered += 1;
    }
    feeder.join().unwrap();
    // One signal only: a second one would end the grace period at once.
    let (status, json, _) = server.exited();
    assert!(status.success());
    assert_eq!(json["signal"], "SIGINT");
    let counted = json["workers"][0]["requests"].as_u64().unwrap();
    // Every request the server counted was answered whole before it closed.
    assert_eq!(counted, answered, "{json}");
}

#[test]
fn help_explains_the_knobs() {
    let out = Command::new(SERVER).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for knob in [
        "APP_BIND",
        "APP_PORT",
        "APP_WORKERS",
        "APP_BACKEND",
        "APP_EPOLL_MODE",
        "--healthcheck",
    ] {
        assert!(text.contains(knob), "{knob}");
    }
}

/// the-benchmarker starts every container with `docker run -td IMAGE --network host`: with an
/// exec-form entrypoint those two words reach the server. It must serve anyway, and say once
/// (after the start-up line, which stays first) what it ignored.
#[test]
fn trailing_words_from_the_benchmarkers_docker_run_are_ignored_not_fatal() {
    let mut child = Command::new(SERVER)
        .args(["--network", "host"])
        .env("APP_BIND", "127.0.0.1")
        .env("APP_PORT", "0")
        .env("APP_WORKERS", "1")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    std::io::BufRead::read_line(&mut stderr, &mut second).unwrap();
    let port: u16 = first
        .strip_prefix("server listening on 127.0.0.1:")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the start-up line must stay first: {first:?}"));
    assert!(
        second.contains("ignoring arguments") && second.contains("--network"),
        "{second:?}"
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(
        &mut s,
        b"GET /user/7 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("\r\n\r\n7"),
        "{answer:?}"
    );
    // SAFETY: kill sends a signal to the child we spawned; no memory is involved.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

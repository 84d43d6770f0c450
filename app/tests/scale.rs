//! 10 000 keep-alive connections on one worker: all served, and what an idle one costs.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::load::open_fds;
use common::*;

const CONNECTIONS: usize = 10_000;
/// The most resident memory an idle keep-alive connection may cost the server.
const MAX_RSS_PER_IDLE_CONNECTION: f64 = 4096.0;

/// The test's own descriptor limit raised to its hard limit, which must hold the clients.
fn raise_own_nofile(needed: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read only the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    assert!(
        limit.rlim_max >= needed,
        "this test needs {needed} descriptors; the hard limit is {} (raise it: ulimit -Hn)",
        limit.rlim_max
    );
}

/// A field of /proc/PID/status in bytes (`VmRSS`, `VmHWM`: reported in kB).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} not in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

/// One request on `stream`, its whole response read (`Content-Length: 0` keep-alive answer).
fn request(stream: &mut TcpStream, buf: &mut [u8]) {
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = 0;
    while !buf[..got].ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut buf[got..]).unwrap();
        assert!(n > 0, "closed before answering");
        got += n;
    }
    assert!(buf.starts_with(b"HTTP/1.1 200 "), "{:?}", &buf[..got]);
}

#[test]
fn ten_thousand_keep_alive_connections_one_worker_all_served_at_most_4_kib_each() {
    raise_own_nofile(CONNECTIONS as u64 + 100);
    for backend in ["epoll", "io_uring"] {
        let env = [("APP_BACKEND", backend)];
        let mut server = Server::start(Launch {
            env: &env,
            deny_io_uring: None,
        });
        let pid = server.pid();
        let mut buf = [0u8; 512];
        // Warm the worker up first, so the baseline holds what does not grow with connections.
        let mut warm: Vec<TcpStream> = (0..64)
            .map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap())
            .collect();
        warm.iter_mut().for_each(|s| request(s, &mut buf));
        drop(warm);
        std::thread::sleep(Duration::from_millis(200));
        let before = status_bytes(pid, "VmRSS");

        let mut clients = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            request(&mut s, &mut buf);
            clients.push(s);
        }
        // Every one is still open and still served: a second request on each.
        clients.iter_mut().for_each(|s| request(s, &mut buf));
        assert!(
            open_fds(pid) >= CONNECTIONS,
            "{backend}: connections closed"
        );
        let after = status_bytes(pid, "VmRSS");
        let per_connection = after.saturating_sub(before) as f64 / CONNECTIONS as f64;
        eprintln!(
            "{backend}: RSS {before} → {after} bytes: {per_connection:.0} bytes per idle connection"
        );
        assert!(
            per_connection <= MAX_RSS_PER_IDLE_CONNECTION,
            "{backend}: {per_connection:.0} bytes of RSS per idle connection"
        );
        let snapshot = server.snapshot();
        let requests: u64 = snapshot["workers"][0]["requests"].as_u64().unwrap();
        assert_eq!(requests, 64 + 2 * CONNECTIONS as u64, "{backend}");
        drop(clients);
        let (status, _, _) = server.stop();
        assert!(status.success(), "{backend}");
    }
}

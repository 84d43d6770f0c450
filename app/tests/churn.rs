//! Connection churn: a connection per request leaks no descriptor, an overflowing accept queue
//! is drained and every connection in it served, and clients that reset instead of closing are
//! dropped while the server serves on — on io_uring and epoll (their accept and close paths
//! differ; rx, oneshot and legacy share epoll's).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::load::{self, open_fds, settle_fds};
use common::*;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

const IO_URING: &[(&str, &str)] = &[("APP_BACKEND", "io_uring")];
const EPOLL: &[(&str, &str)] = &[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")];

fn start(backend: &'static [(&'static str, &'static str)]) -> Server {
    Server::start(Launch {
        env: backend,
        deny_io_uring: None,
    })
}

fn counter(snapshot: &serde_json::Value, name: &str) -> u64 {
    snapshot["workers"][0][name].as_u64().unwrap()
}

/// `TcpExt: ListenOverflows` of this network namespace: connections the kernel dropped because
/// an accept queue was full.
fn listen_overflows() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ListenOverflows")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap()
}

/// Sends `GET /` and reads the (bodiless) answer's head.
fn get(s: &mut TcpStream) -> Result<(), String> {
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    read_bodiless_200(s)
}

fn per_request_churn_leaks_nothing(backend: &'static [(&'static str, &'static str)]) {
    let mut server = start(backend);
    let (pid, port) = (server.pid(), server.port);
    let before = server.snapshot();
    let idle = open_fds(pid);
    let opts = driver::Options {
        threads: 1,
        connections: 16,
        duration: Duration::from_secs(2),
        connection: driver::ConnMode::PerRequest,
        ..load::options(port)
    };
    let report = load::run(&opts);
    load::assert_no_errors(&report, &format!("{backend:?}"));
    assert!(report.requests > 1000, "{backend:?}: {report:?}");
    assert_eq!(
        settle_fds(pid, idle),
        idle,
        "{backend:?}: descriptors left open after {} connections",
        report.requests
    );
    let after = server.snapshot();
    // Every request its own connection (and the driver's pre-flight connect).
    let accepted = counter(&after, "connections") - counter(&before, "connections");
    assert!(accepted > report.requests, "{backend:?}: {after}");
    server.stop();
}

#[test]
fn io_uring_per_request_churn_leaks_no_descriptor() {
    per_request_churn_leaks_nothing(IO_URING);
}

#[test]
fn epoll_per_request_churn_leaks_no_descriptor() {
    per_request_churn_leaks_nothing(EPOLL);
}

/// More connections than `somaxconn` (4096 here; the server asks for 4096) arrive while the
/// server is stopped: the kernel drops the SYNs past a full queue and the clients retry. Once
/// the server runs again it must drain the queue and serve every one of them.
const FLOOD: usize = 5000;

fn an_overflowing_accept_queue_is_served(backend: &'static [(&'static str, &'static str)]) {
    let mut server = start(backend);
    let before = server.snapshot();
    let addr = SockAddr::from(std::net::SocketAddr::from(([127, 0, 0, 1], server.port)));
    let overflows = listen_overflows();
    server.signal(libc::SIGSTOP);
    let sockets: Vec<Socket> = (0..FLOOD)
        .map(|_| {
            let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
            s.set_nonblocking(true).unwrap();
            // In progress: the kernel completes it (or retries its SYN) on its own.
            let _ = s.connect(&addr);
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let dropped = listen_overflows() - overflows;
    server.signal(libc::SIGCONT);
    assert!(
        dropped > 0,
        "{FLOOD} connects did not overflow the accept queue: nothing here is tested"
    );
    let started = Instant::now();
    let failures: Vec<String> = sockets
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| {
            s.set_nonblocking(false).unwrap();
            let mut s = TcpStream::from(s);
            // A blocking send waits for a connect still in progress (its SYN retried).
            s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            get(&mut s).err().map(|e| format!("#{i}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{backend:?}: {} of {FLOOD} connections not served, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    let after = server.snapshot();
    let accepted = counter(&after, "connections") - counter(&before, "connections");
    assert_eq!(accepted, FLOOD as u64, "{backend:?}: {after}");
    eprintln!(
        "{backend:?}: {dropped} SYNs dropped at a full queue; all {FLOOD} served {:.1} s after SIGCONT",
        started.elapsed().as_secs_f64()
    );
    server.stop();
}

#[test]
fn io_uring_drains_an_overflowing_accept_queue() {
    an_overflowing_accept_queue_is_served(IO_URING);
}

#[test]
fn epoll_drains_an_overflowing_accept_queue() {
    an_overflowing_accept_queue_is_served(EPOLL);
}

/// Clients that end with a RST (SO_LINGER 0) at every point of a request: before sending
/// anything, in the middle of a head, and after a request without reading its answer.
fn resetting_clients_are_dropped(backend: &'static [(&'static str, &'static str)]) {
    const EACH: usize = 100;
    let mut server = start(backend);
    let (pid, port) = (server.pid(), server.port);
    let idle = open_fds(pid);
    let before = server.snapshot();
    for i in 0..3 * EACH {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let s = Socket::from(s);
        s.set_linger(Some(Duration::ZERO)).unwrap();
        let mut s = TcpStream::from(s);
        match i % 3 {
            0 => {}
            1 => s.write_all(b"GET /user/1 HTTP/1.1\r\nHo").unwrap(),
            _ => s
                .write_all(b"GET /user/2 HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap(),
        }
        drop(s); // RST
    }
    // Still serving, and every reset connection's descriptor given back.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    get(&mut c).unwrap_or_else(|e| panic!("{backend:?}: after the resets: {e}"));
    drop(c);
    assert_eq!(settle_fds(pid, idle), idle, "{backend:?}: descriptors kept");
    let after = server.snapshot();
    // A connection reset while still in the accept queue is accepted all the same.
    let accepted = counter(&after, "connections") - counter(&before, "connections");
    assert_eq!(accepted, (3 * EACH + 1) as u64, "{backend:?}: {after}");
    let (status, _, stderr) = server.stop();
    assert!(status.success(), "{backend:?}: {status:?} {stderr}");
}

#[test]
fn io_uring_drops_clients_that_reset() {
    resetting_clients_are_dropped(IO_URING);
}

#[test]
fn epoll_drops_clients_that_reset() {
    resetting_clients_are_dropped(EPOLL);
}

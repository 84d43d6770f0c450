//! Connection churn: a connection per request leaks no descriptor, an overflowing accept queue
//! is drained and every connection in it served, and clients that reset instead of closing are
//! dropped while the server serves on — on io_uring and epoll (their accept and close paths
//! differ; rx, oneshot and legacy share epoll's).
//!
//! The tests here run one at a time ([`one_at_a_time`]): each loads loopback as a whole, and
//! one reads a counter of the whole network namespace (ListenOverflows), so two side by side
//! fail each other (a flood beside the per-request churn starved it to 440 requests in 2 s; two
//! floods blurred each other's overflow count). Their own connections end with a reset once
//! served, so a run leaves no TIME_WAIT behind for the next (issue #49).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::load::{self, open_fds, settle_fds};
use common::*;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

// With its trail on: a connection the header timer has to close says what the reactor did.
const IO_URING: &[(&str, &str)] = &[("APP_BACKEND", "io_uring"), ("APP_TRAIL", "1")];
const EPOLL: &[(&str, &str)] = &[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")];

/// Held for the whole of each test: see the module's note.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOOPBACK: Mutex<()> = Mutex::new(());
    // A test that failed poisoned it; the next still runs on its own.
    LOOPBACK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The server's port exempted from connection tracking while the test runs (the runner's rules,
/// driver::notrack; removed when the value is dropped): thousands of connections a run would
/// otherwise fill a tracked table and have their SYNs dropped. Where it cannot be (no root, no
/// iptables), the test runs tracked and says so.
fn untracked(port: u16) -> Option<driver::notrack::Exemption> {
    driver::notrack::untracked_or_exempt(port..=port).unwrap_or_else(|tracked| {
        eprintln!("churn: port {port} stays tracked: {tracked}");
        None
    })
}

/// Ends a client with a reset rather than a FIN (SO_LINGER 0): no TIME_WAIT is left on either
/// side.
fn close_with_reset(s: TcpStream) {
    Socket::from(s).set_linger(Some(Duration::ZERO)).unwrap();
}

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

/// Waits until every thread of `pid` is stopped (state `T` in /proc/PID/task/*/stat).
fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let state = |stat: String| {
        stat.rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
    };
    loop {
        let running: Vec<char> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
            .filter_map(state)
            .filter(|&s| s != 'T')
            .collect();
        if running.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "server threads not stopped after SIGSTOP: {running:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends `GET /` and reads the (bodiless) answer's head.
fn get(s: &mut TcpStream) -> Result<(), String> {
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    read_bodiless_200(s)
}

fn per_request_churn_leaks_nothing(backend: &'static [(&'static str, &'static str)]) {
    let _alone = one_at_a_time();
    let mut server = start(backend);
    let (pid, port) = (server.pid(), server.port);
    let _untracked = untracked(port);
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
    let _alone = one_at_a_time();
    let mut server = start(backend);
    let _untracked = untracked(server.port);
    let before = server.snapshot();
    let addr = SockAddr::from(std::net::SocketAddr::from(([127, 0, 0, 1], server.port)));
    let overflows = listen_overflows();
    server.signal(libc::SIGSTOP);
    // kill() returns before the stop takes: a server still running meanwhile accepts part of
    // the flood, and on a busy machine enough of it that the queue never overflows.
    wait_stopped(server.pid());
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
            let served = get(&mut s).err().map(|e| format!("#{i}: {e}"));
            close_with_reset(s);
            served
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
    let _alone = one_at_a_time();
    let mut server = start(backend);
    let (pid, port) = (server.pid(), server.port);
    let _untracked = untracked(port);
    let idle = open_fds(pid);
    let before = server.snapshot();
    for i in 0..3 * EACH {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        match i % 3 {
            0 => {}
            1 => s.write_all(b"GET /user/1 HTTP/1.1\r\nHo").unwrap(),
            _ => s
                .write_all(b"GET /user/2 HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap(),
        }
        close_with_reset(s);
    }
    // Still serving, and every reset connection's descriptor given back.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    get(&mut c).unwrap_or_else(|e| panic!("{backend:?}: after the resets: {e}"));
    close_with_reset(c);
    let kept = settle_fds(pid, idle);
    if kept != idle {
        // Let the header timer close what was kept, so the server can print its trail.
        std::thread::sleep(Duration::from_secs(12));
        let (_, _, stderr) = server.stop();
        panic!("{backend:?}: descriptors kept: {kept} where {idle} were open before; {stderr}");
    }
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

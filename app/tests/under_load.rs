//! Hostile input while the worker is busy: one worker on one CPU kept saturated by the load
//! driver while other connections send requests built to be misread. Every hostile connection
//! gets its refusal and its close and nothing more; the load sees no error and no stray
//! answer; the worker's request counter agrees with the driver's.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::hostile::Malformed;
use common::load;
use common::*;

const CONNECTIONS: usize = 32;
const LOAD: Duration = Duration::from_secs(2);
/// Passes over every kind of malformed request during the load.
const PASSES: usize = 5;

/// One hostile connection: what came back, if it was not exactly the refusal and the end.
fn refused(port: u16, bad: Malformed) -> Result<(), String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may refuse and close before the rest is written: a failed write is no fault.
    let _ = c.write_all(&bad.bytes());
    let mut got = Vec::new();
    // Until the server's FIN (or its RST, if unread bytes were left when it closed).
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    let want = format!("HTTP/1.1 {} ", bad.status());
    let answers = text.matches("HTTP/1.1 ").count();
    if text.starts_with(&want) && answers == 1 {
        Ok(())
    } else {
        Err(format!("{bad:?}: {text:?}"))
    }
}

fn hostile_while_busy(backend: &[(&str, &str)]) {
    let cpus = reactor::affinity::allowed();
    let (server_cpu, load_cpus) = match cpus.as_slice() {
        [first, rest @ ..] if !rest.is_empty() => (*first, rest.to_vec()),
        _ => panic!("needs two CPUs (server and load apart), has {cpus:?}"),
    };
    let mut server = Server::start_through(
        &["taskset", "-c", &server_cpu.to_string()],
        Launch {
            env: backend,
            deny_io_uring: None,
        },
    );
    let port = server.port;
    // The counters from here on.
    let before = server.snapshot()["workers"][0].clone();
    let opts = driver::Options {
        threads: 1,
        connections: CONNECTIONS,
        duration: LOAD,
        ..load::options(port)
    };
    let done = AtomicBool::new(false);
    let (report, failures) = std::thread::scope(|scope| {
        let load = scope.spawn(move || {
            reactor::affinity::pin(0, &load_cpus).unwrap();
            load::run(&opts)
        });
        let hostile = scope.spawn(|| {
            // Start once the load is on, and stop before it is over: every refusal lands
            // while the worker is busy.
            std::thread::sleep(Duration::from_millis(300));
            let mut failures = Vec::new();
            let mut sent = 0;
            for bad in Malformed::ALL
                .iter()
                .cycle()
                .take(PASSES * Malformed::ALL.len())
            {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                if let Err(e) = refused(port, *bad) {
                    failures.push(e);
                }
                sent += 1;
            }
            (sent, failures)
        });
        let report = load.join().unwrap();
        done.store(true, Ordering::Relaxed);
        (report, hostile.join().unwrap())
    });
    let (sent, failures) = failures;
    let (_, counters, _) = server.stop();
    assert!(
        failures.is_empty(),
        "{backend:?}: {} of {sent} hostile connections got more or less than their refusal: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    assert_eq!(
        sent,
        PASSES * Malformed::ALL.len(),
        "{backend:?}: the load ended before every hostile request was sent"
    );
    load::assert_no_errors(&report, &format!("{backend:?}"));
    assert!(report.requests > 10_000, "{backend:?}: {report:?}");
    // The worker counts what it answered; the driver what it received within its window. A
    // request in flight on each connection when the window closed was answered but not
    // counted; a refusal answers no request; a hidden request answered would be one more.
    let since = |name: &str| {
        counters["workers"][0][name].as_u64().unwrap() - before[name].as_u64().unwrap()
    };
    let served = since("requests");
    assert!(
        (report.requests..=report.requests + CONNECTIONS as u64).contains(&served),
        "{backend:?}: the worker answered {served}, the driver received {}",
        report.requests
    );
    // The driver's own connections, its pre-flight connect (a clear error for a server that is
    // not there), and one a hostile request.
    assert_eq!(
        since("connections"),
        (CONNECTIONS + 1 + sent) as u64,
        "{backend:?}: {counters}"
    );
}

#[test]
fn io_uring() {
    hostile_while_busy(&[("APP_BACKEND", "io_uring")]);
}

#[test]
fn epoll_rx() {
    hostile_while_busy(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")]);
}

#[test]
fn epoll_oneshot() {
    hostile_while_busy(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "oneshot")]);
}

#[test]
fn epoll_legacy() {
    hostile_while_busy(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "legacy")]);
}

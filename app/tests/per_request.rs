//! A connection per request (`Connection: close`, the-benchmarker's old load model): every
//! response arrives whole before the server's FIN, on every backend, with clients racing the
//! server's closes and accepts; and the server pays no syscall per connection it need not.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::*;

const CLIENTS: usize = 4;
const REQUESTS_EACH: usize = 400;

/// Connect, ask with `Connection: close`, read the response and close at once — as a load
/// generator does, without waiting for the server's FIN: whether a whole 200 came back.
fn one_request(port: u16) -> Result<(), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    read_bodiless_200(&mut s)
}

/// The server on one CPU, so that work the kernel defers (an io_uring shutdown runs on an
/// io-wq thread) waits behind the server's own thread — where a descriptor number closed and
/// reused by the next accept shows up as a lost response.
fn every_response_arrives(backend: &[(&str, &str)]) {
    let cpu = reactor::affinity::allowed()[0].to_string();
    let server = Server::start_through(
        &["taskset", "-c", &cpu],
        Launch {
            env: backend,
            deny_io_uring: None,
        },
    );
    let port = server.port;
    let failures: Vec<String> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                scope.spawn(move || {
                    (0..REQUESTS_EACH)
                        .filter_map(|_| one_request(port).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect()
    });
    let (_, counters, _) = server.stop();
    assert!(
        failures.is_empty(),
        "{backend:?}: {} of {} requests lost their response, e.g. {:?}",
        failures.len(),
        CLIENTS * REQUESTS_EACH,
        &failures[..failures.len().min(3)]
    );
    let served = counters["workers"][0]["requests"].as_u64().unwrap();
    let n = (CLIENTS * REQUESTS_EACH) as u64;
    assert_eq!(served, n, "{counters}");
    // What a connection costs the server beyond its exchange: no setsockopt (TCP_NODELAY is
    // the listener's, which accepted sockets inherit), no shutdown (the client's last request
    // left nothing unread, so the server closes without lingering), and on epoll one accept4
    // — not a second that only learns EAGAIN.
    let calls = |k: &str| counters["workers"][0]["syscalls"][k].as_u64().unwrap_or(0);
    assert!(calls("setsockopt") <= 1, "{counters}");
    assert_eq!(calls("shutdown"), 0, "{counters}");
    if counters["backend"].as_str().unwrap().starts_with("epoll") {
        assert!(calls("accept4") <= n + n / 20, "{counters}");
    }
}

#[test]
fn io_uring() {
    every_response_arrives(&[("APP_BACKEND", "io_uring")]);
}

#[test]
fn io_uring_with_a_receive_sqe_per_request() {
    every_response_arrives(&[("APP_BACKEND", "io_uring"), ("APP_RECV_MULTISHOT", "0")]);
}

#[test]
fn epoll_rx() {
    every_response_arrives(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")]);
}

#[test]
fn epoll_legacy() {
    every_response_arrives(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "legacy")]);
}

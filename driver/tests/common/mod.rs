#![allow(dead_code)]

//! A small blocking HTTP server for the driver's tests: counts exactly what it receives.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Content-Length responses, keep-alive (a `Connection: close` is ignored, as some
    /// servers do).
    Length,
    /// Chunked responses, keep-alive.
    Chunked,
    /// `Connection: close` after every response.
    Close,
}

#[derive(Default, Debug)]
pub struct Counts {
    pub requests: u64,
    pub connections: u64,
    pub by_route: HashMap<String, u64>,
    /// Requests that asked for the close (`Connection: close`).
    pub asked_close: u64,
    /// The most requests any one connection carried.
    pub most_on_a_connection: u64,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub counts: Arc<Mutex<Counts>>,
    /// Every answer passes through it: held, it stalls the whole server.
    gate: Arc<RwLock<()>>,
}

impl TestServer {
    /// `GET /slow` is never answered; `/missing` gets 404; everything else 200 "ok".
    pub fn start(mode: Mode) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = Arc::new(Mutex::new(Counts::default()));
        let gate = Arc::new(RwLock::new(()));
        let (c, g) = (counts.clone(), gate.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                c.lock().unwrap().connections += 1;
                let (c, g) = (c.clone(), g.clone());
                std::thread::spawn(move || serve(stream, mode, c, g));
            }
        });
        TestServer { addr, counts, gate }
    }

    /// Answers nothing for `d` (requests still arrive), then everything held at once.
    pub fn stall(&self, d: Duration) {
        let _held = self.gate.write().unwrap();
        std::thread::sleep(d);
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.counts.lock().unwrap().requests
    }
}

fn serve(stream: TcpStream, mode: Mode, counts: Arc<Mutex<Counts>>, gate: Arc<RwLock<()>>) {
    stream.set_nodelay(true).unwrap();
    let mut out = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut on_this_connection = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                if n.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
                if n.eq_ignore_ascii_case("connection") && v.trim().eq_ignore_ascii_case("close") {
                    counts.lock().unwrap().asked_close += 1;
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        {
            let mut c = counts.lock().unwrap();
            c.requests += 1;
            on_this_connection += 1;
            c.most_on_a_connection = c.most_on_a_connection.max(on_this_connection);
            *c.by_route.entry(format!("{method}:{path}")).or_default() += 1;
        }
        if path == "/slow" {
            // Never answer; hold the connection until the client gives up.
            let mut sink = [0u8; 1];
            let _ = reader
                .get_mut()
                .set_read_timeout(Some(Duration::from_secs(30)));
            let _ = reader.read(&mut sink);
            return;
        }
        let status = if path == "/missing" {
            "404 Not Found"
        } else {
            "200 OK"
        };
        let response = match mode {
            Mode::Length => format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok"),
            Mode::Chunked => format!("HTTP/1.1 {status}\r\nTransfer-Encoding: chunked\r\n\r\n1\r\no\r\n1\r\nk\r\n0\r\n\r\n"),
            Mode::Close => format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"),
        };
        let _open = gate.read().unwrap();
        if out.write_all(response.as_bytes()).is_err() || mode == Mode::Close {
            return;
        }
    }
}

/// Whether rxload's connection-per-request mode may run against loopback `port` here: it
/// refuses while netfilter tracks that port (Docker loads the tracker). Where it does, the
/// port is exempted for the test as the runner exempts its own (driver::notrack; the rules go
/// when the returned value is dropped: hold it for the test). Where that cannot be done (no
/// root, no iptables), the test says SKIPPED on the real stderr — unless
/// RXBENCH_REQUIRE_DOCKER (set by `.ci/run`) says this machine must run everything, when it
/// fails.
#[allow(dead_code)] // each test binary uses part of this
pub fn loopback_untracked_or_skip(
    test: &str,
    port: u16,
) -> Option<Option<driver::notrack::Exemption>> {
    let tracked = match driver::notrack::untracked_or_exempt(port..=port) {
        Ok(exemption) => return Some(exemption),
        Err(tracked) => tracked,
    };
    assert!(
        std::env::var_os("RXBENCH_REQUIRE_DOCKER").is_none(),
        "{test}: RXBENCH_REQUIRE_DOCKER is set but {tracked}"
    );
    let line = format!("SKIPPED {test}: {tracked}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    None
}

//! Property: for any stream of pipelined requests, split anywhere, with a malformed one mixed
//! in, through a real connection on every backend — every valid request before the first
//! malformed one is answered exactly once, in order, then that one gets its 4xx/5xx and the
//! connection closes; nothing after it is ever answered (a request hidden behind a framing
//! error is never served).

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use common::hostile::Malformed;
use common::{Launch, Server};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Valid {
    Root,
    User(String),
    Head(String),
    PostLength(Vec<u8>),
    /// Chunks (with an extension on the first), and a trailer or not.
    PostChunked(Vec<Vec<u8>>, bool),
    Absolute(String),
    Http10KeepAlive(String),
}

impl Valid {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Valid::Root => b"GET / HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
            Valid::User(id) => format!("GET /user/{id} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes(),
            Valid::Head(id) => format!("HEAD /user/{id} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes(),
            Valid::PostLength(body) => {
                let mut b = format!("POST /user HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
                b.extend_from_slice(body);
                b
            }
            Valid::PostChunked(chunks, trailer) => {
                let mut b = b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    .to_vec();
                for (i, c) in chunks.iter().enumerate() {
                    let ext = if i == 0 { ";name=\"v\"" } else { "" };
                    b.extend_from_slice(format!("{:x}{ext}\r\n", c.len()).as_bytes());
                    b.extend_from_slice(c);
                    b.extend_from_slice(b"\r\n");
                }
                b.extend_from_slice(b"0\r\n");
                if *trailer {
                    b.extend_from_slice(b"X-Checksum: 1\r\n");
                }
                b.extend_from_slice(b"\r\n");
                b
            }
            Valid::Absolute(id) => {
                format!("GET http://t:3000/user/{id} HTTP/1.1\r\nHost: t:3000\r\n\r\n").into_bytes()
            }
            Valid::Http10KeepAlive(id) => {
                format!("GET /user/{id} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").into_bytes()
            }
        }
    }

    /// Status, body, and whether the response carries its body (HEAD does not).
    fn answer(&self) -> (u16, Vec<u8>, bool) {
        match self {
            Valid::User(id) | Valid::Absolute(id) | Valid::Http10KeepAlive(id) => {
                (200, id.as_bytes().to_vec(), true)
            }
            Valid::Head(id) => (200, id.as_bytes().to_vec(), false),
            _ => (200, vec![], true),
        }
    }
}

fn valid() -> impl Strategy<Value = Valid> {
    let id = "[a-z0-9]{1,12}";
    prop_oneof![
        Just(Valid::Root),
        id.prop_map(Valid::User),
        id.prop_map(Valid::Head),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Valid::PostLength),
        (
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..40), 0..4),
            any::<bool>()
        )
            .prop_map(|(c, t)| Valid::PostChunked(c, t)),
        id.prop_map(Valid::Absolute),
        id.prop_map(Valid::Http10KeepAlive),
    ]
}

/// A parsed response: status and body (read by Content-Length unless it answers a HEAD).
fn read_response(r: &mut impl Read, with_body: bool) -> Option<(u16, Vec<u8>)> {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        if r.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8(head).ok()?;
    let status = text.get(9..12)?.parse().ok()?;
    let length: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; if with_body { length } else { 0 }];
    r.read_exact(&mut body).ok()?;
    Some((status, body))
}

/// One server per backend, shared by every case.
fn servers() -> &'static Vec<(&'static str, u16)> {
    static SERVERS: OnceLock<Vec<(&'static str, u16)>> = OnceLock::new();
    SERVERS.get_or_init(|| {
        [
            ("io_uring", &[("APP_BACKEND", "io_uring")][..]),
            (
                "epoll/rx",
                &[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")][..],
            ),
            (
                "epoll/oneshot",
                &[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "oneshot")][..],
            ),
            (
                "epoll/legacy",
                &[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "legacy")][..],
            ),
        ]
        .into_iter()
        .map(|(name, env)| {
            let server = Server::start(Launch {
                env,
                deny_io_uring: None,
            });
            let port = server.port;
            // Kept for the life of the test that started it: `die_with_spawning_thread`
            // kills it when that test's thread ends.
            std::mem::forget(server);
            (name, port)
        })
        .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_valid_request_before_the_first_malformed_one_is_answered_once_in_order(
        before in proptest::collection::vec(valid(), 0..12),
        bad in proptest::option::of(0usize..Malformed::ALL.len()),
        after in proptest::collection::vec(valid(), 0..4),
        cuts in proptest::collection::vec(1usize..200, 1..40),
    ) {
        let bad = bad.map(|i| Malformed::ALL[i]);
        let mut stream: Vec<u8> = before.iter().flat_map(Valid::bytes).collect();
        if let Some(b) = bad {
            stream.extend(b.bytes());
            stream.extend(after.iter().flat_map(Valid::bytes));
        }
        for &(backend, port) in servers() {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.set_nodelay(true).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // Split the stream at the generated cut sizes, cycling through them.
            let mut pos = 0;
            for &cut in cuts.iter().cycle() {
                if pos >= stream.len() {
                    break;
                }
                let end = (pos + cut).min(stream.len());
                // After a refusal the server may have closed: later writes can fail.
                if c.write_all(&stream[pos..end]).is_err() {
                    break;
                }
                pos = end;
            }
            let _ = c.shutdown(Shutdown::Write);
            for (i, v) in before.iter().enumerate() {
                let (status, body, with_body) = v.answer();
                let got = read_response(&mut c, with_body);
                prop_assert_eq!(got, Some((status, if with_body { body } else { vec![] })), "{} request {} {:?}", backend, i, v);
            }
            if let Some(b) = bad {
                let got = read_response(&mut c, true).map(|(s, _)| s);
                prop_assert_eq!(got, Some(b.status()), "{}: {:?}", backend, b);
            }
            // Then nothing: the connection ends, and no hidden or later request was answered.
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            prop_assert!(rest.is_empty(), "{}: more after the last expected answer: {:?}", backend, String::from_utf8_lossy(&rest));
        }
    }
}

#![allow(dead_code)] // each test binary uses part of this

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use reactor::{BackendChoice, Config, Conn, EpollMode, Event, Reactor, Recv};

/// Every receive path: io_uring, io_uring with multishot receives, then epoll rx / oneshot /
/// legacy.
pub fn all_configs() -> Vec<(&'static str, Config)> {
    let mut out = vec![
        (
            "io_uring",
            Config {
                backend: BackendChoice::IoUring,
                recv_multishot: false,
                ..Config::default()
            },
        ),
        ("io_uring/multishot", multishot(1024)),
    ];
    for (name, mode) in [
        ("epoll/rx", EpollMode::Rx),
        ("epoll/oneshot", EpollMode::Oneshot),
        ("epoll/legacy", EpollMode::Legacy),
    ] {
        out.push((name, epoll(mode)));
    }
    out
}

/// io_uring with multishot receives into `buffers` provided buffers.
pub fn multishot(buffers: u16) -> Config {
    Config {
        backend: BackendChoice::IoUring,
        recv_multishot: true,
        multishot_buffers: buffers,
        ..Config::default()
    }
}

pub fn epoll(mode: EpollMode) -> Config {
    Config {
        backend: BackendChoice::Epoll,
        epoll_mode: mode,
        ..Config::default()
    }
}

/// A connected TCP pair over loopback: the server side handed to the reactor.
pub fn pair(reactor: &mut Reactor) -> (Conn, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    client.set_nodelay(true).unwrap();
    let (server, _) = listener.accept().unwrap();
    let conn = reactor.register(OwnedFd::from(server)).unwrap();
    (conn, client)
}

/// Polls until `done` says the collected events are enough; panics after 5 s.
pub fn poll_until(
    reactor: &mut Reactor,
    what: &str,
    mut done: impl FnMut(&[Event]) -> bool,
) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut events = Vec::new();
    while !done(&events) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; got {events:?}"
        );
        reactor
            .poll(&mut events, Some(Duration::from_millis(20)))
            .unwrap();
    }
    events
}

/// Polls for `for_how_long` and returns whatever arrived.
pub fn poll_for(reactor: &mut Reactor, for_how_long: Duration) -> Vec<Event> {
    let deadline = Instant::now() + for_how_long;
    let mut events = Vec::new();
    while Instant::now() < deadline {
        reactor
            .poll(&mut events, Some(Duration::from_millis(10)))
            .unwrap();
    }
    events
}

/// Waits for the armed receive on `conn` and returns its buffer and result.
pub fn next_recv(reactor: &mut Reactor, conn: Conn) -> (Vec<u8>, Recv) {
    let events = poll_until(reactor, "a receive", |ev| {
        ev.iter()
            .any(|e| matches!(e, Event::Received { conn: c, .. } if *c == conn))
    });
    let mut found = None;
    for e in events {
        match e {
            Event::Received {
                conn: c,
                buf,
                result,
            } if c == conn => found = Some((buf, result)),
            Event::Sent { .. } => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
    found.unwrap()
}

pub fn write_all(stream: &mut TcpStream, data: &[u8]) {
    stream.write_all(data).unwrap();
}

/// Closes `stream` with a TCP reset instead of a FIN (SO_LINGER with a zero timeout).
pub fn reset(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: valid socket fd and a live linger struct of the size given.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    drop(stream);
}

//! fd-number reuse. One test alone in its binary: no other thread opens fds, so the kernel's
//! lowest-free-number rule makes the reuse deterministic.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;

use reactor::fdtable::{self, Hint, Registration};
use reactor::{BackendChoice, Config, Conn, EpollMode, Event, Reactor, Recv, Syscall};

fn accept_one(r: &mut Reactor, addr: std::net::SocketAddr) -> (Conn, TcpStream) {
    let client = TcpStream::connect(addr).unwrap();
    let mut events = Vec::new();
    let conn = loop {
        r.poll(&mut events, Some(std::time::Duration::from_millis(50)))
            .unwrap();
        if let Some(Event::Accepted { conn, .. }) = events.pop() {
            break conn;
        }
    };
    (conn, client)
}

fn echo_once(r: &mut Reactor, conn: Conn, client: &mut TcpStream) {
    r.arm_recv(conn, Vec::with_capacity(16)).unwrap();
    client.write_all(b"ping").unwrap();
    let mut events = Vec::new();
    while events.is_empty() {
        r.poll(&mut events, Some(std::time::Duration::from_millis(50)))
            .unwrap();
    }
    let Some(Event::Received {
        buf,
        result: Recv::Data(4),
        ..
    }) = events.pop()
    else {
        panic!("expected 4 bytes, got {events:?}");
    };
    r.send(conn, buf).unwrap();
    let mut reply = [0u8; 4];
    client.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"ping");
}

#[test]
fn accepted_fds_start_unregistered_and_a_reused_number_registers_again() {
    let config = Config {
        backend: BackendChoice::Epoll,
        epoll_mode: EpollMode::Rx,
        ..Config::default()
    };
    let mut r = Reactor::new(&config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    r.listen(OwnedFd::from(listener)).unwrap();

    let (a, mut client_a) = accept_one(&mut r, addr);
    let fd = r.fd(a).unwrap();
    let hint_a = fdtable::get(fd);
    assert_eq!(
        hint_a.registration,
        Registration::None,
        "accept resets the hint"
    );
    let before = r.counts();
    echo_once(&mut r, a, &mut client_a);
    assert_eq!(r.counts().since(&before).get(Syscall::EpollCtlAdd), 1);
    assert_eq!(fdtable::get(fd).registration, Registration::Rx);

    // Close A and plant a stale "registered RX" hint for the next generation on its number:
    // the accept of B must not trust it.
    r.close(a);
    drop(client_a);
    fdtable::set(fd, hint_a.generation + 1, Registration::Rx);

    let (b, mut client_b) = accept_one(&mut r, addr);
    assert_eq!(
        r.fd(b),
        Some(fd),
        "the kernel reuses the lowest free fd number"
    );
    let hint_b = fdtable::get(fd);
    assert_eq!(hint_b.registration, Registration::None);
    assert_ne!(
        hint_b,
        Hint {
            generation: hint_a.generation,
            registration: Registration::None
        }
    );
    let before = r.counts();
    echo_once(&mut r, b, &mut client_b);
    let d = r.counts().since(&before);
    assert_eq!(d.get(Syscall::EpollCtlAdd), 1, "B registers again: {d:?}");
    // A stale handle to A, whose slot and fd number B now uses, is refused.
    assert!(r.arm_recv(a, Vec::with_capacity(4)).is_err());
}

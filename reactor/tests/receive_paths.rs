//! The receive contract on every backend, and what each epoll mode costs in epoll_ctl.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use reactor::fdtable::{self, Registration};
use reactor::{EpollMode, Errno, Event, Interest, Reactor, Recv, Syscall};

#[test]
fn keep_alive_receives_cost_0_1_or_2_epoll_ctl_by_mode() {
    for (mode, per_receive) in [
        (EpollMode::Rx, 0),
        (EpollMode::Oneshot, 1),
        (EpollMode::Legacy, 2),
    ] {
        let mut r = Reactor::new(&epoll(mode)).unwrap();
        let (conn, mut client) = pair(&mut r);
        r.arm_recv(conn, Vec::with_capacity(64)).unwrap();
        write_all(&mut client, b"first");
        let (mut buf, res) = next_recv(&mut r, conn);
        assert_eq!(res, Recv::Data(5));
        let after_first = r.counts();
        for i in 0..200u32 {
            buf.clear();
            r.arm_recv(conn, buf).unwrap();
            let msg = format!("request {i}");
            write_all(&mut client, msg.as_bytes());
            let (b, res) = next_recv(&mut r, conn);
            assert_eq!(res, Recv::Data(msg.len()), "{mode}");
            assert_eq!(b, msg.as_bytes(), "{mode}");
            buf = b;
        }
        let d = r.counts().since(&after_first);
        assert_eq!(d.epoll_ctl(), 200 * per_receive, "{mode}: {d:?}");
        if mode == EpollMode::Legacy {
            assert_eq!(d.epoll_ctl_refused, 200, "legacy: every ADD meets EEXIST");
        } else {
            assert_eq!(
                d.epoll_ctl_refused, 0,
                "{mode}: the hint avoids refused calls"
            );
        }
        // A short read means drained: never an extra recv that returns EAGAIN.
        assert_eq!(d.get(Syscall::Recv), 200, "{mode}: {d:?}");
    }
}

#[test]
fn io_uring_receives_make_no_epoll_or_recv_syscalls() {
    for (name, config) in all_configs().into_iter().take(2) {
        let mut r = Reactor::new(&config).unwrap();
        assert_eq!(r.report().backend(), wire::Backend::IoUring);
        assert_eq!(
            matches!(
                r.report().io_uring(),
                wire::IoUringState::Active {
                    recv_multishot: true,
                    ..
                }
            ),
            config.recv_multishot,
            "{name}: {}",
            r.report()
        );
        let (conn, mut client) = pair(&mut r);
        let mut buf = Vec::with_capacity(64);
        for i in 0..50u32 {
            r.arm_recv(conn, buf).unwrap();
            write_all(&mut client, format!("req {i}").as_bytes());
            let (b, res) = next_recv(&mut r, conn);
            assert_eq!(b, format!("req {i}").as_bytes(), "{name}");
            assert!(matches!(res, Recv::Data(_)));
            buf = b;
            buf.clear();
        }
        let c = r.counts();
        assert_eq!(c.epoll_ctl() + c.get(Syscall::EpollWait), 0, "{name}");
        assert_eq!(c.get(Syscall::Recv) + c.get(Syscall::Send), 0, "{name}");
        assert!(c.get(Syscall::IoUringEnter) > 0);
        // The buffer ring is the only registration.
        assert_eq!(
            c.get(Syscall::IoUringRegister),
            u64::from(config.recv_multishot),
            "{name}"
        );
    }
}

/// Reads `len` bytes from `conn` with arms of `arm` bytes, polling as it goes.
fn read_exactly(r: &mut Reactor, conn: reactor::Conn, len: usize, arm: usize) -> Vec<u8> {
    let mut got = Vec::with_capacity(len);
    while got.len() < len {
        r.arm_recv(conn, Vec::with_capacity(arm)).unwrap();
        let (buf, res) = next_recv(r, conn);
        assert!(matches!(res, Recv::Data(n) if n > 0 && n <= arm), "{res:?}");
        got.extend_from_slice(&buf);
    }
    got
}

#[test]
fn multishot_survives_running_out_of_provided_buffers() {
    // Two 4 KiB buffers for 300 KB: the multishot receive keeps meeting ENOBUFS and must be
    // started again each time, without losing or reordering a byte.
    let mut r = Reactor::new(&multishot(2)).unwrap();
    assert!(r.report().to_string().contains(",recv_multishot)"));
    let (conn, mut client) = pair(&mut r);
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let to_send = payload.clone();
    let writer = std::thread::spawn(move || {
        write_all(&mut client, &to_send);
        client
    });
    let got = read_exactly(&mut r, conn, payload.len(), 64 * 1024);
    drop(writer.join().unwrap());
    assert!(got == payload, "bytes lost or reordered");
    // The turn counters saw it: the ring ran dry, and every wait's completions were counted.
    let turns = r.turns();
    assert!(turns.buffers_empty > 0, "{turns:?}");
    assert!(turns.waits > 0 && turns.submitted > 0, "{turns:?}");
    assert!(turns.reaped >= turns.buffers_empty, "{turns:?}");
}

#[test]
fn turn_counters_count_waits_events_and_time_on_every_path() {
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let before = r.turns();
        let (conn, mut client) = pair(&mut r);
        r.arm_recv(conn, Vec::with_capacity(64)).unwrap();
        // One wait that times out, then one that brings the bytes.
        assert!(
            poll_for(&mut r, Duration::from_millis(20)).is_empty(),
            "{name}"
        );
        write_all(&mut client, b"ping");
        next_recv(&mut r, conn);
        let turns = r.turns();
        assert!(turns.waits >= before.waits + 2, "{name}: {turns:?}");
        assert!(turns.reaped > before.reaped, "{name}: {turns:?}");
        // The timed-out waits alone slept about 20 ms.
        assert!(
            turns.wait_ns - before.wait_ns >= 15_000_000,
            "{name}: {turns:?}"
        );
        assert_eq!(
            turns.submitted > 0,
            name.starts_with("io_uring"),
            "{name}: {turns:?}"
        );
        assert_eq!(turns.buffers_empty, 0, "{name}: {turns:?}");
    }
}

#[test]
fn multishot_stops_reading_when_nobody_arms_so_the_peer_feels_it() {
    // One-shot receives leave unread bytes in the socket, where TCP pushes back on the
    // writer. A multishot receive must not turn that into an unbounded stash.
    let mut r = Reactor::new(&multishot(1024)).unwrap();
    let (conn, mut client) = pair(&mut r);
    r.arm_recv(conn, Vec::with_capacity(16)).unwrap();
    write_all(&mut client, b"hello");
    assert_eq!(next_recv(&mut r, conn).0, b"hello");
    client.set_nonblocking(true).unwrap();
    let chunk: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
    let mut written = 0usize;
    let mut last_growth = 0;
    for round in 0..60 {
        loop {
            match std::io::Write::write(&mut client, &chunk[written % chunk.len()..]) {
                Ok(n) => {
                    written += n;
                    last_growth = round;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let idle = poll_for(&mut r, Duration::from_millis(5));
        assert!(idle.is_empty(), "nothing is armed: {idle:?}");
    }
    assert!(
        last_growth < 50,
        "the writer never blocked: {written} bytes taken without an arm"
    );
    client.set_nonblocking(false).unwrap();
    let got = read_exactly(&mut r, conn, written, 256 * 1024);
    let want: Vec<u8> = (0..written).map(|i| ((i % 65_536) % 251) as u8).collect();
    assert!(got == want, "bytes lost or reordered");
}

#[test]
fn hundred_bytes_through_a_ten_byte_buffer_without_new_edges() {
    let payload: Vec<u8> = (0..100u8).collect();
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let (conn, mut client) = pair(&mut r);
        // All bytes are in the socket before the first arm: one edge at most.
        write_all(&mut client, &payload);
        std::thread::sleep(Duration::from_millis(20));
        let mut got = Vec::new();
        while got.len() < payload.len() {
            r.arm_recv(conn, Vec::with_capacity(10)).unwrap();
            let (buf, res) = next_recv(&mut r, conn);
            assert!(matches!(res, Recv::Data(n) if n <= 10), "{name}: {res:?}");
            got.extend_from_slice(&buf);
        }
        assert_eq!(got, payload, "{name}");
    }
}

#[test]
fn bytes_that_arrive_while_nothing_is_armed_reach_the_next_arm() {
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let (conn, mut client) = pair(&mut r);
        r.arm_recv(conn, Vec::with_capacity(16)).unwrap();
        write_all(&mut client, b"one");
        let (mut buf, _) = next_recv(&mut r, conn);
        // Nothing armed now; the edge for "two" is consumed by these polls.
        write_all(&mut client, b"two");
        let idle = poll_for(&mut r, Duration::from_millis(60));
        assert!(idle.is_empty(), "{name}: {idle:?}");
        buf.clear();
        r.arm_recv(conn, buf).unwrap();
        let (buf, res) = next_recv(&mut r, conn);
        assert_eq!(
            (buf.as_slice(), res),
            (&b"two"[..], Recv::Data(3)),
            "{name}"
        );
    }
}

#[test]
fn a_oneshot_wait_takes_the_fd_over_and_an_rx_arm_registers_it_again() {
    let mut r = Reactor::new(&epoll(EpollMode::Rx)).unwrap();
    let (conn, mut client) = pair(&mut r);
    let fd = r.fd(conn).unwrap();
    r.arm_recv(conn, Vec::with_capacity(16)).unwrap();
    write_all(&mut client, b"a");
    let (mut buf, _) = next_recv(&mut r, conn);
    assert_eq!(fdtable::get(fd).registration, Registration::Rx);

    let before = r.counts();
    r.wait_ready(conn, Interest::READABLE).unwrap();
    assert_eq!(fdtable::get(fd).registration, Registration::Oneshot);
    write_all(&mut client, b"b");
    let ev = poll_until(&mut r, "readiness", |ev| !ev.is_empty());
    assert!(
        matches!(ev[..], [Event::Ready { ready, .. }] if ready.readable),
        "{ev:?}"
    );

    // The RX arm registers edge-triggered again; "b", announced by the edge the one-shot
    // consumed, is still delivered.
    buf.clear();
    r.arm_recv(conn, buf).unwrap();
    assert_eq!(fdtable::get(fd).registration, Registration::Rx);
    let (mut buf, res) = next_recv(&mut r, conn);
    assert_eq!((buf.as_slice(), res), (&b"b"[..], Recv::Data(1)));
    assert_eq!(r.counts().since(&before).epoll_ctl(), 2, "one MOD each way");

    // And it is back to zero epoll_ctl per receive.
    let back = r.counts();
    for _ in 0..10 {
        buf.clear();
        r.arm_recv(conn, buf).unwrap();
        write_all(&mut client, b"c");
        buf = next_recv(&mut r, conn).0;
    }
    assert_eq!(r.counts().since(&back).epoll_ctl(), 0);
}

#[test]
fn eof_is_delivered_exactly_once() {
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let (conn, mut client) = pair(&mut r);
        write_all(&mut client, b"bye");
        client.shutdown(std::net::Shutdown::Write).unwrap();
        let mut data = Vec::new();
        let mut eofs = 0;
        let mut buf = Vec::with_capacity(2);
        loop {
            r.arm_recv(conn, buf).unwrap();
            let (b, res) = next_recv(&mut r, conn);
            match res {
                Recv::Data(_) => data.extend_from_slice(&b),
                Recv::Eof => {
                    eofs += 1;
                    break;
                }
                Recv::Error(e) => panic!("{name}: {e}"),
            }
            buf = Vec::with_capacity(2);
        }
        assert_eq!(data, b"bye", "{name}");
        assert_eq!(eofs, 1);
        let after = poll_for(&mut r, Duration::from_millis(60));
        assert!(after.is_empty(), "{name}: nothing after EOF, got {after:?}");
        // The connection still works for sending after the peer's half-close.
        r.send(conn, b"still here".to_vec()).unwrap();
        let ev = poll_until(&mut r, "send", |ev| !ev.is_empty());
        assert!(
            matches!(ev[..], [Event::Sent { result: Ok(()), .. }]),
            "{name}: {ev:?}"
        );
        let mut reply = [0u8; 10];
        client.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"still here");
    }
}

#[test]
fn a_peer_reset_is_delivered_exactly_once() {
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let (conn, client) = pair(&mut r);
        r.arm_recv(conn, Vec::with_capacity(16)).unwrap();
        reset(client);
        let (_, res) = next_recv(&mut r, conn);
        assert_eq!(res, Recv::Error(Errno(libc::ECONNRESET)), "{name}");
        let after = poll_for(&mut r, Duration::from_millis(60));
        assert!(after.is_empty(), "{name}: {after:?}");
        r.close(conn);
    }
}

#[test]
fn sends_larger_than_the_socket_buffer_complete_in_order() {
    let payload: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let (conn, mut client) = pair(&mut r);
        let expected = payload.clone();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; expected.len()];
            client.read_exact(&mut got).unwrap();
            got == expected
        });
        r.send(conn, payload.clone()).unwrap();
        let ev = poll_until(&mut r, "big send", |ev| !ev.is_empty());
        assert!(
            matches!(ev[..], [Event::Sent { result: Ok(()), .. }]),
            "{name}: {ev:?}"
        );
        assert!(reader.join().unwrap(), "{name}: bytes differ");
    }
}

#[test]
fn rx_sends_that_fill_the_socket_cost_one_epoll_ctl_in_the_connections_life() {
    let mut r = Reactor::new(&epoll(EpollMode::Rx)).unwrap();
    let (conn, client) = pair(&mut r);
    r.arm_recv(conn, Vec::with_capacity(64)).unwrap(); // the one registration
    let after_registration = r.counts();
    for round in 0..3u8 {
        let mut reader = client.try_clone().unwrap();
        let n = 8_000_000;
        let check = std::thread::spawn(move || {
            // A late reader: the send fills the socket buffers and meets EAGAIN first.
            std::thread::sleep(Duration::from_millis(100));
            let mut got = vec![0u8; n];
            reader.read_exact(&mut got).unwrap();
            got.iter().all(|&b| b == round)
        });
        r.send(conn, vec![round; n]).unwrap();
        let ev = poll_until(&mut r, "big send", |ev| {
            ev.iter().any(|e| matches!(e, Event::Sent { .. }))
        });
        assert!(
            ev.iter()
                .any(|e| matches!(e, Event::Sent { result: Ok(()), .. })),
            "{ev:?}"
        );
        assert!(check.join().unwrap(), "round {round}: bytes differ");
    }
    let d = r.counts().since(&after_registration);
    assert!(
        d.get(Syscall::Send) > 3,
        "the sends did fill the socket: {d:?}"
    );
    assert_eq!(
        d.epoll_ctl(),
        1,
        "one MOD adds OUT at the first full socket; after it writability is tracked by edges: {d:?}"
    );
}

#[test]
fn rx_a_fresh_connection_wakes_the_loop_for_its_bytes_only() {
    // A fresh socket is writable at once: registered for OUT from the start, it would report
    // that edge to the first wait, which no one waits for.
    let mut r = Reactor::new(&epoll(EpollMode::Rx)).unwrap();
    let (conn, mut client) = pair(&mut r);
    let before = r.counts();
    r.arm_recv(conn, Vec::with_capacity(64)).unwrap();
    let mut events = Vec::new();
    let t = Instant::now();
    r.poll(&mut events, Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        events.is_empty() && t.elapsed() >= Duration::from_millis(250),
        "the wait returned after {:?} with {events:?}: something woke it",
        t.elapsed()
    );
    client.write_all(b"ping").unwrap();
    let ev = poll_until(&mut r, "the bytes", |ev| {
        ev.iter().any(|e| matches!(e, Event::Received { .. }))
    });
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Received { buf, .. } if buf == b"ping")),
        "{ev:?}"
    );
    let d = r.counts().since(&before);
    assert_eq!(d.epoll_ctl(), 1, "one ADD: {d:?}");
}

#[test]
fn misuse_is_refused_and_the_buffer_comes_back() {
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let (conn, _client) = pair(&mut r);
        let full = Vec::with_capacity(0);
        let refused = r.arm_recv(conn, full).unwrap_err();
        assert_eq!(
            refused.reason,
            reactor::RefuseReason::NoSpareCapacity,
            "{name}"
        );
        r.arm_recv(conn, Vec::with_capacity(8)).unwrap();
        let mut second = vec![7u8];
        second.reserve(8);
        let refused = r.arm_recv(conn, second).unwrap_err();
        assert_eq!(refused.reason, reactor::RefuseReason::RecvArmed, "{name}");
        assert_eq!(refused.buf[0], 7);
        r.close(conn);
        let refused = r.send(conn, b"x".to_vec()).unwrap_err();
        assert_eq!(refused.reason, reactor::RefuseReason::Stale, "{name}");
        assert!(r.fd(conn).is_none());
    }
}

#[test]
fn a_waker_on_another_thread_wakes_a_blocked_poll() {
    for (name, config) in all_configs() {
        let mut r = Reactor::new(&config).unwrap();
        let waker = r.waker();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            waker.wake();
        });
        let mut events = Vec::new();
        // No timeout: only the wake can end this poll.
        while events.is_empty() {
            r.poll(&mut events, None).unwrap();
        }
        assert!(matches!(events[..], [Event::Woken]), "{name}: {events:?}");
        t.join().unwrap();
    }
}

#[test]
fn a_batched_poll_holds_out_for_its_batch_but_not_past_the_batch_wait() {
    let config = |wait_ms| reactor::Config {
        backend: reactor::BackendChoice::IoUring,
        batch_wait: Duration::from_millis(wait_ms),
        ..reactor::Config::default()
    };
    // A complete batch returns at once, long before the batch wait.
    let mut r = Reactor::new(&config(2_000)).unwrap();
    if !r.batches_waits() {
        eprintln!("SKIPPED: this kernel has no io_uring min-wait (6.12+)");
        return;
    }
    let mut pairs: Vec<_> = (0..4).map(|_| pair(&mut r)).collect();
    for (conn, _) in &pairs {
        r.arm_recv(*conn, Vec::with_capacity(8)).unwrap();
    }
    for (_, client) in &mut pairs {
        write_all(client, b"x");
    }
    std::thread::sleep(Duration::from_millis(20));
    let mut events = Vec::new();
    let t = std::time::Instant::now();
    while events.len() < 4 {
        r.poll_batch(&mut events, Some(Duration::from_secs(5)), 4)
            .unwrap();
    }
    assert!(
        t.elapsed() < Duration::from_millis(1_000),
        "{:?}",
        t.elapsed()
    );

    // One completion of a batch of four: held for the batch wait, then returned.
    let mut r = Reactor::new(&config(100)).unwrap();
    let mut pairs: Vec<_> = (0..4).map(|_| pair(&mut r)).collect();
    for (conn, _) in &pairs {
        r.arm_recv(*conn, Vec::with_capacity(8)).unwrap();
    }
    write_all(&mut pairs[0].1, b"x");
    let mut events = Vec::new();
    let t = std::time::Instant::now();
    while events.is_empty() {
        r.poll_batch(&mut events, Some(Duration::from_secs(5)), 4)
            .unwrap();
    }
    let waited = t.elapsed();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        waited >= Duration::from_millis(90) && waited < Duration::from_secs(3),
        "held {waited:?} for a 100 ms batch wait"
    );

    // epoll has no batches: it returns at the first event.
    let r = Reactor::new(&epoll(EpollMode::Rx)).unwrap();
    assert!(!r.batches_waits());
}

#[test]
fn a_send_the_socket_takes_whole_completes_in_the_same_turn_on_epoll() {
    for mode in [EpollMode::Rx, EpollMode::Oneshot, EpollMode::Legacy] {
        let mut r = Reactor::new(&epoll(mode)).unwrap();
        let before = r.counts();
        let (conn, mut client) = pair(&mut r);
        // Taking over a socket the reactor did not make: one ioctl(FIONBIO), counted.
        assert_eq!(r.counts().since(&before).get(Syscall::Ioctl), 1, "{mode}");
        r.send(conn, b"hello".to_vec()).unwrap();
        let waits = r.counts().get(Syscall::EpollWait);
        let mut events = Vec::new();
        r.take_completed(&mut events);
        assert!(
            matches!(&events[..], [Event::Sent { result: Ok(()), buf, .. }] if buf == b"hello"),
            "{mode}: {events:?}"
        );
        assert_eq!(
            r.counts().get(Syscall::EpollWait),
            waits,
            "no syscall for it"
        );
        let mut got = [0u8; 5];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        r.take_completed(&mut events);
        assert_eq!(events.len(), 1, "handed over once");
    }
}

//! Random write chunking against random arm sizes over real TCP connections: every byte arrives
//! exactly once and in order, on every backend and epoll mode.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use proptest::prelude::*;
use reactor::{Reactor, Recv};

fn run_case(config_index: usize, payload: &[u8], chunks: &[usize], arms: &[usize], pause: bool) {
    let (name, config) = &all_configs()[config_index];
    let mut r = Reactor::new(config).unwrap();
    let (conn, mut client) = pair(&mut r);
    let to_send = payload.to_vec();
    let chunks = chunks.to_vec();
    let writer = std::thread::spawn(move || {
        let mut rest = &to_send[..];
        for (i, &size) in chunks.iter().cycle().enumerate() {
            if rest.is_empty() {
                break;
            }
            let n = size.min(rest.len());
            client.write_all(&rest[..n]).unwrap();
            rest = &rest[n..];
            if pause && i % 7 == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        client.shutdown(std::net::Shutdown::Write).unwrap();
        client // keep the socket open until the reader is done
    });
    let mut got = Vec::with_capacity(payload.len());
    for &size in arms.iter().cycle() {
        r.arm_recv(conn, Vec::with_capacity(size)).unwrap();
        let (buf, res) = next_recv(&mut r, conn);
        match res {
            Recv::Data(n) => {
                assert!(n > 0 && n <= size, "{name}: {n} bytes into {size}");
                got.extend_from_slice(&buf);
            }
            Recv::Eof => break,
            Recv::Error(e) => panic!("{name}: {e}"),
        }
    }
    drop(writer.join().unwrap());
    assert_eq!(got.len(), payload.len(), "{name}");
    assert!(got == payload, "{name}: bytes reordered or altered");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_byte_exactly_once_in_order(
        config_index in 0usize..5,
        payload in proptest::collection::vec(any::<u8>(), 1..20_000),
        chunks in proptest::collection::vec(1usize..3000, 1..12),
        arms in proptest::collection::vec(1usize..5000, 1..12),
        pause in any::<bool>(),
    ) {
        run_case(config_index, &payload, &chunks, &arms, pause);
    }
}

#[test]
fn every_backend_gets_a_worst_case_run() {
    // One-byte arms against large writes, and large arms against one-byte writes.
    let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 256) as u8).collect();
    for i in 0..all_configs().len() {
        run_case(i, &payload, &[3000], &[1], false);
        run_case(i, &payload, &[1], &[4096], true);
    }
}

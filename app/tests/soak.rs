//! Soak: the server at saturation for a while, per backend, its resident memory, open
//! descriptors and the load's P99 recorded window by window. Nothing may grow: memory settles
//! after the first window (buffers, the allocator's arenas) and stays within 2 MiB of it,
//! descriptors are back to the idle count after every window, no window fails a request, and
//! no window's P99 is over ten times the median window's (a stall).
//!
//! The suite runs 20 s per backend in four 5-second windows (io_uring and the three epoll
//! modes: oneshot and legacy re-arm per request, so a leak in their registration path shows
//! only there) — at least three windows, so that the highest P99 has others to be compared
//! with;
//! `RXBENCH_SOAK_S=600` makes it the
//! documented 10-minute soak (docs/reliability.md), e.g.
//! `RXBENCH_SOAK_S=600 cargo test --release -p server --test soak -- --nocapture`.

mod common;

use std::time::{Duration, Instant};

use common::load::{self, open_fds, settle_fds};
use common::*;

const WINDOW: Duration = Duration::from_secs(5);
const SUITE_SOAK_S: u64 = 20;
/// The fewest windows a soak runs: the highest window's P99 is compared with the median of the
/// others, so there must be at least two others.
const MIN_WINDOWS: u64 = 3;
/// Connections of each window: new ones every window, so each window's end also checks that
/// their descriptors come back.
const CONNECTIONS: usize = 64;
/// How far resident memory may move above the first window's (the second-window level is
/// what the server keeps for 64 connections; growth past this over minutes is a leak).
const RSS_SLACK_KIB: u64 = 2048;

/// How far above the median window's P99 any window's may be.
const P99_SPREAD: f64 = 10.0;

/// One window's record.
#[derive(Debug)]
struct Window {
    requests: u64,
    p99_ms: f64,
    rss_kib: u64,
    fds: usize,
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One backend at a time: each server has its CPU, and the driver its own, to itself.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn soak(backend: &[(&str, &str)]) {
    let _alone = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let seconds: u64 = std::env::var("RXBENCH_SOAK_S")
        .ok()
        .map(|v| v.parse().expect("RXBENCH_SOAK_S: whole seconds"))
        .unwrap_or(SUITE_SOAK_S);
    let windows = seconds.div_ceil(WINDOW.as_secs()).max(MIN_WINDOWS);
    let cpus = reactor::affinity::allowed();
    let server = Server::start_through(
        &["taskset", "-c", &cpus[0].to_string()],
        Launch {
            env: backend,
            deny_io_uring: None,
        },
    );
    let pid = server.pid();
    let idle_fds = open_fds(pid);
    let opts = driver::Options {
        threads: 1,
        connections: CONNECTIONS,
        duration: WINDOW,
        ..load::options(server.port)
    };
    let load_cpus: Vec<usize> = cpus.iter().copied().skip(1).collect();
    let started = Instant::now();
    let record: Vec<Window> = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                if !load_cpus.is_empty() {
                    reactor::affinity::pin(0, &load_cpus).unwrap();
                }
                (0..windows)
                    .map(|w| {
                        let r = load::run(&opts);
                        load::assert_no_errors(&r, &format!("{backend:?} window {w}"));
                        let window = Window {
                            requests: r.requests,
                            p99_ms: r.latency.p99_us / 1000.0,
                            rss_kib: rss_kib(pid),
                            // The window's connections closed: their descriptors come back.
                            fds: settle_fds(pid, idle_fds),
                        };
                        eprintln!(
                            "{backend:?} +{:>4.0} s: {window:?}",
                            started.elapsed().as_secs_f64()
                        );
                        window
                    })
                    .collect()
            })
            .join()
            .unwrap()
    });
    let (status, _, stderr) = server.stop();
    assert!(status.success(), "{backend:?}: {status:?} {stderr}");
    for (w, window) in record.iter().enumerate() {
        assert_eq!(window.fds, idle_fds, "{backend:?} window {w}: {record:?}");
        assert!(window.requests > 0, "{backend:?} window {w}: {record:?}");
    }
    // A stall shows as a window whose P99 is far above the others' (a shared machine moves
    // P99 by tens of per cent, not by ten times): the highest against the median of the rest,
    // never against itself.
    let mut p99: Vec<f64> = record.iter().map(|w| w.p99_ms).collect();
    p99.sort_by(f64::total_cmp);
    let (highest, rest) = p99.split_last().unwrap();
    assert!(
        rest.len() >= 2,
        "{backend:?}: too few windows to compare: {record:?}"
    );
    let typical = rest[(rest.len() - 1) / 2];
    assert!(
        *highest <= P99_SPREAD * typical,
        "{backend:?}: a window's P99 {highest} ms against a typical {typical} ms: {record:?}"
    );
    let settled = record[0].rss_kib;
    let highest = record.iter().map(|w| w.rss_kib).max().unwrap();
    assert!(
        highest <= settled + RSS_SLACK_KIB,
        "{backend:?}: resident memory grew from {settled} KiB to {highest} KiB: {record:?}"
    );
}

#[test]
fn io_uring_soak() {
    soak(&[("APP_BACKEND", "io_uring")]);
}

#[test]
fn epoll_rx_soak() {
    soak(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")]);
}

#[test]
fn epoll_oneshot_soak() {
    soak(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "oneshot")]);
}

#[test]
fn epoll_legacy_soak() {
    soak(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "legacy")]);
}

//! The mechanism probe: what the block costs the io_uring server's receive path on this host,
//! measured in-process in about ten seconds a connection count, and what the run's cells are
//! predicted from.
//!
//! Under the block the io_uring server *is* an epoll server: io_uring_setup fails, it falls
//! back to `rx`, and every syscall it makes passes the filter. So its cost is CPU per request
//! of the blocked server over the unblocked one — which the syscall-entry probe prices only in
//! part: it counts the added entries, not what a `recvfrom` and a `sendto` do per call that
//! io_uring does once per batch (the socket lock, the TCP path, epoll's wakeups), nor what the
//! filter adds to every syscall. Here the three patterns are served for real, on the server
//! CPU, to a client on the load CPU keeping one request in flight on each connection:
//!
//! - `rx`: edge-triggered epoll, `recvfrom`, `sendto`;
//! - `io_uring`: multishot receive, sends batched per `io_uring_enter`, as the server runs it;
//! - `blocked`: the io_uring server in a thread under the `no-io-uring` filter (the sandbox
//!   crate's, the one native runs install), falling back to `rx`.
//!
//! Each batch runs the three back to back in a rotating order, each measured over the same
//! window by its thread's own CPU clock, so a batch pairs them under one state of the host;
//! the prediction is blocked ÷ io_uring per batch — their median, lowest and highest.

use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::serve::{self, Pattern, Window};
use crate::model::{MechanismBatch, MechanismCost, MechanismLevel, PatternCost};

/// Batches a connection count; the spread of five paired ratios is the prediction's range
/// (the median of five lies between their lowest and highest with 94 % probability).
pub const BATCHES: usize = 5;

/// Each batch's warm-up (once every connection arrived) and its measured window.
pub const WARMUP: Duration = Duration::from_millis(200);
pub const WINDOW: Duration = Duration::from_millis(1000);

#[derive(Debug, thiserror::Error)]
pub enum MechanismError {
    #[error("pinning a probe thread to cpu {cpu}: {source}")]
    Pin { cpu: usize, source: std::io::Error },
    #[error("the probe's loopback listener: {0}")]
    Listen(std::io::Error),
    #[error("connecting the probe's client: {0}")]
    Connect(std::io::Error),
    #[error("the probe's reactor, {what}: {detail}")]
    Reactor { what: &'static str, detail: String },
    #[error("putting the probe's blocked thread under the no-io-uring filter: {0}")]
    Filter(String),
    #[error("only {accepted} of the probe's {conns} connections arrived in 10 s")]
    Stalled { accepted: usize, conns: usize },
    #[error("the probe's client stopped before the window ended")]
    ClientGone,
    #[error("the blocked pattern ran {0}, not the fallback to epoll/rx it stands for")]
    NotBlocked(String),
    #[error("a probe thread panicked")]
    Panicked,
}

/// One batch: the three patterns served at once, each to `conns` fresh connections of its own,
/// every server thread on the server CPU and every client on the client CPU, over one window.
fn batch(
    conns: usize,
    cpus: (Option<usize>, Option<usize>),
) -> Result<MechanismBatch, MechanismError> {
    let window = Window::new(Pattern::ALL.len(), WARMUP, WINDOW);
    let stops = Pattern::ALL.map(|_| AtomicBool::new(false));
    let mut ends = Vec::new();
    for (pattern, stop) in Pattern::ALL.into_iter().zip(&stops) {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(MechanismError::Listen)?;
        let addr = listener.local_addr().map_err(MechanismError::Listen)?;
        ends.push((pattern, listener, addr, stop));
    }
    let results: Vec<_> = std::thread::scope(|scope| {
        let window = &window;
        let threads: Vec<_> = ends
            .into_iter()
            .map(|(pattern, listener, addr, stop)| {
                let server = scope
                    .spawn(move || serve::serve(pattern, cpus.0, listener, conns, window, stop));
                let client = scope.spawn(move || serve::drive(cpus.1, addr, conns, stop));
                (pattern, server, client)
            })
            .collect();
        threads
            .into_iter()
            .map(|(pattern, server, client)| (pattern, server.join(), client.join()))
            .collect()
    });
    let mut got = [PatternCost::default(); 3];
    for (i, (pattern, served, driven)) in results.into_iter().enumerate() {
        let (cost, report) = served.map_err(|_| MechanismError::Panicked)??;
        driven.map_err(|_| MechanismError::Panicked)??;
        if pattern == Pattern::Blocked && report.epoll_mode != Some(reactor::EpollMode::Rx) {
            return Err(MechanismError::NotBlocked(report.to_string()));
        }
        got[i] = cost;
    }
    let [rx, io_uring, blocked] = got;
    Ok(MechanismBatch {
        rx,
        io_uring,
        blocked,
    })
}

/// One connection count, [`BATCHES`] batches.
fn level(
    conns: u32,
    cpus: (Option<usize>, Option<usize>),
) -> Result<MechanismLevel, MechanismError> {
    let batches = (0..BATCHES)
        .map(|_| batch(conns as usize, cpus))
        .collect::<Result<_, _>>()?;
    Ok(MechanismLevel { conns, batches })
}

/// Measures every connection count in `conns`, the server on `server_cpu`, the client on
/// `client_cpu` (each unpinned when `None`).
pub fn measure(
    conns: &[u32],
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
) -> Result<MechanismCost, MechanismError> {
    let levels = conns
        .iter()
        .map(|&c| level(c, (server_cpu, client_cpu)))
        .collect::<Result<_, _>>()?;
    Ok(MechanismCost {
        server_cpu,
        client_cpu,
        window_s: WINDOW.as_secs_f64(),
        levels,
    })
}

/// What the probe will take, as `--dry-run` states it: a batch is its window, its warm-up and
/// about 0.1 s of connecting.
pub fn plan_line(conns: &[u32]) -> String {
    let batch = WINDOW + WARMUP + Duration::from_millis(100);
    let total = batch.as_secs_f64() * (BATCHES * conns.len()) as f64;
    format!(
        "before the first round: the mechanism probe at {} conns kept alive, {BATCHES} windows of {:.1} s each (about {total:.0} s; --no-mechanism-probe leaves it out)",
        conns
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        WINDOW.as_secs_f64()
    )
}

/// A change as `+12.3 %`.
fn pct(x: f64) -> String {
    format!("{} %", crate::stats::signed_pct(1.0 + x))
}

/// The probe as `bench-runner probe` prints it, one connection count a line.
pub fn describe(m: &MechanismCost) -> String {
    let mut t = format!(
        "the io_uring server's receive path, blocked and not (served in-process, the three patterns at once: servers on cpu {}, clients on cpu {}; {} windows of {:.1} s):\n",
        m.server_cpu.map_or("any".into(), |c| c.to_string()),
        m.client_cpu.map_or("any".into(), |c| c.to_string()),
        BATCHES,
        m.window_s
    );
    for l in &m.levels {
        let (Some(p), Some(mech), Some(filter)) = (l.predicted(), l.mechanism(), l.filter()) else {
            continue;
        };
        let us = |f: fn(&MechanismBatch) -> &PatternCost| l.median(|b| f(b).ns_per_request()) / 1e3;
        t += &format!(
            "  {} connections: io_uring {:.2} µs a request, rx {:.2}, blocked {:.2}: the block costs {} ({} to {}) = rx over io_uring {} × the filter {}\n",
            l.conns,
            us(|b| &b.io_uring),
            us(|b| &b.rx),
            us(|b| &b.blocked),
            pct(p.median),
            pct(p.low),
            pct(p.high),
            pct(mech.median),
            pct(filter.median),
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blocked_server_falls_back_and_every_pattern_answers() {
        let cpus = reactor::affinity::allowed();
        let (server, client) = (cpus.first().copied(), cpus.get(1).copied());
        let l = level(8, (server, client)).unwrap();
        assert_eq!(l.batches.len(), BATCHES);
        for b in &l.batches {
            for p in [&b.rx, &b.io_uring, &b.blocked] {
                assert!(p.requests > 100, "{p:?}");
                assert!(p.cpu_ns > 0 && p.syscalls > 0 && p.waits > 0, "{p:?}");
            }
            // epoll's path makes a receive and a send a request at least; io_uring batches
            // them into its enters, far fewer than one a request.
            assert!(b.rx.syscalls_per_request() >= 2.0, "{:?}", b.rx);
            assert!(b.blocked.syscalls_per_request() >= 2.0, "{:?}", b.blocked);
            assert!(b.io_uring.syscalls_per_request() < 1.5, "{:?}", b.io_uring);
        }
        let p = l.predicted().unwrap();
        assert!(p.low <= p.median && p.median <= p.high, "{p:?}");
    }
}

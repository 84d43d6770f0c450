//! The mechanism probe: what the block costs the io_uring server on this host, measured
//! in-process in about seven seconds a connection count, and what the run's cells are
//! predicted from.
//!
//! Under the block the io_uring server *is* an epoll server: io_uring_setup fails, it falls
//! back to `rx`, and every syscall it makes passes the filter. So its cost is CPU per request
//! of the blocked server over the unblocked one — which the syscall-entry probe prices only in
//! part: it counts the added entries, not what a `recvfrom` and a `sendto` do per call that
//! io_uring does once per batch (the socket lock, the TCP path, epoll's wakeups), what the
//! server's own code does differently on each path, nor what the filter adds to every
//! syscall. Here the server's own worker (the `server` crate's: its HTTP handling on the
//! reactor) serves the contract's `GET /` three ways, on the server CPU, to clients on the load
//! CPU that keep one request in flight on each connection:
//!
//! - `rx`: edge-triggered epoll, `recvfrom`, `sendto`;
//! - `io_uring`: multishot receive, sends batched per `io_uring_enter`, as the server runs it;
//! - `blocked`: the io_uring server in a thread under the `no-io-uring` filter (the sandbox
//!   crate's, the one native runs install), falling back to `rx`.
//!
//! The three serve at once, as the duets do, over one window bounded by two snapshots of
//! their counters and their threads' own CPU clocks, so whatever the host does in that second
//! falls on all three; the prediction is blocked ÷ io_uring per window — the median of five
//! windows, their lowest and highest. What it cannot see: anything a container adds (cgroups,
//! the engine's own profile code paths), and the switches between processes, since its three
//! servers are threads of one.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reactor::Waker;
use server::worker::{Control, Stats};

use super::serve::{self, Pattern, Ready};
use crate::model::{MechanismBatch, MechanismCost, MechanismLevel};

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
    #[error("the probe's clients did not connect their {conns} connections each in 10 s")]
    Stalled { conns: usize },
    #[error("a worker of the probe did not report ready in 10 s")]
    NotReady,
    #[error("a worker of the probe did not answer a snapshot in 10 s")]
    NoSnapshot,
    #[error("the blocked pattern ran {0}, not the fallback to epoll/rx it stands for")]
    NotBlocked(String),
}

/// How long a snapshot, the workers' start or the clients' connecting may take before the
/// probe gives up and names it.
const PATIENCE: Duration = Duration::from_secs(10);

/// Every worker's counters now, by pattern index: each answers at its next loop turn.
fn snapshot(
    controls: &[Arc<Control>],
    wakers: &[Waker],
    replies: &Receiver<(usize, Stats)>,
) -> Result<Vec<Stats>, MechanismError> {
    for (control, waker) in controls.iter().zip(wakers) {
        control.snapshot.store(true, Ordering::Relaxed);
        waker.wake();
    }
    let mut got: Vec<Option<Stats>> = vec![None; controls.len()];
    while got.iter().any(Option::is_none) {
        let (i, stats) = replies
            .recv_timeout(PATIENCE)
            .map_err(|_| MechanismError::NoSnapshot)?;
        got[i] = Some(stats);
    }
    Ok(got.into_iter().flatten().collect())
}

/// One batch: the three patterns served at once by the server's own worker, each to `conns`
/// fresh connections of its own, every worker on the server CPU and every client on the
/// client CPU, over one window that both snapshots bound.
fn batch(
    conns: usize,
    cpus: (Option<usize>, Option<usize>),
) -> Result<MechanismBatch, MechanismError> {
    let mut listeners = Vec::new();
    for _ in Pattern::ALL {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(MechanismError::Listen)?;
        let addr = listener.local_addr().map_err(MechanismError::Listen)?;
        listeners.push((listener, addr));
    }
    let controls: Vec<Arc<Control>> = Pattern::ALL.iter().map(|_| Arc::default()).collect();
    let stops = Pattern::ALL.map(|_| AtomicBool::new(false));
    let connected = AtomicUsize::new(0);
    let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
    let (snap_tx, snap_rx) = mpsc::channel::<(usize, Stats)>();
    std::thread::scope(|scope| {
        let mut addrs = Vec::new();
        for (i, (pattern, (listener, addr))) in Pattern::ALL.into_iter().zip(listeners).enumerate()
        {
            let (control, ready, snaps) = (controls[i].clone(), ready_tx.clone(), snap_tx.clone());
            scope.spawn(move || serve::work(pattern, i, cpus.0, listener, control, ready, snaps));
            addrs.push(addr);
        }
        drop((ready_tx, snap_tx));
        let mut wakers: Vec<Option<Waker>> = Pattern::ALL.iter().map(|_| None).collect();
        let mut clients = Vec::new();
        let measured = (|| {
            for _ in Pattern::ALL {
                let (i, report, waker) = ready_rx
                    .recv_timeout(PATIENCE)
                    .map_err(|_| MechanismError::NotReady)??;
                wakers[i] = Some(waker);
                if Pattern::ALL[i] == Pattern::Blocked
                    && report.epoll_mode != Some(reactor::EpollMode::Rx)
                {
                    return Err(MechanismError::NotBlocked(report.to_string()));
                }
            }
            for (&addr, stop) in addrs.iter().zip(&stops) {
                let connected = &connected;
                clients
                    .push(scope.spawn(move || serve::drive(cpus.1, addr, conns, stop, connected)));
            }
            let deadline = Instant::now() + PATIENCE;
            while connected.load(Ordering::Relaxed) < Pattern::ALL.len() {
                if Instant::now() > deadline {
                    return Err(MechanismError::Stalled { conns });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(WARMUP);
            let wakers: Vec<Waker> = wakers.iter().flatten().cloned().collect();
            let first = snapshot(&controls, &wakers, &snap_rx)?;
            std::thread::sleep(WINDOW);
            let last = snapshot(&controls, &wakers, &snap_rx)?;
            Ok((first, last))
        })();
        // Whatever happened: the clients stop first (their connections close, so each worker
        // finds none left and ends at once), then the workers.
        for stop in &stops {
            stop.store(true, Ordering::Relaxed);
        }
        for (control, waker) in controls.iter().zip(&wakers) {
            control.stop.store(true, Ordering::Relaxed);
            if let Some(w) = waker {
                w.wake();
            }
        }
        // A client that failed (a connect refused, say) is why the window never came: its
        // error names the cause, where the window's own would only say it stalled.
        for client in clients {
            client
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        let (first, last) = measured?;
        let cost = |i: usize| serve::cost_between(&first[i], &last[i]);
        Ok(MechanismBatch {
            rx: cost(0),
            io_uring: cost(1),
            blocked: cost(2),
        })
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
        served_by: crate::model::ServedBy::Worker,
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
        "the server's own worker as the io_uring server, blocked and not, and as rx (served in-process, the three at once: servers on cpu {}, clients on cpu {}; {} windows of {:.1} s):\n",
        m.server_cpu.map_or("any".into(), |c| c.to_string()),
        m.client_cpu.map_or("any".into(), |c| c.to_string()),
        BATCHES,
        m.window_s
    );
    for l in &m.levels {
        let (Some(p), Some(mech), Some(filter)) = (l.predicted(), l.mechanism(), l.filter()) else {
            continue;
        };
        let us = |f| l.median_us(f);
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

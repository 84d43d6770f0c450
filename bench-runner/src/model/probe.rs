//! What the run's probe recorded: a syscall's cost on the server CPU ([`crate::probe`]
//! measures it; the report explains the block's cost with it).

use serde::{Deserialize, Serialize};

/// The probe's figures, ns per call (per pair for `send_recv_64_ns`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyscallCost {
    /// The CPU it ran on (the first server CPU).
    pub cpu: Option<usize>,
    pub getppid_ns: f64,
    pub recv_eagain_ns: f64,
    pub send_recv_64_ns: f64,
}

impl SyscallCost {
    /// The cost of entering and leaving the kernel once: what a syscall the block adds costs
    /// beyond the work io_uring does as well.
    pub fn per_syscall_ns(&self) -> f64 {
        self.getppid_ns
    }
}

/// What the mechanism probe recorded ([`crate::probe::mechanism`] measures it): the server's
/// own worker as the io_uring server with and without the block and as `rx`, served
/// in-process to loopback clients at each of the run's keep-alive connection counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MechanismCost {
    /// The CPU the serving thread ran on (the first server CPU) and the client's.
    pub server_cpu: Option<usize>,
    pub client_cpu: Option<usize>,
    /// Seconds each pattern was measured in a batch (after its warm-up).
    pub window_s: f64,
    /// What answered the requests (runs before the server's worker served them have none).
    #[serde(default)]
    pub served_by: ServedBy,
    pub levels: Vec<MechanismLevel>,
}

/// What the mechanism probe served its requests with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServedBy {
    /// The probe's first version (8098de4): a fixed answer on the reactor, no HTTP handling.
    #[default]
    Responder,
    /// The server's own worker: its HTTP handling on the reactor.
    Worker,
}

impl ServedBy {
    /// How the report names it.
    pub fn phrase(self) -> &'static str {
        match self {
            ServedBy::Responder => "a fixed answer on the server's reactor (the probe's first version: no HTTP handling)",
            ServedBy::Worker => "the server's own worker (its HTTP handling on the reactor)",
        }
    }
}

/// One connection count: the three patterns, batch by batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MechanismLevel {
    pub conns: u32,
    pub batches: Vec<MechanismBatch>,
}

/// The three patterns of one batch, served at once over one window (each a fresh worker on
/// fresh connections).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MechanismBatch {
    /// Edge-triggered epoll, `recvfrom`, `sendto`: the `rx` server.
    pub rx: PatternCost,
    /// Multishot receive, sends batched per `io_uring_enter`: the io_uring server.
    pub io_uring: PatternCost,
    /// The io_uring server under the `no-io-uring` filter: it falls back to `rx`, and every
    /// syscall passes the filter.
    pub blocked: PatternCost,
}

/// What a serving thread spent over the measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PatternCost {
    pub requests: u64,
    /// The thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`: exact).
    pub cpu_ns: u64,
    /// Its user and system time (`getrusage(RUSAGE_THREAD)`: the tick's samples, scaled by
    /// the kernel to the exact total).
    pub user_ns: u64,
    pub system_ns: u64,
    /// Syscalls the reactor made, and how many of them waited for work (`epoll_wait`,
    /// `io_uring_enter`).
    pub syscalls: u64,
    pub waits: u64,
}

impl PatternCost {
    pub fn ns_per_request(&self) -> f64 {
        self.cpu_ns as f64 / self.requests.max(1) as f64
    }
    pub fn syscalls_per_request(&self) -> f64 {
        self.syscalls as f64 / self.requests.max(1) as f64
    }
}

/// A figure over the batches: the median of its per-batch values (each paired within its batch) and
/// their lowest and highest. A change reads 0.1 for +10 %.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchSpread {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

impl BatchSpread {
    /// From per-batch changes (none: no batch).
    pub fn of(mut changes: Vec<f64>) -> Option<BatchSpread> {
        changes.retain(|x| x.is_finite());
        let median = crate::stats::median(&changes)?;
        let low = changes.iter().copied().fold(f64::INFINITY, f64::min);
        let high = changes.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(BatchSpread { median, low, high })
    }

    /// Whether [low, high] meets the interval [lo, hi].
    pub fn overlaps(&self, lo: f64, hi: f64) -> bool {
        self.low <= hi && lo <= self.high
    }
}

impl MechanismLevel {
    fn paired(&self, f: impl Fn(&MechanismBatch) -> f64) -> Option<BatchSpread> {
        BatchSpread::of(self.batches.iter().map(f).collect())
    }

    /// The block's predicted cost for the io_uring server: CPU per request blocked over
    /// unblocked, paired by batch.
    pub fn predicted(&self) -> Option<BatchSpread> {
        self.paired(|b| b.blocked.ns_per_request() / b.io_uring.ns_per_request() - 1.0)
    }

    /// Its first factor: what the mechanism alone costs (`rx` over io_uring, no filter).
    pub fn mechanism(&self) -> Option<BatchSpread> {
        self.paired(|b| b.rx.ns_per_request() / b.io_uring.ns_per_request() - 1.0)
    }

    /// Its second: what the filter adds to `rx` (blocked over `rx`).
    pub fn filter(&self) -> Option<BatchSpread> {
        self.paired(|b| b.blocked.ns_per_request() / b.rx.ns_per_request() - 1.0)
    }

    /// The filter's cost per syscall, ns: blocked minus `rx` per request over `rx`'s syscalls
    /// a request, paired by batch.
    pub fn filter_ns_per_syscall(&self) -> Option<BatchSpread> {
        self.paired(|b| {
            (b.blocked.ns_per_request() - b.rx.ns_per_request()) / b.rx.syscalls_per_request()
        })
    }

    /// A pattern's median over the batches of `f`.
    pub fn median(&self, f: impl Fn(&MechanismBatch) -> f64) -> f64 {
        self.paired(f).map_or(f64::NAN, |p| p.median)
    }

    /// A pattern's CPU µs a request, its median over the batches.
    pub fn median_us(&self, pattern: fn(&MechanismBatch) -> &PatternCost) -> f64 {
        self.median(|b| pattern(b).ns_per_request()) / 1e3
    }
}

impl MechanismCost {
    pub fn level(&self, conns: u32) -> Option<&MechanismLevel> {
        self.levels.iter().find(|l| l.conns == conns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(requests: u64, cpu_ns: u64) -> PatternCost {
        PatternCost {
            requests,
            cpu_ns,
            syscalls: 2 * requests,
            ..PatternCost::default()
        }
    }

    #[test]
    fn a_spread_is_the_median_and_the_extremes_of_finite_values() {
        let s = BatchSpread::of(vec![3.0, f64::NAN, 1.0, 2.0]).unwrap();
        assert_eq!((s.low, s.median, s.high), (1.0, 2.0, 3.0));
        assert_eq!(BatchSpread::of(vec![4.0, 1.0]).unwrap().median, 2.5);
        assert!(BatchSpread::of(vec![]).is_none());
        assert!(s.overlaps(2.5, 9.0) && s.overlaps(0.0, 1.0) && !s.overlaps(3.1, 4.0));
    }

    #[test]
    fn the_prediction_pairs_each_batch_and_factors_into_mechanism_and_filter() {
        // Batch 1: io_uring 5 µs, rx 6, blocked 6.6; batch 2 on a host twice as slow: the
        // ratios are the same, so every spread is one point.
        let batch = |k: u64| MechanismBatch {
            io_uring: cost(1000, 5_000_000 * k),
            rx: cost(1000, 6_000_000 * k),
            blocked: cost(1000, 6_600_000 * k),
        };
        let l = MechanismLevel {
            conns: 64,
            batches: vec![batch(1), batch(2)],
        };
        let p = l.predicted().unwrap();
        assert!((p.median - 0.32).abs() < 1e-9 && p.low == p.high, "{p:?}");
        assert!((l.mechanism().unwrap().median - 0.2).abs() < 1e-9);
        assert!((l.filter().unwrap().median - 0.1).abs() < 1e-9);
        // The filter: 0.6 µs (batch 1) or 1.2 µs (batch 2) more a request over 2 syscalls.
        let f = l.filter_ns_per_syscall().unwrap();
        assert_eq!((f.low, f.high), (300.0, 600.0));
    }
}

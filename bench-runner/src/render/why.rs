//! Why the block costs what it costs on this host: the syscalls it adds per request (the
//! servers' own counters) times what a syscall costs here (the run's probe) is a predicted
//! change in CPU per request, set beside the paired measurement, cell by cell. Where the
//! measurement leaves the prediction, something other than entering the kernel differs (the
//! table says which way); docs/methodology.md, "Why the cost differs by host".

use crate::model::SyscallCost;
use crate::model::{LoadModel, Profile, Raw, ServerConfig, Subject};
use crate::summary::{Comparison, Metric, Row, Summary};

/// One cell's prediction beside its measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub load: LoadModel,
    pub conns: u32,
    /// Syscalls a request under the block minus without it.
    pub added_syscalls: f64,
    /// The server's CPU µs a request without the block.
    pub base_us: f64,
    /// The predicted change, as a share of `base_us`: entry and exit alone (getppid's cost)
    /// and a socket syscall's fixed cost (recvfrom that finds nothing).
    pub predicted_low: f64,
    pub predicted_high: f64,
    pub measured: Comparison,
}

impl Cell {
    /// Whether the measured interval meets the predicted range.
    pub fn verdict(&self) -> &'static str {
        let (lo, hi) = (self.measured.ci95_low - 1.0, self.measured.ci95_high - 1.0);
        if !self.measured.significant {
            "not resolved: the run cannot test the prediction here"
        } else if hi < self.predicted_low {
            "below: io_uring's own work a request offsets part of it"
        } else if lo > self.predicted_high {
            "above: more than syscalls differs (io_uring's own savings, see perf by phase)"
        } else {
            "consistent with the syscalls alone"
        }
    }
}

/// Every cell where the io_uring server was compared under the block against `relaxed`, with
/// both rows' syscall counts and the unblocked CPU per request.
pub fn cells(raw: &Raw, s: &Summary, probe: &SyscallCost) -> Vec<Cell> {
    let io_uring = Subject::Own(ServerConfig::IoUring);
    let route = raw.settings.first_route();
    let mut out: Vec<Cell> = s
        .comparisons
        .iter()
        .filter(|c| {
            c.metric == Metric::CpuPerRequest
                && c.config == io_uring
                && c.baseline == io_uring
                && c.profile == Profile::NoIoUring
                && c.baseline_profile == Profile::Relaxed
                && c.route == route
        })
        .filter_map(|c| {
            let blocked = s.row(Profile::NoIoUring, &io_uring, c.load, c.conns, &route)?;
            let free = s.row(Profile::Relaxed, &io_uring, c.load, c.conns, &route)?;
            let total = |r: &Row| r.syscalls_per_request.get("total").copied();
            let added = total(blocked)? - total(free)?;
            let base_us = free.cpu_us_per_request?;
            let share = |ns: f64| added * ns / 1000.0 / base_us;
            Some(Cell {
                load: c.load,
                conns: c.conns,
                added_syscalls: added,
                base_us,
                predicted_low: share(probe.getppid_ns),
                predicted_high: share(probe.recv_eagain_ns),
                measured: c.clone(),
            })
        })
        .collect();
    let order = |l: LoadModel| raw.settings.loads.iter().position(|&x| x == l);
    out.sort_by_key(|c| (order(c.load), c.conns));
    out
}

/// A change (0.05 = +5 %) as a signed percentage.
fn signed(x: f64) -> String {
    crate::stats::signed_pct(1.0 + x)
}

/// The headline's sentence: the host's syscall cost and what it predicts for the first cell,
/// beside what was measured there.
pub fn sentence(raw: &Raw, s: &Summary) -> String {
    let Some(probe) = &raw.probe else {
        return "**Why here**: this run has no syscall probe (recorded before the probe existed): `bench-runner probe` measures this host's in a second.".into();
    };
    let cells = cells(raw, s, probe);
    let Some(c) = cells.first() else {
        return format!(
            "**Why here**: a syscall's entry and exit costs {:.0} ns on this host (a socket `recvfrom` {:.0} ns); this run compared no io_uring server under the block, so there is nothing to explain.",
            probe.getppid_ns, probe.recv_eagain_ns
        );
    };
    let m = &c.measured;
    let measured = if m.significant {
        format!(
            "measured {} % [{}, {}]",
            signed(m.ratio_median - 1.0),
            signed(m.ci95_low - 1.0),
            signed(m.ci95_high - 1.0)
        )
    } else {
        format!(
            "measured: not resolved ([{}, {}] %)",
            signed(m.ci95_low - 1.0),
            signed(m.ci95_high - 1.0)
        )
    };
    format!(
        "**Why here**: a syscall's entry and exit costs {:.0} ns on this host (a socket `recvfrom` {:.0} ns); the fallback adds {:.2} syscalls a request ({}, {} connections) to the io_uring server's {:.2} µs, a predicted {} to {} % — {measured}.",
        probe.getppid_ns,
        probe.recv_eagain_ns,
        c.added_syscalls,
        c.load.phrase(),
        c.conns,
        c.base_us,
        signed(c.predicted_low),
        signed(c.predicted_high),
    )
}

/// The section: the probe, then every cell's prediction beside its measurement.
pub fn section(raw: &Raw, s: &Summary) -> String {
    let Some(probe) = &raw.probe else {
        return String::new();
    };
    let mut t = String::from("## Why the block costs what it costs here\n\n");
    t += &format!(
        "The run's probe, on cpu {} before any server started (`bench-runner probe`; fastest of 7 batches): a syscall's entry and exit (`getppid`) {:.0} ns, a `recvfrom` on a TCP socket with nothing to read {:.0} ns, a 64-byte `sendto` and the `recvfrom` reading it on loopback {:.0} ns. The block adds syscalls (the servers' own counters: kept alive, epoll's `recvfrom` and `sendto` for io_uring's rare `io_uring_enter`); each costs at least the entry and exit and at most about a socket syscall's fixed cost beyond the work io_uring does too. That range, over the unblocked server's CPU per request, is the prediction:\n\n",
        probe.cpu.map_or("?".into(), |c| c.to_string()),
        probe.getppid_ns,
        probe.recv_eagain_ns,
        probe.send_recv_64_ns
    );
    let cells = cells(raw, s, probe);
    // Where the CPU source split user and kernel time, the change apportioned to each.
    let split = cells.iter().any(|c| c.measured.split.is_some());
    let (head, rule) = if split {
        (" of which kernel / user (points) |", " --- |")
    } else {
        ("", "")
    };
    t += &format!("| load | conns | syscalls a request added | io_uring's CPU µs a request (`relaxed`) | predicted | measured (paired) |{head} |\n| --- | --- | --- | --- | --- | --- |{rule} --- |\n");
    for c in &cells {
        let points = match (split, c.measured.split) {
            (false, _) => String::new(),
            (true, None) => " – |".into(),
            (true, Some(p)) => format!(" {} / {} |", signed(p.kernel), signed(p.user)),
        };
        t += &format!(
            "| {} | {} | {:+.2} | {:.2} | {} to {} % | {} |{points} {} |\n",
            c.load,
            c.conns,
            c.added_syscalls,
            c.base_us,
            signed(c.predicted_low),
            signed(c.predicted_high),
            crate::stats::ratio_text(&c.measured.interval()),
            c.verdict()
        );
    }
    if split {
        t += "\nOf which kernel / user: the change in points of the unblocked server's CPU per request, apportioned by the kernel's share of each server's CPU time (the CPU source's user and system time, sampled at the scheduler's tick and pooled over the slices). A rise in user time under the block is the indirect cost of the added kernel entries (caches, TLB and branch predictors left colder for the server's own code); the rest is kernel work.\n";
    }
    t += "\n";
    t
}

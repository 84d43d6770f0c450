//! Why the block costs what it costs on this host, predicted two ways and set beside the paired
//! measurement, cell by cell: the mechanism probe's (the server's own worker served
//! in-process blocked and not: what its fallback to `rx` and the filter cost a request here),
//! and the older, partial one from the syscalls the block adds a request (the servers' own
//! counters) times what entering the kernel costs here. Where the measurement leaves the
//! prediction, the table says which way; docs/methodology.md, "Why the cost differs by host".

use crate::model::{BatchSpread, MechanismCost, SyscallCost};
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
    /// The mechanism probe's prediction at this level: kept alive only (the probe serves a
    /// closed loop on kept-alive connections); none in runs recorded before it.
    pub probed: Option<BatchSpread>,
    pub measured: Comparison,
}

impl Cell {
    /// Whether the measured interval meets the predicted range: the mechanism probe's where
    /// the cell has one, else the syscall entries'.
    pub fn verdict(&self) -> &'static str {
        let (lo, hi) = (self.measured.ci95_low - 1.0, self.measured.ci95_high - 1.0);
        if !self.measured.significant {
            return "not resolved: the run cannot test the prediction here";
        }
        match self.probed {
            Some(p) if p.overlaps(lo, hi) => "within the mechanism probe's range",
            Some(p) if hi < p.low => {
                "below the probe's range: the run's servers lose less than in-process"
            }
            Some(_) => {
                "above the probe's range: more differs in the run than in-process (kernel / user says where)"
            }
            None if hi < self.predicted_low => {
                "below: io_uring's own work a request offsets part of it"
            }
            None if lo > self.predicted_high => {
                "above: more than syscall entries differs (what the mechanism probe measures)"
            }
            None => "consistent with the syscalls alone",
        }
    }
}

/// Every cell where the io_uring server was compared under the block against `relaxed`, with
/// both rows' syscall counts and the unblocked CPU per request.
pub fn cells(raw: &Raw, s: &Summary, probe: &SyscallCost) -> Vec<Cell> {
    let probed = |load: LoadModel, conns: u32| {
        let level = raw.mechanism.as_ref()?.level(conns)?;
        (load == LoadModel::KeepAlive).then(|| level.predicted())?
    };
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
                probed: probed(c.load, c.conns),
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
    let level = raw.mechanism.as_ref().and_then(|m| m.level(c.conns));
    if let (Some(p), Some(level)) = (c.probed, level) {
        let factor = |f: Option<BatchSpread>| f.map_or("?".into(), |f| signed(f.median));
        return format!(
            "**Why here**: served in-process on this host{}, the io_uring server changes CPU per request by {} % as `rx` (its fallback under the block), and the filter adds {} %: the mechanism probe predicts {} % ({} to {}) {}, {} connections — {measured}. (Entering the kernel alone, the older prediction: {} to {} %.)",
            match raw.mechanism.as_ref().map(|m| m.served_by) {
                Some(crate::model::ServedBy::Responder) => " (by the probe's first version: a fixed answer, no HTTP handling)",
                _ => "",
            },
            factor(level.mechanism()),
            factor(level.filter()),
            signed(p.median),
            signed(p.low),
            signed(p.high),
            c.load.phrase(),
            c.conns,
            signed(c.predicted_low),
            signed(c.predicted_high),
        );
    }
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

/// The mechanism probe's paragraph and its table, one row a level.
fn mechanism_table(m: &MechanismCost) -> String {
    let cpu = |c: Option<usize>| c.map_or("?".into(), |c| c.to_string());
    let mut t = format!(
        "The mechanism probe, before the first round (`bench-runner probe`; raw.json's `mechanism`): {} served in-process as the io_uring server unblocked, in a thread under the `no-io-uring` filter (where it falls back to `rx`, as under the block), and as `rx` — the three at once on cpu {}, each to its own clients on cpu {} keeping one request in flight a connection, over {} windows of {:.1} s, each timed by its own thread's CPU clock. Its prediction is blocked over unblocked, paired by window: the median, and the lowest to the highest window. It factors into what `rx` costs over io_uring and what the filter adds to `rx`:\n\n",
        m.served_by.phrase(),
        cpu(m.server_cpu),
        cpu(m.client_cpu),
        m.levels.first().map_or(0, |l| l.batches.len()),
        m.window_s
    );
    t += "| conns | io_uring's CPU µs a request | `rx` | blocked | syscalls a request (io_uring / `rx`) | `rx` over io_uring | the filter | the filter a syscall | predicted |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for l in &m.levels {
        let us = |f| l.median_us(f);
        let calls = |f: fn(&crate::model::MechanismBatch) -> &crate::model::PatternCost| {
            l.median(|b| f(b).syscalls_per_request())
        };
        let pct =
            |x: Option<BatchSpread>| x.map_or("–".into(), |x| format!("{} %", signed(x.median)));
        let ns = l
            .filter_ns_per_syscall()
            .map_or("–".into(), |f| format!("{:.0} ns", f.median));
        let predicted = l.predicted().map_or("–".into(), |p| {
            format!(
                "{} % ({} to {})",
                signed(p.median),
                signed(p.low),
                signed(p.high)
            )
        });
        t += &format!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} | {} | {} | {ns} | {predicted} |\n",
            l.conns,
            us(|b| &b.io_uring),
            us(|b| &b.rx),
            us(|b| &b.blocked),
            calls(|b| &b.io_uring),
            calls(|b| &b.rx),
            pct(l.mechanism()),
            pct(l.filter()),
        );
    }
    t + "\n"
}

/// The section: the probe, then every cell's prediction beside its measurement.
pub fn section(raw: &Raw, s: &Summary) -> String {
    let Some(probe) = &raw.probe else {
        return String::new();
    };
    let mut t = String::from("## Why the block costs what it costs here\n\n");
    if let Some(m) = &raw.mechanism {
        t += &mechanism_table(m);
    }
    let floor = if raw.mechanism.is_some() {
        "That range, over the unblocked server's CPU per request, is the syscall entries' prediction: a floor, since it prices entering the kernel, not what a `recvfrom` and a `sendto` do per call that io_uring does once a batch, nor the filter"
    } else {
        "That range, over the unblocked server's CPU per request, is the prediction"
    };
    t += &format!(
        "The run's syscall probe, on cpu {} before any server started (`bench-runner probe`; fastest of 7 batches): a syscall's entry and exit (`getppid`) {:.0} ns, a `recvfrom` on a TCP socket with nothing to read {:.0} ns, a 64-byte `sendto` and the `recvfrom` reading it on loopback {:.0} ns. The block adds syscalls (the servers' own counters: kept alive, epoll's `recvfrom` and `sendto` for io_uring's rare `io_uring_enter`); each costs at least the entry and exit and at most about a socket syscall's fixed cost beyond the work io_uring does too. {floor}:\n\n",
        probe.cpu.map_or("?".into(), |c| c.to_string()),
        probe.getppid_ns,
        probe.recv_eagain_ns,
        probe.send_recv_64_ns
    );
    let cells = cells(raw, s, probe);
    // Where the CPU source split user and kernel time, the change apportioned to each.
    let split = cells.iter().any(|c| c.measured.split.is_some());
    let probed = raw.mechanism.is_some();
    let mut cols = vec![
        "load",
        "conns",
        "syscalls a request added",
        "io_uring's CPU µs a request (`relaxed`)",
    ];
    if probed {
        cols.extend(["predicted: syscall entries", "predicted: mechanism probe"]);
    } else {
        cols.push("predicted");
    }
    cols.push("measured (paired)");
    if split {
        cols.push("of which kernel / user (points)");
    }
    // The last column, the verdict, has no heading.
    t += &format!(
        "| {} | |\n|{}\n",
        cols.join(" | "),
        " --- |".repeat(cols.len() + 1)
    );
    for c in &cells {
        let probe_col = match (probed, c.probed) {
            (false, _) => String::new(),
            (true, None) => " – |".into(),
            (true, Some(p)) => format!(
                " {} % ({} to {}) |",
                signed(p.median),
                signed(p.low),
                signed(p.high)
            ),
        };
        let points = match (split, c.measured.split) {
            (false, _) => String::new(),
            (true, None) => " – |".into(),
            (true, Some(p)) => format!(" {} / {} |", signed(p.kernel), signed(p.user)),
        };
        t += &format!(
            "| {} | {} | {:+.2} | {:.2} | {} to {} % |{probe_col} {} |{points} {} |\n",
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

#[cfg(test)]
mod tests;

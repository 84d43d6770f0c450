use super::*;
use crate::model::{MechanismBatch, MechanismLevel, PatternCost};
use crate::summary::Metric;

/// The io_uring server's cost under the block as the run measured it: `[lo, hi]` in percent.
fn measured(lo: f64, hi: f64, significant: bool) -> Comparison {
    Comparison {
        profile: Profile::NoIoUring,
        load: LoadModel::KeepAlive,
        conns: 64,
        route: "/".into(),
        config: Subject::Own(ServerConfig::IoUring),
        baseline: Subject::Own(ServerConfig::IoUring),
        baseline_profile: Profile::Relaxed,
        metric: Metric::CpuPerRequest,
        ratio_median: 1.0 + (lo + hi) / 200.0,
        ci95_low: 1.0 + lo / 100.0,
        ci95_high: 1.0 + hi / 100.0,
        significant,
        pairs: 10,
        instances: None,
        split: None,
    }
}

fn cell(probed: Option<(f64, f64)>, m: Comparison) -> Cell {
    Cell {
        load: LoadModel::KeepAlive,
        conns: 64,
        added_syscalls: 2.0,
        base_us: 6.0,
        predicted_low: 0.05,
        predicted_high: 0.10,
        probed: probed.map(|(low, high)| BatchSpread {
            median: (low + high) / 2.0,
            low,
            high,
        }),
        measured: m,
    }
}

#[test]
fn the_verdict_reads_the_mechanism_probe_where_the_cell_has_one() {
    let within = cell(Some((0.15, 0.25)), measured(18.0, 30.0, true));
    assert_eq!(within.verdict(), "within the mechanism probe's range");
    let above = cell(Some((0.01, 0.04)), measured(15.0, 30.0, true));
    assert!(
        above.verdict().starts_with("above the probe's range"),
        "{}",
        above.verdict()
    );
    let below = cell(Some((0.20, 0.30)), measured(5.0, 10.0, true));
    assert!(
        below.verdict().starts_with("below the probe's range"),
        "{}",
        below.verdict()
    );
    let unresolved = cell(Some((0.01, 0.04)), measured(-1.0, 30.0, false));
    assert!(unresolved.verdict().starts_with("not resolved"));
    // Without the probe (a fresh connection per request, or a run before it): the syscall
    // entries' range, as before.
    let old = cell(None, measured(15.0, 30.0, true));
    assert!(
        old.verdict()
            .starts_with("above: more than syscall entries"),
        "{}",
        old.verdict()
    );
    assert_eq!(
        cell(None, measured(6.0, 8.0, true)).verdict(),
        "consistent with the syscalls alone"
    );
}

fn pattern(us: f64, syscalls_per_request: f64) -> PatternCost {
    PatternCost {
        requests: 100_000,
        cpu_ns: (us * 1e5 * 1e3) as u64,
        user_ns: 0,
        system_ns: 0,
        syscalls: (syscalls_per_request * 1e5) as u64,
        waits: 1000,
    }
}

#[test]
fn the_probes_table_gives_each_level_its_factors_and_prediction() {
    let batch = |k: f64| MechanismBatch {
        io_uring: pattern(5.0 * k, 0.05),
        rx: pattern(6.0 * k, 2.0),
        blocked: pattern(6.3 * k, 2.0),
    };
    let m = MechanismCost {
        server_cpu: Some(0),
        client_cpu: Some(1),
        window_s: 1.0,
        served_by: crate::model::ServedBy::Worker,
        levels: vec![MechanismLevel {
            conns: 256,
            batches: vec![batch(1.0), batch(1.1), batch(0.9)],
        }],
    };
    let t = mechanism_table(&m);
    assert!(
        t.contains("on cpu 0, each to its own clients on cpu 1"),
        "{t}"
    );
    assert!(t.contains("over 3 windows of 1.0 s"), "{t}");
    // rx over io_uring +20 %, the filter +5 % (0.3 µs over 2 syscalls: 150 ns; the median
    // window's), the block +26 % in every window.
    assert!(
        t.contains("| 256 | 5.00 | 6.00 | 6.30 | 0.05 / 2.00 | +20.0 % | +5.0 % | 150 ns | +26.0 % (+26.0 to +26.0) |"),
        "{t}"
    );
}

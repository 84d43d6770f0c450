//! The run's own check of its intervals on CPU per request ([`crate::stats::calibration`]):
//! each A/A pair's offset over its cells with the rounds as the unit, and the replicate
//! contrasts of every comparison across profiles made with both copies of the io_uring server.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Estimate, Measured, Metric, MEAN_ROUTE};
use crate::model::{Profile, ServerConfig, Subject};
use crate::stats::calibration::{contrast, pair_offset, Tally};
use crate::stats::Interval;

/// One profile's A/A pair over all its cells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairOffset {
    pub profile: Profile,
    /// The pair's ratio (`io_uring-control` over `io_uring`) and its 95 % interval.
    pub ratio_median: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    /// The cells averaged per round, and the rounds every one of them has.
    pub cells: usize,
    pub rounds: usize,
}

impl PairOffset {
    pub fn interval(&self) -> Interval {
        Interval {
            median: self.ratio_median,
            low: self.ci95_low,
            high: self.ci95_high,
            n: self.rounds,
        }
    }
}

/// What the run says about its own intervals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub pairs: Vec<PairOffset>,
    /// The pairs counted: made, and apart at 95 %.
    pub pair_tally: Tally,
    /// The replicate contrasts counted.
    pub replicates: Tally,
}

/// A comparison's ln ratios by round, where it is one a check uses: CPU per request over
/// rounds, on a real route.
fn rounds(m: &Measured) -> Option<&BTreeMap<u32, f64>> {
    match &m.estimate {
        Estimate::Rounds(d) if m.metric == Metric::CpuPerRequest && m.route != MEAN_ROUTE => {
            Some(d)
        }
        _ => None,
    }
}

/// The A/A control's cells and the replicate contrasts of a run's measured comparisons (none:
/// the run has neither, e.g. without the control configuration or with resident servers).
/// `first_stage`: the run added rounds after it (the intervals are then Stein's).
pub(super) fn calibrate(measured: &[Measured], first_stage: Option<u32>) -> Option<Calibration> {
    let is = |s: &Subject, c: ServerConfig| *s == Subject::Own(c);
    let mut by_profile: BTreeMap<Profile, Vec<&BTreeMap<u32, f64>>> = BTreeMap::new();
    for m in measured {
        let (a, b) = (&m.pair.0, &m.pair.1);
        if let Some(d) = rounds(m).filter(|_| {
            is(&a.config, ServerConfig::IoUringControl)
                && is(&b.config, ServerConfig::IoUring)
                && a.profile == b.profile
        }) {
            by_profile.entry(a.profile).or_default().push(d);
        }
    }
    let mut out = Calibration::default();
    for (profile, cells) in by_profile {
        let Some(i) = pair_offset(&cells, first_stage) else {
            continue;
        };
        out.pair_tally.count(Some(i));
        out.pairs.push(PairOffset {
            profile,
            ratio_median: i.median,
            ci95_low: i.low,
            ci95_high: i.high,
            cells: cells.len(),
            rounds: i.n,
        });
    }
    // Every comparison of the io_uring server across two profiles, and its twin made with
    // the control copy under the same two profiles in the same cell.
    let copies = |m: &Measured, c: ServerConfig| {
        is(&m.pair.0.config, c) && is(&m.pair.1.config, c) && m.pair.0.profile != m.pair.1.profile
    };
    for m in measured.iter().filter(|m| copies(m, ServerConfig::IoUring)) {
        let twin = measured.iter().find(|t| {
            copies(t, ServerConfig::IoUringControl)
                && (t.pair.0.profile, t.pair.1.profile) == (m.pair.0.profile, m.pair.1.profile)
                && (t.load, t.conns, &t.route, t.metric) == (m.load, m.conns, &m.route, m.metric)
        });
        if let (Some(a), Some(b)) = (rounds(m), twin.and_then(rounds)) {
            out.replicates.count(contrast(a, b, first_stage));
        }
    }
    (out.pair_tally.made + out.replicates.made > 0).then_some(out)
}

//! `bench-runner calibrate`: do the intervals keep their promise? Many instances of the same
//! servers in one run, every pair of identical ones compared as if they were different
//! configurations. A 95 % interval of a pair that is truly the same excludes 1 one time in
//! twenty; the study counts how often each method's does — the old one (one process per
//! configuration, its slices bootstrapped) and the instance-level one the runner uses with
//! `--instances` 2 or more — over every identical pair, level and metric.

use serde::Serialize;

use crate::cli::{CalibrateArgs, DriverChoice, MeasureArgs, Network, RunArgs, StraceSlices};
use crate::model::{LoadChoice, LoadModel, Raw, ServerKey};
use crate::stats::instances::{self, Series};
use crate::stats::{
    bootstrap_median, median, order_statistic_median, paired_ratios, seed_for, Interval,
};
use crate::summary::{slice_value, Metric};

/// Instances of each configuration in the study unless `--instances` says otherwise.
pub const DEFAULT_INSTANCES: u32 = 8;

/// The run the study measures: each configuration `--instances` times under one profile.
pub fn run_args(a: &CalibrateArgs) -> RunArgs {
    let mut measure = a.measure.clone();
    // The rounds of the runs it checks (`--instances` = the group), not of a run with this
    // many instances; and fixed: the study has no A/A control to aim a target at.
    let checked = MeasureArgs {
        instances: Some(a.group),
        pairing: Some(crate::model::Pairing::Alternate),
        ..a.measure.clone()
    };
    measure.rounds = Some(checked.rounds());
    // The study is of keep-alive CPU per request unless told otherwise.
    measure.loads = Some(measure.loads.unwrap_or(vec![LoadChoice::KeepAlive]));
    measure.instances = Some(measure.instances.unwrap_or(DEFAULT_INSTANCES));
    // The study checks the resident method's interval (its analysis fits instances and
    // rounds): its servers stay resident.
    measure.relaunch = Some(crate::model::Relaunch::Once);
    measure.pairing = Some(crate::model::Pairing::Alternate);
    RunArgs {
        measure,
        profiles: vec![a.profile],
        configs: a.configs.clone(),
        references: vec![],
        servers: vec![],
        strace: StraceSlices::Off,
        engine: a.engine,
        driver: DriverChoice::Rxload,
        network: Network::Host,
        target_host: "127.0.0.1".into(),
        port: a.port,
        no_build: false,
        keep_firewall: false,
        label: Some("calibration".into()),
        calibration: Some(a.group),
    }
}

/// How one method did on one set of identical pairs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    /// Intervals computed (pairs that had one).
    pub intervals: usize,
    /// Of them, those that excluded 1: identical servers told apart.
    pub excluding_one: usize,
    /// The median half-width of the intervals (0.012 = ±1.2 %): what the method's honesty
    /// costs in resolution.
    pub median_half_width: f64,
}

impl Tally {
    fn of(intervals: &[Interval]) -> Tally {
        let halves: Vec<f64> = intervals.iter().map(Interval::half_width).collect();
        Tally {
            intervals: intervals.len(),
            excluding_one: intervals.iter().filter(|i| i.excludes_one()).count(),
            median_half_width: median(&halves).unwrap_or(f64::NAN),
        }
    }

    /// The share of intervals that excluded 1 (nominal: 0.05).
    pub fn rate(&self) -> f64 {
        self.excluding_one as f64 / self.intervals.max(1) as f64
    }

    /// Adds `other`'s counts; its half-width joins `halves` when it had intervals.
    fn add(&mut self, other: &Tally, halves: &mut Vec<f64>) {
        self.intervals += other.intervals;
        self.excluding_one += other.excluding_one;
        if other.intervals > 0 {
            halves.push(other.median_half_width);
        }
    }
}

/// One configuration at one level on one metric.
#[derive(Clone, Debug, Serialize)]
pub struct StudyCell {
    pub server: ServerKey,
    pub conns: u32,
    pub metric: Metric,
    pub instances: usize,
    /// Every pair of its instances, one process each, slices bootstrapped.
    pub old: Tally,
    /// The same pairs, the order-statistic interval `--instances 1` runs print now.
    pub one: Tally,
    /// Every pair of its groups of `group` instances, the instance-level interval.
    pub new: Tally,
    /// How far apart two identical processes are here: the instance standard deviation the
    /// fit found (0.01 = 1 %).
    pub instance_sd: f64,
}

/// The study: per cell and over all of them.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// Instances in a group: the `--instances` of the runs the new method is checked for.
    pub group: u32,
    pub cells: Vec<StudyCell>,
    pub old: Tally,
    pub one: Tally,
    pub new: Tally,
}

/// The study from a run's record: `group` consecutive instances form one configuration for
/// the new method (instances started in a shuffled order, so consecutive numbers are not
/// neighbours in memory).
pub fn analyse(raw: &Raw, group: u32) -> Calibration {
    let group = group.max(2) as usize;
    let cpus = raw.settings.server_cpus.len().max(1);
    let keys = raw.configurations();
    let load = raw
        .settings
        .loads
        .first()
        .copied()
        .unwrap_or(LoadModel::KeepAlive);
    let route = raw.settings.routes.first().map(ToString::to_string);
    let mut cells = Vec::new();
    for &conns in &raw.settings.conns {
        for metric in [Metric::CpuPerRequest, Metric::Rps] {
            let series_of = |key: &ServerKey| -> Vec<Series> {
                let mut by: Vec<Series> = Vec::new();
                for s in raw.slices.iter().filter(|s| {
                    &s.server == key
                        && s.load == load
                        && s.conns == conns
                        && Some(s.route.to_string()) == route
                }) {
                    if let Some(v) = slice_value(s, metric, cpus) {
                        let i = s.instance as usize;
                        if by.len() <= i {
                            by.resize(i + 1, Series::new());
                        }
                        by[i].insert(s.round, v);
                    }
                }
                by
            };
            let all: Vec<Vec<Series>> = keys.iter().map(series_of).collect();
            // Every group of every configuration in one fit, as a run would pool them.
            let groups: Vec<(usize, Vec<&Series>)> = all
                .iter()
                .enumerate()
                .flat_map(|(c, instances)| {
                    instances
                        .chunks(group)
                        .filter(|g| g.len() == group)
                        .map(move |g| (c, g.iter().collect()))
                })
                .collect();
            let fit = instances::fit(&groups.iter().map(|(_, g)| g.clone()).collect::<Vec<_>>());
            for (c, key) in keys.iter().enumerate() {
                let (mut old, mut one) = (Vec::new(), Vec::new());
                for a in 0..all[c].len() {
                    for b in a + 1..all[c].len() {
                        let name =
                            format!("calibrate|{key}|{a}|{b}|{conns}|{}", metric.seed_name());
                        let ratios = paired_ratios(&all[c][a], &all[c][b]);
                        old.extend(bootstrap_median(
                            &ratios,
                            seed_for(raw.settings.seed, &name),
                        ));
                        one.extend(order_statistic_median(&ratios));
                    }
                }
                let mine: Vec<usize> = (0..groups.len()).filter(|&g| groups[g].0 == c).collect();
                let mut new = Vec::new();
                for (x, &a) in mine.iter().enumerate() {
                    for &b in &mine[x + 1..] {
                        new.extend(fit.compare(a, b));
                    }
                }
                cells.push(StudyCell {
                    server: key.clone(),
                    conns,
                    metric,
                    instances: all[c].len(),
                    old: Tally::of(&old),
                    one: Tally::of(&one),
                    new: Tally::of(&new),
                    instance_sd: fit.instance_var.sqrt(),
                });
            }
        }
    }
    let total = |pick: fn(&StudyCell) -> &Tally| {
        let mut t = Tally::default();
        let mut halves = Vec::new();
        for c in &cells {
            t.add(pick(c), &mut halves);
        }
        t.median_half_width = median(&halves).unwrap_or(f64::NAN);
        t
    };
    Calibration {
        group: group as u32,
        old: total(|c| &c.old),
        one: total(|c| &c.one),
        new: total(|c| &c.new),
        cells,
    }
}

/// calibration.md: the two methods side by side, then per cell.
pub fn markdown(raw: &Raw, c: &Calibration) -> String {
    let pct = |x: f64| {
        if x.is_finite() {
            format!("{:.1} %", x * 100.0)
        } else {
            "–".into()
        }
    };
    let pm = |x: f64| {
        let p = pct(x);
        if x.is_finite() {
            format!("±{p}")
        } else {
            p
        }
    };
    let mut s = format!(
        "# Calibration: identical servers compared as if different\n\n\
         Run {} ({}), {} rounds of {} s slices, {} instances of each configuration, \
         machine: {}.\n\n\
         A 95 % interval between two identical servers should exclude 1 about 5 % of the time. \
         *Old*: one process per configuration, its slices paired by round and bootstrapped \
         (every pair of instances). *One instance, order statistic*: the same pairs, the \
         distribution-free interval of the median that `--instances 1` runs print now — exact \
         for the rounds' noise, blind as the old one to the process's luck. *New*: {} \
         instances per configuration, the interval over instances and rounds (every pair of \
         groups of {}; `--instances {}`).\n\n",
        raw.started_utc,
        raw.engine,
        raw.settings.rounds,
        raw.settings.slice_s,
        raw.settings.instances,
        raw.machine.cpu_model,
        c.group,
        c.group,
        c.group
    );
    s += "| method | intervals | excluding 1 | rate | median half-width |\n| --- | ---: | ---: | ---: | ---: |\n";
    for (name, t) in [
        ("old (one instance, bootstrap)", &c.old),
        ("one instance, order statistic", &c.one),
        (&*format!("new ({} instances)", c.group), &c.new),
    ] {
        s += &format!(
            "| {name} | {} | {} | {} | {} |\n",
            t.intervals,
            t.excluding_one,
            pct(t.rate()),
            pm(t.median_half_width)
        );
    }
    s += "\n## Per cell\n\n| server | conns | metric | instances | instance sd | old: excl. / n | old ± | order: excl. / n | order ± | new: excl. / n | new ± |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for cell in &c.cells {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} / {} | {} | {} / {} | {} | {} / {} | {} |\n",
            cell.server,
            cell.conns,
            cell.metric.key(),
            cell.instances,
            pct(cell.instance_sd),
            cell.old.excluding_one,
            cell.old.intervals,
            pm(cell.old.median_half_width),
            cell.one.excluding_one,
            cell.one.intervals,
            pm(cell.one.median_half_width),
            cell.new.excluding_one,
            cell.new.intervals,
            pm(cell.new.median_half_width)
        );
    }
    s
}

#[cfg(test)]
mod tests;

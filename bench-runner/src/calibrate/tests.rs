use rand_core::SeedableRng;
use rand_pcg::Pcg64;

use super::*;
use crate::model::{Profile, ServerConfig};
use crate::stats::tests::normal;
use crate::summary::tests::synthetic_instances;

/// 8 instances each of rx and io_uring whose processes differ by `instance_sd`, slices by 1 %,
/// the machine drifting ±10 % a round.
fn study(seed: u64, instance_sd: f64) -> Calibration {
    let mut rng = Pcg64::seed_from_u64(seed);
    let keys = [ServerConfig::Rx, ServerConfig::IoUring].map(|c| ServerKey {
        profile: Profile::Relaxed,
        config: c.into(),
    });
    let luck: Vec<f64> = (0..16).map(|_| instance_sd * normal(&mut rng)).collect();
    let drift: Vec<f64> = (0..=12).map(|_| 0.1 * normal(&mut rng)).collect();
    let noise: Vec<f64> = (0..16 * 13).map(|_| 0.01 * normal(&mut rng)).collect();
    let raw = synthetic_instances(
        &keys,
        8,
        12,
        |k, i, r| {
            let p = usize::from(k.config == ServerConfig::IoUring) * 8 + i as usize;
            let base = if p < 8 { 7.0 } else { 6.0 };
            base * (luck[p] + drift[r as usize] + noise[p * 13 + r as usize]).exp()
        },
        |_, _| 0.99,
    );
    analyse(&raw, 2)
}

#[test]
fn the_study_counts_every_identical_pair_and_tells_the_methods_apart() {
    let c = study(1, 0.015);
    // Per configuration, level and metric: C(8,2) = 28 instance pairs, C(4,2) = 6 group pairs.
    assert_eq!(
        c.cells.len(),
        2 * 2,
        "2 configurations x 1 level x 2 metrics"
    );
    for cell in &c.cells {
        assert_eq!(
            (cell.old.intervals, cell.one.intervals, cell.new.intervals),
            (28, 28, 6),
            "{cell:?}"
        );
        assert_eq!(cell.instances, 8);
    }
    assert_eq!((c.old.intervals, c.new.intervals), (112, 24));
    // Processes 1.5 % apart and slices 1 % noisy: one process per configuration tells
    // identical servers apart far more often than one time in twenty. One study's pairs share
    // their instances (six group pairs rest on four groups), so its count moves in steps:
    // the rates are judged over ten studies.
    let (mut old, mut one, mut new): (Tally, Tally, Tally) = Default::default();
    for seed in 1..=10 {
        let s = study(seed, 0.015);
        old.add(&s.old, &mut vec![]);
        one.add(&s.one, &mut vec![]);
        new.add(&s.new, &mut vec![]);
    }
    assert!(old.rate() > 0.3, "{old:?}");
    // An exact interval for the rounds' noise does not see the process's luck either.
    assert!(one.rate() > 0.3, "{one:?}");
    assert!(new.rate() <= 0.08, "{new:?}");
    assert!(c.new.median_half_width > c.old.median_half_width);
    let sd = c.cells[0].instance_sd;
    assert!((0.005..0.03).contains(&sd), "instance sd {sd}");
}

#[test]
fn without_an_instance_effect_the_old_method_is_right_too_and_the_report_says_both() {
    let (mut old, mut one, mut new): (Tally, Tally, Tally) = Default::default();
    for seed in 11..=20 {
        let s = study(seed, 0.0);
        old.add(&s.old, &mut vec![]);
        one.add(&s.one, &mut vec![]);
        new.add(&s.new, &mut vec![]);
    }
    assert!(old.rate() < 0.10, "{old:?}");
    // Where processes do not differ, the order statistic keeps its promise.
    assert!(one.rate() < 0.07, "{one:?}");
    assert!(new.rate() < 0.08, "{new:?}");
    let raw = synthetic_instances(
        &[ServerKey {
            profile: Profile::Relaxed,
            config: ServerConfig::Rx.into(),
        }],
        8,
        12,
        |_, i, r| 7.0 + 0.01 * f64::from(i) + 0.02 * f64::from(r % 3),
        |_, _| 0.99,
    );
    let text = markdown(&raw, &analyse(&raw, 2));
    assert!(
        text.contains("| old (one instance, bootstrap) | 56 |"),
        "{text}"
    );
    assert!(
        text.contains("| one instance, order statistic | 56 |"),
        "{text}"
    );
    assert!(text.contains("| new (2 instances) | 12 |"), "{text}");
    assert!(
        text.contains("| relaxed/rx | 64 | cpu_per_request | 8 |"),
        "{text}"
    );
}

#[test]
fn the_study_runs_the_rounds_of_the_runs_it_checks_not_of_its_own_instance_count() {
    use clap::Parser;
    let args = |extra: &[&str]| {
        let cli = crate::cli::Cli::try_parse_from(["x", "calibrate"].iter().chain(extra)).unwrap();
        let Some(crate::cli::Cmd::Calibrate(c)) = cli.command else {
            panic!("not calibrate");
        };
        run_args(&c)
    };
    // 10 instances in the study, groups of 2 checked: a full run of 2 instances plans 6 rounds.
    let full = args(&["--instances", "10"]);
    assert_eq!(full.measure.instances, Some(10));
    assert_eq!(full.measure.rounds, Some(6));
    assert_eq!(args(&["--group", "4"]).measure.rounds, Some(3));
    assert_eq!(args(&["--rounds", "16"]).measure.rounds, Some(16));
    assert_eq!(full.calibration, Some(2));
}

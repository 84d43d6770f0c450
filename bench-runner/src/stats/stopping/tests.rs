use rand_core::SeedableRng;
use rand_pcg::Pcg64;

use super::*;
use std::collections::BTreeMap;

use crate::stats::launches::{rounds_interval, values};
use crate::stats::tests::normal;
use crate::stats::Interval;

/// Trials per coverage figure (binomial SD of a 95 % coverage: 0.34 %).
const TRIALS: usize = 4000;
/// The true ln ratio of every synthetic comparison.
const TRUE: f64 = 0.05;
/// No run adds rounds past this (the budget's stand-in).
const MOST: usize = 40;

/// A round's noise on the log scale, given the round.
type Noise = dyn Fn(&mut Pcg64, usize) -> f64;

/// A comparison's rounds `from..to` (1-based), appended.
fn more(rng: &mut Pcg64, d: &mut Vec<f64>, to: usize, noise: &Noise) {
    while d.len() < to {
        let r = d.len() + 1;
        d.push(TRUE + noise(rng, r));
    }
}

/// Whether an interval covers the true ratio.
fn covers(i: Option<Interval>) -> bool {
    let i = i.expect("three rounds or more");
    i.low <= TRUE.exp() && TRUE.exp() <= i.high
}

/// Rounds 1.. as the summary holds them.
fn by_round(d: &[f64]) -> BTreeMap<u32, f64> {
    (1..).zip(d.iter().copied()).collect()
}

/// The rule this module replaced: after `first` rounds, add one while the interval is wider
/// than `target`.
fn sequential(rng: &mut Pcg64, first: usize, target: f64, noise: &Noise) -> Vec<f64> {
    let mut d = Vec::new();
    more(rng, &mut d, first, noise);
    while d.len() < MOST && rounds_interval(&d).unwrap().half_width() > target {
        let next = d.len() + 1;
        more(rng, &mut d, next, noise);
    }
    d
}

/// The two-stage rule: the rounds in all decided from the first `first` alone.
fn two_stage(rng: &mut Pcg64, first: usize, target: f64, noise: &Noise) -> Vec<f64> {
    let mut d = Vec::new();
    more(rng, &mut d, first, noise);
    let h = rounds_interval(&d).unwrap().half_width();
    more(rng, &mut d, rounds_needed(h, first, target, MOST), noise);
    d
}

type Rule = fn(&mut Pcg64, usize, f64, &Noise) -> Vec<f64>;

/// Over `TRIALS` synthetic runs of `rule`: the coverage of Student's t over all rounds, of
/// Stein's interval ([`interval`] with the first stage), and the mean rounds run.
fn coverage(rule: Rule, first: usize, target: f64, noise: &Noise) -> (f64, f64, f64) {
    let mut rng = Pcg64::seed_from_u64(47);
    let (mut all, mut stein, mut rounds) = (0, 0, 0);
    for _ in 0..TRIALS {
        let d = rule(&mut rng, first, target, noise);
        all += usize::from(covers(rounds_interval(&d)));
        stein += usize::from(covers(interval(&by_round(&d), Some(first as u32))));
        rounds += d.len();
    }
    let share = |k: usize| k as f64 / TRIALS as f64;
    (share(all), share(stein), rounds as f64 / TRIALS as f64)
}

#[test]
fn steins_interval_keeps_95_percent_where_the_interval_over_all_rounds_does_not() {
    // The calibration tests' paths, with a target the first stage usually misses (its
    // expected half-width about 1.6× the target), so that most runs add rounds.
    let t5 = |rng: &mut Pcg64| {
        let chi2: f64 = (0..5).map(|_| normal(rng).powi(2)).sum();
        normal(rng) / (chi2 / 5.0).sqrt()
    };
    let paths: [(&str, usize, f64, Box<Noise>); 5] = [
        (
            "no offset",
            6,
            0.0065,
            Box::new(|rng, _| 0.01 * normal(rng)),
        ),
        (
            "three rounds",
            3,
            0.0065,
            Box::new(|rng, _| 0.01 * normal(rng)),
        ),
        (
            "heavy tails",
            6,
            0.0085,
            Box::new(move |rng, _| 0.01 * t5(rng)),
        ),
        (
            "unequal rounds",
            6,
            0.0065,
            Box::new(|rng, r| if r % 2 == 0 { 0.008 } else { 0.012 } * normal(rng)),
        ),
        (
            "shared launch",
            6,
            0.006,
            Box::new(|rng, _| 0.008 * normal(rng) + 0.004 * normal(rng)),
        ),
    ];
    let (mut short, mut lines) = (0, Vec::new());
    for (name, first, target, noise) in &paths {
        for (rule_name, rule) in [("two-stage", two_stage as Rule), ("sequential", sequential)] {
            let (all, stein, n) = coverage(rule, *first, *target, noise.as_ref());
            lines.push(format!(
                "{name}, {rule_name} rule ({n:.1} rounds): over all rounds {:.2} %, Stein's {:.2} %",
                all * 100.0,
                stein * 100.0
            ));
            assert!((0.935..=0.965).contains(&stein), "{}", lines.join("\n"));
            short += usize::from(all < 0.935);
        }
    }
    eprintln!("{}", lines.join("\n"));
    // The interval over all rounds is what the report printed before: short on most paths.
    assert!(
        short >= 6,
        "over all rounds short on {short} of 10\n{}",
        lines.join("\n")
    );
}

#[test]
fn without_added_rounds_steins_interval_is_the_rounds_own() {
    let d = by_round(&[0.01, 0.03, 0.02, 0.04, 0.00, 0.02]);
    assert_eq!(interval(&d, Some(6)), rounds_interval(&values(&d)));
    assert_eq!(interval(&d, None), rounds_interval(&values(&d)));
    // Rounds past the first stage: the mean of all, the spread of the first three (sd 0.01,
    // t at 2 df 4.303, over √6).
    let i = interval(&d, Some(3)).unwrap();
    assert!((i.median.ln() - 0.02).abs() < 1e-12);
    let half = 4.303 * 0.01 / 6f64.sqrt();
    assert!((i.high.ln() - 0.02 - half).abs() < 1e-9, "{i:?}");
    // Too few rounds in the first stage: none.
    assert_eq!(interval(&d, Some(2)), None);
}

#[test]
fn the_rounds_needed_follow_the_first_stage_spread() {
    // Six rounds at ±1 %: ±0.5 % needs about three times the rounds (t shrinking from 2.57).
    let n = rounds_needed(0.01, 6, 0.005, 100);
    assert!((15..=20).contains(&n), "{n}");
    // Already there: no round added; never more than the cap; fewer than two rounds: none.
    assert_eq!(rounds_needed(0.004, 6, 0.005, 100), 6);
    assert_eq!(rounds_needed(0.2, 6, 0.005, 30), 30);
    assert_eq!(rounds_needed(f64::NAN, 6, 0.005, 30), 6);
    // The planned interval is reached at the rounds returned, and not one round earlier.
    let sd = 0.01f64.asinh() * 6f64.sqrt() / t975(5);
    let hw = |n: usize| (t975(n - 1) * sd / (n as f64).sqrt()).sinh();
    assert!(hw(n) <= 0.005 && hw(n - 1) > 0.005);
}

use std::collections::BTreeMap;

use rand_core::SeedableRng;
use rand_pcg::Pcg64;

use super::*;
use crate::stats::tests::normal;
use crate::stats::{bootstrap_median, paired_ratios};

/// A simulated cell: `configs` configurations of `k` instances over `rounds` rounds, each
/// configuration `truth[c]` on the log scale, every instance its own N(0, `instance_sd`) luck,
/// a drift N(0, 10 %) per round shared by all, and slice noise N(0, `noise_sd[c]`).
struct Cell {
    series: Vec<Vec<Series>>,
}

fn simulate(
    rng: &mut Pcg64,
    truth: &[f64],
    k: usize,
    rounds: u32,
    instance_sd: f64,
    noise_sd: &[f64],
) -> Cell {
    let drift: Vec<f64> = (0..rounds).map(|_| 0.10 * normal(rng)).collect();
    let series = truth
        .iter()
        .zip(noise_sd)
        .map(|(t, sd)| {
            (0..k)
                .map(|_| {
                    let luck = instance_sd * normal(rng);
                    (0..rounds)
                        .map(|r| {
                            (
                                r + 1,
                                (t + luck + drift[r as usize] + sd * normal(rng)).exp(),
                            )
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    Cell { series }
}

impl Cell {
    fn fit(&self) -> Fit {
        let refs: Vec<Vec<&Series>> = self.series.iter().map(|c| c.iter().collect()).collect();
        fit(&refs)
    }
}

fn covers(i: &Interval, truth: f64) -> bool {
    i.low <= truth && truth <= i.high
}

#[test]
fn t_points_match_the_table_where_the_expansion_takes_over() {
    assert_eq!(t975(2), 4.303);
    assert_eq!(t975(0), f64::INFINITY);
    for (df, t) in [(31, 2.0395), (40, 2.0211), (60, 2.0003), (120, 1.9799)] {
        assert!((t975(df) - t).abs() < 2e-4, "df {df}: {} vs {t}", t975(df));
    }
    assert!(t975(31) < t975(30) && t975(1000) > 1.96);
}

#[test]
fn the_interval_covers_the_truth_at_the_runners_sizes_where_one_instance_does_not() {
    // (configurations, instances, rounds, instance sd, slice sd): the default run's shape
    // (15 x 2 x 12; instances 1 % apart, what two identical processes differ by here), its
    // planned rounds alone (6) on a noisy host, the peers run's (8 configurations, a larger
    // instance effect), and a small run of 4 x 3.
    // Configurations 0 and 1 are the same server: the truth is a ratio of 1.
    let mut rng = Pcg64::seed_from_u64(2026);
    // 600 trials: the coverage estimate's standard error is under 1 %.
    let trials = 600u64;
    for (configs, k, rounds, instance_sd, slice_sd) in [
        (15, 2, 12, 0.01, 0.015),
        (15, 2, 6, 0.03, 0.05),
        (8, 2, 12, 0.02, 0.01),
        (4, 3, 8, 0.01, 0.02),
    ] {
        let (mut new, mut old) = (0, 0);
        for trial in 0..trials {
            let truth = vec![0.0; configs];
            let noise = vec![slice_sd; configs];
            let cell = simulate(&mut rng, &truth, k, rounds, instance_sd, &noise);
            let i = cell.fit().compare(0, 1).expect("an interval");
            new += usize::from(covers(&i, 1.0));
            // The old method: one instance each, its slices paired by round and bootstrapped.
            let one = bootstrap_median(
                &paired_ratios(&cell.series[0][0], &cell.series[1][0]),
                trial,
            )
            .expect("enough pairs");
            old += usize::from(covers(&one, 1.0));
        }
        let (new, old) = (new as f64 / trials as f64, old as f64 / trials as f64);
        let shape = format!("{configs} x {k} x {rounds}, instance sd {instance_sd}");
        assert!(new >= 0.93, "{shape}: two levels cover {new:.3}");
        assert!(
            old < 0.85,
            "{shape}: one instance covers {old:.3}, yet it cannot see the instance effect"
        );
    }
}

#[test]
fn without_an_instance_effect_the_interval_is_not_much_wider_than_the_rounds_allow() {
    // No instance effect: the interval is about t·sqrt(2·(π/2)·σ²/(k·n)) wide, and still covers.
    let mut rng = Pcg64::seed_from_u64(9);
    let (sd, k, n) = (0.015, 2usize, 12u32);
    let mut halves = Vec::new();
    let mut covered = 0;
    for _ in 0..200 {
        let cell = simulate(&mut rng, &[0.0; 15], k, n, 0.0, &[sd; 15]);
        let fit = cell.fit();
        let i = fit.compare(0, 1).unwrap();
        covered += usize::from(covers(&i, 1.0));
        halves.push(i.median.ln() - i.low.ln());
    }
    let theory =
        t975(15) * (2.0 * std::f64::consts::FRAC_PI_2 * sd * sd / (k as f64 * f64::from(n))).sqrt();
    let half = median(&halves).unwrap();
    assert!(covered >= 186, "covered {covered}/200");
    assert!(
        half < 1.6 * theory,
        "half-width {half:.4} against {theory:.4}"
    );
}

#[test]
fn a_real_difference_is_found_and_a_noisy_configuration_gets_its_own_width() {
    let mut rng = Pcg64::seed_from_u64(5);
    let mut truth = vec![0.0; 8];
    truth[0] = (0.95f64).ln();
    let mut noise = vec![0.01; 8];
    noise[2] = 0.08; // an unsaturated server: its slices scatter
    let cell = simulate(&mut rng, &truth, 3, 16, 0.005, &noise);
    let fit = cell.fit();
    let found = fit.compare(0, 1).unwrap();
    assert!(found.excludes_one() && found.high < 1.0, "{found:?}");
    assert!((found.median - 0.95).abs() < 0.02, "{found:?}");
    let quiet = fit.compare(3, 1).unwrap();
    let noisy = fit.compare(2, 1).unwrap();
    assert!(
        noisy.half_width() > 2.0 * quiet.half_width(),
        "noisy {noisy:?} quiet {quiet:?}"
    );
    assert_eq!(found.n, 16);
}

#[test]
fn a_slow_slice_and_missing_rounds_do_not_move_the_levels() {
    let mut rng = Pcg64::seed_from_u64(3);
    let mut cell = simulate(&mut rng, &[0.0, 0.0, 0.0, 0.0], 2, 12, 0.0, &[0.01; 4]);
    let before = cell.fit().compare(0, 1).unwrap();
    // One slice ran at a third of the speed; two rounds of another instance are missing.
    *cell.series[0][0].get_mut(&5).unwrap() *= 3.0;
    cell.series[1][1].remove(&2);
    cell.series[1][1].remove(&9);
    let after = cell.fit().compare(0, 1).unwrap();
    assert!(
        (after.median.ln() - before.median.ln()).abs() < 0.01,
        "{before:?} -> {after:?}"
    );
    assert_eq!(after.n, 10);
    // Nor does it widen the interval much: the noise is read robustly, as the levels are.
    assert!(
        after.half_width() < 1.5 * before.half_width(),
        "{before:?} -> {after:?}"
    );
}

#[test]
fn too_few_rounds_or_instances_give_no_interval() {
    let mut rng = Pcg64::seed_from_u64(1);
    let short = simulate(&mut rng, &[0.0; 4], 2, 2, 0.01, &[0.01; 4]);
    assert_eq!(short.fit().compare(0, 1), None, "two rounds an instance");
    let single = simulate(&mut rng, &[0.0; 2], 1, 12, 0.01, &[0.01; 2]);
    let fit = single.fit();
    assert_eq!(fit.df, 0);
    assert_eq!(fit.compare(0, 1), None, "no instance variance to go on");
    let pair = simulate(&mut rng, &[0.0; 2], 2, 12, 0.01, &[0.01; 2]);
    assert_eq!(pair.fit().df, 2);
    assert!(pair.fit().compare(0, 1).is_some());
    assert_eq!(pair.fit().compare(0, 5), None, "no such configuration");
    let empty: BTreeMap<u32, f64> = BTreeMap::new();
    let fit = fit_of(&[
        vec![&empty, &empty],
        vec![&pair.series[0][0], &pair.series[0][1]],
    ]);
    assert_eq!(fit.levels[0], None);
}

fn fit_of(configs: &[Vec<&Series>]) -> Fit {
    fit(configs)
}

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::*;
use crate::stats::launches::rounds_interval;
use crate::stats::tests::normal;

/// One synthetic run shaped like a full default run of duets: `cells` A/A control cells and
/// one real comparison (true ratio `truth`), each measured over `rounds` rounds. Every
/// comparison carries an offset fixed for the run, N(0, `tau[c]`) for cell `c` (cycling
/// through `tau`: heterogeneous where its entries differ), that no round resamples; each round
/// adds the duet's own noise N(0, `round_sd[c]`) and an order effect of ±0.3 % (which server of
/// the duet went first, drawn afresh every round). Returns the control's cells' per-round ln
/// ratios, then the real comparison's.
fn simulate(
    rng: &mut Pcg64,
    cells: usize,
    rounds: usize,
    tau: &[f64],
    round_sd: &[f64],
    truth: f64,
) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut one = |c: usize, mean: f64| -> Vec<f64> {
        let fixed = tau[c % tau.len()] * normal(rng);
        (0..rounds)
            .map(|_| {
                let order = if rng.next_u64() & 1 == 0 {
                    0.003
                } else {
                    -0.003
                };
                mean + fixed + order + round_sd[c % round_sd.len()] * normal(rng)
            })
            .collect()
    };
    let control: Vec<Vec<f64>> = (0..cells).map(|c| one(c, 0.0)).collect();
    let real = one(0, truth.ln());
    (control, real)
}

/// What the A/A cells and the real comparison say over `trials` runs: the share of control
/// cells whose interval covers 1, judged by the rounds alone and by the widened interval (the
/// control's level estimated without the cell judged), the real comparison's coverage by the
/// widened interval (the level from every control cell), and the mean half-widths of the
/// control's intervals, rounds alone and widened.
struct Coverage {
    rounds_only: f64,
    widened: f64,
    real: f64,
    width_rounds_only: f64,
    width_widened: f64,
    /// Per cell class (`c % tau.len()`), the widened interval's coverage of the control.
    by_class: Vec<f64>,
}

fn coverage(trials: usize, tau: &[f64], round_sd: &[f64]) -> Coverage {
    let mut rng = Pcg64::seed_from_u64(33);
    let (cells, rounds, truth) = (21, 6, 1.05);
    let (mut old, mut new, mut real, mut w_old, mut w_new) = (0, 0, 0, 0.0, 0.0);
    let mut class = vec![(0usize, 0usize); tau.len()];
    for _ in 0..trials {
        let (control, comparison) = simulate(&mut rng, cells, rounds, tau, round_sd, truth);
        let refs: Vec<&[f64]> = control.iter().map(|d| d.as_slice()).collect();
        for (c, d) in control.iter().enumerate() {
            let before = rounds_interval(d).expect("6 rounds");
            let after = RunLevel::estimate_without(&refs, c)
                .interval(d)
                .expect("6 rounds");
            old += usize::from(!before.excludes_one());
            new += usize::from(!after.excludes_one());
            class[c % tau.len()].0 += usize::from(!after.excludes_one());
            class[c % tau.len()].1 += 1;
            w_old += before.half_width();
            w_new += after.half_width();
        }
        let i = RunLevel::estimate(&refs).interval(&comparison).unwrap();
        real += usize::from(i.low <= truth && truth <= i.high);
    }
    let n = (trials * cells) as f64;
    Coverage {
        rounds_only: old as f64 / n,
        widened: new as f64 / n,
        real: real as f64 / trials as f64,
        width_rounds_only: w_old / n,
        width_widened: w_new / n,
        by_class: class.iter().map(|(k, n)| *k as f64 / *n as f64).collect(),
    }
}

#[test]
fn a_run_level_offset_undercovers_the_rounds_interval_and_the_widened_one_covers() {
    // The 6/207 duet runs' shape: an offset of 0.5 % per pair for the run, rounds of 0.8 %.
    let c = coverage(400, &[0.005], &[0.008]);
    // 8400 control cells: the binomial SD of a coverage near 95 % is 0.24 %.
    assert!(
        c.rounds_only < 0.88,
        "the rounds alone cover {}",
        c.rounds_only
    );
    assert!(
        (0.935..=0.975).contains(&c.widened),
        "widened {}",
        c.widened
    );
    // 400 runs' real comparison: binomial SD 1.1 %.
    assert!(c.real >= 0.92, "real comparison {}", c.real);
}

#[test]
fn without_a_run_level_offset_the_widened_interval_costs_little() {
    let c = coverage(400, &[0.0], &[0.008]);
    assert!(c.rounds_only >= 0.94, "rounds only {}", c.rounds_only);
    assert!(c.widened >= 0.94, "widened {}", c.widened);
    let cost = c.width_widened / c.width_rounds_only;
    assert!(cost < 1.10, "widened {cost}× the rounds' interval");
}

#[test]
fn offsets_that_differ_by_cell_are_covered_over_the_run() {
    // Keep-alive cells with a 0.6 % offset, open-loop cells with 0.2 %, their rounds' spread
    // different too: one pooled level over-widens the second and under-widens the first
    // (87 % and 99 % here, against 80–88 % for the rounds alone), and covers over the
    // run's cells (94.7 %).
    let c = coverage(400, &[0.006, 0.002, 0.002], &[0.006, 0.012, 0.010]);
    assert!(c.rounds_only < 0.90, "rounds only {}", c.rounds_only);
    assert!(c.widened >= 0.93, "widened {}", c.widened);
    assert!(
        c.by_class.iter().all(|k| *k >= 0.85),
        "by class {:?}",
        c.by_class
    );
}

#[test]
fn identical_means_show_no_run_level_and_the_interval_is_the_rounds_own() {
    let cells: Vec<Vec<f64>> = (0..5)
        .map(|c| vec![0.01, -0.01, 0.002 * c as f64, -0.002 * c as f64])
        .collect();
    let refs: Vec<&[f64]> = cells.iter().map(|d| d.as_slice()).collect();
    let level = RunLevel::estimate(&refs);
    assert_eq!(level.variance, 0.0, "{level:?}");
    assert_eq!(level.cells, 5);
    let d = [0.02, 0.01, 0.03, 0.015];
    assert_eq!(level.interval(&d), rounds_interval(&d));
}

#[test]
fn a_cell_far_from_one_raises_the_level_and_is_left_out_of_its_own() {
    let mut cells: Vec<Vec<f64>> = (0..4).map(|_| vec![0.001, -0.001, 0.0005]).collect();
    cells.push(vec![0.05, 0.051, 0.049]);
    let refs: Vec<&[f64]> = cells.iter().map(|d| d.as_slice()).collect();
    let all = RunLevel::estimate(&refs);
    // y² of the far cell, 0.05², over five cells, less the rounds' tiny share.
    assert!(
        (all.variance - 0.05f64.powi(2) / 5.0).abs() < 1e-5,
        "{all:?}"
    );
    let without = RunLevel::estimate_without(&refs, 4);
    assert_eq!(without.variance, 0.0);
    assert_eq!(without.cells, 4);
    // Judged by the others' level, the far cell is apart; widened by its own, it hides.
    assert!(without.interval(&cells[4]).unwrap().excludes_one());
    assert!(!all.interval(&cells[4]).unwrap().excludes_one());
}

#[test]
fn too_few_rounds_give_no_interval_and_no_evidence() {
    let level = RunLevel::estimate(&[&[0.1, 0.2][..]]);
    assert_eq!(level, RunLevel::default());
    assert!(level.interval(&[0.1, 0.2]).is_none());
    assert!(level.interval(&[0.1, f64::NAN, 0.2]).is_none());
}

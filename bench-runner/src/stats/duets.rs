//! Intervals for a run of duets (`--pairing duet`): the two servers of a comparison driven at
//! once, over one window, on the same CPUs, their servers launched afresh every round.
//!
//! Within a duet the host's interference of that second falls on both servers, so the ratio
//! of their values is free of it: on the AMD EPYC guest of 2026-12-05 two identical servers'
//! ratio varied by 0.4–0.5 % from duet to duet where each server's own value varied by
//! 8–11 % (results/method-duet-20261205T092200Z). What a duet does not replicate is the
//! processes' own luck (placement, caches): resident, that luck is the same in every duet
//! and the duets' spread cannot show it — the same study's resident pair was "apart" at
//! −0.2 % [−0.3, −0.1]. Launched afresh every round, each round is an independent draw of
//! both: round `r` gives `d_r`, the mean over its duets of ln(A / B), and Student's t over
//! the rounds is the interval ([`super::launches::rounds_interval`]). Whatever else stays
//! fixed for a run and could set two servers apart is drawn afresh per round instead (which
//! server of a duet goes first, each server's port: `Plan::round_order`,
//! `Plan::launch_ports`), so the rounds carry it; the control's
//! pairs and the replicate contrasts check that they do ([`super::calibration`]).

use std::collections::BTreeMap;

use super::launches::{rounds_interval, values};
use super::Interval;

/// A against B from their duets: round → the ln(A / B) of each of its duets (one per
/// instance pairing). A round where some duet failed is left out, as a round with a failed
/// instance is in [`super::launches`]: its mean would rest on another pairing's luck alone.
pub fn compare(by_round: &BTreeMap<u32, Vec<f64>>, per_round: usize) -> Option<Interval> {
    rounds_interval(&values(&round_means(by_round, per_round)))
}

/// Each whole round's mean ln(A / B) over its duets, by round (rounds with a failed or
/// missing duet left out).
pub fn round_means(by_round: &BTreeMap<u32, Vec<f64>>, per_round: usize) -> BTreeMap<u32, f64> {
    by_round
        .iter()
        .filter(|(_, v)| v.len() == per_round && v.iter().all(|x| x.is_finite()))
        .map(|(r, v)| (*r, v.iter().sum::<f64>() / v.len() as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;
    use rand_pcg::Pcg64;

    /// A standard normal draw (Box–Muller).
    fn normal(rng: &mut Pcg64) -> f64 {
        use rand_core::Rng;
        let u1 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (-2.0 * (u1.max(1e-300)).ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Coverage of the true ratio over `trials` synthetic runs shaped like a noisy host: the
    /// host's level swings 10 % slice to slice (shared by both servers of a duet, so it
    /// cancels), each launch draws a 1 % process effect, a duet's own ratio noise is 0.5 %.
    /// `resident`: the launch effects drawn once per run, not once per round.
    fn coverage(trials: usize, resident: bool, truth: f64) -> (f64, f64) {
        let mut rng = Pcg64::seed_from_u64(7);
        let (rounds, k) = (8u32, 2usize);
        let (mut covered, mut width) = (0, 0.0);
        for _ in 0..trials {
            let mut fixed: Vec<f64> = (0..2 * k).map(|_| 0.01 * normal(&mut rng)).collect();
            let mut by_round: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
            for r in 1..=rounds {
                if !resident {
                    fixed = (0..2 * k).map(|_| 0.01 * normal(&mut rng)).collect();
                }
                for i in 0..k {
                    let j = (i + r as usize) % k;
                    let host = 0.10 * normal(&mut rng);
                    let a = host + truth.ln() + fixed[i] + 0.0035 * normal(&mut rng);
                    let b = host + fixed[k + j] + 0.0035 * normal(&mut rng);
                    by_round.entry(r).or_default().push(a - b);
                }
            }
            let i = compare(&by_round, k).expect("an interval from 8 rounds");
            covered += usize::from(i.low <= truth && truth <= i.high);
            width += i.half_width();
        }
        (covered as f64 / trials as f64, width / trials as f64)
    }

    #[test]
    fn duets_of_fresh_launches_cover_the_true_ratio_and_cancel_the_host() {
        let (cover, width) = coverage(2000, false, 1.05);
        // 95 % promised: at 2000 trials the binomial SD is 0.5 %.
        assert!((0.935..=0.965).contains(&cover), "coverage {cover}");
        // The host's 10 % swing is gone from the width: launch effects and duet noise only
        // (a t-interval of 8 rounds of two duets: about ±1 %).
        assert!(width < 0.015, "half-width {width}");
    }

    #[test]
    fn duets_of_resident_servers_would_undercover() {
        // The same duets without fresh launches: each run's process luck is fixed, the
        // rounds cannot see it, and the interval misses far more often than 5 %.
        let (cover, _) = coverage(2000, true, 1.05);
        assert!(cover < 0.8, "coverage {cover}");
    }

    #[test]
    fn a_round_with_a_failed_duet_is_left_out() {
        let mut by_round = BTreeMap::new();
        by_round.insert(1, vec![0.01, 0.02]);
        by_round.insert(2, vec![0.01]);
        by_round.insert(3, vec![0.02, 0.01]);
        assert!(
            compare(&by_round, 2).is_none(),
            "two whole rounds: no interval"
        );
        by_round.insert(4, vec![0.0, 0.03]);
        let i = compare(&by_round, 2).unwrap();
        assert_eq!(i.n, 3);
        assert!((i.median - 0.015f64.exp()).abs() < 1e-12);
    }
}

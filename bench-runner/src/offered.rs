//! The rate an open-loop cell offers: a share of keep-alive capacity measured in the same run,
//! read off the slices already recorded (no state of its own, so a re-read run gives the same
//! rates). Capacity is the median keep-alive req/s of a configuration's instances in the first
//! round it measured at that level and route: fixed from then on, so every round of an
//! open-loop cell offers the same rate and the rounds pair. The A/A control is offered its
//! twin's share.

use crate::model::{LoadModel, Offered, Raw, ServerConfig, ServerKey, Subject};
use crate::stats::median;

/// A configuration's keep-alive req/s at `conns` on `route`, from the first round that measured
/// it (`None`: none has yet).
pub fn capacity(raw: &Raw, key: &ServerKey, conns: u32, route: &str) -> Option<f64> {
    let measured = || {
        raw.slices.iter().filter(|s| {
            s.ok()
                && s.load == LoadModel::KeepAlive
                && &s.server == key
                && s.conns == conns
                && s.route.to_string() == route
        })
    };
    let first = measured().map(|s| s.round).min()?;
    let rates: Vec<f64> = measured()
        .filter(|s| s.round == first)
        .filter_map(|s| s.rps())
        .collect();
    median(&rates)
}

/// Whose capacity a configuration's own share is taken of: its own, but the A/A control's is
/// its twin's, so the control is offered exactly the io_uring server's rate and the pair
/// differs in nothing but the process (one round's req/s of two identical servers differs by
/// the machine's noise, and CPU per request depends on the offered load).
fn twin(key: &ServerKey) -> ServerKey {
    match key.config {
        Subject::Own(ServerConfig::IoUringControl) => ServerKey {
            profile: key.profile,
            config: Subject::Own(ServerConfig::IoUring),
        },
        _ => key.clone(),
    }
}

/// The rate (req/s, all connections together) that `load` offers `key` at `conns` on `route`;
/// `None` for a closed-loop model, or where no capacity to take a share of was measured.
pub fn rate(raw: &Raw, load: LoadModel, key: &ServerKey, conns: u32, route: &str) -> Option<f64> {
    let offered = load.offered()?;
    let base = match offered {
        Offered::Fixed(n) => return Some(f64::from(n)),
        Offered::Own(_) => capacity(raw, &twin(key), conns, route)?,
        Offered::Slowest(_) => raw
            .configurations()
            .iter()
            .filter_map(|k| capacity(raw, k, conns, route))
            .min_by(f64::total_cmp)?,
    };
    Some(base * offered.fraction()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Profile;
    use crate::summary::tests::synthetic_instances;

    fn key(c: ServerConfig) -> ServerKey {
        ServerKey {
            profile: Profile::Relaxed,
            config: Subject::Own(c),
        }
    }

    #[test]
    fn the_control_is_offered_its_twins_share() {
        let (uring, control) = (
            key(ServerConfig::IoUring),
            key(ServerConfig::IoUringControl),
        );
        // The control measured 20 % faster in the first round: noise, not a different server.
        let cost = |k: &ServerKey, _, _| if k == &uring { 10.0 } else { 1e6 / 120_000.0 };
        let raw = synthetic_instances(&[uring.clone(), control.clone()], 2, 2, cost, |_, _| 1.0);
        let own = LoadModel::Open(Offered::Own(50));
        let r = |k| rate(&raw, own, k, 64, "GET:/").unwrap();
        assert!((r(&uring) - 50_000.0).abs() < 1.0, "{}", r(&uring));
        assert_eq!(r(&control), r(&uring));
        // Its own keep-alive req/s is still its own.
        let c = capacity(&raw, &control, 64, "GET:/").unwrap();
        assert!((c - 120_000.0).abs() < 2.0, "{c}");
    }

    #[test]
    fn the_rate_is_a_share_of_the_first_measured_round_and_stays_fixed() {
        let (rx, uring) = (key(ServerConfig::Rx), key(ServerConfig::IoUring));
        let own90 = LoadModel::Open(Offered::Own(90));
        let slowest50 = LoadModel::Open(Offered::Slowest(50));
        // CPU µs per request at full utilisation: a slice's req/s is 1e6 over it.
        let cost = |k: &ServerKey, instance: u32, round: u32| match (k == &rx, instance, round) {
            (true, 0, 1) => 10.0,            // 100k req/s
            (true, _, 1) => 1e6 / 110_000.0, // the second instance: 110k
            (true, _, _) => 20.0,            // a later round's 50k moves nothing
            (false, _, _) => 1e6 / 120_000.0,
        };
        let mut raw = synthetic_instances(&[rx.clone(), uring.clone()], 2, 2, cost, |_, _| 1.0);
        // Open-loop slices are not capacity.
        let mut open = raw.slices[0].clone();
        open.load = own90;
        raw.slices.push(open);
        let r = |load, k| rate(&raw, load, k, 64, "GET:/").unwrap();
        let near = |a: f64, b: f64| (a - b).abs() < 1.0;
        assert!(near(r(own90, &rx), 0.9 * 105_000.0), "{}", r(own90, &rx));
        assert!(near(r(own90, &uring), 0.9 * 120_000.0));
        // Every server alike at half the slowest's.
        assert!(near(r(slowest50, &rx), 52_500.0));
        assert!(near(r(slowest50, &uring), 52_500.0));
        // A closed-loop model offers no rate; a level nothing measured has none either (the
        // slice then fails rather than guess one).
        assert_eq!(rate(&raw, LoadModel::KeepAlive, &rx, 64, "GET:/"), None);
        // A fixed rate needs no capacity.
        let fixed = LoadModel::Open(Offered::Fixed(20_000));
        assert_eq!(rate(&raw, fixed, &rx, 512, "GET:/"), Some(20_000.0));
        assert_eq!(rate(&raw, own90, &rx, 512, "GET:/"), None);
        raw.slices.clear();
        assert_eq!(rate(&raw, own90, &rx, 64, "GET:/"), None);
    }
}

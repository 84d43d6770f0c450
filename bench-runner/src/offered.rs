//! The rate an open-loop cell offers: a share of keep-alive capacity measured in the same run,
//! read off the slices already recorded (no state of its own, so a re-read run gives the same
//! rates). Capacity is the median req/s of a configuration's keep-alive slices at that level
//! and route (all its instances) recorded before the first slice offered a share there: the
//! plan runs every such block after all planned rounds of the rest (`plan::Stage`), so that is
//! every planned round's keep-alive, and it is fixed from then on — every round of an
//! open-loop cell offers the same rate and the rounds pair. The A/A control is offered its
//! twin's share.
//!
//! With `--rates-from RUN` the capacities are instead those an earlier run offered its shares
//! of, recorded in this run's settings: a re-run then drives every server at the same rates,
//! and its costs compare with the earlier run's like with like (a cost at a share of capacity
//! depends on the rate, and the rate on that run's own keep-alive luck).

use serde::{Deserialize, Serialize};

use crate::model::{LoadModel, Offered, Raw, ServerConfig, ServerKey, Slice, Subject};
use crate::stats::median;

/// Capacities taken from an earlier run (`--rates-from`), recorded in raw.json's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatesFrom {
    /// The earlier run's folder name.
    pub run: String,
    pub capacities: Vec<Capacity>,
}

/// One configuration's keep-alive req/s at a level and route, as the earlier run froze it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    pub server: ServerKey,
    pub conns: u32,
    pub route: String,
    pub rps: f64,
}

impl RatesFrom {
    /// The capacities `earlier` (folder `run`) offered its shares of, for each of `servers` at
    /// each (level, route) of `levels`; an error naming the first one it never measured.
    pub fn take(
        earlier: &Raw,
        run: &str,
        servers: &[ServerKey],
        levels: &[(u32, String)],
    ) -> Result<RatesFrom, String> {
        let mut capacities = Vec::new();
        for server in servers {
            for (conns, route) in levels {
                let rps = capacity(earlier, server, *conns, route).ok_or_else(|| {
                    format!("{run} measured no keep-alive capacity for {server} at {conns} connections on {route}")
                })?;
                capacities.push(Capacity {
                    server: server.clone(),
                    conns: *conns,
                    route: route.clone(),
                    rps,
                });
            }
        }
        Ok(RatesFrom {
            run: run.to_string(),
            capacities,
        })
    }

    fn capacity(&self, key: &ServerKey, conns: u32, route: &str) -> Option<f64> {
        self.capacities
            .iter()
            .find(|c| &c.server == key && c.conns == conns && c.route == route)
            .map(|c| c.rps)
    }
}

/// A configuration's keep-alive req/s at `conns` on `route`: the median of its slices there
/// before the first slice offered a share at that level and route (`None`: none measured), or
/// the earlier run's where this one takes its rates from one.
pub fn capacity(raw: &Raw, key: &ServerKey, conns: u32, route: &str) -> Option<f64> {
    if let Some(from) = &raw.settings.rates_from {
        return from.capacity(key, conns, route);
    }
    let frozen = raw
        .slices
        .iter()
        .position(|s| s.load.takes_share() && s.conns == conns && s.route.to_string() == route)
        .unwrap_or(raw.slices.len());
    median(&keep_alive_rates(&raw.slices[..frozen], key, conns, route))
}

/// The same over the whole run: what the share a configuration was offered is judged
/// against afterwards (table.md's "share of its run's").
pub fn run_capacity(raw: &Raw, key: &ServerKey, conns: u32, route: &str) -> Option<f64> {
    median(&keep_alive_rates(&raw.slices, key, conns, route))
}

fn keep_alive_rates(slices: &[Slice], key: &ServerKey, conns: u32, route: &str) -> Vec<f64> {
    slices
        .iter()
        .filter(|s| {
            s.ok()
                && s.load == LoadModel::KeepAlive
                && &s.server == key
                && s.conns == conns
                && s.route.to_string() == route
        })
        .filter_map(|s| s.rps())
        .collect()
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
    fn rates_from_an_earlier_run_are_its_capacities_whatever_this_run_measures() {
        let (rx, uring) = (key(ServerConfig::Rx), key(ServerConfig::IoUring));
        let own50 = LoadModel::Open(Offered::Own(50));
        let at = |rps: f64| move |_: &ServerKey, _: u32, _: u32| 1e6 / rps;
        let earlier =
            synthetic_instances(&[rx.clone(), uring.clone()], 1, 2, at(100_000.0), |_, _| {
                1.0
            });
        let levels = [(64, "GET:/".to_string())];
        let from =
            RatesFrom::take(&earlier, "EARLIER", &[rx.clone(), uring.clone()], &levels).unwrap();
        assert_eq!(from.capacities.len(), 2);
        // This run's own keep-alive measured 150k; its shares are still the earlier 100k's.
        let mut now =
            synthetic_instances(&[rx.clone(), uring.clone()], 1, 2, at(150_000.0), |_, _| {
                1.0
            });
        let own = rate(&now, own50, &rx, 64, "GET:/").unwrap();
        assert!((own - 75_000.0).abs() < 2.0, "{own}");
        now.settings.rates_from = Some(from.clone());
        let taken = rate(&now, own50, &rx, 64, "GET:/").unwrap();
        assert!((taken - 50_000.0).abs() < 2.0, "{taken}");
        // The share of this run's own capacity is still judged against this run's.
        let run = run_capacity(&now, &rx, 64, "GET:/").unwrap();
        assert!((run - 150_000.0).abs() < 2.0, "{run}");
        // A level the earlier run never measured is named, not guessed.
        let more = [(64, "GET:/".to_string()), (512, "GET:/".to_string())];
        let e = RatesFrom::take(&earlier, "EARLIER", std::slice::from_ref(&rx), &more).unwrap_err();
        assert!(
            e.contains("EARLIER") && e.contains("512 connections"),
            "{e}"
        );
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
    fn the_rate_is_a_share_of_every_keep_alive_slice_before_the_first_share_and_stays_fixed() {
        let (rx, uring) = (key(ServerConfig::Rx), key(ServerConfig::IoUring));
        let own90 = LoadModel::Open(Offered::Own(90));
        let slowest50 = LoadModel::Open(Offered::Slowest(50));
        // CPU µs per request at full utilisation: a slice's req/s is 1e6 over it.
        let cost = |k: &ServerKey, instance: u32, round: u32| match (k == &rx, instance, round) {
            (true, 0, 1) => 1e6 / 100_000.0,
            (true, 1, 1) => 1e6 / 110_000.0,
            (true, 0, 2) => 1e6 / 104_000.0,
            (true, 1, 2) => 1e6 / 120_000.0,
            (true, _, _) => 20.0, // 50k, after the shares began: moves nothing
            (false, _, _) => 1e6 / 120_000.0,
        };
        let mut raw = synthetic_instances(&[rx.clone(), uring.clone()], 2, 3, cost, |_, _| 1.0);
        // The first share offered: after two rounds of keep-alive, before the third.
        let third = raw.slices.iter().position(|s| s.round == 3).unwrap();
        let mut open = raw.slices[0].clone();
        open.load = own90;
        raw.slices.insert(third, open);
        let r = |load, k| rate(&raw, load, k, 64, "GET:/").unwrap();
        let near = |a: f64, b: f64| (a - b).abs() < 1.0;
        // rx: the median of 100k, 110k, 104k and 120k — both rounds, both instances.
        assert!(near(r(own90, &rx), 0.9 * 107_000.0), "{}", r(own90, &rx));
        assert!(near(r(own90, &uring), 0.9 * 120_000.0));
        // Every server alike at half the slowest's.
        assert!(near(r(slowest50, &rx), 53_500.0));
        assert!(near(r(slowest50, &uring), 53_500.0));
        // Open-loop slices are not capacity, and a share at another level freezes nothing here.
        let mut elsewhere = raw.slices[0].clone();
        elsewhere.load = own90;
        elsewhere.conns = 512;
        raw.slices.insert(0, elsewhere);
        assert!(near(
            rate(&raw, own90, &rx, 64, "GET:/").unwrap(),
            0.9 * 107_000.0
        ));
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

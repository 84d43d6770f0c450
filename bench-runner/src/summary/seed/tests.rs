//! The seed table on synthetic runs whose truth is known.
use super::*;
use crate::summary::tests::synthetic;

fn key(profile: Profile, config: ServerConfig) -> ServerKey {
    ServerKey {
        profile,
        config: config.into(),
    }
}

/// CPU µs a request of each server: legacy 25 % dearer than rx, io_uring 12.5 % cheaper, and
/// io_uring under the block falls back to rx's cost.
fn cost(k: &ServerKey) -> f64 {
    match (k.profile, k.config.own().unwrap()) {
        (_, ServerConfig::Legacy) => 10.0,
        (Profile::NoIoUring, ServerConfig::IoUring) => 8.0,
        (_, ServerConfig::IoUring) => 7.0,
        _ => 8.0,
    }
}

/// A run of duets whose servers alone are the seed table's: the machine's speed drifts by
/// ±15 % from round to round, and each slice has a percent or so of its own.
fn duet_run(busy: f64) -> Raw {
    let servers: Vec<ServerKey> = [Profile::Relaxed, Profile::NoIoUring]
        .into_iter()
        .flat_map(|p| SEED_COLUMNS.map(|c| key(p, c)))
        .collect();
    let mut raw = synthetic(
        &servers,
        8,
        |k, r| {
            let drift = 1.0 + 0.15 * (f64::from(r) * 1.7).sin();
            let own = 1.0 + 0.01 * ((r as usize * 7 + k.to_string().len()) % 5) as f64 / 2.0;
            cost(k) * drift * own
        },
        |_, _| busy,
    );
    raw.settings.pairing = Pairing::Duet;
    raw.settings.solo = servers;
    raw.solo = std::mem::take(&mut raw.slices);
    raw
}

fn cell(t: &SeedTable, p: Profile, c: ServerConfig) -> &SeedCell {
    t.cells
        .iter()
        .find(|x| x.profile == p && x.config == Subject::Own(c))
        .unwrap()
}

#[test]
fn each_cell_is_paired_with_rx_by_round_and_the_fallback_is_a_share_of_io_uring() {
    let raw = duet_run(0.98);
    let t = seed_table(&raw).expect("rx was driven alone");
    assert_eq!(t.source, SeedSource::AloneBesideDuets);
    assert_eq!((t.rounds, t.cells.len()), (8, 6));
    let legacy = cell(&t, Profile::Relaxed, ServerConfig::Legacy);
    let vs = legacy.rps_vs_rx.as_ref().unwrap();
    // rx serves 10/8 of legacy's rate: legacy is 0.8 of rx's, whatever the drift.
    assert!(vs.low < 0.8 && 0.8 < vs.high && vs.high < 1.0, "{vs:?}");
    assert!((vs.median - 0.8).abs() < 0.01, "{vs:?}");
    // rx is the baseline: its own level, no change.
    let rx = cell(&t, Profile::Relaxed, ServerConfig::Rx);
    assert!(rx.rps_vs_rx.is_none() && rx.rps_level.is_some());
    // The drift is in the level's interval, not in the paired change.
    let level = rx.rps_level.unwrap();
    assert!(level.high / level.low > 1.05, "{level:?}");
    // Little's law: 64 connections over the rate.
    assert!((rx.little_us - 64.0 / rx.rps_median * 1e6).abs() < 1e-6);
    assert_eq!(rx.limit, Limit::Server);
    assert_eq!(t.fallback.len(), 1, "one share a level: {:?}", t.fallback);
    let share = &t.fallback[0].share;
    assert_eq!(t.fallback[0].conns, 64);
    assert!(share.low < 7.0 / 8.0 && 7.0 / 8.0 < share.high, "{share:?}");
}

#[test]
fn an_idle_server_is_not_called_server_bound_and_a_run_without_rx_alone_has_no_table() {
    let raw = duet_run(0.6);
    let t = seed_table(&raw).unwrap();
    assert!(t.cells.iter().all(|c| c.limit == Limit::Neither), "{t:?}");
    // The same run with its servers alone dropped: only duets, so no table.
    let mut duets_only = raw.clone();
    duets_only.solo.clear();
    assert!(seed_table(&duets_only).is_none());
    // Without rx alone there is nothing to pair with.
    let mut no_rx = raw;
    no_rx
        .solo
        .retain(|s| s.server.config != Subject::Own(ServerConfig::Rx));
    assert!(seed_table(&no_rx).is_none());
}

#[test]
fn the_servers_alone_leave_every_duet_figure_as_it_was() {
    let mut raw = duet_run(0.98);
    let before = crate::summary::summarise(&raw);
    // No duet slices: every row (each server still has its) measured nothing.
    assert!(
        before.rows.iter().all(|r| r.rounds_ok == 0),
        "{:?}",
        before.rows
    );
    assert!(before.seed.is_some());
    raw.solo.clear();
    assert!(crate::summary::summarise(&raw).seed.is_none());
}

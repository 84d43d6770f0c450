//! The summary on synthetic runs whose truth is known.
use super::*;
use crate::model::Profile;
use wire::{Backend, IoUringState};

use crate::model::{
    BackendSeen, Failure, FailureKind, LoadModel, Machine, ServerCounters, ServerRecord, Settings,
    Startup,
};

pub fn report(requests: u64, p50: f64) -> driver::report::Report {
    let mut r: driver::report::Report = serde_json::from_value(serde_json::json!({
        "url": "u", "engine": "io_uring", "threads": 1, "connections": 64, "duration_s": 1.0,
        "requests": requests, "elapsed_s": 1.0, "bytes_read": 0, "requests_per_s": requests as f64,
        "transfer_per_s": 0.0,
        "latency": {"mean_us": 1.0, "stdev_us": 0.0, "max_us": 1.0, "within_stdev_pct": 100.0,
                     "p50_us": p50, "p75_us": 1.0, "p90_us": 1.0, "p99_us": 2.0 * p50, "p999_us": null},
        "req_per_thread": {"mean": 0.0, "stdev": 0.0, "max": 0.0, "within_stdev_pct": 0.0},
        "errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0},
        "reconnects": null, "driver_cpu_s": null, "driver_syscalls": null
    }))
    .unwrap();
    // 60 % of the samples at `p50`, the rest at twice that.
    let at_p50 = requests * 6 / 10;
    r.latency_buckets = Some(driver::report::LatencyBuckets(vec![
        (p50 as u64, at_p50),
        (2 * p50 as u64, requests - at_p50),
    ]));
    r
}

fn key(profile: Profile, config: impl Into<Subject>) -> ServerKey {
    ServerKey {
        profile,
        config: config.into(),
    }
}

/// A run of `rounds` over the given servers, where `cost(key, round)` gives the CPU µs per
/// request and `util(key, round)` the server's utilisation; 100 000 requests a slice scaled
/// by the machine's speed in that round.
pub fn synthetic(
    servers: &[ServerKey],
    rounds: u32,
    cost: impl Fn(&ServerKey, u32) -> f64,
    util: impl Fn(&ServerKey, u32) -> f64,
) -> Raw {
    synthetic_instances(servers, 1, rounds, |k, _, r| cost(k, r), util)
}

/// [`synthetic`] with `instances` resident servers of each configuration, `cost(key,
/// instance, round)` giving each its own.
pub fn synthetic_instances(
    servers: &[ServerKey],
    instances: u32,
    rounds: u32,
    cost: impl Fn(&ServerKey, u32, u32) -> f64,
    util: impl Fn(&ServerKey, u32) -> f64,
) -> Raw {
    let mut slices = Vec::new();
    let residents: Vec<(&ServerKey, u32)> = servers
        .iter()
        .flat_map(|k| (0..instances).map(move |i| (k, i)))
        .collect();
    for round in 1..=rounds {
        for (i, &(k, instance)) in residents.iter().enumerate() {
            let c = cost(k, instance, round);
            let u = util(k, round);
            // Requests the server can do in the window at that cost and utilisation.
            let requests = (u * 1e6 / c) as u64;
            slices.push(Slice {
                round,
                position: i as u32,
                server: k.clone(),
                instance,
                launch: 0,
                duet: None,
                load: LoadModel::KeepAlive,
                conns: 64,
                route: driver::target::Route::get_root(),
                at_s: 0.0,
                window_s: 1.0,
                report: Some(report(requests, 150.0)),
                server_cpu_ns: Some((u * 1e9) as u64),
                // Nine tenths in the kernel, as the servers here spend it.
                server_cpu_split: Some(crate::model::CpuSplit {
                    user_ns: (u * 1e8) as u64,
                    system_ns: (u * 9e8) as u64,
                }),
                counters: Some(ServerCounters {
                    requests,
                    connections: 0,
                    syscalls: [
                        ("recvfrom".to_string(), requests),
                        ("sendto".to_string(), requests),
                    ]
                    .into(),
                }),
                steal: None,
                error: None,
            });
        }
    }
    Raw {
        schema: crate::model::SCHEMA,
        engine: "native".into(),
        machine: Machine::default(),
        driver: "rxload".into(),
        started_utc: String::new(),
        commit: None,
        foreign: vec![],
        references: vec![],
        settings: Settings {
            rounds,
            slice_s: 1.0,
            slice_warmup_s: 0.3,
            loads: vec![LoadModel::KeepAlive],
            conns: vec![64],
            load_conns: Default::default(),
            routes: vec![driver::target::Route::get_root()],
            seed: 9,
            instances,
            calibration_group: None,
            target: None,
            planned_rounds: None,
            added: None,
            rates_from: None,
            schedule: None,
            relaunch: Default::default(),
            pairing: Default::default(),
            solo: vec![],
            server_cpus: vec![0],
            load_cpus: vec![1],
            network: "host".into(),
            target_host: "127.0.0.1".into(),
        },
        servers: residents
            .iter()
            .map(|&(k, instance)| ServerRecord {
                key: k.clone(),
                instance,
                port: 3000,
                startup: Some(Startup {
                    line: String::new(),
                    backend: k.config.own().map_or(BackendSeen::Foreign, |c| {
                        BackendSeen::Server(c.intended_backend())
                    }),
                    io_uring: Some(IoUringState::Active {
                        setup: "x".into(),
                        recv_multishot: false,
                    }),
                    workers: 1,
                }),
                starts: 1,
                events: vec![],
                final_counters: None,
                strace: None,
            })
            .collect(),
        slices,
        solo: vec![],
        notes: vec![],
        complete: true,
        probe: None,
        mechanism: None,
    }
}

#[test]
fn paired_comparisons_find_the_real_difference_and_not_the_control() {
    let servers = [
        key(Profile::Relaxed, ServerConfig::Legacy),
        key(Profile::Relaxed, ServerConfig::Rx),
        key(Profile::Relaxed, ServerConfig::IoUring),
        key(Profile::Relaxed, ServerConfig::IoUringControl),
    ];
    // Legacy costs 14 % more than rx; both io_uring servers are the same; the machine
    // drifts by ±20 % between rounds and every slice has 1–2 % noise of its own.
    let noise = |k: &ServerKey, r: u32| {
        let c = k.config.own().unwrap() as u32;
        1.0 + 0.015 * ((r * 7 + c * 13) as f64).sin()
    };
    let raw = synthetic(
        &servers,
        24,
        |k, r| {
            let base = match k.config.own().unwrap() {
                ServerConfig::Legacy => 7.8,
                ServerConfig::Rx => 6.85,
                _ => 7.3,
            };
            base * (1.0 + 0.2 * (r as f64).sin()) * noise(k, r)
        },
        |_, r| if r % 6 == 0 { 0.45 } else { 0.98 },
    );
    let s = summarise(&raw);
    let cmp = |config, metric| {
        s.comparisons
            .iter()
            .find(|c| c.config == config && c.metric == metric)
            .unwrap()
    };
    let rx = cmp(ServerConfig::Rx, Metric::CpuPerRequest);
    assert_eq!((&rx.baseline, rx.pairs), (&ServerConfig::Legacy.into(), 24));
    assert!(rx.significant && rx.ci95_high < 0.9, "{rx:?}");
    let control = cmp(ServerConfig::IoUringControl, Metric::CpuPerRequest);
    assert_eq!(control.baseline, ServerConfig::IoUring);
    assert!(!control.significant, "{control:?}");
    // req/s pairs leave out the four half-speed rounds.
    assert_eq!(cmp(ServerConfig::Rx, Metric::Rps).pairs, 20);
    let io = cmp(ServerConfig::IoUring, Metric::CpuPerRequest);
    assert_eq!(io.baseline, ServerConfig::Rx);
    assert!(io.significant && io.ratio_median > 1.0);
    // Resolution: the control's half-width, for both metrics.
    assert_eq!(s.resolution.len(), 2);
    let worst = s.resolution_worst["cpu_per_request"];
    assert!(worst > 0.0 && worst < 0.03, "{worst}");
    // Rows: unsaturated slices counted and left out of the req/s median.
    let row = s
        .rows
        .iter()
        .find(|r| r.config == ServerConfig::Rx)
        .unwrap();
    assert_eq!(row.load_bound_rounds, 4);
    assert_eq!(row.rounds_ok, 24);
    assert_eq!(row.syscalls_per_request["total"], 2.0);
    assert!(row.flag.is_none() && row.note.is_none(), "{row:?}");
    assert_eq!(
        row.p50_us, 150.0,
        "merged buckets: 60 % of the samples at 150 µs"
    );
}

#[test]
fn profiles_are_compared_with_relaxed_for_the_same_configuration() {
    let servers = [
        key(Profile::Default, ServerConfig::Rx),
        key(Profile::NoIoUring, ServerConfig::Rx),
        key(Profile::Relaxed, ServerConfig::Rx),
        key(Profile::Relaxed, ServerConfig::Legacy),
    ];
    let pairs = comparison_pairs(&servers, &[]);
    let has = |a: usize, b: usize| pairs.contains(&(servers[a].clone(), servers[b].clone()));
    assert!(has(0, 2) && has(1, 2) && has(2, 3));
    assert_eq!(pairs.len(), 3, "{pairs:?}");
}

#[test]
fn each_own_configuration_is_compared_with_each_foreign_server_of_its_profile() {
    let nginx = || Subject::Foreign("nginx".into());
    let servers = [
        key(Profile::Relaxed, ServerConfig::Rx),
        key(Profile::Relaxed, ServerConfig::Legacy),
        key(Profile::Relaxed, nginx()),
        key(Profile::NoIoUring, nginx()),
    ];
    let pairs = comparison_pairs(&servers, &[]);
    let has = |a: usize, b: usize| pairs.contains(&(servers[a].clone(), servers[b].clone()));
    assert!(has(0, 1), "rx against legacy, as before");
    assert!(has(0, 2) && has(1, 2), "each configuration against nginx");
    assert!(has(3, 2), "nginx under no-io-uring against relaxed");
    assert!(
        !has(2, 0),
        "a foreign server is the baseline, not the subject"
    );
    assert_eq!(pairs.len(), 4, "{pairs:?}");
    // A foreign row has no backend to judge and no counters to miss.
    let raw = synthetic(&servers[..3], 6, |_, _| 7.0, |_, _| 0.99);
    let mut raw = raw;
    for s in raw.slices.iter_mut().filter(|s| s.server.config == nginx()) {
        s.counters = None;
    }
    let s = summarise(&raw);
    let row = s.rows.iter().find(|r| r.config == nginx()).unwrap();
    assert!(row.flag.is_none() && row.note.is_none(), "{row:?}");
    assert!(row.syscalls_per_request.is_empty());
    assert!(s
        .comparisons
        .iter()
        .any(|c| c.config == ServerConfig::Rx && c.baseline == nginx()));
}

#[test]
fn a_reference_server_is_compared_with_every_other_foreign_server_of_its_profile() {
    let foreign = |n: &str| Subject::Foreign(n.into());
    let servers = [
        key(Profile::Relaxed, ServerConfig::Rx),
        key(Profile::Relaxed, foreign("floor")),
        key(Profile::Relaxed, foreign("nginx")),
        key(Profile::Relaxed, foreign("hyper")),
        key(Profile::NoIoUring, foreign("hyper")),
    ];
    let pairs = comparison_pairs(&servers, &[foreign("floor")]);
    let has = |a: usize, b: usize| pairs.contains(&(servers[a].clone(), servers[b].clone()));
    assert!(
        has(0, 1) && has(0, 2) && has(0, 3),
        "ours against each, the floor included"
    );
    assert!(has(1, 2) && has(1, 3), "the floor against each other peer");
    assert!(!has(2, 1) && !has(1, 1) && !has(1, 4), "{pairs:?}");
    assert!(
        !has(2, 3),
        "peers that are not references are not set against each other"
    );
    assert_eq!(pairs.len(), 6, "{pairs:?}"); // and hyper under no-io-uring against relaxed
    assert_eq!(comparison_pairs(&servers, &[]).len(), 4);
}

#[test]
fn a_server_that_never_measured_is_flagged_and_a_fallback_is_a_note() {
    let servers = [
        key(Profile::NoIoUring, ServerConfig::IoUring),
        key(Profile::Relaxed, ServerConfig::Rx),
    ];
    let mut raw = synthetic(&servers, 3, |_, _| 7.0, |_, _| 0.99);
    let startup = raw.servers[0].startup.as_mut().unwrap();
    startup.backend = BackendSeen::Server(Backend::Epoll(wire::EpollMode::Rx));
    startup.io_uring = Some(IoUringState::Unavailable("EPERM".into()));
    for s in raw.slices.iter_mut().filter(|s| s.server == servers[1]) {
        s.error = Some(Failure::new(
            FailureKind::ServerExited,
            "the server exited\nlast line",
        ));
    }
    let s = summarise(&raw);
    let denied = &s.rows[0];
    assert_eq!(
        denied.note.as_deref(),
        Some("io_uring denied (EPERM): fell back to epoll/rx")
    );
    assert!(denied.flag.is_none());
    let dead = &s.rows[1];
    assert_eq!(dead.rounds_failed, 3);
    assert_eq!(
        dead.flag.as_deref(),
        Some("every slice failed: the server exited")
    );
}

#[test]
fn every_failed_slice_names_the_round_it_leaves_out_and_why() {
    let servers = [
        key(Profile::Relaxed, ServerConfig::IoUring),
        key(Profile::Relaxed, ServerConfig::Rx),
    ];
    let mut raw = synthetic(&servers, 4, |_, _| 7.0, |_, _| 0.99);
    assert!(summarise(&raw).dropped.is_empty());
    let failed = raw
        .slices
        .iter_mut()
        .find(|s| s.server == servers[1] && s.round == 2)
        .unwrap();
    failed.error = Some(Failure::new(
        FailureKind::ServerExited,
        "the server exited\nlast line",
    ));
    let s = summarise(&raw);
    assert_eq!(s.dropped.len(), 1, "{:?}", s.dropped);
    let d = &s.dropped[0];
    assert_eq!((d.round, &d.server), (2, &servers[1]));
    assert_eq!(d.cause, "the server exited");
    // The summary keeps it through its JSON.
    let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back.dropped, s.dropped);
}

#[test]
fn route_means_are_the_mean_of_the_routes() {
    let s_route = |r: &str| r.parse::<driver::target::Route>().unwrap();
    let servers = [
        key(Profile::Relaxed, ServerConfig::Rx),
        key(Profile::Relaxed, ServerConfig::Legacy),
    ];
    // Six rounds: the fewest whose order-statistic interval reaches 95 %.
    let mut raw = synthetic(&servers, 6, |_, _| 10.0, |_, _| 1.0);
    let mut second = raw.slices.clone();
    for s in &mut second {
        s.route = "POST:/user".parse().unwrap();
        s.report = Some(report(50_000, 100.0));
    }
    raw.slices.extend(second);
    raw.settings.routes = vec![s_route("GET:/"), s_route("POST:/user")];
    let s = summarise(&raw);
    let rx = s
        .route_means
        .iter()
        .find(|m| m.config == ServerConfig::Rx)
        .unwrap();
    assert_eq!(rx.rps_mean, 75_000.0);
    assert!(s
        .comparisons
        .iter()
        .any(|c| c.route == MEAN_ROUTE && c.metric == Metric::Rps));
}

#[test]
fn each_load_model_is_its_own_level_and_keep_alive_keeps_its_intervals() {
    let servers = [
        key(Profile::Relaxed, ServerConfig::Rx),
        key(Profile::Relaxed, ServerConfig::IoUring),
        key(Profile::Relaxed, ServerConfig::IoUringControl),
    ];
    let mut raw = synthetic(
        &servers,
        12,
        |k, r| {
            5.0 + (r % 3) as f64 * 0.1
                + f64::from(u8::from(k.config == Subject::Own(ServerConfig::Rx)))
        },
        |_, _| 0.99,
    );
    let alone = summarise(&raw);
    let per_request: Vec<Slice> = raw
        .slices
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.load = LoadModel::PerRequest;
            // Twice the CPU per request: half the requests in the same CPU time.
            let r = s.report.as_mut().unwrap();
            r.requests /= 2;
            r.requests_per_s /= 2.0;
            // rx keeps its connections open (the client closes), io_uring closes them.
            let by_server = s.server.config != Subject::Own(ServerConfig::Rx);
            r.closes = Some(driver::report::Closes {
                opened: r.requests,
                server: if by_server { r.requests } else { 0 },
                client: if by_server { 0 } else { r.requests },
            });
            s
        })
        .collect();
    raw.slices.extend(per_request);
    raw.settings.loads = vec![LoadModel::KeepAlive, LoadModel::PerRequest];
    let both = summarise(&raw);
    assert_eq!(both.rows.len(), 2 * alone.rows.len());
    let keep_alive = both.for_load(LoadModel::KeepAlive);
    assert_eq!(keep_alive.rows, alone.rows);
    assert_eq!(keep_alive.comparisons, alone.comparisons, "the same seeds");
    let pr = both.for_load(LoadModel::PerRequest);
    for (a, b) in pr.rows.iter().zip(&alone.rows) {
        let (a, b) = (a.cpu_us_per_request.unwrap(), b.cpu_us_per_request.unwrap());
        assert!((a / b - 2.0).abs() < 0.01, "{a} vs {b}");
    }
    assert!(keep_alive.rows.iter().all(|r| r.server_closed.is_none()));
    for r in &pr.rows {
        let expected = if r.config == Subject::Own(ServerConfig::Rx) {
            0.0
        } else {
            1.0
        };
        assert_eq!(r.server_closed, Some(expected), "{:?}", r.config);
    }
    // Its comparisons pair per-request slices only, with seeds of their own.
    assert!(!pr.comparisons.is_empty());
    assert!(pr
        .comparisons
        .iter()
        .all(|c| c.load == LoadModel::PerRequest));
    assert!(pr
        .resolution
        .iter()
        .all(|r| r.load == LoadModel::PerRequest));
    assert!(!pr.resolution_worst.is_empty());
}

#[test]
fn an_open_loop_row_says_what_share_of_its_runs_capacity_it_was_offered() {
    use crate::model::Offered;
    let rx = key(Profile::Relaxed, ServerConfig::Rx);
    let open90 = LoadModel::Open(Offered::Own(90));
    // Keep-alive at 100k req/s in rounds 1–2 and 80k in rounds 3–4: the run's median is 90k.
    let cost = |_: &ServerKey, _, round: u32| if round <= 2 { 10.0 } else { 12.5 };
    let mut raw = synthetic_instances(std::slice::from_ref(&rx), 2, 4, cost, |_, _| 1.0);
    raw.settings.loads = vec![LoadModel::KeepAlive, open90];
    // Offered 90 % of the first rounds' 100k: 100 % of what the run measured.
    let mut open = raw.slices[0].clone();
    open.load = open90;
    let report = open.report.as_mut().unwrap();
    report.open_loop = Some(driver::report::OpenLoop {
        target_rps: 90_000.0,
        deadline_s: None,
        uncorrected: report.latency,
        send_lag_p99_us: 0.0,
        behind: false,
    });
    raw.slices.push(open);
    let s = summarise(&raw);
    let row = s.rows.iter().find(|r| r.load == open90).unwrap();
    let o = row.open.as_ref().unwrap();
    assert_eq!(o.offered_rps, 90_000.0);
    let share = o.share_of_run_capacity.unwrap();
    assert!((share - 1.0).abs() < 1e-3, "{share}");
    // Keep-alive rows carry no open-loop figures.
    assert!(s
        .rows
        .iter()
        .filter(|r| r.load == LoadModel::KeepAlive)
        .all(|r| r.open.is_none()));
}

#[test]
fn a_relaunched_run_takes_its_interval_over_rounds() {
    let servers = [
        key(Profile::Relaxed, ServerConfig::Legacy),
        key(Profile::Relaxed, ServerConfig::Rx),
        key(Profile::Relaxed, ServerConfig::IoUring),
        key(Profile::Relaxed, ServerConfig::IoUringControl),
    ];
    // Every (instance, round) its own luck of ±3 %: a process launched afresh each round.
    let luck = |k: &ServerKey, i: u32, r: u32| {
        let c = k.config.own().unwrap() as u32;
        1.0 + 0.03 * ((r * 31 + c * 17 + i * 7) as f64).sin()
    };
    let cost = |k: &ServerKey, i: u32, r: u32| {
        let base = match k.config.own().unwrap() {
            ServerConfig::Legacy => 7.8,
            ServerConfig::Rx => 6.85,
            _ => 7.3,
        };
        base * (1.0 + 0.2 * (r as f64).sin()) * luck(k, i, r)
    };
    let mut raw = synthetic_instances(&servers, 2, 10, cost, |_, _| 0.98);
    let resident = summarise(&raw);
    raw.settings.relaunch = Relaunch::Round;
    for s in raw.slices.iter_mut() {
        s.launch = s.round - 1;
    }
    let relaunched = summarise(&raw);
    let find = |s: &Summary, config| {
        s.comparisons
            .iter()
            .find(|c| c.config == config && c.metric == Metric::CpuPerRequest)
            .unwrap()
            .clone()
    };
    let rx = find(&relaunched, ServerConfig::Rx);
    assert!(rx.significant && rx.ci95_high < 0.93, "{rx:?}");
    // The same values as launches::compare gives from the series by hand.
    let series = |config: ServerConfig| -> Vec<Series> {
        (0..2)
            .map(|i| {
                raw.slices
                    .iter()
                    .filter(|s| s.server.config == Subject::Own(config) && s.instance == i)
                    .map(|s| (s.round, s.cpu_us_per_request().unwrap()))
                    .collect()
            })
            .collect()
    };
    let (a, b) = (series(ServerConfig::Rx), series(ServerConfig::Legacy));
    let by_hand =
        launches::compare(&a.iter().collect::<Vec<_>>(), &b.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(
        (rx.ratio_median, rx.ci95_low, rx.ci95_high, rx.pairs),
        (by_hand.median, by_hand.low, by_hand.high, 10)
    );
    assert_ne!(
        find(&resident, ServerConfig::Rx).ci95_low,
        rx.ci95_low,
        "a resident run of the same values fits two levels"
    );
}

/// A run of duets whose rounds hold two passes, each numbering its positions from 0 (open
/// loop at a share of capacity runs after the closed-loop pass): every duet is found, in
/// each load model, and a slice whose partner is not beside it makes no duet.
#[test]
fn duets_of_two_passes_in_one_round_are_each_found() {
    use crate::model::{Offered, Pairing, Partner, Relaunch};
    let uring = key(Profile::Relaxed, ServerConfig::IoUring);
    let control = key(Profile::Relaxed, ServerConfig::IoUringControl);
    let open = LoadModel::Open(Offered::Own(50));
    let rounds = 6;
    // The control 3 % dearer in every duet, both servers at the round's speed.
    let mut raw = synthetic(
        &[uring.clone(), control.clone()],
        rounds,
        |k, r| (if *k == control { 5.15 } else { 5.0 }) * (1.0 + 0.05 * f64::from(r % 3)),
        |_, _| 1.0,
    );
    raw.settings.pairing = Pairing::Duet;
    raw.settings.relaunch = Relaunch::Round;
    raw.settings.loads = vec![LoadModel::KeepAlive, open];
    let partner = |s: &Slice| Partner {
        server: if s.server == uring {
            control.clone()
        } else {
            uring.clone()
        },
        instance: 0,
    };
    let mut second_pass = Vec::new();
    for s in &mut raw.slices {
        s.position = 0;
        s.duet = Some(partner(s));
        second_pass.push(Slice {
            load: open,
            ..s.clone()
        });
    }
    raw.slices.extend(second_pass);
    let s = summarise(&raw);
    for load in [LoadModel::KeepAlive, open] {
        let c = s
            .comparisons
            .iter()
            .find(|c| {
                c.load == load
                    && c.metric == Metric::CpuPerRequest
                    && c.config == control.config
                    && c.baseline == uring.config
            })
            .unwrap_or_else(|| panic!("no A/A comparison under {load:?}"));
        assert_eq!(c.pairs, rounds as usize, "{load:?}: every round's duet");
        assert!((c.ratio_median - 1.03).abs() < 1e-4, "{}", c.ratio_median);
    }
    // A slice whose partner names another server is no duet: its round is left out.
    let stray = raw
        .slices
        .iter_mut()
        .find(|s| s.round == 1 && s.load == open)
        .unwrap();
    stray.duet.as_mut().unwrap().instance = 1;
    let s = summarise(&raw);
    let c = s
        .comparisons
        .iter()
        .find(|c| c.load == open && c.metric == Metric::CpuPerRequest && c.config == control.config)
        .unwrap();
    assert_eq!(c.pairs, rounds as usize - 1);
}

/// A relaunched run whose A/A control carries an offset fixed for the run in two profiles
/// (+1.5 %, −1.5 %; none under relaxed), unseen by the rounds: every interval over rounds is
/// the rounds' own Student's t, nothing added, and the run's calibration check finds the
/// offsets — the two pairs apart, and the replicate contrasts across those profiles apart.
#[test]
fn intervals_over_rounds_are_the_rounds_own_and_the_calibration_finds_a_fixed_offset() {
    let profiles = [Profile::Default, Profile::NoIoUring, Profile::Relaxed];
    let servers: Vec<ServerKey> = profiles
        .iter()
        .flat_map(|&p| {
            [ServerConfig::IoUring, ServerConfig::IoUringControl]
                .into_iter()
                .map(move |c| key(p, c))
        })
        .collect();
    let offset = |p: Profile| match p {
        Profile::Default => 1.015,
        Profile::NoIoUring => 1.0 / 1.015,
        _ => 1.0,
    };
    // Each round its own speed and a small luck per server; the control its profile's offset.
    let cost = |k: &ServerKey, r: u32| {
        let luck = 1.0
            + 0.004
                * ((r * 13 + k.profile as u32 * 5 + k.config.own().unwrap() as u32 * 3) as f64)
                    .sin();
        let control = if k.config == Subject::Own(ServerConfig::IoUringControl) {
            offset(k.profile)
        } else {
            1.0
        };
        7.0 * (1.0 + 0.1 * (r as f64).sin()) * luck * control
    };
    let mut raw = synthetic(&servers, 8, cost, |_, _| 0.98);
    raw.settings.relaunch = Relaunch::Round;
    for s in raw.slices.iter_mut() {
        s.launch = s.round - 1;
    }
    let s = summarise(&raw);
    assert!(s.intervals_cover_processes);
    let series = |c: ServerConfig, p: Profile| -> Series {
        raw.slices
            .iter()
            .filter(|s| s.server == key(p, c))
            .map(|s| (s.round, s.cpu_us_per_request().unwrap()))
            .collect()
    };
    for c in s
        .comparisons
        .iter()
        .filter(|c| c.metric == Metric::CpuPerRequest)
    {
        let own = |x: &Subject| x.own().unwrap();
        let (a, b) = (
            series(own(&c.config), c.profile),
            series(own(&c.baseline), c.baseline_profile),
        );
        let alone = launches::compare(&[&a], &[&b]).unwrap();
        assert_eq!((c.ci95_low, c.ci95_high), (alone.low, alone.high), "{c:?}");
    }
    let cal = s.calibration.as_ref().expect("a control over rounds");
    assert_eq!(cal.pair_tally.made, 3);
    for p in cal.pairs.iter().filter(|p| p.profile != Profile::Relaxed) {
        let i = p.interval();
        assert!(i.excludes_one(), "{p:?}");
        assert!((i.median / offset(p.profile) - 1.0).abs() < 0.01, "{p:?}");
    }
    assert!(cal.pair_tally.apart >= 2, "{cal:?}");
    // Across profiles whose control offsets differ, the two copies' comparisons differ.
    assert!(cal.replicates.made >= 2, "{cal:?}");
    assert_eq!(cal.replicates.apart, cal.replicates.made, "{cal:?}");
}

#[test]
fn a_cpu_change_is_apportioned_to_kernel_and_user_time() {
    use super::SplitPoints;
    // +33 % with the kernel's share 95 % unblocked and 94 % blocked: the kernel carries
    // +30.0 points, user time +3.0 (the indirect cost), and they sum to the change.
    let p = SplitPoints::of(1.33, 0.94, 0.95);
    assert!((p.kernel - 0.3002).abs() < 1e-9, "{p:?}");
    assert!((p.user - 0.0298).abs() < 1e-9, "{p:?}");
    assert!((p.kernel + p.user - 0.33).abs() < 1e-12);
    // In a summary: every CPU comparison whose rows split carries it, nothing else does.
    let servers = [
        key(Profile::Relaxed, ServerConfig::IoUring),
        key(Profile::NoIoUring, ServerConfig::IoUring),
    ];
    let raw = synthetic(
        &servers,
        6,
        |k, r| if k.profile == Profile::NoIoUring { 7.7 } else { 7.0 } + 0.01 * r as f64,
        |_, _| 0.98,
    );
    let s = summarise(&raw);
    assert!(s
        .rows
        .iter()
        .all(|r| (r.kernel_share.unwrap() - 0.9).abs() < 1e-6));
    assert!(s
        .comparisons
        .iter()
        .any(|c| c.metric == Metric::CpuPerRequest && c.split.is_some()));
    for c in &s.comparisons {
        match (c.metric, c.split) {
            (Metric::CpuPerRequest, Some(p)) => {
                assert!((p.kernel + p.user - (c.ratio_median - 1.0)).abs() < 1e-9);
                assert!((p.kernel / (c.ratio_median - 1.0) - 0.9).abs() < 1e-6);
            }
            (Metric::CpuPerRequest, None) => panic!("no split: {c:?}"),
            (_, split) => assert_eq!(split, None),
        }
    }
}

//! The plan's schedule and its description, on fixed seeds.
use super::order::shuffle;
use super::*;
use crate::model::{Pairing, Profile};
use rand_core::SeedableRng;
use rand_pcg::Pcg64;

fn plan(seed: u64) -> Plan {
    let servers = [
        ServerConfig::Legacy,
        ServerConfig::Rx,
        ServerConfig::IoUring,
    ]
    .into_iter()
    .flat_map(|config| {
        [Profile::Default, Profile::Relaxed]
            .into_iter()
            .map(move |profile| ServerKey {
                profile,
                config: config.into(),
            })
    })
    .collect();
    Plan {
        servers,
        instances: 1,
        relaunch: Relaunch::Once,
        pairing: Pairing::Alternate,
        duets: vec![],
        solo: vec![],
        target: None,
        loads: vec![LoadModel::KeepAlive],
        conns: vec![64, 256, 512],
        load_conns: Default::default(),
        routes: vec![Route::get_root(), "POST:/user".parse().unwrap()],
        rounds: 20,
        slice: Duration::from_secs(1),
        warmup: Duration::from_millis(300),
        seed,
    }
}

#[test]
fn every_round_visits_every_cell_once() {
    let p = plan(1);
    let mut all = p.cells();
    all.sort();
    assert_eq!(all.len(), 6 * 3 * 2);
    for round in 1..=p.rounds {
        let mut order = p.round_order(round);
        order.sort();
        assert_eq!(order, all, "round {round}");
    }
    assert_eq!(p.slices(), 36 * 20);
}

#[test]
fn the_order_varies_between_rounds_and_the_seed_reproduces_it() {
    let p = plan(42);
    let orders: Vec<Vec<Cell>> = (1..=p.rounds).map(|r| p.round_order(r)).collect();
    for w in orders.windows(2) {
        assert_ne!(w[0], w[1]);
    }
    // No cell is stuck at one place: the first slice of a round is spread over cells.
    let firsts: std::collections::BTreeSet<Cell> = orders.iter().map(|o| o[0]).collect();
    assert!(firsts.len() > 10, "{}", firsts.len());
    assert_eq!(plan(42).round_order(7), p.round_order(7));
    assert_ne!(plan(43).round_order(7), p.round_order(7));
}

#[test]
fn one_load_model_keeps_the_schedule_a_seed_gave_before_the_load_axis() {
    // The order as it was made before the axis: blocks of (connection level, route).
    let p = plan(11);
    for round in [1, 2, 9] {
        let mut rng =
            Pcg64::seed_from_u64(p.seed ^ u64::from(round).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut blocks: Vec<(u32, usize)> = p
            .conns
            .iter()
            .flat_map(|&c| (0..p.routes.len()).map(move |r| (c, r)))
            .collect();
        shuffle(&mut blocks, &mut rng);
        let mut before = Vec::new();
        for (conns, route) in blocks {
            let mut servers: Vec<usize> = (0..p.servers.len()).collect();
            shuffle(&mut servers, &mut rng);
            before.extend(servers.into_iter().map(|server| (server, conns, route)));
        }
        let now: Vec<(usize, u32, usize)> = p
            .round_order(round)
            .iter()
            .map(|c| (c.server, c.conns, c.route))
            .collect();
        assert_eq!(now, before, "round {round}");
    }
}

#[test]
fn a_second_load_model_doubles_the_cells_and_keeps_blocks_of_one_model() {
    let mut p = plan(4);
    p.loads = vec![LoadModel::KeepAlive, LoadModel::PerRequest];
    assert_eq!(p.cells().len(), 6 * 2 * 3 * 2);
    let order = p.round_order(1);
    let mut sorted = order.clone();
    sorted.sort();
    let mut all = p.cells();
    all.sort();
    assert_eq!(sorted, all);
    for chunk in order.chunks(p.servers.len()) {
        assert!(chunk.iter().all(|c| c.load == chunk[0].load), "{chunk:?}");
    }
    let text = p.describe();
    assert!(
        text.contains("2 load models (keepalive, per-request)"),
        "{text}"
    );
    let per_request = order
        .iter()
        .find(|c| c.load == LoadModel::PerRequest)
        .unwrap();
    assert!(p.cell_name(per_request).contains(" per-request"));
}

#[test]
fn a_pair_is_at_most_one_block_apart() {
    let p = plan(3);
    let block = p.servers.len();
    for round in 1..=p.rounds {
        let order = p.round_order(round);
        for chunk in order.chunks(block) {
            // One (load, connection level, route) per block, every server in it once.
            let level = |c: &Cell| (c.load, c.conns, c.route);
            assert!(chunk.iter().all(|c| level(c) == level(&chunk[0])));
            let mut servers: Vec<usize> = chunk.iter().map(|c| c.server).collect();
            servers.sort();
            assert_eq!(servers, (0..block).collect::<Vec<_>>());
        }
    }
}

#[test]
fn eta_and_description() {
    let p = plan(5);
    assert_eq!(p.eta(), Duration::from_millis(1340) * 720);
    let text = p.describe();
    assert!(text.contains("6 resident servers x 3 connection levels x 2 routes = 36 cells; 20 rounds = 720 slices"), "{text}");
    assert!(text.contains("ETA: about 16 min 04 s"), "{text}");
    assert!(text.contains("seed 5"));
}

#[test]
fn instances_multiply_the_residents_and_every_round_visits_each() {
    let mut p = plan(8);
    p.instances = 2;
    assert_eq!(p.residents(), 12);
    assert_eq!(p.resident(0), (&p.servers[0], 0));
    assert_eq!(p.resident(3), (&p.servers[1], 1));
    let order = p.round_order(2);
    assert_eq!(order.len(), 12 * 3 * 2);
    for chunk in order.chunks(p.residents()) {
        let mut servers: Vec<usize> = chunk.iter().map(|c| c.server).collect();
        servers.sort();
        assert_eq!(servers, (0..12).collect::<Vec<_>>());
    }
    let mut start = p.start_order();
    assert_ne!(start, (0..12).collect::<Vec<_>>(), "shuffled");
    start.sort();
    assert_eq!(start, (0..12).collect::<Vec<_>>());
    let text = p.describe();
    assert!(
        text.contains(
            "plan: 6 configurations x 2 instances = 12 resident servers x 3 connection levels"
        ),
        "{text}"
    );
    assert!(
        p.cell_name(&order[0]).contains('#'),
        "{}",
        p.cell_name(&order[0])
    );
}

#[test]
fn open_loop_at_shares_runs_after_every_planned_round_of_the_rest() {
    let mut p = plan(6);
    let open90 = LoadModel::Open(crate::model::Offered::Own(90));
    let fixed = LoadModel::Open(crate::model::Offered::Fixed(20_000));
    // Keep-alive alone: one stage, the rounds' orders as they always were.
    let passes = p.passes();
    assert!(passes.iter().all(|x| x.stage == Stage::Absolute));
    assert_eq!(passes.len(), p.rounds as usize);
    for x in &passes {
        assert_eq!(p.pass_order(*x), p.round_order(x.round));
    }
    p.loads = vec![LoadModel::KeepAlive, open90, fixed];
    let passes = p.passes();
    assert_eq!(passes.len(), 2 * p.rounds as usize);
    let schedule: Vec<Cell> = passes.iter().flat_map(|&x| p.pass_order(x)).collect();
    // Every cell in every round, once.
    let mut seen = schedule.clone();
    seen.sort();
    let mut every: Vec<Cell> = (0..p.rounds).flat_map(|_| p.cells()).collect();
    every.sort();
    assert_eq!(seen, every);
    // Every keep-alive slice of the planned rounds before the first share is offered: the
    // capacity a share is taken of is all of them. A fixed rate needs none, so it runs with
    // the first stage.
    let first_share = schedule.iter().position(|c| c.load == open90).unwrap();
    let last_keep_alive = schedule
        .iter()
        .rposition(|c| c.load == LoadModel::KeepAlive)
        .unwrap();
    assert!(last_keep_alive < first_share);
    assert!(schedule[..first_share].iter().any(|c| c.load == fixed));
    assert!(schedule[first_share..].iter().all(|c| c.load == open90));
    // Each stage's round keeps its round's order (the seed reproduces it).
    for x in &passes {
        let mut whole = p.round_order(x.round);
        whole.retain(|c| Stage::of(c.load) == x.stage);
        assert_eq!(p.pass_order(*x), whole);
    }
    assert!(p
        .describe()
        .contains("round 1 (open loop at shares of capacity) starts: "));
}

#[test]
fn load_models_at_their_own_levels_make_only_those_cells() {
    use crate::cli::Cli;
    use crate::model::Offered;
    use clap::Parser;
    // Alternating: a cell is a server's visit (a duet plan's cells are its duets).
    let args = |extra: &[&str]| {
        Cli::try_parse_from(["x", "--pairing", "alternate"].iter().chain(extra).copied())
            .unwrap()
            .run
    };
    let (p, _) = make_plan(&args(&["--configs", "rx,io_uring"]), true, 5).unwrap();
    assert_eq!(p.conns, [64, 256, 512]);
    // keep-alive at three levels, per-request and three open rates at one: 7 blocks a round.
    assert_eq!(p.cells().len(), p.residents() * 7);
    assert!(p
        .cells()
        .iter()
        .all(|c| c.load == LoadModel::KeepAlive || c.conns == 64));
    let order = p.round_order(3);
    assert_eq!(order.len(), p.cells().len());
    let mut seen = order.clone();
    seen.sort();
    assert_eq!(seen, {
        let mut c = p.cells();
        c.sort();
        c
    });
    assert!(p.describe().contains(
        "keepalive at 64,256,512 conns; per-request, open-50, open-90, open-slowest-50 at 64 conns"
    ), "{}", p.describe());
    // Left out (a machine that cannot measure it): the rest keep their levels.
    let mut without = p.clone();
    without.leave_out(LoadModel::PerRequest);
    assert!(!without.loads.contains(&LoadModel::PerRequest));
    assert_eq!(without.cells().len(), without.residents() * 6);
    assert_eq!(without.conns_of(LoadModel::KeepAlive), [64, 256, 512]);
    let mut keep_alive = p.clone();
    for l in p.loads.iter().filter(|l| l.offered().is_some()) {
        keep_alive.leave_out(*l);
    }
    keep_alive.leave_out(LoadModel::PerRequest);
    assert_eq!(keep_alive.cells().len(), keep_alive.residents() * 3);
    assert!(keep_alive.load_conns.is_empty());
    let mut narrow = make_plan(
        &args(&["--conns", "64,512", "--per-request-conns", "512"]),
        true,
        5,
    )
    .unwrap()
    .0;
    narrow.leave_out(LoadModel::KeepAlive);
    assert_eq!(narrow.conns_of(LoadModel::PerRequest), [512]);
    assert_eq!(
        narrow.conns_of(LoadModel::Open(Offered::Own(50))),
        [64, 512]
    );
    // Every model at every level: nothing per model recorded.
    let (all, _) = make_plan(&args(&["--conns", "64,512"]), true, 5).unwrap();
    assert!(all.load_conns.is_empty());
    assert_eq!(all.cells().len(), all.residents() * 5 * 2);
    // A share of a capacity never measured at its level is refused by name.
    let e = make_plan(&args(&["--conns", "64", "--open-conns", "512"]), true, 5).unwrap_err();
    assert_eq!(e, PlanError::OpenLevelWithoutCapacity(512));
    // A fixed rate needs no capacity.
    let fixed = args(&[
        "--load",
        "open",
        "--open-at",
        "0",
        "--open-slowest",
        "0",
        "--open-rate",
        "9000",
        "--conns",
        "64",
        "--open-conns",
        "512",
    ]);
    assert!(make_plan(&fixed, true, 5).is_ok());
    // wrk drives keep-alive only: the full run's other models go, with a note.
    let (w, notes) = make_plan(&args(&["--driver", "wrk"]), true, 5).unwrap();
    assert_eq!(w.loads, [LoadModel::KeepAlive]);
    assert!(
        notes.iter().any(|n| n.contains("--driver wrk")),
        "{notes:?}"
    );
}

#[test]
fn relaunching_puts_a_launch_before_every_pass_but_the_first_in_the_eta_and_shuffles_each() {
    let once = plan(4);
    let mut every = plan(4);
    every.relaunch = Relaunch::Round;
    assert_eq!(once.relaunches(), Duration::ZERO);
    // 6 residents, 20 passes: 19 launches of 6.
    assert_eq!(every.relaunches(), LAUNCH_COST * (6 * 19));
    assert_eq!(every.eta(), once.eta() + every.relaunches());
    assert!(every.describe().contains("launched afresh"));
    assert!(!once.describe().contains("launched afresh"));
    let orders: std::collections::BTreeSet<Vec<usize>> =
        (0..8).map(|l| every.launch_order(l)).collect();
    assert!(orders.len() > 4, "launch orders repeat: {orders:?}");
    let mut first = every.launch_order(3);
    first.sort();
    assert_eq!(first, (0..6).collect::<Vec<_>>());
    assert_eq!(every.start_order(), every.launch_order(0));
    // Ports: the run's own set, permuted afresh every launch after the first, so that no
    // configuration keeps one port for the run (issue #47).
    let ports: Vec<u16> = (3000..3006).collect();
    assert_eq!(every.launch_ports(0, &ports), ports);
    let drawn: std::collections::BTreeSet<Vec<u16>> =
        (1..9).map(|l| every.launch_ports(l, &ports)).collect();
    assert!(drawn.len() > 4, "port draws repeat: {drawn:?}");
    for l in 1..9 {
        let mut p = every.launch_ports(l, &ports);
        p.sort();
        assert_eq!(p, ports);
    }
    assert_eq!(every.launch_ports(5, &ports), every.launch_ports(5, &ports));
}

#[test]
fn a_duet_plan_drives_every_comparison_per_instance_and_rotates_the_partners() {
    use crate::cli::Cli;
    use clap::Parser;
    let args = |extra: &[&str]| {
        Cli::try_parse_from(["x"].iter().chain(extra).copied())
            .unwrap()
            .run
    };
    let (p, _) = make_plan(
        &args(&[
            "--pairing",
            "duet",
            "--configs",
            "rx,io_uring,io_uring-control",
            "--profiles",
            "no-io-uring,relaxed",
            "--load",
            "keepalive",
            "--conns",
            "64",
            "--instances",
            "2",
            "--no-solo",
        ]),
        true,
        5,
    )
    .unwrap();
    assert_eq!(
        p.relaunch,
        Relaunch::Round,
        "duets launch afresh by default"
    );
    let pairs: Vec<(String, String)> = p
        .duets
        .iter()
        .map(|&(a, b)| (p.servers[a].to_string(), p.servers[b].to_string()))
        .collect();
    // The comparisons the table makes, each once: the A/A control, io_uring against rx,
    // each profile against relaxed.
    let expected = crate::summary::comparison_pairs(&p.servers, &[]);
    assert_eq!(p.duets.len(), expected.len(), "{pairs:?}");
    let (mut first, mut visits) = (0, 0);
    for round in 1..=3 {
        let order = p.round_order(round);
        assert_eq!(order.len(), expected.len() * p.instances as usize);
        for c in &order {
            let partner = c.partner.expect("every cell of a duet plan is a duet");
            assert_ne!(c.server, partner);
            let (a, _) = p.resident(c.server);
            let (b, _) = p.resident(partner);
            // Either server of a comparison may go first.
            assert!(
                expected.contains(&(a.clone(), b.clone()))
                    || expected.contains(&(b.clone(), a.clone())),
                "{a} with {b}"
            );
            if expected.contains(&(a.clone(), b.clone())) {
                first += 1;
            }
            visits += 1;
        }
        // Instance 0 of the comparison's first server meets instance (0 + round) % 2 of its
        // second, whichever goes first.
        let (x, y) = (p.duets[0].0, p.duets[0].1);
        let k = p.instances as usize;
        let c = order
            .iter()
            .find(|c| {
                let pair = [c.server, c.partner.unwrap()];
                pair.contains(&(x * k)) && pair.iter().any(|&s| s / k == y)
            })
            .unwrap();
        let other = if c.server == x * k {
            c.partner.unwrap()
        } else {
            c.server
        };
        assert_eq!(p.resident(other).1, round % 2);
    }
    // The order within duets is drawn, not fixed: about half go each way.
    assert!(
        (visits / 4..=visits * 3 / 4).contains(&first),
        "{first} of {visits} in the table's order"
    );
    // Resident duets would count the processes' luck as their difference: refused.
    let e = make_plan(&args(&["--pairing", "duet", "--relaunch", "once"]), true, 5).unwrap_err();
    assert_eq!(e, PlanError::DuetResident);
    let e = make_plan(&args(&["--pairing", "duet", "--driver", "oha"]), true, 5).unwrap_err();
    assert_eq!(e, PlanError::DuetNeedsRxload("oha", "--pairing duet"));
    // Duets are the default: a driver that cannot drive them is told to alternate.
    let e = make_plan(&args(&["--driver", "wrk"]), true, 5).unwrap_err();
    assert_eq!(
        e,
        PlanError::DuetNeedsRxload("wrk", "a full run's default pairing")
    );
    assert!(e.to_string().contains("add --pairing alternate"), "{e}");
    let (alt, _) = make_plan(
        &args(&["--driver", "wrk", "--pairing", "alternate"]),
        true,
        5,
    )
    .unwrap();
    assert_eq!(alt.pairing, Pairing::Alternate);
}

#[test]
fn the_default_plan_is_duets_and_its_description_counts_them() {
    use crate::cli::Cli;
    use clap::Parser;
    let run = Cli::try_parse_from(["x"]).unwrap().run;
    let (p, _) = make_plan(&run, false, 5).unwrap();
    assert_eq!(
        (p.pairing, p.relaunch, p.instances, p.rounds),
        (Pairing::Duet, Relaunch::Round, 1, 6)
    );
    // Every comparison the table makes, under every (load model, level, route) block.
    // And the seed table's six servers alone at the three keep-alive levels.
    let comparisons = crate::summary::comparison_pairs(&p.servers, &[]).len();
    let solo = 6 * 3;
    assert_eq!(p.solo_cells(), solo);
    let blocks = (p.cells().len() - solo) / comparisons;
    let first = p.describe().lines().next().unwrap().to_string();
    let want = format!(
        "= {} cells; {comparisons} comparisons as duets = {} duets + {solo} servers alone a round; 6 rounds = {} duets + {} alone ({} slices)",
        blocks * p.servers.len(),
        blocks * comparisons,
        6 * blocks * comparisons,
        6 * solo,
        12 * blocks * comparisons + 6 * solo
    );
    assert!(first.ends_with(&want), "{first}\nwant …{want}");
}

/// A plan of duets drives the seed table's servers alone too: legacy, rx and io_uring under
/// `relaxed` and `no-io-uring`, once a round in every keep-alive block of the first route and
/// nowhere else; `--no-solo` leaves them out, and an engine whose default blocks io_uring adds
/// its `default` row.
#[test]
fn a_plan_of_duets_drives_the_seed_servers_alone_in_its_keep_alive_blocks() {
    use clap::Parser;
    let plan_of = |extra: &[&str]| {
        let mut argv = vec![
            "bench-runner",
            "--configs",
            "legacy,rx,oneshot,io_uring,io_uring-control",
            "--load",
            "keepalive,per-request",
            "--conns",
            "64,256",
            "--per-request-conns",
            "64",
            "--routes",
            "GET:/,POST:/user",
        ];
        argv.extend_from_slice(extra);
        let args = crate::cli::Cli::try_parse_from(argv).unwrap().run;
        make_plan(&args, false, 11).unwrap().0
    };
    let p = plan_of(&[]);
    assert_eq!(p.pairing, Pairing::Duet);
    let alone: Vec<String> = p.solo_keys().iter().map(ToString::to_string).collect();
    assert_eq!(
        alone,
        [
            "relaxed/legacy",
            "relaxed/rx",
            "relaxed/io_uring",
            "no-io-uring/legacy",
            "no-io-uring/rx",
            "no-io-uring/io_uring"
        ]
    );
    for round in 1..=3 {
        let order = p.round_order(round);
        let solo: Vec<&Cell> = order.iter().filter(|c| c.partner.is_none()).collect();
        // Six servers x two keep-alive levels, on the first route only.
        assert_eq!(solo.len(), 6 * 2, "round {round}");
        assert!(solo
            .iter()
            .all(|c| c.load == LoadModel::KeepAlive && c.route == 0));
        let mut servers: Vec<usize> = solo.iter().map(|c| c.server).collect();
        servers.sort_unstable();
        servers.dedup();
        assert_eq!(servers.len(), 6);
        // Interleaved with the duets of their block, not run as a block of their own.
        let block = |c: &Cell| (c.load, c.conns, c.route);
        let first = order.iter().position(|c| c.partner.is_none()).unwrap();
        let same_block = order
            .iter()
            .filter(|c| block(c) == block(&order[first]))
            .count();
        assert!(same_block > 6, "{same_block}");
    }
    assert_eq!(p.solo_cells(), 12);
    assert_eq!(p.slices(), p.cells().len() * p.rounds as usize);
    assert!(
        p.describe().contains("the seed PR's table"),
        "{}",
        p.describe()
    );

    assert!(plan_of(&["--no-solo"]).solo.is_empty());
    assert!(plan_of(&["--pairing", "alternate"]).solo.is_empty());
    let mut with_default = plan_of(&[]);
    with_default.solo_with_default();
    assert_eq!(with_default.solo.len(), 9);
    assert_eq!(with_default.solo_keys()[0].to_string(), "default/legacy");
}

//! The command line as a user types it: defaults, typed values, refusals by name.

use super::*;
use crate::model::{Launch, Relaunch};

fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.run)
}

#[test]
fn defaults_quick_and_explicit_values() {
    let a = parse(&[]).unwrap();
    let m = &a.measure;
    // A full run: duets, one instance launched afresh every round, six planned rounds.
    assert_eq!(
        (m.pairing(), m.relaunch(), m.instances(), m.rounds()),
        (Pairing::Duet, Relaunch::Round, 1, DEFAULT_DUET_ROUNDS)
    );
    assert_eq!(
        (m.slice(), m.slice_warmup()),
        (DEFAULT_SLICE, DEFAULT_SLICE_WARMUP)
    );
    // Alternating: two resident instances, the same 12 slices a cell however many there are.
    let alt = parse(&["--pairing", "alternate"]).unwrap().measure;
    assert_eq!(
        (alt.relaunch(), alt.instances(), alt.rounds()),
        (Relaunch::Once, 2, 6)
    );
    let one = parse(&["--pairing", "alternate", "--instances", "1"])
        .unwrap()
        .measure;
    assert_eq!(
        (one.instances(), one.rounds()),
        (1, 12),
        "the same 12 slices a cell"
    );
    // Resident servers alternate: a duet of two resident processes is refused.
    let resident = parse(&["--relaunch", "once"]).unwrap().measure;
    assert_eq!(
        (resident.pairing(), resident.instances()),
        (Pairing::Alternate, 2)
    );
    let three = parse(&["--instances", "3", "--quick"]).unwrap().measure;
    assert_eq!(
        three.pairing(),
        Pairing::Alternate,
        "a smoke run alternates"
    );
    assert_eq!(
        three.rounds(),
        3,
        "never under the fewest rounds an instance needs"
    );
    assert!(parse(&["--instances", "0"]).is_err());
    // A full run aims at ±2 % within 30 minutes (40 alternating); a quick run or fixed
    // rounds do not.
    let t = m.target().unwrap();
    assert_eq!((t.half_width, t.budget_s), (0.02, 1800.0));
    assert_eq!(alt.target().unwrap().budget_s, 2400.0);
    assert_eq!(parse(&["--quick"]).unwrap().measure.target(), None);
    assert_eq!(parse(&["--rounds", "8"]).unwrap().measure.target(), None);
    let both = parse(&[
        "--rounds",
        "8",
        "--target-resolution",
        "1.5%",
        "--max-duration",
        "10m",
    ])
    .unwrap()
    .measure
    .target()
    .unwrap();
    assert_eq!((both.half_width, both.budget_s), (0.015, 600.0));
    for bad in ["0", "-1", "80", "two"] {
        assert!(parse(&["--target-resolution", bad]).is_err(), "{bad}");
    }
    assert_eq!(a.profiles, Profile::ALL);
    assert_eq!(a.configs, ServerConfig::ALL);
    assert_eq!(m.routes, [Route::get_root()]);
    let q = parse(&["--quick"]).unwrap().measure;
    assert_eq!((q.rounds(), q.slice()), (3, QUICK_SLICE));
    let q1 = parse(&["--quick", "--instances", "1"]).unwrap().measure;
    assert_eq!(q1.rounds(), QUICK_SLICES);
    let q = parse(&["--quick", "--rounds", "9", "--slice", "2s"])
        .unwrap()
        .measure;
    assert_eq!((q.rounds(), q.slice()), (9, Duration::from_secs(2)));
    let r = parse(&["--routes", "get:/,POST:/user"]).unwrap().measure;
    let spelled: Vec<String> = r.routes.iter().map(ToString::to_string).collect();
    assert_eq!(spelled, ["GET:/", "POST:/user"]);
    let c = parse(&[
        "--configs",
        "io_uring,io_uring-control",
        "--profiles",
        "no-io-uring",
    ])
    .unwrap();
    assert_eq!(
        c.configs,
        [ServerConfig::IoUring, ServerConfig::IoUringControl]
    );
    assert_eq!(c.profiles, [Profile::NoIoUring]);
}

#[test]
fn peers_shares_the_measuring_options_with_a_run() {
    let cli = Cli::try_parse_from([
        "x",
        "peers",
        "--only",
        "nginx",
        "--rounds",
        "7",
        "--routes",
        "GET:/user/0",
        "--quick",
    ])
    .unwrap();
    let Some(Cmd::Peers(p)) = cli.command else {
        panic!("not peers");
    };
    assert_eq!(p.only, [Peer::Nginx]);
    assert_eq!((p.measure.rounds(), p.measure.slice()), (7, QUICK_SLICE));
    assert_eq!(p.measure.routes[0].path, "/user/0");
    assert_eq!(p.port, 3100);
}

#[test]
fn foreign_servers_parse_with_their_environment() {
    let a = parse(&[
        "--server",
        "nginx=cmd:nginx -c /x.conf -g 'daemon off;',WORKERS=1,RUST_LOG=off",
        "--server",
        "web=image:example/web:1.2",
        "--server",
        "tricky=cmd:echo a,b,not-env=1",
    ])
    .unwrap();
    assert_eq!(a.servers.len(), 3);
    assert_eq!(a.servers[0].name, "nginx");
    assert_eq!(
        a.servers[0].launch,
        Launch::Cmd("nginx -c /x.conf -g 'daemon off;'".into())
    );
    assert_eq!(
        a.servers[0].env,
        [
            ("WORKERS".into(), "1".into()),
            ("RUST_LOG".into(), "off".into())
        ]
    );
    assert_eq!(a.servers[1].launch, Launch::Image("example/web:1.2".into()));
    assert!(a.servers[1].env.is_empty());
    assert_eq!(
        a.servers[2].launch,
        Launch::Cmd("echo a,b,not-env=1".into())
    );
}

#[test]
fn bad_values_are_refused_by_name() {
    for (args, needle) in [
        (vec!["--profiles", "strict"], "strict"),
        (vec!["--configs", "kqueue"], "kqueue"),
        (vec!["--rounds", "0"], "0"),
        (vec!["--network", "overlay"], "overlay"),
        (vec!["--slice", "10ms"], "shorter than 100 ms"),
        (vec!["--conns", "0"], "0"),
        (vec!["--routes", "nonsense"], "nonsense"),
        (vec!["--server", "nginx"], "expected NAME=cmd:COMMAND"),
        (vec!["--server", "Nginx=cmd:nginx"], "a server name is"),
        (
            vec!["--server", "rx=cmd:x"],
            "one of this project's configurations",
        ),
        (vec!["--server", "n=nginx -g x"], "say how to start n"),
        (vec!["--server", "n=cmd:"], "empty"),
    ] {
        let e = parse(&args).unwrap_err().to_string();
        assert!(e.contains(needle), "{args:?}: {e}");
    }
}

#[test]
fn load_open_expands_into_its_rates_and_needs_keep_alive() {
    use crate::model::{LoadModel, Offered};
    let a = parse(&["--load", "keepalive,open", "--open-at", "90,50"]).unwrap();
    assert_eq!(
        a.measure.load_models(),
        vec![
            LoadModel::KeepAlive,
            LoadModel::Open(Offered::Own(50)),
            LoadModel::Open(Offered::Own(90)),
            LoadModel::Open(Offered::Slowest(50)),
        ]
    );
    let none = parse(&["--load", "keepalive,open", "--open-slowest", "0"]).unwrap();
    assert!(!none
        .measure
        .load_models()
        .contains(&LoadModel::Open(Offered::Slowest(50))));
    // A fixed rate alone needs no keep-alive.
    let fixed = parse(&[
        "--load",
        "open",
        "--open-at",
        "0",
        "--open-slowest",
        "0",
        "--open-rate",
        "20000",
    ])
    .unwrap();
    assert_eq!(
        fixed.measure.load_models(),
        vec![LoadModel::Open(Offered::Fixed(20_000))]
    );
    assert!(crate::plan::make_plan(&fixed, true, 1).is_ok());
    // A rate above capacity is not a share of it.
    assert!(parse(&["--load", "open", "--open-at", "150"]).is_err());
    let alone = parse(&["--load", "open"]).unwrap();
    let e = crate::plan::make_plan(&alone, true, 1).err().unwrap();
    assert_eq!(e, crate::plan::PlanError::OpenNeedsKeepAlive);
    assert!(e.to_string().contains("--load keepalive,open"), "{e}");
}

#[test]
fn load_models_read_back_as_they_are_written() {
    use crate::model::{LoadModel, Offered};
    for m in [
        LoadModel::KeepAlive,
        LoadModel::PerRequest,
        LoadModel::Open(Offered::Own(90)),
        LoadModel::Open(Offered::Slowest(50)),
        LoadModel::Open(Offered::Fixed(20_000)),
    ] {
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            serde_json::from_str::<LoadModel>(&json).unwrap(),
            m,
            "{json}"
        );
        assert_eq!(m.name().parse::<LoadModel>().unwrap(), m);
    }
    // The spellings of runs recorded before the open models.
    assert_eq!(
        serde_json::to_string(&LoadModel::KeepAlive).unwrap(),
        "\"keepalive\""
    );
    assert_eq!(
        serde_json::to_string(&LoadModel::PerRequest).unwrap(),
        "\"per-request\""
    );
    assert_eq!(
        LoadModel::Open(Offered::Fixed(20_000)).name(),
        "open-20000-rps"
    );
    for bad in [
        "open",
        "open-0",
        "open-101",
        "open-slowest-",
        "open-0-rps",
        "closed",
    ] {
        let e = bad.parse::<LoadModel>().unwrap_err();
        assert!(e.to_string().contains(bad), "{e}");
    }
}

#[test]
fn a_full_run_measures_three_load_models_the_others_at_one_level() {
    use crate::model::{LoadModel, Offered};
    let m = parse(&[]).unwrap().measure;
    assert_eq!(m.load_choices(), LoadChoice::ALL);
    assert_eq!(m.conns_of(LoadModel::KeepAlive), DEFAULT_CONNS);
    assert_eq!(m.conns_of(LoadModel::PerRequest), [DEFAULT_OTHER_CONNS]);
    assert_eq!(
        m.conns_of(LoadModel::Open(Offered::Own(90))),
        [DEFAULT_OTHER_CONNS]
    );
    // --conns given: every model at those levels, unless its own option says otherwise.
    let c = parse(&["--conns", "512,128", "--open-conns", "512"])
        .unwrap()
        .measure;
    assert_eq!(c.conns_of(LoadModel::PerRequest), [128, 512]);
    assert_eq!(c.conns_of(LoadModel::KeepAlive), [128, 512]);
    assert_eq!(c.conns_of(LoadModel::Open(Offered::Slowest(50))), [512]);
    let p = parse(&["--per-request-conns", "256,64,256"])
        .unwrap()
        .measure;
    assert_eq!(p.conns_of(LoadModel::PerRequest), [64, 256]);
    assert!(parse(&["--open-conns", "0"]).is_err());
    // calibrate studies keep-alive unless told otherwise.
    let cli = Cli::try_parse_from(["x", "calibrate"]).unwrap();
    let Some(Cmd::Calibrate(cal)) = cli.command else {
        panic!("not calibrate");
    };
    let run = crate::calibrate::run_args(&cal);
    assert_eq!(run.measure.load_models(), [LoadModel::KeepAlive]);
}

#[test]
fn relaunch_follows_the_pairing_unless_asked_and_names_its_choices() {
    // Duets (the default) are launched afresh every round; alternating servers stay resident
    // (the method study found no width to gain by relaunching them on a noisy host).
    assert_eq!(parse(&[]).unwrap().measure.relaunch(), Relaunch::Round);
    assert_eq!(
        parse(&["--pairing", "alternate"])
            .unwrap()
            .measure
            .relaunch(),
        Relaunch::Once
    );
    assert_eq!(
        parse(&["--pairing", "alternate", "--relaunch", "round"])
            .unwrap()
            .measure
            .relaunch(),
        Relaunch::Round
    );
    let e = parse(&["--relaunch", "slice"]).unwrap_err().to_string();
    assert!(e.contains("once") && e.contains("round"), "{e}");
}

//! rxload against a server that counts what it receives, on each engine.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::{Mode, TestServer};
use driver::target::{parse_routes, Url};
use driver::{report, ConnMode, Options};
use reactor::BackendChoice;

/// Each engine: (backend, multishot receives, the report's `engine`).
const ENGINES: [(Engine, &str); 3] = [
    ((BackendChoice::IoUring, true), "io_uring"),
    ((BackendChoice::IoUring, false), "io_uring"),
    ((BackendChoice::Epoll, false), "epoll/rx"),
];

type Engine = (BackendChoice, bool);

fn options(url: &str, (backend, recv_multishot): Engine) -> Options {
    let url = Url::parse(url).unwrap();
    Options {
        recv_multishot,
        batch_wait: Duration::from_micros(100),
        routes: parse_routes(&format!("GET:{}", url.path)).unwrap(),
        url,
        threads: 2,
        connections: 4,
        duration: Duration::from_secs(10),
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(2),
        headers: vec![],
        body: vec![],
        backend,
        max_requests: None,
        connection: ConnMode::KeepAlive,
        rate: None,
        deadline: None,
    }
}

fn run(opts: &Options) -> report::Report {
    driver::run(opts, Arc::new(AtomicBool::new(false)), |_| {}).unwrap()
}

#[test]
fn a_counted_run_sends_exactly_that_many_requests() {
    for mode in [Mode::Length, Mode::Chunked] {
        for (backend, engine) in ENGINES {
            let server = TestServer::start(mode);
            let mut o = options(&server.url("/"), backend);
            o.max_requests = Some(1001);
            let r = run(&o);
            assert_eq!(r.engine, engine);
            assert_eq!(
                r.io_uring.as_deref().unwrap().contains(",recv_multishot)"),
                backend.1,
                "{engine}: {:?}",
                r.io_uring
            );
            assert_eq!(r.requests, 1001, "{engine}");
            assert_eq!(
                server.requests(),
                1001,
                "{engine}: the server saw a different number"
            );
            assert_eq!(r.errors, report::Errors::default());
            assert_eq!(
                r.bytes_read,
                1001 * if mode == Mode::Length { 40 } else { 64 },
                "{engine}"
            );
        }
    }
}

#[test]
fn the_route_mix_is_round_robin_per_connection() {
    for (backend, _) in ENGINES {
        for (connections, slack) in [(1, 0), (3, 1)] {
            let server = TestServer::start(Mode::Length);
            let mut o = options(&server.url("/"), backend);
            o.routes = parse_routes("GET:/,GET:/user/0,POST:/user").unwrap();
            o.connections = connections;
            o.threads = 1;
            o.max_requests = Some(300);
            let r = run(&o);
            assert_eq!(r.requests, 300);
            let counts = server.counts.lock().unwrap();
            for route in ["GET:/", "GET:/user/0", "POST:/user"] {
                // Exact with one connection; with several, each stops wherever the total is
                // reached, so a route may be one request off per connection.
                let n = counts.by_route.get(route).copied().unwrap_or(0);
                assert!(n.abs_diff(100) <= slack, "{route}: {:?}", counts.by_route);
            }
        }
    }
}

#[test]
fn connection_close_reconnects_and_still_counts_every_response() {
    for (backend, engine) in ENGINES {
        let server = TestServer::start(Mode::Close);
        let mut o = options(&server.url("/"), backend);
        o.max_requests = Some(200);
        let r = run(&o);
        assert_eq!(r.requests, 200, "{engine}");
        assert_eq!(server.requests(), 200, "{engine}");
        assert!(r.reconnects.unwrap() >= 196, "{engine}: {:?}", r.reconnects);
        // The run's connections plus the pre-flight check.
        assert!(server.counts.lock().unwrap().connections >= 200);
        assert_eq!(r.errors, report::Errors::default());
    }
}

#[test]
fn a_connection_per_request_closes_after_every_response_and_says_who_closed() {
    // Length: a server that ignores `Connection: close` (the client closes); Close: one that
    // honours it.
    for (mode, by_server) in [(Mode::Length, false), (Mode::Close, true)] {
        for (backend, engine) in ENGINES {
            let server = TestServer::start(mode);
            let mut o = options(&server.url("/"), backend);
            o.connection = ConnMode::PerRequest;
            o.max_requests = Some(200);
            let r = run(&o);
            assert_eq!(r.requests, 200, "{engine}");
            assert_eq!(r.errors, report::Errors::default(), "{engine}");
            assert_eq!(
                r.reconnects,
                Some(0),
                "{engine}: planned closes are no reconnects"
            );
            let closes = r.closes.expect("per-request mode reports its closes");
            let (server_closed, client_closed) = if by_server { (200, 0) } else { (0, 200) };
            assert_eq!(
                (closes.server, closes.client),
                (server_closed, client_closed),
                "{engine}"
            );
            // Each connection carries one request; one a slot opened while the last requests
            // were still out may carry none.
            assert!(
                (200..=200 + o.connections as u64).contains(&closes.opened),
                "{engine}: {closes:?}"
            );
            let counts = server.counts.lock().unwrap();
            assert_eq!(counts.most_on_a_connection, 1, "{engine}");
            assert_eq!(counts.asked_close, 200, "{engine}");
            assert_eq!(counts.requests, 200, "{engine}");
        }
    }
}

#[test]
fn keep_alive_reports_no_closes_and_reuses_its_connections() {
    let server = TestServer::start(Mode::Length);
    let mut o = options(&server.url("/"), ENGINES[0].0);
    o.max_requests = Some(200);
    let r = run(&o);
    assert_eq!(r.closes, None);
    let counts = server.counts.lock().unwrap();
    assert_eq!(counts.asked_close, 0);
    assert!(counts.most_on_a_connection >= 200 / 4, "{counts:?}");
}

#[test]
fn unanswered_requests_count_as_timeouts_and_non_2xx_as_status_errors() {
    for (backend, engine) in ENGINES {
        let server = TestServer::start(Mode::Length);
        let mut o = options(&server.url("/slow"), backend);
        o.duration = Duration::from_millis(1300);
        o.timeout = Duration::from_millis(200);
        o.connections = 2;
        let r = run(&o);
        assert_eq!(r.requests, 0);
        // Each connection times out about every 200 ms (checked every 100 ms).
        assert!(
            (6..=14).contains(&r.errors.timeout),
            "{engine}: {:?}",
            r.errors
        );

        let mut o = options(&server.url("/missing"), backend);
        o.max_requests = Some(50);
        let r = run(&o);
        assert_eq!((r.requests, r.errors.status), (50, 50), "{engine}");
    }
}

#[test]
fn a_timed_run_reports_rates_latency_and_its_own_cost() {
    for (backend, engine) in ENGINES {
        let server = TestServer::start(Mode::Length);
        let mut o = options(&server.url("/"), backend);
        o.duration = Duration::from_millis(800);
        o.warmup = Duration::from_millis(200);
        let r = run(&o);
        assert!(r.requests > 100, "{engine}: {r:?}");
        // The server also saw the warm-up and pre-flight; the report only the measured part.
        assert!(server.requests() >= r.requests);
        assert!((r.elapsed_s - 0.8).abs() < 0.1, "{}", r.elapsed_s);
        assert!((r.requests_per_s - r.requests as f64 / r.elapsed_s).abs() < 1e-6);
        let l = r.latency;
        assert!(
            l.p50_us > 0.0 && l.p50_us <= l.p90_us && l.p90_us <= l.p99_us && l.p99_us <= l.max_us
        );
        assert!(r.req_per_thread.mean > 0.0);
        assert!(r.driver_cpu_s.unwrap() > 0.0);
        let sys = r.driver_syscalls.clone().unwrap();
        let key = if engine == "io_uring" {
            "io_uring_enter"
        } else {
            "epoll_wait"
        };
        assert!(sys.get(key).copied().unwrap_or(0) > 0, "{sys:?}");

        // The wrk text of this report reads back into the same figures.
        let back = report::parse_wrk_text(&r.to_wrk_text(true)).unwrap();
        assert_eq!(
            (back.requests, back.threads, back.connections),
            (r.requests, 2, 4)
        );
        assert!((back.requests_per_s - r.requests_per_s).abs() < 0.01);
        let close = |a: f64, b: f64| (a - b).abs() <= b * 0.01 + 0.01;
        assert!(
            close(back.latency.p99_us, r.latency.p99_us),
            "{} vs {}",
            back.latency.p99_us,
            r.latency.p99_us
        );
        assert!(close(back.latency.mean_us, r.latency.mean_us));
    }
}

#[cfg(feature = "goose")]
#[test]
fn goose_runs_the_route_mix_as_a_scenario_in_the_same_schema() {
    let server = TestServer::start(Mode::Length);
    let mut o = options(&server.url("/"), (BackendChoice::Auto, true));
    o.routes = parse_routes("GET:/,GET:/user/0,POST:/user").unwrap();
    o.connections = 3;
    o.threads = 1;
    o.duration = Duration::from_secs(2);
    let r = driver::run_goose(&o).unwrap();
    assert_eq!(r.engine, "goose");
    assert!(r.requests > 30, "{r:?}");
    assert_eq!(r.errors, report::Errors::default());
    assert!(r.latency.p50_us > 0.0 && r.latency.p99_us >= r.latency.p50_us);
    // Every user runs the three transactions in order: the server sees an even mix (goose
    // stops users mid-sequence at the end, and its reset drops the ramp-up's requests).
    let counts = server.counts.lock().unwrap();
    let seen: Vec<u64> = ["GET:/", "GET:/user/0", "POST:/user"]
        .iter()
        .map(|k| counts.by_route.get(*k).copied().unwrap_or(0))
        .collect();
    let (lo, hi) = (*seen.iter().min().unwrap(), *seen.iter().max().unwrap());
    assert!(lo > 0 && hi - lo <= 3 + hi / 50, "{seen:?}");
    // The report counts no more than the server answered.
    assert!(
        r.requests <= counts.requests,
        "{} > {}",
        r.requests,
        counts.requests
    );
    drop(counts);

    let mut o = options(&server.url("/missing"), (BackendChoice::Auto, true));
    o.duration = Duration::from_secs(1);
    let r = driver::run_goose(&o).unwrap();
    assert!(
        r.requests > 0 && r.errors.status == r.requests,
        "{:?}",
        r.errors
    );
}

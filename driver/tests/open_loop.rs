//! rxload's open loop (`--rate`): requests on a schedule, latency from their due time, a stall
//! of the server shows in the corrected latency and not in the uncorrected one, and a
//! deadline sheds what is too late.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Mode, TestServer};
use driver::load::OpenLoop;
use driver::target::{parse_routes, Url};
use driver::{report, Options};
use reactor::BackendChoice;

fn options(server: &TestServer, backend: BackendChoice, rate: f64) -> Options {
    let url = Url::parse(&server.url("/")).unwrap();
    Options {
        routes: parse_routes("GET:/").unwrap(),
        threads: 1,
        connections: 8,
        duration: Duration::from_millis(1500),
        backend,
        rate: Some(rate),
        ..Options::new(url)
    }
}

/// Schedules are about time: one run at a time, so the tests do not take each other's CPU.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(opts: &Options) -> report::Report {
    driver::run(opts, Arc::new(AtomicBool::new(false)), |_| {}).unwrap()
}

#[test]
fn due_times_are_evenly_spread_over_connections_and_threads() {
    let origin = Instant::now();
    let interval = Duration::from_millis(8);
    let thread = |t: usize| OpenLoop {
        origin,
        interval,
        phase: t as f64 / 2.0,
        deadline: None,
    };
    // Two threads of four connections: eight first requests 1 ms apart, then every 8 ms.
    let mut firsts: Vec<Duration> = (0..2)
        .flat_map(|t| (0..4).map(move |slot| thread(t).due(slot, 4, 0) - origin))
        .collect();
    firsts.sort();
    let expected: Vec<Duration> = (0..8).map(Duration::from_millis).collect();
    assert_eq!(firsts, expected);
    assert_eq!(thread(1).due(2, 4, 3) - thread(1).due(2, 4, 2), interval);
}

#[test]
fn the_achieved_rate_is_the_target_when_the_server_keeps_up() {
    let _one = one_at_a_time();
    for backend in [BackendChoice::IoUring, BackendChoice::Epoll] {
        let server = TestServer::start(Mode::Length);
        let r = run(&options(&server, backend, 2000.0));
        let open = r.open_loop.expect("open-loop report");
        assert_eq!(open.target_rps, 2000.0);
        assert!(
            (1900.0..=2100.0).contains(&r.requests_per_s),
            "{backend:?}: {} req/s",
            r.requests_per_s
        );
        // How late the loop itself was (whether that marks the run behind depends on what
        // else the machine runs; the rate above does not).
        assert!(open.send_lag_p99_us >= 1.0, "{backend:?}: {open:?}");
        assert_eq!(
            open.behind,
            open.send_lag_p99_us > report::OpenLoop::BEHIND_US
        );
        assert_eq!(r.errors, report::Errors::default());
    }
}

/// `opts` run while the server stalls for 200 ms from 600 ms in.
fn run_with_a_stall(server: &Arc<TestServer>, opts: &Options) -> report::Report {
    let stall = {
        let server = server.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(600));
            server.stall(Duration::from_millis(200));
        })
    };
    let r = run(opts);
    stall.join().unwrap();
    r
}

#[test]
fn a_stalled_server_shows_in_the_corrected_latency_not_in_the_uncorrected() {
    let _one = one_at_a_time();
    let server = Arc::new(TestServer::start(Mode::Length));
    let opts = options(&server, BackendChoice::IoUring, 2000.0);
    let r = run_with_a_stall(&server, &opts);
    let open = r.open_loop.unwrap();
    // 200 ms of a 1.5 s run: ~13 % of the requests were due while nothing was answered, so
    // the corrected P99 is near the stall and its P90 well above the unloaded latency...
    assert!(r.latency.p99_us >= 150_000.0, "corrected {:?}", r.latency);
    assert!(r.latency.p90_us >= 20_000.0, "corrected {:?}", r.latency);
    // ...while the uncorrected one sees only the 8 requests on the wire during the stall.
    assert!(
        open.uncorrected.p99_us < 50_000.0,
        "uncorrected {:?}",
        open.uncorrected
    );
    // The catch-up is sent, not skipped: the schedule's requests all went out.
    assert!(r.requests >= 2800, "{} requests", r.requests);
}

#[test]
fn a_deadline_sheds_what_is_too_late_and_counts_it_as_an_error_not_a_latency() {
    let _one = one_at_a_time();
    let server = Arc::new(TestServer::start(Mode::Length));
    let mut opts = options(&server, BackendChoice::IoUring, 2000.0);
    opts.deadline = Some(Duration::from_millis(50));
    let r = run_with_a_stall(&server, &opts);
    // About 150 ms of the stall's requests were past 50 ms when their connection came free.
    assert!((150..=450).contains(&r.errors.deadline), "{:?}", r.errors);
    // Nothing recorded waited much longer than the stall's tail plus the deadline.
    assert!(r.latency.max_us < 260_000.0, "{:?}", r.latency);
    let text = r.to_wrk_text(false);
    assert!(text.contains("Shed past the deadline: "), "{text}");
}

#[test]
fn bad_open_loop_options_are_refused_with_their_reason() {
    let server = TestServer::start(Mode::Length);
    let mut o = options(&server, BackendChoice::Epoll, 0.0);
    let e = driver::run(&o, Arc::new(AtomicBool::new(false)), |_| {}).unwrap_err();
    assert!(e.to_string().contains("--rate must be a positive"), "{e}");
    o.rate = None;
    o.deadline = Some(Duration::from_millis(10));
    let e = driver::run(&o, Arc::new(AtomicBool::new(false)), |_| {}).unwrap_err();
    assert!(e.to_string().contains("--deadline needs --rate"), "{e}");
}

#[test]
fn a_connection_per_request_keeps_the_schedule_and_opens_each_when_it_is_due() {
    let _one = one_at_a_time();
    for (backend, mode) in [
        (BackendChoice::IoUring, Mode::Close),
        (BackendChoice::Epoll, Mode::Length),
    ] {
        let server = TestServer::start(mode);
        let mut opts = options(&server, backend, 1000.0);
        opts.connection = driver::ConnMode::PerRequest;
        let r = run(&opts);
        let open = r.open_loop.expect("open-loop report");
        assert!(
            (950.0..=1050.0).contains(&r.requests_per_s),
            "{backend:?}: {} req/s",
            r.requests_per_s
        );
        assert_eq!(r.errors, report::Errors::default(), "{backend:?}");
        // Every request on its own connection, opened when it was due rather than kept
        // waiting: the window's connections are its requests (plus those in flight at its
        // edges), not the 8 slots.
        let closes = r.closes.expect("who closed");
        assert!(
            closes.opened + 8 >= r.requests && closes.opened <= r.requests + 8,
            "{backend:?}: {closes:?} for {} requests",
            r.requests
        );
        let (server_closed, client_closed) = match mode {
            Mode::Close => (closes.server, closes.client),
            _ => (closes.client, closes.server),
        };
        assert!(
            server_closed >= r.requests - 8 && client_closed == 0,
            "{mode:?}: {closes:?}"
        );
        // The latency from the due time includes the connect; idle, it is the connect and
        // one exchange on loopback, far under a millisecond more than the uncorrected one.
        assert!(r.latency.p50_us >= open.uncorrected.p50_us, "{r:?}");
    }
}

#[test]
fn a_stall_shows_in_the_corrected_latency_with_a_connection_per_request_too() {
    let _one = one_at_a_time();
    let server = Arc::new(TestServer::start(Mode::Close));
    let mut opts = options(&server, BackendChoice::Epoll, 2000.0);
    opts.connection = driver::ConnMode::PerRequest;
    let r = run_with_a_stall(&server, &opts);
    let open = r.open_loop.unwrap();
    assert!(r.latency.p99_us >= 150_000.0, "corrected {:?}", r.latency);
    assert!(
        open.uncorrected.p99_us < 50_000.0,
        "uncorrected {:?}",
        open.uncorrected
    );
    assert!(r.requests >= 2800, "{} requests", r.requests);
}

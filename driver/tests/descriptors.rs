//! A run gives back every descriptor it opened — its sockets, its rings and event fds — so a
//! process that drives thousands of runs (the bench-runner drives rxload in-process, one run
//! a slice) never reaches its descriptor limit.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::{Mode, TestServer};
use driver::target::{parse_routes, Url};
use driver::{ConnMode, Options};
use reactor::BackendChoice;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn runs_give_back_every_descriptor() {
    let server = TestServer::start(Mode::Length);
    let url = Url::parse(&server.url("/")).unwrap();
    for backend in [BackendChoice::IoUring, BackendChoice::Epoll] {
        for (connection, rate) in [
            (ConnMode::KeepAlive, None),
            (ConnMode::PerRequest, None),
            (ConnMode::KeepAlive, Some(2000.0)),
            (ConnMode::PerRequest, Some(2000.0)),
        ] {
            let opts = Options {
                routes: parse_routes("GET:/").unwrap(),
                threads: 1,
                connections: 16,
                duration: Duration::from_millis(150),
                backend,
                connection,
                rate,
                ..Options::new(url.clone())
            };
            let run = || driver::run(&opts, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
            run(); // the first run may open what the process keeps (the test server's threads)
            let before = open_fds();
            for _ in 0..5 {
                run();
            }
            // The test server lives in this process too: its side of each connection closes
            // when its thread sees the EOF, a moment after the run.
            let settled = std::time::Instant::now() + Duration::from_secs(3);
            while open_fds() > before && std::time::Instant::now() < settled {
                std::thread::sleep(Duration::from_millis(20));
            }
            let after = open_fds();
            assert!(
                after <= before,
                "{backend:?} {connection:?} rate {rate:?}: {before} descriptors before five runs, {after} after"
            );
        }
    }
}

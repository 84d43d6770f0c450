//! The load generator as these tests drive it (the driver crate as a library, aimed at a
//! server of theirs on loopback), and what they read off the server's process.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// rxload's defaults, aimed at `GET /` of our server on loopback `port`.
pub fn options(port: u16) -> driver::Options {
    driver::Options::new(driver::target::Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap())
}

/// One run of rxload, to its end.
pub fn run(opts: &driver::Options) -> driver::report::Report {
    driver::run(opts, Arc::new(AtomicBool::new(false)), |_| {}).unwrap()
}

/// The load saw no error of any kind (`what` names the case in the failure).
pub fn assert_no_errors(report: &driver::report::Report, what: &str) {
    let e = report.errors;
    assert_eq!(
        (e.connect, e.read, e.write, e.timeout, e.status),
        (0, 0, 0, 0, 0),
        "{what}: the load saw errors: {e:?}"
    );
}

pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Waits (up to 5 s: a closed connection lingers for the client's FIN) until the process holds
/// at most `want` descriptors; what it holds then.
pub fn settle_fds(pid: u32, want: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = open_fds(pid);
        if n <= want || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

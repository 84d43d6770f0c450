//! The machine's own Docker daemon restarted mid-run — stopped with SIGTERM (without
//! live-restore it stops every container first) and started again with the same command line:
//! the run ends with a message naming the cause, raw.json keeps every slice measured before
//! (whole, marked incomplete, re-renderable), and once the daemon is back `bench-runner clean`
//! removes the containers it stopped. engine_lost.rs covers the same path through a proxy it
//! cuts; this is the real thing, so it restarts a daemon other programs may be using: it runs
//! only with `RXBENCH_RESTART_DOCKERD=1` (set by .ci/run, whose machine is the suite's alone,
//! this test binary running with no other test beside it).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_run_lost_its_engine, rxbench_containers, wait_for_slices};

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");

fn skip(why: &str) {
    let line = format!("SKIPPED daemon_restart: {why}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// The local daemon's pid and command line, where there is one to restart.
fn dockerd() -> Option<(i32, Vec<String>)> {
    let out = Command::new("pidof").arg("dockerd").output().ok()?;
    let pid: i32 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Some((pid, argv))
}

fn answers() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whatever the test's outcome, the daemon is started again if it is not running.
struct Revive(Vec<String>);

impl Revive {
    // The daemon outlives this test, in its own process group: never waited for.
    #[allow(clippy::zombie_processes)]
    fn start(&self) {
        if answers() || dockerd().is_some() {
            return;
        }
        let log = std::fs::File::create(std::env::temp_dir().join("rxbench-dockerd.log")).unwrap();
        Command::new(&self.0[0])
            .args(&self.0[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("starting dockerd again");
        wait_until(
            "the daemon answering again",
            Duration::from_secs(90),
            answers,
        );
    }
}

impl Drop for Revive {
    fn drop(&mut self) {
        self.start();
        let _ = Command::new(RUNNER).arg("clean").output();
    }
}

use std::os::unix::process::CommandExt;

#[test]
fn a_daemon_restarted_mid_run_ends_the_run_with_its_cause_and_keeps_the_slices() {
    if std::env::var_os("RXBENCH_RESTART_DOCKERD").is_none() {
        return skip(
            "set RXBENCH_RESTART_DOCKERD=1 to let it restart this machine's Docker daemon",
        );
    }
    let Some((pid, argv)) = dockerd().filter(|_| answers()) else {
        // Asked to restart the daemon: one must be here.
        panic!("RXBENCH_RESTART_DOCKERD is set but no local dockerd answers");
    };
    let revive = Revive(argv);
    let out = std::env::temp_dir().join(format!("rxbench-daemon-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let runner = Command::new(RUNNER)
        .args(["--engine", "docker", "--profiles", "relaxed"])
        .args([
            "--configs",
            "rx,legacy",
            "--conns",
            "64",
            "--load",
            "keepalive",
            "--rounds",
            "30",
            // Resident servers: the daemon takes them with it mid-round.
            "--relaunch",
            "once",
        ])
        .args(["--slice", "300ms", "--slice-warmup", "100ms"])
        .args(["--strace", "off", "--port", "3941", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let before = wait_for_slices(&out, 4);
    // SAFETY: kill(2) with a pid just read from pidof; SIGTERM is dockerd's orderly stop.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    wait_until("dockerd exiting", Duration::from_secs(90), || {
        std::fs::metadata(format!("/proc/{pid}")).is_err()
    });
    let finished = runner.wait_with_output().unwrap();
    revive.start();
    eprintln!(
        "the runner said:\n{}",
        String::from_utf8_lossy(&finished.stderr)
    );
    assert_run_lost_its_engine(&finished, &out, before);
    // Back, the daemon holds the containers it stopped; clean removes exactly those.
    let cleaned = Command::new(RUNNER).arg("clean").output().unwrap();
    assert!(cleaned.status.success(), "{cleaned:?}");
    assert_eq!(rxbench_containers(), 0, "containers left after clean");
    std::fs::remove_dir_all(&out).ok();
}

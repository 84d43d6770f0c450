//! The engine stops answering mid-run (its daemon restarted or stopped): the run ends with a
//! message naming the cause, every slice measured before is in raw.json (whole, re-renderable),
//! and what the engine still holds is removed by `bench-runner clean` once it answers again.
//!
//! The machine's own daemon is not restarted (other tests and CI need it): the runner reaches
//! the engine through a Unix-socket proxy this test starts and then cuts, every connection at
//! once — to the runner, exactly an engine gone away (its log streams end, its calls are
//! refused). The containers keep running behind the cut, as they would for a daemon with
//! live-restore, so the test also checks that the runner says they may be left.

mod common;

use std::io::ErrorKind;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    assert_run_lost_its_engine, available_or_skip, docker_reachable, rxbench_containers,
    wait_for_slices,
};

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");

/// Forwards every connection made to `path` to the engine's socket until cut.
struct Proxy {
    path: PathBuf,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<UnixStream>>>,
    accepting: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    fn start(path: PathBuf, engine: PathBuf) -> Proxy {
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        let accepting = {
            let (cut, open) = (cut.clone(), open.clone());
            std::thread::spawn(move || {
                while !cut.load(Ordering::Relaxed) {
                    let client = match listener.accept() {
                        Ok((c, _)) => c,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                        Err(e) => panic!("proxy accept: {e}"),
                    };
                    client.set_nonblocking(false).unwrap();
                    let Ok(server) = UnixStream::connect(&engine) else {
                        continue;
                    };
                    {
                        let mut open = open.lock().unwrap();
                        open.push(client.try_clone().unwrap());
                        open.push(server.try_clone().unwrap());
                    }
                    for (mut from, mut to) in [
                        (client.try_clone().unwrap(), server.try_clone().unwrap()),
                        (server, client),
                    ] {
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut from, &mut to);
                            let _ = to.shutdown(std::net::Shutdown::Write);
                        });
                    }
                }
            })
        };
        Proxy {
            path,
            cut,
            open,
            accepting: Some(accepting),
        }
    }

    /// The engine is gone: no new connection, every open one closed.
    fn cut(&mut self) {
        self.cut.store(true, Ordering::Relaxed);
        if let Some(t) = self.accepting.take() {
            t.join().unwrap();
        }
        let _ = std::fs::remove_file(&self.path);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// The engine's own socket, as `docker` itself would reach it.
fn engine_socket() -> PathBuf {
    match std::env::var("DOCKER_HOST") {
        Ok(h) => PathBuf::from(
            h.strip_prefix("unix://")
                .expect("this test proxies a unix:// engine"),
        ),
        Err(_) => PathBuf::from("/var/run/docker.sock"),
    }
}

/// Whatever the test's outcome, nothing of its run is left behind.
struct CleanAfter;

impl Drop for CleanAfter {
    fn drop(&mut self) {
        let _ = Command::new(RUNNER).arg("clean").output();
    }
}

#[test]
fn an_engine_that_stops_answering_ends_the_run_with_its_cause_and_keeps_the_slices() {
    if !available_or_skip(
        docker_reachable(),
        "engine_lost",
        "no Docker engine answers",
    ) {
        return;
    }
    let _clean = CleanAfter;
    let pid = std::process::id();
    let out = std::env::temp_dir().join(format!("rxbench-engine-lost-{pid}"));
    let _ = std::fs::remove_dir_all(&out);
    let mut proxy = Proxy::start(
        std::env::temp_dir().join(format!("rxbench-engine-{pid}.sock")),
        engine_socket(),
    );
    let runner = Command::new(RUNNER)
        .env("DOCKER_HOST", format!("unix://{}", proxy.path.display()))
        .args(["--engine", "docker", "--profiles", "relaxed"])
        .args([
            "--configs",
            "rx,legacy",
            "--conns",
            "64",
            "--load",
            "keepalive",
            "--rounds",
            "20",
            // Resident servers: the engine is lost mid-round, not between launches.
            "--relaunch",
            "once",
        ])
        .args(["--slice", "300ms", "--slice-warmup", "100ms"])
        .args(["--strace", "off", "--port", "3931", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it measure a few slices, then take the engine away.
    let before = wait_for_slices(&out, 4);
    proxy.cut();
    let finished = runner.wait_with_output().unwrap();
    // Every slice measured before the cut is kept, the record whole and marked incomplete.
    assert_run_lost_its_engine(&finished, &out, before);
    // The engine answers again (the proxy was only the runner's way to it): clean removes
    // what the runner could not.
    let cleaned = Command::new(RUNNER).arg("clean").output().unwrap();
    assert!(cleaned.status.success());
    assert_eq!(rxbench_containers(), 0, "containers left after clean");
    std::fs::remove_dir_all(&out).ok();
}

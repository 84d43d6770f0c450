//! `server`: the-benchmarker/web-frameworks contract on the rxbench reactor.
//!
//! Knobs come from the environment (docs/runtime-config.md). The first line on stderr names the
//! backend really running and why; SIGTERM or SIGINT stops accepting, finishes responses in
//! flight and prints one JSON line of per-worker counters on stdout; SIGUSR1 prints the same
//! line (`"event":"snapshot"`) and the server keeps serving.

mod healthcheck;

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use reactor::{BackendReport, Reactor, Waker};
use socket2::{Domain, Socket, Type};

use server::config::Config;
use server::worker::{Control, Stats, Worker};

/// How long a snapshot waits for every worker's counters (a worker answers at its next loop
/// turn; one that does not within this is named missing in the line).
const SNAPSHOT_WAIT: Duration = Duration::from_secs(2);

const HELP: &str = "\
server: the-benchmarker/web-frameworks contract (GET /, GET /user/:id, POST /user) on the
rxbench reactor (io_uring, or epoll in rx / oneshot / legacy mode).

usage:
  server [IGNORED...]         serve on $APP_BIND:$APP_PORT until SIGTERM or SIGINT
                              (SIGUSR1: print the counters line and keep serving); other
                              words are ignored with one line on stderr: the-benchmarker
                              starts containers with `docker run -td IMAGE --network host`,
                              whose trailing words reach an exec-form entrypoint
  server --healthcheck [URL]  GET URL (default http://127.0.0.1:$APP_PORT/); exit 0 on 2xx
  server --help

Configuration is read from the environment; see docs/runtime-config.md:
  APP_BIND (0.0.0.0), APP_PORT (3000), APP_WORKERS (CPUs in the affinity mask), APP_PIN (0),
  APP_BACKEND (auto|io_uring|epoll), APP_EPOLL_MODE (rx|oneshot|legacy),
  APP_HEADER_TIMEOUT (10 s), APP_KEEPALIVE_TIMEOUT (15 s), APP_SEND_TIMEOUT (30 s),
  APP_MAX_BODY (1048576 bytes), APP_RECV_BUFFER (2048 bytes), APP_RECV_MULTISHOT (1), APP_TRAIL (0).";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("--healthcheck") if args.len() <= 2 => {
            healthcheck::run(args.get(1).map(String::as_str))
        }
        // A healthcheck asked for wrongly must not start a server in its place.
        Some("--healthcheck") => {
            eprintln!("server: --healthcheck takes at most one URL; see server --help");
            2
        }
        Some("-h" | "--help") => {
            println!("{HELP}");
            0
        }
        // Words the server does not take (the-benchmarker's trailing `--network host`, see
        // HELP) are not a reason to die before serving: say once what is ignored, then serve.
        _ => match serve(&args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("server: {e}");
                1
            }
        },
    };
    std::process::exit(code);
}

fn listener(addr: SocketAddr) -> std::io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket)
}

/// Blocks SIGTERM, SIGINT and SIGUSR1 in this thread (and so in every worker spawned after),
/// so that only `sigwait` in the main thread sees them.
fn block_control_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local set; pthread_sigmask on the calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Raises the soft limit on open descriptors to the hard limit (each connection is one) and
/// returns the limit now in force.
fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we pass, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    lim.rlim_cur
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` was initialised by block_control_signals; sigwait writes the signal number.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}

/// Serves until SIGTERM or SIGINT. `ignored` are the command-line words the server does not
/// take: named once on stderr, after the start-up line (which stays the first line).
fn serve(ignored: &[String]) -> Result<(), String> {
    let config = Config::from_env().map_err(|e| e.to_string())?;
    let signals = block_control_signals();
    let nofile = raise_nofile_limit();
    let cpus = reactor::affinity::allowed();
    let workers = config.workers.unwrap_or(cpus.len().max(1));

    // Bind every listener before any worker starts, so a port in use is reported at once and
    // APP_PORT=0 means one ephemeral port shared by all workers.
    let wanted = SocketAddr::from((config.bind, config.port));
    let first = listener(wanted).map_err(|e| format!("binding {wanted}: {e}"))?;
    let port = first
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map_or(config.port, |a| a.port());
    let addr = SocketAddr::from((config.bind, port));
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(listener(addr).map_err(|e| format!("binding {addr}: {e}"))?);
    }

    let (snapshot_tx, snapshot_rx) = mpsc::channel::<(usize, Stats)>();
    let mut controls = Vec::new();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(usize, BackendReport, Waker), String>>();
    let mut handles = Vec::new();
    for (index, socket) in listeners.into_iter().enumerate() {
        let reactor_config = config.reactor_config();
        let settings = config.worker_settings();
        let pin = (config.pin && !cpus.is_empty()).then(|| cpus[index % cpus.len()]);
        let control = Arc::new(Control::default());
        controls.push(control.clone());
        let (ready, snapshots) = (ready_tx.clone(), snapshot_tx.clone());
        let handle = std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || -> std::io::Result<Stats> {
                if let Some(cpu) = pin {
                    if let Err(e) = reactor::affinity::pin(0, &[cpu]) {
                        let _ =
                            ready.send(Err(format!("worker {index}: pinning to cpu {cpu}: {e}")));
                        return Err(e);
                    }
                }
                let reactor = match Reactor::new(&reactor_config) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready.send(Err(format!("worker {index}: {e}")));
                        return Err(std::io::Error::other(e.to_string()));
                    }
                };
                let _ = ready.send(Ok((index, reactor.report(), reactor.waker())));
                drop(ready);
                Worker::new(reactor, settings).run(OwnedFd::from(socket), control, index, snapshots)
            })
            .map_err(|e| format!("spawning worker {index}: {e}"))?;
        handles.push(handle);
    }
    drop((ready_tx, snapshot_tx));

    // Workers report ready in any order; `wakers[i]` must wake worker i (it pairs with
    // `controls[i]`).
    let mut ready: Vec<Option<(BackendReport, Waker)>> = (0..workers).map(|_| None).collect();
    for result in ready_rx.iter().take(workers) {
        let (index, r, waker) = result?; // a worker that cannot start stops the server
        ready[index] = Some((r, waker));
    }
    let (reports, wakers): (Vec<BackendReport>, Vec<Waker>) = ready
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or("a worker ended before reporting ready")?
        .into_iter()
        .unzip();
    let report = reports.into_iter().next().ok_or("no worker started")?;
    let startup = wire::StartupLine {
        addr: addr.to_string(),
        workers: workers as u32,
        nofile: Some(nofile),
        backend: report.backend(),
        io_uring: report.io_uring(),
    };
    eprintln!("{startup}");
    if !ignored.is_empty() {
        eprintln!("server: ignoring arguments {ignored:?} (configuration comes from the environment; see server --help)");
    }

    let mut snapshots_taken = 0u64;
    let sig = loop {
        match wait_for_signal(&signals) {
            libc::SIGUSR1 => {
                snapshots_taken += 1;
                let line = snapshot(&controls, &wakers, &snapshot_rx, snapshots_taken, &report);
                println!("{line}");
            }
            sig => break sig,
        }
    };
    for (control, waker) in controls.iter().zip(&wakers) {
        control.stop.store(true, Ordering::Relaxed);
        waker.wake();
    }
    // Responses in flight get their grace period; a second stop signal ends it at once.
    std::thread::spawn(move || loop {
        let again = wait_for_signal(&signals);
        if again != libc::SIGUSR1 {
            eprintln!(
                "server: second stop signal: exiting without waiting for responses in flight"
            );
            std::process::exit(128 + again);
        }
    });
    let mut per_worker = Vec::new();
    for (index, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(stats)) => per_worker.push(worker_counters(index, &stats)),
            Ok(Err(e)) => return Err(format!("worker {index} failed: {e}")),
            Err(_) => return Err(format!("worker {index} panicked")),
        }
    }
    let line = wire::CountersLine {
        event: wire::Event::Shutdown {
            signal: if sig == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            }
            .into(),
        },
        backend: report.backend(),
        io_uring: report.io_uring(),
        workers: per_worker,
    };
    println!("{line}");
    Ok(())
}

/// Asks every worker for its counters and returns the snapshot line (the shutdown line's
/// layout, `"event":"snapshot"`, numbered by `seq`). Workers keep serving throughout.
fn snapshot(
    controls: &[Arc<Control>],
    wakers: &[Waker],
    replies: &mpsc::Receiver<(usize, Stats)>,
    seq: u64,
    report: &BackendReport,
) -> wire::CountersLine {
    // A reply to an earlier snapshot that timed out is stale now.
    while replies.try_recv().is_ok() {}
    for (control, waker) in controls.iter().zip(wakers) {
        control.snapshot.store(true, Ordering::Relaxed);
        waker.wake();
    }
    let deadline = std::time::Instant::now() + SNAPSHOT_WAIT;
    let mut got: Vec<Option<Stats>> = vec![None; controls.len()];
    while got.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match replies.recv_timeout(left) {
            Ok((index, stats)) => got[index] = Some(stats),
            Err(_) => break,
        }
    }
    let missing: Vec<usize> = (0..got.len()).filter(|&i| got[i].is_none()).collect();
    let workers = got
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|s| worker_counters(i, s)))
        .collect();
    wire::CountersLine {
        event: wire::Event::Snapshot {
            seq,
            missing_workers: missing,
        },
        backend: report.backend(),
        io_uring: report.io_uring(),
        workers,
    }
}

fn worker_counters(index: usize, stats: &Stats) -> wire::WorkerCounters {
    wire::WorkerCounters {
        worker: index,
        requests: stats.requests,
        connections: stats.connections,
        syscalls: stats
            .syscalls
            .iter()
            .map(|(name, n)| (name.to_string(), n))
            .collect(),
        syscalls_total: stats.syscalls.total(),
        epoll_ctl_refused: stats.syscalls.epoll_ctl_refused,
        turns: stats.turns,
    }
}

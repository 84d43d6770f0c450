//! `server`: the-benchmarker/web-frameworks contract on the rxbench reactor.
//!
//! Knobs come from the environment (docs/runtime-config.md). The first line on stderr names the
//! backend really running and why; SIGTERM or SIGINT stops accepting, finishes responses in
//! flight and prints one JSON line of per-worker counters on stdout.

mod chunked;
mod config;
mod healthcheck;
mod http;
mod worker;

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use reactor::{BackendReport, Reactor, Waker};
use socket2::{Domain, Socket, Type};

use crate::config::Config;
use crate::worker::{Settings, Stats, Worker};

const HELP: &str = "\
server: the-benchmarker/web-frameworks contract (GET /, GET /user/:id, POST /user) on the
rxbench reactor (io_uring, or epoll in rx / oneshot / legacy mode).

usage:
  server                      serve on 0.0.0.0:$APP_PORT until SIGTERM or SIGINT
  server --healthcheck [URL]  GET URL (default http://127.0.0.1:$APP_PORT/); exit 0 on 2xx
  server --help

Configuration is read from the environment; see docs/runtime-config.md:
  APP_PORT (3000), APP_WORKERS (CPUs in the affinity mask), APP_PIN (0),
  APP_BACKEND (auto|io_uring|epoll), APP_EPOLL_MODE (rx|oneshot|legacy),
  APP_HEADER_TIMEOUT (10 s), APP_KEEPALIVE_TIMEOUT (15 s), APP_MAX_BODY (1048576 bytes).";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        None => match serve() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("server: {e}");
                1
            }
        },
        Some("--healthcheck") if args.len() <= 2 => {
            healthcheck::run(args.get(1).map(String::as_str))
        }
        Some("-h" | "--help") => {
            println!("{HELP}");
            0
        }
        Some(other) => {
            eprintln!("server: unexpected argument '{other}'; see server --help");
            2
        }
    };
    std::process::exit(code);
}

/// The CPUs this process may run on (its affinity mask, which `--cpuset-cpus` sets).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: as above; pins the calling thread only (pid 0 = this thread).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn listener(port: u16) -> std::io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&SocketAddr::from(([0, 0, 0, 0], port)).into())?;
    socket.listen(4096)?;
    Ok(socket)
}

/// Blocks SIGTERM and SIGINT in this thread (and so in every worker spawned after), so that
/// only `sigwait` in the main thread sees them.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local set; pthread_sigmask on the calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for_stop_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` was initialised by block_stop_signals; sigwait writes the signal number.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}

fn serve() -> Result<(), String> {
    let config = Config::from_env().map_err(|e| e.to_string())?;
    let signals = block_stop_signals();
    let cpus = allowed_cpus();
    let workers = config.workers.unwrap_or(cpus.len().max(1));

    // Bind every listener before any worker starts, so a port in use is reported at once and
    // APP_PORT=0 means one ephemeral port shared by all workers.
    let first =
        listener(config.port).map_err(|e| format!("binding 0.0.0.0:{}: {e}", config.port))?;
    let port = first
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map_or(config.port, |a| a.port());
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(listener(port).map_err(|e| format!("binding 0.0.0.0:{port}: {e}"))?);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(BackendReport, Waker), String>>();
    let mut handles = Vec::new();
    for (index, socket) in listeners.into_iter().enumerate() {
        let reactor_config = reactor::Config {
            backend: config.backend,
            epoll_mode: config.epoll_mode,
            ..reactor::Config::default()
        };
        let settings = Settings {
            header_timeout: config.header_timeout,
            keepalive_timeout: config.keepalive_timeout,
            limits: http::Limits {
                max_body: config.max_body,
            },
        };
        let pin = (config.pin && !cpus.is_empty()).then(|| cpus[index % cpus.len()]);
        let (ready, stop) = (ready_tx.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || -> std::io::Result<Stats> {
                if let Some(cpu) = pin {
                    if let Err(e) = pin_to(cpu) {
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
                let _ = ready.send(Ok((reactor.report(), reactor.waker())));
                drop(ready);
                Worker::new(reactor, settings).run(OwnedFd::from(socket), stop)
            })
            .map_err(|e| format!("spawning worker {index}: {e}"))?;
        handles.push(handle);
    }
    drop(ready_tx);

    let mut wakers = Vec::new();
    let mut report = None;
    for result in ready_rx.iter().take(workers) {
        let (r, waker) = result?; // a worker that cannot start stops the server
        report = Some(r);
        wakers.push(waker);
    }
    let report = report.ok_or("no worker started")?;
    eprintln!("server listening on 0.0.0.0:{port} workers={workers} {report}");

    let sig = wait_for_stop_signal(&signals);
    stop.store(true, Ordering::Relaxed);
    for w in &wakers {
        w.wake();
    }
    let mut per_worker = Vec::new();
    for (index, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(stats)) => per_worker.push(stats_json(index, &stats)),
            Ok(Err(e)) => return Err(format!("worker {index} failed: {e}")),
            Err(_) => return Err(format!("worker {index} panicked")),
        }
    }
    let line = serde_json::json!({
        "event": "shutdown",
        "signal": if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" },
        "backend": report.backend(),
        "io_uring": report.io_uring(),
        "workers": per_worker,
    });
    println!("{line}");
    Ok(())
}

fn stats_json(index: usize, stats: &Stats) -> serde_json::Value {
    let syscalls: serde_json::Map<String, serde_json::Value> = stats
        .syscalls
        .iter()
        .map(|(name, n)| (name.to_string(), n.into()))
        .collect();
    serde_json::json!({
        "worker": index,
        "requests": stats.requests,
        "connections": stats.connections,
        "syscalls": syscalls,
        "syscalls_total": stats.syscalls.total(),
        "epoll_ctl_refused": stats.syscalls.epoll_ctl_refused,
    })
}

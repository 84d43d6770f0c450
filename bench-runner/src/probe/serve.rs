//! The mechanism probe's two ends, each on a thread of its own: the server's own worker (the
//! `server` crate's, with its HTTP handling, on the reactor its configuration names) and a
//! client that keeps one request in flight on each of its connections (a closed loop, as the
//! runs' kept-alive load) until told to stop.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use reactor::{BackendChoice, BackendReport, Config, Event, Reactor, Recv, Waker};
use server::worker::{Control, Stats, Worker};

use super::mechanism::MechanismError;
use crate::model::PatternCost;

/// The contract's request as rxload sends it.
pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:3000\r\n\r\n";

/// How often the client looks at its stop flag.
const TICK: Duration = Duration::from_millis(5);

/// The receive path a serving thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// epoll, registered once, edge-triggered.
    Rx,
    /// io_uring, or an error naming why not.
    IoUring,
    /// The io_uring server under the `no-io-uring` filter (this thread only): io_uring
    /// refused with EPERM, it falls back to `rx`.
    Blocked,
}

impl Pattern {
    pub const ALL: [Pattern; 3] = [Pattern::Rx, Pattern::IoUring, Pattern::Blocked];

    /// The server's configuration with no environment, but for the backend.
    fn config(self) -> server::config::Config {
        let mut config = server::config::Config::defaults();
        config.backend = match self {
            Pattern::Rx => BackendChoice::Epoll,
            Pattern::IoUring => BackendChoice::IoUring,
            Pattern::Blocked => BackendChoice::Auto,
        };
        config
    }
}

/// What a worker had done at a snapshot, turned into what it spent between two.
pub fn cost_between(first: &Stats, last: &Stats) -> PatternCost {
    let counts = last.syscalls.since(&first.syscalls);
    let cpu = last.cpu.since(&first.cpu);
    PatternCost {
        requests: last.requests - first.requests,
        cpu_ns: cpu.total_ns,
        user_ns: cpu.user_ns,
        system_ns: cpu.system_ns,
        syscalls: counts.total(),
        waits: counts.get(reactor::Syscall::EpollWait) + counts.get(reactor::Syscall::IoUringEnter),
    }
}

/// A started worker's report: which pattern (its index), the backend that runs, and how to
/// wake it.
pub type Ready = Result<(usize, BackendReport, Waker), MechanismError>;

fn pin(cpu: Option<usize>) -> Result<(), MechanismError> {
    match cpu {
        Some(cpu) => {
            reactor::affinity::pin(0, &[cpu]).map_err(|source| MechanismError::Pin { cpu, source })
        }
        None => Ok(()),
    }
}

fn setup(what: &'static str) -> impl Fn(reactor::Errno) -> MechanismError {
    move |errno| MechanismError::Reactor {
        what,
        detail: errno.to_string(),
    }
}

/// Runs the server's worker for `pattern` on `cpu`, serving `listener`, until `control.stop`:
/// reports on `ready` first (or why it could not start), answers snapshots on `snapshots`.
pub fn work(
    pattern: Pattern,
    index: usize,
    cpu: Option<usize>,
    listener: TcpListener,
    control: Arc<Control>,
    ready: Sender<Ready>,
    snapshots: Sender<(usize, Stats)>,
) {
    let config = pattern.config();
    let start = || -> Result<Reactor, MechanismError> {
        pin(cpu)?;
        if pattern == Pattern::Blocked {
            sandbox::deny_io_uring_in_this_thread(libc::EPERM)
                .map_err(|e| MechanismError::Filter(e.to_string()))?;
        }
        Reactor::new(&config.reactor_config()).map_err(|e| MechanismError::Reactor {
            what: "starting the server's worker",
            detail: e.to_string(),
        })
    };
    let reactor = match start() {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok((index, reactor.report(), reactor.waker())));
    drop(ready);
    let worker = Worker::new(reactor, config.worker_settings());
    // What ends the loop is the probe's stop; an error then has nobody to tell but the
    // snapshots that will not come, which the probe names.
    let _ = worker.run(OwnedFd::from(listener), control, index, snapshots);
}

/// Connects `conns` clients to `addr` from `cpu` and keeps one request in flight on each until
/// `stop` is set.
pub fn drive(
    cpu: Option<usize>,
    addr: SocketAddr,
    conns: usize,
    stop: &AtomicBool,
    connected: &AtomicUsize,
) -> Result<(), MechanismError> {
    pin(cpu)?;
    let mut reactor = Reactor::new(&Config::default()).map_err(|e| MechanismError::Reactor {
        what: "starting the client's reactor",
        detail: e.to_string(),
    })?;
    // A connection's send buffer while no send is in flight, and whether an answer came
    // before its send was reported done (the next request then goes when it is).
    let mut idle_send: Vec<Option<Vec<u8>>> = Vec::new();
    let mut owed = Vec::new();
    for _ in 0..conns {
        let stream = TcpStream::connect(addr).map_err(MechanismError::Connect)?;
        stream.set_nodelay(true).map_err(MechanismError::Connect)?;
        let conn = reactor
            .register(OwnedFd::from(stream))
            .map_err(setup("registering a client connection"))?;
        let i = conn.index();
        if idle_send.len() <= i {
            idle_send.resize_with(i + 1, || None);
            owed.resize(i + 1, false);
        }
        let _ = reactor.arm_recv(conn, Vec::with_capacity(4096));
        let _ = reactor.send(conn, REQUEST.to_vec());
    }
    connected.fetch_add(1, Ordering::Relaxed);
    let mut events = Vec::with_capacity(1024);
    while !stop.load(Ordering::Relaxed) {
        reactor
            .poll(&mut events, Some(TICK))
            .map_err(setup("polling the client"))?;
        while !events.is_empty() {
            for event in events.drain(..) {
                match event {
                    Event::Received {
                        conn,
                        mut buf,
                        result: Recv::Data(_),
                    } => {
                        // `GET /` is answered with an empty body: the head's end is the end.
                        let whole = buf.ends_with(b"\r\n\r\n");
                        if whole {
                            buf.clear();
                        }
                        let _ = reactor.arm_recv(conn, buf);
                        if whole {
                            match idle_send[conn.index()].take() {
                                Some(req) => {
                                    let _ = reactor.send(conn, req);
                                }
                                None => owed[conn.index()] = true,
                            }
                        }
                    }
                    Event::Sent {
                        conn,
                        buf,
                        result: Ok(()),
                    } => {
                        if std::mem::take(&mut owed[conn.index()]) {
                            let _ = reactor.send(conn, buf);
                        } else {
                            idle_send[conn.index()] = Some(buf);
                        }
                    }
                    // The server ended its window and closed: this batch is over.
                    Event::Received { .. } | Event::Sent { .. } => return Ok(()),
                    _ => {}
                }
            }
            reactor.take_completed(&mut events);
        }
    }
    Ok(())
}

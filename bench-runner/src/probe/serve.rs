//! The mechanism probe's two ends, each a reactor on a thread of its own: a server that answers
//! every request with the contract's fixed response, measured over a window, and a client that
//! keeps one request in flight on each of its connections (a closed loop, as the runs' kept-alive
//! load) until told to stop. Nothing here parses HTTP beyond finding a request's end: the probe
//! prices the receive path, not the application.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use reactor::{BackendChoice, BackendReport, Config, EpollMode, Event, Reactor, Recv};

use super::mechanism::MechanismError;
use crate::model::PatternCost;

/// The contract's request as rxload sends it, and the server's answer to it (`GET /`: 200 and
/// an empty body), byte for byte the sizes a run moves.
pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:3000\r\n\r\n";
pub const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nDate: Mon, 07 Dec 2026 18:00:00 GMT\r\nContent-Length: 0\r\n\r\n";

/// How often a waiting loop looks at the clock and the stop flag.
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

    fn config(self) -> Config {
        let backend = match self {
            Pattern::Rx => BackendChoice::Epoll,
            Pattern::IoUring => BackendChoice::IoUring,
            Pattern::Blocked => BackendChoice::Auto,
        };
        Config {
            backend,
            epoll_mode: EpollMode::Rx,
            ..Config::default()
        }
    }
}

/// When the serving threads measure: once every one of them has all its connections, after
/// `warmup`, for `window` — one window for all, so that whatever the host does in it falls on
/// every pattern alike (the duets' pairing, in-process).
#[derive(Debug)]
pub struct Window {
    pub warmup: Duration,
    pub window: Duration,
    /// The serving threads, and how many have all their connections.
    parties: usize,
    ready: AtomicUsize,
    start: OnceLock<Instant>,
}

impl Window {
    pub fn new(parties: usize, warmup: Duration, window: Duration) -> Window {
        Window {
            warmup,
            window,
            parties,
            ready: AtomicUsize::new(0),
            start: OnceLock::new(),
        }
    }

    /// Counts one more thread ready.
    fn arrive(&self) {
        self.ready.fetch_add(1, Ordering::Relaxed);
    }

    /// When the window opens, once every thread is ready (the first to see it sets it).
    fn start(&self, now: Instant) -> Option<Instant> {
        if self.ready.load(Ordering::Relaxed) < self.parties {
            return None;
        }
        Some(*self.start.get_or_init(|| now + self.warmup))
    }
}

/// A thread's CPU time so far: exact in all, and split into user and system time.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadCpu {
    total_ns: u64,
    user_ns: u64,
    system_ns: u64,
}

fn ns(tv: libc::timeval) -> u64 {
    tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000
}

impl ThreadCpu {
    fn now() -> ThreadCpu {
        // SAFETY: both calls only write the structs we own and pass; the calling thread is
        // always a valid subject for CLOCK_THREAD_CPUTIME_ID and RUSAGE_THREAD.
        let (ts, ru) = unsafe {
            let mut ts: libc::timespec = std::mem::zeroed();
            libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
            (ts, ru)
        };
        ThreadCpu {
            total_ns: ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
            user_ns: ns(ru.ru_utime),
            system_ns: ns(ru.ru_stime),
        }
    }
}

/// What the server has done so far: its CPU, its syscalls, its answers.
#[derive(Clone, Copy)]
struct Mark {
    cpu: ThreadCpu,
    counts: reactor::SyscallCounts,
    requests: u64,
}

impl Mark {
    fn cost_since(&self, start: &Mark) -> PatternCost {
        let counts = self.counts.since(&start.counts);
        PatternCost {
            requests: self.requests - start.requests,
            cpu_ns: self.cpu.total_ns - start.cpu.total_ns,
            user_ns: self.cpu.user_ns.saturating_sub(start.cpu.user_ns),
            system_ns: self.cpu.system_ns.saturating_sub(start.cpu.system_ns),
            syscalls: counts.total(),
            waits: counts.get(reactor::Syscall::EpollWait)
                + counts.get(reactor::Syscall::IoUringEnter),
        }
    }
}

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

/// Serves `conns` connections arriving on `listener` with `pattern` on `cpu`, measures the
/// shared window, then sets `stop` and returns what the window cost and the backend that ran.
pub fn serve(
    pattern: Pattern,
    cpu: Option<usize>,
    listener: TcpListener,
    conns: usize,
    when: &Window,
    stop: &AtomicBool,
) -> Result<(PatternCost, BackendReport), MechanismError> {
    // Whatever happens here, the client must not wait for a window that never ends.
    struct StopOnExit<'a>(&'a AtomicBool);
    impl Drop for StopOnExit<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop = StopOnExit(stop);
    pin(cpu)?;
    if pattern == Pattern::Blocked {
        sandbox::deny_io_uring_in_this_thread(libc::EPERM)
            .map_err(|e| MechanismError::Filter(e.to_string()))?;
    }
    let mut reactor = Reactor::new(&pattern.config()).map_err(|e| MechanismError::Reactor {
        what: "starting the serving reactor",
        detail: e.to_string(),
    })?;
    reactor
        .listen(OwnedFd::from(listener))
        .map_err(setup("listening"))?;
    let mut events = Vec::with_capacity(1024);
    let (mut accepted, mut requests, mut arrived) = (0, 0u64, false);
    let mut first: Option<Mark> = None;
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        reactor
            .poll(&mut events, Some(TICK))
            .map_err(setup("polling"))?;
        while !events.is_empty() {
            for event in events.drain(..) {
                match event {
                    Event::Accepted { conn, .. } => {
                        accepted += 1;
                        let _ = reactor.arm_recv(conn, Vec::with_capacity(4096));
                    }
                    Event::Received {
                        conn,
                        mut buf,
                        result: Recv::Data(_),
                    } => {
                        // One request in flight a connection: a whole one ends the buffer.
                        let next = if buf.ends_with(b"\r\n\r\n") {
                            requests += 1;
                            buf.clear();
                            buf.extend_from_slice(RESPONSE);
                            reactor.send(conn, buf)
                        } else {
                            reactor.arm_recv(conn, buf)
                        };
                        if next.is_err() {
                            reactor.close(conn);
                        }
                    }
                    Event::Sent {
                        conn,
                        mut buf,
                        result: Ok(()),
                    } => {
                        buf.clear();
                        if reactor.arm_recv(conn, buf).is_err() {
                            reactor.close(conn);
                        }
                    }
                    Event::Received { conn, .. } | Event::Sent { conn, .. } => reactor.close(conn),
                    Event::AcceptFailed { error, .. } => {
                        return Err(setup("accepting")(error));
                    }
                    Event::Ready { .. } | Event::Woken => {}
                }
            }
            reactor.take_completed(&mut events);
        }
        let now = Instant::now();
        let mark = || Mark {
            cpu: ThreadCpu::now(),
            counts: reactor.counts(),
            requests,
        };
        if !arrived && accepted >= conns {
            arrived = true;
            when.arrive();
        }
        match (when.start(now), &first) {
            (None, _) if now > give_up => return Err(MechanismError::Stalled { accepted, conns }),
            (Some(at), None) if now >= at => first = Some(mark()),
            (Some(at), Some(first)) if now >= at + when.window => {
                return Ok((mark().cost_since(first), reactor.report()));
            }
            _ => {}
        }
        if stop.load(Ordering::Relaxed) {
            return Err(MechanismError::ClientGone);
        }
    }
}

/// Connects `conns` clients to `addr` from `cpu` and keeps one request in flight on each until
/// `stop` is set.
pub fn drive(
    cpu: Option<usize>,
    addr: SocketAddr,
    conns: usize,
    stop: &AtomicBool,
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
                        let whole = buf.len() >= RESPONSE.len();
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

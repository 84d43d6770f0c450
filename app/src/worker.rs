//! One worker: a reactor thread with its own SO_REUSEPORT listener, its connections, a cached
//! Date header and a once-a-second timer sweep (no syscall per request for either).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reactor::{Conn, Event, Reactor, Recv, SyscallCounts};

use crate::http::{self, After, Limits};
use crate::pool::Pool;

/// Stop reading from a client that sends requests faster than it reads responses.
const MAX_PENDING_OUT: usize = 1 << 20;
/// How long a closing connection is drained before it is closed (lingering close).
const LINGER: Duration = Duration::from_secs(2);
/// After SIGTERM, responses in flight get this long to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Out of descriptors (EMFILE, ENFILE) or memory, accepting pauses this long: existing
/// connections go on being served, and a retry does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

pub struct Settings {
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    /// A send not complete after this long is given up and the connection closed: a client
    /// that stops reading cannot pin its connection (and its queued responses) forever.
    pub send_timeout: Duration,
    /// Bytes a connection's receive buffer starts with; it grows for a longer request. An
    /// idle keep-alive connection keeps its buffer armed, so this is most of what it costs.
    pub recv_buffer: usize,
    pub limits: Limits,
}

/// What a worker reports when asked (a snapshot) and when it ends.
#[derive(Clone, Copy)]
pub struct Stats {
    pub requests: u64,
    pub connections: u64,
    pub syscalls: SyscallCounts,
    pub turns: wire::TurnCounters,
    /// The worker thread's CPU time when the snapshot was taken (read by the worker itself).
    pub cpu: reactor::ThreadCpu,
}

#[derive(PartialEq, Eq)]
enum Phase {
    Open,
    /// Close once the responses already written are sent, then as it says.
    CloseAfterSend(Then),
    /// FIN sent; reading and discarding until EOF or the deadline.
    Lingering,
}

/// How a connection ends once its last responses are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    /// FIN, then read until the client closes: bytes it may still send (a body after a
    /// refusal, a request after the last) must not turn the close into a reset that could
    /// destroy the response before the client reads it.
    Linger,
    /// Nothing can be left unread (the client made its last request and sent nothing after
    /// it, or its FIN came): close now, as nginx does without `lingering_close` — no
    /// shutdown(2), no wait for the client's EOF.
    Close,
}

/// What the main thread asks of one worker. Both bits are read with one relaxed load per loop
/// turn; the asker sets a bit and then wakes the worker's reactor.
#[derive(Default)]
pub struct Control {
    /// Stop accepting, finish the responses in flight, return.
    pub stop: AtomicBool,
    /// Send a [`Stats`] snapshot on the worker's reply channel and carry on serving.
    pub snapshot: AtomicBool,
}

struct Session {
    conn: Conn,
    http: http::Connection,
    /// The receive buffer while no receive is armed (`None`: armed, the reactor has it).
    input: Option<Vec<u8>>,
    /// Responses not yet handed to the reactor.
    out: Vec<u8>,
    /// A send buffer returned by the reactor, kept for reuse.
    spare: Vec<u8>,
    /// When the send in flight was handed to the reactor (`None`: no send in flight).
    sending_since: Option<Instant>,
    phase: Phase,
    /// When a partly received request started (for the header timeout).
    request_started: Option<Instant>,
    last_activity: Instant,
}

/// The Date header and the answers built from it, remade when the second changes.
struct DateCache {
    second: u64,
    stamp: http::Stamp,
}

impl DateCache {
    fn refresh(&mut self) {
        let now = SystemTime::now();
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second != self.second {
            self.second = second;
            self.stamp = http::Stamp::new(httpdate::fmt_http_date(now));
        }
    }
}

pub struct Worker {
    reactor: Reactor,
    settings: Settings,
    /// Accepting paused (out of resources) until then.
    accept_paused_until: Option<Instant>,
    /// Since the first accept that found no descriptor, until one succeeds again.
    accept_starved_since: Option<Instant>,
    sessions: Vec<Option<Session>>,
    live: usize,
    /// Receive buffers, and send buffers, of closed connections, for the next ones.
    recv_buffers: Pool,
    send_buffers: Pool,
    date: DateCache,
    stats: Stats,
}

impl Worker {
    pub fn new(reactor: Reactor, settings: Settings) -> Worker {
        Worker {
            reactor,
            settings,
            accept_paused_until: None,
            accept_starved_since: None,
            sessions: Vec::new(),
            live: 0,
            recv_buffers: Pool::default(),
            send_buffers: Pool::default(),
            date: DateCache {
                second: u64::MAX,
                stamp: http::Stamp::new(String::new()),
            },
            stats: Stats {
                requests: 0,
                connections: 0,
                syscalls: SyscallCounts::default(),
                turns: wire::TurnCounters::default(),
                cpu: reactor::ThreadCpu::default(),
            },
        }
    }

    /// Serves until `control.stop` is set (and the reactor woken), then finishes responses in
    /// flight. Each `control.snapshot` request is answered on `snapshots` with this worker's
    /// index and its counters so far.
    pub fn run(
        mut self,
        listener: OwnedFd,
        control: Arc<Control>,
        index: usize,
        snapshots: Sender<(usize, Stats)>,
    ) -> std::io::Result<Stats> {
        let listener = self.reactor.listen(listener).map_err(|e| e.to_io())?;
        let mut events = Vec::with_capacity(1024);
        let mut next_sweep = Instant::now() + Duration::from_secs(1);
        let mut stopping_since: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let wake = self
                .accept_paused_until
                .map_or(next_sweep, |until| next_sweep.min(until));
            let timeout = wake.saturating_duration_since(now);
            self.reactor
                .poll(&mut events, Some(timeout))
                .map_err(|e| e.to_io())?;
            self.date.refresh();
            let now = Instant::now();
            // What handling completes at once (a send the socket took whole) is handled in
            // this turn too, not one poll later.
            while !events.is_empty() {
                for event in events.drain(..) {
                    self.on_event(event, now);
                }
                self.reactor.take_completed(&mut events);
            }
            if control.snapshot.load(Ordering::Relaxed)
                && control.snapshot.swap(false, Ordering::Relaxed)
            {
                // The asker may have gone (it waits a bounded time): nothing to do then.
                let _ = snapshots.send((index, self.stats_now()));
            }
            if self.accept_paused_until.is_some_and(|until| now >= until) {
                self.accept_paused_until = None;
                self.reactor.resume_accept(listener);
            }
            if stopping_since.is_none() && control.stop.load(Ordering::Relaxed) {
                self.accept_paused_until = None;
                self.reactor.unlisten(listener);
                stopping_since = Some(now);
                self.drain_idle();
            }
            if let Some(since) = stopping_since {
                if self.live == 0 || now.duration_since(since) > SHUTDOWN_GRACE {
                    break;
                }
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + Duration::from_secs(1);
            }
        }
        Ok(self.stats_now())
    }

    fn stats_now(&self) -> Stats {
        Stats {
            syscalls: self.reactor.counts(),
            turns: self.reactor.turns(),
            cpu: reactor::ThreadCpu::now(),
            ..self.stats
        }
    }

    fn on_event(&mut self, event: Event, now: Instant) {
        match event {
            Event::Accepted { conn, .. } => {
                if let Some(since) = self.accept_starved_since.take() {
                    eprintln!(
                        "server: accepting again after {} ms",
                        now.duration_since(since).as_millis()
                    );
                }
                self.open(conn, now)
            }
            Event::Received { conn, buf, result } => {
                let Some(s) = self.session(conn) else { return };
                s.last_activity = now;
                let busy = s.sending_since.is_some() || !s.out.is_empty();
                match result {
                    Recv::Data(_) if s.phase == Phase::Open => {
                        s.input = Some(buf);
                        self.on_data(conn, now);
                    }
                    Recv::Data(_) => {
                        // Closing: what the client still sends is discarded.
                        let mut buf = buf;
                        buf.clear();
                        self.arm(conn, buf);
                    }
                    Recv::Eof | Recv::Error(_) if busy => {
                        // Half-close: answer what was asked, then close (the client's FIN
                        // came: nothing is left to read, so no lingering).
                        s.input = Some(buf);
                        if s.phase == Phase::Open {
                            s.phase = Phase::CloseAfterSend(Then::Close);
                        }
                    }
                    _ => self.close(conn),
                }
            }
            Event::Sent { conn, buf, result } => {
                let Some(s) = self.session(conn) else { return };
                s.sending_since = None;
                s.spare = buf;
                s.spare.clear();
                if result.is_err() {
                    return self.close(conn);
                }
                if !s.out.is_empty() {
                    return self.flush(conn, now);
                }
                match s.phase {
                    Phase::CloseAfterSend(Then::Linger) => self.linger(conn, now),
                    Phase::CloseAfterSend(Then::Close) => self.close(conn),
                    _ => {
                        if let Some(input) = s.input.take() {
                            // Reading was paused behind a large backlog of responses.
                            self.arm(conn, input);
                        }
                    }
                }
            }
            Event::AcceptFailed { error, .. } if error.is_out_of_resources() => {
                // One line when it starts and one when it ends, not one per retry.
                if self.accept_starved_since.is_none() {
                    eprintln!(
                        "server: accepting paused: {} with {} connections open; retrying every {} ms",
                        error.name(),
                        self.live,
                        ACCEPT_BACKOFF.as_millis()
                    );
                    self.accept_starved_since = Some(now);
                }
                self.accept_paused_until = Some(now + ACCEPT_BACKOFF);
            }
            Event::AcceptFailed { error, .. } => {
                eprintln!("server: accept failed: {error}");
            }
            Event::Ready { .. } | Event::Woken => {}
        }
    }

    fn session(&mut self, conn: Conn) -> Option<&mut Session> {
        self.sessions
            .get_mut(conn.index())?
            .as_mut()
            .filter(|s| s.conn == conn)
    }

    fn open(&mut self, conn: Conn, now: Instant) {
        let i = conn.index();
        if self.sessions.len() <= i {
            self.sessions.resize_with(i + 1, || None);
        }
        self.sessions[i] = Some(Session {
            conn,
            http: http::Connection::default(),
            input: None,
            out: self.send_buffers.take(0),
            spare: Vec::new(),
            sending_since: None,
            phase: Phase::Open,
            // A new connection owes its first request within the header timeout.
            request_started: Some(now),
            last_activity: now,
        });
        self.live += 1;
        self.stats.connections += 1;
        let input = self.recv_buffers.take(self.settings.recv_buffer);
        self.arm(conn, input);
    }

    fn on_data(&mut self, conn: Conn, now: Instant) {
        let (limits, recv_buffer) = (self.settings.limits, self.settings.recv_buffer);
        let stamp = &self.date.stamp;
        let Some(s) = self.sessions[conn.index()].as_mut() else {
            return;
        };
        let mut input = s.input.take().expect("data just arrived");
        let progress = s.http.process(&input, &mut s.out, stamp, limits);
        self.stats.requests += progress.requests;
        input.drain(..progress.consumed);
        let partial = !input.is_empty() || s.http.in_body();
        s.request_started = match (partial, s.request_started) {
            (false, _) => None,
            (true, Some(t)) if progress.requests == 0 => Some(t),
            (true, _) => Some(now),
        };
        if progress.after == After::Close {
            s.phase = Phase::CloseAfterSend(if progress.ends_clean {
                Then::Close
            } else {
                Then::Linger
            });
        }
        let (closing, backlog) = (s.phase != Phase::Open, s.out.len() >= MAX_PENDING_OUT);
        if closing || backlog {
            s.input = Some(input); // armed again after the send (lingering or backlog)
        } else {
            // The least free room an armed receive gets: a quarter of the buffer.
            if input.capacity() - input.len() < recv_buffer / 4 {
                input.reserve(recv_buffer);
            }
            self.arm(conn, input);
        }
        self.flush(conn, now);
    }

    /// Hands the written responses to the reactor unless a send is already in flight.
    fn flush(&mut self, conn: Conn, now: Instant) {
        let Some(s) = self.sessions[conn.index()].as_mut() else {
            return;
        };
        if s.sending_since.is_some() || s.out.is_empty() {
            return;
        }
        let out = std::mem::replace(&mut s.out, std::mem::take(&mut s.spare));
        s.sending_since = Some(now);
        if self.reactor.send(conn, out).is_err() {
            self.close(conn);
        }
    }

    fn arm(&mut self, conn: Conn, buf: Vec<u8>) {
        if self.reactor.arm_recv(conn, buf).is_err() {
            self.close(conn);
        }
    }

    /// All responses are out: send FIN, then read until the client closes (or the linger
    /// deadline), so unread request bytes do not turn our close into a reset that could
    /// destroy the response before the client reads it.
    fn linger(&mut self, conn: Conn, now: Instant) {
        let Some(s) = self.sessions[conn.index()].as_mut() else {
            return;
        };
        s.phase = Phase::Lingering;
        s.last_activity = now;
        let input = s.input.take();
        self.reactor.shutdown_write(conn);
        if let Some(mut buf) = input {
            buf.clear();
            if buf.capacity() == 0 {
                buf.reserve(self.settings.recv_buffer);
            }
            self.arm(conn, buf);
        }
        // else a receive is still armed and will see the client's EOF.
    }

    fn close(&mut self, conn: Conn) {
        if let Some(slot) = self.sessions.get_mut(conn.index()) {
            if let Some(s) = slot.take_if(|s| s.conn == conn) {
                self.live -= 1;
                self.reactor.close(conn);
                // A receive still armed is the reactor's, dropped with the connection; what
                // the session holds serves the next one.
                if let Some(input) = s.input {
                    self.recv_buffers.give(input);
                }
                self.send_buffers.give(s.out);
                self.send_buffers.give(s.spare);
            }
        }
    }

    /// Closes connections whose send, header, keep-alive or linger time is up. With
    /// `APP_TRAIL`, a connection closed in the middle of a request or a send first prints what
    /// the reactor last did for it: a peer that went away should have ended it sooner.
    fn sweep(&mut self, now: Instant) {
        let expired: Vec<(Conn, Option<&str>)> = self
            .sessions
            .iter()
            .flatten()
            .filter_map(|s| {
                // A send in flight has its own clock: the other timers wait for it to end.
                let (deadline, midway) = match (s.sending_since, &s.phase, s.request_started) {
                    (Some(since), _, _) => (since + self.settings.send_timeout, Some("send")),
                    (None, Phase::Lingering, _) => (s.last_activity + LINGER, None),
                    (None, _, Some(started)) => {
                        (started + self.settings.header_timeout, Some("header"))
                    }
                    (None, _, None) => (s.last_activity + self.settings.keepalive_timeout, None),
                };
                (now >= deadline).then_some((s.conn, midway))
            })
            .collect();
        for (conn, midway) in expired {
            if let (Some(timer), Some(trail)) = (midway, self.reactor.trail(conn)) {
                eprintln!("server: {timer} timer closed a connection: {trail}");
            }
            self.close(conn);
        }
    }

    /// On shutdown: connections with nothing in flight close now; the rest after their send.
    fn drain_idle(&mut self) {
        let mut idle = Vec::new();
        for s in self.sessions.iter_mut().flatten() {
            if s.sending_since.is_some() || !s.out.is_empty() {
                if s.phase == Phase::Open {
                    s.phase = Phase::CloseAfterSend(Then::Linger);
                }
            } else {
                idle.push(s.conn);
            }
        }
        for conn in idle {
            self.close(conn);
        }
    }
}

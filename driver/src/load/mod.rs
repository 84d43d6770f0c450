//! The closed loop: each connection sends a request, waits for the whole response, records its
//! latency, repeats — on the same connection (keep-alive), or on a fresh one each time
//! ([`ConnMode::PerRequest`]: the client closes after every response, and the latency runs
//! from the connect). One reactor per thread, so on io_uring the sends and receives of all of a
//! thread's connections share one `io_uring_enter` per loop turn.
//!
//! Latency is measured with one clock read per loop turn: a request is stamped with the time
//! of the turn that queued it (just before the enter or send() that puts it on the wire), and
//! its response with the time of the turn that saw its last byte (just after the wait that
//! returned it). Both ends therefore include the turn's batching delay — with batched waits up
//! to `ThreadPlan::batch_wait` — never less than the real time on the wire; no request is
//! stamped late to flatter the figure.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use reactor::{BackendChoice, BackendReport, Conn, Event, Reactor, Recv, SyscallCounts};

use crate::report::{Closes, Errors};
use crate::response::{ResponseReader, Step};
use crate::ConnMode;

const RECV_BUF: usize = 16 * 1024;
/// A connection whose connect failed is retried after this long (not in a hot loop).
const RECONNECT_DELAY: Duration = Duration::from_millis(50);
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// A turn waits for half the outstanding responses, for at most `ThreadPlan::batch_wait`: one
/// wake-up per batch instead of one per response, and no stall with one or two connections.
const BATCH_DIVISOR: usize = 2;

mod connect;
mod schedule;
use connect::socket_error;
pub use schedule::OpenLoop;

/// What one load thread does.
#[derive(Clone)]
pub struct ThreadPlan {
    pub addr: SocketAddr,
    /// Rendered requests, sent round-robin per connection.
    pub requests: Arc<Vec<Vec<u8>>>,
    pub connections: usize,
    /// Recording starts here...
    pub measure_from: Instant,
    /// ...and the run ends here.
    pub until: Instant,
    pub timeout: Duration,
    pub backend: BackendChoice,
    pub recv_multishot: bool,
    /// io_uring: how long a loop turn may wait for a batch of responses (zero: no batching).
    pub batch_wait: Duration,
    /// Set by the caller to end the run early (Ctrl-C).
    pub abort: Arc<AtomicBool>,
    /// First route for this thread's first connection (spreads the mix across threads).
    pub route_offset: usize,
    /// Stop after this many complete responses (this thread's share of `--requests`).
    pub max_requests: Option<u64>,
    pub connection: ConnMode,
    pub open: Option<OpenLoop>,
}

pub struct ThreadResult {
    pub requests: u64,
    pub bytes: u64,
    pub errors: Errors,
    /// Reopened after an error or a close the client did not plan (not the per-request
    /// mode's own closes, which are in `closes`).
    pub reconnects: u64,
    pub closes: Closes,
    /// Microseconds; open loop: from each request's due time.
    pub latency: Histogram<u64>,
    /// Open loop: from each request's actual send.
    pub uncorrected: Histogram<u64>,
    /// Open loop: how late each request was sent after it was due and its connection free.
    pub send_lag: Histogram<u64>,
    /// Requests per second, one sample per 100 ms of the measured period.
    pub rate_samples: Vec<f64>,
    pub syscalls: SyscallCounts,
    /// Syscall counts when recording started (to subtract the warm-up).
    pub syscalls_at_start: SyscallCounts,
    pub backend: BackendReport,
    /// The reactor could wait for batches (io_uring with kernel min-wait).
    pub batches_waits: bool,
}

#[derive(Default)]
struct Slot {
    conn: Option<Conn>,
    connecting: bool,
    /// Receive buffer while not armed.
    rx: Option<Vec<u8>>,
    /// Send buffer while no send is in flight.
    tx: Option<Vec<u8>>,
    reader: ResponseReader,
    sent_at: Option<Instant>,
    /// A response completed while the previous send's completion was still pending.
    send_when_free: bool,
    route: usize,
    retry_at: Option<Instant>,
    connect_at: Option<Instant>,
    /// Open loop: the index of the slot's next request on the schedule...
    seq: u64,
    /// ...the due time of the one on the wire...
    due: Option<Instant>,
    /// ...and when the connection was last free to send (a response or the connect done).
    free_at: Option<Instant>,
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

struct Load {
    reactor: Reactor,
    plan: ThreadPlan,
    slots: Vec<Slot>,
    /// Reactor connection index -> slot.
    by_conn: Vec<usize>,
    recording: bool,
    /// Requests put on the wire (for `max_requests`).
    sent: u64,
    /// Requests on the wire without their whole response yet.
    awaiting: usize,
    /// Open loop: idle slots by the due time of their next request.
    waiting: BinaryHeap<Reverse<(Instant, usize)>>,
    out: ThreadResult,
}

/// Runs one thread's share of the load. The reactor is made here: it belongs to this thread.
pub fn run_thread(plan: ThreadPlan) -> Result<ThreadResult, String> {
    let config = reactor::Config {
        backend: plan.backend,
        nodelay: true,
        recv_poll_first: true,
        recv_multishot: plan.recv_multishot,
        batch_wait: plan.batch_wait,
        ..reactor::Config::default()
    };
    let reactor = Reactor::new(&config).map_err(|e| e.to_string())?;
    let backend = reactor.report();
    let batches_waits = reactor.batches_waits();
    let mut load = Load {
        reactor,
        slots: (0..plan.connections)
            .map(|i| Slot {
                route: (plan.route_offset + i) % plan.requests.len(),
                ..Slot::default()
            })
            .collect(),
        by_conn: Vec::new(),
        recording: false,
        sent: 0,
        awaiting: 0,
        waiting: BinaryHeap::new(),
        out: ThreadResult {
            requests: 0,
            bytes: 0,
            errors: Errors::default(),
            reconnects: 0,
            closes: Closes::default(),
            latency: new_histogram(),
            uncorrected: new_histogram(),
            send_lag: new_histogram(),
            rate_samples: Vec::new(),
            syscalls: SyscallCounts::default(),
            syscalls_at_start: SyscallCounts::default(),
            backend,
            batches_waits,
        },
        plan,
    };
    load.run();
    Ok(load.out)
}

impl Load {
    fn run(&mut self) {
        let start = Instant::now();
        for i in 0..self.slots.len() {
            self.open_when_due(i, start);
        }
        let mut events = Vec::with_capacity(1024);
        let mut next_tick = start + SAMPLE_EVERY;
        let mut last_sample = (start, 0u64);
        loop {
            let now = Instant::now();
            let all_done = self
                .plan
                .max_requests
                .is_some_and(|max| self.recording && self.out.requests >= max);
            if now >= self.plan.until || all_done || self.plan.abort.load(Ordering::Relaxed) {
                break;
            }
            if !self.recording && now >= self.plan.measure_from {
                self.start_recording(now);
                last_sample = (now, 0);
            }
            if now >= next_tick {
                let dt = now.duration_since(last_sample.0).as_secs_f64();
                // A tick in the turn that started recording has no interval to measure (0/0
                // would be NaN, which JSON cannot carry).
                if self.recording && dt >= 0.01 {
                    let done = self.out.requests - last_sample.1;
                    self.out.rate_samples.push(done as f64 / dt);
                    last_sample = (now, self.out.requests);
                }
                self.check_timeouts_and_retries(now);
                next_tick = now + SAMPLE_EVERY;
            }
            let mut wake = next_tick.min(self.plan.until);
            if let Some(Reverse((due, _))) = self.waiting.peek() {
                wake = wake.min(*due);
            }
            let wait = wake.saturating_duration_since(now);
            // The reactor ignores the batch when `batch_wait` is zero.
            let batch = (self.awaiting / BATCH_DIVISOR).max(1);
            if self
                .reactor
                .poll_batch(&mut events, Some(wait), batch)
                .is_err()
            {
                break;
            }
            let now = Instant::now();
            for event in events.drain(..) {
                self.on_event(event, now);
            }
            self.send_due(now);
        }
        self.out.syscalls = self.reactor.counts();
        if !self.recording {
            self.out.syscalls_at_start = self.out.syscalls;
        }
    }

    fn start_recording(&mut self, _now: Instant) {
        self.recording = true;
        self.out.requests = 0;
        self.out.bytes = 0;
        self.out.errors = Errors::default();
        self.out.reconnects = 0;
        self.out.closes = Closes::default();
        if self.plan.connection == ConnMode::PerRequest {
            // The window's connections: those open now, and those opened from here on.
            self.out.closes.opened = self.slots.iter().filter(|s| s.conn.is_some()).count() as u64;
        }
        self.out.latency.reset();
        self.out.uncorrected.reset();
        self.out.send_lag.reset();
        self.out.syscalls_at_start = self.reactor.counts();
    }

    fn slot_of(&self, conn: Conn) -> Option<usize> {
        let i = *self.by_conn.get(conn.index())?;
        (self.slots.get(i)?.conn == Some(conn)).then_some(i)
    }

    /// Sets slot `i`'s send time, keeping `awaiting` in step; returns the previous one.
    fn set_sent(&mut self, i: usize, at: Option<Instant>) -> Option<Instant> {
        let old = std::mem::replace(&mut self.slots[i].sent_at, at);
        self.awaiting = self.awaiting + usize::from(at.is_some()) - usize::from(old.is_some());
        old
    }

    fn check_timeouts_and_retries(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if s.retry_at.is_some_and(|t| now >= t) {
                self.connect(i, now);
            } else if s.connecting
                && s.connect_at
                    .is_some_and(|t| now.duration_since(t) >= self.plan.timeout)
            {
                self.out.errors.connect += 1;
                self.reconnect(i, now, true);
            } else if s
                .sent_at
                .is_some_and(|t| now.duration_since(t) >= self.plan.timeout)
            {
                self.out.errors.timeout += 1;
                self.reconnect(i, now, false);
            }
        }
    }

    fn send_next(&mut self, i: usize, now: Instant) {
        if self.budget_spent() {
            return; // this connection's loop ends here
        }
        let ready = self.slots[i].conn.is_some() && self.slots[i].tx.is_some();
        // A connection opened for a request already due carries that one.
        let carried = self.slots[i].due.is_some();
        if ready && !carried && !self.take_due(i, now) {
            return; // queued until its request is due
        }
        let requests = &self.plan.requests;
        let slot = &mut self.slots[i];
        let Some(conn) = slot.conn else { return };
        let Some(mut tx) = slot.tx.take() else {
            slot.send_when_free = true;
            return;
        };
        tx.clear();
        tx.extend_from_slice(&requests[slot.route]);
        slot.route = (slot.route + 1) % requests.len();
        slot.send_when_free = false;
        self.set_sent(i, Some(now));
        self.sent += 1;
        if self.reactor.send(conn, tx).is_err() {
            self.out.errors.write += 1;
            self.reconnect(i, now, false);
        }
    }

    fn on_event(&mut self, event: Event, now: Instant) {
        match event {
            Event::Ready { conn, .. } => {
                let Some(i) = self.slot_of(conn) else { return };
                let fd = self.reactor.fd(conn).unwrap_or(-1);
                if socket_error(fd) != 0 {
                    self.out.errors.connect += 1;
                    return self.reconnect(i, now, true);
                }
                let slot = &mut self.slots[i];
                slot.connecting = false;
                slot.free_at = Some(now);
                let rx = slot
                    .rx
                    .take()
                    .unwrap_or_else(|| Vec::with_capacity(RECV_BUF));
                slot.tx.get_or_insert_with(|| Vec::with_capacity(256));
                if self.reactor.arm_recv(conn, rx).is_err() {
                    return self.reconnect(i, now, false);
                }
                self.send_next(i, now);
            }
            Event::Sent { conn, buf, result } => {
                let Some(i) = self.slot_of(conn) else { return };
                if result.is_err() {
                    self.out.errors.write += 1;
                    return self.reconnect(i, now, false);
                }
                let slot = &mut self.slots[i];
                slot.tx = Some(buf);
                if slot.send_when_free {
                    self.send_next(i, now);
                }
            }
            Event::Received { conn, buf, result } => {
                let Some(i) = self.slot_of(conn) else { return };
                match result {
                    Recv::Data(n) => {
                        self.out.bytes += n as u64;
                        self.on_bytes(i, conn, buf, now);
                    }
                    Recv::Eof => {
                        let slot = &mut self.slots[i];
                        if let Some(status) = slot.reader.finish_on_close() {
                            self.complete(i, status, now);
                            if self.plan.connection == ConnMode::PerRequest {
                                return self.next_connection(i, now, true);
                            }
                        } else if slot.sent_at.is_some() {
                            self.out.errors.read += 1;
                        }
                        self.reconnect(i, now, false);
                    }
                    Recv::Error(_) => {
                        self.out.errors.read += 1;
                        self.reconnect(i, now, false);
                    }
                }
            }
            Event::Accepted { .. } | Event::AcceptFailed { .. } | Event::Woken => {}
        }
    }

    fn on_bytes(&mut self, i: usize, conn: Conn, mut buf: Vec<u8>, now: Instant) {
        let mut used_total = 0;
        loop {
            let step = self.slots[i].reader.feed(&buf[used_total..]);
            match step {
                Ok(Step::Incomplete { used }) => {
                    used_total += used;
                    break;
                }
                Ok(Step::Complete {
                    used,
                    status,
                    close,
                }) => {
                    used_total += used;
                    self.complete(i, status, now);
                    if self.plan.connection == ConnMode::PerRequest {
                        return self.next_connection(i, now, close);
                    }
                    if close {
                        return self.reconnect(i, now, false);
                    }
                    if used_total < buf.len() {
                        // Bytes nobody asked for: the peer is not answering one-for-one.
                        self.out.errors.read += 1;
                        return self.reconnect(i, now, false);
                    }
                    self.send_next(i, now);
                }
                Err(_) => {
                    self.out.errors.read += 1;
                    return self.reconnect(i, now, false);
                }
            }
        }
        buf.drain(..used_total);
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(RECV_BUF);
        }
        if self.reactor.arm_recv(conn, buf).is_err() {
            self.reconnect(i, now, false);
        }
    }

    fn complete(&mut self, i: usize, status: u16, now: Instant) {
        let sent_at = self.set_sent(i, None);
        let slot = &mut self.slots[i];
        slot.free_at = Some(now);
        let due = slot.due.take();
        let from = match (self.plan.connection, due) {
            (_, Some(due)) => Some(due), // open loop: from when it was due
            (ConnMode::PerRequest, None) => slot.connect_at, // the connect is part of it
            (ConnMode::KeepAlive, None) => sent_at,
        };
        if !self.recording {
            return;
        }
        self.out.requests += 1;
        if !(200..400).contains(&status) {
            self.out.errors.status += 1;
        }
        let us = |t: Instant| (now.duration_since(t).as_micros().max(1) as u64).min(3_600_000_000);
        if let Some(t) = from {
            let _ = self.out.latency.record(us(t));
        }
        // Uncorrected: from the send, or from the connect where each request opens its own.
        let began = match self.plan.connection {
            ConnMode::PerRequest => slot.connect_at,
            ConnMode::KeepAlive => sent_at,
        };
        if let (Some(_), Some(t)) = (due, began) {
            let _ = self.out.uncorrected.record(us(t));
        }
    }
}

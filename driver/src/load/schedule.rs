//! Open loop: when each connection's requests are due, and which are taken, shed or queued.

use std::cmp::Reverse;
use std::time::{Duration, Instant};

use super::Load;
use crate::ConnMode;

/// Open loop (`--rate`): every connection's requests are due on a fixed schedule, whatever
/// the server did with the previous ones; a late answer makes the next request late, and its
/// latency counts from when it was due (coordinated omission corrected, as wrk2 does).
#[derive(Clone, Copy, Debug)]
pub struct OpenLoop {
    /// The run's start: every due time counts from here.
    pub origin: Instant,
    /// Between two requests of one connection.
    pub interval: Duration,
    /// This thread's place among the threads (t / threads): the first due times of all
    /// connections of all threads spread evenly over one interval.
    pub phase: f64,
    /// A request staler than this when its connection is free is shed, not sent.
    pub deadline: Option<Duration>,
}

impl OpenLoop {
    /// When the `k`-th request of connection `slot` (of this thread's `n`) is due.
    pub fn due(&self, slot: usize, n: usize, k: u64) -> Instant {
        let offset = (slot as f64 + self.phase) / n.max(1) as f64;
        self.origin + self.interval.mul_f64(k as f64 + offset)
    }
}

impl Load {
    /// Open loop: the idle slots whose next request is due now.
    pub(super) fn send_due(&mut self, now: Instant) {
        while let Some(&Reverse((due, i))) = self.waiting.peek() {
            if due > now {
                return;
            }
            self.waiting.pop();
            let s = &self.slots[i];
            if self.next_due(i) != Some(due) {
                continue; // a reconnect queued the slot again meanwhile
            }
            // Still idle and still waiting for that request; or, a connection per request,
            // closed and waiting to open the next one.
            let idle = s.conn.is_some() && !s.connecting && s.sent_at.is_none();
            let closed = s.conn.is_none() && s.retry_at.is_none();
            if idle {
                self.send_next(i, now);
            } else if closed && self.plan.connection == ConnMode::PerRequest {
                self.open_when_due(i, now);
            }
        }
    }

    pub(super) fn next_due(&self, i: usize) -> Option<Instant> {
        let open = self.plan.open?;
        Some(open.due(i, self.slots.len(), self.slots[i].seq))
    }

    /// Open loop: whether slot `i`'s next request is due now, and if so that due time taken
    /// as the request's (`slot.due`) — shedding those past the deadline, and queueing the slot
    /// until its next one otherwise. Closed loop: always.
    pub(super) fn take_due(&mut self, i: usize, now: Instant) -> bool {
        let Some(open) = self.plan.open else {
            return true;
        };
        let n = self.slots.len();
        loop {
            let slot = &mut self.slots[i];
            let due = open.due(i, n, slot.seq);
            if due > now {
                self.waiting.push(Reverse((due, i)));
                return false;
            }
            slot.seq += 1;
            if open.deadline.is_some_and(|d| now.duration_since(due) > d) {
                self.out.errors.deadline += u64::from(self.recording);
                continue;
            }
            slot.due = Some(due);
            if self.recording {
                let free = slot.free_at.map_or(due, |f| f.max(due));
                let lag = now.saturating_duration_since(free).as_micros().max(1) as u64;
                let _ = self.out.send_lag.record(lag.min(3_600_000_000));
            }
            return true;
        }
    }
}

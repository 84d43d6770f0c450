//! A connection's trail: the last [`TRAIL_LEN`] things the io_uring backend did for it — each
//! arm, submission, completion (result and flags), cancel and close — kept in memory so that a
//! connection found stuck can say how it got there (`Reactor::trail`; the server prints it when
//! a timer has to close a connection). Prints would change the timing that loses a completion;
//! a ring of a few words per step does not. Off (`Config::trail`), a connection holds `None`
//! and each step costs one branch.

use std::fmt::{self, Write};

use io_uring::cqueue;

use super::ops::{OP_HANGUP, OP_POLL, OP_RECV, OP_RECV_MULTI, OP_SEND};
use crate::Recv;

pub(crate) const TRAIL_LEN: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The caller armed a receive: what waited for it (stashed bytes, a stashed end) and whether
    /// a multishot receive was running.
    Arm {
        stashed: usize,
        end: bool,
        running: bool,
    },
    /// An SQE for this connection went into the submission queue.
    Submit { op: u64 },
    /// A completion for this connection was reaped.
    Cqe { op: u64, res: i32, flags: u32 },
    /// An operation of this connection's was cancelled.
    Cancel { op: u64 },
    /// A receive result was handed to the caller: bytes (> 0), end of stream (0), or -errno.
    Deliver { res: i32 },
    /// The connection's operations were cancelled and its descriptor's close queued.
    Close,
}

impl Step {
    /// The step that hands `result` to the caller.
    pub fn delivered(result: &Recv) -> Step {
        let res = match *result {
            Recv::Data(n) => n.min(i32::MAX as usize) as i32,
            Recv::Eof => 0,
            Recv::Error(e) => -e.0,
        };
        Step::Deliver { res }
    }
}

fn op_name(op: u64) -> &'static str {
    match op {
        OP_RECV => "recv",
        OP_RECV_MULTI => "recv_multi",
        OP_SEND => "send",
        OP_POLL => "poll",
        OP_HANGUP => "hangup",
        _ => "op",
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::Arm {
                stashed,
                end,
                running,
            } => write!(
                f,
                "arm(stash={stashed}{}{})",
                if end { ",end" } else { "" },
                if running { ",running" } else { "" }
            ),
            Step::Submit { op } => write!(f, "submit({})", op_name(op)),
            Step::Cqe { op, res, flags } => write!(
                f,
                "cqe({} res={res}{}{})",
                op_name(op),
                if cqueue::more(flags) { " more" } else { "" },
                cqueue::buffer_select(flags).map_or(String::new(), |b| format!(" buf={b}"))
            ),
            Step::Cancel { op } => write!(f, "cancel({})", op_name(op)),
            Step::Deliver { res } => write!(f, "deliver({res})"),
            Step::Close => f.write_str("close"),
        }
    }
}

/// The last [`TRAIL_LEN`] steps of one connection, oldest overwritten first.
#[derive(Default)]
pub(crate) struct Trail {
    steps: [Option<Step>; TRAIL_LEN],
    /// Steps recorded so far; the next goes to `count % TRAIL_LEN`.
    count: usize,
}

impl Trail {
    pub fn push(&mut self, step: Step) {
        self.steps[self.count % TRAIL_LEN] = Some(step);
        self.count += 1;
    }

    /// Oldest first.
    pub fn steps(&self) -> impl Iterator<Item = Step> + '_ {
        let start = self.count.saturating_sub(TRAIL_LEN);
        (start..self.count).filter_map(|i| self.steps[i % TRAIL_LEN])
    }

    /// One line: how many steps were dropped, then the kept ones, oldest first.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let dropped = self.count.saturating_sub(TRAIL_LEN);
        if dropped > 0 {
            let _ = write!(out, "(+{dropped} earlier) ");
        }
        for (i, step) in self.steps().enumerate() {
            let _ = write!(out, "{}{step}", if i > 0 { " → " } else { "" });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_steps_oldest_first_and_counts_the_rest() {
        let mut t = Trail::default();
        assert_eq!(t.render(), "");
        for res in 0..(TRAIL_LEN as i32 + 3) {
            t.push(Step::Deliver { res });
        }
        let kept: Vec<Step> = t.steps().collect();
        assert_eq!(kept.len(), TRAIL_LEN);
        assert_eq!(kept[0], Step::Deliver { res: 3 });
        assert_eq!(
            kept[TRAIL_LEN - 1],
            Step::Deliver {
                res: TRAIL_LEN as i32 + 2
            }
        );
        assert!(t
            .render()
            .starts_with("(+3 earlier) deliver(3) → deliver(4)"));
    }

    #[test]
    fn a_completion_names_its_op_flags_and_buffer() {
        // include/uapi/linux/io_uring.h: F_BUFFER 1, F_MORE 2, the buffer id from bit 16.
        let (more, buffer) = (2, 1 | (7 << 16));
        let step = Step::Cqe {
            op: OP_RECV_MULTI,
            res: 24,
            flags: more | buffer,
        };
        assert_eq!(step.to_string(), "cqe(recv_multi res=24 more buf=7)");
        let end = Step::Cqe {
            op: OP_RECV_MULTI,
            res: -libc::ECONNRESET,
            flags: 0,
        };
        assert_eq!(end.to_string(), "cqe(recv_multi res=-104)");
    }
}

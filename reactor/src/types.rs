//! The reactor's public vocabulary: its configuration, what setup found, the handles it
//! gives out, the events it reports and why it refuses a call. `lib.rs` holds the facade that
//! dispatches to a backend; the backends (`epoll/`, `uring/`) speak these types, and share
//! the state of a connection's operations (`op.rs`).

use std::fmt;
use std::time::Duration;

use crate::sys::Errno;
use wire::{BackendChoice, EpollMode};

#[derive(Clone, Debug)]
pub struct Config {
    pub backend: BackendChoice,
    pub epoll_mode: EpollMode,
    /// Submission queue entries for io_uring (the completion queue gets four times as many).
    pub ring_entries: u32,
    /// TCP_NODELAY on accepted connections: set once on each listener, which Linux copies to
    /// every socket it accepts (no setsockopt per connection).
    pub nodelay: bool,
    /// io_uring: arm receives as "poll first" (`IORING_RECVSEND_POLL_FIRST`), skipping the
    /// attempt that would fail with EAGAIN. Right for a client, whose answer never arrives
    /// before it asked; wrong for a busy server, whose next request often already has.
    pub recv_poll_first: bool,
    /// io_uring: one multishot receive per connection into a ring of provided buffers,
    /// copied into the armed buffer: no SQE and no poll re-arm per receive. On by default (the
    /// server's and the driver's default too: `APP_RECV_MULTISHOT`, `rxload --recv`). Off keeps
    /// one receive SQE per arm, as does a kernel older than 6.10 or one that refuses the ring.
    pub recv_multishot: bool,
    /// Provided buffers (4 KiB each) for multishot receives, rounded up to a power of two. A
    /// turn whose completions need more gets ENOBUFS and re-arms: slower, never wrong.
    pub multishot_buffers: u16,
    /// io_uring: how long [`Reactor::poll_batch`] may hold out for its batch before it returns
    /// with whatever arrived (kernel 6.12's min-wait). Zero, or a kernel without min-wait:
    /// batches are not waited for.
    pub batch_wait: Duration,
    /// io_uring: every connection keeps its last few steps (arms, submissions, completions
    /// with their flags, close) for [`crate::Reactor::trail`]. Off: one branch per step.
    pub trail: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            backend: BackendChoice::Auto,
            epoll_mode: EpollMode::Rx,
            ring_entries: 1024,
            nodelay: true,
            recv_poll_first: false,
            recv_multishot: true,
            multishot_buffers: 1024,
            batch_wait: Duration::from_micros(100),
            trail: false,
        }
    }
}

/// What io_uring setup found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IoUringStatus {
    /// Not tried (`APP_BACKEND=epoll`).
    NotTried,
    /// Running, with these setup flags; `recv_multishot` when receives are multishot.
    Active {
        setup: &'static str,
        recv_multishot: bool,
    },
    /// `io_uring_setup` failed with this errno.
    Unavailable(Errno),
}

/// The backend actually running and, for io_uring, what setup found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BackendReport {
    /// `None` when io_uring runs.
    pub epoll_mode: Option<EpollMode>,
    pub io_uring: IoUringStatus,
}

impl BackendReport {
    /// `io_uring` or `epoll/<mode>`.
    pub fn backend(&self) -> wire::Backend {
        match self.epoll_mode {
            None => wire::Backend::IoUring,
            Some(mode) => wire::Backend::Epoll(mode),
        }
    }

    /// `active(<flags>)`, `active(<flags>,recv_multishot)`, `unavailable(EPERM)` or
    /// `not-tried`.
    pub fn io_uring(&self) -> wire::IoUringState {
        match self.io_uring {
            IoUringStatus::NotTried => wire::IoUringState::NotTried,
            IoUringStatus::Active {
                setup,
                recv_multishot,
            } => wire::IoUringState::Active {
                setup: setup.to_string(),
                recv_multishot,
            },
            // One word: the start-up line separates its fields by spaces (`errno 95`).
            IoUringStatus::Unavailable(e) => {
                wire::IoUringState::Unavailable(e.name().replace(' ', "_"))
            }
        }
    }
}

impl fmt::Display for BackendReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "backend={} io_uring={}", self.backend(), self.io_uring())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("io_uring was requested but is unavailable: io_uring_setup failed with {0}")]
    IoUringUnavailable(Errno),
    #[error("{what} failed: {errno}")]
    Sys { what: &'static str, errno: Errno },
}

/// A connection owned by one reactor. Stale handles (closed connections) are refused.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Conn {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

impl Conn {
    /// A small dense number, unique among the reactor's live connections (for the caller's
    /// own per-connection tables).
    pub fn index(&self) -> usize {
        self.slot as usize
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ListenerId(pub(crate) u32);

/// What a receive produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv {
    /// This many bytes were appended to the buffer.
    Data(usize),
    /// The peer will send no more.
    Eof,
    Error(Errno),
}

/// Readiness interest for [`Reactor::wait_ready`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Interest {
    pub readable: bool,
    pub writable: bool,
}

impl Interest {
    pub const READABLE: Interest = Interest {
        readable: true,
        writable: false,
    };
    pub const WRITABLE: Interest = Interest {
        readable: false,
        writable: true,
    };
    pub(crate) fn is_empty(self) -> bool {
        !self.readable && !self.writable
    }
}

#[derive(Debug)]
pub enum Event {
    Accepted {
        listener: ListenerId,
        conn: Conn,
    },
    /// Accepting failed. When `error.is_out_of_resources()` the listener is paused — no
    /// further accept is tried (a retry would fail at once, in a busy loop) — until
    /// [`Reactor::resume_accept`]; the caller picks the backoff.
    AcceptFailed {
        listener: ListenerId,
        error: Errno,
    },
    /// An armed receive completed; `buf` is the armed buffer, extended by what arrived.
    Received {
        conn: Conn,
        buf: Vec<u8>,
        result: Recv,
    },
    /// A send finished: every byte written, or the error that stopped it.
    Sent {
        conn: Conn,
        buf: Vec<u8>,
        result: Result<(), Errno>,
    },
    /// A [`Reactor::wait_ready`] fired.
    Ready {
        conn: Conn,
        ready: Interest,
    },
    /// A [`Waker`] was woken since the last poll.
    Woken,
}

/// Why an arm or send was refused. The buffer comes back.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct Refused {
    pub reason: RefuseReason,
    pub buf: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefuseReason {
    #[error("the connection is closed (stale handle)")]
    Stale,
    #[error("a receive is already armed on this connection")]
    RecvArmed,
    #[error("a send is already in flight on this connection")]
    SendInFlight,
    #[error("the receive buffer has no spare capacity")]
    NoSpareCapacity,
}

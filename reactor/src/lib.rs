//! One event loop with every receive path rxbench measures.
//!
//! A [`Reactor`] drives connections on the thread that created it. The caller arms a receive
//! with a buffer ([`Reactor::arm_recv`]), hands over whole responses ([`Reactor::send`]) and
//! collects completions from [`Reactor::poll`]. Every backend keeps the same contract:
//!
//! - a receive stays armed until something real happens: bytes ([`Recv::Data`]), end of
//!   stream ([`Recv::Eof`]) or an error ([`Recv::Error`]); `EAGAIN` never surfaces;
//! - a send completes once every byte was written, or with the error that stopped it;
//! - buffers travel by value and always come back in the completion.
//!
//! Backends: io_uring (every accept, receive and send an SQE; one `io_uring_enter` per loop
//! turn) and epoll in three modes, see [`EpollMode`]. [`BackendChoice::Auto`] falls back from
//! io_uring to epoll on any setup error and keeps the errno in [`BackendReport`].
//!
//! Every syscall goes through one counting module; [`Reactor::counts`] reads the counters.
//!
//! The reactor is neither `Send` nor `Sync`, so it cannot be armed from another thread:
//!
//! ```compile_fail
//! let reactor = reactor::Reactor::new(&reactor::Config::default()).unwrap();
//! std::thread::spawn(move || drop(reactor));
//! ```
//!
//! Other threads reach it through a [`Waker`], which is `Send + Sync`:
//!
//! ```no_run
//! let reactor = reactor::Reactor::new(&reactor::Config::default()).unwrap();
//! let waker = reactor.waker();
//! std::thread::spawn(move || waker.wake()).join().unwrap();
//! ```

pub mod affinity;
mod epoll;
mod op;
mod slab;
mod sys;
mod thread_cpu;
mod types;
mod uring;

use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

pub use sys::{Errno, Syscall, SyscallCounts};
pub use thread_cpu::ThreadCpu;
pub use types::{
    BackendReport, Config, Conn, Event, Interest, IoUringStatus, ListenerId, Recv, RefuseReason,
    Refused, SetupError,
};

/// The epoll backend's per-fd registration hints: public only for the regression test that
/// plants a stale hint on a reused fd number (tests/fd_reuse.rs).
#[doc(hidden)]
pub use epoll::fdtable;

// The knob values are the contract with whoever starts the server: defined in `wire`.
pub use wire::{BackendChoice, BadChoice, EpollMode};

/// Wakes a reactor from another thread: its next (or current) poll returns [`Event::Woken`].
#[derive(Clone)]
pub struct Waker {
    fd: Arc<OwnedFd>,
}

impl Waker {
    pub fn wake(&self) {
        // The Arc keeps the eventfd open for as long as any Waker can write to it.
        sys::eventfd_write(self.fd.as_raw_fd());
    }
}

// Both variants are large and one reactor lives per thread: boxing would only add a hop.
#[allow(clippy::large_enum_variant)]
enum Backend {
    Epoll(epoll::Epoll),
    Uring(uring::Uring),
}

/// One event loop. Not `Send`: it is driven only by the thread that created it.
pub struct Reactor {
    backend: Backend,
    report: BackendReport,
    waker: Waker,
    _not_send: PhantomData<*const ()>,
}

macro_rules! dispatch {
    ($self:ident, $b:ident => $e:expr) => {
        match &mut $self.backend {
            Backend::Epoll($b) => $e,
            Backend::Uring($b) => $e,
        }
    };
}

impl Reactor {
    pub fn new(config: &Config) -> Result<Reactor, SetupError> {
        let wake_fd = sys::eventfd().map_err(|errno| SetupError::Sys {
            what: "eventfd",
            errno,
        })?;
        // SAFETY: eventfd just returned this fd and nothing else owns it.
        let waker = Waker {
            fd: Arc::new(unsafe { OwnedFd::from_raw_fd(wake_fd) }),
        };
        let uring_status = match config.backend {
            BackendChoice::Epoll => Err(None),
            BackendChoice::Auto | BackendChoice::IoUring => {
                uring::Uring::new(config, wake_fd).map_err(Some)
            }
        };
        let (backend, report) = match uring_status {
            Ok(ring) => {
                let report = BackendReport {
                    epoll_mode: None,
                    io_uring: IoUringStatus::Active {
                        setup: ring.setup_flags(),
                        recv_multishot: ring.multishot(),
                    },
                };
                (Backend::Uring(ring), report)
            }
            Err(Some(errno)) if config.backend == BackendChoice::IoUring => {
                return Err(SetupError::IoUringUnavailable(errno))
            }
            Err(why) => {
                let epoll =
                    epoll::Epoll::new(config, wake_fd).map_err(|errno| SetupError::Sys {
                        what: "epoll_create1",
                        errno,
                    })?;
                let report = BackendReport {
                    epoll_mode: Some(config.epoll_mode),
                    io_uring: why.map_or(IoUringStatus::NotTried, IoUringStatus::Unavailable),
                };
                (Backend::Epoll(epoll), report)
            }
        };
        Ok(Reactor {
            backend,
            report,
            waker,
            _not_send: PhantomData,
        })
    }

    pub fn report(&self) -> BackendReport {
        self.report
    }

    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    pub fn counts(&self) -> SyscallCounts {
        match &self.backend {
            Backend::Epoll(b) => b.sys.counts,
            Backend::Uring(b) => b.sys.counts,
        }
    }

    /// What the loop's turns did so far ([`wire::TurnCounters`]).
    pub fn turns(&self) -> wire::TurnCounters {
        match &self.backend {
            Backend::Epoll(b) => b.sys.turns,
            Backend::Uring(b) => b.sys.turns,
        }
    }

    /// Accepts connections from a listening socket (made non-blocking here); each arrives as
    /// [`Event::Accepted`].
    pub fn listen(&mut self, listener: OwnedFd) -> Result<ListenerId, Errno> {
        dispatch!(self, b => b.sys.set_nonblocking(listener.as_raw_fd()))?;
        dispatch!(self, b => b.listen(listener))
    }

    /// Stops accepting on `id` and closes that listener.
    pub fn unlisten(&mut self, id: ListenerId) {
        dispatch!(self, b => b.unlisten(id))
    }

    /// Accepts again on a listener paused by an out-of-resources [`Event::AcceptFailed`]
    /// (connections that queued meanwhile are accepted then).
    pub fn resume_accept(&mut self, id: ListenerId) {
        dispatch!(self, b => b.resume_accept(id))
    }

    /// Takes over an already connected socket (made non-blocking here).
    pub fn register(&mut self, fd: OwnedFd) -> Result<Conn, Errno> {
        dispatch!(self, b => b.sys.set_nonblocking(fd.as_raw_fd()))?;
        Ok(dispatch!(self, b => b.register(fd)))
    }

    /// The fd behind `conn`, for socket options and diagnostics; `None` if closed.
    pub fn fd(&self, conn: Conn) -> Option<RawFd> {
        match &self.backend {
            Backend::Epoll(b) => b.fd(conn),
            Backend::Uring(b) => b.fd(conn),
        }
    }

    /// What the backend last did for `conn` (io_uring with `Config::trail`), one line, oldest
    /// step first: for a connection found stuck, how it got there. `None` otherwise.
    pub fn trail(&self, conn: Conn) -> Option<String> {
        match &self.backend {
            Backend::Epoll(_) => None,
            Backend::Uring(b) => b.trail(conn),
        }
    }

    /// Arms one receive into the spare capacity of `buf` (`capacity - len` bytes at most).
    pub fn arm_recv(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        if buf.len() == buf.capacity() {
            return Err(Refused {
                reason: RefuseReason::NoSpareCapacity,
                buf,
            });
        }
        dispatch!(self, b => b.arm_recv(conn, buf))
    }

    /// Sends all of `buf`; completes with [`Event::Sent`].
    pub fn send(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        dispatch!(self, b => b.send(conn, buf))
    }

    /// One-shot readiness wait, completing with [`Event::Ready`]. On epoll this takes the fd
    /// off the RX path until the next receive is armed.
    pub fn wait_ready(&mut self, conn: Conn, interest: Interest) -> Result<(), RefuseReason> {
        dispatch!(self, b => b.wait_ready(conn, interest))
    }

    /// Sends a FIN (`shutdown(SHUT_WR)`); receiving goes on, so a server can read what the
    /// client still sends before closing (lingering close). Call it once the last
    /// [`Event::Sent`] arrived: io_uring may run it before a send still in flight.
    pub fn shutdown_write(&mut self, conn: Conn) {
        dispatch!(self, b => b.shutdown_write(conn))
    }

    /// Closes the connection. Armed buffers are dropped; no further events arrive for it.
    pub fn close(&mut self, conn: Conn) {
        dispatch!(self, b => b.close(conn))
    }

    /// Runs one loop turn: waits up to `timeout` (`None`: until something happens) and
    /// appends completions to `events`. Returns early when completions are already pending.
    pub fn poll(
        &mut self,
        events: &mut Vec<Event>,
        timeout: Option<Duration>,
    ) -> Result<(), Errno> {
        self.poll_batch(events, timeout, 1)
    }

    /// Moves to `events` what completed during the caller's own calls since the last poll —
    /// a send written at once, a receive served from bytes already in hand — so that the
    /// caller handles them in the turn that caused them instead of one poll later. No
    /// syscall; a caller that never asks gets them from the next poll, as before.
    pub fn take_completed(&mut self, events: &mut Vec<Event>) {
        dispatch!(self, b => events.append(&mut b.pending))
    }

    /// Whether [`Reactor::poll_batch`] can wait for a batch (io_uring on kernel 6.12+).
    pub fn batches_waits(&self) -> bool {
        matches!(&self.backend, Backend::Uring(b) if b.batches_waits())
    }

    /// [`Reactor::poll`] that, on io_uring, sleeps until `batch` completions are ready — or
    /// `Config::batch_wait` has passed and at least one is — so a client whose answers trickle
    /// in wakes once per batch instead of once per answer. epoll returns at the first event.
    pub fn poll_batch(
        &mut self,
        events: &mut Vec<Event>,
        timeout: Option<Duration>,
        batch: usize,
    ) -> Result<(), Errno> {
        match &mut self.backend {
            Backend::Epoll(b) => b.poll(events, timeout),
            Backend::Uring(b) => b.poll(events, timeout, batch),
        }
    }
}

/// Milliseconds for epoll_wait, rounded up so that a short timeout does not spin.
pub(crate) fn timeout_ms(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(i32::MAX as u128) as i32
        }
    }
}

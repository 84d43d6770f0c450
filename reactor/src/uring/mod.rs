//! The io_uring backend: accepts, receives, sends, readiness waits, closes and the waker are
//! all SQEs; each `poll` is one `io_uring_enter` that submits what the last turn queued and
//! waits for at least one completion.
//!
//! With `Config::recv_multishot`, each connection gets one multishot receive for its lifetime:
//! the kernel picks a buffer from a provided-buffer ring ([`BufRing`]) per completion and the
//! bytes are copied into the caller's armed buffer — or kept in the connection's stash until the
//! next arm. That saves the per-receive SQE and the poll arm/disarm a one-shot receive pays.
//!
//! Buffer invariant (the reason for the unsafe blocks): an SQE only ever points into a buffer
//! owned by a slab entry (or by the reactor, for the waker), and that buffer is neither touched
//! nor dropped until the SQE's completion is reaped. A closed connection's entry therefore stays
//! in the slab, marked closed, until its last in-flight operation completes.

mod bufring;
mod multishot;
mod ops;
mod trail;

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::op::{admit, InFlight, Op, Sending};
use crate::slab::Slab;
use crate::sys::{Errno, Sys};
use crate::{Config, Conn, Event, Interest, ListenerId, Recv, RefuseReason, Refused};
use bufring::BufRing;
use multishot::{MULTISHOT_BUF_SIZE, MULTISHOT_GROUP};
use ops::{
    conn_data, op_data, Plain, GENERATION_MASK, OP_ACCEPT, OP_HANGUP, OP_POLL, OP_RECV,
    OP_RECV_MULTI, OP_SEND, OP_WAKE,
};
use trail::{Step, Trail};

/// `IORING_RECVSEND_POLL_FIRST` (kernel 5.19), from include/uapi/linux/io_uring.h.
const IORING_RECVSEND_POLL_FIRST: u16 = 1;

type Setup = fn(&mut io_uring::Builder);

/// Setup flag sets, newest first; each is dropped when the kernel answers EINVAL.
const SETUPS: [(&str, Setup); 3] = [
    ("defer_taskrun+single_issuer", |b| {
        b.setup_defer_taskrun().setup_single_issuer();
    }),
    ("coop_taskrun", |b| {
        b.setup_coop_taskrun();
    }),
    ("plain", |_| {}),
];

/// Where the caller's receive buffer is.
#[derive(Default)]
enum RecvState {
    /// No receive armed.
    #[default]
    Idle,
    /// A one-shot receive SQE points into this buffer's spare capacity: the kernel may be
    /// writing it until the completion is reaped.
    Submitted(Vec<u8>),
    /// Multishot: the buffer waits for the connection's next completion (the kernel writes
    /// into the provided-buffer ring, never into it).
    Parked(Vec<u8>),
}

/// A multishot connection's watch for its peer's end ([`Uring::watch_hangup`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hangup {
    Unarmed,
    Armed,
    Fired,
}

/// The connection's multishot receive. While not `Off` it holds one `in_flight` count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Multishot {
    Off,
    Running,
    /// Cancelled — the stash is full, or the peer hung up while it ran — its last completion
    /// turns it `Off`.
    Stopping,
}

struct UConn {
    /// `None` once the close is queued.
    fd: Option<OwnedFd>,
    recv: RecvState,
    send: Option<Sending>,
    want: Interest,
    in_flight: u32,
    multishot: Multishot,
    /// Multishot: bytes that arrived while no receive was armed, or that did not fit.
    stash: Vec<u8>,
    /// Multishot: the end of stream or error that followed the stash.
    stash_end: Option<Recv>,
    /// Multishot: the connection's hangup watch, `Armed` while its poll is in flight (one
    /// `in_flight` count), `Fired` once the peer's FIN, reset or error came.
    hangup: Hangup,
    /// The connection's last steps, when `Config::trail` is on ([`trail`]).
    trail: Option<Box<Trail>>,
}

impl UConn {
    fn record(&mut self, step: Step) {
        if let Some(trail) = &mut self.trail {
            trail.push(step);
        }
    }

    /// The buffer parked for the next multishot completion, if one is.
    fn take_parked(&mut self) -> Option<Vec<u8>> {
        match std::mem::take(&mut self.recv) {
            RecvState::Parked(buf) => Some(buf),
            other => {
                self.recv = other;
                None
            }
        }
    }
}

pub(crate) struct Uring {
    ring: IoUring,
    setup_flags: &'static str,
    nodelay: bool,
    recv_ioprio: u16,
    conns: Slab<UConn>,
    listeners: Vec<Option<OwnedFd>>,
    /// Multishot accept unsupported (kernel < 5.19): one Accept SQE per connection.
    single_accept: bool,
    wake_fd: RawFd,
    wake_buf: Box<u64>,
    pub(crate) pending: Vec<Event>,
    cqes: Vec<(u64, i32, u32)>,
    /// Connections whose hangup watch fired this turn ([`Uring::restart_after_hangup`]).
    hung_up: Vec<Conn>,
    /// When connections whose receive runs next get their hangup watch
    /// ([`Uring::watch_running`]); `None` until the first wait.
    next_watch: Option<std::time::Instant>,
    /// Present when multishot receives are on (`Config::recv_multishot` and the kernel took
    /// the ring). Declared after `ring`, and unregistered in `Drop` before either goes.
    bufring: Option<BufRing>,
    /// Min-wait for batched waits, in µs; `None` when the kernel has no min-wait (< 6.12) or
    /// `Config::batch_wait` is zero — a zero min-wait would hold out for the whole batch.
    batch_wait_usec: Option<u32>,
    /// Every connection keeps a [`Trail`] (`Config::trail`).
    trail: bool,
    pub sys: Sys,
}

/// An open connection and its descriptor ([`Uring::open`]).
impl InFlight for (&mut UConn, RawFd) {
    fn recv_armed(&self) -> bool {
        !matches!(self.0.recv, RecvState::Idle)
    }
    fn send_in_flight(&self) -> bool {
        self.0.send.is_some()
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // Closes queued since the last enter (a connection per request closes one a
        // response) would otherwise never run: their descriptors would stay open after the
        // reactor, one per connection, until the process ran out. Submitted now, they run
        // inline; whatever else the queue held is cancelled with the ring. An empty queue
        // costs no enter.
        if !self.ring.submission().is_empty() {
            let _ = self.sys.io_uring_submit(&self.ring.submitter());
        }
        if let Some(bufring) = &self.bufring {
            let _ = self
                .sys
                .unregister_buf_ring(&self.ring.submitter(), bufring.group);
        }
    }
}

impl Uring {
    pub fn new(config: &Config, wake_fd: RawFd) -> Result<Uring, Errno> {
        let mut last = Errno(libc::EINVAL);
        for (name, apply) in SETUPS {
            let mut builder = IoUring::builder();
            builder.setup_cqsize(config.ring_entries.saturating_mul(4));
            apply(&mut builder);
            match crate::sys::io_uring_setup(&builder, config.ring_entries) {
                Ok(ring) => {
                    let mut uring = Uring {
                        ring,
                        setup_flags: name,
                        nodelay: config.nodelay,
                        recv_ioprio: if config.recv_poll_first {
                            IORING_RECVSEND_POLL_FIRST
                        } else {
                            0
                        },
                        conns: Slab::new(),
                        listeners: Vec::new(),
                        single_accept: false,
                        wake_fd,
                        wake_buf: Box::new(0),
                        pending: Vec::new(),
                        cqes: Vec::with_capacity(256),
                        hung_up: Vec::new(),
                        next_watch: None,
                        bufring: None,
                        batch_wait_usec: None,
                        trail: config.trail,
                        sys: Sys::default(),
                    };
                    let usec = config.batch_wait.as_micros().min(u32::MAX as u128) as u32;
                    if usec > 0 && uring.ring.params().is_feature_min_timeout() {
                        uring.batch_wait_usec = Some(usec);
                    }
                    // Multishot receives arrived in 6.0 without a feature flag of their own;
                    // the bundle flag (6.10) proves them without a failing first receive. An
                    // older kernel keeps one receive SQE per arm.
                    if config.recv_multishot && uring.ring.params().is_feature_recvsend_bundle() {
                        uring.bufring = BufRing::new(
                            &mut uring.sys,
                            &uring.ring.submitter(),
                            config
                                .multishot_buffers
                                .clamp(1, 1 << 15)
                                .next_power_of_two(),
                            MULTISHOT_BUF_SIZE,
                            MULTISHOT_GROUP,
                        )
                        .ok();
                    }
                    uring.arm_wake();
                    return Ok(uring);
                }
                Err(e) => {
                    last = e;
                    if last.0 != libc::EINVAL {
                        break; // EPERM, ENOSYS, ENOMEM: no flag set will help
                    }
                }
            }
        }
        Err(last)
    }

    pub fn setup_flags(&self) -> &'static str {
        self.setup_flags
    }

    pub fn batches_waits(&self) -> bool {
        self.batch_wait_usec.is_some()
    }

    /// Whether receives are multishot (the buffer ring was registered).
    pub fn multishot(&self) -> bool {
        self.bufring.is_some()
    }

    /// Queues `sqe`, handing the queue to the kernel first when it is full.
    ///
    /// # Safety
    ///
    /// Every buffer `sqe` points into is owned by a slab entry (or by the reactor, for the
    /// waker) and is neither touched nor dropped until this SQE's completion is reaped: the
    /// module's buffer invariant. [`Uring::push_plain`] is the safe way for an SQE that
    /// points at no memory.
    unsafe fn push(&mut self, sqe: squeue::Entry) {
        loop {
            // SAFETY: the memory `sqe` points at outlives it (this function's contract).
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return;
            }
            // Submission queue full: hand it to the kernel now.
            if let Err(Errno(libc::EBUSY)) = self.sys.io_uring_submit(&self.ring.submitter()) {
                self.reap(); // completion queue full: make room first
            }
        }
    }

    /// Queues an SQE that points at no memory of ours (accept without an address, poll,
    /// cancel, close, a multishot receive into the provided-buffer ring).
    fn push_plain(&mut self, op: Plain) {
        // SAFETY: a `Plain` operation points at no memory (its entry carries descriptors and
        // numbers only), so nothing could be dropped before its completion.
        unsafe { self.push(op.entry()) }
    }

    fn arm_wake(&mut self) {
        let buf: *mut u64 = &mut *self.wake_buf;
        let sqe = opcode::Read::new(types::Fd(self.wake_fd), buf.cast(), 8)
            .build()
            .user_data(op_data(OP_WAKE, 0));
        // SAFETY: `wake_buf` is a Box the reactor owns; the ring, declared before it, goes
        // first on drop, and the read is re-armed only after its completion.
        unsafe { self.push(sqe) };
    }

    fn arm_accept(&mut self, index: u32) {
        let Some(Some(listener)) = self.listeners.get(index as usize) else {
            return;
        };
        self.push_plain(Plain::Accept {
            fd: listener.as_raw_fd(),
            multishot: !self.single_accept,
            user_data: op_data(OP_ACCEPT, index),
        });
    }

    pub fn listen(&mut self, listener: OwnedFd) -> Result<ListenerId, Errno> {
        if self.nodelay {
            // Inherited by every accepted socket. Best effort: one that refuses still works.
            let _ = self.sys.set_nodelay(listener.as_raw_fd());
        }
        let index = self.listeners.len() as u32;
        self.listeners.push(Some(listener));
        self.arm_accept(index);
        Ok(ListenerId(index))
    }

    pub fn unlisten(&mut self, id: ListenerId) {
        if let Some(fd) = self.listeners.get_mut(id.0 as usize).and_then(Option::take) {
            self.push_plain(Plain::Cancel {
                target: op_data(OP_ACCEPT, id.0),
            });
            self.push_plain(Plain::Close {
                fd: fd.into_raw_fd(),
            });
        }
    }

    pub fn register(&mut self, fd: OwnedFd) -> Conn {
        self.conns.insert(UConn {
            fd: Some(fd),
            recv: RecvState::Idle,
            send: None,
            want: Interest::default(),
            in_flight: 0,
            multishot: Multishot::Off,
            stash: Vec::new(),
            stash_end: None,
            hangup: Hangup::Unarmed,
            trail: self.trail.then(Box::default),
        })
    }

    /// The connection's trail, oldest step first; `None` when trails are off or it is gone.
    pub fn trail(&self, conn: Conn) -> Option<String> {
        Some(self.conns.get(conn)?.trail.as_ref()?.render())
    }

    fn open(&mut self, conn: Conn) -> Option<(&mut UConn, RawFd)> {
        let c = self.conns.get_mut(conn)?;
        let fd = c.fd.as_ref()?.as_raw_fd();
        Some((c, fd))
    }

    pub fn fd(&self, conn: Conn) -> Option<RawFd> {
        self.conns.get(conn)?.fd.as_ref().map(|f| f.as_raw_fd())
    }

    pub fn arm_recv(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        if self.bufring.is_some() {
            self.arm_recv_multishot(conn, buf)
        } else {
            self.arm_recv_single(conn, buf)
        }
    }

    /// One receive SQE into the buffer's spare capacity.
    fn arm_recv_single(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        let ioprio = self.recv_ioprio;
        let ((c, fd), mut buf) = admit(self.open(conn), Op::Recv, buf)?;
        let spare = buf.spare_capacity_mut();
        let len = spare.len().min(u32::MAX as usize) as u32;
        let sqe = opcode::Recv::new(types::Fd(fd), spare.as_mut_ptr().cast(), len)
            .ioprio(ioprio)
            .build()
            .user_data(conn_data(OP_RECV, conn));
        // Moving the Vec into the slab entry moves its header, not the heap bytes the SQE
        // points at.
        c.recv = RecvState::Submitted(buf);
        c.in_flight += 1;
        c.record(Step::Submit { op: OP_RECV });
        // SAFETY: the receive points into the buffer of `c.recv`, which the slab entry keeps,
        // untouched, until this completion is reaped (`on_recv` takes it back then).
        unsafe { self.push(sqe) };
        Ok(())
    }

    /// Submits what the connection's send has left, if it is open and has one.
    fn submit_send(&mut self, conn: Conn) {
        let Some((c, fd)) = self.open(conn) else {
            return;
        };
        let Some(send) = &c.send else {
            return;
        };
        let rest = send.rest();
        let len = rest.len().min(u32::MAX as usize) as u32;
        let sqe = opcode::Send::new(types::Fd(fd), rest.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(conn_data(OP_SEND, conn));
        c.in_flight += 1;
        c.record(Step::Submit { op: OP_SEND });
        // SAFETY: the send points into `c.send`, which the slab entry keeps, untouched, until
        // this completion is reaped (`on_send` takes it back or sends the rest then).
        unsafe { self.push(sqe) };
    }

    pub fn send(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        let ((c, _), buf) = admit(self.open(conn), Op::Send, buf)?;
        if buf.is_empty() {
            self.pending.push(Event::Sent {
                conn,
                buf,
                result: Ok(()),
            });
            return Ok(());
        }
        c.send = Some(Sending::new(buf));
        self.submit_send(conn);
        Ok(())
    }

    pub fn wait_ready(&mut self, conn: Conn, interest: Interest) -> Result<(), RefuseReason> {
        let (c, fd) = self.open(conn).ok_or(RefuseReason::Stale)?;
        c.want.readable |= interest.readable;
        c.want.writable |= interest.writable;
        let mut mask = 0;
        if c.want.readable {
            mask |= libc::POLLIN | libc::POLLRDHUP;
        }
        if c.want.writable {
            mask |= libc::POLLOUT;
        }
        c.in_flight += 1;
        self.push_plain(Plain::PollAdd {
            fd,
            mask: mask as u32,
            user_data: conn_data(OP_POLL, conn),
        });
        Ok(())
    }

    /// A direct shutdown(2), not an `IORING_OP_SHUTDOWN`: the kernel runs that op on an io-wq
    /// thread, which looks the descriptor up by number only when it runs — after a close
    /// and the next accept had reused the number, it shut the new connection down (its
    /// response lost behind a FIN; `app/tests/per_request.rs`). One syscall per closing
    /// connection, and no io-wq wake-up.
    pub fn shutdown_write(&mut self, conn: Conn) {
        if let Some((_, fd)) = self.open(conn) {
            let _ = self.sys.shutdown_write(fd);
        }
    }

    pub fn close(&mut self, conn: Conn) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let Some(fd) = c.fd.take() else {
            return;
        };
        let in_flight = [
            (matches!(c.recv, RecvState::Submitted(_)), OP_RECV),
            (c.multishot != Multishot::Off, OP_RECV_MULTI),
            (c.send.is_some(), OP_SEND),
            (!c.want.is_empty(), OP_POLL),
            (c.hangup == Hangup::Armed, OP_HANGUP),
        ];
        let idle = c.in_flight == 0;
        c.record(Step::Close);
        for (_, op) in in_flight.into_iter().filter(|(busy, _)| *busy) {
            self.push_plain(Plain::Cancel {
                target: conn_data(op, conn),
            });
        }
        // In-flight operations hold their own reference to the socket, so closing the number
        // now is safe; their completions (ECANCELED, usually) release the slot.
        self.push_plain(Plain::Close {
            fd: fd.into_raw_fd(),
        });
        if idle {
            self.conns.remove(conn);
        }
    }

    pub fn poll(
        &mut self,
        out: &mut Vec<Event>,
        timeout: Option<Duration>,
        batch: usize,
    ) -> Result<(), Errno> {
        let wait = if self.pending.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        // A min-wait is a second timer the kernel arms for every wait; it only pays when
        // there is a batch to hold out for. A one-completion wait (`poll`: the server's) has
        // none, so it waits as epoll does, on its timeout alone.
        let (want, min_wait) = match (wait, self.batch_wait_usec) {
            (Some(Duration::ZERO), _) | (_, None) => (1, 0),
            _ if batch <= 1 => (1, 0),
            (_, Some(usec)) => (batch, usec),
        };
        let ts = wait.map(types::Timespec::from);
        let result = self
            .sys
            .io_uring_enter(&self.ring.submitter(), want, ts.as_ref(), min_wait);
        match result {
            Ok(_) | Err(Errno(libc::ETIME | libc::EINTR | libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        self.reap();
        if self.bufring.is_some() {
            self.watch_running();
        }
        out.append(&mut self.pending);
        Ok(())
    }

    fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        self.sys.turns.reaped += cqes.len() as u64;
        for &(ud, res, flags) in &cqes {
            match ud >> 56 {
                OP_RECV => self.on_recv(ud, res),
                OP_RECV_MULTI => self.on_recv_multi(ud, res, flags),
                OP_HANGUP => self.on_hangup(ud, res),
                OP_SEND => self.on_send(ud, res),
                OP_POLL => self.on_poll(ud, res),
                OP_ACCEPT => self.on_accept(ud as u32, res, flags),
                OP_WAKE => {
                    self.pending.push(Event::Woken);
                    self.arm_wake();
                }
                _ => {}
            }
        }
        cqes.clear();
        self.cqes = cqes;
        self.restart_after_hangup();
        if let Some(bufring) = &self.bufring {
            bufring.publish(); // the buffers recycled this turn, before the next submit
        }
    }

    /// The connection a completion's `user_data` names, while it still occupies its slot.
    fn conn_of(&self, ud: u64) -> Option<Conn> {
        let conn = self.conns.handle(ud as u32)?;
        let generation = (ud >> 32) as u32 & GENERATION_MASK;
        // The buffer invariant keeps a slot from being reused while an operation is in
        // flight, so a mismatch would be a breach of it: never acted on.
        (conn.generation & GENERATION_MASK == generation).then_some(conn)
    }

    /// The connection a completed operation belongs to, with its in-flight count already
    /// decremented; `None` (and the slot released when idle) if it was closed meanwhile.
    fn completed(&mut self, ud: u64, res: i32) -> Option<Conn> {
        let conn = self.conn_of(ud)?;
        let c = self.conns.get_mut(conn)?;
        c.in_flight -= 1;
        c.record(Step::Cqe {
            op: ud >> 56,
            res,
            flags: 0,
        });
        if c.fd.is_some() {
            return Some(conn);
        }
        if c.in_flight == 0 {
            self.conns.remove(conn); // drops the buffers: the kernel is done with them
        }
        None
    }

    fn on_recv(&mut self, ud: u64, res: i32) {
        let Some(conn) = self.completed(ud, res) else {
            return;
        };
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        // The receive's completion is the only way out of `Submitted` for an open connection.
        let RecvState::Submitted(mut buf) = std::mem::take(&mut c.recv) else {
            return;
        };
        let result = match res {
            0 => Recv::Eof,
            n if n > 0 => {
                // SAFETY: the kernel wrote exactly `n` bytes into the spare capacity this
                // receive pointed at (module invariant: the buffer was untouched meanwhile).
                unsafe { buf.set_len(buf.len() + n as usize) };
                Recv::Data(n as usize)
            }
            e if -e == libc::EAGAIN || -e == libc::EINTR => {
                let _ = self.arm_recv(conn, buf);
                return;
            }
            e => Recv::Error(Errno(-e)),
        };
        c.record(Step::Deliver { res });
        self.pending.push(Event::Received { conn, buf, result });
    }

    fn on_send(&mut self, ud: u64, res: i32) {
        let Some(conn) = self.completed(ud, res) else {
            return;
        };
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let Some(mut send) = c.send.take() else {
            return;
        };
        let result = match res {
            n if n >= 0 => send.advance(n as usize).then_some(Ok(())),
            e if -e == libc::EAGAIN || -e == libc::EINTR => None,
            e => Some(Err(Errno(-e))),
        };
        let Some(result) = result else {
            // A short send, or an interrupted one: the rest goes in a new SQE.
            c.send = Some(send);
            self.submit_send(conn);
            return;
        };
        self.pending.push(Event::Sent {
            conn,
            buf: send.into_buf(),
            result,
        });
    }

    fn on_poll(&mut self, ud: u64, res: i32) {
        let Some(conn) = self.completed(ud, res) else {
            return;
        };
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        // An error result still means "go and look": the caller's next call sees the error.
        let bits = if res < 0 { -1 } else { res };
        let hangup = bits & (libc::POLLHUP | libc::POLLERR) as i32 != 0;
        let ready = Interest {
            readable: c.want.readable
                && (hangup || bits & (libc::POLLIN | libc::POLLRDHUP) as i32 != 0),
            writable: c.want.writable && (hangup || bits & libc::POLLOUT as i32 != 0),
        };
        c.want.readable &= !ready.readable;
        c.want.writable &= !ready.writable;
        if !ready.is_empty() {
            self.pending.push(Event::Ready { conn, ready });
        }
    }

    fn on_accept(&mut self, index: u32, res: i32, flags: u32) {
        let listening = matches!(self.listeners.get(index as usize), Some(Some(_)));
        if res >= 0 {
            // SAFETY: a successful accept completion carries a new fd that nothing else owns.
            let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(res) };
            if !listening {
                return; // raced with unlisten: drop (close) it
            }
            let conn = self.register(fd);
            self.pending.push(Event::Accepted {
                listener: ListenerId(index),
                conn,
            });
        } else if -res == libc::EINVAL && !self.single_accept {
            self.single_accept = true; // kernel without multishot accept
        } else if listening && -res != libc::ECANCELED {
            let error = Errno(-res);
            self.pending.push(Event::AcceptFailed {
                listener: ListenerId(index),
                error,
            });
            if error.is_out_of_resources() {
                // Re-armed, the accept would fail again at once: paused until resume_accept.
                if cqueue::more(flags) {
                    self.push_plain(Plain::Cancel {
                        target: op_data(OP_ACCEPT, index),
                    });
                }
                return;
            }
        }
        if listening && (self.single_accept || !cqueue::more(flags)) {
            self.arm_accept(index);
        }
    }

    pub fn resume_accept(&mut self, id: ListenerId) {
        if matches!(self.listeners.get(id.0 as usize), Some(Some(_))) {
            self.arm_accept(id.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_reaches_the_connection_it_was_for_not_a_later_occupant_of_its_slot() {
        let wake = crate::sys::eventfd().unwrap();
        let mut uring = Uring::new(&Config::default(), wake).unwrap();
        let pair = || OwnedFd::from(std::os::unix::net::UnixStream::pair().unwrap().0);
        let first = uring.register(pair());
        let old = conn_data(OP_RECV, first);
        assert_eq!(old >> 56, OP_RECV);
        assert_eq!(uring.conn_of(old), Some(first));
        uring.close(first); // idle: its slot is free at once
        let second = uring.register(pair());
        assert_eq!(second.slot, first.slot, "the slot is reused");
        assert_eq!(
            uring.conn_of(old),
            None,
            "the earlier occupant's completion"
        );
        assert_eq!(uring.conn_of(conn_data(OP_SEND, second)), Some(second));
        drop(uring);
        // SAFETY: the test's own eventfd, closed once, after the ring that read it.
        unsafe { libc::close(wake) };
    }
}

//! The epoll backend: one poller, two registration paths.
//!
//! - RX path (`EpollMode::Rx`): a connection is added once, `EPOLLIN|EPOLLRDHUP|EPOLLET`;
//!   the first send that fills its socket adds `EPOLLOUT` with one MOD, and from then on
//!   every such send waits for the OUT edge — no `epoll_ctl` per request either way (a fresh
//!   socket registered for OUT would report its writability to the first wait, for
//!   nothing). Readiness sets `readable`; an armed buffer is filled straight
//!   away. A short read means the socket is drained (unless the peer hung up), so no EAGAIN
//!   recv follows. A full buffer, or an edge while nothing is armed, leaves `readable` set:
//!   the next arm queues the connection and it is received before the next wait, so no byte
//!   waits behind an edge already consumed.
//! - One-shot path (`Oneshot`, `Legacy`, and any `wait_ready`): each wait is `EPOLLONESHOT`.
//!   Oneshot re-arms with the MOD the fd-table hint calls for; Legacy always tries ADD first
//!   (EEXIST, then MOD), as the framework that motivated rxbench did before its fix.
//!
//! Both paths call `update_registration`, which only touches the kernel when what is needed
//! differs from what is registered.

pub mod fdtable;

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::op::{admit, InFlight, Op, Sending};
use crate::slab::Slab;
use crate::sys::{Errno, Sys};
use crate::{
    timeout_ms, Config, Conn, EpollMode, Event, Interest, ListenerId, Recv, RefuseReason, Refused,
};
use fdtable::Registration;

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const RDHUP: u32 = libc::EPOLLRDHUP as u32;
const HUP: u32 = libc::EPOLLHUP as u32;
const ERR: u32 = libc::EPOLLERR as u32;
const ET: u32 = libc::EPOLLET as u32;
const ONESHOT: u32 = libc::EPOLLONESHOT as u32;

// Token layout: kind in the top two bits, then 30 bits of slot generation, then the slot.
const KIND_CONN: u64 = 0;
const KIND_LISTENER: u64 = 1;
const KIND_WAKE: u64 = 2;

fn token(kind: u64, slot: u32, generation: u32) -> u64 {
    (kind << 62) | (u64::from(generation & 0x3fff_ffff) << 32) | u64::from(slot)
}

struct EConn {
    fd: OwnedFd,
    /// fd-table generation of this connection.
    fd_gen: u32,
    /// The armed buffer: filled by the next read the socket allows.
    recv: Option<Vec<u8>>,
    send: Option<Sending>,
    /// Outstanding `wait_ready` interest.
    want: Interest,
    flags: Flags,
    /// What is registered: on the one-shot path, the armed mask (0 once fired); on the RX
    /// path, the ET mask.
    registered: u32,
}

/// A connection's receive-side state beyond its buffers, as bits.
#[derive(Clone, Copy, Default)]
struct Flags(u8);

impl Flags {
    /// The socket may hold unread bytes (or an EOF/error) that no edge will announce again.
    const READABLE: u8 = 1;
    /// The peer hung up or the socket has an error: reads never block again.
    const HUP: u8 = 1 << 1;
    /// In `Epoll::queued`: received before the next wait.
    const QUEUED: u8 = 1 << 2;
    /// `wait_ready` took the fd off the RX path; the next `arm_recv` puts it back.
    const TAKEN_OVER: u8 = 1 << 3;

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    fn set(&mut self, bit: u8, on: bool) {
        if on {
            self.0 |= bit;
        } else {
            self.0 &= !bit;
        }
    }
}

impl InFlight for &mut EConn {
    fn recv_armed(&self) -> bool {
        self.recv.is_some()
    }
    fn send_in_flight(&self) -> bool {
        self.send.is_some()
    }
}

impl EConn {
    /// On the RX path: registered once, edge-triggered (not handed to `wait_ready`).
    fn on_rx_path(&self, mode: EpollMode) -> bool {
        mode == EpollMode::Rx && !self.flags.has(Flags::TAKEN_OVER)
    }
}

pub(crate) struct Epoll {
    epfd: OwnedFd,
    mode: EpollMode,
    nodelay: bool,
    wake_fd: RawFd,
    conns: Slab<EConn>,
    listeners: Vec<Option<OwnedFd>>,
    /// Connections to receive before the next wait (RX path).
    queued: Vec<Conn>,
    events: Vec<libc::epoll_event>,
    pub(crate) pending: Vec<Event>,
    /// The previous poll waited; with completions pending, this one may skip the wait.
    waited_last: bool,
    pub sys: Sys,
}

impl Epoll {
    pub fn new(config: &Config, wake_fd: RawFd) -> Result<Epoll, Errno> {
        let epfd = crate::sys::epoll_create()?;
        let mut epoll = Epoll {
            // SAFETY: epoll_create1 returned a fresh fd owned by nobody else.
            epfd: unsafe { std::os::fd::FromRawFd::from_raw_fd(epfd) },
            mode: config.epoll_mode,
            nodelay: config.nodelay,
            wake_fd,
            conns: Slab::new(),
            listeners: Vec::new(),
            queued: Vec::new(),
            events: Vec::with_capacity(1024),
            pending: Vec::new(),
            waited_last: false,
            sys: Sys::default(),
        };
        epoll.sys.epoll_ctl(
            epfd,
            libc::EPOLL_CTL_ADD,
            wake_fd,
            IN,
            token(KIND_WAKE, 0, 0),
        )?;
        Ok(epoll)
    }

    pub fn listen(&mut self, listener: OwnedFd) -> Result<ListenerId, Errno> {
        if self.nodelay {
            // Inherited by every accepted socket. Best effort: one that refuses still works.
            let _ = self.sys.set_nodelay(listener.as_raw_fd());
        }
        let index = self.listeners.len() as u32;
        let t = token(KIND_LISTENER, index, 0);
        // Level-triggered: a backlog left after one accept is reported again.
        self.sys.epoll_ctl(
            self.epfd.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            listener.as_raw_fd(),
            IN,
            t,
        )?;
        self.listeners.push(Some(listener));
        Ok(ListenerId(index))
    }

    pub fn unlisten(&mut self, id: ListenerId) {
        if let Some(fd) = self.listeners.get_mut(id.0 as usize).and_then(Option::take) {
            // Closing removes it from the epoll set; a DEL first would be one more syscall.
            self.sys.close(fd.into_raw_fd());
        }
    }

    pub fn resume_accept(&mut self, id: ListenerId) {
        self.watch_listener(id.0, IN);
    }

    /// Re-registers listener `index` for `events` (0: muted, still in the set).
    fn watch_listener(&mut self, index: u32, events: u32) {
        let Some(Some(listener)) = self.listeners.get(index as usize) else {
            return;
        };
        let (fd, t) = (listener.as_raw_fd(), token(KIND_LISTENER, index, 0));
        let _ = self
            .sys
            .epoll_ctl(self.epfd.as_raw_fd(), libc::EPOLL_CTL_MOD, fd, events, t);
    }

    pub fn register(&mut self, fd: OwnedFd) -> Conn {
        let fd_gen = fdtable::reset(fd.as_raw_fd());
        self.conns.insert(EConn {
            fd,
            fd_gen,
            recv: None,
            send: None,
            want: Interest::default(),
            flags: Flags::default(),
            registered: 0,
        })
    }

    pub fn fd(&self, conn: Conn) -> Option<RawFd> {
        self.conns.get(conn).map(|c| c.fd.as_raw_fd())
    }

    pub fn arm_recv(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        let (c, buf) = admit(self.conns.get_mut(conn), Op::Recv, buf)?;
        c.recv = Some(buf);
        c.flags.set(Flags::TAKEN_OVER, false);
        self.update_registration(conn);
        Ok(())
    }

    pub fn send(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        let (c, buf) = admit(self.conns.get_mut(conn), Op::Send, buf)?;
        c.send = Some(Sending::new(buf));
        if !self.flush_send(conn) {
            self.update_registration(conn);
        }
        Ok(())
    }

    pub fn wait_ready(&mut self, conn: Conn, interest: Interest) -> Result<(), RefuseReason> {
        let c = self.conns.get_mut(conn).ok_or(RefuseReason::Stale)?;
        c.want.readable |= interest.readable;
        c.want.writable |= interest.writable;
        c.flags.set(Flags::TAKEN_OVER, true);
        self.update_registration(conn);
        Ok(())
    }

    pub fn shutdown_write(&mut self, conn: Conn) {
        if let Some(c) = self.conns.get(conn) {
            let _ = self.sys.shutdown_write(c.fd.as_raw_fd());
        }
    }

    pub fn close(&mut self, conn: Conn) {
        if let Some(c) = self.conns.remove(conn) {
            // The last close of the file removes it from the epoll set: no DEL needed.
            self.sys.close(c.fd.into_raw_fd());
        }
    }

    pub fn poll(&mut self, out: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), Errno> {
        self.receive_queued();
        let wait_ms = if self.pending.is_empty() {
            timeout_ms(timeout)
        } else if self.waited_last {
            // Hand over what is ready now; the next poll waits (with a zero timeout if
            // completions are pending again), so readiness is never starved.
            self.waited_last = false;
            out.append(&mut self.pending);
            return Ok(());
        } else {
            0
        };
        self.waited_last = true;
        match self
            .sys
            .epoll_wait(self.epfd.as_raw_fd(), &mut self.events, wait_ms)
        {
            Ok(()) | Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
        for i in 0..self.events.len() {
            let ev = self.events[i];
            let (t, bits) = (ev.u64, ev.events);
            let slot = t as u32;
            match t >> 62 {
                KIND_CONN => {
                    if let Some(conn) = self.conns.handle(slot) {
                        if token(KIND_CONN, slot, conn.generation) == t {
                            self.on_conn_event(conn, bits);
                        }
                    }
                }
                KIND_LISTENER => self.accept_ready(slot),
                _ => {
                    self.sys.read_eventfd(self.wake_fd);
                    self.pending.push(Event::Woken);
                }
            }
        }
        out.append(&mut self.pending);
        Ok(())
    }

    fn receive_queued(&mut self) {
        let mut queued = std::mem::take(&mut self.queued);
        for conn in queued.drain(..) {
            let Some(c) = self.conns.get_mut(conn) else {
                continue;
            };
            c.flags.set(Flags::QUEUED, false);
            if c.recv.is_some() && c.flags.has(Flags::READABLE) {
                self.do_recv(conn);
            }
        }
        self.queued = queued;
    }

    fn accept_ready(&mut self, index: u32) {
        let Some(Some(listener)) = self.listeners.get(index as usize) else {
            return;
        };
        // One accept a readiness, as nginx does without `multi_accept`: the listener is
        // level-triggered, so a backlog (or a connection aborted, or a signal, before this
        // one) is reported again by the next wait, which the loop makes anyway; accepting
        // until EAGAIN cost a failing accept4 for nearly every connection arriving alone — a
        // connection per request paid 1.8 accept4 a request that way.
        match self.sys.accept(listener.as_raw_fd()) {
            Ok(fd) => {
                // SAFETY: accept4 returned a new fd that nothing else owns.
                let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
                let conn = self.register(fd);
                self.pending.push(Event::Accepted {
                    listener: ListenerId(index),
                    conn,
                });
            }
            Err(Errno(libc::EAGAIN | libc::EINTR | libc::ECONNABORTED)) => {}
            Err(error) => {
                if error.is_out_of_resources() {
                    // Level-triggered, the backlog would wake every wait: mute the listener
                    // until resume_accept.
                    self.watch_listener(index, 0);
                }
                self.pending.push(Event::AcceptFailed {
                    listener: ListenerId(index),
                    error,
                });
            }
        }
    }

    fn on_conn_event(&mut self, conn: Conn, bits: u32) {
        let mode = self.mode;
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if !c.on_rx_path(mode) {
            c.registered = 0; // the one-shot fired
        }
        let readable = bits & (IN | RDHUP | HUP | ERR) != 0;
        let writable = bits & (OUT | HUP | ERR) != 0;
        if readable {
            c.flags.set(Flags::READABLE, true);
        }
        if bits & (RDHUP | HUP | ERR) != 0 {
            c.flags.set(Flags::HUP, true);
        }
        let ready = Interest {
            readable: c.want.readable && readable,
            writable: c.want.writable && writable,
        };
        if !ready.is_empty() {
            c.want.readable &= !ready.readable;
            c.want.writable &= !ready.writable;
            self.pending.push(Event::Ready { conn, ready });
        }
        if writable && c.send.is_some() {
            self.flush_send(conn);
        }
        if let Some(c) = self.conns.get(conn) {
            if c.recv.is_some() && c.flags.has(Flags::READABLE) {
                self.do_recv(conn);
            }
        }
        self.update_registration(conn);
    }

    /// Brings the kernel's registration in line with what the connection waits for.
    fn update_registration(&mut self, conn: Conn) {
        let (mode, epfd) = (self.mode, self.epfd.as_raw_fd());
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let fd = c.fd.as_raw_fd();
        let hint = fdtable::registration(fd, c.fd_gen);
        let t = token(KIND_CONN, conn.slot, conn.generation);
        let result = if c.on_rx_path(mode) {
            // Readable, edge-triggered, once; writable as well from the first send that
            // fills the socket (or wait for writability), which then waits for the OUT edge
            // its EAGAIN arms, as HAProxy's poller does. OUT is not there from the start: a
            // fresh socket is writable at once, so its registration would report an edge
            // no one waits for and wake the loop for nothing — once a connection, a wake a
            // request when each connection carries one. Once added, OUT stays: at most one
            // MOD in a connection's life, none per request.
            let writable = c.registered & OUT != 0 || c.want.writable || c.send.is_some();
            let mask = IN | RDHUP | ET | if writable { OUT } else { 0 };
            if hint == Registration::Rx && c.registered == mask {
                // Registered once for this connection: nothing to do. Bytes that an earlier
                // edge announced are received before the next wait.
                if c.recv.is_some() && c.flags.has(Flags::READABLE) && !c.flags.has(Flags::QUEUED) {
                    c.flags.set(Flags::QUEUED, true);
                    self.queued.push(conn);
                }
                return;
            }
            let op = match hint {
                Registration::None => libc::EPOLL_CTL_ADD,
                _ => libc::EPOLL_CTL_MOD,
            };
            // ADD and MOD both re-check readiness, so an edge consumed on the one-shot path
            // is reported again: nothing is lost in the switch.
            ctl(&mut self.sys, epfd, fd, op, mask, t).map(|()| {
                c.registered = mask;
                fdtable::set(fd, c.fd_gen, Registration::Rx);
            })
        } else {
            let mut mask = 0;
            if c.recv.is_some() || c.want.readable {
                mask |= IN | RDHUP;
            }
            if c.send.is_some() || c.want.writable {
                mask |= OUT;
            }
            if mask == 0 || (hint == Registration::Oneshot && c.registered & mask == mask) {
                return;
            }
            let op = if self.mode == EpollMode::Legacy || hint == Registration::None {
                libc::EPOLL_CTL_ADD
            } else {
                libc::EPOLL_CTL_MOD
            };
            ctl(&mut self.sys, epfd, fd, op, mask | ONESHOT, t).map(|()| {
                c.registered = mask;
                fdtable::set(fd, c.fd_gen, Registration::Oneshot);
            })
        };
        if let Err(errno) = result {
            self.fail_all(conn, errno);
        }
    }

    /// The kernel refused to watch the fd: complete everything outstanding with the error.
    fn fail_all(&mut self, conn: Conn, errno: Errno) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if let Some(buf) = c.recv.take() {
            self.pending.push(Event::Received {
                conn,
                buf,
                result: Recv::Error(errno),
            });
        }
        if let Some(send) = c.send.take() {
            self.pending.push(Event::Sent {
                conn,
                buf: send.into_buf(),
                result: Err(errno),
            });
        }
        if !c.want.is_empty() {
            let ready = std::mem::take(&mut c.want);
            self.pending.push(Event::Ready { conn, ready });
        }
    }

    /// One recv into the armed buffer. Completes the receive unless the socket had nothing.
    fn do_recv(&mut self, conn: Conn) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        let Some(mut buf) = c.recv.take() else {
            return;
        };
        let room = buf.capacity() - buf.len();
        let result = loop {
            match self.sys.recv(c.fd.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    c.flags.set(Flags::HUP, true);
                    break Recv::Eof;
                }
                Ok(n) => {
                    // Short read: drained, unless a hang-up means the next read returns at
                    // once (EOF or error) without a new edge.
                    let hup = c.flags.has(Flags::HUP);
                    c.flags.set(Flags::READABLE, n == room || hup);
                    break Recv::Data(n);
                }
                Err(Errno(libc::EINTR)) => continue,
                Err(Errno(libc::EAGAIN)) => {
                    c.flags.set(Flags::READABLE, false);
                    c.recv = Some(buf); // still armed, for the next edge
                    return;
                }
                Err(e) => {
                    c.flags.set(Flags::HUP, true);
                    break Recv::Error(e);
                }
            }
        };
        self.pending.push(Event::Received { conn, buf, result });
    }

    /// Writes what the pending send has left. Returns true when the send completed (all
    /// written, or failed), false when the socket is full.
    fn flush_send(&mut self, conn: Conn) -> bool {
        let Some(c) = self.conns.get_mut(conn) else {
            return true;
        };
        let Some(mut send) = c.send.take() else {
            return true;
        };
        let result = loop {
            if send.is_done() {
                break Ok(());
            }
            match self.sys.send(c.fd.as_raw_fd(), send.rest()) {
                Ok(n) => {
                    send.advance(n);
                }
                Err(Errno(libc::EINTR)) => continue,
                Err(Errno(libc::EAGAIN)) => {
                    c.send = Some(send); // waits for the OUT edge
                    return false;
                }
                Err(e) => break Err(e),
            }
        };
        self.pending.push(Event::Sent {
            conn,
            buf: send.into_buf(),
            result,
        });
        true
    }
}

/// epoll_ctl with the hint's fallbacks: ADD that finds the fd registered becomes MOD, MOD that
/// finds it missing becomes ADD.
fn ctl(sys: &mut Sys, epfd: RawFd, fd: RawFd, op: i32, mask: u32, t: u64) -> Result<(), Errno> {
    match sys.epoll_ctl(epfd, op, fd, mask, t) {
        Err(Errno(libc::EEXIST)) if op == libc::EPOLL_CTL_ADD => {
            sys.epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, mask, t)
        }
        Err(Errno(libc::ENOENT)) if op == libc::EPOLL_CTL_MOD => {
            sys.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, mask, t)
        }
        r => r,
    }
}

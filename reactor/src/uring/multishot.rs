//! Multishot receives: one receive per connection for its lifetime, the kernel picking a
//! provided buffer ([`super::bufring::BufRing`]) per completion; bytes are copied into the
//! caller's armed buffer, or stashed until the next arm.
//!
//! The completion rules this module keeps:
//!
//! - A completion with `IORING_CQE_F_MORE` leaves the receive running; one without it ends it
//!   (end of stream: 0; an error; ENOBUFS when the buffer ring ran dry; ECANCELED after our
//!   cancel; or bytes, when the kernel stopped on its own). A receive that ended while the
//!   caller still waits is started again; otherwise the next arm starts it.
//! - Bytes arrive before the end that follows them, and an end is delivered once: kept in
//!   `stash_end` when no buffer is armed, handed over at the next arm.
//! - The kernel does not always report an end that comes right behind bytes. After a
//!   completion with bytes it may decide the socket is drained (it asks TCP how much is
//!   queued: nothing, after a reset) and wait for the next wake-up, which a reset peer never
//!   sends — seen as a connection that received `GET /user/1 HTTP/1.1\r\nHo`, then nothing,
//!   until the header timer (issue #49; liburing #1549 is the same race with AF_UNIX EOFs). So
//!   a connection whose receive runs also gets a hangup watch: a one-shot poll for POLLRDHUP,
//!   POLLHUP and POLLERR, which data never completes. Not at once — armed with the first
//!   receive, or at the first re-arm, it cost a connection-per-request load measurable CPU
//!   a request (results/hangup-20261207) — but at the first turn after a once-a-second mark
//!   ([`WATCH_EVERY`]) that finds the receive running without one: a connection that lives
//!   under a second never pays, a longer one pays one SQE in its life, and a lost end is
//!   found within a second, never by the header or keep-alive timer. A poll armed on a
//!   socket already reset completes at once.
//!   When it fires and the receive is still running after that turn's completions, the
//!   receive is cancelled; its last completion starts a fresh one, whose first attempt reads
//!   the socket itself and so finds the end.

use std::os::fd::AsRawFd;

use io_uring::cqueue;

use super::ops::{conn_data, Plain, OP_HANGUP, OP_RECV_MULTI};
use super::trail::Step;
use super::{Hangup, Multishot, RecvState, Uring};
use crate::op::{admit, Op};
use crate::{Conn, Errno, Event, Recv, Refused};

pub(super) const MULTISHOT_BUF_SIZE: usize = 4096;
/// A multishot receive is cancelled once this much waits unclaimed in a connection's stash, so
/// a caller that stops arming still pushes back on its peer through TCP, as with one-shot
/// receives; the next arm that finds the stash empty starts a new one.
pub(super) const STASH_LIMIT: usize = 64 * 1024;
pub(super) const MULTISHOT_GROUP: u16 = 0;
/// How often connections whose receive runs are given their hangup watch.
pub(super) const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Uring {
    /// Multishot arm: delivers the stash at once if there is one, else parks the buffer for the
    /// next completion, starting the connection's multishot receive the first time.
    pub(super) fn arm_recv_multishot(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        let ((c, fd), mut buf) = admit(self.open(conn), Op::Recv, buf)?;
        c.record(Step::Arm {
            stashed: c.stash.len(),
            end: c.stash_end.is_some(),
            running: c.multishot != Multishot::Off,
        });
        if !c.stash.is_empty() {
            let n = c.stash.len().min(buf.capacity() - buf.len());
            buf.extend_from_slice(&c.stash[..n]);
            c.stash.drain(..n);
            c.record(Step::Deliver { res: n as i32 });
            self.pending.push(Event::Received {
                conn,
                buf,
                result: Recv::Data(n),
            });
            return Ok(());
        }
        if let Some(end) = c.stash_end.take() {
            c.record(Step::delivered(&end));
            self.pending.push(Event::Received {
                conn,
                buf,
                result: end,
            });
            return Ok(());
        }
        c.recv = RecvState::Parked(buf);
        if c.multishot == Multishot::Off {
            c.multishot = Multishot::Running;
            c.in_flight += 1;
            c.record(Step::Submit { op: OP_RECV_MULTI });
            self.push_plain(Plain::RecvMulti {
                fd,
                user_data: conn_data(OP_RECV_MULTI, conn),
            });
        }
        Ok(())
    }

    /// Once every [`WATCH_EVERY`] (at the end of a turn, on the clock the wait just read): a
    /// hangup watch for every connection whose receive runs and has none yet — the module's
    /// rules say why, and why not at once.
    pub(super) fn watch_running(&mut self) {
        let Some(now) = self.sys.returned_at else {
            return;
        };
        match self.next_watch {
            Some(due) if now < due => return,
            None => {
                self.next_watch = Some(now + WATCH_EVERY);
                return;
            }
            Some(_) => self.next_watch = Some(now + WATCH_EVERY),
        }
        let due: Vec<(Conn, std::os::fd::RawFd)> = self
            .conns
            .handles()
            .filter_map(|conn| {
                let c = self.conns.get(conn)?;
                let fd = c.fd.as_ref()?.as_raw_fd();
                (c.multishot == Multishot::Running && c.hangup == Hangup::Unarmed)
                    .then_some((conn, fd))
            })
            .collect();
        for (conn, fd) in due {
            self.watch_hangup(conn, fd);
        }
    }

    /// Arms the connection's hangup watch (once in its life): see the module's rules.
    fn watch_hangup(&mut self, conn: Conn, fd: std::os::fd::RawFd) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        c.hangup = Hangup::Armed;
        c.in_flight += 1;
        c.record(Step::Submit { op: OP_HANGUP });
        self.push_plain(Plain::PollAdd {
            fd,
            // POLLHUP and POLLERR are reported whatever the mask asks.
            mask: libc::POLLRDHUP as u32,
            user_data: conn_data(OP_HANGUP, conn),
        });
    }

    pub(super) fn on_hangup(&mut self, ud: u64, res: i32) {
        let Some(conn) = self.completed(ud, res) else {
            return;
        };
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        // Cancelled (by a close, which would have released the connection above): unarmed,
        // not fired. Any other result means the peer's end is there to be read.
        c.hangup = if res == -libc::ECANCELED {
            Hangup::Unarmed
        } else {
            Hangup::Fired
        };
        if c.hangup == Hangup::Fired {
            self.hung_up.push(conn);
        }
    }

    /// After a turn's completions: a receive still running on a connection whose peer hung up
    /// may never report that end (module rules), so it is cancelled and started afresh.
    pub(super) fn restart_after_hangup(&mut self) {
        while let Some(conn) = self.hung_up.pop() {
            let Some((c, _)) = self.open(conn) else {
                continue;
            };
            if c.multishot != Multishot::Running {
                continue; // it ended on its own, or is already being cancelled
            }
            c.multishot = Multishot::Stopping;
            c.record(Step::Cancel { op: OP_RECV_MULTI });
            self.push_plain(Plain::Cancel {
                target: conn_data(OP_RECV_MULTI, conn),
            });
        }
    }

    pub(super) fn on_recv_multi(&mut self, ud: u64, res: i32, flags: u32) {
        let target = self.conn_of(ud);
        // Only a reactor with the ring submits multishot receives.
        let Some(bufring) = self.bufring.as_mut() else {
            return;
        };
        let bid = cqueue::buffer_select(flags);
        let Some((conn, c)) = target.and_then(|conn| Some((conn, self.conns.get_mut(conn)?)))
        else {
            if let Some(b) = bid {
                bufring.recycle(b);
            }
            return;
        };
        c.record(Step::Cqe {
            op: OP_RECV_MULTI,
            res,
            flags,
        });
        if res == -libc::ENOBUFS {
            self.sys.turns.buffers_empty += 1;
        }
        let more = cqueue::more(flags);
        if !more {
            c.multishot = Multishot::Off;
            c.in_flight -= 1;
        }
        if c.fd.is_none() {
            if let Some(b) = bid {
                bufring.recycle(b);
            }
            if c.in_flight == 0 {
                self.conns.remove(conn);
            }
            return;
        }
        let end = match (res, bid) {
            (n, Some(bid)) if n > 0 => {
                let bytes = bufring.bytes(bid, n as usize);
                // The stash is empty whenever a buffer is parked (an arm drains it first).
                if let Some(mut buf) = c.take_parked() {
                    let take = bytes.len().min(buf.capacity() - buf.len());
                    buf.extend_from_slice(&bytes[..take]);
                    c.stash.extend_from_slice(&bytes[take..]);
                    c.record(Step::Deliver { res: take as i32 });
                    self.pending.push(Event::Received {
                        conn,
                        buf,
                        result: Recv::Data(take),
                    });
                } else {
                    c.stash.extend_from_slice(bytes);
                }
                None
            }
            // Bytes always name their buffer (IORING_CQE_F_BUFFER); were some not to, they could
            // not be read: the stream ends in an error rather than with a silent gap.
            (n, None) if n > 0 => Some(Recv::Error(Errno(libc::EIO))),
            (0, _) => Some(Recv::Eof),
            // Out of provided buffers, interrupted, or stopped for a full stash: the bytes wait
            // in the socket.
            (e, _) if [libc::ENOBUFS, libc::EAGAIN, libc::EINTR, libc::ECANCELED].contains(&-e) => {
                None
            }
            (e, _) => Some(Recv::Error(Errno(-e))),
        };
        // A buffer the kernel consumed goes back whatever the result, or the ring shrinks.
        if let Some(b) = bid {
            bufring.recycle(b);
        }
        let stop_for_full_stash = c.multishot == Multishot::Running && c.stash.len() >= STASH_LIMIT;
        if stop_for_full_stash {
            c.multishot = Multishot::Stopping;
        }
        match (end, c.take_parked()) {
            (Some(end), Some(buf)) => {
                c.record(Step::delivered(&end));
                self.pending.push(Event::Received {
                    conn,
                    buf,
                    result: end,
                })
            }
            (Some(end), None) => c.stash_end = Some(end),
            // The kernel ended the multishot (ENOBUFS, or its own retry cap) while the caller
            // still waits: start another.
            (None, Some(buf)) if !more => {
                let _ = self.arm_recv_multishot(conn, buf);
            }
            (None, Some(buf)) => c.recv = RecvState::Parked(buf),
            (None, None) => {}
        }
        if stop_for_full_stash {
            self.push_plain(Plain::Cancel {
                target: conn_data(OP_RECV_MULTI, conn),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::Config;

    /// A connected loopback pair: (server side, client side).
    fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (listener.accept().unwrap().0, client)
    }

    fn reset(stream: TcpStream) {
        socket_linger_zero(&stream);
        drop(stream);
    }

    fn socket_linger_zero(stream: &TcpStream) {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket and a live linger struct of the size given.
        let rc = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
    }

    /// The state the kernel's race leaves (issue #49's trail: bytes with F_MORE, then nothing):
    /// a multishot receive that runs on and never completes again while the peer is gone. Made
    /// deterministic here by pointing the running receive at a socket that stays quiet — the
    /// descriptor number is moved to the reset connection after the receive was submitted — so
    /// only the hangup watch, armed on that number by the once-a-second scan, sees the reset.
    /// The connection must still end, with the reset, within about a [`WATCH_EVERY`].
    #[test]
    fn a_running_receive_that_never_reports_the_reset_is_restarted_by_the_hangup_watch() {
        let wake = crate::sys::eventfd().unwrap();
        let mut uring = Uring::new(&Config::default(), wake).unwrap();
        assert!(
            uring.multishot(),
            "the kernel took no buffer ring: nothing to test"
        );
        let (quiet, _quiet_peer) = tcp_pair();
        let (gone, gone_peer) = tcp_pair();
        let conn = uring.register(OwnedFd::from(quiet));
        let fd = uring.fd(conn).unwrap();
        // The receive first: no watch yet (the scan has not come round) ...
        uring.arm_recv(conn, Vec::with_capacity(64)).unwrap();
        let mut events = Vec::new();
        uring.poll(&mut events, Some(Duration::ZERO), 1).unwrap();
        assert!(events.is_empty());
        // ... then the number moves to a connection whose peer sends bytes and resets; the
        // running receive keeps the quiet socket, and the scan will arm the watch on the number.
        // SAFETY: both are descriptors this test owns; dup2 closes the quiet socket's number
        // (the ring keeps its own reference) and makes it a second name of `gone`.
        assert_eq!(unsafe { libc::dup2(gone.as_raw_fd(), fd) }, fd);
        let mut peer = gone_peer;
        peer.write_all(b"GET /user/1 HTTP/1.1\r\nHo").unwrap();
        reset(peer);
        let started = Instant::now();
        let deadline = started + WATCH_EVERY * 3;
        let mut got = Vec::new();
        while Instant::now() < deadline {
            uring
                .poll(&mut events, Some(Duration::from_millis(10)), 1)
                .unwrap();
            for e in events.drain(..) {
                match e {
                    Event::Received {
                        result: Recv::Data(_),
                        buf,
                        ..
                    } => {
                        got.extend_from_slice(&buf);
                        uring.arm_recv(conn, Vec::with_capacity(64)).unwrap();
                    }
                    Event::Received { result, .. } => {
                        assert_eq!(
                            result,
                            Recv::Error(Errno(libc::ECONNRESET)),
                            "{}",
                            uring.trail(conn).unwrap_or_default()
                        );
                        assert_eq!(got, b"GET /user/1 HTTP/1.1\r\nHo");
                        let took = started.elapsed();
                        assert!(
                            took < WATCH_EVERY * 2 + Duration::from_millis(200),
                            "{took:?}"
                        );
                        uring.close(conn);
                        drop(uring);
                        drop(gone);
                        // SAFETY: the test's own eventfd, closed once, after the ring.
                        unsafe { libc::close(wake) };
                        return;
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        panic!("the reset was never delivered: {got:?}");
    }
}

//! Multishot receives: one receive per connection for its lifetime, the kernel picking a
//! provided buffer ([`super::bufring::BufRing`]) per completion; bytes are copied into the
//! caller's armed buffer, or stashed until the next arm.

use io_uring::cqueue;

use super::ops::{conn_data, Plain, OP_RECV_MULTI};
use super::{Multishot, RecvState, Uring};
use crate::op::{admit, Op};
use crate::{Conn, Errno, Event, Recv, Refused};

pub(super) const MULTISHOT_BUF_SIZE: usize = 4096;
/// A multishot receive is cancelled once this much waits unclaimed in a connection's stash, so
/// a caller that stops arming still pushes back on its peer through TCP, as with one-shot
/// receives; the next arm that finds the stash empty starts a new one.
pub(super) const STASH_LIMIT: usize = 64 * 1024;
pub(super) const MULTISHOT_GROUP: u16 = 0;

impl Uring {
    /// Multishot arm: delivers the stash at once if there is one, else parks the buffer for the
    /// next completion, starting the connection's multishot receive the first time.
    pub(super) fn arm_recv_multishot(&mut self, conn: Conn, buf: Vec<u8>) -> Result<(), Refused> {
        let ((c, fd), mut buf) = admit(self.open(conn), Op::Recv, buf)?;
        if !c.stash.is_empty() {
            let n = c.stash.len().min(buf.capacity() - buf.len());
            buf.extend_from_slice(&c.stash[..n]);
            c.stash.drain(..n);
            self.pending.push(Event::Received {
                conn,
                buf,
                result: Recv::Data(n),
            });
            return Ok(());
        }
        if let Some(end) = c.stash_end.take() {
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
            self.push_plain(Plain::RecvMulti {
                fd,
                user_data: conn_data(OP_RECV_MULTI, conn),
            });
        }
        Ok(())
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
            (Some(end), Some(buf)) => self.pending.push(Event::Received {
                conn,
                buf,
                result: end,
            }),
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

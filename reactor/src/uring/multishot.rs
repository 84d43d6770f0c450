//! Multishot receives: one receive per connection for its lifetime, the kernel picking a
//! provided buffer ([`super::bufring::BufRing`]) per completion; bytes are copied into the
//! caller's armed buffer, or stashed until the next arm.

use io_uring::cqueue;

use super::ops::{conn_data, Plain, OP_RECV_MULTI};
use super::Uring;
use crate::{Conn, Errno, Event, Recv};

pub(super) const MULTISHOT_BUF_SIZE: usize = 4096;
/// A multishot receive is cancelled once this much waits unclaimed in a connection's stash, so
/// a caller that stops arming still pushes back on its peer through TCP, as with one-shot
/// receives; the next arm that finds the stash empty starts a new one.
pub(super) const STASH_LIMIT: usize = 64 * 1024;
pub(super) const MULTISHOT_GROUP: u16 = 0;

impl Uring {
    /// Multishot arm: delivers the stash at once if there is one, else parks the buffer for the
    /// next completion, starting the connection's multishot receive the first time. The
    /// connection is open and unarmed.
    pub(super) fn arm_recv_multishot(&mut self, conn: Conn, mut buf: Vec<u8>) {
        let (c, fd) = self.open(conn).expect("checked by the caller");
        if !c.stash.is_empty() {
            let n = c.stash.len().min(buf.capacity() - buf.len());
            buf.extend_from_slice(&c.stash[..n]);
            c.stash.drain(..n);
            self.pending.push(Event::Received {
                conn,
                buf,
                result: Recv::Data(n),
            });
            return;
        }
        if let Some(end) = c.stash_end.take() {
            self.pending.push(Event::Received {
                conn,
                buf,
                result: end,
            });
            return;
        }
        c.recv = Some(buf);
        if !c.multishot {
            c.multishot = true;
            c.in_flight += 1;
            self.push_plain(Plain::RecvMulti {
                fd,
                user_data: conn_data(OP_RECV_MULTI, conn),
            });
        }
    }

    pub(super) fn on_recv_multi(&mut self, ud: u64, res: i32, flags: u32) {
        let target = self.conn_of(ud);
        let bufring = self
            .bufring
            .as_mut()
            .expect("multishot receives need the ring");
        let bid = cqueue::buffer_select(flags);
        let Some(conn) = target else {
            if let Some(b) = bid {
                bufring.recycle(b);
            }
            return;
        };
        let c = self.conns.get_mut(conn).expect("live slot");
        let more = cqueue::more(flags);
        if !more {
            c.multishot = false;
            c.stash_full = false;
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
        let end = match res {
            n if n > 0 => {
                let bid = bid.expect("a multishot receive with data names its buffer");
                let bytes = bufring.bytes(bid, n as usize);
                // The stash is empty whenever a buffer is armed (an arm drains it first).
                if let Some(mut buf) = c.recv.take() {
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
            0 => Some(Recv::Eof),
            // Out of provided buffers, interrupted, or stopped for a full stash: the bytes wait
            // in the socket.
            e if [libc::ENOBUFS, libc::EAGAIN, libc::EINTR, libc::ECANCELED].contains(&-e) => None,
            e => Some(Recv::Error(Errno(-e))),
        };
        // A buffer the kernel consumed goes back whatever the result, or the ring shrinks.
        if let Some(b) = bid {
            bufring.recycle(b);
        }
        let stop_for_full_stash = more && c.stash.len() >= STASH_LIMIT && !c.stash_full;
        c.stash_full |= stop_for_full_stash;
        match end {
            Some(end) => match c.recv.take() {
                Some(buf) => self.pending.push(Event::Received {
                    conn,
                    buf,
                    result: end,
                }),
                None => c.stash_end = Some(end),
            },
            None if !more && c.recv.is_some() => {
                // The kernel ended the multishot (ENOBUFS, or its own retry cap) while the
                // caller still waits: start another.
                let buf = c.recv.take().expect("armed");
                self.arm_recv_multishot(conn, buf);
            }
            None => {}
        }
        if stop_for_full_stash {
            self.push_plain(Plain::Cancel {
                target: conn_data(OP_RECV_MULTI, conn),
            });
        }
    }
}

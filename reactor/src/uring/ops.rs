//! What an SQE's `user_data` says, and the operations that point at no memory of ours.

use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::multishot::MULTISHOT_GROUP;
use crate::Conn;

pub(super) const OP_RECV: u64 = 1;
pub(super) const OP_SEND: u64 = 2;
pub(super) const OP_POLL: u64 = 3;
pub(super) const OP_ACCEPT: u64 = 4;
pub(super) const OP_WAKE: u64 = 5;
/// Cancels and closes: their completions carry nothing to act on.
pub(super) const OP_IGNORE: u64 = 6;
pub(super) const OP_RECV_MULTI: u64 = 7;
/// A connection's hangup watch: a one-shot poll for the peer's FIN, reset or error
/// (`multishot::Uring::watch_hangup`).
pub(super) const OP_HANGUP: u64 = 8;

/// Bits of a connection's slab generation carried in its operations' `user_data`.
pub(super) const GENERATION_MASK: u32 = (1 << 24) - 1;

/// A connection operation's `user_data`: the op in the top byte, 24 bits of the connection's
/// generation (as epoll's token carries one), then its slot — so that a completion is matched
/// to the connection it was for, not merely to whichever occupies the slot now.
pub(super) fn conn_data(op: u64, conn: Conn) -> u64 {
    (op << 56) | (u64::from(conn.generation & GENERATION_MASK) << 32) | u64::from(conn.slot)
}

/// The `user_data` of an operation that is no connection's: a listener's (its index), the
/// waker's, or one whose completion carries nothing to act on (`OP_IGNORE`).
pub(super) fn op_data(op: u64, index: u32) -> u64 {
    (op << 56) | u64::from(index)
}

/// An operation whose entry points at no memory of ours — descriptors and numbers only — so
/// pushing it needs no buffer to outlive it ([`Uring::push_plain`]). Operations that point into a
/// buffer go through the `unsafe` [`Uring::push`] with their own invariant.
pub(super) enum Plain {
    /// Accept on a listener (multishot, or one connection), the peer's address not asked for.
    Accept {
        fd: RawFd,
        multishot: bool,
        user_data: u64,
    },
    /// A multishot receive into the provided-buffer ring (the kernel picks the buffer).
    RecvMulti { fd: RawFd, user_data: u64 },
    /// A one-shot readiness wait.
    PollAdd {
        fd: RawFd,
        mask: u32,
        user_data: u64,
    },
    /// Cancels the operation submitted with `target`; its own completion is ignored.
    Cancel { target: u64 },
    /// Closes `fd`, which the caller handed over; its completion is ignored.
    Close { fd: RawFd },
}

impl Plain {
    pub(super) fn entry(self) -> squeue::Entry {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let ignored = op_data(OP_IGNORE, 0);
        match self {
            Plain::Accept {
                fd,
                multishot: true,
                user_data,
            } => opcode::AcceptMulti::new(types::Fd(fd))
                .flags(flags)
                .build()
                .user_data(user_data),
            Plain::Accept {
                fd,
                multishot: false,
                user_data,
            } => opcode::Accept::new(types::Fd(fd), std::ptr::null_mut(), std::ptr::null_mut())
                .flags(flags)
                .build()
                .user_data(user_data),
            Plain::RecvMulti { fd, user_data } => {
                opcode::RecvMulti::new(types::Fd(fd), MULTISHOT_GROUP)
                    .build()
                    .user_data(user_data)
            }
            Plain::PollAdd {
                fd,
                mask,
                user_data,
            } => opcode::PollAdd::new(types::Fd(fd), mask)
                .build()
                .user_data(user_data),
            Plain::Cancel { target } => opcode::AsyncCancel::new(target).build().user_data(ignored),
            Plain::Close { fd } => opcode::Close::new(types::Fd(fd)).build().user_data(ignored),
        }
    }
}

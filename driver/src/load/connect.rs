//! A slot's connection: opening it (non-blocking, registered with the reactor), the fresh one
//! a connection per request takes after each response, and the reconnect after a failure.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::Instant;

use reactor::Interest;
use socket2::{Domain, Socket, Type};

use super::{Load, RECONNECT_DELAY};
use crate::response::ResponseReader;
use crate::ConnMode;

impl Load {
    pub(super) fn connect(&mut self, i: usize, now: Instant) {
        if self.plan.connection == ConnMode::PerRequest && self.budget_spent() {
            return; // no request left for a fresh connection to carry
        }
        let slot = &mut self.slots[i];
        slot.retry_at = None;
        let socket = match start_connect(self.plan.addr) {
            Ok(s) => s,
            Err(_) => {
                self.out.errors.connect += 1;
                slot.retry_at = Some(now + RECONNECT_DELAY);
                return;
            }
        };
        let conn = match self.reactor.register(socket) {
            Ok(c) => c,
            Err(_) => {
                self.out.errors.connect += 1;
                slot.retry_at = Some(now + RECONNECT_DELAY);
                return;
            }
        };
        slot.conn = Some(conn);
        slot.connecting = true;
        slot.connect_at = Some(now);
        slot.reader = ResponseReader::default();
        self.set_sent(i, None);
        let slot = &mut self.slots[i];
        slot.send_when_free = false;
        if self.by_conn.len() <= conn.index() {
            self.by_conn.resize(conn.index() + 1, usize::MAX);
        }
        self.by_conn[conn.index()] = i;
        let _ = self.reactor.wait_ready(conn, Interest::WRITABLE);
        if self.recording {
            self.out.closes.opened += u64::from(self.plan.connection == ConnMode::PerRequest);
        }
    }

    pub(super) fn budget_spent(&self) -> bool {
        self.plan.max_requests.is_some_and(|max| self.sent >= max)
    }

    /// Per-request mode, after a complete response: the client closes (whatever the server
    /// said) and the slot's next request goes on a fresh connection. `server_closes`: the
    /// response announced the close or ended with it.
    pub(super) fn next_connection(&mut self, i: usize, now: Instant, server_closes: bool) {
        if self.recording {
            if server_closes {
                self.out.closes.server += 1;
            } else {
                self.out.closes.client += 1;
            }
        }
        if let Some(conn) = self.slots[i].conn.take() {
            self.reactor.close(conn);
        }
        self.open_when_due(i, now);
    }

    /// A slot's next connection: at once, but in open loop with a connection per request only
    /// when its next request is due (the connect is then part of that request's latency,
    /// counted from the due time like the rest).
    pub(super) fn open_when_due(&mut self, i: usize, now: Instant) {
        let scheduled = self.plan.open.is_some() && self.plan.connection == ConnMode::PerRequest;
        if !scheduled || self.take_due(i, now) {
            self.connect(i, now);
        }
    }

    /// Drops the connection and opens a new one (after a delay if `delay`).
    pub(super) fn reconnect(&mut self, i: usize, now: Instant, delay: bool) {
        self.set_sent(i, None);
        if let Some(conn) = self.slots[i].conn.take() {
            self.reactor.close(conn);
        }
        self.out.reconnects += 1;
        if delay {
            self.slots[i].retry_at = Some(now + RECONNECT_DELAY);
        } else {
            self.connect(i, now);
        }
    }
}

fn start_connect(addr: SocketAddr) -> std::io::Result<OwnedFd> {
    // Non-blocking from socket(2) on: a set afterwards is two fcntl calls per connection,
    // which a connection per request pays on every request.
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking(), None)?;
    socket.set_tcp_nodelay(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(socket.into())
}

/// The pending error of a non-blocking connect (0 when it succeeded).
pub(super) fn socket_error(fd: i32) -> i32 {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one c_int into `err`, whose size is passed in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return libc::EBADF;
    }
    err
}

//! The io_uring floor: the cheapest io_uring responder that is still correct for the benchmark's
//! load (keep-alive `GET /`, pipelined or not, or a connection per request), beside the epoll
//! floor — the limit of the mechanism on this kernel, which this project's io_uring backend is
//! measured against. One multishot accept; per connection one multishot receive into a ring of
//! provided buffers, each buffer given back as soon as its heads are counted; the answer sent
//! from one static buffer, one send in flight per connection; a close as an SQE. No parsing
//! beyond finding each head's end (`\r\n\r\n`) across reads, no routing, no Date header: every
//! request gets the same empty 200. Nothing here is this project's code (peers/ stands alone).
//!
//! Port: `$PORT` (default 3000). One thread; every syscall after setup is an `io_uring_enter`.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use floor::heads_ending;
use io_uring::{cqueue, opcode, squeue, types, IoUring};

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
/// Answers one send may carry: a pipelined burst longer than this goes out in several sends.
const BURST: usize = 64;
const BUFFERS: u16 = 1024;
const BUF_SIZE: usize = 4096;
const GROUP: u16 = 0;

// `user_data`: the operation in the top byte, the connection's fd below.
const ACCEPT: u64 = 1 << 56;
const RECV: u64 = 2 << 56;
const SEND: u64 = 3 << 56;
const CLOSE: u64 = 4 << 56;
const OP: u64 = 0xff << 56;

/// A connection: how much of `\r\n\r\n` the bytes so far end with, the answers owed but not
/// yet handed to a send, and the bytes of the send in flight (0: none).
#[derive(Default)]
struct Conn {
    matched: u8,
    owed: usize,
    sending: usize,
    /// Bytes of `sending` already written (a short send resumes there).
    sent: usize,
    closing: bool,
}

fn check(ret: i32) -> io::Result<i32> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn listen(port: u16) -> io::Result<i32> {
    // SAFETY: plain socket calls on a descriptor this function owns; every pointer passed is to
    // a live local of the size given.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let one: libc::c_int = 1;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let p = &one as *const libc::c_int as *const libc::c_void;
        for (level, opt) in [
            (libc::SOL_SOCKET, libc::SO_REUSEADDR),
            (libc::SOL_SOCKET, libc::SO_REUSEPORT),
            // Inherited by every accepted socket: no setsockopt per connection.
            (libc::IPPROTO_TCP, libc::TCP_NODELAY),
        ] {
            check(libc::setsockopt(fd, level, opt, p, size))?;
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let p = &addr as *const libc::sockaddr_in as *const libc::sockaddr;
        check(libc::bind(fd, p, len))?;
        check(libc::listen(fd, 4096))?;
        Ok(fd)
    }
}

/// The provided buffers and the ring that hands them to the kernel. Both are leaked: they live
/// as long as the process, so no buffer the kernel may write is ever freed.
struct Buffers {
    entries: *mut types::BufRingEntry,
    bufs: *mut u8,
    tail: u16,
}

impl Buffers {
    fn new() -> Buffers {
        let entries = std::alloc::Layout::from_size_align(
            usize::from(BUFFERS) * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )
        .expect("valid layout");
        let bufs = std::alloc::Layout::from_size_align(usize::from(BUFFERS) * BUF_SIZE, 64)
            .expect("valid layout");
        // SAFETY: both layouts have a non-zero size; the memory is never freed (see above).
        let (entries, bufs) = unsafe {
            (
                std::alloc::alloc_zeroed(entries).cast::<types::BufRingEntry>(),
                std::alloc::alloc_zeroed(bufs),
            )
        };
        assert!(!entries.is_null() && !bufs.is_null(), "out of memory");
        let mut b = Buffers {
            entries,
            bufs,
            tail: 0,
        };
        (0..BUFFERS).for_each(|bid| b.give_back(bid));
        b.publish();
        b
    }

    /// Buffer `bid`'s first `len` bytes. The kernel wrote them and does not write this buffer
    /// again until it is given back.
    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < BUFFERS);
        // SAFETY: inside the allocation; out of the ring until `give_back` (which takes
        // `&mut self`, so this borrow has ended by then).
        unsafe {
            std::slice::from_raw_parts(
                self.bufs.add(usize::from(bid) * BUF_SIZE),
                len.min(BUF_SIZE),
            )
        }
    }

    fn give_back(&mut self, bid: u16) {
        let index = usize::from(self.tail & (BUFFERS - 1));
        // SAFETY: `index < BUFFERS`: inside the allocation, past the published tail, so the
        // kernel does not read this entry until `publish`.
        let entry = unsafe { &mut *self.entries.add(index) };
        entry.set_addr(self.bufs as u64 + (usize::from(bid) * BUF_SIZE) as u64);
        entry.set_len(BUF_SIZE as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail overlays entry 0's reserved u16, inside the allocation and aligned;
        // Release orders the entries written before it.
        let tail = unsafe { &*types::BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }
}

struct Floor {
    ring: IoUring,
    listener: i32,
    buffers: Buffers,
    conns: Vec<Option<Conn>>,
    /// `BURST` answers back to back: every send points into it, and it is never freed.
    answers: &'static [u8],
}

impl Floor {
    fn push(&mut self, sqe: squeue::Entry) {
        // SAFETY: every SQE built here points at no memory, or into `answers` (static) or the
        // provided buffers (leaked): nothing it names is ever freed.
        while unsafe { self.ring.submission().push(&sqe) }.is_err() {
            let _ = self.ring.submit();
        }
    }

    fn arm_accept(&mut self) {
        let sqe = opcode::AcceptMulti::new(types::Fd(self.listener))
            .build()
            .user_data(ACCEPT);
        self.push(sqe);
    }

    fn arm_recv(&mut self, fd: i32) {
        let sqe = opcode::RecvMulti::new(types::Fd(fd), GROUP)
            .build()
            .user_data(RECV | fd as u64);
        self.push(sqe);
    }

    /// Hands what `fd` owes to a send, unless one is in flight (its completion sends the rest).
    fn send_owed(&mut self, fd: i32) {
        let Some(conn) = self.conns[fd as usize].as_mut() else {
            return;
        };
        if conn.sending > 0 || conn.owed == 0 || conn.closing {
            return;
        }
        let n = conn.owed.min(BURST);
        conn.owed -= n;
        conn.sending = n * RESPONSE.len();
        conn.sent = 0;
        self.send_rest(fd);
    }

    fn send_rest(&mut self, fd: i32) {
        let Some(conn) = self.conns[fd as usize].as_ref() else {
            return;
        };
        let rest = &self.answers[conn.sent..conn.sending];
        let sqe = opcode::Send::new(types::Fd(fd), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(SEND | fd as u64);
        self.push(sqe);
    }

    /// Closes `fd` once its send is done: in-flight operations hold their own reference to the
    /// socket, so closing early would be safe for the socket, but a completion that came after
    /// the close could be taken for the next connection on the same number. (Its multishot
    /// receive has ended by now: closes follow an end of stream or an error.)
    fn close(&mut self, fd: i32) {
        let Some(conn) = self.conns[fd as usize].as_mut() else {
            return;
        };
        let first = !conn.closing;
        conn.closing = true;
        if first && conn.sending == 0 {
            let sqe = opcode::Close::new(types::Fd(fd))
                .build()
                .user_data(CLOSE | fd as u64);
            self.push(sqe);
        }
    }

    fn on_accept(&mut self, res: i32, flags: u32) {
        if res >= 0 {
            let i = res as usize;
            if self.conns.len() <= i {
                self.conns.resize_with(i + 1, || None);
            }
            self.conns[i] = Some(Conn::default());
            self.arm_recv(res);
        }
        if !cqueue::more(flags) {
            self.arm_accept();
        }
    }

    fn on_recv(&mut self, fd: i32, res: i32, flags: u32) {
        if res == -libc::ENOBUFS {
            // Every buffer is out: they come back as this turn's completions are handled.
            self.arm_recv(fd);
            return;
        }
        if res <= 0 {
            self.close(fd); // end of stream, or an error
            return;
        }
        let bid = cqueue::buffer_select(flags).expect("a receive with data names its buffer");
        let Some(conn) = self.conns[fd as usize].as_mut() else {
            self.buffers.give_back(bid);
            return;
        };
        let heads = heads_ending(&mut conn.matched, self.buffers.bytes(bid, res as usize));
        conn.owed += heads;
        self.buffers.give_back(bid);
        self.send_owed(fd);
        if !cqueue::more(flags) {
            self.arm_recv(fd);
        }
    }

    fn on_send(&mut self, fd: i32, res: i32) {
        let Some(conn) = self.conns[fd as usize].as_mut() else {
            return;
        };
        conn.sent += res.max(0) as usize;
        if res > 0 && conn.sent < conn.sending && !conn.closing {
            self.send_rest(fd);
            return;
        }
        conn.sending = 0;
        if res <= 0 || conn.closing {
            conn.closing = false; // the close waited for this send: make it now
            self.close(fd);
            return;
        }
        self.send_owed(fd);
    }

    fn run(&mut self) -> io::Result<()> {
        self.arm_accept();
        let mut cqes = Vec::with_capacity(1024);
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
            cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(ud, res, flags) in &cqes {
                let fd = (ud & !OP) as i32;
                match ud & OP {
                    ACCEPT => self.on_accept(res, flags),
                    RECV => self.on_recv(fd, res, flags),
                    SEND => self.on_send(fd, res),
                    // The slot is free for the next connection on this number.
                    CLOSE => self.conns[fd as usize] = None,
                    _ => {}
                }
            }
            cqes.clear();
            self.buffers.publish();
        }
    }
}

fn ring() -> io::Result<IoUring> {
    // Task work run only when the loop enters the kernel, by the one thread that submits: the
    // cheapest completion path (kernel 6.1), else the default.
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(4096)
        .build(1024)
        .or_else(|_| IoUring::builder().setup_cqsize(4096).build(1024))
}

/// Serves `listener` on this thread, forever (the ring belongs to the thread that made it).
fn serve(listener: i32) -> io::Result<()> {
    let ring = ring()?;
    let buffers = Buffers::new();
    // SAFETY: the ring of entries is page-aligned, holds `BUFFERS` entries and is never freed.
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(buffers.entries as u64, BUFFERS, GROUP, 0)?
    };
    let mut floor = Floor {
        ring,
        listener,
        buffers,
        conns: Vec::new(),
        answers: RESPONSE.repeat(BURST).leak(),
    };
    floor.run()
}

fn main() -> io::Result<()> {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    let listener = listen(port)?;
    eprintln!("uring-floor listening on 0.0.0.0:{port}");
    serve(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The real loop on a real socket: a pipelined burst longer than one send's worth is
    /// answered whole and in order, a head split across writes once, and a second connection
    /// on a reused descriptor number works.
    #[test]
    fn answers_every_head_on_a_live_socket() {
        let listener = listen(0).unwrap();
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `addr` and `len` are live locals of the sizes given.
        check(unsafe {
            libc::getsockname(
                listener,
                (&mut addr as *mut libc::sockaddr_in).cast(),
                &mut len,
            )
        })
        .unwrap();
        let port = u16::from_be(addr.sin_port);
        std::thread::spawn(move || serve(listener));
        for _ in 0..2 {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let n = BURST * 2 + 3;
            c.write_all(&b"GET / HTTP/1.1\r\nHost: t\r\n\r\n".repeat(n))
                .unwrap();
            c.write_all(b"GET / HTTP/1.1\r\nHost: t\r").unwrap();
            c.write_all(b"\n\r\n").unwrap();
            let want = RESPONSE.repeat(n + 1);
            let mut got = vec![0; want.len()];
            c.read_exact(&mut got).unwrap();
            assert_eq!(got, want);
        }
    }
}

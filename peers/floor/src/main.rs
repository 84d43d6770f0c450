//! The floor: the cheapest responder that is still correct for the benchmark's load (keep-alive
//! `GET /`, pipelined or not), so every row of the peers table can say how far it is from what
//! the kernel allows. Edge-triggered epoll, each connection registered once; per readiness one
//! `recv` (a short read means drained) and one `send` of one `200` per request head found — no
//! parsing beyond finding each head's end (`\r\n\r\n`), no routing, no Date header. Not a
//! server for anything else: every request gets the same empty 200.
//!
//! Port: `$PORT` (default 3000). One thread.

use std::io;

use floor::heads_ending;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
const LISTENER: u64 = u64::MAX;

/// A connection: how much of `\r\n\r\n` the bytes so far end with, and what a full socket
/// buffer left unsent.
#[derive(Default)]
struct Conn {
    matched: u8,
    unsent: Vec<u8>,
}

/// `ret` as a result: -1 is the thread's errno.
fn check(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

fn listen(port: u16) -> io::Result<i32> {
    // SAFETY: plain socket calls on a descriptor this function owns; every pointer passed is to
    // a live local of the size given.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ) as isize)? as i32;
        let one: libc::c_int = 1;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
            let p = &one as *const libc::c_int as *const libc::c_void;
            check(libc::setsockopt(fd, libc::SOL_SOCKET, opt, p, size) as isize)?;
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let p = &addr as *const libc::sockaddr_in as *const libc::sockaddr;
        check(libc::bind(fd, p, len) as isize)?;
        check(libc::listen(fd, 4096) as isize)?;
        Ok(fd)
    }
}

struct Floor {
    epfd: i32,
    listener: i32,
    conns: Vec<Option<Conn>>,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl Floor {
    fn add(&self, fd: i32, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a live local; the kernel copies it.
        check(unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } as isize)?;
        Ok(())
    }

    fn accept_all(&mut self) {
        loop {
            // SAFETY: null address pointers are allowed (the peer's address is not wanted).
            let fd = unsafe {
                libc::accept4(
                    self.listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                return; // EAGAIN: the backlog is empty; anything else: retried at the next edge
            }
            let one: libc::c_int = 1;
            // SAFETY: `one` is a live c_int of the size given.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    &one as *const libc::c_int as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            let i = fd as usize;
            if self.conns.len() <= i {
                self.conns.resize_with(i + 1, || None);
            }
            self.conns[i] = Some(Conn::default());
            let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
            if self.add(fd, events, fd as u64).is_err() {
                self.close(fd);
            }
        }
    }

    fn close(&mut self, fd: i32) {
        self.conns[fd as usize] = None;
        // SAFETY: `fd` is a connection this loop accepted and has not closed yet.
        unsafe { libc::close(fd) };
    }

    /// Sends `data` once; what the socket did not take is kept for its next writable edge.
    fn send(&mut self, fd: i32, data: &[u8]) -> io::Result<()> {
        // SAFETY: `data` is a live slice of the length given.
        let sent = unsafe {
            libc::send(
                fd,
                data.as_ptr() as *const libc::c_void,
                data.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        let sent = match check(sent) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if let Some(conn) = self.conns[fd as usize].as_mut() {
            conn.unsent.extend_from_slice(&data[sent..]);
        }
        Ok(())
    }

    fn readable(&mut self, fd: i32, hangup: bool) -> io::Result<bool> {
        loop {
            // SAFETY: `buf` is a live buffer of the length given.
            let n = unsafe {
                libc::recv(
                    fd,
                    self.buf.as_mut_ptr() as *mut libc::c_void,
                    self.buf.len(),
                    0,
                )
            };
            let n = match check(n) {
                Ok(0) => return Ok(false),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) => return Err(e),
            };
            let conn = self.conns[fd as usize].as_mut().expect("open");
            let heads = heads_ending(&mut conn.matched, &self.buf[..n]);
            if heads > 0 && conn.unsent.is_empty() {
                let mut out = std::mem::take(&mut self.out);
                out.clear();
                (0..heads).for_each(|_| out.extend_from_slice(RESPONSE));
                let sent = self.send(fd, &out);
                self.out = out;
                sent?;
            } else if heads > 0 {
                (0..heads).for_each(|_| conn.unsent.extend_from_slice(RESPONSE));
            }
            // A short read drained the socket (unless the peer hung up: then read its EOF).
            if n < self.buf.len() && !hangup {
                return Ok(true);
            }
        }
    }

    fn writable(&mut self, fd: i32) -> io::Result<()> {
        let Some(conn) = self.conns[fd as usize].as_mut() else {
            return Ok(());
        };
        if conn.unsent.is_empty() {
            return Ok(());
        }
        let unsent = std::mem::take(&mut conn.unsent);
        self.send(fd, &unsent)
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            // SAFETY: `events` is a live buffer of the length given.
            let n = unsafe { libc::epoll_wait(self.epfd, events.as_mut_ptr(), 1024, -1) };
            let n = match check(n as isize) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            for ev in &events[..n] {
                let (flags, data) = (ev.events, ev.u64);
                if data == LISTENER {
                    self.accept_all();
                    continue;
                }
                let fd = data as i32;
                let hangup =
                    flags & (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
                let mut open = true;
                if flags & libc::EPOLLOUT as u32 != 0 {
                    open = self.writable(fd).is_ok();
                }
                if open && (flags & libc::EPOLLIN as u32 != 0 || hangup) {
                    open = self.readable(fd, hangup).unwrap_or(false);
                }
                if !open && self.conns.get(fd as usize).is_some_and(Option::is_some) {
                    self.close(fd);
                }
            }
        }
    }
}

fn main() -> io::Result<()> {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    let listener = listen(port)?;
    // SAFETY: plain syscall; the result is checked.
    let epfd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) } as isize)? as i32;
    let mut floor = Floor {
        epfd,
        listener,
        conns: Vec::new(),
        buf: vec![0; 4096],
        out: Vec::with_capacity(4096),
    };
    floor.add(listener, libc::EPOLLIN as u32, LISTENER)?;
    eprintln!("floor listening on 0.0.0.0:{port}");
    floor.run()
}

//! The only place the event loop makes system calls. Each wrapper bumps one counter of the
//! reactor that owns it (plain integers: a reactor never leaves its thread), so the counts are
//! cheap enough to stay on in release builds and are exactly what the loop did. The io_uring
//! calls the io-uring crate makes (enter, register) are made from here too, through its
//! `Submitter`. Setup (one eventfd, one epoll_create1 or io_uring_setup per reactor) and the
//! waker's write (another thread's) live here as well, uncounted: the counters are the loop's.

use std::fmt;
use std::os::fd::RawFd;

use io_uring::{types, IoUring, Submitter};

/// An errno value. Small and `Copy` so that it can travel in events and setup reports.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    fn last() -> Errno {
        Errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }

    /// Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): retrying at once fails
    /// again, so an accept that meets one pauses instead of spinning.
    pub fn is_out_of_resources(self) -> bool {
        matches!(
            self.0,
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
        )
    }

    /// The symbolic name (`EPERM`, `ENOSYS`, ...) where known, else the number.
    pub fn name(self) -> String {
        let known = [
            (libc::EPERM, "EPERM"),
            (libc::ENOSYS, "ENOSYS"),
            (libc::ENOMEM, "ENOMEM"),
            (libc::EINVAL, "EINVAL"),
            (libc::EAGAIN, "EAGAIN"),
            (libc::ECONNRESET, "ECONNRESET"),
            (libc::EPIPE, "EPIPE"),
            (libc::EBADF, "EBADF"),
            (libc::ECANCELED, "ECANCELED"),
            (libc::EEXIST, "EEXIST"),
            (libc::ENOENT, "ENOENT"),
            (libc::EMFILE, "EMFILE"),
            (libc::ENFILE, "ENFILE"),
            (libc::ENOBUFS, "ENOBUFS"),
            (libc::ETIMEDOUT, "ETIMEDOUT"),
            (libc::EACCES, "EACCES"),
        ];
        match known.iter().find(|(n, _)| *n == self.0) {
            Some((_, name)) => (*name).to_string(),
            None => format!("errno {}", self.0),
        }
    }

    pub fn to_io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.0)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.to_io())
    }
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Errno {
        Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

macro_rules! syscalls {
    ($($variant:ident => $name:literal,)*) => {
        /// Every syscall the loop can make, as strace would name it (epoll_ctl split by op).
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        pub enum Syscall { $($variant,)* }

        impl Syscall {
            pub const ALL: &'static [Syscall] = &[$(Syscall::$variant,)*];
            pub fn name(self) -> &'static str {
                match self { $(Syscall::$variant => $name,)* }
            }

            /// The syscall a counters line names, if the loop makes it.
            pub fn from_name(name: &str) -> Option<Syscall> {
                Syscall::ALL.iter().copied().find(|s| s.name() == name)
            }
        }
    };
}

syscalls! {
    EpollWait => "epoll_wait",
    EpollCtlAdd => "epoll_ctl_add",
    EpollCtlMod => "epoll_ctl_mod",
    EpollCtlDel => "epoll_ctl_del",
    Recv => "recvfrom",
    Send => "sendto",
    Accept => "accept4",
    Close => "close",
    Shutdown => "shutdown",
    Setsockopt => "setsockopt",
    Ioctl => "ioctl",
    Read => "read",
    IoUringEnter => "io_uring_enter",
    IoUringRegister => "io_uring_register",
}

impl Syscall {
    /// One of `epoll_ctl`'s ops (the counters split them).
    pub fn is_epoll_ctl(self) -> bool {
        matches!(
            self,
            Syscall::EpollCtlAdd | Syscall::EpollCtlMod | Syscall::EpollCtlDel
        )
    }
}

/// Per-reactor syscall counts. `Copy`, so a snapshot is a plain assignment.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct SyscallCounts {
    counts: [u64; Syscall::ALL.len()],
    /// `epoll_ctl` calls that failed with EEXIST or ENOENT (the legacy re-arm's first try).
    pub epoll_ctl_refused: u64,
}

impl SyscallCounts {
    pub fn get(&self, s: Syscall) -> u64 {
        self.counts[s as usize]
    }

    pub fn epoll_ctl(&self) -> u64 {
        self.get(Syscall::EpollCtlAdd)
            + self.get(Syscall::EpollCtlMod)
            + self.get(Syscall::EpollCtlDel)
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(name, count)` for every syscall, in a fixed order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Syscall::ALL.iter().map(move |&s| (s.name(), self.get(s)))
    }

    /// The difference `self - earlier`, for measuring one stretch of a run.
    pub fn since(&self, earlier: &SyscallCounts) -> SyscallCounts {
        let mut out = *self;
        for (o, e) in out.counts.iter_mut().zip(earlier.counts) {
            *o -= e;
        }
        out.epoll_ctl_refused -= earlier.epoll_ctl_refused;
        out
    }

    fn bump(&mut self, s: Syscall) {
        self.counts[s as usize] += 1;
    }
}

fn check(rc: libc::c_int) -> Result<libc::c_int, Errno> {
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(rc)
    }
}

fn check_size(rc: isize) -> Result<usize, Errno> {
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(rc as usize)
    }
}

/// The counted syscall surface of one reactor.
#[derive(Default)]
pub(crate) struct Sys {
    pub counts: SyscallCounts,
    /// The waiting calls' share of [`wire::TurnCounters`] (the backends add what they reap).
    pub turns: wire::TurnCounters,
    /// When the last `io_uring_enter` that waited returned: a clock reading the io_uring
    /// backend reuses for its once-a-second work (no clock read of its own per turn).
    pub returned_at: Option<std::time::Instant>,
}

impl Sys {
    pub fn epoll_wait(
        &mut self,
        epfd: RawFd,
        events: &mut Vec<libc::epoll_event>,
        timeout_ms: i32,
    ) -> Result<(), Errno> {
        self.counts.bump(Syscall::EpollWait);
        events.clear();
        let started = std::time::Instant::now();
        // SAFETY: the kernel writes at most `capacity` events into the vector's buffer; we
        // then expose exactly the number it reports.
        let n = check(unsafe {
            libc::epoll_wait(
                epfd,
                events.as_mut_ptr(),
                events.capacity() as i32,
                timeout_ms,
            )
        });
        self.turns.waits += 1;
        self.turns.wait_ns += started.elapsed().as_nanos() as u64;
        let n = n?;
        self.turns.reaped += n as u64;
        // SAFETY: the kernel wrote exactly `n` events into the buffer.
        unsafe { events.set_len(n as usize) };
        Ok(())
    }

    pub fn epoll_ctl(
        &mut self,
        epfd: RawFd,
        op: libc::c_int,
        fd: RawFd,
        events: u32,
        token: u64,
    ) -> Result<(), Errno> {
        self.counts.bump(match op {
            libc::EPOLL_CTL_ADD => Syscall::EpollCtlAdd,
            libc::EPOLL_CTL_MOD => Syscall::EpollCtlMod,
            _ => Syscall::EpollCtlDel,
        });
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        let r = check(unsafe { libc::epoll_ctl(epfd, op, fd, &mut ev) }).map(drop);
        if let Err(Errno(libc::EEXIST | libc::ENOENT)) = r {
            self.counts.epoll_ctl_refused += 1;
        }
        r
    }

    /// recv into the spare capacity of `buf`, extending its length by what arrived.
    pub fn recv(&mut self, fd: RawFd, buf: &mut Vec<u8>) -> Result<usize, Errno> {
        self.counts.bump(Syscall::Recv);
        let spare = buf.spare_capacity_mut();
        // SAFETY: the kernel writes at most `spare.len()` bytes into the spare capacity.
        let n = check_size(unsafe {
            libc::recv(
                fd,
                spare.as_mut_ptr().cast(),
                spare.len(),
                libc::MSG_DONTWAIT,
            )
        })?;
        // SAFETY: those `n` bytes are now initialised.
        unsafe { buf.set_len(buf.len() + n) };
        Ok(n)
    }

    pub fn send(&mut self, fd: RawFd, data: &[u8]) -> Result<usize, Errno> {
        self.counts.bump(Syscall::Send);
        // SAFETY: `data` is valid for reads of its length.
        check_size(unsafe {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        })
    }

    pub fn accept(&mut self, listener: RawFd) -> Result<RawFd, Errno> {
        self.counts.bump(Syscall::Accept);
        // SAFETY: null address pointers are allowed by accept4.
        check(unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        })
    }

    pub fn close(&mut self, fd: RawFd) {
        self.counts.bump(Syscall::Close);
        // SAFETY: the caller gives up ownership of `fd`. close's error is not actionable
        // here: the fd is released either way on Linux.
        unsafe { libc::close(fd) };
    }

    pub fn shutdown_write(&mut self, fd: RawFd) -> Result<(), Errno> {
        self.counts.bump(Syscall::Shutdown);
        // SAFETY: plain syscall on an fd the caller owns.
        check(unsafe { libc::shutdown(fd, libc::SHUT_WR) }).map(drop)
    }

    pub fn set_nodelay(&mut self, fd: RawFd) -> Result<(), Errno> {
        self.counts.bump(Syscall::Setsockopt);
        let one: libc::c_int = 1;
        // SAFETY: option value points to a live c_int of the size given.
        check(unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// `O_NONBLOCK` on a descriptor the reactor did not open itself: one `ioctl(FIONBIO)`, as
    /// mio does, where `fcntl` takes a get and a set.
    pub fn set_nonblocking(&mut self, fd: RawFd) -> Result<(), Errno> {
        self.counts.bump(Syscall::Ioctl);
        let on: libc::c_int = 1;
        // SAFETY: FIONBIO reads one c_int through the pointer, which points to a live local.
        check(unsafe { libc::ioctl(fd, libc::FIONBIO, &on) }).map(drop)
    }

    /// Drains an eventfd (the waker).
    pub fn read_eventfd(&mut self, fd: RawFd) {
        self.counts.bump(Syscall::Read);
        let mut v = 0u64;
        // SAFETY: an eventfd read writes exactly 8 bytes into `v`. EAGAIN (nothing pending)
        // is fine: the wake was already consumed.
        unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    }

    /// Submits what is queued without waiting (the submission queue is full).
    pub fn io_uring_submit(&mut self, submitter: &Submitter<'_>) -> Result<usize, Errno> {
        self.counts.bump(Syscall::IoUringEnter);
        let submitted = submitter.submit().map_err(Errno::from)?;
        self.turns.submitted += submitted as u64;
        Ok(submitted)
    }

    /// Submits what is queued and waits for `want` completions: at most `timeout` (`None`:
    /// as long as it takes), and with `min_wait_usec` > 0 returning after that long with
    /// whatever arrived (kernel 6.12's min-wait).
    pub fn io_uring_enter(
        &mut self,
        submitter: &Submitter<'_>,
        want: usize,
        timeout: Option<&types::Timespec>,
        min_wait_usec: u32,
    ) -> Result<usize, Errno> {
        self.counts.bump(Syscall::IoUringEnter);
        let started = std::time::Instant::now();
        let result = match (timeout, min_wait_usec) {
            (None, 0) => submitter.submit_and_wait(want),
            (None, usec) => {
                submitter.submit_with_args(want, &types::SubmitArgs::new().min_wait_usec(usec))
            }
            (Some(ts), usec) => submitter.submit_with_args(
                want,
                &types::SubmitArgs::new().timespec(ts).min_wait_usec(usec),
            ),
        };
        let returned_at = std::time::Instant::now();
        self.turns.waits += 1;
        self.turns.wait_ns += returned_at.duration_since(started).as_nanos() as u64;
        self.returned_at = Some(returned_at);
        // What it submitted: the queue is handed over even when the wait itself ends early.
        self.turns.submitted += result.as_ref().map_or(0, |&n| n as u64);
        result.map_err(Errno::from)
    }

    /// Registers `count` ring entries at `entries` as provided-buffer group `group`.
    ///
    /// # Safety
    ///
    /// `entries` points to `count` page-aligned `BufRingEntry`s that stay allocated, and are
    /// written only as the buffer-ring protocol allows, until the group is unregistered.
    pub unsafe fn register_buf_ring(
        &mut self,
        submitter: &Submitter<'_>,
        entries: u64,
        count: u16,
        group: u16,
    ) -> Result<(), Errno> {
        self.counts.bump(Syscall::IoUringRegister);
        // SAFETY: forwarded to the caller (this function's contract).
        unsafe { submitter.register_buf_ring_with_flags(entries, count, group, 0) }
            .map_err(Errno::from)
    }

    pub fn unregister_buf_ring(
        &mut self,
        submitter: &Submitter<'_>,
        group: u16,
    ) -> Result<(), Errno> {
        self.counts.bump(Syscall::IoUringRegister);
        submitter.unregister_buf_ring(group).map_err(Errno::from)
    }
}

/// Creates an io_uring as `builder` says (setup: not counted).
pub(crate) fn io_uring_setup(builder: &io_uring::Builder, entries: u32) -> Result<IoUring, Errno> {
    builder.build(entries).map_err(Errno::from)
}

/// Creates an epoll instance (setup: not counted).
pub(crate) fn epoll_create() -> Result<RawFd, Errno> {
    // SAFETY: plain syscall; the result is checked.
    check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
}

/// Adds one to an eventfd's counter: a [`crate::Waker`]'s wake, made by another thread, so
/// counted by no reactor. EAGAIN (counter saturated) still leaves the reactor woken.
pub(crate) fn eventfd_write(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64; `fd` is an eventfd the caller keeps open.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// An eventfd; creation and `wake` are not counted (setup, and another thread's work).
pub(crate) fn eventfd() -> Result<RawFd, Errno> {
    // SAFETY: plain syscall.
    check(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
}

#[cfg(test)]
mod tests {
    use super::Syscall;

    #[test]
    fn every_syscall_is_found_by_the_name_the_counters_line_gives_it() {
        for &s in Syscall::ALL {
            assert_eq!(Syscall::from_name(s.name()), Some(s));
        }
        assert_eq!(
            Syscall::from_name("epoll_ctl"),
            None,
            "the sum is not a syscall we make"
        );
        let ctl: Vec<&str> = Syscall::ALL
            .iter()
            .filter(|s| s.is_epoll_ctl())
            .map(|s| s.name())
            .collect();
        assert_eq!(ctl, ["epoll_ctl_add", "epoll_ctl_mod", "epoll_ctl_del"]);
    }
}

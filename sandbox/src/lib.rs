//! The project's "no io_uring" policy as a seccomp filter applied to a child process.
//!
//! Docker Engine >= 25 and containerd >= 2 answer `io_uring_setup`, `io_uring_enter` and
//! `io_uring_register` with `EPERM`; Podman and CRI-O answer `ENOSYS`. Tests and the runner's
//! native mode reproduce either without a container engine by installing this filter in a child
//! between `fork` and `exec`. Everything else is allowed.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::Command;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

/// The syscalls the policy denies: exactly those Docker's default profile stopped allowing.
pub const IO_URING_SYSCALLS: [(&str, libc::c_long); 3] = [
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("seccomp is not supported on architecture {0}")]
    Arch(String),
    #[error("building the seccomp filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    #[error("installing the seccomp filter: {0}")]
    Apply(seccompiler::Error),
}

/// A compiled filter that makes the io_uring syscalls fail with `errno`.
pub fn deny_io_uring(errno: i32) -> Result<BpfProgram, Error> {
    let arch: TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| Error::Arch(std::env::consts::ARCH.to_string()))?;
    let rules = IO_URING_SYSCALLS
        .iter()
        .map(|&(_, nr)| (nr, Vec::new()))
        .collect::<BTreeMap<_, _>>();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// Puts the calling thread, and only it, under [`deny_io_uring`]`(errno)` for the rest of its
/// life: a filter installed without `SECCOMP_FILTER_FLAG_TSYNC` binds the thread that installs
/// it and what it spawns, never the process's other threads (seccomp(2)). The runner's
/// mechanism probe serves one of its patterns from such a thread: the block's cost measured
/// in-process, in a thread that ends when the pattern does.
pub fn deny_io_uring_in_this_thread(errno: i32) -> Result<(), Error> {
    let program = deny_io_uring(errno)?;
    seccompiler::apply_filter(&program).map_err(Error::Apply)
}

/// Makes `cmd`'s child run under [`deny_io_uring`]`(errno)`.
pub fn deny_io_uring_in_child(cmd: &mut Command, errno: i32) -> Result<&mut Command, Error> {
    let program = deny_io_uring(errno)?;
    // SAFETY: the closure runs in the forked child before exec. It only issues prctl and
    // seccomp (apply_filter allocates nothing on success; the program was built before the
    // fork and is moved in), which are async-signal-safe.
    let cmd = unsafe {
        cmd.pre_exec(move || {
            seccompiler::apply_filter(&program).map_err(|e| std::io::Error::other(e.to_string()))
        })
    };
    Ok(cmd)
}

/// Makes `cmd`'s child get SIGKILL when the thread that spawns it ends (`PR_SET_PDEATHSIG`;
/// a child of a test dies with the test, even one killed or aborted). The signal follows the
/// spawning *thread*, not the process: only for children that must not outlive it — never
/// for a long-lived service spawned from a pool thread. Survives exec (not of a set-user-ID
/// program), so a wrapper that execs the server (`prlimit`) passes it on.
pub fn die_with_spawning_thread(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and makes two syscalls
    // (prctl, getppid), both async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died between fork and prctl: the signal will never come.
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "the parent exited before the child ran",
                ));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_dies_with_the_thread_that_spawned_it() {
        let pid = std::thread::spawn(|| {
            let mut cmd = Command::new("sleep");
            cmd.arg("30");
            let child = die_with_spawning_thread(&mut cmd).spawn().unwrap();
            let pid = child.id() as libc::pid_t;
            std::mem::forget(child); // not killed or waited for by us
            pid
        })
        .join()
        .unwrap();
        // Reaped as a zombie of this process once SIGKILL lands; waitpid tells how it ended.
        let mut status = 0;
        // SAFETY: waitpid on our own child, writing only `status`.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(rc, pid);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
            "{status:#x}"
        );
    }

    /// What `io_uring_setup(1, {0})` returns in a forked child (after every earlier pre_exec
    /// hook of `cmd`, the filter among them), as the child's exit status: 0 when it got a
    /// ring, else its errno; 100 when a syscall the filter must leave alone (getpid) failed.
    fn io_uring_setup_in_child(cmd: &mut Command) -> i32 {
        // SAFETY: the closure runs in the forked child before exec; it makes raw syscalls
        // (getpid, io_uring_setup, _exit) on a stack-local params block, all async-signal-safe,
        // and allocates nothing. It never returns: the child ends here, not in exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::getpid() <= 0 {
                    libc::_exit(100);
                }
                let mut params = [0u8; 120]; // struct io_uring_params, zeroed
                let fd = libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr());
                libc::_exit(if fd >= 0 {
                    0
                } else {
                    *libc::__errno_location()
                });
            });
        }
        cmd.status().unwrap().code().unwrap()
    }

    #[test]
    fn child_sees_the_chosen_errno_and_nothing_else_changes() {
        for errno in [libc::EPERM, libc::ENOSYS] {
            // A real io_uring_setup in the filtered child fails with exactly this errno,
            // while getpid still works.
            let mut cmd = Command::new("true");
            deny_io_uring_in_child(&mut cmd, errno).unwrap();
            assert_eq!(io_uring_setup_in_child(&mut cmd), errno, "errno {errno}");
            // And exec and an ordinary program still work under the filter.
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "exit 7"]);
            let status = deny_io_uring_in_child(&mut cmd, errno)
                .unwrap()
                .status()
                .unwrap();
            assert_eq!(status.code(), Some(7));
        }
        // Without the filter the same child gets a ring (the comparison that makes the errno
        // the filter's doing), unless this kernel refuses io_uring to everyone.
        let unfiltered = io_uring_setup_in_child(&mut Command::new("true"));
        let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
            .is_ok_and(|v| v.trim() != "0");
        assert!(
            unfiltered == 0 || disabled,
            "io_uring_setup failed with errno {unfiltered} without any filter"
        );
    }

    /// `io_uring_setup(1, {0})` in the calling thread: 0 when it got a ring (closed again),
    /// else its errno.
    fn io_uring_setup_here() -> i32 {
        let mut params = [0u8; 120]; // struct io_uring_params, zeroed
                                     // SAFETY: io_uring_setup writes only into the params block we own; a ring fd it
                                     // returns is ours to close.
        unsafe {
            let fd = libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr());
            if fd >= 0 {
                libc::close(fd as i32);
                0
            } else {
                *libc::__errno_location()
            }
        }
    }

    #[test]
    fn a_thread_under_the_filter_binds_only_itself() {
        let filtered = std::thread::spawn(|| {
            deny_io_uring_in_this_thread(libc::EPERM).unwrap();
            io_uring_setup_here()
        })
        .join()
        .unwrap();
        assert_eq!(filtered, libc::EPERM);
        // The test's own thread, spawned before and never filtered, still gets a ring (unless
        // this kernel refuses io_uring to everyone).
        let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
            .is_ok_and(|v| v.trim() != "0");
        let here = io_uring_setup_here();
        assert!(
            here == 0 || disabled,
            "errno {here} in an unfiltered thread"
        );
    }

    #[test]
    fn filter_is_not_empty() {
        assert!(deny_io_uring(libc::EPERM).unwrap().len() > 4);
    }
}

//! CPU placement: the CPUs a process may use (its affinity mask, which a container's cpuset
//! sets) and pinning a thread to some of them. A reactor is one thread, so whoever places
//! reactors — the server's workers, the runner's driver — places them with this.

use std::io;

/// A CPU set built from indices (those past `CPU_SETSIZE` are left out); no allocation, so it
/// may be built between `fork` and `exec`.
fn set_of(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set, and CPU_SET writes one bit
    // of it for an index below CPU_SETSIZE (checked here).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        set
    }
}

/// The CPUs this process may run on, ascending (empty if the kernel will not say).
pub fn allowed() -> Vec<usize> {
    // SAFETY: as in `set_of`; sched_getaffinity fills the set we own for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins thread `tid` (0: the calling thread) to `cpus`. Async-signal-safe (no allocation,
/// one syscall), so a `pre_exec` hook may call it.
pub fn pin(tid: libc::pid_t, cpus: &[usize]) -> io::Result<()> {
    let set = set_of(cpus);
    // SAFETY: sched_setaffinity only reads the set we pass, of the size we pass; a thread
    // that is gone gives ESRCH, an error, not undefined behaviour.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_one_allowed_cpu_sees_only_it_and_can_be_set_back() {
        let all = allowed();
        assert!(!all.is_empty());
        let seen = std::thread::spawn(move || {
            pin(0, &all[..1]).unwrap();
            let one = allowed();
            pin(0, &all).unwrap();
            (one, allowed(), all)
        })
        .join()
        .unwrap();
        assert_eq!(seen.0, seen.2[..1]);
        assert_eq!(seen.1, seen.2);
        assert!(pin(0, &[]).is_err(), "an empty set is refused (EINVAL)");
    }
}

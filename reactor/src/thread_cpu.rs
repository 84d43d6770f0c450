//! A thread's own CPU time, read by the thread itself: what an event loop spent, exactly in
//! all and split into user and kernel time — for whoever measures a loop over a window (the
//! server's counters snapshot, the runner's mechanism probe).

/// The calling thread's CPU time so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCpu {
    /// `CLOCK_THREAD_CPUTIME_ID`: exact.
    pub total_ns: u64,
    /// `getrusage(RUSAGE_THREAD)`: the scheduler tick's samples, scaled by the kernel to the
    /// exact total, so their split is as fine as the ticks in the window.
    pub user_ns: u64,
    pub system_ns: u64,
}

fn ns(tv: libc::timeval) -> u64 {
    tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000
}

impl ThreadCpu {
    pub fn now() -> ThreadCpu {
        // SAFETY: both calls only write the structs we own and pass; the calling thread is
        // always a valid subject for CLOCK_THREAD_CPUTIME_ID and RUSAGE_THREAD, so neither
        // can fail (and a zeroed struct would read as no time, not as garbage).
        let (ts, ru) = unsafe {
            let mut ts: libc::timespec = std::mem::zeroed();
            libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
            (ts, ru)
        };
        ThreadCpu {
            total_ns: ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
            user_ns: ns(ru.ru_utime),
            system_ns: ns(ru.ru_stime),
        }
    }

    /// What was spent since `earlier` (a reading of the same thread).
    pub fn since(&self, earlier: &ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            total_ns: self.total_ns.saturating_sub(earlier.total_ns),
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            system_ns: self.system_ns.saturating_sub(earlier.system_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_accrues_its_own_time_and_an_idle_one_does_not() {
        let start = ThreadCpu::now();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let busy = ThreadCpu::now().since(&start);
        assert!(busy.total_ns >= 10_000_000, "{busy:?}");
        // Another thread sleeping the same while: its clock barely moves.
        let idle = std::thread::spawn(|| {
            let start = ThreadCpu::now();
            std::thread::sleep(std::time::Duration::from_millis(30));
            ThreadCpu::now().since(&start)
        })
        .join()
        .unwrap();
        assert!(idle.total_ns < busy.total_ns / 4, "{idle:?} vs {busy:?}");
    }
}

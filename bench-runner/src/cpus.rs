//! CPU placement: the default split of this process's CPUs between servers and driver, and
//! pinning the whole runner (every thread) to the driver's half.

use anyhow::{Context, Result};

pub use reactor::affinity::allowed;

/// The allowed CPUs split in two halves, servers first (one CPU: both get it).
pub fn default_split() -> (Vec<usize>, Vec<usize>) {
    let cpus = allowed();
    if cpus.len() < 2 {
        return (cpus.clone(), cpus);
    }
    let half = cpus.len() / 2;
    (cpus[..half].to_vec(), cpus[half..].to_vec())
}

/// Pins every thread of this process to `cpus` (threads made later inherit it), so that the
/// runner's own work — the driver, tokio, the log followers — never runs on a server's CPU.
pub fn pin_process(cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    let tasks = std::fs::read_dir("/proc/self/task").context("listing /proc/self/task")?;
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        // A thread that has just exited gives ESRCH, which is fine to ignore.
        if let Err(e) = reactor::affinity::pin(tid, cpus) {
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e).with_context(|| format!("sched_setaffinity({tid}, {cpus:?})"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_the_process_moves_threads_that_already_exist() {
        let all = allowed();
        assert!(!all.is_empty());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (back_tx, back_rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            rx.recv().unwrap();
            back_tx.send(allowed()).unwrap();
        });
        // Pin to the first allowed CPU, look from the older thread, then restore.
        let target: Vec<usize> = vec![all[0]];
        pin_process(&target).unwrap();
        tx.send(()).unwrap();
        let seen = back_rx.recv().unwrap();
        t.join().unwrap();
        pin_process(&all).unwrap();
        assert_eq!(
            seen, target,
            "a thread started before the pin was moved too"
        );
        assert_eq!(allowed(), all);
    }
}

//! CPU placement: the default split of this process's CPUs between servers and driver, and
//! pinning the whole runner (every thread) to the driver's half.

pub use reactor::affinity::allowed;

/// Why the runner could not be moved onto its CPUs.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("listing /proc/self/task: {0}")]
    Tasks(std::io::Error),
    #[error("sched_setaffinity({tid}, {cpus:?}): {error}")]
    Affinity {
        tid: libc::pid_t,
        cpus: Vec<usize>,
        error: std::io::Error,
    },
}

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
pub fn pin_process(cpus: &[usize]) -> Result<(), PinError> {
    if cpus.is_empty() {
        return Ok(());
    }
    let tasks = std::fs::read_dir("/proc/self/task").map_err(PinError::Tasks)?;
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        // A thread that has just exited gives ESRCH, which is fine to ignore.
        if let Err(error) = reactor::affinity::pin(tid, cpus) {
            if error.raw_os_error() != Some(libc::ESRCH) {
                return Err(PinError::Affinity {
                    tid,
                    cpus: cpus.to_vec(),
                    error,
                });
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

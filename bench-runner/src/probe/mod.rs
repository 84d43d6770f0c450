//! What a syscall costs on this host, measured on the server's CPU in about a second: the
//! figure that explains why Docker's io_uring block costs +5 % on one host and +25 % on
//! another. The fallback trades io_uring's ~0.05 `io_uring_enter` a request for epoll's ~2
//! syscalls (a `recvfrom` and a `sendto`, kept alive); what each costs to enter and leave the
//! kernel depends on the CPU, the hypervisor and the mitigations in force (Retpolines, IBRS,
//! …), not on the server. `bench-runner probe` prints it; every run records it in raw.json.
//!
//! Three figures, each the fastest of several batches (a batch's mean; the fastest is the one
//! least disturbed by the host, and a cost is a floor, not an average of interference):
//! - `getppid`: a syscall that does no work — the entry and exit alone;
//! - `recv_eagain`: `recvfrom` on a connected TCP socket with nothing to read — a socket
//!   syscall's fixed cost (the fd, the socket lock) without data;
//! - `send_recv_64`: one 64-byte `sendto` on a connected loopback TCP socket and the `recvfrom`
//!   that reads it on the other end — two syscalls of the epoll path with their TCP work (which
//!   io_uring does too, so only the entry and exit are what the block adds).

pub mod mechanism;
mod serve;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

pub use crate::model::SyscallCost;

/// Batches per figure; the fastest counts.
const BATCHES: u32 = 7;

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("pinning the probe to cpu {cpu}: {source}")]
    Pin { cpu: usize, source: std::io::Error },
    #[error("the probe's loopback socket pair: {0}")]
    Socket(#[from] std::io::Error),
}

/// ns per iteration of the fastest of [`BATCHES`] batches of `n` calls of `f`.
fn fastest(n: u32, mut f: impl FnMut()) -> f64 {
    (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .fold(f64::INFINITY, f64::min)
}

/// A connected loopback TCP pair (Nagle off on the sender, as the server's sockets).
fn pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let a = TcpStream::connect(listener.local_addr()?)?;
    let (b, _) = listener.accept()?;
    a.set_nodelay(true)?;
    b.set_nodelay(true)?;
    Ok((a, b))
}

/// Measures on `cpu` (when given), in a thread of its own pinned there, then returns.
pub fn measure(cpu: Option<usize>) -> Result<SyscallCost, ProbeError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                if let Some(cpu) = cpu {
                    reactor::affinity::pin(0, &[cpu])
                        .map_err(|source| ProbeError::Pin { cpu, source })?;
                }
                // SAFETY: getppid takes no arguments, touches no memory and cannot fail.
                let getppid_ns = fastest(200_000, || unsafe {
                    std::hint::black_box(libc::getppid());
                });
                let (mut a, mut b) = pair()?;
                b.set_nonblocking(true)?;
                let mut buf = [0u8; 64];
                let recv_eagain_ns = fastest(100_000, || {
                    let r = b.read(&mut buf);
                    debug_assert!(r.is_err());
                    std::hint::black_box(r.is_err());
                });
                b.set_nonblocking(false)?;
                let mut failed = None;
                let send_recv_64_ns = fastest(20_000, || {
                    let done = a
                        .write_all(&[b'x'; 64])
                        .and_then(|()| b.read_exact(&mut buf));
                    if let Err(e) = done {
                        failed.get_or_insert(e);
                    }
                });
                if let Some(e) = failed {
                    return Err(e.into());
                }
                Ok(SyscallCost {
                    cpu,
                    getppid_ns,
                    recv_eagain_ns,
                    send_recv_64_ns,
                })
            })
            .join()
            .expect("the probe thread panicked")
    })
}

/// The probe as `bench-runner probe` prints it.
pub fn describe(c: &SyscallCost, machine: &crate::model::Machine) -> String {
    format!(
        "syscall cost on {} (cpu {}):\n  a syscall's entry and exit (getppid): {:.0} ns\n  recvfrom with nothing to read:        {:.0} ns\n  64-byte sendto + the recvfrom reading it on loopback: {:.0} ns\n{}\nDocker's io_uring block turns an io_uring server's ~0.05 syscalls a request (kept alive) into epoll's ~2 (recvfrom, sendto): about {:.2} µs more CPU a request from entering the kernel alone on this host, before the work both paths share. At a server's CPU per request of P µs that is {:.2}/P of it (a full run measures both and compares).\n",
        crate::render::headline::machine_phrase(machine),
        c.cpu.map_or("any".into(), |c| c.to_string()),
        c.getppid_ns,
        c.recv_eagain_ns,
        c.send_recv_64_ns,
        if machine.mitigations.is_empty() {
            String::new()
        } else {
            let m: Vec<String> = machine
                .mitigations
                .iter()
                .map(|(k, v)| format!("  {k}: {v}"))
                .collect();
            format!("mitigations in force:\n{}\n", m.join("\n"))
        },
        2.0 * c.per_syscall_ns() / 1000.0,
        2.0 * c.per_syscall_ns() / 1000.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_measures_ordered_positive_costs() {
        let c = measure(reactor::affinity::allowed().first().copied()).unwrap();
        // Each figure is a real cost, and a socket syscall does more than getppid, and a send
        // with its receive more than a receive that finds nothing: an order any host keeps.
        assert!(c.getppid_ns > 1.0, "{c:?}");
        assert!(c.recv_eagain_ns > c.getppid_ns, "{c:?}");
        assert!(c.send_recv_64_ns > c.recv_eagain_ns, "{c:?}");
        assert!(c.send_recv_64_ns < 1_000_000.0, "{c:?}");
    }
}

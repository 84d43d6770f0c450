//! What the run's probe recorded: a syscall's cost on the server CPU ([`crate::probe`]
//! measures it; the report explains the block's cost with it).

use serde::{Deserialize, Serialize};

/// The probe's figures, ns per call (per pair for `send_recv_64_ns`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyscallCost {
    /// The CPU it ran on (the first server CPU).
    pub cpu: Option<usize>,
    pub getppid_ns: f64,
    pub recv_eagain_ns: f64,
    pub send_recv_64_ns: f64,
}

impl SyscallCost {
    /// The cost of entering and leaving the kernel once: what a syscall the block adds costs
    /// beyond the work io_uring does as well.
    pub fn per_syscall_ns(&self) -> f64 {
        self.getppid_ns
    }
}

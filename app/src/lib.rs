//! The contract server's worker loop and HTTP handling, as a library: `main.rs` runs them as
//! the `server` binary (one worker a thread, each on its own reactor), and the runner's
//! mechanism probe (bench-runner/src/probe/) serves the contract in-process with this very
//! code — unblocked, and in a thread under the no-io-uring filter — so that what it predicts
//! includes the server's own work, not a stand-in's.

mod chunked;
pub mod config;
#[cfg(any(test, fuzzing))]
mod framing_reference;
pub mod http;
mod pool;
pub mod worker;

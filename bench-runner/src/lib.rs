//! bench-runner: the rxbench matrix — seccomp profiles × server configurations × connection
//! levels — with every server resident and alternating slices, written to
//! results/<UTC timestamp>/ with paired confidence intervals and the evidence.
//!
//! # How a run flows through the parts
//!
//! ```text
//! cli ──> plan::make_plan ──> Plan (servers, levels, routes, rounds, seed; no I/O)
//!                              │
//! engine::pick ──> Docker | Native (one trait, `Engine`) ──> run::run_on::<E>
//!                              │
//!   pool    the resident servers: start, readiness, restart once, stop
//!   load    the load driver (a trait: rxload in-process, wrk, goose)
//!   slice   one measured slice: the window's edges, server CPU, counters snapshots
//!   strace  one extra slice per server under strace -c (its syscall profile)
//!   record  raw.json written atomically after every slice, `latest`, the commit
//!   calibrate  the study of the intervals themselves (identical servers, many instances)
//!                              │
//! raw.json ──> summary (rows, paired comparisons, resolution; pure, with stats)
//!          ──> render (table.md, summary.json, CSV, chart.svg, report.html)
//! ```
//!
//! A new engine is one file under `engine/` implementing [`engine::Engine`] plus one arm in
//! [`engine::pick`]'s caller; a new load driver is one file under `load/` implementing
//! [`load::LoadDriver`] plus one arm in [`load::choose`]. Everything a table says about how a
//! run was made comes from that run's raw.json ([`model::Raw`]), so `bench-runner report DIR`
//! re-renders any run of this schema.

pub mod calibrate;
pub mod cli;
pub mod cpus;
pub mod engine;
pub mod export;
pub mod file;
pub mod load;
pub mod model;
pub use driver::notrack;
pub mod offered;
pub mod peers;
pub mod plan;
pub mod pool;
pub mod preflight;
pub mod probe;
pub mod record;
pub mod render;
pub mod run;
pub mod slice;
pub mod stats;
pub mod steal;
pub mod strace;
pub mod summary;
pub mod target;

use std::path::{Path, PathBuf};

/// The workspace root (builds, peers/, docker/ are found from it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

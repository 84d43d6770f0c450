//! What the server says and reads, typed, for every crate that talks to it: the knobs it reads
//! ([`knobs`]), the start-up line that names its backend ([`startup`]) and the counters line
//! it prints on SIGUSR1 and on shutdown ([`counters`]). The server prints these types and the
//! runner parses them back with the same code, so neither side matches on the other's text.
//!
//! Its only dependencies are serde's: the server's the-benchmarker export carries this crate's
//! source as it carries the reactor's.

pub mod counters;
pub mod knobs;
pub mod startup;

pub use counters::{CountersLine, Event, TurnCounters, WorkerCounters};
pub use knobs::{BackendChoice, BadChoice, EpollMode};
pub use startup::{Backend, IoUringState, StartupLine};

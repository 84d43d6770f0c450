//! What is measured ([`subject`]), what servers say about themselves ([`counters`]), and the
//! record of one run ([`raw`]: raw.json, from which every other output is derived).

pub mod counters;
pub mod failure;
pub mod load;
pub mod probe;
pub mod raw;
pub mod subject;

pub use counters::*;
pub use failure::{Failure, FailureKind};
pub use load::*;
pub use probe::{
    BatchSpread, MechanismBatch, MechanismCost, MechanismLevel, PatternCost, ServedBy, SyscallCost,
};
pub use raw::*;
pub use subject::*;

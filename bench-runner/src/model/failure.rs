//! What went wrong, as raw.json keeps it: a kind a program can match on, and the text a reader
//! is shown. The runner's typed errors (`slice::SliceError`, `pool::PoolError`,
//! `strace::StraceError`) become a [`Failure`] when they are recorded, because a record outlives
//! the error's sources (an `io::Error`, a Docker client error) and must read back.

use serde::{Deserialize, Serialize};

/// The kinds of failure a run records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A server did not start (start-up line, port, image, or the engine refused).
    DidNotStart,
    /// A resident server exited between slices.
    Exited,
    /// A slice found its server down, its one restart spent or failed.
    ServerDown,
    /// The engine could not say where the server is.
    NoAddress,
    /// The load driver failed (or stopped before its window ended).
    Driver,
    /// Our server gave no counters snapshot at a window's edge.
    NoCounters,
    /// The server's CPU time could not be read at a window's edge.
    NoServerCpu,
    /// No request completed in the window.
    NoRequests,
    /// An open-loop slice had no keep-alive capacity to take its rate from.
    NoCapacity,
    /// The run was interrupted (Ctrl-C) during the slice.
    Interrupted,
    /// The server exited during the slice.
    ServerExited,
    /// No syscall profile (strace missing, attach refused, no table).
    Strace,
    /// The engine stopped answering mid-run (a daemon restarted or stopped): the run ends.
    EngineLost,
    /// Netfilter's connection-tracking table refused connections during the slice.
    Conntrack,
}

/// One recorded failure. Runs recorded before the kinds were kept hold the text alone, and
/// read back (and are re-rendered) as that text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Failure {
    Typed { kind: FailureKind, detail: String },
    Text(String),
}

impl Failure {
    pub fn new(kind: FailureKind, detail: impl ToString) -> Failure {
        Failure::Typed {
            kind,
            detail: detail.to_string(),
        }
    }

    /// The kind, where the run recorded one.
    pub fn kind(&self) -> Option<FailureKind> {
        match self {
            Failure::Typed { kind, .. } => Some(*kind),
            Failure::Text(_) => None,
        }
    }

    /// The whole text (the cause, then the server's last log lines where they say something).
    pub fn detail(&self) -> &str {
        match self {
            Failure::Typed { detail, .. } | Failure::Text(detail) => detail,
        }
    }

    /// The cause alone: the text's first line.
    pub fn headline(&self) -> &str {
        self.detail().lines().next().unwrap_or("")
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.detail())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_round_trips_with_its_kind_and_an_old_run_s_text_reads_back_as_text() {
        let f = Failure::new(FailureKind::ServerExited, "the server exited\nlast line");
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"server_exited","detail":"the server exited\nlast line"}"#
        );
        let back: Failure = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.kind(), Some(FailureKind::ServerExited));
        assert_eq!(back.headline(), "the server exited");

        // Schema-2 runs before the kinds: a bare string, written back the same way.
        let old: Failure = serde_json::from_str(r#""interrupted""#).unwrap();
        assert_eq!(old.kind(), None);
        assert_eq!(old.detail(), "interrupted");
        assert_eq!(serde_json::to_string(&old).unwrap(), r#""interrupted""#);
    }

    #[test]
    fn an_unknown_kind_is_an_error_not_a_silent_text() {
        let e = serde_json::from_str::<Failure>(r#"{"kind":"gremlins","detail":"x"}"#);
        assert!(e.is_err(), "{e:?}");
    }
}

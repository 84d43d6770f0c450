//! The counters line: one JSON line on stdout with every worker's request, connection and
//! syscall counts — on SIGUSR1 (a numbered snapshot; the server keeps serving) and once on
//! shutdown. A measurer diffs two snapshots to get the counts over any window.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Backend, IoUringState};

/// Why the line was printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The `seq`-th SIGUSR1 (from 1); `missing_workers` did not answer in time, so the line
    /// undercounts and a measurer must not use it.
    Snapshot {
        seq: u64,
        missing_workers: Vec<usize>,
    },
    /// The last line, after SIGTERM or SIGINT (`signal` names it).
    Shutdown { signal: String },
}

/// One worker's counters since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerCounters {
    pub worker: usize,
    pub requests: u64,
    pub connections: u64,
    /// By syscall, as strace names them (`epoll_ctl` split by op: `epoll_ctl_add`, ...).
    pub syscalls: BTreeMap<String, u64>,
    pub syscalls_total: u64,
    /// `epoll_ctl` calls refused with EEXIST or ENOENT (the legacy re-arm's first try).
    pub epoll_ctl_refused: u64,
    /// What the loop's turns did (absent from lines of servers before issue #49: zeros).
    #[serde(default)]
    pub turns: TurnCounters,
}

/// One event loop's turns: how often it entered the kernel to wait, what each turn brought
/// back and handed in, how long it spent inside the waiting call, and how often the multishot
/// receives found the provided-buffer ring empty — the counters that say why a loop leaves its
/// CPU unused while work is queued (issue #49). Diffed over a window like the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnCounters {
    /// Waiting calls: `io_uring_enter` with GETEVENTS, or `epoll_wait`.
    pub waits: u64,
    /// Completions reaped (io_uring) or readiness events returned (epoll).
    pub reaped: u64,
    /// SQEs handed to the kernel (io_uring; 0 on epoll).
    pub submitted: u64,
    /// Wall time inside the waiting calls, ns. On io_uring with deferred task work that
    /// includes the receives and sends the kernel runs there; the thread's CPU time over the
    /// same window tells the idle part.
    pub wait_ns: u64,
    /// Multishot receive completions that found the buffer ring empty (ENOBUFS).
    pub buffers_empty: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersLine {
    #[serde(flatten)]
    pub event: Event,
    pub backend: Backend,
    pub io_uring: IoUringState,
    pub workers: Vec<WorkerCounters>,
}

impl CountersLine {
    /// The line, if `text` is one (other lines a server prints are not an error).
    pub fn parse(text: &str) -> Option<CountersLine> {
        let text = text.trim();
        if !text.starts_with('{') {
            return None;
        }
        serde_json::from_str(text).ok()
    }

    /// Is this the snapshot numbered `seq`, complete (every worker answered)?
    pub fn is_snapshot(&self, seq: u64) -> bool {
        matches!(&self.event, Event::Snapshot { seq: s, missing_workers } if *s == seq && missing_workers.is_empty())
    }

    pub fn is_shutdown(&self) -> bool {
        matches!(self.event, Event::Shutdown { .. })
    }
}

impl std::fmt::Display for CountersLine {
    /// One line of JSON.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let json = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EpollMode;

    fn line(event: Event) -> CountersLine {
        CountersLine {
            event,
            backend: Backend::Epoll(EpollMode::Legacy),
            io_uring: IoUringState::Unavailable("EPERM".into()),
            workers: vec![WorkerCounters {
                worker: 0,
                requests: 10,
                connections: 2,
                syscalls: [
                    ("recvfrom".to_string(), 11),
                    ("epoll_ctl_mod".to_string(), 10),
                ]
                .into(),
                syscalls_total: 21,
                epoll_ctl_refused: 10,
                turns: TurnCounters {
                    waits: 5,
                    reaped: 12,
                    ..TurnCounters::default()
                },
            }],
        }
    }

    #[test]
    fn both_lines_round_trip_and_say_which_they_are() {
        let snap = line(Event::Snapshot {
            seq: 3,
            missing_workers: vec![],
        });
        let text = snap.to_string();
        assert!(!text.contains('\n'));
        assert!(
            text.contains(r#""event":"snapshot""#) && text.contains(r#""seq":3"#),
            "{text}"
        );
        let back = CountersLine::parse(&text).unwrap();
        assert_eq!(back, snap);
        assert!(back.is_snapshot(3) && !back.is_snapshot(2) && !back.is_shutdown());
        let down = line(Event::Shutdown {
            signal: "SIGTERM".into(),
        });
        let back = CountersLine::parse(&down.to_string()).unwrap();
        assert!(back.is_shutdown() && !back.is_snapshot(3));
        let partial = line(Event::Snapshot {
            seq: 4,
            missing_workers: vec![1],
        });
        assert!(!CountersLine::parse(&partial.to_string())
            .unwrap()
            .is_snapshot(4));
        assert_eq!(CountersLine::parse("server listening on …"), None);
        // A line from a server before the turn counters still parses, with zeros.
        let old = snap.to_string().replace(
            r#","turns":{"waits":5,"reaped":12,"submitted":0,"wait_ns":0,"buffers_empty":0}"#,
            "",
        );
        assert_ne!(old, snap.to_string());
        let back = CountersLine::parse(&old).unwrap();
        assert_eq!(back.workers[0].turns, TurnCounters::default());
        assert_eq!(CountersLine::parse(r#"{"event":"other"}"#), None);
    }
}

//! What a server says about itself — its start-up line and its counters lines — and what
//! strace says about a server that says nothing.

use std::collections::BTreeMap;

use driver::target::Route;
use serde::{Deserialize, Serialize};

/// What a resident server runs, as it said: this project's server names its backend on its
/// start-up line; a foreign server says nothing (raw.json: `foreign`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendSeen {
    Server(wire::Backend),
    Foreign,
}

impl std::fmt::Display for BackendSeen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendSeen::Server(b) => b.fmt(f),
            BackendSeen::Foreign => f.write_str("foreign"),
        }
    }
}

impl Serialize for BackendSeen {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BackendSeen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BackendSeen, D::Error> {
        let text = String::deserialize(d)?;
        if text == "foreign" {
            return Ok(BackendSeen::Foreign);
        }
        text.parse()
            .map(BackendSeen::Server)
            .map_err(serde::de::Error::custom)
    }
}

/// `n/a` in raw.json for a server that has no io_uring state to report.
mod io_uring_or_na {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        v: &Option<wire::IoUringState>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(state) => s.collect_str(state),
            None => s.serialize_str("n/a"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<wire::IoUringState>, D::Error> {
        let text = String::deserialize(d)?;
        if text == "n/a" {
            return Ok(None);
        }
        text.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// What the server's first log line said it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Startup {
    pub line: String,
    pub backend: BackendSeen,
    /// What io_uring setup found (`None`: a foreign server).
    #[serde(with = "io_uring_or_na")]
    pub io_uring: Option<wire::IoUringState>,
    pub workers: u32,
}

impl Startup {
    /// A foreign server, ready when it accepted a connection: no start-up line to read.
    pub fn foreign(addr: std::net::SocketAddr, workers: u32) -> Startup {
        Startup {
            line: format!("accepting on {addr} (a foreign server: no start-up line expected)"),
            backend: BackendSeen::Foreign,
            io_uring: None,
            workers,
        }
    }

    /// This project's server's start-up line, if `line` is one.
    pub fn parse(line: &str) -> Option<Startup> {
        let l: wire::StartupLine = line.trim().parse().ok()?;
        Some(Startup {
            line: line.trim().to_string(),
            backend: BackendSeen::Server(l.backend),
            io_uring: Some(l.io_uring),
            workers: l.workers,
        })
    }

    /// `unavailable(EPERM)`, `n/a` for a foreign server.
    pub fn io_uring_text(&self) -> String {
        self.io_uring
            .as_ref()
            .map_or("n/a".into(), ToString::to_string)
    }
}

/// The server's counters line (SIGUSR1 snapshot or SIGTERM), all workers summed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCounters {
    pub requests: u64,
    pub connections: u64,
    /// By syscall name, as the server counts them ([`reactor::Syscall`]'s names).
    pub syscalls: BTreeMap<String, u64>,
}

/// Which counters line: the snapshot numbered `seq`, or the one printed on shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountersLine {
    Snapshot(u64),
    Shutdown,
}

impl ServerCounters {
    /// The counters of `line`, all workers summed, if it is the line `which` asks for (a
    /// snapshot that misses a worker would undercount: it is not used).
    pub fn parse(line: &str, which: CountersLine) -> Option<ServerCounters> {
        let l = wire::CountersLine::parse(line)?;
        let wanted = match which {
            CountersLine::Snapshot(seq) => l.is_snapshot(seq),
            CountersLine::Shutdown => l.is_shutdown(),
        };
        if !wanted {
            return None;
        }
        let mut out = ServerCounters::default();
        for w in &l.workers {
            out.requests += w.requests;
            out.connections += w.connections;
            for (name, n) in &w.syscalls {
                *out.syscalls.entry(name.clone()).or_default() += n;
            }
        }
        Some(out)
    }

    /// `self - earlier`: the counters over the window between two snapshots.
    pub fn since(&self, earlier: &ServerCounters) -> ServerCounters {
        ServerCounters {
            requests: self.requests.saturating_sub(earlier.requests),
            connections: self.connections.saturating_sub(earlier.connections),
            syscalls: self
                .syscalls
                .iter()
                .map(|(k, &n)| {
                    let before = earlier.syscalls.get(k).copied().unwrap_or(0);
                    (k.clone(), n.saturating_sub(before))
                })
                .collect(),
        }
    }

    /// Adds `other` into `self` (for a cell's total over its slices).
    pub fn add(&mut self, other: &ServerCounters) {
        self.requests += other.requests;
        self.connections += other.connections;
        for (k, n) in &other.syscalls {
            *self.syscalls.entry(k.clone()).or_default() += n;
        }
    }

    /// Syscalls per request, by name (epoll_ctl ops summed as `epoll_ctl` too), plus `total`.
    pub fn per_request(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        if self.requests == 0 {
            return out;
        }
        let r = self.requests as f64;
        let (mut total, mut ctl) = (0, 0);
        for (name, &n) in &self.syscalls {
            total += n;
            if reactor::Syscall::from_name(name).is_some_and(reactor::Syscall::is_epoll_ctl) {
                ctl += n;
            }
            if n > 0 {
                out.insert(name.clone(), n as f64 / r);
            }
        }
        out.insert("epoll_ctl".into(), ctl as f64 / r);
        out.insert("total".into(), total as f64 / r);
        out
    }
}

/// What `strace -c -f` counted over one extra slice, and the requests answered in it: the seed
/// PR's method, for servers without counters of their own (and as a cross-check for ours).
/// strace slows the server down, so this slice is never part of req/s, CPU or latency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StraceProfile {
    /// Absent in runs recorded before the load axis: keep-alive.
    #[serde(default)]
    pub load: super::LoadModel,
    pub conns: u32,
    pub route: Route,
    pub requests: u64,
    /// Calls by syscall name.
    pub calls: BTreeMap<String, u64>,
    /// Why there is no profile (strace missing, attach refused), when there is none.
    pub error: Option<super::Failure>,
}

impl StraceProfile {
    /// Calls per request: by name, and `total`.
    pub fn per_request(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        if self.requests == 0 {
            return out;
        }
        let r = self.requests as f64;
        for (name, &n) in &self.calls {
            out.insert(name.clone(), n as f64 / r);
        }
        out.insert("total".into(), self.calls.values().sum::<u64>() as f64 / r);
        out
    }

    /// Reads the table `strace -c` writes: `% time  seconds  usecs/call  calls  [errors]
    /// syscall` rows between dashed lines, then `total`.
    pub fn parse_calls(text: &str) -> BTreeMap<String, u64> {
        let mut calls = BTreeMap::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // At least: % time, seconds, usecs/call, calls, syscall; the first is a number.
            if fields.len() < 5 || fields[0].parse::<f64>().is_err() {
                continue;
            }
            let name = fields[fields.len() - 1];
            if name == "total" {
                continue;
            }
            if let Ok(n) = fields[3].parse::<u64>() {
                *calls.entry(name.to_string()).or_default() += n;
            }
        }
        calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_line() {
        let s = Startup::parse("server listening on 0.0.0.0:3000 workers=1 backend=epoll/rx io_uring=unavailable(EPERM)").unwrap();
        assert_eq!(
            (s.backend.to_string(), s.io_uring_text(), s.workers),
            ("epoll/rx".to_string(), "unavailable(EPERM)".to_string(), 1)
        );
        // raw.json keeps the same text, and a foreign server's placeholders.
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            (&json["backend"], &json["io_uring"]),
            (&"epoll/rx".into(), &"unavailable(EPERM)".into())
        );
        let f = Startup::foreign(([127, 0, 0, 1], 80).into(), 1);
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(
            (&json["backend"], &json["io_uring"]),
            (&"foreign".into(), &"n/a".into())
        );
        assert_eq!(serde_json::from_value::<Startup>(json).unwrap(), f);
        assert!(Startup::parse("something else").is_none());
    }

    /// One worker: requests, connections, calls by name.
    type Worker<'a> = (u64, u64, &'a [(&'a str, u64)]);

    /// A counters line as the server prints it (the same `wire` type).
    fn line(event: wire::Event, workers: &[Worker]) -> String {
        wire::CountersLine {
            event,
            backend: wire::Backend::Epoll(wire::EpollMode::Legacy),
            io_uring: wire::IoUringState::NotTried,
            workers: workers
                .iter()
                .enumerate()
                .map(
                    |(worker, &(requests, connections, calls))| wire::WorkerCounters {
                        worker,
                        requests,
                        connections,
                        syscalls: calls.iter().map(|&(k, n)| (k.to_string(), n)).collect(),
                        ..Default::default()
                    },
                )
                .collect(),
        }
        .to_string()
    }

    #[test]
    fn counters_lines_sum_workers_and_diff_between_snapshots() {
        let shutdown = wire::Event::Shutdown {
            signal: "SIGTERM".into(),
        };
        let text = line(
            shutdown,
            &[
                (
                    10,
                    2,
                    &[
                        ("recvfrom", 10),
                        ("sendto", 10),
                        ("epoll_ctl_add", 2),
                        ("epoll_ctl_mod", 0),
                    ],
                ),
                (
                    10,
                    1,
                    &[
                        ("recvfrom", 12),
                        ("sendto", 10),
                        ("epoll_ctl_add", 1),
                        ("epoll_ctl_mod", 20),
                    ],
                ),
            ],
        );
        let c = ServerCounters::parse(&text, CountersLine::Shutdown).unwrap();
        assert_eq!((c.requests, c.connections), (20, 3));
        let per = c.per_request();
        assert_eq!(per["recvfrom"], 1.1);
        assert_eq!(per["epoll_ctl"], 23.0 / 20.0);
        assert_eq!(per["total"], 65.0 / 20.0);
        assert!(ServerCounters::parse(&text, CountersLine::Snapshot(1)).is_none());

        let snap = |seq: u64, req: u64, recv: u64, missing: Vec<usize>| {
            let event = wire::Event::Snapshot {
                seq,
                missing_workers: missing,
            };
            line(event, &[(req, 1, &[("recvfrom", recv)])])
        };
        let a =
            ServerCounters::parse(&snap(1, 100, 150, vec![]), CountersLine::Snapshot(1)).unwrap();
        assert!(
            ServerCounters::parse(&snap(1, 100, 150, vec![]), CountersLine::Snapshot(2)).is_none()
        );
        let b =
            ServerCounters::parse(&snap(2, 300, 400, vec![]), CountersLine::Snapshot(2)).unwrap();
        let d = b.since(&a);
        assert_eq!((d.requests, d.syscalls["recvfrom"]), (200, 250));
        // A snapshot that misses a worker would undercount: it is not used.
        let partial = snap(3, 300, 400, vec![1]);
        assert!(ServerCounters::parse(&partial, CountersLine::Snapshot(3)).is_none());
    }

    #[test]
    fn strace_summaries_are_read_as_calls_per_request() {
        let text = "% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 55.10    0.201000           2     90000           sendto
 40.00    0.150000           1     90000      1000 recvfrom
  4.90    0.010000           1      9000           epoll_wait
------ ----------- ----------- --------- --------- ----------------
100.00    0.361000           1    189000      1000 total
";
        let calls = StraceProfile::parse_calls(text);
        assert_eq!(calls.len(), 3);
        assert_eq!((calls["sendto"], calls["recvfrom"]), (90000, 90000));
        let p = StraceProfile {
            requests: 90000,
            calls,
            ..Default::default()
        };
        let per = p.per_request();
        assert_eq!(per["sendto"], 1.0);
        assert_eq!(per["total"], 2.1);
    }
}

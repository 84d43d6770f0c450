//! What is measured: seccomp profiles, server configurations, and the record of one run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The seccomp profile a server runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// The engine's built-in profile (Docker 20.10–24 allow io_uring; >= 25 deny it).
    Default,
    /// The project's profile: io_uring_setup/enter/register fail with EPERM.
    NoIoUring,
    /// `seccomp=unconfined`: no filter at all.
    Relaxed,
}

impl Profile {
    pub const ALL: [Profile; 3] = [Profile::Default, Profile::NoIoUring, Profile::Relaxed];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::NoIoUring => "no-io-uring",
            Profile::Relaxed => "relaxed",
        }
    }

    pub fn parse(s: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// One server configuration of the seed PR's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerConfig {
    /// epoll "before": EPOLLONESHOT re-armed ADD -> EEXIST -> MOD.
    Legacy,
    /// epoll "after": registered once, edge-triggered.
    Rx,
    /// Ablation: one-shot with the registration hint (one MOD per request).
    Oneshot,
    /// io_uring "before" (APP_BACKEND=auto: io_uring where the profile allows it).
    #[serde(rename = "io_uring")]
    IoUring,
    /// io_uring "after": the same server again. io_uring did not change in the seed PR, so
    /// this pair is the control that shows the noise.
    #[serde(rename = "io_uring-control")]
    IoUringControl,
}

impl ServerConfig {
    pub const ALL: [ServerConfig; 5] = [
        ServerConfig::Legacy,
        ServerConfig::Rx,
        ServerConfig::Oneshot,
        ServerConfig::IoUring,
        ServerConfig::IoUringControl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ServerConfig::Legacy => "legacy",
            ServerConfig::Rx => "rx",
            ServerConfig::Oneshot => "oneshot",
            ServerConfig::IoUring => "io_uring",
            ServerConfig::IoUringControl => "io_uring-control",
        }
    }

    pub fn parse(s: &str) -> Option<ServerConfig> {
        ServerConfig::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The column heading of the seed PR's table.
    pub fn heading(self) -> &'static str {
        match self {
            ServerConfig::Legacy => "epoll before (legacy)",
            ServerConfig::Rx => "epoll after (rx)",
            ServerConfig::Oneshot => "epoll oneshot (ablation)",
            ServerConfig::IoUring => "io_uring before",
            ServerConfig::IoUringControl => "io_uring after (control)",
        }
    }

    /// The server's environment for this configuration.
    pub fn env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            ServerConfig::Legacy => vec![("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "legacy")],
            ServerConfig::Rx => vec![("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")],
            ServerConfig::Oneshot => vec![("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "oneshot")],
            ServerConfig::IoUring | ServerConfig::IoUringControl => {
                vec![("APP_BACKEND", "auto"), ("APP_EPOLL_MODE", "rx")]
            }
        }
    }

    /// The backend this configuration is meant to measure.
    pub fn intended_backend(self) -> &'static str {
        match self {
            ServerConfig::Legacy => "epoll/legacy",
            ServerConfig::Rx => "epoll/rx",
            ServerConfig::Oneshot => "epoll/oneshot",
            ServerConfig::IoUring | ServerConfig::IoUringControl => "io_uring",
        }
    }

    /// The configuration this one is compared with in the table's deltas.
    pub fn baseline(self) -> Option<ServerConfig> {
        match self {
            ServerConfig::Rx | ServerConfig::Oneshot => Some(ServerConfig::Legacy),
            ServerConfig::IoUringControl => Some(ServerConfig::IoUring),
            _ => None,
        }
    }
}

/// What the server's first log line said it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Startup {
    pub line: String,
    /// `io_uring` or `epoll/<mode>`.
    pub backend: String,
    /// `active(...)`, `unavailable(EPERM)`, `not-tried`.
    pub io_uring: String,
    pub workers: u32,
}

impl Startup {
    /// Parses `server listening on 0.0.0.0:3000 workers=1 backend=epoll/rx io_uring=unavailable(EPERM)`.
    pub fn parse(line: &str) -> Option<Startup> {
        let line = line.trim();
        if !line.starts_with("server listening on ") {
            return None;
        }
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_string)
        };
        Some(Startup {
            line: line.to_string(),
            backend: field("backend=")?,
            io_uring: field("io_uring=")?,
            workers: field("workers=")?.parse().ok()?,
        })
    }
}

/// The server's SIGTERM line, reduced to what the table needs (all workers summed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCounters {
    pub requests: u64,
    pub connections: u64,
    pub syscalls: BTreeMap<String, u64>,
}

impl ServerCounters {
    pub fn parse(line: &str) -> Option<ServerCounters> {
        let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
        if v["event"] != "shutdown" {
            return None;
        }
        let mut out = ServerCounters::default();
        for w in v["workers"].as_array()? {
            out.requests += w["requests"].as_u64()?;
            out.connections += w["connections"].as_u64()?;
            for (name, n) in w["syscalls"].as_object()? {
                *out.syscalls.entry(name.clone()).or_default() += n.as_u64()?;
            }
        }
        Some(out)
    }

    /// Syscalls per request, by name (epoll_ctl ops summed as `epoll_ctl` too), plus `total`.
    pub fn per_request(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        if self.requests == 0 {
            return out;
        }
        let r = self.requests as f64;
        let mut total = 0;
        let mut ctl = 0;
        for (name, &n) in &self.syscalls {
            total += n;
            if name.starts_with("epoll_ctl_") {
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

/// One measurement: a server started fresh under one profile and configuration, loaded at one
/// connection count. Every attempt is kept in raw.json, failures included.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    pub round: u32,
    pub profile: Profile,
    pub config: ServerConfig,
    pub conns: u32,
    pub attempt: u32,
    pub startup: Option<Startup>,
    pub report: Option<driver::report::Report>,
    /// Server CPU use over the measured window, in percent of its CPUs.
    pub server_cpu_pct: Option<f64>,
    pub counters: Option<ServerCounters>,
    /// Why this attempt failed (with the server's last log lines), if it did.
    pub error: Option<String>,
}

impl Measurement {
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.report.is_some()
    }
}

/// Where and how a run happened.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
}

impl Machine {
    pub fn here() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string();
        Machine {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
        }
    }
}

/// Everything a run records; `bench-runner report DIR` re-renders from this alone.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Raw {
    /// `docker <version>` or `native`.
    pub engine: String,
    pub machine: Machine,
    pub driver: String,
    pub started_utc: String,
    pub settings: serde_json::Value,
    pub measurements: Vec<Measurement>,
    /// Notes for the reader (fallbacks, what a profile means on this engine).
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_line() {
        let s = Startup::parse("server listening on 0.0.0.0:3000 workers=1 backend=epoll/rx io_uring=unavailable(EPERM)").unwrap();
        assert_eq!(
            (s.backend.as_str(), s.io_uring.as_str(), s.workers),
            ("epoll/rx", "unavailable(EPERM)", 1)
        );
        assert!(Startup::parse("something else").is_none());
    }

    #[test]
    fn counters_line_sums_workers() {
        let line = r#"{"event":"shutdown","workers":[{"requests":10,"connections":2,"syscalls":{"recvfrom":10,"sendto":10,"epoll_ctl_add":2,"epoll_ctl_mod":0}},{"requests":10,"connections":1,"syscalls":{"recvfrom":12,"sendto":10,"epoll_ctl_add":1,"epoll_ctl_mod":20}}]}"#;
        let c = ServerCounters::parse(line).unwrap();
        assert_eq!((c.requests, c.connections), (20, 3));
        let per = c.per_request();
        assert_eq!(per["recvfrom"], 1.1);
        assert_eq!(per["epoll_ctl"], 23.0 / 20.0);
        assert_eq!(per["total"], 65.0 / 20.0);
        assert!(ServerCounters::parse(r#"{"event":"other"}"#).is_none());
    }

    #[test]
    fn names_round_trip() {
        for p in Profile::ALL {
            assert_eq!(Profile::parse(p.name()), Some(p));
        }
        for c in ServerConfig::ALL {
            assert_eq!(ServerConfig::parse(c.name()), Some(c));
            // JSON and CSV spell configurations as the command line does.
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
        for p in Profile::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
    }
}

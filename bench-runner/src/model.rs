//! What is measured — seccomp profiles, server configurations, the resident servers — and the
//! record of one run (raw.json), from which every other output is derived.

use std::collections::BTreeMap;
use std::sync::Arc;

use clap::ValueEnum;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// raw.json's layout version: 2 is the slice method (resident servers, alternating slices).
pub const SCHEMA: u32 = 2;

/// The seccomp profile a server runs under.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// The engine's built-in profile (Docker 20.10–24 allow io_uring; >= 25 deny it)
    Default,
    /// The project's profile: io_uring_setup/enter/register fail with EPERM
    NoIoUring,
    /// `seccomp=unconfined`: no filter at all
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
}

/// One server configuration of the seed PR's table.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ServerConfig {
    /// epoll "before": EPOLLONESHOT re-armed ADD -> EEXIST -> MOD
    Legacy,
    /// epoll "after": registered once, edge-triggered
    Rx,
    /// Ablation: one-shot with the registration hint (one MOD per request)
    Oneshot,
    /// io_uring "before" (APP_BACKEND=auto: io_uring where the profile allows it)
    #[serde(rename = "io_uring")]
    #[value(name = "io_uring")]
    IoUring,
    /// io_uring "after": the same server again — the A/A control that gives the resolution
    #[serde(rename = "io_uring-control")]
    #[value(name = "io_uring-control")]
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

    /// The configuration this one is compared with in the table (the seed PR's "before").
    pub fn baseline(self) -> Option<ServerConfig> {
        match self {
            ServerConfig::Rx | ServerConfig::Oneshot => Some(ServerConfig::Legacy),
            ServerConfig::IoUring => Some(ServerConfig::Rx),
            ServerConfig::IoUringControl => Some(ServerConfig::IoUring),
            ServerConfig::Legacy => None,
        }
    }
}

/// What a resident server is: one of this project's configurations, or a server from outside
/// (`--server NAME=…`: a peer, the user's own framework), known by its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    Own(ServerConfig),
    Foreign(Arc<str>),
}

impl Subject {
    pub fn name(&self) -> &str {
        match self {
            Subject::Own(c) => c.name(),
            Subject::Foreign(name) => name,
        }
    }

    /// The column heading: the seed PR's for a configuration, the name for a foreign server.
    pub fn heading(&self) -> &str {
        match self {
            Subject::Own(c) => c.heading(),
            Subject::Foreign(name) => name,
        }
    }

    pub fn own(&self) -> Option<ServerConfig> {
        match self {
            Subject::Own(c) => Some(*c),
            Subject::Foreign(_) => None,
        }
    }

    /// The subject this one is compared with in the seed PR's table.
    pub fn baseline(&self) -> Option<Subject> {
        self.own()?.baseline().map(Subject::Own)
    }
}

impl PartialEq<ServerConfig> for Subject {
    fn eq(&self, other: &ServerConfig) -> bool {
        self.own() == Some(*other)
    }
}

impl From<ServerConfig> for Subject {
    fn from(c: ServerConfig) -> Subject {
        Subject::Own(c)
    }
}

// As a plain name in JSON, so raw.json files from before foreign servers read the same.
impl Serialize for Subject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Subject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Subject, D::Error> {
        let name = String::deserialize(d)?;
        Ok(match ServerConfig::from_str(&name, false) {
            Ok(c) => Subject::Own(c),
            Err(_) => Subject::Foreign(name.into()),
        })
    }
}

/// How a foreign server is started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Launch {
    /// A shell command line (native): `{port}` in it becomes the server's port.
    Cmd(String),
    /// A Docker image, run as this project's servers are.
    Image(String),
}

/// A server from outside this project, as `--server` gave it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignServer {
    pub name: String,
    pub launch: Launch,
    /// Extra environment (`,ENV=VALUE` pairs); `PORT` is always set to its port.
    pub env: Vec<(String, String)>,
}

/// One resident server of a run: a profile and what runs under it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServerKey {
    pub profile: Profile,
    pub config: Subject,
}

impl std::fmt::Display for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.profile.name(), self.config.name())
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

/// The server's counters line (SIGUSR1 snapshot or SIGTERM), all workers summed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCounters {
    pub requests: u64,
    pub connections: u64,
    pub syscalls: BTreeMap<String, u64>,
}

/// Which counters line: the snapshot numbered `seq`, or the one printed on shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountersLine {
    Snapshot(u64),
    Shutdown,
}

impl ServerCounters {
    pub fn parse(line: &str, which: CountersLine) -> Option<ServerCounters> {
        let line = line.trim();
        if !line.starts_with('{') {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let wanted = match which {
            CountersLine::Snapshot(seq) => v["event"] == "snapshot" && v["seq"] == seq,
            CountersLine::Shutdown => v["event"] == "shutdown",
        };
        if !wanted || !v["missing_workers"].as_array().is_none_or(Vec::is_empty) {
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

/// One resident server over the run: what it said it runs, and what happened to it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerRecord {
    pub key: ServerKey,
    /// The port it listens on (host network: its own; a network of the run's: 3000 for all).
    pub port: u16,
    pub startup: Option<Startup>,
    /// Starts, the first included (a server that dies is restarted once).
    pub starts: u32,
    /// Deaths and failed starts, each with the server's last log lines.
    pub events: Vec<String>,
    /// Counters from its SIGTERM line at the end of the run.
    pub final_counters: Option<ServerCounters>,
    /// Its syscall profile from one extra slice under `strace -c -f` (not in any figure).
    #[serde(default)]
    pub strace: Option<StraceProfile>,
}

/// What `strace -c -f` counted over one extra slice, and the requests answered in it: the seed
/// PR's method, for servers without counters of their own (and as a cross-check for ours).
/// strace slows the server down, so this slice is never part of req/s, CPU or latency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StraceProfile {
    pub conns: u32,
    pub route: String,
    pub requests: u64,
    /// Calls by syscall name.
    pub calls: BTreeMap<String, u64>,
    /// Why there is no profile (strace missing, attach refused), when there is none.
    pub error: Option<String>,
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

/// One slice: one server driven at one connection level on one route, for one measured window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Slice {
    pub round: u32,
    /// Position in the round's (shuffled) order, from 0.
    pub position: u32,
    pub server: ServerKey,
    pub conns: u32,
    /// `METHOD:/path`, as `--routes` spells it.
    pub route: String,
    /// Seconds from the start of the run to the start of the measured window.
    pub at_s: f64,
    /// The measured window, edge to edge, in seconds.
    pub window_s: f64,
    /// The driver's report (requests, req/s, latency percentiles and buckets, driver CPU).
    pub report: Option<driver::report::Report>,
    /// The server's CPU time over exactly the window (cgroup counter or the process clock).
    pub server_cpu_ns: Option<u64>,
    /// The server's own counters over the window (SIGUSR1 snapshots diffed).
    pub counters: Option<ServerCounters>,
    /// Why the slice failed, with the server's last log lines where they say something.
    pub error: Option<String>,
}

impl Slice {
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.report.as_ref().is_some_and(|r| r.requests > 0)
    }

    pub fn requests(&self) -> u64 {
        self.report.as_ref().map_or(0, |r| r.requests)
    }

    pub fn rps(&self) -> Option<f64> {
        self.report.as_ref().map(|r| r.requests_per_s)
    }

    /// Server CPU time per request, in µs.
    pub fn cpu_us_per_request(&self) -> Option<f64> {
        let n = self.requests();
        (n > 0).then_some(self.server_cpu_ns? as f64 / 1000.0 / n as f64)
    }

    /// Server CPU over the window as a share of its CPUs (1.0 = all of them, all the time).
    pub fn utilisation(&self, server_cpus: usize) -> Option<f64> {
        let wall_ns = self.window_s * 1e9 * server_cpus.max(1) as f64;
        (wall_ns > 0.0).then_some(self.server_cpu_ns? as f64 / wall_ns)
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

/// The settings a run used, as summary.json and table.md print them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    pub rounds: u32,
    pub slice_s: f64,
    pub slice_warmup_s: f64,
    pub conns: Vec<u32>,
    pub routes: Vec<String>,
    pub seed: u64,
    pub server_cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
    /// `host` or `bridge`.
    pub network: String,
    pub target_host: String,
}

/// Everything a run records; `bench-runner report DIR` re-renders from this alone.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Raw {
    pub schema: u32,
    /// `docker <version>` or `native`.
    pub engine: String,
    pub machine: Machine,
    pub driver: String,
    pub started_utc: String,
    /// The commit the runner was built from (`+dirty` with uncommitted changes), if known.
    #[serde(default)]
    pub commit: Option<String>,
    pub settings: Settings,
    /// The foreign servers (`--server`) among `servers`, by name.
    #[serde(default)]
    pub foreign: Vec<ForeignServer>,
    /// Foreign servers (`--reference`) the other foreign servers are compared with too.
    #[serde(default)]
    pub references: Vec<String>,
    pub servers: Vec<ServerRecord>,
    pub slices: Vec<Slice>,
    /// Notes for the reader (fallbacks, what a profile means on this engine).
    pub notes: Vec<String>,
    /// False while the run is going or when it was interrupted.
    pub complete: bool,
}

impl Raw {
    pub fn server(&self, key: &ServerKey) -> Option<&ServerRecord> {
        self.servers.iter().find(|s| &s.key == key)
    }
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
    fn counters_lines_sum_workers_and_diff_between_snapshots() {
        let line = r#"{"event":"shutdown","workers":[{"requests":10,"connections":2,"syscalls":{"recvfrom":10,"sendto":10,"epoll_ctl_add":2,"epoll_ctl_mod":0}},{"requests":10,"connections":1,"syscalls":{"recvfrom":12,"sendto":10,"epoll_ctl_add":1,"epoll_ctl_mod":20}}]}"#;
        let c = ServerCounters::parse(line, CountersLine::Shutdown).unwrap();
        assert_eq!((c.requests, c.connections), (20, 3));
        let per = c.per_request();
        assert_eq!(per["recvfrom"], 1.1);
        assert_eq!(per["epoll_ctl"], 23.0 / 20.0);
        assert_eq!(per["total"], 65.0 / 20.0);
        assert!(ServerCounters::parse(line, CountersLine::Snapshot(1)).is_none());

        let snap = |seq: u64, req: u64, recv: u64| {
            format!(
                r#"{{"event":"snapshot","seq":{seq},"workers":[{{"requests":{req},"connections":1,"syscalls":{{"recvfrom":{recv}}}}}],"missing_workers":[]}}"#
            )
        };
        let a = ServerCounters::parse(&snap(1, 100, 150), CountersLine::Snapshot(1)).unwrap();
        assert!(ServerCounters::parse(&snap(1, 100, 150), CountersLine::Snapshot(2)).is_none());
        let b = ServerCounters::parse(&snap(2, 300, 400), CountersLine::Snapshot(2)).unwrap();
        let d = b.since(&a);
        assert_eq!((d.requests, d.syscalls["recvfrom"]), (200, 250));
        // A snapshot that misses a worker would undercount: it is not used.
        let partial = r#"{"event":"snapshot","seq":3,"workers":[],"missing_workers":[0]}"#;
        assert!(ServerCounters::parse(partial, CountersLine::Snapshot(3)).is_none());
    }

    #[test]
    fn names_are_spelled_alike_on_the_command_line_and_in_json() {
        for p in Profile::ALL {
            let v = p.to_possible_value().unwrap();
            assert_eq!(v.get_name(), p.name());
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
        for c in ServerConfig::ALL {
            let v = c.to_possible_value().unwrap();
            assert_eq!(v.get_name(), c.name());
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
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

    #[test]
    fn a_slice_derives_cpu_per_request_and_utilisation() {
        let s = Slice {
            round: 1,
            position: 0,
            server: ServerKey {
                profile: Profile::Relaxed,
                config: ServerConfig::Rx.into(),
            },
            conns: 64,
            route: "GET:/".into(),
            at_s: 0.0,
            window_s: 1.0,
            report: None,
            server_cpu_ns: Some(900_000_000),
            counters: None,
            error: None,
        };
        assert_eq!(s.utilisation(1), Some(0.9));
        assert_eq!(s.utilisation(2), Some(0.45));
        assert_eq!(s.cpu_us_per_request(), None, "no report, no requests");
        assert!(!s.ok());
    }
}

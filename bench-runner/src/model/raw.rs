//! The record of one run (raw.json), from which every other output is derived.

use std::collections::BTreeMap;

use driver::target::Route;
use serde::{Deserialize, Serialize};

use super::{Failure, ForeignServer, LoadModel, ServerCounters, ServerKey, Startup, StraceProfile};

/// raw.json's layout version: 2 is the slice method (resident servers, alternating slices).
pub const SCHEMA: u32 = 2;

/// One resident server over the run: what it said it runs, and what happened to it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerRecord {
    pub key: ServerKey,
    /// Which of its configuration's instances (from 0; runs before instances had one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub instance: u32,
    /// The port it listens on at the first launch (host network: its own, drawn afresh among
    /// the run's at every later launch — a slice's own is in its report's URL; a network of
    /// the run's: 3000 for all).
    pub port: u16,
    pub startup: Option<Startup>,
    /// Starts, the first included (a server that dies is restarted once).
    pub starts: u32,
    /// Deaths and failed starts, each with the server's last log lines.
    pub events: Vec<Failure>,
    /// Counters from its SIGTERM line at the end of the run (relaunched: its last launch's).
    pub final_counters: Option<ServerCounters>,
    /// Its syscall profile from one extra slice under `strace -c -f` (not in any figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strace: Option<StraceProfile>,
}

impl ServerRecord {
    /// A server of the plan before its first start.
    pub fn new(key: ServerKey, instance: u32, port: u16) -> ServerRecord {
        ServerRecord {
            key,
            instance,
            port,
            startup: None,
            starts: 0,
            events: vec![],
            final_counters: None,
            strace: None,
        }
    }
}

/// One slice: one server driven at one connection level on one route, for one measured window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Slice {
    pub round: u32,
    /// Position in the round's (shuffled) order, from 0.
    pub position: u32,
    pub server: ServerKey,
    /// Which instance of `server` (runs before instances had one: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub instance: u32,
    /// Which launch of that instance served it (`--relaunch round`: the round's, from 0; runs
    /// launched once: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub launch: u32,
    /// `--pairing duet`: the server driven at the same time, over the same window (runs
    /// without duets: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duet: Option<Partner>,
    /// Absent in runs recorded before the load axis: keep-alive.
    #[serde(default)]
    pub load: LoadModel,
    pub conns: u32,
    pub route: Route,
    /// Seconds from the start of the run to the start of the measured window.
    pub at_s: f64,
    /// The measured window, edge to edge, in seconds.
    pub window_s: f64,
    /// The driver's report (requests, req/s, latency percentiles and buckets, driver CPU).
    pub report: Option<driver::report::Report>,
    /// The server's CPU time over exactly the window (cgroup counter or the process clock).
    pub server_cpu_ns: Option<u64>,
    /// That CPU time split into user and kernel time over the window, where the source keeps
    /// them (cgroup v1 `cpuacct.usage_user`/`_sys`, v2 `cpu.stat`, /proc natively; runs
    /// recorded before it: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_split: Option<CpuSplit>,
    /// The server's own counters over the window (SIGUSR1 snapshots diffed).
    pub counters: Option<ServerCounters>,
    /// Why the slice failed, with the server's last log lines where they say something.
    /// Steal time on the server's and the driver's CPUs over the slice (warm-up included);
    /// runs recorded before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal: Option<crate::steal::Steal>,
    pub error: Option<Failure>,
}

/// A server's CPU time split into user and kernel (system) time, as its source counts them:
/// cumulative at an edge, or over a window. Every source here splits by sampling which mode
/// the CPU was in at each scheduler tick (cgroup v1 `cpuacct.usage_user`/`_sys` and v2
/// `cpu.stat` in ns or µs, /proc in clock ticks), so over a window of N ticks the kernel share
/// is good to about √(p(1 − p)/N): ±0.7 points at 95 % kernel over one second of a 1000 Hz
/// tick. The total is the precise clock ([`Slice::server_cpu_ns`]); the split apportions it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSplit {
    pub user_ns: u64,
    pub system_ns: u64,
}

impl CpuSplit {
    /// The split over a window from its two edges (`None`: a counter went backwards).
    pub fn since(self, earlier: CpuSplit) -> Option<CpuSplit> {
        Some(CpuSplit {
            user_ns: self.user_ns.checked_sub(earlier.user_ns)?,
            system_ns: self.system_ns.checked_sub(earlier.system_ns)?,
        })
    }
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

    /// An open-loop slice's schedule, as its driver reported it.
    fn open_loop(&self) -> Option<&driver::report::OpenLoop> {
        self.report.as_ref()?.open_loop.as_ref()
    }

    /// An open-loop slice's offered rate.
    pub fn offered_rps(&self) -> Option<f64> {
        self.open_loop().map(|o| o.target_rps)
    }

    /// An open-loop slice whose driver fell behind its own schedule: it measured the driver.
    pub fn behind_schedule(&self) -> bool {
        self.open_loop().is_some_and(|o| o.behind)
    }

    /// Server CPU time per request, in µs.
    pub fn cpu_us_per_request(&self) -> Option<f64> {
        let n = self.requests();
        (n > 0).then_some(self.server_cpu_ns? as f64 / 1000.0 / n as f64)
    }

    /// The driver's CPU time (the runner process's, driver included) over the window as a
    /// share of the load CPUs.
    pub fn driver_busy(&self, load_cpus: usize) -> Option<f64> {
        let cpu = self.report.as_ref()?.driver_cpu_s?;
        (self.window_s > 0.0).then(|| cpu / self.window_s / load_cpus.max(1) as f64)
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
    /// `family 25 model 17`: the guest's CPU beyond its brand name (hosts of one brand differ
    /// in what a syscall costs); runs recorded before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_id: Option<String>,
    pub cores: usize,
    pub kernel: String,
    /// `KVM guest`, `bare metal`…: a hypervisor changes what a syscall costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization: Option<String>,
    /// The kernel's mitigations in force (/sys/devices/system/cpu/vulnerabilities, the
    /// entries other than "Not affected"): what a syscall costs depends on them (Retpolines,
    /// IBRS, …), and with it how far io_uring's fewer syscalls pay.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mitigations: BTreeMap<String, String>,
}

impl Machine {
    /// `KVM guest; mitigations: spectre_v2: Retpolines; …` (empty for runs before they were
    /// recorded).
    pub fn cost_factors(&self) -> String {
        let mut parts: Vec<String> = self.virtualization.iter().cloned().collect();
        if !self.mitigations.is_empty() {
            let m: Vec<String> = self
                .mitigations
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            parts.push(format!("mitigations: {}", m.join("; ")));
        }
        parts.join("; ")
    }
}

/// The settings a run used, as summary.json and table.md print them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    pub rounds: u32,
    pub slice_s: f64,
    pub slice_warmup_s: f64,
    /// Runs recorded before the load axis: keep-alive alone.
    #[serde(default = "super::keep_alive_only")]
    pub loads: Vec<LoadModel>,
    /// Every connection level of the run.
    pub conns: Vec<u32>,
    /// The load models measured at fewer levels than `conns` ([`Settings::conns_of`]; runs
    /// before it had every model at every level).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub load_conns: BTreeMap<LoadModel, Vec<u32>>,
    pub routes: Vec<Route>,
    pub seed: u64,
    /// Resident instances of each configuration (runs before instances had one).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub instances: u32,
    /// A calibration study: the group of instances its new method compares
    /// (calibration.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_group: Option<u32>,
    /// `--target-resolution`: rounds were added after the planned ones (`rounds` is the count
    /// driven) until the A/A control resolved this, or its budget ran out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::target::Target>,
    /// The rounds planned before any was added for the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_rounds: Option<u32>,
    /// What the two-stage rule asked after the first stage, and what was driven (runs before
    /// it added rounds while the A/A control was wider than the target: none here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<crate::target::AddedRounds>,
    /// `--rates-from`: the open loop's shares taken of an earlier run's capacities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rates_from: Option<crate::offered::RatesFrom>,
    /// The order the rounds used; runs before it was recorded have it inferred from their
    /// slices ([`Raw::schedule`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// When the servers were launched (runs before it: once, resident for the run).
    #[serde(default, skip_serializing_if = "Relaunch::is_once")]
    pub relaunch: Relaunch,
    /// How compared servers shared the time (runs before it: alternating slices).
    #[serde(default, skip_serializing_if = "Pairing::is_alternate")]
    pub pairing: Pairing,
    /// A run of duets: the configurations also driven alone, kept alive at every level of
    /// the first route, for the seed PR's table (each server's own req/s and latency; runs
    /// before it, and runs without duets — where every slice is a server alone: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub solo: Vec<ServerKey>,
    pub server_cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
    /// `host` or `bridge`.
    pub network: String,
    pub target_host: String,
}

impl Settings {
    /// Whether a comparison's interval covers the difference between two processes of the
    /// same server: several instances of each, or every round a fresh launch (each round's
    /// processes new). With one resident process of each it does not, and the A/A control's
    /// own distance from no change bounds what the run can tell apart.
    pub fn intervals_cover_processes(&self) -> bool {
        self.instances > 1 || self.relaunch == Relaunch::Round
    }

    /// The last round of the first stage where rounds were added after it for the target
    /// (the round the two-stage rule decided at; runs before it: the planned rounds, after
    /// which they began to add) — the rounds whose spread the interval takes
    /// ([`crate::stats::stopping::interval`]). None where no round was added.
    pub fn first_stage(&self) -> Option<u32> {
        let first = self.added.map(|a| a.first_stage).or(self.planned_rounds)?;
        (self.rounds > first).then_some(first)
    }
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
    /// A run of duets: the slices of servers driven alone ([`Settings::solo`]), apart from
    /// `slices` so that every duet figure reads exactly the slices it read before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub solo: Vec<Slice>,
    /// Notes for the reader (fallbacks, what a profile means on this engine).
    pub notes: Vec<String>,
    /// False while the run is going or when it was interrupted.
    pub complete: bool,
    /// What a syscall cost on the server CPU when the run started ([`crate::probe`]); runs
    /// recorded before the probe have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<super::SyscallCost>,
    /// What the io_uring server's receive path costs a request with and without the block on
    /// this host ([`crate::probe::mechanism`]); runs recorded before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<super::MechanismCost>,
}

/// How a name shows instance `instance` (from 0) of `of`: `#2`, or nothing with one.
pub fn instance_label(instance: u32, of: u32) -> String {
    if of > 1 {
        format!("#{}", instance + 1)
    } else {
        String::new()
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Settings {
    /// The routes as the summary and the tables key them (`METHOD:/path`).
    pub fn route_names(&self) -> Vec<String> {
        self.routes.iter().map(ToString::to_string).collect()
    }

    /// The run's first route: the one a headline speaks of (comparisons are per route).
    pub fn first_route(&self) -> String {
        self.routes
            .first()
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    /// The connection levels load model `load` was measured at.
    pub fn conns_of(&self, load: LoadModel) -> &[u32] {
        super::conns_of(&self.conns, &self.load_conns, load)
    }
}

impl Raw {
    /// The configurations, in the order of the run's servers (each once, however many
    /// instances it had).
    pub fn configurations(&self) -> Vec<ServerKey> {
        let mut keys: Vec<ServerKey> = Vec::new();
        for s in &self.servers {
            if !keys.contains(&s.key) {
                keys.push(s.key.clone());
            }
        }
        keys
    }

    /// Every instance of `key`.
    pub fn instances_of<'a>(
        &'a self,
        key: &'a ServerKey,
    ) -> impl Iterator<Item = &'a ServerRecord> {
        self.servers.iter().filter(move |s| &s.key == key)
    }

    /// The schedule this run used: as recorded, or, for a run from before it was recorded,
    /// read off its slices — blocks when every run of consecutive slices as long as the
    /// server list holds one connection level and route (with more than one block a round, a
    /// shuffled order almost never does).
    pub fn schedule(&self) -> Schedule {
        if let Some(s) = self.settings.schedule {
            return s;
        }
        let block = self.servers.len().max(1);
        let mut by_round: BTreeMap<u32, Vec<&Slice>> = BTreeMap::new();
        for s in &self.slices {
            by_round.entry(s.round).or_default().push(s);
        }
        let blocked = by_round.values_mut().all(|slices| {
            slices.sort_by_key(|s| s.position);
            slices.chunks(block).all(|c| {
                c.iter()
                    .all(|s| (s.conns, &s.route) == (c[0].conns, &c[0].route))
            })
        });
        if blocked {
            Schedule::Blocks
        } else {
            Schedule::Shuffled
        }
    }
}

/// When a run launches its servers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Relaunch {
    /// Once: resident for the whole run, each instance keeping its luck (memory placement,
    /// caches) in every round; the interval fits instances and rounds as two levels.
    #[default]
    Once,
    /// Again before every round: each round draws every process's luck afresh, so rounds
    /// are independent replicates of the whole comparison and the interval is Student's t
    /// over them ([`crate::stats::launches`]).
    Round,
}

impl Relaunch {
    pub fn is_once(&self) -> bool {
        *self == Relaunch::Once
    }
}

/// How the two servers of a comparison share the machine's time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Pairing {
    /// One server at a time, slice after slice: a comparison pairs slices up to a block
    /// (seconds) apart, so whatever the host did in between is in the difference.
    #[default]
    Alternate,
    /// Both servers of each comparison driven at once over one window, on the same server
    /// CPUs (duet benchmarking, Bulej et al., ICPE 2020): the host's interference in that
    /// second falls on both, and the comparison is the ratio within each duet. Each server
    /// gets about half the server CPUs while it runs, so req/s and latency are those of a
    /// shared machine; CPU per request is the figure.
    Duet,
}

impl Pairing {
    pub fn is_alternate(&self) -> bool {
        *self == Pairing::Alternate
    }

    /// How many slices one visit of the driver measures (one window: one server, or a duet's
    /// two).
    pub fn slices_per_visit(&self) -> usize {
        match self {
            Pairing::Alternate => 1,
            Pairing::Duet => 2,
        }
    }
}

/// The other server of a duet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partner {
    pub server: ServerKey,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub instance: u32,
}

impl Partner {
    pub fn of(s: &Slice) -> Partner {
        Partner {
            server: s.server.clone(),
            instance: s.instance,
        }
    }
}

/// The order of a round's slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Every cell once, in blocks of one connection level and route (each block every server
    /// once), blocks and servers within them shuffled afresh each round ([`crate::plan`]).
    Blocks,
    /// Every cell once, the whole round shuffled afresh (the runner before blocks).
    Shuffled,
}

impl Schedule {
    /// How table.md describes it (`by_load`: a run of more than keep-alive, whose blocks
    /// are of one load model too).
    pub fn describe(self, by_load: bool) -> &'static str {
        match (self, by_load) {
            (Schedule::Blocks, false) => {
                "in a fresh random order within groups of one connection level and route"
            }
            (Schedule::Blocks, true) => {
                "in a fresh random order within groups of one load model, connection level and route"
            }
            (Schedule::Shuffled, _) => "in a fresh random order",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Profile, ServerConfig};

    #[test]
    fn a_slice_derives_cpu_per_request_and_utilisation() {
        let s = Slice {
            round: 1,
            position: 0,
            server: ServerKey {
                profile: Profile::Relaxed,
                config: ServerConfig::Rx.into(),
            },
            instance: 0,
            launch: 0,
            duet: None,
            load: LoadModel::KeepAlive,
            conns: 64,
            route: Route::get_root(),
            at_s: 0.0,
            window_s: 1.0,
            report: None,
            server_cpu_ns: Some(900_000_000),
            server_cpu_split: None,
            counters: None,
            steal: None,
            error: None,
        };
        assert_eq!(s.utilisation(1), Some(0.9));
        assert_eq!(s.utilisation(2), Some(0.45));
        assert_eq!(s.cpu_us_per_request(), None, "no report, no requests");
        assert!(!s.ok());
    }
}

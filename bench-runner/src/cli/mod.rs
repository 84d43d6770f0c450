//! The command line: what a run measures and how, as typed choices.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

mod choices;
mod peers;
mod values;
pub use choices::{DriverChoice, EngineChoice, Network, StraceSlices};
use driver::target::Route;
pub use peers::{Peer, PeersArgs};
pub use values::foreign_server;
use values::{duration, duration_or_zero, percent, route};

use crate::model::{
    ForeignServer, LoadChoice, LoadModel, Offered, Pairing, Profile, Relaunch, ServerConfig,
};

#[derive(Parser, Debug)]
#[command(
    name = "bench-runner",
    version,
    about = "Runs the rxbench matrix — seccomp profiles x server configurations x connection \
levels — as duets (the two servers of every comparison driven at once, launched afresh every \
round), and writes the answer, the table with its 95 % intervals, and the evidence",
    after_help = "\
Examples:
  cargo run --release -p bench-runner                      full run: keep-alive, a connection per request and open
                                                           loop as duets, 6 rounds of 1 s windows, then rounds
                                                           for the cells still wider than ±2 % (≤ 30 min)
  cargo run --release -p bench-runner -- --quick           smoke run (3 rounds x 2 instances of 0.3 s slices,
                                                           alternating, ~6 min)
  cargo run --release -p bench-runner -- --dry-run         the plan and its ETA
  cargo run --release -p bench-runner -- --routes GET:/,GET:/user/0,POST:/user
  cargo run --release -p bench-runner -- report results/latest
  cargo run --release -p bench-runner -- export-benchmarker /tmp/bench
  cargo run --release -p bench-runner -- peers             beside nginx, HAProxy, hyper, actix-web,
                                                           may-minihttp and the floor (17–40 min)
  cargo run --release -p bench-runner -- --engine native --server 'mine=cmd:./my-server --port {port}'
  cargo run --release -p bench-runner -- calibrate --conns 64,512   do the intervals keep their promise? (~10 min)

Method (docs/methodology.md, \"Duets\"): each round launches every server afresh and drives
the two servers of every comparison at once, over one window, on the same server CPUs, so the
host's interference of that second falls on both; a comparison is the ratio within each duet,
its 95 % interval Student's t over the rounds (each round an independent draw of both
processes); the io_uring control pair (the same server as two configurations) gives the
run's resolution. --pairing alternate drives one server at a time (resident, 2 instances)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Cmd>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Re-render table.md, summary.json, results.csv and chart.svg from DIR/raw.json
    Report { dir: PathBuf },
    /// Write the server as a the-benchmarker/web-frameworks entry (rust/rxbench/) under OUT
    ExportBenchmarker {
        out: PathBuf,
        /// The project's repository (OWNER/REPO), linked from their results page
        #[arg(long)]
        github: Option<String>,
        /// The project's website, if it has one: a host as their config holds it (hyper.rs); a
        /// URL is written without its scheme
        #[arg(long)]
        website: Option<String>,
    },
    /// Remove every container and network an earlier run left behind (a runner killed with
    /// SIGKILL cannot clean up; the next run would remove them at its start)
    Clean,
    /// What Docker's io_uring block costs an io_uring server on this host, and why (about
    /// 7 s a level): a syscall's cost on the CPU a run's servers get, and the server's own
    /// worker served in-process as the io_uring server unblocked and blocked and as rx, with
    /// the clients on the CPU a run's driver gets. Every run records both
    Probe {
        /// The CPU to measure on (default: the first of the servers' CPUs a run would use)
        #[arg(long)]
        cpu: Option<usize>,
        /// The client's CPU for the mechanism probe (default: the first of the driver's CPUs a
        /// run would use)
        #[arg(long)]
        client_cpu: Option<usize>,
        /// Kept-alive connection counts the mechanism probe serves; none: the syscall costs
        /// alone
        #[arg(long, value_delimiter = ',', default_values_t = [64, 256, 512])]
        conns: Vec<u32>,
        /// Print the figures as JSON
        #[arg(long)]
        json: bool,
    },
    /// Build the images offline: rxbench-server, rxbench-runner (compose.yaml) and
    /// rxbench-rxload (deploy/k8s)
    BuildImages,
    /// This project's server (io_uring, epoll rx, epoll legacy) beside nginx, HAProxy, the
    /// hyper, actix-web and may-minihttp hello-worlds (peers/) and the floor, natively, one
    /// worker each on the same CPU, with the same driver, slices and intervals; results to
    /// OUT/peers-<UTC timestamp>/ (OUT/peers-latest points to it)
    Peers(PeersArgs),
    /// The intervals' own check: --instances (8) of each configuration under one profile,
    /// every pair of identical servers compared as if different, by the old method (one
    /// process a configuration) and the new (groups of --group instances); how often each
    /// tells identical servers apart (nominal: 5 %) goes to calibration.md in
    /// OUT/calibration-<UTC timestamp>/
    Calibrate(CalibrateArgs),
}

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// The configurations, each run --instances times
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rx,io_uring")]
    pub configs: Vec<ServerConfig>,
    /// The one seccomp profile
    #[arg(long, value_enum, default_value_t = Profile::Relaxed)]
    pub profile: Profile,
    /// Instances per configuration in the new method (the --instances of the runs it checks)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=8))]
    pub group: u32,
    /// Where the servers run
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    pub engine: EngineChoice,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// First server port (server i listens on PORT+i)
    #[arg(long, default_value_t = 3200)]
    pub port: u16,
}

/// The connection levels of a run (the seed PR's table).
pub const DEFAULT_CONNS: [u32; 3] = [64, 256, 512];
/// The one level of the per-request and open-loop models unless --conns or their own option
/// says otherwise: the full run's three models then fit its 40 minutes here.
pub const DEFAULT_OTHER_CONNS: u32 = 64;
/// Slices per configuration and cell in a full run's planned rounds, over its instances (12
/// rounds of one instance, 6 of two): three load models' cells in 28 minutes here, which
/// leaves 12 of the 40 for rounds of the cells still wider than the target (open loop below
/// capacity is noisier per slice than keep-alive, and a quiet machine resolves keep-alive
/// sooner).
pub const DEFAULT_SLICES: u32 = 12;
/// Resident instances per configuration when servers alternate: two is the fewest that let a
/// run see how much two identical processes differ.
pub const DEFAULT_INSTANCES: u32 = 2;
/// Planned rounds of duets (one instance each, launched afresh every round): the full matrix's
/// 154 duets a round take about 3.5 minutes here, so six take about 21 of the 30 minutes and
/// leave the rest for rounds of the cells still wider than the target; six rounds give
/// Student's t five degrees of freedom.
pub const DEFAULT_DUET_ROUNDS: u32 = 6;
/// What a full run of duets may spend measuring to reach the target.
pub const DEFAULT_DUET_MAX_DURATION: Duration = Duration::from_secs(30 * 60);
/// The A/A half-width a full run keeps adding rounds for, in percent.
pub const DEFAULT_TARGET_PCT: f64 = crate::summary::DEFAULT_RESOLUTION * 100.0;
/// What a full run may spend measuring to reach it.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(40 * 60);
pub const DEFAULT_SLICE: Duration = Duration::from_secs(1);
pub const DEFAULT_SLICE_WARMUP: Duration = Duration::from_millis(300);
/// The fewest slices per cell that give intervals with one instance
/// (`stats::MIN_ORDER_PAIRS`); with more, `stats::instances::MIN_ROUNDS` rounds.
pub const QUICK_SLICES: u32 = crate::stats::MIN_ORDER_PAIRS as u32;
pub const QUICK_SLICE: Duration = Duration::from_millis(300);
pub const QUICK_SLICE_WARMUP: Duration = Duration::from_millis(200);

#[derive(clap::Args, Debug, Clone)]
/// What every measuring command shares: the rounds and slices, the levels and routes, where
/// driver and servers run, and where results go.
pub struct MeasureArgs {
    /// Rounds: each visits every cell once [default: 6 rounds of duets, or alternating 12
    /// slices per configuration over its instances (6 rounds of 2); then rounds added for
    /// --target-resolution; --quick: 3 rounds of 2, alternating]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub rounds: Option<u32>,
    /// Resident instances of each configuration, started in a shuffled order: its interval
    /// then covers how much two identical processes differ (placement, caches), which one
    /// process cannot show. 1 gives the old method (one process, slices bootstrapped)
    /// [default: 1 with duets (each round launches them afresh), 2 alternating; calibrate: 8]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub instances: Option<u32>,
    /// When the servers are launched: once (resident for the run), or again before every
    /// round, so that each round draws every process's luck (memory placement, caches)
    /// afresh: the rounds are then independent replicates and the interval is Student's t
    /// over them, whatever the instances' spread (docs/methodology.md, "Per cell, and the
    /// comparisons") [default: round with duets, which need it; once alternating]
    #[arg(long, value_enum)]
    pub relaunch: Option<Relaunch>,
    /// How the two servers of a comparison share the time: duet (both driven at once over one
    /// window on the same server CPUs, so the host's interference in that second falls on
    /// both; each comparison is the ratio within each duet, its interval Student's t over
    /// rounds of fresh launches; docs/methodology.md, "Duets"), or alternate (one server at a
    /// time, slice after slice) [default: duet; alternate with --quick or --relaunch once]
    #[arg(long, value_enum)]
    pub pairing: Option<Pairing>,
    /// With duets, leave out the servers driven alone: by default every round of duets also
    /// drives legacy, rx and io_uring each alone (kept alive, at every level, under `relaxed`
    /// and `no-io-uring`, and the engine's `default` where it blocks io_uring) for the seed
    /// PR's table of each server's own req/s and latency
    #[arg(long)]
    pub no_solo: bool,
    /// Offer the open loop's shares of an earlier run's capacities (its folder, e.g.
    /// results/20261207T153422Z) instead of this run's own keep-alive: a re-run then drives
    /// every server at the rates the earlier one did, so their costs compare like with like
    #[arg(long, value_name = "RUN")]
    pub rates_from: Option<std::path::PathBuf>,
    /// Leave out the mechanism probe: before the first round, about 7 s a kept-alive level of
    /// the server's own worker served in-process as the io_uring server, unblocked and under
    /// the no-io-uring filter, and as rx (`bench-runner probe`), from which the report
    /// predicts the block's cost; the syscall-entry probe (a second) still runs
    #[arg(long)]
    pub no_mechanism_probe: bool,
    /// Add rounds after the planned ones so that the A/A control's half-width on CPU per
    /// request reaches PCT percent in every cell: how many each (load model, level, route)
    /// block gets, under every profile, is decided once from the planned rounds' spread (the
    /// two-stage rule; the intervals are then Stein's), and driven while --max-duration allows
    /// (the table names the cells that fell short) [default: 2 in a full run; off with --quick
    /// or an explicit --rounds unless given]
    #[arg(long, value_name = "PCT", value_parser = percent)]
    pub target_resolution: Option<f64>,
    /// The measuring time no added round may end past (the planned rounds always run)
    /// [default: 30m with duets, 40m alternating]
    #[arg(long, value_parser = duration)]
    pub max_duration: Option<Duration>,
    /// Measured time per slice (1s, 500ms) [default: 1s; --quick: 300ms]
    #[arg(long, value_parser = duration)]
    pub slice: Option<Duration>,
    /// Load before each slice's measured window, not recorded [default: 300ms; --quick: 200ms]
    #[arg(long, value_parser = duration_or_zero)]
    pub slice_warmup: Option<Duration>,
    /// Load models, each a level of the matrix like the connection count: keepalive (wrk's
    /// closed loop on kept-alive connections), per-request (a fresh connection per request,
    /// the client closing after each response: oha --disable-keepalive), open (open loop on
    /// kept-alive connections at the rates --open-at and --open-slowest give, latency from each
    /// request's due time: wrk2 -R, zrk -R; needs keepalive, whose planned rounds set the
    /// rates: open loop at a share runs after them).
    /// per-request and open need --driver rxload [default: all three; calibrate: keepalive]
    #[arg(long = "load", value_enum, value_delimiter = ',')]
    pub loads: Option<Vec<LoadChoice>>,
    /// With --load open: offered rates as percentages of each server's own keep-alive req/s
    /// at the level and route (the median of its keep-alive slices in the planned rounds,
    /// which all run first), one open-loop cell each
    /// (0: none)
    #[arg(long, value_delimiter = ',', default_value = "50,90", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub open_at: Vec<u8>,
    /// With --load open: an offered rate every server gets alike, as a percentage of the
    /// slowest server's keep-alive req/s at the level and route (0: none), so latencies
    /// compare at one load
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub open_slowest: u8,
    /// With --load open: fixed offered rates in requests a second, the same for every server
    /// and every run (needs no keep-alive capacity), e.g. 20000
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    pub open_rate: Vec<u32>,
    /// Connection levels (keep-alive at every one; see --per-request-conns and --open-conns)
    /// [default: 64,256,512]
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub conns: Option<Vec<u32>>,
    /// Connection levels of the per-request model [default: --conns when given, else 64: the
    /// full run's three models fit its 40 minutes]
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub per_request_conns: Option<Vec<u32>>,
    /// Connection levels of the open-loop rates; a share of keep-alive capacity needs its
    /// level among --conns [default: --conns when given, else 64]
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub open_conns: Option<Vec<u32>>,
    /// Routes, each measured as its own cell (and their mean reported, the figure
    /// the-benchmarker publishes), e.g. GET:/,GET:/user/0,POST:/user
    #[arg(long, value_delimiter = ',', default_value = "GET:/", value_parser = route)]
    pub routes: Vec<Route>,
    /// A smoke run: 6 slices a configuration (3 rounds of 2 instances) of 200 ms + 300 ms,
    /// no rounds added (explicit --rounds/--slice win)
    #[arg(long)]
    pub quick: bool,
    /// Print the plan and its ETA, run nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Seed of the slice order (recorded in raw.json; the same seed gives the same schedule)
    #[arg(long)]
    pub seed: Option<u64>,
    /// CPUs for the servers (every server's cpuset; APP_WORKERS = their count). Default: the
    /// first half
    #[arg(long, value_delimiter = ',')]
    pub server_cpus: Option<Vec<usize>>,
    /// CPUs for the load generator (one driver thread each) and the runner. Default: the
    /// second half
    #[arg(long, value_delimiter = ',')]
    pub load_cpus: Option<Vec<usize>>,
    /// Results directory (a timestamped folder is made inside, and `latest` points to it)
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Seccomp profiles
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "default,no-io-uring,relaxed"
    )]
    pub profiles: Vec<Profile>,
    /// Server configurations
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "legacy,rx,oneshot,io_uring,io_uring-control"
    )]
    pub configs: Vec<ServerConfig>,
    /// A foreign server, measured beside this project's under every selected profile and
    /// compared with each of its configurations (repeatable). cmd: runs natively as
    /// `sh -c 'exec COMMAND'` ({port} in it and $PORT give it its port; it must stay one
    /// foreground process); image: runs under Docker with $PORT (on --network bridge every
    /// server gets port --port in its own namespace). Trailing ,ENV=VALUE pairs are its
    /// environment. It has no counters: its CPU and latency are measured from outside
    #[arg(long = "server", value_name = "NAME=cmd:COMMAND|image:IMAGE[,ENV=VALUE]", value_parser = foreign_server)]
    pub servers: Vec<ForeignServer>,
    /// A --server that every other foreign server is compared with too, paired, as this
    /// project's configurations are (repeatable; `peers` makes the floor one): how far each
    /// server is from a responder it should not beat
    #[arg(long = "reference", value_name = "NAME")]
    pub references: Vec<String>,
    /// Syscall profiles: one extra slice (at least 2 s) per server under `strace -c -f` after
    /// the rounds, at the first connection level and route (native servers and a local engine's containers;
    /// needs strace and the right to ptrace)
    #[arg(long, value_enum, default_value_t = StraceSlices::Foreign)]
    pub strace: StraceSlices,
    /// Where the servers run
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    pub engine: EngineChoice,
    /// Load generator
    #[arg(long, value_enum, default_value_t = DriverChoice::Rxload)]
    pub driver: DriverChoice,
    /// Network between driver and servers
    #[arg(long, value_enum, default_value_t = Network::Host)]
    pub network: Network,
    /// Address the driver aims at (host network): the engine's host. Loopback unless the
    /// engine is remote (DOCKER_HOST=tcp://…); see docs/methodology.md
    #[arg(long, default_value = "127.0.0.1")]
    pub target_host: String,
    /// First server port (host network: server i listens on PORT+i; bridge: all on PORT)
    #[arg(long, default_value_t = 3000)]
    pub port: u16,
    /// Docker: use the rxbench-server image already built (`build-images`) instead of building
    /// it (the runner's own container has no Rust toolchain)
    #[arg(long)]
    pub no_build: bool,
    /// Leave the firewall as it is: where connection tracking counts loopback, a connection
    /// per request is then left out (or refused, when asked for) with the rules to add by
    /// hand, instead of the runner exempting its own servers' ports for the run
    #[arg(long)]
    pub keep_firewall: bool,
    /// What the run is called in its folder's name (`peers` → OUT/peers-<timestamp>,
    /// OUT/peers-latest); the plain matrix has none.
    #[arg(skip)]
    pub label: Option<String>,
    /// A calibration study (`calibrate`): the group of instances its new method compares.
    #[arg(skip)]
    pub calibration: Option<u32>,
}

impl MeasureArgs {
    /// The load models asked for, or the full run's three.
    pub fn load_choices(&self) -> Vec<LoadChoice> {
        self.loads
            .clone()
            .unwrap_or_else(|| LoadChoice::ALL.to_vec())
    }

    /// The connection levels of one load model, sorted: keep-alive at every `--conns` level,
    /// the others at theirs.
    pub fn conns_of(&self, load: LoadModel) -> Vec<u32> {
        let own = match load {
            LoadModel::KeepAlive => None,
            LoadModel::PerRequest => self.per_request_conns.as_ref(),
            LoadModel::Open(_) => self.open_conns.as_ref(),
        };
        let mut levels = match (own, &self.conns, load) {
            (Some(levels), _, _) | (None, Some(levels), _) => levels.clone(),
            (None, None, LoadModel::KeepAlive) => DEFAULT_CONNS.to_vec(),
            (None, None, _) => vec![DEFAULT_OTHER_CONNS],
        };
        levels.sort_unstable();
        levels.dedup();
        levels
    }

    /// The load models of the matrix, `open` expanded into its rates, in their order.
    pub fn load_models(&self) -> Vec<LoadModel> {
        let mut models = Vec::new();
        for choice in self.load_choices() {
            match choice {
                LoadChoice::KeepAlive => models.push(LoadModel::KeepAlive),
                LoadChoice::PerRequest => models.push(LoadModel::PerRequest),
                LoadChoice::Open => {
                    models.extend(
                        self.open_at
                            .iter()
                            .filter(|&&p| p > 0)
                            .map(|&p| LoadModel::Open(Offered::Own(p))),
                    );
                    if self.open_slowest > 0 {
                        models.push(LoadModel::Open(Offered::Slowest(self.open_slowest)));
                    }
                    models.extend(
                        self.open_rate
                            .iter()
                            .map(|&n| LoadModel::Open(Offered::Fixed(n))),
                    );
                }
            }
        }
        models.sort_unstable();
        models.dedup();
        models
    }

    /// How compared servers share the time: as asked, else duets — but for a smoke run
    /// (`--quick`: too few rounds for Student's t over them) and resident servers
    /// (`--relaunch once`: a duet of two resident processes counts their luck as their
    /// difference).
    pub fn pairing(&self) -> Pairing {
        self.pairing
            .unwrap_or(if self.quick || self.relaunch == Some(Relaunch::Once) {
                Pairing::Alternate
            } else {
                Pairing::Duet
            })
    }

    pub fn rounds(&self) -> u32 {
        let k = self.instances();
        self.rounds
            .unwrap_or(match (self.quick, self.pairing(), k) {
                (true, _, 1) => QUICK_SLICES,
                (true, _, _) => QUICK_SLICES
                    .div_ceil(k)
                    .max(crate::stats::instances::MIN_ROUNDS as u32),
                (false, Pairing::Duet, _) => DEFAULT_DUET_ROUNDS,
                (false, Pairing::Alternate, _) => DEFAULT_SLICES.div_ceil(k),
            })
    }

    /// The resolution to keep adding rounds for, if any.
    pub fn target(&self) -> Option<crate::target::Target> {
        let pct = match (self.target_resolution, self.quick || self.rounds.is_some()) {
            (Some(p), _) => p,
            (None, false) => DEFAULT_TARGET_PCT,
            (None, true) => return None,
        };
        let budget = match self.pairing() {
            Pairing::Duet => DEFAULT_DUET_MAX_DURATION,
            Pairing::Alternate => DEFAULT_MAX_DURATION,
        };
        Some(crate::target::Target {
            half_width: pct / 100.0,
            budget_s: self.max_duration.unwrap_or(budget).as_secs_f64(),
        })
    }

    /// When the servers are launched: as asked, else once — or every round for duets, whose
    /// rounds are the replicates.
    pub fn relaunch(&self) -> Relaunch {
        self.relaunch.unwrap_or(match self.pairing() {
            Pairing::Alternate => Relaunch::Once,
            Pairing::Duet => Relaunch::Round,
        })
    }

    /// Instances of each configuration: as asked, else one for duets (each round launches it
    /// afresh, so the rounds sample the processes' luck) and two alternating.
    pub fn instances(&self) -> u32 {
        self.instances
            .unwrap_or(match self.pairing() {
                Pairing::Duet => 1,
                Pairing::Alternate => DEFAULT_INSTANCES,
            })
            .max(1)
    }

    pub fn slice(&self) -> Duration {
        self.slice.unwrap_or(if self.quick {
            QUICK_SLICE
        } else {
            DEFAULT_SLICE
        })
    }

    pub fn slice_warmup(&self) -> Duration {
        self.slice_warmup.unwrap_or(if self.quick {
            QUICK_SLICE_WARMUP
        } else {
            DEFAULT_SLICE_WARMUP
        })
    }
}

#[cfg(test)]
mod tests;

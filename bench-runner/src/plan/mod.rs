//! The plan, with no I/O: the arguments turned into which servers are resident, which cells a
//! round visits, and in what order (shuffled afresh each round from a recorded seed).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use driver::target::Route;
use rand_core::SeedableRng;
use rand_pcg::Pcg64;

use crate::cli::{Network, RunArgs};
use crate::model::{
    instance_label, Launch, LoadModel, Pairing, Profile, Relaunch, ServerConfig, ServerKey, Subject,
};
use crate::stats::below;

mod describe;

/// Arguments that make no plan, each named.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("no profile left to measure (native mode has no 'default')")]
    NoProfile,
    #[error("--network bridge needs a Docker engine (native mode has no networks)")]
    BridgeNeedsDocker,
    #[error("--server {0}: two servers of that name")]
    DuplicateServer(String),
    #[error("--server {name}=image:{image} needs a Docker engine; natively give cmd:COMMAND")]
    ImageNeedsDocker { name: String, image: String },
    #[error("--server {0}=cmd:…: commands run natively (--engine native); under Docker give image:IMAGE")]
    CmdNeedsNative(String),
    #[error("--reference {0}: no --server of that name")]
    UnknownReference(String),
    #[error("--load open needs keepalive in the same run: its offered rates are shares of the keep-alive req/s measured in the same run (e.g. --load keepalive,open), unless --open-at and --open-slowest are off and --open-rate gives them")]
    OpenNeedsKeepAlive,
    #[error("--open-conns {0}: an open-loop share of keep-alive capacity needs keep-alive measured at that level too (add it to --conns, or offer a fixed --open-rate)")]
    OpenLevelWithoutCapacity(u32),
    #[error("--pairing duet with --relaunch once: a duet's servers keep their luck (memory placement, caches) all run, and its comparison of two resident processes would count that luck as their difference; duets need --relaunch round (their default)")]
    DuetResident,
    #[error("--driver {0} cannot drive duets ({1}): only rxload drives two servers over one window; add --pairing alternate")]
    DuetNeedsRxload(&'static str, &'static str),
    #[error("--port {port}: {servers} servers need consecutive ports from it")]
    PortsRunOut { port: u16, servers: usize },
}

/// The plan from the arguments, once the engine is known (native mode has no engine default
/// profile and no networks), and notes for the reader about what was left out.
pub fn make_plan(a: &RunArgs, native: bool, seed: u64) -> Result<(Plan, Vec<String>), PlanError> {
    let mut notes = Vec::new();
    let mut profiles = Vec::new();
    for &p in &a.profiles {
        if native && p == Profile::Default {
            notes.push("native mode: no engine, so no engine default profile; 'default' was skipped (relaxed = no filter, no-io-uring = the same EPERM filter as a seccomp filter in the child)".into());
            continue;
        }
        if !profiles.contains(&p) {
            profiles.push(p);
        }
    }
    if profiles.is_empty() {
        return Err(PlanError::NoProfile);
    }
    if native && a.network == Network::Bridge {
        return Err(PlanError::BridgeNeedsDocker);
    }
    let mut names = BTreeSet::new();
    for f in &a.servers {
        if !names.insert(f.name.as_str()) {
            return Err(PlanError::DuplicateServer(f.name.clone()));
        }
        match (&f.launch, native) {
            (Launch::Image(image), true) => {
                return Err(PlanError::ImageNeedsDocker {
                    name: f.name.clone(),
                    image: image.clone(),
                })
            }
            (Launch::Cmd(_), false) => return Err(PlanError::CmdNeedsNative(f.name.clone())),
            (Launch::Image(_), false) | (Launch::Cmd(_), true) => {}
        }
    }
    if let Some(r) = a.references.iter().find(|r| !names.contains(r.as_str())) {
        return Err(PlanError::UnknownReference(r.clone()));
    }
    let mut subjects: Vec<Subject> = a.configs.iter().map(|&c| Subject::Own(c)).collect();
    subjects.extend(
        a.servers
            .iter()
            .map(|f| Subject::Foreign(f.name.as_str().into())),
    );
    let mut servers = Vec::new();
    for &profile in &profiles {
        for config in &subjects {
            let key = ServerKey {
                profile,
                config: config.clone(),
            };
            if !servers.contains(&key) {
                servers.push(key);
            }
        }
    }
    let residents = servers.len() * a.measure.instances() as usize;
    if a.network == Network::Host && usize::from(a.port) + residents > 65_536 {
        return Err(PlanError::PortsRunOut {
            port: a.port,
            servers: residents,
        });
    }
    let mut loads = a.measure.load_models();
    if a.measure.loads.is_none() && loads.iter().any(|&l| !a.driver.supports(l)) {
        loads.retain(|&l| a.driver.supports(l));
        notes.push(format!(
            "--driver {} drives keep-alive only: the other load models were left out",
            a.driver.name()
        ));
    }
    let shares = loads.iter().any(|l| l.takes_share());
    if shares && !loads.contains(&LoadModel::KeepAlive) {
        return Err(PlanError::OpenNeedsKeepAlive);
    }
    let keep_alive = a.measure.conns_of(LoadModel::KeepAlive);
    let mut load_conns = BTreeMap::new();
    for &load in &loads {
        let levels = a.measure.conns_of(load);
        if let Some(&n) = levels
            .iter()
            .find(|n| load.takes_share() && !keep_alive.contains(n))
        {
            return Err(PlanError::OpenLevelWithoutCapacity(n));
        }
        load_conns.insert(load, levels);
    }
    let (conns, load_conns) = split_levels(load_conns);
    let relaunch = a.measure.relaunch();
    let pairing = a.measure.pairing();
    if pairing == Pairing::Duet {
        if relaunch == Relaunch::Once {
            return Err(PlanError::DuetResident);
        }
        if a.driver != crate::cli::DriverChoice::Rxload {
            let asked = if a.measure.pairing.is_some() {
                "--pairing duet"
            } else {
                "a full run's default pairing"
            };
            return Err(PlanError::DuetNeedsRxload(a.driver.name(), asked));
        }
    }
    let references: Vec<Subject> = a
        .references
        .iter()
        .map(|r| Subject::Foreign(r.as_str().into()))
        .collect();
    let duets = match pairing {
        Pairing::Alternate => vec![],
        Pairing::Duet => crate::summary::comparison_pairs(&servers, &references)
            .iter()
            .filter_map(|(x, y)| {
                let at = |k| servers.iter().position(|s| s == k);
                Some((at(x)?, at(y)?))
            })
            .collect(),
    };
    Ok((
        Plan {
            servers,
            loads,
            conns,
            load_conns,
            routes: a.measure.routes.clone(),
            instances: a.measure.instances(),
            relaunch,
            pairing,
            duets,
            target: a.measure.target(),
            rounds: a.measure.rounds(),
            slice: a.measure.slice(),
            warmup: a.measure.slice_warmup(),
            seed,
        },
        notes,
    ))
}

/// One cell of the matrix: a resident server under one load model at one connection level on
/// one route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    /// The resident server: [`Plan::resident`] says which configuration and instance.
    pub server: usize,
    pub load: LoadModel,
    pub conns: u32,
    /// Index into [`Plan::routes`].
    pub route: usize,
    /// A duet (`--pairing duet`): the resident server driven at the same time.
    pub partner: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct Plan {
    /// The configurations (a profile and a server), each run as `instances` resident servers.
    pub servers: Vec<ServerKey>,
    /// Resident instances of each configuration: separate processes, so that a
    /// configuration's figure is not one process's luck of placement.
    pub instances: u32,
    /// Whether every round starts with every server launched afresh.
    pub relaunch: Relaunch,
    /// Whether compared servers are driven one at a time or at once.
    pub pairing: Pairing,
    /// `--pairing duet`: the comparisons, as pairs of indices into `servers` (each made a
    /// duet of their instances every round).
    pub duets: Vec<(usize, usize)>,
    /// Rounds added after `rounds` until the A/A control resolves this (`--target-resolution`).
    pub target: Option<crate::target::Target>,
    pub loads: Vec<LoadModel>,
    /// Every connection level of the run.
    pub conns: Vec<u32>,
    /// The load models measured at fewer levels than `conns` ([`Plan::conns_of`]).
    pub load_conns: BTreeMap<LoadModel, Vec<u32>>,
    pub routes: Vec<Route>,
    /// Slices per cell: a round visits every cell once.
    pub rounds: u32,
    /// Measured time per slice.
    pub slice: Duration,
    /// Load before each slice's measured window, not recorded.
    pub warmup: Duration,
    pub seed: u64,
}

/// Which blocks a planned pass drives. Open loop offered a share of keep-alive capacity waits
/// for all of it: the share is then one of every keep-alive slice of the planned rounds
/// (`crate::offered`), not of the first round's two a configuration, whose req/s differ from
/// its later ones by the machine's noise (a slice's req/s swings 10–15 % here, so "90 %" of
/// one round's was 69–116 % of the run's median in the runs of 2026-12-02/03). Every
/// comparison pairs servers inside one block, so the two stages' distance in time costs no
/// pairing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Every block whose rate is not a share: keep-alive (the capacity), a connection per
    /// request, open loop at a fixed rate.
    Absolute,
    /// Open loop at shares of the capacity the first stage measured.
    Shares,
}

impl Stage {
    pub fn of(load: LoadModel) -> Stage {
        if load.takes_share() {
            Stage::Shares
        } else {
            Stage::Absolute
        }
    }

    /// How progress lines name it.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::Absolute => "closed loop and fixed rates",
            Stage::Shares => "open loop at shares of capacity",
        }
    }
}

/// One planned round of one stage's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    pub round: u32,
    pub stage: Stage,
}

/// What a slice costs beyond its warm-up and window: connecting, two counter snapshots, the
/// raw.json write (measured here: 59 s for a round of 45 slices of 1.3 s, about 10 ms each).
pub const SLICE_OVERHEAD: Duration = Duration::from_millis(40);
/// Stopping a server and launching it again until it answers (`--relaunch round`): 12 Docker
/// containers took 2 s a round here (results/method-*).
pub const LAUNCH_COST: Duration = Duration::from_millis(250);

impl Plan {
    /// Resident servers: every instance of every configuration.
    pub fn residents(&self) -> usize {
        self.servers.len() * self.instances.max(1) as usize
    }

    /// Resident server `i`'s configuration and instance (instances of one configuration
    /// are consecutive).
    pub fn resident(&self, i: usize) -> (&ServerKey, u32) {
        let k = self.instances.max(1) as usize;
        (&self.servers[i / k], (i % k) as u32)
    }

    /// The order the resident servers start in, shuffled from the seed: no configuration
    /// always starts first, into the same memory neighbourhood.
    pub fn start_order(&self) -> Vec<usize> {
        self.launch_order(0)
    }

    /// The order launch `launch` starts the servers in (`--relaunch round`: one a round),
    /// shuffled afresh for each, so that no configuration is always started first.
    pub fn launch_order(&self, launch: u32) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.residents()).collect();
        let mut rng =
            Pcg64::seed_from_u64(self.seed ^ 0x5f37_59df_0000_0001 ^ (u64::from(launch) << 32));
        shuffle(&mut order, &mut rng);
        order
    }

    /// The plan without load model `load` (a model the machine cannot measure honestly).
    pub fn leave_out(&mut self, load: LoadModel) {
        self.loads.retain(|&l| l != load);
        let levels = self
            .loads
            .iter()
            .map(|&l| (l, self.conns_of(l).to_vec()))
            .collect();
        (self.conns, self.load_conns) = split_levels(levels);
    }

    /// The connection levels load model `load` is measured at.
    pub fn conns_of(&self, load: LoadModel) -> &[u32] {
        crate::model::conns_of(&self.conns, &self.load_conns, load)
    }

    /// Every (load model, connection level, route) block of the plan, in order.
    fn blocks(&self) -> Vec<(LoadModel, u32, usize)> {
        self.loads
            .iter()
            .flat_map(|&load| {
                self.conns_of(load).iter().flat_map(move |&conns| {
                    (0..self.routes.len()).map(move |route| (load, conns, route))
                })
            })
            .collect()
    }

    /// What a block visits in round `round`: every resident server once, or (duets) every
    /// comparison once per instance — instance i of the first with instance i + round of the
    /// second, so that over the rounds every instance meets every other.
    fn visits(&self, round: u32) -> Vec<(usize, Option<usize>)> {
        let k = self.instances.max(1) as usize;
        match self.pairing {
            Pairing::Alternate => (0..self.residents()).map(|s| (s, None)).collect(),
            Pairing::Duet => self
                .duets
                .iter()
                .flat_map(|&(a, b)| {
                    (0..k).map(move |i| (a * k + i, Some(b * k + (i + round as usize) % k)))
                })
                .collect(),
        }
    }

    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for (load, conns, route) in self.blocks() {
            for (server, partner) in self.visits(0) {
                cells.push(Cell {
                    server,
                    load,
                    conns,
                    route,
                    partner,
                });
            }
        }
        cells
    }

    /// The planned rounds' visits of the driver: slices, or with duets duets (two slices
    /// over one window each).
    pub fn slices(&self) -> usize {
        self.cells().len() * self.rounds as usize
    }

    /// Round `round`'s order (rounds count from 1): every cell once, in blocks — one per
    /// (load model, connection level, route), each visiting every server — with the blocks and the
    /// servers within each shuffled by a generator seeded with the run's seed and the round,
    /// so a recorded seed reproduces the schedule. Every comparison pairs two servers at the
    /// same level and route, so the two slices of a pair are at most one block apart: the
    /// machine's drift between them is that of seconds, not of the whole round.
    pub fn round_order(&self, round: u32) -> Vec<Cell> {
        let mut rng =
            Pcg64::seed_from_u64(self.seed ^ u64::from(round).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        // Load models outermost: with one model the blocks (and so the schedule a seed
        // gives) are those of the runs before the load axis.
        let mut blocks = self.blocks();
        shuffle(&mut blocks, &mut rng);
        let mut order = Vec::with_capacity(self.cells().len());
        for (load, conns, route) in blocks {
            let mut visits = self.visits(round);
            shuffle(&mut visits, &mut rng);
            // Which server of a duet goes first (its clock read first, its load the driver's
            // first) is drawn afresh for every duet: whatever the order does then varies
            // from round to round, where the interval sees it, instead of staying fixed for
            // the run. A plan without duets draws nothing, and keeps the schedule its seed
            // gave.
            for visit in visits.iter_mut() {
                if let (server, Some(partner)) = *visit {
                    if below(&mut rng, 2) == 1 {
                        *visit = (partner, Some(server));
                    }
                }
            }
            order.extend(visits.into_iter().map(|(server, partner)| Cell {
                server,
                load,
                conns,
                route,
                partner,
            }));
        }
        order
    }

    /// The planned rounds as passes: every round of the [`Stage::Absolute`] blocks, then —
    /// where the plan has open loop at shares of capacity — every round of the
    /// [`Stage::Shares`] blocks.
    pub fn passes(&self) -> Vec<Pass> {
        let stages: &[Stage] = if self.staged() {
            &[Stage::Absolute, Stage::Shares]
        } else {
            &[Stage::Absolute]
        };
        stages
            .iter()
            .flat_map(|&stage| (1..=self.rounds).map(move |round| Pass { round, stage }))
            .collect()
    }

    /// Whether the planned rounds run in two stages: some load model takes a share.
    pub fn staged(&self) -> bool {
        self.loads.iter().any(|l| l.takes_share())
    }

    /// How a round's line names `stage`: nothing in a plan of one stage.
    pub fn stage_note(&self, stage: Stage) -> String {
        if self.staged() {
            format!(" ({})", stage.describe())
        } else {
            String::new()
        }
    }

    /// A pass's order: its round's ([`Plan::round_order`]) cells of its stage.
    pub fn pass_order(&self, pass: Pass) -> Vec<Cell> {
        let mut order = self.round_order(pass.round);
        order.retain(|c| Stage::of(c.load) == pass.stage);
        order
    }

    /// Round `round`'s order with only the cells of `blocks` (all, when `None`): an added
    /// round for the target resolution ([`crate::target`]). The same seed gives the same
    /// order as [`Plan::round_order`], less the blocks left out.
    pub fn round_order_of(&self, round: u32, blocks: &crate::target::Blocks) -> Vec<Cell> {
        let mut order = self.round_order(round);
        if let Some(blocks) = blocks {
            order.retain(|c| {
                let route = self.routes[c.route].to_string();
                blocks.iter().any(|b| b.holds(c.load, c.conns, &route))
            });
        }
        order
    }

    /// The measuring time: every slice's warm-up, window and overhead (server start-up and
    /// builds come on top).
    pub fn eta(&self) -> Duration {
        (self.warmup + self.slice + SLICE_OVERHEAD) * self.slices() as u32 + self.relaunches()
    }

    /// The time the launches before every pass but the first take (`--relaunch round`).
    pub fn relaunches(&self) -> Duration {
        match self.relaunch {
            Relaunch::Once => Duration::ZERO,
            Relaunch::Round => {
                LAUNCH_COST * (self.residents() * self.passes().len().saturating_sub(1)) as u32
            }
        }
    }

    /// The A/A control's cells: profiles with both io_uring and its control, times the load
    /// models, levels and routes (and the routes' mean, with more than one).
    pub fn control_cells(&self) -> usize {
        let has = |p: Profile, c: ServerConfig| {
            self.servers.contains(&ServerKey {
                profile: p,
                config: c.into(),
            })
        };
        let profiles = Profile::ALL
            .into_iter()
            .filter(|&p| has(p, ServerConfig::IoUring) && has(p, ServerConfig::IoUringControl))
            .count();
        let routes = self.routes.len() + usize::from(self.routes.len() > 1);
        let levels: usize = self.loads.iter().map(|&l| self.conns_of(l).len()).sum();
        profiles * levels * routes
    }

    pub fn cell_name(&self, c: &Cell) -> String {
        let route = if self.routes.len() > 1 {
            format!(" {}", self.routes[c.route])
        } else {
            String::new()
        };
        let load = c.load.suffix();
        let name = |i: usize| {
            let (key, instance) = self.resident(i);
            format!("{key}{}", instance_label(instance, self.instances))
        };
        let partner = c
            .partner
            .map_or(String::new(), |p| format!(" with {}", name(p)));
        format!("{}{partner} c={}{load}{route}", name(c.server), c.conns)
    }
}

/// Every model's levels as the plan keeps them: the run's levels (all models' together), and
/// the models measured at fewer — every model at every level is the plan of the runs before
/// levels per model, and records nothing.
fn split_levels(
    mut by_load: BTreeMap<LoadModel, Vec<u32>>,
) -> (Vec<u32>, BTreeMap<LoadModel, Vec<u32>>) {
    let mut conns: Vec<u32> = by_load.values().flatten().copied().collect();
    conns.sort_unstable();
    conns.dedup();
    by_load.retain(|_, levels| *levels != conns);
    (conns, by_load)
}

/// Fisher–Yates.
fn shuffle<T>(items: &mut [T], rng: &mut Pcg64) {
    for i in (1..items.len()).rev() {
        items.swap(i, below(rng, i + 1));
    }
}

#[cfg(test)]
mod tests;

//! The plan, with no I/O: the arguments turned into which servers are resident, which cells a
//! round visits, and in what order (shuffled afresh each round from a recorded seed).
//! `make` turns arguments into a plan, `order` schedules it, `describe` says it.

use std::collections::BTreeMap;
use std::time::Duration;

use driver::target::Route;

use crate::model::{
    instance_label, LoadModel, Pairing, Profile, Relaunch, ServerConfig, ServerKey,
};

mod describe;
mod make;
mod order;

use make::split_levels;
pub use make::{make_plan, PlanError};
pub use order::{Pass, Stage};

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
    /// A plan of duets: the configurations (indices into `servers`) also driven alone, once a
    /// round in every keep-alive block of the first route ([`Plan::solo_visits`]) — the seed
    /// PR's table of each server's own req/s and latency. Empty without duets, where every
    /// slice is a server alone.
    pub solo: Vec<usize>,
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

    /// Where the engine's `default` profile blocks io_uring (Docker ≥ 25), the seed table
    /// drives its servers alone under it as well: it is then the block as most readers meet it.
    /// Where it lets io_uring through, its row would be `relaxed`'s under a filter, which the
    /// duets measure.
    pub fn solo_with_default(&mut self) {
        if self.solo.is_empty() {
            return;
        }
        let mut profiles = make::SOLO_PROFILES.to_vec();
        profiles.insert(0, Profile::Default);
        self.solo = make::solo_servers(&self.servers, &profiles);
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

    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for (load, conns, route) in self.blocks() {
            let mut visits = self.visits(0);
            visits.extend(self.solo_visits(0, load, route));
            for (server, partner) in visits {
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
    /// over one window each) and the servers alone.
    pub fn slices(&self) -> usize {
        self.cells().len() * self.rounds as usize
    }

    /// How many of a round's visits drive a server alone in a plan of duets.
    pub fn solo_cells(&self) -> usize {
        self.blocks()
            .into_iter()
            .map(|(load, _, route)| self.solo_visits(0, load, route).len())
            .sum()
    }

    /// The configurations driven alone in the seed table ([`Plan::solo`]), as keys.
    pub fn solo_keys(&self) -> Vec<ServerKey> {
        self.solo.iter().map(|&i| self.servers[i].clone()).collect()
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
    /// models, levels and routes (not the routes' mean: its routes are the cells).
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
        // The mean over the routes is no control cell of its own (its routes are).
        let routes = self.routes.len();
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

#[cfg(test)]
mod tests;

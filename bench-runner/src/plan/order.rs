//! The schedule: in what order a round visits its cells and the servers start, shuffled
//! afresh each round from the run's recorded seed, and the stages a round is driven in.

use rand_core::SeedableRng;
use rand_pcg::Pcg64;

use super::{Cell, Plan};
use crate::model::{LoadModel, Pairing};
use crate::stats::below;

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

impl Plan {
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

    /// Which of `ports` (the run's, one a server, index by server) each server listens on in
    /// launch `launch`: a permutation drawn afresh for every launch from the seed, so that no
    /// configuration keeps one port for the whole run. With the ports fixed, 4 of 21 identical
    /// pairs kept an offset of 0.3–0.5 % for a whole run, counted with the rounds as the unit
    /// (results/method-pair-offset-20261207), and the port was what stayed fixed for a
    /// configuration (its container name too, but no process sees that: the hostname and the
    /// cgroup are the container's id, new every launch). Launch 0 keeps `ports` as given.
    pub fn launch_ports(&self, launch: u32, ports: &[u16]) -> Vec<u16> {
        let mut out = ports.to_vec();
        if launch > 0 {
            let mut rng =
                Pcg64::seed_from_u64(self.seed ^ 0x2545_f491_0000_0002 ^ (u64::from(launch) << 32));
            shuffle(&mut out, &mut rng);
        }
        out
    }

    /// Every (load model, connection level, route) block of the plan, in order.
    pub(super) fn blocks(&self) -> Vec<(LoadModel, u32, usize)> {
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
    pub(super) fn visits(&self, round: u32) -> Vec<(usize, Option<usize>)> {
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
    /// The servers a block of round `round` drives alone besides its duets: each of
    /// [`Plan::solo`] once, in every keep-alive block of the first route (the instance taking
    /// its turn by round). Interleaved with the duets in the same shuffled blocks, each
    /// launched afresh with them: every round is a replicate of these as of the duets.
    pub(super) fn solo_visits(
        &self,
        round: u32,
        load: LoadModel,
        route: usize,
    ) -> Vec<(usize, Option<usize>)> {
        if self.pairing != Pairing::Duet || load != LoadModel::KeepAlive || route != 0 {
            return Vec::new();
        }
        let k = self.instances.max(1) as usize;
        self.solo
            .iter()
            .map(|&c| (c * k + round as usize % k, None))
            .collect()
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
            visits.extend(self.solo_visits(round, load, route));
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
}

/// Fisher–Yates.
pub(super) fn shuffle<T>(items: &mut [T], rng: &mut Pcg64) {
    for i in (1..items.len()).rev() {
        items.swap(i, below(rng, i + 1));
    }
}

//! What `--dry-run` prints: the plan's matrix, its first rounds' order, its launches and its
//! ETA.

use super::{Plan, Stage};
use crate::model::{LoadModel, Pairing, Relaunch};

impl Plan {
    /// What `--dry-run` prints.
    pub fn describe(&self) -> String {
        let residents = match self.instances {
            0 | 1 => format!("{} resident servers", self.servers.len()),
            k => format!(
                "{} configurations x {k} instances = {} resident servers",
                self.servers.len(),
                self.residents()
            ),
        };
        let levels = |l: &[u32]| l.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let models = |ls: &[LoadModel]| ls.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ");
        // Keep-alive alone is the plan of the runs before the load axis: not named.
        let axes = if self.loads == [LoadModel::KeepAlive] {
            format!("{} connection levels", self.conns.len())
        } else if self.load_conns.is_empty() {
            format!(
                "{} load models ({}) x {} connection levels",
                self.loads.len(),
                models(&self.loads),
                self.conns.len()
            )
        } else {
            // Models that share their levels, in the order of the first of each group.
            let mut groups: Vec<(&[u32], Vec<LoadModel>)> = Vec::new();
            for &load in &self.loads {
                match groups.iter_mut().find(|(l, _)| *l == self.conns_of(load)) {
                    Some((_, ms)) => ms.push(load),
                    None => groups.push((self.conns_of(load), vec![load])),
                }
            }
            let pairs: usize = self.loads.iter().map(|&l| self.conns_of(l).len()).sum();
            let parts: Vec<String> = groups
                .iter()
                .map(|(l, ms)| format!("{} at {} conns", models(ms), levels(l)))
                .collect();
            format!("{pairs} (load model, level) pairs ({})", parts.join("; "))
        };
        let visits = self.cells().len();
        let size = match self.pairing {
            Pairing::Alternate => format!(
                "{visits} cells; {} rounds = {} slices",
                self.rounds,
                self.slices()
            ),
            // A visit is a duet: two servers' slices over one window.
            Pairing::Duet => {
                let pairings = match self.instances {
                    0 | 1 => String::new(),
                    k => format!(" x {k} instance pairings"),
                };
                let solo = self.solo_cells();
                let duets = visits - solo;
                let alone = match solo {
                    0 => String::new(),
                    n => format!(" + {n} servers alone"),
                };
                format!(
                    "{} cells; {} comparisons{pairings} as duets = {duets} duets{alone} a round; {} rounds = {} duets{} ({} slices)",
                    self.blocks().len() * self.residents(),
                    self.duets.len(),
                    self.rounds,
                    duets * self.rounds as usize,
                    match solo {
                        0 => String::new(),
                        n => format!(" + {} alone", n * self.rounds as usize),
                    },
                    (duets * 2 + solo) * self.rounds as usize
                )
            }
        };
        let mut s = format!(
            "plan: {residents} x {axes} x {} routes = {size}\n",
            self.routes.len(),
        );
        s += &format!(
            "each slice: {} ms warm-up + {} ms measured; seed {}\n",
            self.warmup.as_millis(),
            self.slice.as_millis(),
            self.seed
        );
        s += &format!(
            "servers: {}\n",
            self.servers
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let passes = self.passes();
        // The first two rounds of the first stage, then the first of the second (if any).
        let shown = passes
            .iter()
            .filter(|p| p.stage == Stage::Absolute)
            .take(2)
            .chain(passes.iter().find(|p| p.stage == Stage::Shares));
        for &pass in shown {
            let first: Vec<String> = self
                .pass_order(pass)
                .iter()
                .take(4)
                .map(|c| self.cell_name(c))
                .collect();
            s += &format!(
                "round {}{} starts: {} …\n",
                pass.round,
                self.stage_note(pass.stage),
                first.join(", ")
            );
        }
        if self.relaunch == Relaunch::Round {
            s += &format!(
                "every round after the first starts with all {} servers stopped and launched afresh (about {} s of the ETA)\n",
                self.residents(),
                self.relaunches().as_secs()
            );
        }
        if self.staged() {
            s += &format!(
                "the open-loop blocks offered shares of keep-alive capacity run after all {} planned rounds of the others: their rates are shares of every keep-alive slice before them\n",
                self.rounds
            );
        }
        if !self.solo.is_empty() {
            let keys: Vec<String> = self.solo_keys().iter().map(ToString::to_string).collect();
            let share = self.solo_cells() as f64 / self.cells().len() as f64;
            s += &format!(
                "the seed PR's table: {} driven alone too, kept alive at {} conns, in the same blocks as the duets: {:.0} % of the measuring (about {} s)\n",
                keys.join(", "),
                self.conns_of(LoadModel::KeepAlive)
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                share * 100.0,
                (self.eta().as_secs_f64() * share).round()
            );
        }
        let eta = self.eta().as_secs();
        s += &format!(
            "ETA: about {} min {:02} s of measuring (plus builds and server start-up)\n",
            eta / 60,
            eta % 60
        );
        if let Some(t) = &self.target {
            s += &match self.control_cells() {
                0 => "no A/A control in this plan: --target-resolution has nothing to judge by; the planned rounds only\n".to_string(),
                _ => format!(
                    "then the rounds each block needs for the A/A control to resolve ±{:.1} % on CPU per request in every cell, decided once from the planned rounds' spread (the two-stage rule), within {} min of measuring\n",
                    t.half_width * 100.0,
                    (t.budget_s / 60.0).round()
                ),
            };
        }
        s
    }
}

//! The rounds of a run: every pass of the plan driven slice by slice, each slice on disk as it
//! ends, the servers launched afresh between rounds where the run asks it, and the rounds
//! added for the target resolution.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::{Result, RunError};
use crate::cli::RunArgs;
use crate::engine::Engine;
use crate::load::{LoadDriver, Setup};
use crate::model::{instance_label, FailureKind, Pairing, Raw, Relaunch, Slice};
use crate::plan::{Cell, Plan};
use crate::pool::Pool;
use crate::preflight::check_ports;
use crate::summary::summarise_slices;
use crate::target::{AddedRounds, Blocks, Decision, Target};
use crate::{cpus, record, slice, strace};

/// What stays the same over the rounds.
pub(super) struct Rounds<'a> {
    pub(super) plan: &'a Plan,
    pub(super) driver: &'a (dyn LoadDriver + Send + Sync),
    pub(super) setup: &'a Setup,
    pub(super) load_cpus: &'a [usize],
    pub(super) dir: &'a Path,
}

impl Rounds<'_> {
    /// Measures `order`'s cells as round `round`, each slice recorded as it ends: how many
    /// failed, or `None` when the run was interrupted.
    async fn drive<E: Engine>(
        &mut self,
        pool: &mut Pool<'_, E>,
        raw: &mut Raw,
        round: u32,
        order: Vec<Cell>,
        bar: &ProgressBar,
        t0: Instant,
    ) -> Result<Option<usize>> {
        let mut failed = 0;
        for (position, cell) in order.into_iter().enumerate() {
            if self.setup.abort.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let at = (round, position as u32);
            let (p, d, s) = (self.plan, self.driver, self.setup);
            let slices = match cell.partner {
                None => vec![slice::measure(pool, p, d, s, at, cell, t0, raw).await],
                Some(_) => slice::measure_duet(pool, p, d, s, at, cell, t0, raw)
                    .await
                    .to_vec(),
            };
            let mut lines = Vec::new();
            let mut lost = None;
            for slice in slices {
                failed += usize::from(!slice.ok());
                lines.push(describe_slice(
                    &slice,
                    raw.settings.server_cpus.len(),
                    self.plan.instances,
                ));
                lost = lost.or(slice
                    .error
                    .as_ref()
                    .filter(|e| e.kind() == Some(FailureKind::EngineLost))
                    .map(|e| e.headline().to_string()));
                // A server alone in a run of duets is the seed table's, kept apart.
                if cell.partner.is_none() && self.plan.pairing == Pairing::Duet {
                    raw.solo.push(slice);
                } else {
                    raw.slices.push(slice);
                }
            }
            record::write_raw(self.dir, raw)?;
            if let Some(cause) = lost {
                bar.finish_and_clear();
                return Err(RunError::EngineLost {
                    cause,
                    slices: raw
                        .slices
                        .iter()
                        .chain(&raw.solo)
                        .filter(|s| s.ok())
                        .count(),
                    dir: self.dir.to_path_buf(),
                });
            }
            bar.inc(1);
            bar.set_message(lines.join(" | "));
        }
        Ok(Some(failed))
    }

    /// Every server stopped and launched again before the next round (`--relaunch round`).
    async fn relaunch<E: Engine>(
        &mut self,
        pool: &mut Pool<'_, E>,
        raw: &mut Raw,
        bar: &ProgressBar,
    ) -> Result<()> {
        let took = Instant::now();
        let launch = pool.launch() + 1;
        let order = self.plan.launch_order(launch);
        let ports = self.plan.launch_ports(launch, pool.ports());
        pool.relaunch(&order, &ports, raw).await;
        if !pool.any_running() {
            return Err(RunError::NoServerStarted(format!(
                "none of the servers started again for launch {}",
                pool.launch()
            )));
        }
        record::write_raw(self.dir, raw)?;
        report_round(
            bar,
            format!(
                "launch {}: {} servers started afresh in {:.0} s",
                pool.launch(),
                pool.specs.len(),
                took.elapsed().as_secs_f64()
            ),
        );
        Ok(())
    }

    /// One round after the planned ones, of `blocks` (`None`: every block): false when the
    /// run was interrupted.
    #[allow(clippy::too_many_arguments)]
    async fn added_round<E: Engine>(
        &mut self,
        pool: &mut Pool<'_, E>,
        raw: &mut Raw,
        round: u32,
        blocks: &Blocks,
        why: &str,
        bar: &ProgressBar,
        t0: Instant,
    ) -> Result<bool> {
        raw.settings.rounds = round;
        if self.plan.relaunch == Relaunch::Round {
            self.relaunch(pool, raw, bar).await?;
        }
        let round_start = Instant::now();
        let order = self.plan.round_order_of(round, blocks);
        let slices = order.len();
        bar.inc_length(slices as u64);
        let Some(failed) = self.drive(pool, raw, round, order, bar, t0).await? else {
            return Ok(false);
        };
        let took = round_start.elapsed().as_secs_f64();
        report_round(
            bar,
            format!("round {round} ({why}): {slices} slices in {took:.0} s ({failed} failed)"),
        );
        Ok(true)
    }

    /// The rounds `--target-resolution` adds after the planned ones, by the two-stage rule
    /// ([`crate::stats::stopping`]): a round of every block while an A/A cell has no interval,
    /// then the rounds the spread so far asks for, decided once and driven as the budget
    /// allows — never judged again on the later rounds' spread. False when interrupted.
    async fn add_rounds<E: Engine>(
        &mut self,
        pool: &mut Pool<'_, E>,
        raw: &mut Raw,
        target: &Target,
        bar: &ProgressBar,
        t0: Instant,
        measuring: Instant,
    ) -> Result<bool> {
        let plan = self.plan;
        let pct = target.half_width * 100.0;
        // A round's length from the visits so far (a duet is one visit and two slices).
        let length = |raw: &Raw, round: u32, blocks: &Blocks| {
            let visits = raw.slices.len() / plan.pairing.slices_per_visit() + raw.solo.len();
            measuring.elapsed() / visits.max(1) as u32
                * plan.round_order_of(round, blocks).len() as u32
        };
        let spent = |round: u32| {
            eprintln!(
                "bench-runner: the budget of {} min is spent after {round} rounds",
                (target.budget_s / 60.0).round()
            );
        };
        let mut round = plan.rounds;
        let added = loop {
            match target.decide(&summarise_slices(raw), plan.control_cells(), plan.rounds) {
                Decision::NoControl => {
                    let note = "--target-resolution: no A/A control in this run, so nothing to judge it by; the planned rounds only".to_string();
                    if !raw.notes.contains(&note) {
                        raw.notes.push(note);
                    }
                    return Ok(true);
                }
                Decision::Reached => {
                    eprintln!("bench-runner: the A/A control resolves ±{pct:.1} % in every cell after {round} rounds: none added");
                    return Ok(true);
                }
                Decision::Incomplete => {
                    if !target.fits(measuring.elapsed(), length(raw, round + 1, &None)) {
                        spent(round);
                        return Ok(true);
                    }
                    round += 1;
                    let why = "of every block: an A/A cell has no interval yet";
                    if !self
                        .added_round(pool, raw, round, &None, why, bar, t0)
                        .await?
                    {
                        return Ok(false);
                    }
                }
                Decision::Add(added) => break added,
            }
        };
        let asked = added.rounds();
        let blocks = added.0.len();
        eprintln!(
            "bench-runner: after {round} rounds the A/A control's spread asks for {asked} more of {blocks} blocks to resolve ±{pct:.1} % (decided once: the two-stage rule)"
        );
        raw.settings.added = Some(AddedRounds {
            first_stage: round,
            asked,
            blocks,
            driven: 0,
        });
        for k in 1..=asked {
            let blocks = added.round(k);
            if !target.fits(measuring.elapsed(), length(raw, round + 1, &blocks)) {
                spent(round);
                break;
            }
            round += 1;
            let why = format!("added {k} of {asked} for the target resolution");
            if !self
                .added_round(pool, raw, round, &blocks, &why, bar, t0)
                .await?
            {
                return Ok(false);
            }
            if let Some(record) = &mut raw.settings.added {
                record.driven = k;
            }
        }
        Ok(true)
    }

    pub(super) async fn measure<E: Engine>(
        &mut self,
        pool: &mut Pool<'_, E>,
        args: &RunArgs,
        raw: &mut Raw,
    ) -> Result<()> {
        // Slices say when they ran from here, the servers' start-up included.
        let t0 = Instant::now();
        if pool.specs.iter().any(|s| s.network.is_none()) {
            check_ports(&pool.specs, self.plan.instances)?;
        }
        eprintln!(
            "bench-runner: starting {} resident servers…",
            pool.specs.len()
        );
        for i in self.plan.start_order() {
            pool.start(i, raw).await;
        }
        if !pool.any_running() {
            let events: Vec<String> = raw
                .servers
                .iter()
                .flat_map(|s| s.events.iter().map(ToString::to_string))
                .collect();
            return Err(RunError::NoServerStarted(events.join("\n")));
        }
        // From here on the runner and the driver stay off the servers' CPUs.
        cpus::pin_process(self.load_cpus)?;
        record::write_raw(self.dir, raw)?;
        let plan = self.plan;
        let total = plan.slices() as u64;
        let bar = progress(total);
        eprintln!(
            "bench-runner: {}",
            plan.describe().lines().next().unwrap_or("")
        );
        let measuring = Instant::now();
        let relaunch = plan.relaunch == Relaunch::Round;
        for (n, pass) in plan.passes().into_iter().enumerate() {
            if relaunch && n > 0 {
                self.relaunch(pool, raw, &bar).await?;
            }
            let round_start = Instant::now();
            let order = plan.pass_order(pass);
            let slices = order.len();
            let Some(failed) = self.drive(pool, raw, pass.round, order, &bar, t0).await? else {
                return Ok(());
            };
            let done = bar.position();
            let left = measuring.elapsed() / done.max(1) as u32 * (total - done) as u32;
            report_round(
                &bar,
                format!(
                    "round {}/{}{}: {slices} slices in {:.0} s ({failed} failed); about {} min left",
                    pass.round,
                    plan.rounds,
                    plan.stage_note(pass.stage),
                    round_start.elapsed().as_secs_f64(),
                    left.as_secs().div_ceil(60)
                ),
            );
        }
        if let Some(target) = &plan.target {
            if !self
                .add_rounds(pool, raw, target, &bar, t0, measuring)
                .await?
            {
                return Ok(());
            }
        }
        bar.finish_and_clear();
        strace::profiles(
            pool,
            plan,
            args.strace,
            self.driver,
            self.setup,
            self.dir,
            raw,
        )
        .await;
        record::write_raw(self.dir, raw)?;
        Ok(())
    }
}

/// A round's closing line: above the progress bar, or on stderr when it is hidden.
fn report_round(bar: &ProgressBar, msg: String) {
    let (done, total) = (bar.position(), bar.length().unwrap_or(0));
    if bar.is_hidden() {
        eprintln!("bench-runner: {msg} [{done}/{total}]");
    } else {
        bar.println(msg);
    }
}

fn describe_slice(s: &Slice, cpus: usize, instances: u32) -> String {
    let instance = instance_label(s.instance, instances);
    let cell = format!("{}{instance} c={}{}", s.server, s.conns, s.load.suffix());
    match (&s.report, &s.error) {
        (Some(r), None) => format!(
            "{cell}: {:.0} req/s, {:.2} µs CPU/req, server {}",
            r.requests_per_s,
            s.cpu_us_per_request().unwrap_or(f64::NAN),
            s.utilisation(cpus)
                .map_or("?".into(), |u| format!("{:.0} %", u * 100.0))
        ),
        (_, e) => format!("{cell}: FAILED {}", e.as_ref().map_or("", |e| e.headline())),
    }
}

fn progress(n: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        // Hidden, but with a length: the lines printed instead say how far the run is.
        return ProgressBar::with_draw_target(Some(n), indicatif::ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(n);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} ETA {eta} {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    bar
}

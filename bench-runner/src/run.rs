//! A run: the plan, the engine, every server started and kept resident, the slices driven
//! round by round with each one on disk as it finishes, and nothing left behind.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{EngineChoice, Network, RunArgs};
use crate::engine::{self, Engine, EngineError, Picked, ServerSpec};
use crate::load::{self, LoadDriver, LoadError, Setup};
use crate::model::{
    instance_label, FailureKind, LoadModel, Raw, Relaunch, Schedule, ServerRecord, Settings, Slice,
    SCHEMA,
};
use crate::plan::{make_plan, Cell, Plan, PlanError};
use crate::pool::Pool;
use crate::preflight::{check_conntrack, check_port_reuse, check_ports, is_loopback};
use crate::record::RecordError;
use crate::render::RenderError;
use crate::summary::summarise;
use crate::target::Next;
use crate::{cpus, record, render, slice, strace};

/// Why a run stopped short of its table. A run that measured something has kept it in raw.json
/// (and its outputs) before returning any of these but the first four.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Folder(#[from] crate::file::FileError),
    #[error(
        "port {port} (for {server}) is not free: {error}; pick another first port with --port"
    )]
    PortTaken {
        port: u16,
        /// The configuration, and which instance of it when it has several.
        server: String,
        error: std::io::Error,
    },
    #[error("no server started:\n{0}")]
    NoServerStarted(String),
    #[error("pinning the runner to the load CPUs: {0}")]
    Pin(#[from] cpus::PinError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error("interrupted: {slices} slices kept in {}", dir.display())]
    Interrupted { slices: usize, dir: PathBuf },
    #[error(
        "{cause}; the run stops: its {slices} slices are kept in {} (`bench-runner report` \
         re-renders them), and any server container the engine still holds is removed by the \
         next run or `bench-runner clean`",
        dir.display()
    )]
    EngineLost {
        cause: String,
        slices: usize,
        dir: PathBuf,
    },
    #[error("--load per-request: {0}")]
    Ports(#[from] driver::ports::PortsError),
    #[error("--load per-request: {0}")]
    Conntrack(#[from] driver::conntrack::ConntrackError),
    #[error("a setup task stopped: {0}")]
    Task(#[from] tokio::task::JoinError),
}

pub type Result<T, E = RunError> = std::result::Result<T, E>;

/// `bench-runner` (and `peers`): plans, picks the engine and runs on it.
pub async fn run(args: RunArgs) -> Result<()> {
    let seed = args.measure.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    if args.measure.dry_run {
        let native = args.engine == EngineChoice::Native;
        let (plan, notes) = make_plan(&args, native, seed)?;
        print!("{}", plan.describe());
        for n in notes {
            println!("note: {n}");
        }
        return Ok(());
    }
    let (picked, note) = engine::pick(args.engine).await?;
    match picked {
        Picked::Docker(d) => run_on(d, &args, seed, note).await,
        Picked::Native(n) => run_on(n, &args, seed, note).await,
    }
}

/// The whole run on one engine.
pub async fn run_on<E: Engine>(
    mut engine: E,
    args: &RunArgs,
    seed: u64,
    engine_note: Option<String>,
) -> Result<()> {
    let (mut plan, mut notes) = make_plan(args, engine.is_native(), seed)?;
    notes.extend(engine_note);
    let m = &args.measure;
    let (default_server, default_load) = cpus::default_split();
    let server_cpus = m.server_cpus.clone().unwrap_or(default_server);
    let load_cpus = m.load_cpus.clone().unwrap_or(default_load);
    if server_cpus.iter().any(|c| load_cpus.contains(c)) {
        notes.push(format!("server CPUs {server_cpus:?} and load CPUs {load_cpus:?} overlap: the driver competes with the servers"));
    }
    // Ctrl-C and SIGTERM from here on stop the run cleanly: servers, network and the loopback
    // exemption below all removed.
    let abort = interrupt_flag();
    let mut _exemption = None;
    if plan.loads.contains(&LoadModel::PerRequest) {
        check_port_reuse(args)?;
        let tracked = match check_conntrack(args) {
            Err(e) if !args.keep_firewall && args.network == Network::Host => {
                let last = (plan.residents().max(1) - 1) as u16;
                let ports = args.port..=args.port.saturating_add(last);
                match crate::preflight::exempt_loopback(ports) {
                    Ok(exemption) => {
                        _exemption = Some(exemption);
                        Ok(())
                    }
                    Err(why) => {
                        eprintln!("bench-runner: could not exempt this run's ports from connection tracking ({why})");
                        Err(e)
                    }
                }
            }
            r => r,
        };
        match tracked {
            // The full run's default models: left out, said why; asked for: refused.
            Err(e) if m.loads.is_none() => {
                plan.leave_out(LoadModel::PerRequest);
                notes.push(format!("per-request left out of the run: {e}"));
                eprintln!("bench-runner: note: per-request left out of the run: {e}");
            }
            r => r?,
        }
    }
    let root = crate::repo_root();
    engine.prepare(&root, args.no_build).await?;
    let driver = {
        let (choice, root, routes) = (args.driver, root.clone(), plan.routes.clone());
        let loads = plan.loads.clone();
        tokio::task::spawn_blocking(move || load::choose(choice, &root, &routes, &loads)).await??
    };
    let network = engine.open(args.network).await?;
    let specs = specs(&plan, args, &server_cpus, network.as_deref());

    let started = record::utc_stamp();
    let (folder, latest) = match &args.label {
        Some(label) => (format!("{label}-{started}"), format!("{label}-latest")),
        None => (started.clone(), "latest".to_string()),
    };
    let dir = m.out.join(&folder);
    std::fs::create_dir_all(&dir).map_err(crate::file::error("creating", &dir))?;
    // What a syscall costs on the server CPU, before any server runs there (about a second):
    // the report explains the block's cost with it. A probe that cannot run is a note, not a
    // failed run.
    let probe = match crate::probe::measure(server_cpus.first().copied()) {
        Ok(p) => Some(p),
        Err(e) => {
            notes.push(format!("no syscall probe: {e}"));
            None
        }
    };
    let mut raw = Raw {
        schema: SCHEMA,
        engine: engine.describe(),
        machine: record::machine_here(),
        driver: driver.name().into(),
        started_utc: started.clone(),
        commit: record::commit(),
        settings: Settings {
            rounds: plan.rounds,
            slice_s: plan.slice.as_secs_f64(),
            slice_warmup_s: plan.warmup.as_secs_f64(),
            loads: plan.loads.clone(),
            conns: plan.conns.clone(),
            load_conns: plan.load_conns.clone(),
            routes: plan.routes.clone(),
            seed,
            instances: plan.instances,
            calibration_group: args.calibration,
            target: plan.target,
            planned_rounds: plan.target.map(|_| plan.rounds),
            schedule: Some(Schedule::Blocks),
            relaunch: m.relaunch,
            server_cpus: server_cpus.clone(),
            load_cpus: load_cpus.clone(),
            network: args.network.name().into(),
            target_host: args.target_host.clone(),
        },
        foreign: args.servers.clone(),
        references: args.references.clone(),
        servers: specs
            .iter()
            .map(|s| ServerRecord::new(s.key.clone(), s.instance, s.port))
            .collect(),
        slices: vec![],
        notes,
        complete: false,
        probe,
    };

    let setup = Setup {
        slice: plan.slice,
        warmup: plan.warmup,
        threads: load_cpus.len().max(1),
        abort: abort.clone(),
    };
    let mut pool = Pool::new(&engine, specs, &args.target_host);
    let mut rounds = Rounds {
        plan: &plan,
        driver: driver.as_ref(),
        setup: &setup,
        load_cpus: &load_cpus,
        dir: &dir,
    };
    let outcome = rounds.measure(&mut pool, args, &mut raw).await;
    // Whatever happened: every server stopped, the network removed, what was measured kept.
    pool.stop_all(&mut raw).await;
    engine.close(network.as_deref()).await;
    raw.complete = outcome.is_ok() && !abort.load(Ordering::Relaxed);
    record::write_raw(&dir, &raw)?;
    let summary = render::write_all(&dir, &raw)?;
    record::point_latest_at(&m.out, &latest, &folder);
    outcome?;
    if abort.load(Ordering::Relaxed) {
        return Err(RunError::Interrupted {
            slices: raw.slices.len(),
            dir,
        });
    }
    print!("{}", render::table_md(&raw, &summary));
    let flagged = summary.rows.iter().filter(|r| r.flag.is_some()).count();
    eprintln!(
        "bench-runner: results in {} ({} slices, {} rows, {} flagged)",
        dir.display(),
        raw.slices.len(),
        summary.rows.len(),
        flagged
    );
    // The answer, last, where a terminal leaves the reader.
    print!("\n{}", render::headline::headline(&raw, &summary).plain());
    Ok(())
}

/// Every server of the plan: its container name, port, CPUs and network.
fn specs(plan: &Plan, args: &RunArgs, cpus: &[usize], network: Option<&str>) -> Vec<ServerSpec> {
    let loopback = is_loopback(&args.target_host);
    (0..plan.residents())
        .map(|i| (i, plan.resident(i)))
        .map(|(i, (key, instance))| ServerSpec {
            key: key.clone(),
            instance,
            foreign: args
                .servers
                .iter()
                .find(|f| f.name == key.config.name() && key.config.own().is_none())
                .cloned(),
            name: format!(
                "rxbench-{}-{}{}-{}",
                key.profile.name(),
                key.config.name().replace('_', ""),
                instance_label(instance, plan.instances).replace('#', "-i"),
                std::process::id()
            ),
            port: if network.is_some() {
                args.port
            } else {
                args.port + i as u16
            },
            cpus: cpus.to_vec(),
            network: network.map(str::to_string),
            loopback_only: network.is_none() && loopback == Some(true),
        })
        .collect()
}

/// Set by the first Ctrl-C or SIGTERM (what `kill`, `docker stop`, systemd and CI timeouts
/// send): the run stops after its slice, stops every server and keeps what it measured. A
/// second quits at once.
fn interrupt_flag() -> Arc<AtomicBool> {
    use tokio::signal::unix::{signal, SignalKind};
    let abort = Arc::new(AtomicBool::new(false));
    let flag = abort.clone();
    tokio::spawn(async move {
        let mut term = signal(SignalKind::terminate()).ok();
        let what = signalled(&mut term).await;
        eprintln!("bench-runner: {what}: stopping the servers and keeping what was measured ({what} again to quit at once)");
        flag.store(true, Ordering::Relaxed);
        signalled(&mut term).await;
        crate::notrack::remove_active();
        eprintln!(
            "bench-runner: quitting at once; the next run removes any rxbench container left"
        );
        std::process::exit(130);
    });
    abort
}

/// The next Ctrl-C or SIGTERM, by name.
async fn signalled(term: &mut Option<tokio::signal::unix::Signal>) -> &'static str {
    let sigterm = async {
        match term {
            Some(t) => t.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        Ok(()) = tokio::signal::ctrl_c() => "Ctrl-C",
        Some(()) = sigterm => "SIGTERM",
        // Neither can be listened for: no signal will come.
        else => std::future::pending().await,
    }
}

/// What stays the same over the rounds.
struct Rounds<'a> {
    plan: &'a Plan,
    driver: &'a (dyn LoadDriver + Send + Sync),
    setup: &'a Setup,
    load_cpus: &'a [usize],
    dir: &'a Path,
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
            let slice = slice::measure(
                pool,
                self.plan,
                self.driver,
                self.setup,
                (round, position as u32),
                cell,
                t0,
                raw,
            )
            .await;
            failed += usize::from(!slice.ok());
            let line = describe_slice(&slice, raw.settings.server_cpus.len(), self.plan.instances);
            let lost = slice
                .error
                .as_ref()
                .filter(|e| e.kind() == Some(FailureKind::EngineLost))
                .map(|e| e.headline().to_string());
            raw.slices.push(slice);
            record::write_raw(self.dir, raw)?;
            if let Some(cause) = lost {
                bar.finish_and_clear();
                return Err(RunError::EngineLost {
                    cause,
                    slices: raw.slices.iter().filter(|s| s.ok()).count(),
                    dir: self.dir.to_path_buf(),
                });
            }
            bar.inc(1);
            bar.set_message(line);
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
        let order = self.plan.launch_order(pool.launch() + 1);
        pool.relaunch(&order, raw).await;
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

    async fn measure<E: Engine>(
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
        let relaunch = raw.settings.relaunch == Relaunch::Round;
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
        // Rounds added for the target resolution, of the blocks still wider than it.
        if let Some(target) = &plan.target {
            let mut round = plan.rounds;
            loop {
                round += 1;
                let per_slice = measuring.elapsed() / raw.slices.len().max(1) as u32;
                let blocks = match target.next(
                    &summarise(raw),
                    plan.control_cells(),
                    measuring.elapsed(),
                    per_slice,
                    |b| plan.round_order_of(round, b).len(),
                ) {
                    Next::Round(open) => open,
                    Next::Reached => {
                        eprintln!("bench-runner: the A/A control resolves ±{:.1} % in every cell after {} rounds", target.half_width * 100.0, round - 1);
                        break;
                    }
                    Next::BudgetSpent(open) => {
                        eprintln!("bench-runner: the budget of {} min is spent after {} rounds; {} cells still wider than ±{:.1} %", (target.budget_s / 60.0).round(), round - 1, open.len(), target.half_width * 100.0);
                        break;
                    }
                    Next::NoControl => {
                        let note = "--target-resolution: no A/A control in this run, so nothing to judge it by; the planned rounds only".to_string();
                        if !raw.notes.contains(&note) {
                            raw.notes.push(note);
                        }
                        break;
                    }
                };
                raw.settings.rounds = round;
                if relaunch {
                    self.relaunch(pool, raw, &bar).await?;
                }
                let round_start = Instant::now();
                let order = plan.round_order_of(round, &blocks);
                let slices = order.len();
                bar.inc_length(slices as u64);
                let Some(failed) = self.drive(pool, raw, round, order, &bar, t0).await? else {
                    return Ok(());
                };
                let took = round_start.elapsed().as_secs_f64();
                report_round(
                    &bar,
                    format!("round {round} (added for the target resolution): {slices} slices in {took:.0} s ({failed} failed)"),
                );
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

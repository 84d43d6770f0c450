//! A run: the plan, the engine, every server started (resident, or launched afresh every
//! round with `--relaunch round`), the slices driven round by round with each one on disk as
//! it finishes (run/rounds.rs), and nothing left behind.

mod rounds;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli::{EngineChoice, Network, RunArgs};
use crate::engine::{self, Engine, EngineError, Picked, ServerSpec};
use crate::load::{self, LoadError, Setup};
use crate::model::{instance_label, LoadModel, Raw, Schedule, ServerRecord, Settings, SCHEMA};
use crate::plan::{make_plan, Plan, PlanError};
use crate::pool::Pool;
use crate::preflight::{check_conntrack, check_port_reuse, is_loopback};
use crate::record::RecordError;
use crate::render::RenderError;
use crate::{cpus, record, render};
use rounds::Rounds;

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
    #[error("--rates-from: {0}")]
    RatesFrom(String),
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
        let kept_alive = plan.conns_of(LoadModel::KeepAlive);
        if !args.measure.no_mechanism_probe && !kept_alive.is_empty() {
            println!("{}", crate::probe::mechanism::plan_line(kept_alive));
        }
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
    let rates_from = rates_from(args, &plan)?;
    if engine.default_blocks_io_uring() {
        plan.solo_with_default();
    }
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
    // What the io_uring server's receive path costs blocked and not, at every kept-alive level
    // (about 10 s each): the report's prediction of the block's cost. Also a note if it fails.
    let kept_alive = plan.conns_of(LoadModel::KeepAlive);
    let mechanism = if args.measure.no_mechanism_probe || kept_alive.is_empty() {
        None
    } else {
        let (server, client) = (server_cpus.first().copied(), load_cpus.first().copied());
        match crate::probe::mechanism::measure(kept_alive, server, client) {
            Ok(m) => Some(m),
            Err(e) => {
                notes.push(format!("no mechanism probe: {e}"));
                None
            }
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
            added: None,
            rates_from,
            schedule: Some(Schedule::Blocks),
            relaunch: plan.relaunch,
            pairing: plan.pairing,
            solo: plan.solo_keys(),
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
        solo: vec![],
        notes,
        complete: false,
        probe,
        mechanism,
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

/// `--rates-from RUN`: the earlier run's capacities for every server and open-loop level of
/// this plan, read before anything starts (an error names what that run lacks).
fn rates_from(args: &RunArgs, plan: &Plan) -> Result<Option<crate::offered::RatesFrom>> {
    let Some(dir) = &args.measure.rates_from else {
        return Ok(None);
    };
    let earlier = record::read_raw(dir)?;
    let run = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let levels: Vec<(u32, String)> = plan
        .loads
        .iter()
        .filter(|l| l.takes_share())
        .flat_map(|&l| plan.conns_of(l).iter().copied())
        .flat_map(|c| plan.routes.iter().map(move |r| (c, r.to_string())))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    crate::offered::RatesFrom::take(&earlier, &run, &plan.servers, &levels)
        .map(Some)
        .map_err(RunError::RatesFrom)
}

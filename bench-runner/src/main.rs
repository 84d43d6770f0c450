//! bench-runner: the rxbench matrix — seccomp profiles × receive paths × connection counts —
//! through Docker (or natively when no engine answers), in interleaved rounds, written to
//! results/<UTC timestamp>/ with the evidence beside every number.

mod engine;
mod export;
mod model;
mod render;
mod stats;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::{Engine, Launch};
use crate::model::{Machine, Measurement, Profile, Raw, ServerConfig};

#[derive(Parser, Debug)]
#[command(
    name = "bench-runner",
    version,
    about = "Runs the rxbench matrix and writes the table with its evidence",
    after_help = "\
Examples:
  cargo run --release -p bench-runner                      full run (3 rounds x 10 s, 64/256/512)
  cargo run --release -p bench-runner -- --quick           smoke run (1 round x 2 s)
  cargo run --release -p bench-runner -- --dry-run         the plan and its ETA
  cargo run --release -p bench-runner -- report results/latest
  cargo run --release -p bench-runner -- export-benchmarker /tmp/bench"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Re-render table.md, summary.json, results.csv and chart.svg from DIR/raw.json
    Report { dir: PathBuf },
    /// Write the server as a the-benchmarker/web-frameworks entry (rust/rxbench/) under OUT
    ExportBenchmarker { out: PathBuf },
    /// Build the images compose.yaml uses (rxbench-server, rxbench-runner), offline
    BuildImages,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum EngineChoice {
    /// Docker when an engine answers, else native (and say so)
    Auto,
    Docker,
    Native,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DriverChoice {
    /// rxload (io_uring, in this process): the saturating driver
    Rxload,
    /// Real wrk (Debian's), parsed: the cross-check
    Wrk,
    /// rxload's goose engine (GET / as a goose scenario): the realism cross-check; no
    /// warm-up (goose resets its metrics once every user runs)
    Goose,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Rounds; configurations are interleaved and their order rotated each round
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Measured time per level (10s, 500ms, 1m)
    #[arg(long, default_value = "10s", value_parser = duration)]
    duration: Duration,
    /// Load before each measurement, not recorded
    #[arg(long, default_value = "2s", value_parser = duration)]
    warmup: Duration,
    /// Connection counts
    #[arg(long, value_delimiter = ',', default_value = "64,256,512")]
    conns: Vec<u32>,
    /// Seccomp profiles: default, no-io-uring, relaxed
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default,no-io-uring,relaxed"
    )]
    profiles: Vec<String>,
    /// Server configurations: legacy, rx, oneshot, io_uring, io_uring-control
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "legacy,rx,oneshot,io_uring,io_uring-control"
    )]
    configs: Vec<String>,
    /// 1 round, 2 s per level, 1 s warm-up: a smoke run
    #[arg(long)]
    quick: bool,
    /// Print the plan and its ETA, run nothing
    #[arg(long)]
    dry_run: bool,
    /// Where the server runs
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    engine: EngineChoice,
    /// Load generator
    #[arg(long, value_enum, default_value_t = DriverChoice::Rxload)]
    driver: DriverChoice,
    /// CPUs for the server (its cpuset; APP_WORKERS = their count). Default: the first half
    #[arg(long, value_delimiter = ',')]
    server_cpus: Option<Vec<usize>>,
    /// CPUs for the load generator (one driver thread each). Default: the second half
    #[arg(long, value_delimiter = ',')]
    load_cpus: Option<Vec<usize>>,
    /// Network between driver and server: `host` (the driver runs here and aims at
    /// --target-host, no NAT in the path, as the seed PR measured) or `bridge` (rxload runs in
    /// a container on a Docker network the runner creates for the run and removes after)
    #[arg(long, default_value = "host")]
    network: String,
    /// Address the driver aims at: the engine's host. Loopback unless the engine is remote
    /// (DOCKER_HOST=tcp://…); see docs/methodology.md for the two-machine layout
    #[arg(long, default_value = "127.0.0.1")]
    target_host: String,
    /// Server port (host network)
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// Results directory (a timestamped folder is made inside, and `latest` points to it)
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Docker: use the rxbench-server image already built (`build-images`) instead of building
    /// it (the runner's own container has no Rust toolchain)
    #[arg(long)]
    no_build: bool,
}

fn duration(s: &str) -> Result<Duration, String> {
    driver::target::parse_duration(s).map_err(|e| e.to_string())
}

/// With `panic = "abort"` nothing unwinds, so a panic removes the run's containers here,
/// before the process dies (a later run would remove them too, at its start).
fn install_panic_cleanup() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        let cleanup = std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let (docker, version) = engine::connect_docker().await.ok()?;
                let n = Engine::Docker { docker, version }
                    .remove_stale()
                    .await
                    .ok()?;
                eprintln!("bench-runner: removed {n} container(s) after the panic");
                Some(())
            })
        });
        let _ = cleanup.join();
    }));
}

fn main() {
    install_panic_cleanup();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = match cli.command {
        Some(Cmd::Report { dir }) => report(&dir),
        Some(Cmd::ExportBenchmarker { out }) => export::export(&repo_root(), &out),
        Some(Cmd::BuildImages) => runtime.block_on(async {
            let (docker, version) = engine::connect_docker().await?;
            eprintln!(
                "bench-runner: building rxbench-server and rxbench-runner on docker {version}…"
            );
            engine::build_all_images(&docker, &repo_root()).await?;
            println!("built {} and {}", engine::IMAGE, engine::RUNNER_IMAGE);
            Ok(())
        }),
        None => runtime.block_on(run(cli.run)),
    };
    if let Err(e) = result {
        eprintln!("bench-runner: {e:#}");
        std::process::exit(1);
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn report(dir: &Path) -> Result<()> {
    let raw: Raw = serde_json::from_str(
        &std::fs::read_to_string(dir.join("raw.json"))
            .with_context(|| format!("reading {}/raw.json", dir.display()))?,
    )
    .context("raw.json does not match the schema")?;
    render::write_all(dir, &raw)?;
    print!("{}", std::fs::read_to_string(dir.join("table.md"))?);
    Ok(())
}

/// The CPUs this process may use, split in two halves (server first).
fn default_split() -> (Vec<usize>, Vec<usize>) {
    // SAFETY: cpu_set_t is plain data filled by sched_getaffinity.
    let cpus: Vec<usize> = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    };
    if cpus.len() < 2 {
        return (cpus.clone(), cpus);
    }
    let half = cpus.len() / 2;
    (cpus[..half].to_vec(), cpus[half..].to_vec())
}

fn pin_current_thread(cpus: &[usize]) {
    // SAFETY: as above; pins the calling thread (pid 0) only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

struct Plan {
    rounds: u32,
    duration: Duration,
    warmup: Duration,
    conns: Vec<u32>,
    profiles: Vec<Profile>,
    configs: Vec<ServerConfig>,
    server_cpus: Vec<usize>,
    load_cpus: Vec<usize>,
    /// `--network bridge`: the run's own Docker network (named once the run starts).
    network: Option<String>,
}

impl Plan {
    fn measurements(&self) -> usize {
        self.rounds as usize * self.profiles.len() * self.configs.len() * self.conns.len()
    }

    /// Start, warm-up, measurement and stop of each server.
    fn eta(&self) -> Duration {
        (self.warmup + self.duration + Duration::from_millis(1500)) * self.measurements() as u32
    }

    /// (profile, config) pairs of one round, rotated by the round number.
    fn order(&self, round: u32) -> Vec<(Profile, ServerConfig)> {
        let mut pairs: Vec<(Profile, ServerConfig)> = self
            .profiles
            .iter()
            .flat_map(|&p| self.configs.iter().map(move |&c| (p, c)))
            .collect();
        let n = pairs.len().max(1);
        pairs.rotate_left(round as usize % n);
        pairs
    }
}

fn make_plan(a: &RunArgs, engine_native: bool) -> Result<(Plan, Vec<String>)> {
    let mut notes = Vec::new();
    let (mut rounds, mut dur, mut warmup) = (a.rounds, a.duration, a.warmup);
    if a.quick {
        (rounds, dur, warmup) = (1, Duration::from_secs(2), Duration::from_secs(1));
    }
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if a.conns.is_empty() || a.conns.contains(&0) {
        bail!("--conns needs positive connection counts");
    }
    let mut profiles = Vec::new();
    for p in &a.profiles {
        let p = Profile::parse(p)
            .with_context(|| format!("unknown profile '{p}' (default, no-io-uring, relaxed)"))?;
        if engine_native && p == Profile::Default {
            notes.push("native mode: no engine, so no engine default profile; 'default' was skipped (relaxed = no filter, no-io-uring = the same EPERM filter as a seccomp filter in the child)".into());
            continue;
        }
        profiles.push(p);
    }
    let configs = a
        .configs
        .iter()
        .map(|c| {
            ServerConfig::parse(c).with_context(|| {
                format!(
                    "unknown configuration '{c}' (legacy, rx, oneshot, io_uring, io_uring-control)"
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    match (a.network.as_str(), engine_native) {
        ("host", _) => {}
        ("bridge", false) => {
            if a.driver != DriverChoice::Rxload {
                bail!("--network bridge runs rxload in a container: it takes --driver rxload only");
            }
        }
        ("bridge", true) => {
            bail!("--network bridge needs a Docker engine (native mode has no networks)")
        }
        (other, _) => bail!("--network {other}: expected host or bridge"),
    }
    let (ds, dl) = default_split();
    let server_cpus = a.server_cpus.clone().unwrap_or(ds);
    let load_cpus = a.load_cpus.clone().unwrap_or(dl);
    if server_cpus.iter().any(|c| load_cpus.contains(c)) {
        notes.push(format!("server CPUs {server_cpus:?} and load CPUs {load_cpus:?} overlap: the driver competes with the server"));
    }
    Ok((
        Plan {
            rounds,
            duration: dur,
            warmup,
            conns: a.conns.clone(),
            profiles,
            configs,
            server_cpus,
            load_cpus,
            network: None,
        },
        notes,
    ))
}

/// The engine to use; a native engine's server path is filled in once it is built.
async fn pick_engine(choice: EngineChoice) -> Result<(Engine, Option<String>)> {
    if choice != EngineChoice::Native {
        match engine::connect_docker().await {
            Ok((docker, version)) => return Ok((Engine::Docker { docker, version }, None)),
            Err(e) if choice == EngineChoice::Docker => return Err(e),
            Err(e) => {
                let note = format!("no Docker engine reachable ({e:#}); running natively: the server is spawned directly, pinned with sched_setaffinity, and no-io-uring is a seccomp filter in the child");
                eprintln!("bench-runner: {note}");
                return Ok((
                    Engine::Native {
                        server: PathBuf::new(),
                    },
                    Some(note),
                ));
            }
        }
    }
    Ok((
        Engine::Native {
            server: PathBuf::new(),
        },
        None,
    ))
}

async fn run(args: RunArgs) -> Result<()> {
    let (engine, engine_note) = if args.dry_run {
        (
            Engine::Native {
                server: PathBuf::new(),
            },
            None,
        )
    } else {
        pick_engine(args.engine).await?
    };
    let native = matches!(engine, Engine::Native { .. });
    let (plan, mut notes) = make_plan(&args, native && !args.dry_run)?;
    notes.extend(engine_note);
    if args.dry_run {
        println!("plan: {} rounds x {} profiles x {} configurations x {} connection counts = {} measurements", plan.rounds, plan.profiles.len(), plan.configs.len(), plan.conns.len(), plan.measurements());
        println!(
            "each: {:?} warm-up + {:?} measured; server CPUs {:?}, load CPUs {:?}; driver {:?}",
            plan.warmup, plan.duration, plan.server_cpus, plan.load_cpus, args.driver
        );
        for r in 0..plan.rounds {
            let order: Vec<String> = plan
                .order(r)
                .iter()
                .map(|(p, c)| format!("{}/{}", p.name(), c.name()))
                .collect();
            println!("round {}: {}", r + 1, order.join(", "));
        }
        println!("ETA: about {} min", plan.eta().as_secs().div_ceil(60));
        return Ok(());
    }
    if plan.profiles.is_empty() || plan.configs.is_empty() {
        bail!("nothing to measure");
    }
    let root = repo_root();
    eprintln!(
        "bench-runner: engine {}; {}",
        engine.describe(),
        if args.no_build {
            "using the image already built"
        } else {
            "building the server…"
        }
    );
    let mut engine = engine;
    let static_server = match &mut engine {
        Engine::Docker { .. } if args.no_build => None,
        Engine::Docker { .. } => Some(
            tokio::task::spawn_blocking({
                let root = root.clone();
                move || engine::build_static(&root, "server")
            })
            .await??,
        ),
        Engine::Native { server } => {
            *server = tokio::task::spawn_blocking({
                let root = root.clone();
                move || engine::build_native_server(&root)
            })
            .await??;
            None
        }
    };
    let stale = engine
        .remove_stale()
        .await
        .context("removing stale rxbench containers")?;
    if stale > 0 {
        eprintln!("bench-runner: removed {stale} container(s) left by an earlier run");
    }
    engine.prepare(static_server.as_deref()).await?;
    if args.driver == DriverChoice::Wrk
        && std::process::Command::new("wrk")
            .arg("-v")
            .output()
            .is_err()
    {
        bail!("--driver wrk: wrk is not installed");
    }
    let mut plan = plan;
    if args.network == "bridge" {
        if let Engine::Docker { docker, .. } = &engine {
            eprintln!("bench-runner: building the rxload image for --network bridge…");
            engine::build_rxload_image(docker, &root).await?;
        }
        let name = format!("rxbench-net-{}", std::process::id());
        engine.create_network(&name).await?;
        plan.network = Some(name);
    }
    let goose_rxload = if args.driver == DriverChoice::Goose {
        let root = root.clone();
        Some(tokio::task::spawn_blocking(move || engine::build_rxload_with_goose(&root)).await??)
    } else {
        None
    };

    let started = utc_stamp();
    let dir = args.out.join(&started);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut raw = Raw {
        engine: engine.describe(),
        machine: Machine::here(),
        driver: format!("{:?}", args.driver).to_lowercase(),
        started_utc: started.clone(),
        settings: serde_json::json!({
            "rounds": plan.rounds, "duration_s": plan.duration.as_secs_f64(), "warmup_s": plan.warmup.as_secs_f64(),
            "conns": plan.conns, "server_cpus": plan.server_cpus, "load_cpus": plan.load_cpus,
            "network": args.network, "target_host": args.target_host,
        }),
        measurements: Vec::new(),
        notes,
    };

    let abort = Arc::new(AtomicBool::new(false));
    let bar = progress(plan.measurements() as u64);
    let work = measure_all(
        &engine,
        &plan,
        &args,
        goose_rxload.as_deref(),
        &mut raw,
        &dir,
        &bar,
        abort.clone(),
    );
    let outcome = tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => {
            abort.store(true, Ordering::Relaxed);
            Err(anyhow::anyhow!("interrupted"))
        }
    };
    bar.finish_and_clear();
    if let Some(net) = &plan.network {
        engine.remove_network(net).await;
    }
    let removed = engine.remove_stale().await.unwrap_or(0);
    if removed > 0 {
        eprintln!("bench-runner: removed {removed} container(s)");
    }
    // Whatever happened, what was measured is written.
    note_profile_outcomes(&mut raw);
    std::fs::write(dir.join("raw.json"), serde_json::to_string_pretty(&raw)?)?;
    let rows = render::write_all(&dir, &raw)?;
    let latest = args.out.join("latest");
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&started, &latest);
    outcome?;
    print!("{}", std::fs::read_to_string(dir.join("table.md"))?);
    let flagged = rows.iter().filter(|r| r.flag.is_some()).count();
    eprintln!(
        "bench-runner: results in {} ({} rows, {} flagged)",
        dir.display(),
        rows.len(),
        flagged
    );
    Ok(())
}

/// What each profile did to io_uring on this engine, in words, for the report.
fn note_profile_outcomes(raw: &mut Raw) {
    for p in Profile::ALL {
        let seen: std::collections::BTreeSet<String> = raw
            .measurements
            .iter()
            .filter(|m| {
                m.profile == p
                    && matches!(
                        m.config,
                        ServerConfig::IoUring | ServerConfig::IoUringControl
                    )
            })
            .filter_map(|m| {
                m.startup
                    .as_ref()
                    .map(|s| format!("backend={} io_uring={}", s.backend, s.io_uring))
            })
            .collect();
        if !seen.is_empty() {
            let list: Vec<String> = seen.into_iter().collect();
            raw.notes.push(format!(
                "profile {} on {}: the io_uring configurations reported {}",
                p.name(),
                raw.engine,
                list.join("; ")
            ));
        }
    }
}

fn progress(n: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(n);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} ETA {eta} {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    bar
}

fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[allow(clippy::too_many_arguments)]
async fn measure_all(
    engine: &Engine,
    plan: &Plan,
    args: &RunArgs,
    goose_rxload: Option<&Path>,
    raw: &mut Raw,
    dir: &Path,
    bar: &ProgressBar,
    abort: Arc<AtomicBool>,
) -> Result<()> {
    let total = plan.measurements();
    let mut done = 0;
    for round in 0..plan.rounds {
        for (profile, config) in plan.order(round) {
            for &conns in &plan.conns {
                for attempt in 1..=2 {
                    let m = measure(
                        engine,
                        plan,
                        args,
                        goose_rxload,
                        round + 1,
                        profile,
                        config,
                        conns,
                        attempt,
                        abort.clone(),
                    )
                    .await;
                    let ok = m.ok();
                    let line = match (&m.report, &m.error) {
                        (Some(r), None) => format!(
                            "{}/{} c={conns}: {:.0} req/s, P50 {:.3} ms, server {} ({})",
                            profile.name(),
                            config.name(),
                            r.requests_per_s,
                            r.latency.p50_us / 1000.0,
                            m.server_cpu_pct.map_or("?".into(), |c| format!("{c:.0}%")),
                            m.startup.as_ref().map_or("?", |s| s.backend.as_str())
                        ),
                        (_, e) => format!(
                            "{}/{} c={conns}: attempt {attempt} FAILED: {}",
                            profile.name(),
                            config.name(),
                            e.as_deref().unwrap_or("no report")
                        ),
                    };
                    raw.measurements.push(m);
                    // Nothing measured is lost if the run is interrupted.
                    std::fs::write(dir.join("raw.json"), serde_json::to_string_pretty(&*raw)?)?;
                    if bar.is_hidden() {
                        eprintln!("[{}/{total}] round {} {line}", done + 1, round + 1);
                    } else {
                        bar.println(line);
                    }
                    if ok || abort.load(Ordering::Relaxed) {
                        break;
                    }
                }
                done += 1;
                bar.inc(1);
                if abort.load(Ordering::Relaxed) {
                    bail!("interrupted");
                }
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    engine: &Engine,
    plan: &Plan,
    args: &RunArgs,
    goose_rxload: Option<&Path>,
    round: u32,
    profile: Profile,
    config: ServerConfig,
    conns: u32,
    attempt: u32,
    abort: Arc<AtomicBool>,
) -> Measurement {
    let mut m = Measurement {
        round,
        profile,
        config,
        conns,
        attempt,
        startup: None,
        report: None,
        server_cpu_pct: None,
        counters: None,
        error: None,
    };
    let launch = Launch {
        name: format!(
            "rxbench-{}-{}-c{conns}-r{round}a{attempt}-{}",
            profile.name(),
            config.name().replace('_', ""),
            std::process::id()
        ),
        profile,
        config,
        port: args.port,
        cpus: plan.server_cpus.clone(),
        network: plan.network.clone(),
    };
    let mut inst = match engine.start(&launch).await {
        Ok(i) => i,
        Err(e) => {
            m.error = Some(format!("{e:#}"));
            return m;
        }
    };
    match engine
        .wait_startup(&mut inst, Duration::from_secs(20))
        .await
    {
        Ok(s) => m.startup = Some(s),
        Err(e) => {
            let (_, _) = engine.stop(inst).await;
            m.error = Some(format!("{e:#}"));
            return m;
        }
    }
    let url = format!("http://{}:{}/", args.target_host, args.port);
    let load_cpus = plan.load_cpus.clone();
    let (warmup, dur) = (plan.warmup, plan.duration);
    let driver_choice = args.driver;
    let rxload = goose_rxload.map(Path::to_path_buf);
    // goose ramps up its users and resets its metrics itself: no separate warm-up.
    let warmup = if driver_choice == DriverChoice::Goose {
        Duration::ZERO
    } else {
        warmup
    };
    let load = match &plan.network {
        // --network bridge: rxload in a container on the run's network, aimed at the server
        // container's address there.
        Some(net) => {
            let started = match engine.address_on(&inst, net).await {
                Ok(ip) => {
                    let threads = load_cpus.len().clamp(1, conns as usize);
                    let args: Vec<String> = vec![
                        format!("-t{threads}"),
                        format!("-c{conns}"),
                        format!("-d{}ms", dur.as_millis()),
                        format!("--warmup={}ms", warmup.as_millis()),
                        "--json".into(),
                        format!("http://{ip}:{}/", args.port),
                    ];
                    engine
                        .start_driver_container(
                            &format!("{}-load", launch.name),
                            net,
                            &load_cpus,
                            args,
                            warmup + dur + Duration::from_secs(60),
                        )
                        .await
                }
                Err(e) => Err(e),
            };
            match started {
                Ok(fut) => tokio::spawn(fut),
                Err(e) => {
                    let (_, _) = engine.stop(inst).await;
                    m.error = Some(format!("{e:#}"));
                    return m;
                }
            }
        }
        None => tokio::task::spawn_blocking(move || {
            run_driver(
                driver_choice,
                rxload.as_deref(),
                &url,
                conns,
                warmup,
                dur,
                &load_cpus,
                abort,
            )
        }),
    };
    tokio::time::sleep(warmup).await;
    let t0 = Instant::now();
    let cpu0 = engine.cpu_ns(&inst).await;
    tokio::time::sleep(dur.saturating_sub(t0.elapsed())).await;
    let cpu1 = engine.cpu_ns(&inst).await;
    let wall = t0.elapsed();
    let report = load.await.map_err(anyhow::Error::from).and_then(|r| r);
    let alive = engine.alive(&mut inst).await;
    let (counters, lines) = engine.stop(inst).await;
    if let (Some(a), Some(b)) = (cpu0, cpu1) {
        let cpus = plan.server_cpus.len().max(1) as f64;
        m.server_cpu_pct = Some(b.saturating_sub(a) as f64 / wall.as_nanos() as f64 / cpus * 100.0);
    }
    m.counters = counters;
    match report {
        Ok(r) if !alive => {
            m.report = Some(r);
            m.error = Some(format!(
                "the server exited during the round; its last lines:\n{}",
                engine::tail(&lines, 10)
            ));
        }
        Ok(r) if r.requests == 0 => {
            m.report = Some(r);
            m.error = Some(format!(
                "no request completed; server log:\n{}",
                engine::tail(&lines, 10)
            ));
        }
        Ok(r) => m.report = Some(r),
        Err(e) => m.error = Some(format!("{e:#}; server log:\n{}", engine::tail(&lines, 10))),
    }
    if m.error.is_none() && m.counters.is_none() {
        m.error = Some(format!(
            "no counters line after SIGTERM; server log:\n{}",
            engine::tail(&lines, 10)
        ));
    }
    m
}

/// Runs the load from this (blocking) thread, pinned to the load CPUs so the driver's threads
/// inherit them.
#[allow(clippy::too_many_arguments)]
fn run_driver(
    choice: DriverChoice,
    rxload: Option<&Path>,
    url: &str,
    conns: u32,
    warmup: Duration,
    duration: Duration,
    load_cpus: &[usize],
    abort: Arc<AtomicBool>,
) -> Result<driver::report::Report> {
    pin_current_thread(load_cpus);
    let threads = load_cpus.len().clamp(1, conns as usize);
    match choice {
        DriverChoice::Rxload => {
            let target = driver::target::Url::parse(url)?;
            let opts = driver::Options {
                routes: vec![driver::target::Route {
                    method: "GET".into(),
                    path: target.path.clone(),
                }],
                url: target,
                threads,
                connections: conns as usize,
                duration,
                warmup,
                timeout: Duration::from_secs(2),
                headers: vec![],
                body: vec![],
                backend: reactor::BackendChoice::Auto,
                recv_multishot: true,
                batch_wait: Duration::from_micros(100),
                max_requests: None,
            };
            Ok(driver::run(&opts, abort, |n| eprintln!("rxload: {n}"))?)
        }
        DriverChoice::Wrk => {
            let secs = |d: Duration| format!("{}s", d.as_secs().max(1));
            let wrk = |d: Duration| {
                std::process::Command::new("wrk")
                    .args([
                        format!("-t{threads}"),
                        format!("-c{conns}"),
                        format!("-d{}", secs(d)),
                        "--latency".into(),
                        url.into(),
                    ])
                    .output()
            };
            if !warmup.is_zero() {
                wrk(warmup)?;
            }
            let out = wrk(duration)?;
            let text = String::from_utf8_lossy(&out.stdout);
            Ok(driver::report::parse_wrk_text(&text)?)
        }
        DriverChoice::Goose => {
            let rxload = rxload.context("rxload with goose was not built")?;
            // Spawned from this pinned thread, so it inherits the load CPUs.
            let out = std::process::Command::new(rxload)
                .args([
                    format!("-t{threads}"),
                    format!("-c{conns}"),
                    format!("-d{}s", duration.as_secs().max(1)),
                ])
                .args(["--engine", "goose", "--json", url])
                .output()?;
            if !out.status.success() {
                bail!(
                    "rxload --engine goose: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            Ok(serde_json::from_slice(&out.stdout).context("rxload's JSON")?)
        }
    }
}

// `Cli` wraps `RunArgs` with #[command(flatten)]; parse RunArgs alone in tests.
impl RunArgs {
    #[cfg(test)]
    fn try_parse_from<I, T>(args: I) -> Result<RunArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Cli::try_parse_from(args).map(|c| c.run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_rotate_the_order() {
        let (plan, _) = make_plan(
            &RunArgs::try_parse_from([
                "x",
                "--profiles",
                "relaxed",
                "--configs",
                "legacy,rx,oneshot",
            ])
            .unwrap(),
            false,
        )
        .unwrap();
        let names = |r| {
            plan.order(r)
                .iter()
                .map(|(_, c)| c.name())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(0), ["legacy", "rx", "oneshot"]);
        assert_eq!(names(1), ["rx", "oneshot", "legacy"]);
        assert_eq!(plan.measurements(), 3 * 3 * 3);
    }

    #[test]
    fn bad_plans_are_refused_with_a_reason() {
        for args in [
            vec!["x", "--profiles", "strict"],
            vec!["x", "--configs", "kqueue"],
            vec!["x", "--rounds", "0"],
            vec!["x", "--network", "overlay"],
            vec!["x", "--network", "bridge", "--driver", "wrk"],
        ] {
            let a = RunArgs::try_parse_from(&args).unwrap();
            assert!(make_plan(&a, false).is_err(), "{args:?}");
        }
        let bridge = RunArgs::try_parse_from(["x", "--network", "bridge"]).unwrap();
        assert!(make_plan(&bridge, false).is_ok());
        assert!(
            make_plan(&bridge, true).is_err(),
            "native mode has no networks"
        );
        let (plan, notes) = make_plan(&RunArgs::try_parse_from(["x"]).unwrap(), true).unwrap();
        assert!(!plan.profiles.contains(&Profile::Default));
        assert!(notes[0].starts_with("native mode"));
    }

    #[test]
    fn utc_stamp_shape() {
        let s = utc_stamp();
        assert_eq!(s.len(), 16);
        assert!(s.starts_with("20") && s.ends_with('Z') && s.as_bytes()[8] == b'T');
    }
}

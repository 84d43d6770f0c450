//! A run: build, start every server and keep it resident, drive the slices round by round,
//! keep every slice on disk as it finishes, and leave nothing behind.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{DriverChoice, EngineChoice, Network, RunArgs, StraceSlices};
use crate::engine::{build, docker, native, Engine, Server, ServerSpec};
use crate::model::{
    Launch, Machine, Profile, Raw, ServerKey, ServerRecord, Settings, Slice, StraceProfile,
    Subject, SCHEMA,
};
use crate::plan::Plan;
use crate::{cpus, render};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a slice waits for each counters snapshot line after the window.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(3);
/// A server is started at most this often (the first start and one restart).
const MAX_STARTS: u32 = 2;

/// The plan from the arguments, once the engine is known (native mode has no engine default
/// profile and no networks).
pub fn make_plan(a: &RunArgs, native: bool, seed: u64) -> Result<(Plan, Vec<String>)> {
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
        bail!("no profile left to measure (native mode has no 'default')");
    }
    if native && a.network == Network::Bridge {
        bail!("--network bridge needs a Docker engine (native mode has no networks)");
    }
    let mut names = std::collections::BTreeSet::new();
    for f in &a.servers {
        if !names.insert(f.name.as_str()) {
            bail!("--server {}: two servers of that name", f.name);
        }
        match (&f.launch, native) {
            (Launch::Image(image), true) => bail!(
                "--server {}=image:{image} needs a Docker engine; natively give cmd:COMMAND",
                f.name
            ),
            (Launch::Cmd(_), false) => bail!(
                "--server {}=cmd:…: commands run natively (--engine native); under Docker give image:IMAGE",
                f.name
            ),
            _ => {}
        }
    }
    for r in &a.references {
        if !names.contains(r.as_str()) {
            bail!("--reference {r}: no --server of that name");
        }
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
    if a.network == Network::Host && usize::from(a.port) + servers.len() > 65_536 {
        bail!(
            "--port {}: {} servers need consecutive ports from it",
            a.port,
            servers.len()
        );
    }
    let mut conns = a.conns.clone();
    conns.sort_unstable();
    conns.dedup();
    Ok((
        Plan {
            servers,
            conns,
            routes: a.routes.0.clone(),
            rounds: a.rounds(),
            slice: a.slice(),
            warmup: a.slice_warmup(),
            seed,
        },
        notes,
    ))
}

/// The engine to use, and a note when `auto` fell back to native.
async fn pick_engine(choice: EngineChoice) -> Result<(Engine, Option<String>)> {
    let native = || {
        Engine::Native(native::Native {
            server: PathBuf::new(),
        })
    };
    if choice == EngineChoice::Native {
        return Ok((native(), None));
    }
    match docker::connect().await {
        Ok(d) => Ok((Engine::Docker(d), None)),
        Err(e) if choice == EngineChoice::Docker => Err(e),
        Err(e) => {
            let note = format!("no Docker engine reachable ({e:#}); running natively: each server is a child process pinned with sched_setaffinity, and no-io-uring is a seccomp filter in the child");
            eprintln!("bench-runner: {note}");
            Ok((native(), Some(note)))
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

pub async fn run(args: RunArgs) -> Result<()> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    if args.dry_run {
        let native = args.engine == EngineChoice::Native;
        let (plan, notes) = make_plan(&args, native, seed)?;
        print!("{}", plan.describe());
        for n in notes {
            println!("note: {n}");
        }
        return Ok(());
    }
    let (mut engine, engine_note) = pick_engine(args.engine).await?;
    let (plan, mut notes) = make_plan(&args, engine.is_native(), seed)?;
    notes.extend(engine_note);
    let (default_server, default_load) = cpus::default_split();
    let server_cpus = args.server_cpus.clone().unwrap_or(default_server);
    let load_cpus = args.load_cpus.clone().unwrap_or(default_load);
    if server_cpus.iter().any(|c| load_cpus.contains(c)) {
        notes.push(format!("server CPUs {server_cpus:?} and load CPUs {load_cpus:?} overlap: the driver competes with the servers"));
    }
    prepare(&mut engine, &args).await?;
    let goose_rxload = if args.driver == DriverChoice::Goose {
        let root = repo_root();
        Some(tokio::task::spawn_blocking(move || build::rxload_with_goose(&root)).await??)
    } else {
        None
    };
    if args.driver == DriverChoice::Wrk
        && std::process::Command::new("wrk")
            .arg("-v")
            .output()
            .is_err()
    {
        bail!("--driver wrk: wrk is not installed");
    }
    if let Engine::Docker(d) = &engine {
        let stale = d
            .remove_stale()
            .await
            .context("removing stale rxbench containers")?;
        if stale > 0 {
            eprintln!("bench-runner: removed {stale} container(s) left by an earlier run");
        }
    }
    let network = match (&engine, args.network) {
        (Engine::Docker(d), Network::Bridge) => {
            let name = format!("rxbench-net-{}", std::process::id());
            d.create_network(&name).await?;
            Some(name)
        }
        _ => None,
    };
    let specs: Vec<ServerSpec> = plan
        .servers
        .iter()
        .enumerate()
        .map(|(i, key)| ServerSpec {
            key: key.clone(),
            foreign: args
                .servers
                .iter()
                .find(|f| f.name == key.config.name() && key.config.own().is_none())
                .cloned(),
            name: format!(
                "rxbench-{}-{}-{}",
                key.profile.name(),
                key.config.name().replace('_', ""),
                std::process::id()
            ),
            port: if network.is_some() {
                args.port
            } else {
                args.port + i as u16
            },
            cpus: server_cpus.clone(),
            network: network.clone(),
        })
        .collect();

    let started = crate::utc_stamp();
    let (folder, latest) = match &args.label {
        Some(label) => (format!("{label}-{started}"), format!("{label}-latest")),
        None => (started.clone(), "latest".to_string()),
    };
    let dir = args.out.join(&folder);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut raw = Raw {
        schema: SCHEMA,
        engine: engine.describe(),
        machine: Machine::here(),
        driver: args.driver.name().into(),
        started_utc: started.clone(),
        commit: commit(),
        settings: Settings {
            rounds: plan.rounds,
            slice_s: plan.slice.as_secs_f64(),
            slice_warmup_s: plan.warmup.as_secs_f64(),
            conns: plan.conns.clone(),
            routes: plan.routes.clone(),
            seed,
            server_cpus: server_cpus.clone(),
            load_cpus: load_cpus.clone(),
            network: args.network.name().into(),
            target_host: args.target_host.clone(),
        },
        foreign: args.servers.clone(),
        references: args.references.clone(),
        servers: specs
            .iter()
            .map(|s| ServerRecord {
                key: s.key.clone(),
                port: s.port,
                startup: None,
                starts: 0,
                events: vec![],
                final_counters: None,
                strace: None,
            })
            .collect(),
        slices: vec![],
        notes,
        complete: false,
    };

    let abort = Arc::new(AtomicBool::new(false));
    {
        let abort = abort.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("bench-runner: interrupted; stopping the servers and keeping what was measured (Ctrl-C again to quit at once)");
                abort.store(true, Ordering::Relaxed);
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("bench-runner: quitting at once; the next run removes any rxbench container left");
                std::process::exit(130);
            }
        });
    }
    let mut run = Run {
        engine: &engine,
        plan: &plan,
        args: &args,
        specs: &specs,
        servers: specs.iter().map(|_| None).collect(),
        driver: DriverSetup {
            choice: args.driver,
            goose_rxload,
            slice: plan.slice,
            warmup: plan.warmup,
            threads: load_cpus.len().max(1),
            abort: abort.clone(),
        },
        load_cpus,
        dir: dir.clone(),
        t0: Instant::now(),
    };
    let outcome = run.measure(&mut raw).await;
    // Whatever happened: every server stopped, the network removed, what was measured kept.
    run.stop_all(&mut raw).await;
    if let Some(net) = &network {
        if let Engine::Docker(d) = &engine {
            d.remove_network(net).await;
        }
    }
    if let Engine::Docker(d) = &engine {
        let left = d.remove_stale().await.unwrap_or(0);
        if left > 0 {
            eprintln!("bench-runner: removed {left} leftover container(s)");
        }
    }
    raw.complete = outcome.is_ok() && !abort.load(Ordering::Relaxed);
    write_raw(&dir, &raw)?;
    let summary = render::write_all(&dir, &raw)?;
    point_latest_at(&args.out, &latest, &folder);
    outcome?;
    if abort.load(Ordering::Relaxed) {
        bail!(
            "interrupted: {} slices kept in {}",
            raw.slices.len(),
            dir.display()
        );
    }
    print!("{}", std::fs::read_to_string(dir.join("table.md"))?);
    let flagged = summary.rows.iter().filter(|r| r.flag.is_some()).count();
    eprintln!(
        "bench-runner: results in {} ({} slices, {} rows, {} flagged)",
        dir.display(),
        raw.slices.len(),
        summary.rows.len(),
        flagged
    );
    Ok(())
}

/// `OUT/<link>` -> the run's folder; anything there that is not a symlink is left alone.
fn point_latest_at(out: &Path, link: &str, run: &str) {
    let latest = out.join(link);
    if let Ok(m) = std::fs::symlink_metadata(&latest) {
        if !m.file_type().is_symlink() {
            eprintln!(
                "bench-runner: {} is not a symlink; left as it is",
                latest.display()
            );
            return;
        }
        let _ = std::fs::remove_file(&latest);
    }
    if let Err(e) = std::os::unix::fs::symlink(run, &latest) {
        eprintln!(
            "bench-runner: could not point {} at {run}: {e}",
            latest.display()
        );
    }
}

/// Builds what the engine runs: the static server and its image (Docker, unless --no-build),
/// or the native server.
async fn prepare(engine: &mut Engine, args: &RunArgs) -> Result<()> {
    let root = repo_root();
    match engine {
        Engine::Docker(d) if args.no_build => d.check_image().await.context("--no-build"),
        Engine::Docker(d) => {
            eprintln!(
                "bench-runner: engine {}; building the server image…",
                d.describe()
            );
            let binary = tokio::task::spawn_blocking(move || build::static_binary(&root, "server"))
                .await??;
            build::build_server_image(&d.docker, &binary).await
        }
        Engine::Native(n) => {
            eprintln!("bench-runner: native; building the server…");
            n.server = tokio::task::spawn_blocking(move || build::native_server(&root)).await??;
            native::Native::check(&n.server)
        }
    }
}

/// The workspace's commit, `+dirty` when files differ from it (`None` outside a git checkout).
fn commit() -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(repo_root())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}+dirty") } else { head })
}

/// Writes raw.json atomically (a temporary file renamed over it): a reader, or a run killed
/// mid-write, never sees half a file.
pub fn write_raw(dir: &Path, raw: &Raw) -> Result<()> {
    let tmp = dir.join("raw.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(raw)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join("raw.json")).context("renaming raw.json.tmp")?;
    Ok(())
}

struct Run<'a> {
    engine: &'a Engine,
    plan: &'a Plan,
    args: &'a RunArgs,
    specs: &'a [ServerSpec],
    servers: Vec<Option<Server>>,
    driver: DriverSetup,
    load_cpus: Vec<usize>,
    dir: PathBuf,
    t0: Instant,
}

impl Run<'_> {
    async fn measure(&mut self, raw: &mut Raw) -> Result<()> {
        if self.specs.iter().any(|s| s.network.is_none()) {
            check_ports(self.specs)?;
        }
        eprintln!(
            "bench-runner: starting {} resident servers…",
            self.specs.len()
        );
        for i in 0..self.specs.len() {
            self.start(i, raw).await;
        }
        if self.servers.iter().all(Option::is_none) {
            bail!(
                "no server started:\n{}",
                raw.servers
                    .iter()
                    .flat_map(|s| s.events.clone())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        // From here on the runner and the driver stay off the servers' CPUs.
        cpus::pin_process(&self.load_cpus).context("pinning the runner to the load CPUs")?;
        write_raw(&self.dir, raw)?;
        let total = self.plan.slices() as u64;
        let bar = progress(total);
        eprintln!(
            "bench-runner: {}",
            self.plan.describe().lines().next().unwrap_or("")
        );
        for round in 1..=self.plan.rounds {
            let round_start = Instant::now();
            let mut failed = 0;
            for (position, cell) in self.plan.round_order(round).into_iter().enumerate() {
                if self.driver.abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let slice = self.slice(round, position as u32, cell, raw).await;
                failed += usize::from(!slice.ok());
                let line = describe_slice(&slice, raw.settings.server_cpus.len());
                raw.slices.push(slice);
                write_raw(&self.dir, raw)?;
                bar.inc(1);
                bar.set_message(line);
            }
            let done = u64::from(round) * self.plan.cells().len() as u64;
            let per = round_start.elapsed();
            let left = per * (self.plan.rounds - round);
            let msg = format!(
                "round {round}/{}: {} slices in {:.0} s ({failed} failed); about {} min left",
                self.plan.rounds,
                self.plan.cells().len(),
                per.as_secs_f64(),
                left.as_secs().div_ceil(60)
            );
            if bar.is_hidden() {
                eprintln!("bench-runner: {msg} [{done}/{total}]");
            } else {
                bar.println(msg);
            }
        }
        bar.finish_and_clear();
        self.strace_slices(raw).await;
        write_raw(&self.dir, raw)?;
        Ok(())
    }

    /// After the rounds: one extra slice for each chosen server under `strace -c -f`, at the
    /// first connection level and route, with no warm-up so that strace's count and the
    /// driver's requests cover the same load; strace's own table is kept beside raw.json.
    async fn strace_slices(&mut self, raw: &mut Raw) {
        let which = self.args.strace;
        let (conns, route) = (self.plan.conns[0], self.plan.routes[0].clone());
        for i in 0..self.specs.len() {
            let chosen = match which {
                StraceSlices::Off => false,
                StraceSlices::Foreign => self.specs[i].foreign.is_some(),
                StraceSlices::All => true,
            };
            if !chosen || self.driver.abort.load(Ordering::Relaxed) {
                continue;
            }
            eprintln!(
                "bench-runner: {}: one slice under strace -c -f (its syscall profile)…",
                self.specs[i].key
            );
            let mut profile = StraceProfile {
                conns,
                route: route.clone(),
                ..Default::default()
            };
            if let Err(e) = self.strace_slice(i, &mut profile).await {
                eprintln!(
                    "bench-runner: {}: no strace profile: {e:#}",
                    self.specs[i].key
                );
                profile.error = Some(format!("{e:#}"));
            }
            raw.servers[i].strace = Some(profile);
        }
    }

    async fn strace_slice(&mut self, i: usize, profile: &mut StraceProfile) -> Result<()> {
        let spec = &self.specs[i];
        let engine = self.engine;
        let server = self.servers[i]
            .as_mut()
            .context("the server is not running")?;
        let pid = engine
            .pid(server)
            .context("its process is not visible from here (a container of a remote engine)")?;
        let file = self.dir.join(format!(
            "strace-{}-{}.txt",
            spec.key.profile.name(),
            spec.key.config.name()
        ));
        let mut strace = tokio::process::Command::new("strace")
            .args(["-c", "-f", "-o"])
            .arg(&file)
            .args(["-p", &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("running strace (apt-get install strace)")?;
        // strace says "Process N attached" once per thread; give it a moment, then make sure it
        // did not give up (ptrace not allowed, say).
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(status) = strace.try_wait()? {
            let out = strace.wait_with_output().await?;
            bail!(
                "strace exited ({status}): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let host = engine
            .address(server, spec.network.as_deref(), &self.args.target_host)
            .await?;
        let (method, path) = profile.route.split_once(':').unwrap_or(("GET", "/"));
        let url = format!("http://{host}:{}{path}", spec.port);
        let load = Load {
            url: &url,
            method,
            conns: profile.conns,
        };
        let setup = DriverSetup {
            warmup: Duration::ZERO,
            ..self.driver.clone()
        };
        let window = drive(engine, server, &setup, &load).await;
        if let Some(id) = strace.id() {
            // SAFETY: kill(2) on our own child, not yet reaped (we hold its handle).
            unsafe { libc::kill(id as i32, libc::SIGINT) };
        }
        let out = tokio::time::timeout(Duration::from_secs(10), strace.wait_with_output())
            .await
            .context("strace did not detach within 10 s")??;
        let window = window?;
        let table = std::fs::read_to_string(&file).with_context(|| {
            format!(
                "strace wrote no table ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
        profile.requests = window.report.requests;
        profile.calls = StraceProfile::parse_calls(&table);
        if profile.calls.is_empty() {
            bail!("strace's table has no rows: {}", table.trim());
        }
        Ok(())
    }

    /// Starts server `i` (its first start or its one restart) and records what happened.
    async fn start(&mut self, i: usize, raw: &mut Raw) {
        let record = &mut raw.servers[i];
        record.starts += 1;
        let mut spec = self.specs[i].clone();
        if record.starts > 1 {
            spec.name = format!("{}-restart{}", spec.name, record.starts - 1);
        }
        match self
            .engine
            .start(&spec, STARTUP_TIMEOUT, &self.args.target_host)
            .await
        {
            Ok((server, startup)) => {
                let source = format!("server CPU time from {}", self.engine.cpu_source(&server));
                if !raw.notes.contains(&source) {
                    raw.notes.push(source);
                }
                let record = &mut raw.servers[i];
                record.startup = Some(startup);
                self.servers[i] = Some(server);
            }
            Err(e) => {
                let msg = format!(
                    "{}: did not start (start {}): {e:#}",
                    spec.key, record.starts
                );
                eprintln!("bench-runner: {msg}");
                record.events.push(msg);
                self.servers[i] = None;
            }
        }
    }

    /// One slice of `cell`: the server alive (restarted once if it died), the driver's window,
    /// the server's CPU time and counters over exactly that window.
    async fn slice(
        &mut self,
        round: u32,
        position: u32,
        cell: crate::plan::Cell,
        raw: &mut Raw,
    ) -> Slice {
        let spec = &self.specs[cell.server];
        let route = self.plan.routes[cell.route].clone();
        let mut slice = Slice {
            round,
            position,
            server: spec.key.clone(),
            conns: cell.conns,
            route: route.clone(),
            at_s: self.t0.elapsed().as_secs_f64(),
            window_s: 0.0,
            report: None,
            server_cpu_ns: None,
            counters: None,
            error: None,
        };
        if let Err(e) = self.ensure_alive(cell.server, raw).await {
            slice.error = Some(e);
            return slice;
        }
        let engine = self.engine;
        let server = self.servers[cell.server].as_mut().expect("alive");
        let host = match engine
            .address(server, spec.network.as_deref(), &self.args.target_host)
            .await
        {
            Ok(h) => h,
            Err(e) => {
                slice.error = Some(format!("{e:#}"));
                return slice;
            }
        };
        let (method, path) = route.split_once(':').unwrap_or(("GET", "/"));
        let url = format!("http://{host}:{}{path}", spec.port);
        let load = Load {
            url: &url,
            method,
            conns: cell.conns,
        };
        let outcome = drive(engine, server, &self.driver, &load).await;
        let server = self.servers[cell.server].as_ref().expect("alive");
        match outcome {
            Ok(w) => {
                slice.at_s = w.start.duration_since(self.t0).as_secs_f64();
                slice.window_s = w.end.duration_since(w.start).as_secs_f64();
                slice.server_cpu_ns = match (w.cpu_start, w.cpu_end) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                    _ => None,
                };
                if let (Some(a), Some(b)) = (w.snapshot_start, w.snapshot_end) {
                    let (a, b) = (
                        server.snapshot(a, SNAPSHOT_WAIT).await,
                        server.snapshot(b, SNAPSHOT_WAIT).await,
                    );
                    slice.counters = match (a, b) {
                        (Some(a), Some(b)) => Some(b.since(&a)),
                        _ => None,
                    };
                }
                // A foreign server has no counters; this project's must give them.
                if slice.counters.is_none() && spec.foreign.is_none() {
                    slice.error = Some(format!(
                        "no counters snapshot from the server; its log:\n{}",
                        server.tail(5)
                    ));
                }
                if slice.server_cpu_ns.is_none() {
                    slice.error = Some("the server's CPU time could not be read".into());
                }
                if w.report.requests == 0 {
                    slice.error = Some(format!(
                        "no request completed; server log:\n{}",
                        server.tail(5)
                    ));
                }
                slice.report = Some(w.report);
            }
            Err(e) => slice.error = Some(format!("{e:#}")),
        }
        if self.driver.abort.load(Ordering::Relaxed) && slice.error.is_none() {
            slice.error = Some("interrupted".into());
        }
        if !engine.alive(server) {
            let tail = server.tail(10);
            slice.error = Some(format!(
                "the server exited during the slice; its last lines:\n{tail}"
            ));
        }
        slice
    }

    /// The server of `index` is running, or the reason it is not (restarted once at most).
    async fn ensure_alive(&mut self, index: usize, raw: &mut Raw) -> Result<(), String> {
        if let Some(s) = &self.servers[index] {
            if self.engine.alive(s) {
                return Ok(());
            }
            let s = self.servers[index].take().expect("checked");
            let tail = s.tail(10);
            let (_, _) = self.engine.stop(s).await;
            let msg = format!("{}: exited; its last lines:\n{tail}", self.specs[index].key);
            eprintln!("bench-runner: {msg}");
            raw.servers[index].events.push(msg);
        }
        if raw.servers[index].starts >= MAX_STARTS {
            return Err(format!(
                "server {} is down after {} starts: {}",
                self.specs[index].key,
                raw.servers[index].starts,
                raw.servers[index]
                    .events
                    .last()
                    .map_or("", |e| e.lines().next().unwrap_or(""))
            ));
        }
        self.start(index, raw).await;
        match &self.servers[index] {
            Some(_) => Ok(()),
            None => Err(format!("server {} did not restart", self.specs[index].key)),
        }
    }

    async fn stop_all(&mut self, raw: &mut Raw) {
        let engine = self.engine;
        let stops = self
            .servers
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.take().map(|s| (i, s)))
            .map(|(i, s)| async move { (i, engine.stop(s).await) });
        for (i, (counters, _)) in futures_util::future::join_all(stops).await {
            raw.servers[i].final_counters = counters;
        }
    }
}

/// What one driver run gave, with the server's readings at the window's edges.
struct Window {
    report: driver::report::Report,
    start: Instant,
    end: Instant,
    cpu_start: Option<u64>,
    cpu_end: Option<u64>,
    /// The snapshot lines asked for at the edges (`None`: a server without counters).
    snapshot_start: Option<u64>,
    snapshot_end: Option<u64>,
}

/// How every slice is driven: the same for the whole run.
#[derive(Clone)]
struct DriverSetup {
    choice: DriverChoice,
    /// rxload built with goose (`--driver goose`).
    goose_rxload: Option<PathBuf>,
    slice: Duration,
    warmup: Duration,
    /// One driver thread per load CPU.
    threads: usize,
    abort: Arc<AtomicBool>,
}

/// What one slice sends.
struct Load<'a> {
    url: &'a str,
    method: &'a str,
    conns: u32,
}

/// Runs the driver and reads the server at the edges of the measured window: its CPU time
/// first (the precise edge), then a counters snapshot request.
async fn drive(
    engine: &Engine,
    server: &mut Server,
    d: &DriverSetup,
    load: &Load<'_>,
) -> Result<Window> {
    let (choice, url, method, conns) = (d.choice, load.url, load.method, load.conns);
    let handle = tokio::runtime::Handle::current();
    let threads = d.threads.clamp(1, conns as usize);
    let mut edges: Vec<(Instant, Option<u64>, Option<u64>)> = Vec::with_capacity(2);
    let mut at_edge = |server: &mut Server| {
        let cpu = handle.block_on(engine.cpu_ns(server));
        let at = Instant::now();
        let seq = handle.block_on(engine.request_snapshot(server));
        edges.push((at, cpu, seq));
    };
    let report = tokio::task::block_in_place(|| -> Result<driver::report::Report> {
        match choice {
            DriverChoice::Rxload => {
                let target = driver::target::Url::parse(url)?;
                let mut opts = driver::Options::new(target.clone());
                opts.routes = vec![driver::target::Route {
                    method: method.into(),
                    path: target.path.clone(),
                }];
                opts.threads = threads;
                opts.connections = conns as usize;
                opts.duration = d.slice;
                opts.warmup = d.warmup;
                Ok(driver::run_observed(
                    &opts,
                    d.abort.clone(),
                    |n| eprintln!("rxload: {n}"),
                    |_| at_edge(server),
                )?)
            }
            DriverChoice::Wrk | DriverChoice::Goose => {
                // Their windows are the whole child run (no warm-up), in whole seconds.
                let secs = d.slice.as_secs().max(1);
                let mut cmd = match choice {
                    DriverChoice::Wrk => {
                        let mut c = std::process::Command::new("wrk");
                        c.args([
                            format!("-t{threads}"),
                            format!("-c{conns}"),
                            format!("-d{secs}s"),
                            "--latency".into(),
                            url.into(),
                        ]);
                        c
                    }
                    _ => {
                        let mut c = std::process::Command::new(
                            d.goose_rxload
                                .as_deref()
                                .context("rxload with goose was not built")?,
                        );
                        c.args([
                            format!("-t{threads}"),
                            format!("-c{conns}"),
                            format!("-d{secs}s"),
                        ])
                        .args(["--engine", "goose", "--json", url]);
                        c
                    }
                };
                at_edge(server);
                let out = cmd.output().context("running the driver")?;
                at_edge(server);
                if !out.status.success() {
                    bail!(
                        "{}: {}",
                        choice.name(),
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                Ok(match choice {
                    DriverChoice::Wrk => {
                        driver::report::parse_wrk_text(&String::from_utf8_lossy(&out.stdout))?
                    }
                    _ => serde_json::from_slice(&out.stdout).context("rxload's JSON")?,
                })
            }
        }
    })?;
    let [(start, cpu_start, snapshot_start), (end, cpu_end, snapshot_end)] = edges[..] else {
        bail!("the driver stopped before its window ended");
    };
    Ok(Window {
        report,
        start,
        end,
        cpu_start,
        cpu_end,
        snapshot_start,
        snapshot_end,
    })
}

/// Every host-network server needs its own free port: say which is taken before starting any.
fn check_ports(specs: &[ServerSpec]) -> Result<()> {
    for s in specs {
        if let Err(e) = std::net::TcpListener::bind(("0.0.0.0", s.port)) {
            bail!(
                "port {} (for {}) is not free: {e}; pick another first port with --port",
                s.port,
                s.key
            );
        }
    }
    Ok(())
}

fn describe_slice(s: &Slice, cpus: usize) -> String {
    match (&s.report, &s.error) {
        (Some(r), None) => format!(
            "{} c={}: {:.0} req/s, {:.2} µs CPU/req, server {}",
            s.server,
            s.conns,
            r.requests_per_s,
            s.cpu_us_per_request().unwrap_or(f64::NAN),
            s.utilisation(cpus)
                .map_or("?".into(), |u| format!("{:.0} %", u * 100.0))
        ),
        (_, e) => format!(
            "{} c={}: FAILED {}",
            s.server,
            s.conns,
            e.as_deref().unwrap_or("").lines().next().unwrap_or("")
        ),
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

//! The `bench-runner` binary: the command line onto the library (see its crate docs for how a
//! run flows through the parts).

use anyhow::Result;
use clap::Parser;

use bench_runner::cli::{Cli, Cmd};
use bench_runner::engine::Engine as _;
use bench_runner::{calibrate, cpus, engine, export, peers, record, repo_root, run};

/// With `panic = "abort"` nothing unwinds, so a panic removes the run's containers here,
/// before the process dies (a later run would remove them too, at its start).
fn install_panic_cleanup() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        bench_runner::notrack::remove_active();
        let cleanup = std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let d = engine::docker::connect().await.ok()?;
                let n = d.remove_stale().await.ok()?;
                eprintln!("bench-runner: removed {n} container(s) after the panic");
                Some(())
            })
        });
        let _ = cleanup.join();
    }));
}

fn main() {
    install_panic_cleanup();
    let cli = with_env_args(Cli::parse());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result: Result<()> = match cli.command {
        Some(Cmd::Report { dir }) => record::rerender(&dir).map_err(Into::into),
        Some(Cmd::ExportBenchmarker {
            out,
            github,
            website,
        }) => export::export(&repo_root(), &out, &export::Links { github, website })
            .map_err(Into::into),
        Some(Cmd::BuildImages) => runtime.block_on(build_images()),
        Some(Cmd::Probe {
            cpu,
            client_cpu,
            conns,
            json,
        }) => probe(cpu, client_cpu, &conns, json),
        Some(Cmd::Clean) => runtime.block_on(clean()),
        Some(Cmd::Calibrate(args)) => runtime
            .block_on(run::run(calibrate::run_args(&args)))
            .map_err(Into::into),
        Some(Cmd::Peers(args)) => match peers::run_args(&args, &repo_root()) {
            Ok(run) => runtime.block_on(run::run(run)).map_err(Into::into),
            Err(e) => Err(e.into()),
        },
        None => runtime.block_on(run::run(cli.run)).map_err(Into::into),
    };
    if let Err(e) = result {
        // Every error of the library names its cause in its own text (a source chained as
        // well would print twice with `{:#}`).
        eprintln!("bench-runner: {e}");
        std::process::exit(1);
    }
}

/// `bench-runner clean`: what killed runs left in the engine, removed and counted.
async fn clean() -> Result<()> {
    let rules = bench_runner::notrack::remove_stale();
    if rules > 0 {
        println!("removed {rules} connection-tracking exemption rule(s) of runs that are gone");
    }
    let d = engine::docker::connect().await?;
    let n = d.remove_stale().await?;
    println!(
        "removed {n} rxbench container(s) and every rxbench network from {}",
        d.describe()
    );
    Ok(())
}

/// `bench-runner probe`: the syscall cost and the mechanism probe a run would record, printed.
fn probe(cpu: Option<usize>, client_cpu: Option<usize>, conns: &[u32], json: bool) -> Result<()> {
    let (servers, drivers) = cpus::default_split();
    let cpu = cpu.or_else(|| servers.first().copied());
    let client_cpu = client_cpu.or_else(|| drivers.first().copied());
    let cost = bench_runner::probe::measure(cpu)?;
    let mechanism = (!conns.is_empty())
        .then(|| bench_runner::probe::mechanism::measure(conns, cpu, client_cpu))
        .transpose()?;
    if json {
        let both = serde_json::json!({ "syscalls": cost, "mechanism": mechanism });
        println!("{}", serde_json::to_string_pretty(&both)?);
    } else {
        print!(
            "{}",
            bench_runner::probe::describe(&cost, &record::machine_here())
        );
        if let Some(m) = &mechanism {
            print!("{}", bench_runner::probe::mechanism::describe(m));
        }
    }
    Ok(())
}

async fn build_images() -> Result<()> {
    let d = engine::docker::connect().await?;
    eprintln!(
        "bench-runner: building rxbench-server, rxbench-runner and rxbench-rxload on {}…",
        d.describe()
    );
    engine::build::build_all_images(&d.docker, &repo_root()).await?;
    println!(
        "built {}, {} and {}",
        engine::build::IMAGE,
        engine::build::RUNNER_IMAGE,
        engine::build::RXLOAD_IMAGE
    );
    Ok(())
}

/// A run's arguments can also come from `RXBENCH_ARGS` (whitespace-separated, appended to the
/// command line), so that `RXBENCH_ARGS=--quick docker compose up` passes them through.
fn with_env_args(cli: Cli) -> Cli {
    let extra = std::env::var("RXBENCH_ARGS").unwrap_or_default();
    if cli.command.is_some() || extra.trim().is_empty() {
        return cli;
    }
    Cli::parse_from(std::env::args_os().chain(extra.split_whitespace().map(Into::into)))
}

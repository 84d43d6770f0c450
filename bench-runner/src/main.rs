//! bench-runner: the rxbench matrix — seccomp profiles × server configurations × connection
//! levels — with every server resident and alternating slices, written to
//! results/<UTC timestamp>/ with paired confidence intervals and the evidence.
//!
//! The parts: [`cli`] (the command line), [`plan`] (the schedule), [`engine`] (Docker or
//! native), [`measure`] (a run), [`stats`] and [`summary`] (the numbers), [`render`] (the files).

mod cli;
mod cpus;
mod engine;
mod export;
mod measure;
mod model;
mod peers;
mod plan;
mod render;
mod stats;
mod summary;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::cli::{Cli, Cmd};
use crate::model::{Raw, SCHEMA};

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
    let result = match cli.command {
        Some(Cmd::Report { dir }) => report(&dir),
        Some(Cmd::ExportBenchmarker {
            out,
            github,
            website,
        }) => export::export(&repo_root(), &out, &export::Links { github, website }),
        Some(Cmd::BuildImages) => runtime.block_on(async {
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
        }),
        Some(Cmd::Peers(args)) => {
            peers::run_args(&args, &repo_root()).and_then(|run| runtime.block_on(measure::run(run)))
        }
        None => runtime.block_on(measure::run(cli.run)),
    };
    if let Err(e) = result {
        eprintln!("bench-runner: {e:#}");
        std::process::exit(1);
    }
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

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn report(dir: &Path) -> Result<()> {
    let text = std::fs::read_to_string(dir.join("raw.json"))
        .with_context(|| format!("reading {}/raw.json", dir.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).context("raw.json is not JSON")?;
    if value["schema"].as_u64() != Some(u64::from(SCHEMA)) {
        bail!(
            "{}/raw.json is not a schema-{SCHEMA} run (the slice method); runs made before it \
             (one fresh server per measurement) re-render with the bench-runner of their commit",
            dir.display()
        );
    }
    let raw: Raw = serde_json::from_value(value).context("raw.json does not match the schema")?;
    render::write_all(dir, &raw)?;
    print!("{}", std::fs::read_to_string(dir.join("table.md"))?);
    Ok(())
}

/// `20261201T092233Z`, the run's folder name.
pub fn utc_stamp() -> String {
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

#[cfg(test)]
mod tests {
    #[test]
    fn utc_stamp_shape() {
        let s = super::utc_stamp();
        assert_eq!(s.len(), 16);
        assert!(s.starts_with("20") && s.ends_with('Z') && s.as_bytes()[8] == b'T');
    }
}

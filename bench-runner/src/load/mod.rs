//! The load driver, behind one trait: [`LoadDriver`]. rxload runs in this process
//! ([`rxload`]), wrk ([`wrk`]), oha ([`oha`]) and rxload's goose engine ([`goose`]) as child
//! processes whose
//! report is parsed; all give the same [`Report`]. A new driver is one file here and one arm
//! in [`choose`].

pub mod goose;
pub mod oha;
pub mod rxload;
pub mod wrk;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use driver::report::Report;
use driver::target::Route;

use crate::cli::DriverChoice;
use crate::model::LoadModel;

/// Why a driver could not be set up or could not drive a slice.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("--driver wrk: wrk is not installed")]
    WrkMissing,
    #[error("--driver oha: oha is not installed (cargo install oha --locked)")]
    OhaMissing,
    #[error("--driver wrk sends GET only: route {0} needs --driver rxload")]
    WrkGetOnly(Route),
    #[error("building rxload with goose: {0}")]
    GooseBuild(crate::engine::build::BuildError),
    #[error("{0}")]
    Target(#[from] driver::target::TargetError),
    #[error("rxload: {0}")]
    Rxload(#[from] driver::RunError),
    #[error("running {name}: {source}")]
    Spawn {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("{name}: {stderr}")]
    Failed { name: &'static str, stderr: String },
    #[error("{name}'s report: {detail}")]
    Report { name: &'static str, detail: String },
    #[error(
        "--driver {name} cannot drive two servers at once (--pairing duet): use --driver rxload"
    )]
    NoDuet { name: &'static str },
    #[error("--driver {name} cannot drive --load {}: use --driver rxload", .load.name())]
    Unsupported { name: &'static str, load: LoadModel },
}

/// How every slice is driven: the same for the whole run.
#[derive(Clone)]
pub struct Setup {
    pub slice: Duration,
    /// Load before the measured window (drivers that cannot warm up say so in their docs).
    pub warmup: Duration,
    /// Driver threads: one per load CPU, at most one per connection.
    pub threads: usize,
    /// Set on Ctrl-C: a driver that can stop early does.
    pub abort: Arc<AtomicBool>,
}

/// What one slice sends.
pub struct Load<'a> {
    /// `http://host:port` and the route's path.
    pub url: &'a str,
    pub route: &'a Route,
    pub model: LoadModel,
    pub conns: u32,
    /// Open loop: the offered rate, all connections together (req/s).
    pub rate: Option<f64>,
}

impl Load<'_> {
    pub fn threads(&self, setup: &Setup) -> usize {
        setup.threads.clamp(1, self.conns as usize)
    }

    /// wrk's `-t -c -d` for this load, which rxload's command line takes too (a child run's
    /// window is whole seconds).
    fn wrk_args(&self, setup: &Setup) -> [String; 3] {
        [
            format!("-t{}", self.threads(setup)),
            format!("-c{}", self.conns),
            format!("-d{}s", setup.slice.as_secs().max(1)),
        ]
    }
}

pub trait LoadDriver {
    /// As raw.json records it.
    fn name(&self) -> &'static str;
    /// Drives `load` for one slice, blocking. Calls `edge` exactly twice, at the start and at
    /// the end of the measured window, so the server can be read there.
    fn drive(
        &self,
        load: &Load,
        setup: &Setup,
        edge: &mut dyn FnMut(),
    ) -> Result<Report, LoadError>;

    /// Drives two loads at once over one window (`--pairing duet`), calling `edge` twice as
    /// [`LoadDriver::drive`] does; a driver that cannot says so.
    fn drive_duet(
        &self,
        _loads: [&Load; 2],
        _setup: &Setup,
        _edge: &mut dyn FnMut(),
    ) -> Result<[Report; 2], LoadError> {
        Err(LoadError::NoDuet { name: self.name() })
    }
}

/// The driver for `choice`, with what it needs built or checked first (and the routes and
/// load models it cannot drive refused before anything starts).
pub fn choose(
    choice: DriverChoice,
    root: &Path,
    routes: &[Route],
    loads: &[LoadModel],
) -> Result<Box<dyn LoadDriver + Send + Sync>, LoadError> {
    if let Some(&load) = loads.iter().find(|&&l| !choice.supports(l)) {
        return Err(LoadError::Unsupported {
            name: choice.name(),
            load,
        });
    }
    Ok(match choice {
        DriverChoice::Rxload => Box::new(rxload::Rxload),
        DriverChoice::Wrk => Box::new(wrk::Wrk::find(routes)?),
        DriverChoice::Goose => Box::new(goose::Goose::build(root)?),
        DriverChoice::Oha => Box::new(oha::Oha::find()?),
    })
}

/// Runs a driver's child process between two edges; its stdout, or why it failed.
fn run_child(
    name: &'static str,
    cmd: &mut std::process::Command,
    edge: &mut dyn FnMut(),
) -> Result<Vec<u8>, LoadError> {
    edge();
    let out = cmd.output();
    edge();
    let out = out.map_err(|source| LoadError::Spawn { name, source })?;
    if !out.status.success() {
        return Err(LoadError::Failed {
            name,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_wrk_cannot_send_is_refused_before_anything_runs() {
        let routes: Vec<Route> = vec![Route::get_root(), "POST:/user".parse().unwrap()];
        let e = choose(
            DriverChoice::Wrk,
            Path::new("."),
            &routes,
            &[LoadModel::KeepAlive],
        )
        .err()
        .expect("refused");
        assert!(
            matches!(&e, LoadError::WrkGetOnly(r) if r.method == "POST"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "--driver wrk sends GET only: route POST:/user needs --driver rxload"
        );
        assert_eq!(
            choose(
                DriverChoice::Rxload,
                Path::new("."),
                &routes,
                &LoadModel::CLOSED
            )
            .unwrap()
            .name(),
            "rxload"
        );
    }

    #[test]
    fn a_load_model_a_driver_cannot_drive_is_refused_before_anything_runs() {
        if std::process::Command::new("wrk")
            .arg("-v")
            .output()
            .is_err()
        {
            // Under RXBENCH_REQUIRE_WRK (.ci/run installs Debian's wrk and sets it) a missing
            // wrk fails the test; otherwise the skip is said on the real stderr.
            assert!(
                std::env::var_os("RXBENCH_REQUIRE_WRK").is_none(),
                "RXBENCH_REQUIRE_WRK is set but wrk is not installed"
            );
            let line = "SKIPPED a_load_model_a_driver_cannot_drive_is_refused_before_anything_runs: wrk is not installed\n";
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return;
        }
        let e = choose(
            DriverChoice::Wrk,
            Path::new("."),
            &[Route::get_root()],
            &LoadModel::CLOSED,
        )
        .err()
        .expect("refused");
        assert_eq!(
            e.to_string(),
            "--driver wrk cannot drive --load per-request: use --driver rxload"
        );
    }
}

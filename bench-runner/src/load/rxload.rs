//! rxload in this process: the saturating driver (io_uring, many connections' I/O per
//! syscall), with a warm-up and its window's edges reported exactly.

use driver::report::Report;

use super::{Load, LoadDriver, LoadError, Setup};

pub struct Rxload;

impl LoadDriver for Rxload {
    fn name(&self) -> &'static str {
        "rxload"
    }

    fn drive(
        &self,
        load: &Load,
        setup: &Setup,
        edge: &mut dyn FnMut(),
    ) -> Result<Report, LoadError> {
        Ok(driver::run_observed(
            &options(load, setup)?,
            setup.abort.clone(),
            |n| eprintln!("rxload: {n}"),
            |_| edge(),
        )?)
    }

    /// Both loads' threads at once, each load with the threads it would have alone (on the
    /// same load CPUs: the driver's core then serves both, as it serves one server's
    /// connections alone).
    fn drive_duet(
        &self,
        loads: [&Load; 2],
        setup: &Setup,
        edge: &mut dyn FnMut(),
    ) -> Result<[Report; 2], LoadError> {
        let opts = [options(loads[0], setup)?, options(loads[1], setup)?];
        let reports = driver::run_together(
            &opts,
            setup.abort.clone(),
            |n| eprintln!("rxload: {n}"),
            |_| edge(),
        )?;
        let [a, b]: [Report; 2] = reports.try_into().map_err(|_| LoadError::Failed {
            name: "rxload",
            stderr: "a duet gave other than two reports".into(),
        })?;
        Ok([a, b])
    }
}

/// What rxload is told for `load`.
fn options(load: &Load, setup: &Setup) -> Result<driver::Options, LoadError> {
    let target = driver::target::Url::parse(load.url)?;
    let mut opts = driver::Options::new(target);
    opts.routes = vec![load.route.clone()];
    opts.threads = load.threads(setup);
    opts.connections = load.conns as usize;
    opts.duration = setup.slice;
    opts.warmup = setup.warmup;
    opts.connection = load.model.conn_mode();
    opts.rate = load.rate;
    Ok(opts)
}

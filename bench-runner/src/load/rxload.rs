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
        let target = driver::target::Url::parse(load.url)?;
        let mut opts = driver::Options::new(target);
        opts.routes = vec![load.route.clone()];
        opts.threads = load.threads(setup);
        opts.connections = load.conns as usize;
        opts.duration = setup.slice;
        opts.warmup = setup.warmup;
        opts.connection = load.model.conn_mode();
        opts.rate = load.rate;
        Ok(driver::run_observed(
            &opts,
            setup.abort.clone(),
            |n| eprintln!("rxload: {n}"),
            |_| edge(),
        )?)
    }
}

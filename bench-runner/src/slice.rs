//! One measured slice: the server alive, the driver's window, and the server read at that
//! window's edges — its CPU time first (the precise edge), then a counters snapshot.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::load::{Load, LoadDriver, LoadError, Setup};
use crate::model::{Failure, FailureKind, Raw, Slice};
use crate::plan::{Cell, Plan};
use crate::pool::{Pool, PoolError};

/// How long a slice waits for each counters snapshot line after the window.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(3);

/// Why a slice has no figure. Recorded in raw.json as a [`Failure`] of [`SliceError::kind`].
#[derive(Debug, thiserror::Error)]
pub enum SliceError {
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("the driver stopped before its window ended")]
    WindowOpen,
    #[error("no counters snapshot from the server; its log:\n{log}")]
    NoCounters { log: String },
    #[error("the server's CPU time could not be read")]
    NoServerCpu,
    #[error("no request completed; server log:\n{log}")]
    NoRequests { log: String },
    #[error("no keep-alive req/s measured for this level and route yet: an open-loop slice has no rate to offer")]
    NoCapacity,
    #[error("interrupted")]
    Interrupted,
    #[error("the server exited during the slice; its last lines:\n{log}")]
    ServerExited { log: String },
    #[error("netfilter's connection-tracking table refused {dropped} connections during the slice (full: its entries outlive each closed connection by nf_conntrack_tcp_timeout_time_wait), so connects stalled on it; exempt loopback from tracking (docs/methodology.md, \"A connection per request\")")]
    Conntrack { dropped: u64 },
}

impl SliceError {
    pub fn kind(&self) -> FailureKind {
        match self {
            SliceError::Pool(e) => e.kind(),
            SliceError::Load(_) | SliceError::WindowOpen => FailureKind::Driver,
            SliceError::NoCounters { .. } => FailureKind::NoCounters,
            SliceError::NoServerCpu => FailureKind::NoServerCpu,
            SliceError::NoRequests { .. } => FailureKind::NoRequests,
            SliceError::NoCapacity => FailureKind::NoCapacity,
            SliceError::Interrupted => FailureKind::Interrupted,
            SliceError::ServerExited { .. } => FailureKind::ServerExited,
            SliceError::Conntrack { .. } => FailureKind::Conntrack,
        }
    }
}

impl From<SliceError> for Failure {
    fn from(e: SliceError) -> Failure {
        Failure::new(e.kind(), e)
    }
}

/// What one driver run gave, with the server's readings at the window's edges.
pub struct Window {
    pub report: driver::report::Report,
    pub start: Instant,
    pub end: Instant,
    pub cpu_start: Option<u64>,
    pub cpu_end: Option<u64>,
    /// The snapshot lines asked for at the edges (`None`: a server without counters).
    pub snapshot_start: Option<u64>,
    pub snapshot_end: Option<u64>,
}

/// Drives server `i` once with `load`, reading it at the window's edges.
pub async fn drive<E: Engine>(
    pool: &mut Pool<'_, E>,
    i: usize,
    driver: &dyn LoadDriver,
    setup: &Setup,
    load: &Load<'_>,
) -> Result<Window, SliceError> {
    let engine = pool.engine;
    let key = pool.specs[i].key.clone();
    let server = pool.get_mut(i).ok_or(PoolError::NotRunning(key))?;
    let handle = tokio::runtime::Handle::current();
    let mut edges: Vec<(Instant, Option<u64>, Option<u64>)> = Vec::with_capacity(2);
    let report = tokio::task::block_in_place(|| {
        driver.drive(load, setup, &mut || {
            let cpu = handle.block_on(engine.cpu_ns(&server.handle));
            let at = Instant::now();
            let seq = handle.block_on(server.request_snapshot(engine));
            edges.push((at, cpu, seq));
        })
    })?;
    let [(start, cpu_start, snapshot_start), (end, cpu_end, snapshot_end)] = edges[..] else {
        return Err(SliceError::WindowOpen);
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

/// One slice of `cell`: the server alive (restarted once if it died), the driver's window,
/// the server's CPU time and counters over exactly that window.
#[allow(clippy::too_many_arguments)]
pub async fn measure<E: Engine>(
    pool: &mut Pool<'_, E>,
    plan: &Plan,
    driver: &dyn LoadDriver,
    setup: &Setup,
    (round, position): (u32, u32),
    cell: Cell,
    t0: Instant,
    raw: &mut Raw,
) -> Slice {
    let i = cell.server;
    let route = plan.routes[cell.route].clone();
    let mut slice = Slice {
        round,
        position,
        server: pool.specs[i].key.clone(),
        instance: pool.specs[i].instance,
        launch: pool.launch(),
        load: cell.load,
        conns: cell.conns,
        route: route.clone(),
        at_s: t0.elapsed().as_secs_f64(),
        window_s: 0.0,
        report: None,
        server_cpu_ns: None,
        counters: None,
        steal: None,
        error: None,
    };
    if let Err(e) = pool.ensure_alive(i, raw).await {
        slice.error = Some(SliceError::from(e).into());
        return slice;
    }
    let url = match pool.url(i, &route).await {
        Ok(url) => url,
        Err(e) => {
            slice.error = Some(SliceError::from(e).into());
            return slice;
        }
    };
    let rate = crate::offered::rate(
        raw,
        cell.load,
        &slice.server,
        cell.conns,
        &route.to_string(),
    );
    if cell.load.offered().is_some() && rate.is_none() {
        slice.error = Some(SliceError::NoCapacity.into());
        return slice;
    }
    let load = Load {
        url: &url,
        route: &route,
        model: cell.load,
        conns: cell.conns,
        rate,
    };
    let refused_before = driver::conntrack::drops();
    let steal_before = crate::steal::now();
    let outcome = drive(pool, i, driver, setup, &load).await;
    slice.steal = crate::steal::between(
        &steal_before,
        &crate::steal::now(),
        &raw.settings.server_cpus,
        &raw.settings.load_cpus,
    );
    let refused = match (refused_before, driver::conntrack::drops()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    let foreign = pool.specs[i].foreign.is_some();
    let server = pool.get_mut(i).expect("alive");
    let mut error = None;
    match outcome {
        Ok(w) => {
            slice.at_s = w.start.duration_since(t0).as_secs_f64();
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
            // The later checks name the more basic cause, so they win.
            if slice.counters.is_none() && !foreign {
                error = Some(SliceError::NoCounters {
                    log: server.tail(5),
                });
            }
            if slice.server_cpu_ns.is_none() {
                error = Some(SliceError::NoServerCpu);
            }
            if w.report.requests == 0 {
                error = Some(SliceError::NoRequests {
                    log: server.tail(5),
                });
            }
            // Whatever else it says, the slice measured stalled connects.
            if refused > 0 {
                error = Some(SliceError::Conntrack { dropped: refused });
            }
            slice.report = Some(w.report);
        }
        Err(e) => error = Some(e),
    }
    if setup.abort.load(Ordering::Relaxed) && error.is_none() {
        error = Some(SliceError::Interrupted);
    }
    if !pool.alive(i) {
        let log = pool.get_mut(i).map(|s| s.tail(10)).unwrap_or_default();
        error = Some(SliceError::ServerExited { log });
    }
    slice.error = error.map(Failure::from);
    slice
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Profile, ServerConfig, ServerKey, Subject};

    #[test]
    fn a_slice_error_is_recorded_with_its_kind_and_its_whole_text() {
        let f = Failure::from(SliceError::NoRequests {
            log: "server log line".into(),
        });
        assert_eq!(f.kind(), Some(FailureKind::NoRequests));
        assert_eq!(f.headline(), "no request completed; server log:");
        assert!(f.detail().ends_with("\nserver log line"), "{f}");

        // A pool error keeps the pool's kind: a down server is not a driver failure.
        let key = ServerKey {
            profile: Profile::Relaxed,
            config: Subject::Own(ServerConfig::Rx),
        };
        let down = Failure::from(SliceError::from(PoolError::Down {
            key,
            starts: 2,
            last: "exited".into(),
        }));
        assert_eq!(down.kind(), Some(FailureKind::ServerDown));
        assert!(down.detail().contains("down after 2 starts"), "{down}");
    }
}

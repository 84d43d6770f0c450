//! One measured slice: the server alive, the driver's window, and the server read at that
//! window's edges — its CPU time first (the precise edge), then a counters snapshot.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::load::{Load, LoadDriver, LoadError, Setup};
use crate::model::{CpuSplit, Failure, FailureKind, Partner, Raw, Slice};
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
    /// The user and kernel time over the window (none: not split).
    pub split: Option<CpuSplit>,
    /// The snapshot lines asked for at the edges (`None`: a server without counters).
    pub snapshot_start: Option<u64>,
    pub snapshot_end: Option<u64>,
}

/// One server's readings at one edge.
#[derive(Clone, Copy, Debug)]
struct Reading {
    /// When its CPU clock was read.
    at: Instant,
    cpu: Option<u64>,
    /// Its user and kernel time, read right after the clock (where the source splits it).
    split: Option<CpuSplit>,
    /// The snapshot line asked for.
    snapshot: Option<u64>,
}

/// Reads `servers` at one edge of a window: every CPU clock first, back to back, then every
/// counters snapshot. `clock` reads a server's CPU time (a cgroup file: microseconds);
/// `snapshot` asks it for a counters line (under Docker an API call: milliseconds). Clocks go
/// first and in the same order at both edges, so every server's CPU window is the driver's,
/// shifted by the microseconds of the clocks read before its own. A snapshot read between two
/// clocks would lengthen one server's window by the other's API call and shorten the other's
/// by as much (results/20261205T160647Z: the first server of every duet was charged 2-4 %
/// more CPU per request than its identical partner).
/// A server's CPU clock as one edge reads it: the total, then the split.
type Clock = (Option<u64>, Option<CpuSplit>);

fn read_edge<T, const N: usize>(
    servers: &mut [T; N],
    mut clock: impl FnMut(&T) -> Clock,
    mut snapshot: impl FnMut(&mut T) -> Option<u64>,
) -> [Reading; N] {
    let clocks: [(Instant, Clock); N] = std::array::from_fn(|k| {
        let cpu = clock(&servers[k]);
        (Instant::now(), cpu)
    });
    std::array::from_fn(|k| Reading {
        at: clocks[k].0,
        cpu: clocks[k].1 .0,
        split: clocks[k].1 .1,
        snapshot: snapshot(&mut servers[k]),
    })
}

/// Reads `servers` at one edge of the window, in [`read_edge`]'s order.
fn read<E: Engine, const N: usize>(
    engine: &E,
    handle: &tokio::runtime::Handle,
    mut servers: [&mut crate::pool::Server<E::Handle>; N],
) -> [Reading; N] {
    read_edge(
        &mut servers,
        |s| {
            handle.block_on(async {
                (
                    engine.cpu_ns(&s.handle).await,
                    engine.cpu_split(&s.handle).await,
                )
            })
        },
        |s| handle.block_on(s.request_snapshot(engine)),
    )
}

fn window(report: driver::report::Report, edges: &[Reading]) -> Result<Window, SliceError> {
    let [start, end] = edges[..] else {
        return Err(SliceError::WindowOpen);
    };
    Ok(Window {
        report,
        start: start.at,
        end: end.at,
        cpu_start: start.cpu,
        cpu_end: end.cpu,
        split: end.split.zip(start.split).and_then(|(b, a)| b.since(a)),
        snapshot_start: start.snapshot,
        snapshot_end: end.snapshot,
    })
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
    let mut edges = Vec::with_capacity(2);
    let report = tokio::task::block_in_place(|| {
        driver.drive(load, setup, &mut || {
            edges.extend(read(engine, &handle, [&mut *server]))
        })
    })?;
    window(report, &edges)
}

/// Drives servers `a` and `b` at once (a duet), reading both at the window's edges (both
/// clocks before either snapshot: [`read_edge`]).
async fn drive_duet<E: Engine>(
    pool: &mut Pool<'_, E>,
    (a, b): (usize, usize),
    driver: &dyn LoadDriver,
    setup: &Setup,
    loads: [&Load<'_>; 2],
) -> Result<[Window; 2], SliceError> {
    let engine = pool.engine;
    let key = pool.specs[b].key.clone();
    let (sa, sb) = pool.get_two_mut(a, b).ok_or(PoolError::NotRunning(key))?;
    let handle = tokio::runtime::Handle::current();
    let (mut ea, mut eb) = (Vec::with_capacity(2), Vec::with_capacity(2));
    let [ra, rb] = tokio::task::block_in_place(|| {
        driver.drive_duet(loads, setup, &mut || {
            let [ra, rb] = read(engine, &handle, [&mut *sa, &mut *sb]);
            ea.push(ra);
            eb.push(rb);
        })
    })?;
    Ok([window(ra, &ea)?, window(rb, &eb)?])
}

/// A slice's record before it is driven.
fn blank<E: Engine>(
    pool: &Pool<'_, E>,
    plan: &Plan,
    (round, position): (u32, u32),
    (i, cell): (usize, Cell),
    t0: Instant,
) -> Slice {
    Slice {
        round,
        position,
        server: pool.specs[i].key.clone(),
        instance: pool.specs[i].instance,
        launch: pool.launch(),
        duet: None,
        load: cell.load,
        conns: cell.conns,
        route: plan.routes[cell.route].clone(),
        at_s: t0.elapsed().as_secs_f64(),
        window_s: 0.0,
        report: None,
        server_cpu_ns: None,
        server_cpu_split: None,
        counters: None,
        steal: None,
        error: None,
    }
}

/// Server `i` alive (restarted once if it died) and its URL for the cell's route, with the
/// rate an open-loop cell offers it.
async fn prepare<E: Engine>(
    pool: &mut Pool<'_, E>,
    i: usize,
    cell: Cell,
    slice: &Slice,
    raw: &mut Raw,
) -> Result<(String, Option<f64>), SliceError> {
    pool.ensure_alive(i, raw).await?;
    let url = pool.url(i, &slice.route).await?;
    let rate = crate::offered::rate(
        raw,
        cell.load,
        &slice.server,
        cell.conns,
        &slice.route.to_string(),
    );
    if cell.load.offered().is_some() && rate.is_none() {
        return Err(SliceError::NoCapacity);
    }
    Ok((url, rate))
}

/// What the host and netfilter did around a window: steal and refused connects.
struct Around {
    steal: std::collections::BTreeMap<usize, f64>,
    refused: Option<u64>,
}

impl Around {
    fn before() -> Around {
        Around {
            refused: driver::conntrack::drops(),
            steal: crate::steal::now(),
        }
    }

    /// Into `slice`: the steal since; the connects refused since.
    fn after(&self, raw: &Raw, slice: &mut Slice) -> u64 {
        slice.steal = crate::steal::between(
            &self.steal,
            &crate::steal::now(),
            &raw.settings.server_cpus,
            &raw.settings.load_cpus,
        );
        match (self.refused, driver::conntrack::drops()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
    }
}

/// The window's readings into `slice`, and what they say went wrong.
async fn finish<E: Engine>(
    pool: &mut Pool<'_, E>,
    i: usize,
    outcome: Result<Window, SliceError>,
    refused: u64,
    setup: &Setup,
    t0: Instant,
    slice: &mut Slice,
) {
    let foreign = pool.specs[i].foreign.is_some();
    let mut error = None;
    match (outcome, pool.get_mut(i)) {
        (Ok(w), Some(server)) => {
            slice.at_s = w.start.duration_since(t0).as_secs_f64();
            slice.window_s = w.end.duration_since(w.start).as_secs_f64();
            slice.server_cpu_ns = match (w.cpu_start, w.cpu_end) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            };
            slice.server_cpu_split = w.split;
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
        (Ok(_), None) => error = Some(PoolError::NotRunning(slice.server.clone()).into()),
        (Err(e), _) => error = Some(e),
    }
    if setup.abort.load(Ordering::Relaxed) && error.is_none() {
        error = Some(SliceError::Interrupted);
    }
    if !pool.alive(i) {
        let log = pool.get_mut(i).map(|s| s.tail(10)).unwrap_or_default();
        error = Some(SliceError::ServerExited { log });
    }
    slice.error = error.map(Failure::from);
}

/// One slice of `cell`: the server alive (restarted once if it died), the driver's window,
/// the server's CPU time and counters over exactly that window.
#[allow(clippy::too_many_arguments)]
pub async fn measure<E: Engine>(
    pool: &mut Pool<'_, E>,
    plan: &Plan,
    driver: &dyn LoadDriver,
    setup: &Setup,
    at: (u32, u32),
    cell: Cell,
    t0: Instant,
    raw: &mut Raw,
) -> Slice {
    let i = cell.server;
    let mut slice = blank(pool, plan, at, (i, cell), t0);
    let (url, rate) = match prepare(pool, i, cell, &slice, raw).await {
        Ok(p) => p,
        Err(e) => {
            slice.error = Some(e.into());
            return slice;
        }
    };
    let load = Load {
        url: &url,
        route: &slice.route.clone(),
        model: cell.load,
        conns: cell.conns,
        rate,
    };
    let around = Around::before();
    let outcome = drive(pool, i, driver, setup, &load).await;
    let refused = around.after(raw, &mut slice);
    finish(pool, i, outcome, refused, setup, t0, &mut slice).await;
    slice
}

/// A duet of `cell` (`--pairing duet`): its server and its partner driven at once over one
/// window, each read at its edges — two slices, each naming the other. Where either cannot
/// be driven, both slices fail with that cause (a duet's value is the pair's).
#[allow(clippy::too_many_arguments)]
pub async fn measure_duet<E: Engine>(
    pool: &mut Pool<'_, E>,
    plan: &Plan,
    driver: &dyn LoadDriver,
    setup: &Setup,
    at: (u32, u32),
    cell: Cell,
    t0: Instant,
    raw: &mut Raw,
) -> [Slice; 2] {
    let partner = cell.partner.expect("a duet cell names its partner");
    let ids = [cell.server, partner];
    let mut slices = ids.map(|i| blank(pool, plan, at, (i, cell), t0));
    slices[0].duet = Some(Partner::of(&slices[1]));
    slices[1].duet = Some(Partner::of(&slices[0]));
    let mut prepared = Vec::with_capacity(2);
    for (k, &i) in ids.iter().enumerate() {
        match prepare(pool, i, cell, &slices[k], raw).await {
            Ok(p) => prepared.push(p),
            Err(e) => return fail_both(slices, e.into()),
        }
    }
    let route = slices[0].route.clone();
    let loads = [0, 1].map(|k| Load {
        url: &prepared[k].0,
        route: &route,
        model: cell.load,
        conns: cell.conns,
        rate: prepared[k].1,
    });
    let around = Around::before();
    let outcome = drive_duet(
        pool,
        (ids[0], ids[1]),
        driver,
        setup,
        [&loads[0], &loads[1]],
    )
    .await;
    let refused = around.after(raw, &mut slices[0]);
    slices[1].steal = slices[0].steal.clone();
    let outcomes: [Result<Window, SliceError>; 2] = match outcome {
        Ok([a, b]) => [Ok(a), Ok(b)],
        Err(e) => return fail_both(slices, e.into()),
    };
    for ((k, w), &i) in outcomes.into_iter().enumerate().zip(&ids) {
        finish(pool, i, w, refused, setup, t0, &mut slices[k]).await;
    }
    // A duet's value is the pair's: one side failed, the other's figure pairs with nothing.
    match slices.iter().find_map(|s| s.error.clone()) {
        Some(e) => fail_both(slices, e),
        None => slices,
    }
}

/// Both slices of a duet marked with `failure`, where a slice has no cause of its own.
fn fail_both(mut slices: [Slice; 2], failure: Failure) -> [Slice; 2] {
    for s in &mut slices {
        s.error.get_or_insert_with(|| failure.clone());
    }
    slices
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Profile, ServerConfig, ServerKey, Subject};

    #[test]
    fn an_edge_reads_every_clock_before_any_snapshot_in_one_order() {
        // Two servers that log what was read of them, in order.
        let log = std::cell::RefCell::new(Vec::new());
        let mut servers = ["a", "b"];
        for _edge in 0..2 {
            let readings = read_edge(
                &mut servers,
                |s| {
                    log.borrow_mut().push(format!("clock {s}"));
                    (Some(1), None)
                },
                |s| {
                    log.borrow_mut().push(format!("snapshot {s}"));
                    Some(2)
                },
            );
            assert!(readings
                .iter()
                .all(|r| (r.cpu, r.snapshot) == (Some(1), Some(2))));
            // Each reading is timed at its clock: `a`'s before `b`'s.
            assert!(readings[0].at <= readings[1].at);
        }
        let edge = ["clock a", "clock b", "snapshot a", "snapshot b"];
        assert_eq!(*log.borrow(), [edge, edge].concat());
    }

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

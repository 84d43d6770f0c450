//! rxload: a wrk-compatible, closed-loop HTTP/1.1 load generator on the rxbench reactor.
//!
//! Its engines are the reactor's backends: `io_uring` batches every connection's sends and
//! receives of a loop turn into one `io_uring_enter`; `epoll` (edge-triggered, registered once)
//! is the fallback. Results use one schema ([`report::Report`]) whatever produced them, print in
//! wrk's layout, and [`report::parse_wrk_text`] reads real wrk's report into the same schema.

pub mod conntrack;
#[cfg(feature = "goose")]
pub mod goose_engine;
pub mod load;
pub mod notrack;
pub mod ports;
pub mod report;
pub mod response;
pub mod target;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reactor::{BackendChoice, IoUringStatus};

use crate::load::{new_histogram, ThreadPlan};
use crate::report::{Errors, Latency, RateStats, Report};
use crate::target::{Route, Url};

/// How connections carry requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnMode {
    /// Each connection carries request after request (wrk's model).
    #[default]
    KeepAlive,
    /// Each request on a fresh connection: connect, send with `Connection: close`, read the
    /// response, close from the client's side whatever the server answered (oha's
    /// `--disable-keepalive`). The connect is inside the request's latency.
    PerRequest,
}

/// Everything a run needs, already validated.
#[derive(Debug, Clone)]
pub struct Options {
    pub url: Url,
    pub threads: usize,
    pub connections: usize,
    pub duration: Duration,
    /// Load before recording starts (connections open, caches warm); not in the results.
    pub warmup: Duration,
    pub timeout: Duration,
    pub headers: Vec<String>,
    pub routes: Vec<Route>,
    pub body: Vec<u8>,
    pub backend: BackendChoice,
    /// io_uring: one multishot receive per connection (see `reactor::Config::recv_multishot`)
    /// instead of one receive SQE per response.
    pub recv_multishot: bool,
    /// io_uring: a loop turn sleeps until half the outstanding responses are in, or this long
    /// has passed and at least one is (kernel 6.12+). Zero: wake for every completion. The
    /// batching delay is inside the measured latency (docs/methodology.md).
    pub batch_wait: Duration,
    /// Stop after this many complete responses in all (no warm-up allowed then), or at the
    /// end of `duration`, whichever comes first.
    pub max_requests: Option<u64>,
    pub connection: ConnMode,
    /// Open loop: this many requests a second in all, each connection's due on a fixed
    /// schedule, latency counted from the due time (`None`: closed loop).
    pub rate: Option<f64>,
    /// Open loop: a request already staler than this is shed (counted, never sent).
    pub deadline: Option<Duration>,
}

impl Options {
    pub const DEFAULT_THREADS: usize = 2;
    pub const DEFAULT_CONNECTIONS: usize = 10;
    pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
    /// See [`Options::batch_wait`]: 100 µs halved the driver's wake-ups per request at no cost
    /// in throughput here (docs/methodology.md).
    pub const DEFAULT_BATCH_WAIT_US: u32 = 100;

    /// The defaults every user of the driver starts from (rxload's command line and the
    /// runner alike): GET of the URL's path, io_uring where it can be set up (epoll
    /// otherwise), multishot receives, batched waits, no warm-up.
    pub fn new(url: Url) -> Options {
        Options {
            routes: vec![Route {
                method: "GET".into(),
                path: url.path.clone(),
            }],
            url,
            threads: Self::DEFAULT_THREADS,
            connections: Self::DEFAULT_CONNECTIONS,
            duration: Self::DEFAULT_DURATION,
            warmup: Duration::ZERO,
            timeout: Self::DEFAULT_TIMEOUT,
            headers: vec![],
            body: vec![],
            backend: BackendChoice::Auto,
            recv_multishot: reactor::Config::default().recv_multishot,
            batch_wait: Duration::from_micros(Self::DEFAULT_BATCH_WAIT_US.into()),
            max_requests: None,
            connection: ConnMode::KeepAlive,
            rate: None,
            deadline: None,
        }
    }
}

/// The edges of the measured window, as [`run_observed`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// The warm-up is over: from now on responses are recorded.
    Start,
    /// The duration is over: responses after this are not recorded.
    End,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("connections ({connections}) must be at least threads ({threads})")]
    TooFewConnections { connections: usize, threads: usize },
    #[error("cannot connect to {addr}: {error}")]
    Connect {
        addr: std::net::SocketAddr,
        error: std::io::Error,
    },
    #[error(transparent)]
    Ports(#[from] ports::PortsError),
    #[error(transparent)]
    Conntrack(#[from] conntrack::ConntrackError),
    #[error("{0}")]
    Invalid(&'static str),
    #[error("{0}")]
    Engine(String),
}

/// Runs the load and returns the merged report. `note` receives one-line remarks for the user
/// (such as an io_uring fallback).
pub fn run(
    opts: &Options,
    abort: Arc<AtomicBool>,
    note: impl FnMut(&str),
) -> Result<Report, RunError> {
    run_observed(opts, abort, note, |_| {})
}

/// [`run`], calling `on_edge` at the start and the end of the measured window (from the
/// calling thread, which only sleeps while the load threads run), so that a measurer can read
/// the server's counters over exactly that window. A run stopped by `max_requests` reports
/// no `End`.
pub fn run_observed(
    opts: &Options,
    abort: Arc<AtomicBool>,
    note: impl FnMut(&str),
    on_edge: impl FnMut(Edge),
) -> Result<Report, RunError> {
    let mut reports = run_together(std::slice::from_ref(opts), abort, note, on_edge)?;
    Ok(reports.remove(0))
}

/// Several loads at once — a duet: two servers driven over the same window, each by its own
/// threads and connections — with one pair of edges for all of them, so that a measurer
/// reads every server over the same window and whatever the host does in it falls on each
/// (Bulej et al., ICPE 2020). The window (warm-up and duration) is the first load's; each
/// report is that load's alone, except `driver_cpu_s`, which is the whole driver's. One
/// load: [`run_observed`].
pub fn run_together(
    loads: &[Options],
    abort: Arc<AtomicBool>,
    mut note: impl FnMut(&str),
    mut on_edge: impl FnMut(Edge),
) -> Result<Vec<Report>, RunError> {
    let Some(first) = loads.first() else {
        return Err(RunError::Invalid("no load to run"));
    };
    if loads.len() > 1
        && loads.iter().any(|o| {
            o.warmup != first.warmup || o.duration != first.duration || o.max_requests.is_some()
        })
    {
        return Err(RunError::Invalid(
            "loads run together share one window: the same warm-up and duration, no --requests",
        ));
    }
    for opts in loads {
        preflight(opts)?;
    }
    let start = Instant::now();
    let measure_from = start + first.warmup;
    let until = measure_from + first.duration;
    let mut groups = Vec::new();
    for (n, opts) in loads.iter().enumerate() {
        let at = Together { n, of: loads.len() };
        groups.push(spawn(opts, at, start, measure_from, until, &abort)?);
    }
    sleep_until(measure_from, &abort);
    on_edge(Edge::Start);
    let cpu_start = cpu_seconds();
    // A timed run is measured up to its end; a counted run up to when its threads finish.
    let mut cpu = None;
    if first.max_requests.is_none() {
        sleep_until(until, &abort);
        cpu = Some(cpu_seconds() - cpu_start);
        on_edge(Edge::End);
    }
    let mut results = Vec::new();
    for handles in groups {
        let mut group = Vec::new();
        for h in handles {
            let result = h
                .join()
                .map_err(|_| RunError::Engine("a load thread panicked".into()))?;
            group.push(result.map_err(RunError::Engine)?);
        }
        results.push(group);
    }
    let cpu = cpu.unwrap_or_else(|| cpu_seconds() - cpu_start);
    let elapsed = Instant::now()
        .min(until)
        .saturating_duration_since(measure_from);
    Ok(loads
        .iter()
        .zip(results)
        .map(|(opts, results)| merge(opts, &results, cpu, elapsed, &mut note))
        .collect())
}

/// Load `n` of the `of` loads run together.
#[derive(Clone, Copy)]
struct Together {
    n: usize,
    of: usize,
}

/// The phase of open-loop thread `thread` of `threads` in load `at.n`: the first due times of
/// all connections of all threads spread evenly over one interval, and those of the loads run
/// together interleaved evenly between them. Loads on one origin and one schedule would have
/// every request of one server due at the instant the other's is — whichever thread the
/// driver's CPU ran first would reach its server first, every time, for the whole run (an
/// identical pair of duets in open loop held a steady ±0.4–1.1 % apart in
/// results/20261206T021929Z); interleaved, each server's requests fall midway between the
/// other's.
fn open_phase(thread: usize, threads: usize, at: Together) -> f64 {
    (thread as f64 + at.n as f64 / at.of.max(1) as f64) / threads.max(1) as f64
}

/// Starts load `at.n`'s threads (named `rxload-{n}.{t}` beside other loads, `rxload-{t}`
/// alone).
fn spawn(
    opts: &Options,
    at: Together,
    start: Instant,
    measure_from: Instant,
    until: Instant,
    abort: &Arc<AtomicBool>,
) -> Result<Vec<std::thread::JoinHandle<Result<load::ThreadResult, String>>>, RunError> {
    let requests = Arc::new(target::render_requests(
        &opts.url,
        &opts.routes,
        &opts.headers,
        &opts.body,
        opts.connection == ConnMode::PerRequest,
    ));
    let interval = opts
        .rate
        .map(|rate| Duration::from_secs_f64(opts.connections as f64 / rate));
    let mut handles = Vec::new();
    for t in 0..opts.threads {
        let share =
            opts.connections / opts.threads + usize::from(t < opts.connections % opts.threads);
        let plan = ThreadPlan {
            addr: opts.url.addr,
            requests: requests.clone(),
            connections: share,
            measure_from,
            until,
            timeout: opts.timeout,
            backend: opts.backend,
            recv_multishot: opts.recv_multishot,
            // An open loop's timestamps must not wait for a batch.
            batch_wait: if interval.is_some() {
                Duration::ZERO
            } else {
                opts.batch_wait
            },
            abort: abort.clone(),
            route_offset: t,
            connection: opts.connection,
            open: interval.map(|interval| load::OpenLoop {
                origin: start,
                interval,
                phase: open_phase(t, opts.threads, at),
                deadline: opts.deadline,
            }),
            max_requests: opts
                .max_requests
                .map(|n| n / opts.threads as u64 + u64::from((t as u64) < n % opts.threads as u64)),
        };
        let name = if at.n == 0 {
            format!("rxload-{t}")
        } else {
            format!("rxload-{}.{t}", at.n)
        };
        handles.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || load::run_thread(plan))
                .map_err(|e| RunError::Engine(e.to_string()))?,
        );
    }
    Ok(handles)
}

/// One load's threads' results as one report.
fn merge(
    opts: &Options,
    results: &[load::ThreadResult],
    cpu: f64,
    elapsed: Duration,
    note: &mut impl FnMut(&str),
) -> Report {
    let backend = results[0].backend;
    if let IoUringStatus::Unavailable(errno) = backend.io_uring {
        note(&format!(
            "io_uring unavailable ({}); using {}",
            errno.name(),
            backend.backend()
        ));
    }
    // An open loop never batches its waits (they would delay its stamps): nothing to say.
    let batching = !opts.batch_wait.is_zero() && opts.rate.is_none();
    if backend.epoll_mode.is_none() && batching && !results[0].batches_waits {
        note("this kernel has no io_uring min-wait (6.12+): one wake-up per completion");
    }

    let mut latency = new_histogram();
    let (mut uncorrected, mut send_lag) = (new_histogram(), new_histogram());
    let mut rates = Vec::new();
    let (mut requests_done, mut bytes, mut reconnects) = (0, 0, 0);
    let mut closes = report::Closes::default();
    let mut errors = Errors::default();
    let mut syscalls: BTreeMap<String, u64> = BTreeMap::new();
    for r in results {
        latency.add(&r.latency).expect("same bounds");
        uncorrected.add(&r.uncorrected).expect("same bounds");
        send_lag.add(&r.send_lag).expect("same bounds");
        rates.extend_from_slice(&r.rate_samples);
        requests_done += r.requests;
        bytes += r.bytes;
        reconnects += r.reconnects;
        closes.opened += r.closes.opened;
        closes.server += r.closes.server;
        closes.client += r.closes.client;
        errors.connect += r.errors.connect;
        errors.read += r.errors.read;
        errors.write += r.errors.write;
        errors.timeout += r.errors.timeout;
        errors.status += r.errors.status;
        errors.deadline += r.errors.deadline;
        for (name, n) in r.syscalls.since(&r.syscalls_at_start).iter() {
            *syscalls.entry(name.to_string()).or_default() += n;
        }
    }
    syscalls.retain(|_, n| *n > 0);
    let secs = elapsed.as_secs_f64().max(1e-9);
    Report {
        url: opts.url.text.clone(),
        engine: backend.backend().to_string(),
        io_uring: Some(backend.io_uring().to_string()),
        threads: opts.threads as u64,
        connections: opts.connections as u64,
        duration_s: opts.duration.as_secs_f64(),
        requests: requests_done,
        elapsed_s: secs,
        bytes_read: bytes,
        requests_per_s: requests_done as f64 / secs,
        transfer_per_s: bytes as f64 / secs,
        latency: latency_stats(&latency),
        req_per_thread: rate_stats(&rates),
        errors,
        reconnects: Some(reconnects),
        driver_cpu_s: Some(cpu),
        driver_syscalls: Some(syscalls),
        latency_buckets: Some(report::LatencyBuckets::from_histogram(&latency)),
        closes: (opts.connection == ConnMode::PerRequest).then_some(closes),
        open_loop: opts.rate.map(|target_rps| {
            let lag = send_lag.value_at_quantile(0.99) as f64;
            report::OpenLoop {
                target_rps,
                deadline_s: opts.deadline.map(|d| d.as_secs_f64()),
                uncorrected: latency_stats(&uncorrected),
                send_lag_p99_us: lag,
                behind: lag > report::OpenLoop::BEHIND_US,
            }
        }),
    }
}

/// Checks that apply to every engine: connection count, and a server that answers at all.
fn preflight(opts: &Options) -> Result<(), RunError> {
    if opts.connections == 0 || opts.connections < opts.threads {
        return Err(RunError::TooFewConnections {
            connections: opts.connections,
            threads: opts.threads,
        });
    }
    match (opts.rate, opts.deadline, opts.connection) {
        (Some(r), _, _) if !(r.is_finite() && r > 0.0) => {
            return Err(RunError::Invalid(
                "--rate must be a positive number of requests a second",
            ))
        }
        (None, Some(_), _) => {
            return Err(RunError::Invalid(
                "--deadline needs --rate (it sheds requests an open loop is late with)",
            ))
        }
        _ => {}
    }
    if opts.connection == ConnMode::PerRequest {
        // A run must never measure ephemeral-port exhaustion instead of the server.
        ports::check(opts.url.addr.ip().is_loopback(), &ports::Sysctls::read())?;
    }
    // A clear error for a server that is not there, before any load starts.
    std::net::TcpStream::connect_timeout(&opts.url.addr, opts.timeout).map_err(|error| {
        RunError::Connect {
            addr: opts.url.addr,
            error,
        }
    })?;
    Ok(())
}

/// The route mix as a goose scenario (one goose user per connection), in the same schema.
#[cfg(feature = "goose")]
pub fn run_goose(opts: &Options) -> Result<Report, RunError> {
    preflight(opts)?;
    if opts.max_requests.is_some() || !opts.warmup.is_zero() {
        return Err(RunError::Engine("--engine goose runs for --duration only (no --requests, no --warmup: goose resets its metrics once every user runs)".into()));
    }
    goose_engine::run(opts)
}

fn sleep_until(t: Instant, abort: &AtomicBool) {
    while !abort.load(std::sync::atomic::Ordering::Relaxed) {
        let now = Instant::now();
        if now >= t {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(50)));
    }
}

/// User + system CPU time of this process, in seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub(crate) fn latency_stats(h: &hdrhistogram::Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let (mean, stdev) = (h.mean(), h.stdev());
    let (lo, hi) = (mean - stdev, mean + stdev);
    let within: u64 = h
        .iter_recorded()
        .filter(|v| {
            let x = v.value_iterated_to() as f64;
            x >= lo && x <= hi
        })
        .map(|v| v.count_at_value())
        .sum();
    let q = |p: f64| h.value_at_quantile(p) as f64;
    Latency {
        mean_us: mean,
        stdev_us: stdev,
        max_us: h.max() as f64,
        within_stdev_pct: within as f64 * 100.0 / h.len() as f64,
        p50_us: q(0.50),
        p75_us: q(0.75),
        p90_us: q(0.90),
        p99_us: q(0.99),
        p999_us: Some(q(0.999)),
    }
}

fn rate_stats(samples: &[f64]) -> RateStats {
    // Only finite rates: a report must serialise to JSON numbers (NaN would become null).
    let samples: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    let samples = samples.as_slice();
    if samples.is_empty() {
        return RateStats::default();
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let stdev = var.sqrt();
    let within = samples
        .iter()
        .filter(|x| (*x - mean).abs() <= stdev)
        .count();
    RateStats {
        mean,
        stdev,
        max: samples.iter().cloned().fold(0.0, f64::max),
        within_stdev_pct: within as f64 * 100.0 / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_stats_ignore_non_finite_samples_and_serialise_as_numbers() {
        let r = rate_stats(&[f64::NAN, 100.0, f64::INFINITY, 300.0]);
        assert_eq!((r.mean, r.max), (200.0, 300.0));
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("null"), "{json}");
        assert_eq!(rate_stats(&[f64::NAN]), RateStats::default());
    }

    #[test]
    fn loads_run_together_have_their_open_loop_requests_due_midway_between_each_others() {
        let origin = Instant::now();
        let interval = Duration::from_millis(10);
        // Two loads of 2 threads x 4 connections: every first due time, in order of time.
        let mut due: Vec<(Duration, usize)> = Vec::new();
        for n in 0..2 {
            for t in 0..2 {
                let open = load::OpenLoop {
                    origin,
                    interval,
                    phase: open_phase(t, 2, Together { n, of: 2 }),
                    deadline: None,
                };
                for slot in 0..4 {
                    due.push((open.due(slot, 4, 0).duration_since(origin), n));
                }
            }
        }
        due.sort();
        // 16 due times evenly spread over the interval, the loads taking turns.
        for (i, (d, n)) in due.iter().enumerate() {
            let even = interval.as_secs_f64() * i as f64 / 16.0;
            assert!((d.as_secs_f64() - even).abs() < 1e-9, "{i}: {d:?}");
            assert_eq!(*n, i % 2, "{due:?}");
        }
        // One load alone keeps the phases it had.
        assert_eq!(open_phase(1, 4, Together { n: 0, of: 1 }), 0.25);
    }
}

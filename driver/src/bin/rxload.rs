//! rxload: wrk's command line and report, on the rxbench reactor.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use driver::target::{format_duration, parse_duration, parse_routes, Route, Url};
use driver::{ConnMode, Options, RunError};
use reactor::BackendChoice;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Engine {
    /// io_uring, falling back to epoll (and saying why) when it cannot be set up
    Auto,
    /// io_uring or an error naming the errno
    #[value(name = "io_uring", alias = "io-uring")]
    IoUring,
    Epoll,
    /// The route mix as a goose scenario (tokio + reqwest): the realism cross-check
    #[cfg(feature = "goose")]
    Goose,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RecvMode {
    Multishot,
    Single,
}

/// A closed-loop HTTP/1.1 load generator with wrk's options and report, cheap enough per
/// request to keep a one-core server saturated from one core.
#[derive(Parser, Debug)]
#[command(
    name = "rxload",
    version,
    about,
    after_help = "\
Examples:
  rxload -t1 -c64 -d10s --latency http://127.0.0.1:3000/
  rxload -c256 -d15s --routes GET:/,GET:/user/0,POST:/user --json http://127.0.0.1:3000/
  rxload -t1 -c64 -d10s --disable-keepalive http://127.0.0.1:3000/
  rxload -t1 -c64 -d10s -R 50000 --deadline 100ms --latency http://127.0.0.1:3000/
  rxload -t1 -c64 -d10s -R 10000 --disable-keepalive http://127.0.0.1:3000/

Load only servers you run yourself."
)]
struct Cli {
    /// Threads to use (each runs its own event loop)
    #[arg(short, long, default_value_t = Options::DEFAULT_THREADS)]
    threads: usize,
    /// Connections to keep open, split across threads
    #[arg(short, long, default_value_t = Options::DEFAULT_CONNECTIONS)]
    connections: usize,
    /// Duration of the test: 10s, 500ms, 2m, 1h or seconds
    #[arg(short, long, default_value_t = Span(Options::DEFAULT_DURATION), value_parser = span)]
    duration: Span,
    /// Load applied before recording starts (not in the results)
    #[arg(long, default_value = "0s", value_parser = duration_or_zero)]
    warmup: Duration,
    /// Add a header to every request ("Name: value"); repeatable
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// Print the latency distribution
    #[arg(long)]
    latency: bool,
    /// A request without a complete response after this long counts as a timeout and its
    /// connection is reopened
    #[arg(long, default_value_t = Span(Options::DEFAULT_TIMEOUT), value_parser = span)]
    timeout: Span,
    /// Method for the URL's request
    #[arg(long, default_value = "GET")]
    method: String,
    /// Request body (sent with Content-Length)
    #[arg(long, default_value = "")]
    body: String,
    /// Route mix, round-robin per connection, e.g. GET:/,GET:/user/0,POST:/user (the
    /// the-benchmarker scenario); replaces the URL's path
    #[arg(long, value_parser = routes)]
    routes: Option<RouteMix>,
    /// Every request on a fresh connection: connect, send with `Connection: close`, read the
    /// response, close from the client's side whatever the server answered (oha's
    /// --disable-keepalive). The connect is inside each request's latency; the report says
    /// who closed. Checks first that the kernel reuses closed client ports (tcp_tw_reuse)
    #[arg(long)]
    disable_keepalive: bool,
    /// Open loop: this many requests a second in all (wrk2's -R), each connection's due on
    /// a fixed schedule whatever the server did with the last; latency counts from when a
    /// request was due (coordinated omission corrected) and the uncorrected figure is beside
    /// it. No batched waits in this mode. With --disable-keepalive each request's connection
    /// is opened when the request is due, so the connect counts from the due time too
    #[arg(short = 'R', long)]
    rate: Option<f64>,
    /// Open loop: a request already staler than this when its connection is free is shed
    /// (counted, never sent), as zrk's --deadline
    #[arg(long, value_parser = duration)]
    deadline: Option<Duration>,
    /// Stop after this many complete responses in all (or at the end of --duration)
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// I/O engine
    #[arg(long, value_enum, default_value_t = Engine::Auto)]
    engine: Engine,
    /// io_uring receives: one multishot receive per connection into kernel-picked buffers, or
    /// one receive SQE per response (for comparison)
    #[arg(long, value_enum, default_value_t = RecvMode::Multishot)]
    recv: RecvMode,
    /// io_uring: microseconds a loop turn may wait for half the outstanding responses before
    /// it takes what has arrived (0: wake for every response). The wait is inside the
    /// reported latency
    #[arg(long, default_value_t = Options::DEFAULT_BATCH_WAIT_US, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    batch_wait_us: u32,
    /// Print the report as one JSON object instead of wrk's text
    #[arg(long)]
    json: bool,
    /// Target, e.g. http://127.0.0.1:3000/
    url: String,
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A duration option whose default prints as it is typed (`10s`), taken from `Options`.
#[derive(Clone, Copy, Debug)]
struct Span(Duration);

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

fn span(s: &str) -> Result<Span, String> {
    duration(s).map(Span)
}

fn duration_or_zero(s: &str) -> Result<Duration, String> {
    if s.trim_end_matches(['s', 'm']).trim() == "0" {
        return Ok(Duration::ZERO);
    }
    duration(s)
}

/// A parsed `--routes` (a newtype: clap reads a bare `Vec` as a repeated option).
#[derive(Clone, Debug)]
struct RouteMix(Vec<Route>);

fn routes(s: &str) -> Result<RouteMix, String> {
    parse_routes(s).map(RouteMix).map_err(|e| e.to_string())
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            let msg = e.to_string();
            let line = msg
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            eprintln!("rxload: {line} (see rxload --help)");
            std::process::exit(2);
        }
    };
    match run(cli) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("rxload: {e}");
            std::process::exit(1);
        }
    }
}

fn run(cli: Cli) -> Result<(), RunError> {
    let url = Url::parse(&cli.url).map_err(|e| RunError::Engine(e.to_string()))?;
    if cli.threads == 0 {
        return Err(RunError::Engine("threads must be at least 1".into()));
    }
    if cli.requests.is_some() && !cli.warmup.is_zero() {
        return Err(RunError::Engine(
            "--requests counts every response: it cannot be combined with --warmup".into(),
        ));
    }
    let routes = cli.routes.map(|m| m.0).unwrap_or_else(|| {
        vec![Route {
            method: cli.method.to_ascii_uppercase(),
            path: url.path.clone(),
        }]
    });
    let opts = Options {
        threads: cli.threads,
        connections: cli.connections,
        duration: cli.duration.0,
        warmup: cli.warmup,
        timeout: cli.timeout.0,
        headers: cli.headers,
        routes,
        body: cli.body.into_bytes(),
        max_requests: cli.requests,
        rate: cli.rate,
        deadline: cli.deadline,
        connection: if cli.disable_keepalive {
            ConnMode::PerRequest
        } else {
            ConnMode::KeepAlive
        },
        recv_multishot: cli.recv == RecvMode::Multishot,
        batch_wait: Duration::from_micros(cli.batch_wait_us.into()),
        backend: match cli.engine {
            Engine::IoUring => BackendChoice::IoUring,
            Engine::Epoll => BackendChoice::Epoll,
            _ => BackendChoice::Auto,
        },
        ..Options::new(url)
    };
    // Once per run, not in every run of the library (the runner checks before its first
    // slice and counts the table's drops in each). On the target's port: a rule that exempts
    // only the server's port (the runner's, a test's) is enough.
    if opts.connection == ConnMode::PerRequest && opts.url.addr.ip().is_loopback() {
        driver::conntrack::check_loopback_on(opts.url.addr.port())?;
    }
    if !cli.json {
        print!(
            "Running {} test @ {}\n  {} threads and {} connections\n",
            driver::target::format_duration(opts.duration),
            opts.url.text,
            opts.threads,
            opts.connections
        );
    }
    let report = match cli.engine {
        #[cfg(feature = "goose")]
        Engine::Goose => driver::run_goose(&opts)?,
        _ => driver::run(&opts, Arc::new(AtomicBool::new(false)), |n| {
            eprintln!("rxload: {n}")
        })?,
    };
    if cli.json {
        println!("{}", serde_json::to_string(&report).expect("serialisable"));
    } else {
        // The first two lines were printed before the run, as wrk does.
        let text = report.to_wrk_text(cli.latency);
        print!(
            "{}",
            text.lines()
                .skip(2)
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        );
    }
    Ok(())
}

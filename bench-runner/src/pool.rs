//! The resident servers of a run, on any engine: started once each (or once a round, with
//! `--relaunch round`) and waited for until ready, restarted once a launch if one dies,
//! stopped together at the end with their counters kept.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{tail, Engine, EngineError, Lines, ServerSpec, Signal};
use crate::model::{CountersLine, Failure, FailureKind, Raw, ServerCounters, ServerKey, Startup};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// A server is started at most this often (the first start and one restart).
const MAX_STARTS: u32 = 2;
/// How long a stopped server has to finish what is in flight and print its counters.
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// Why the pool could not give a slice its server.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("{0} is not running")]
    NotRunning(ServerKey),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Started, but never ready; nothing of it is left running.
    #[error("{why}; its log:\n{log}")]
    NotReady { why: NotReady, log: String },
    #[error("server {key} is down after {starts} starts: {last}")]
    Down {
        key: ServerKey,
        starts: u32,
        last: String,
    },
    #[error("server {0} did not restart")]
    NoRestart(ServerKey),
}

impl PoolError {
    /// How a slice that met this error records it.
    pub fn kind(&self) -> FailureKind {
        match self {
            PoolError::Engine(EngineError::Lost { .. }) => FailureKind::EngineLost,
            PoolError::Engine(_) => FailureKind::NoAddress,
            PoolError::NotReady { .. } => FailureKind::DidNotStart,
            PoolError::NotRunning(_) | PoolError::Down { .. } | PoolError::NoRestart(_) => {
                FailureKind::ServerDown
            }
        }
    }
}

/// Why a started server was given up on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("the server exited before listening")]
    Exited,
    #[error("no start-up line after {0:?}")]
    NoStartupLine(Duration),
    #[error("not accepting on port {port} after {after:?}")]
    NotAccepting { port: u16, after: Duration },
}

pub type Result<T, E = PoolError> = std::result::Result<T, E>;

/// A running server.
pub struct Server<H> {
    pub handle: H,
    lines: Lines,
    /// This project's server, which answers SIGUSR1 with its counters (a foreign server
    /// may take SIGUSR1 for something else — haproxy stops — so it never gets one).
    has_counters: bool,
    /// Snapshots asked for so far (the server numbers its snapshot lines from 1).
    snapshots: u64,
}

impl<H> Server<H> {
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The last `n` lines the server printed, counters snapshots left out (they are in the
    /// slices already, and they would crowd out what the server said when it failed).
    pub fn tail(&self, n: usize) -> String {
        let said: Vec<String> = self
            .lines()
            .into_iter()
            .filter(|l| !l.contains("\"event\":\"snapshot\""))
            .collect();
        tail(&said, n)
    }

    /// Asks for a counters snapshot; returns the number of the line that will answer it
    /// (`None`: a foreign server, which has no counters).
    pub async fn request_snapshot<E: Engine<Handle = H>>(&mut self, engine: &E) -> Option<u64> {
        if !self.has_counters {
            return None;
        }
        self.snapshots += 1;
        engine.signal(&self.handle, Signal::Snapshot).await;
        Some(self.snapshots)
    }

    /// Waits (at most `limit`) for snapshot line `seq`.
    pub async fn snapshot(&self, seq: u64, limit: Duration) -> Option<ServerCounters> {
        let deadline = Instant::now() + limit;
        loop {
            let found = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .rev()
                .find_map(|l| ServerCounters::parse(l, CountersLine::Snapshot(seq)));
            if found.is_some() || Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Two running servers borrowed at once.
pub type TwoServers<'a, H> = (&'a mut Server<H>, &'a mut Server<H>);

/// Every server of the run, by its index in the plan.
pub struct Pool<'e, E: Engine> {
    pub engine: &'e E,
    pub specs: Vec<ServerSpec>,
    /// The ports the specs were made with (each launch permutes them among the servers).
    ports: Vec<u16>,
    servers: Vec<Option<Server<E::Handle>>>,
    target_host: String,
    /// Which launch of the servers is running (`--relaunch round`: one a round, from 0).
    launch: u32,
    /// Starts of each server in this launch: the first and at most one restart.
    launch_starts: Vec<u32>,
}

impl<'e, E: Engine> Pool<'e, E> {
    pub fn new(engine: &'e E, specs: Vec<ServerSpec>, target_host: &str) -> Self {
        Pool {
            engine,
            servers: specs.iter().map(|_| None).collect(),
            launch_starts: vec![0; specs.len()],
            ports: specs.iter().map(|s| s.port).collect(),
            specs,
            launch: 0,
            target_host: target_host.to_string(),
        }
    }

    pub fn launch(&self) -> u32 {
        self.launch
    }

    /// The run's ports, by server, as the specs were made.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Every server stopped and launched again, in `order`, server `i` on `ports[i]`: a fresh
    /// process with its own luck (memory placement, caches, its port) for the next round.
    pub async fn relaunch(&mut self, order: &[usize], ports: &[u16], raw: &mut Raw) {
        self.stop_all(raw).await;
        for (spec, &port) in self.specs.iter_mut().zip(ports) {
            spec.port = port;
        }
        self.launch += 1;
        self.launch_starts.iter_mut().for_each(|n| *n = 0);
        for &i in order {
            self.start(i, raw).await;
        }
    }

    pub fn any_running(&self) -> bool {
        self.servers.iter().any(Option::is_some)
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut Server<E::Handle>> {
        self.servers[i].as_mut()
    }

    /// Two different servers at once (a duet reads both at its window's edges).
    pub fn get_two_mut(&mut self, a: usize, b: usize) -> Option<TwoServers<'_, E::Handle>> {
        if a == b {
            return None;
        }
        let (low, high) = (a.min(b), a.max(b));
        let (left, right) = self.servers.split_at_mut(high);
        let (l, h) = (left[low].as_mut()?, right[0].as_mut()?);
        Some(if a < b { (l, h) } else { (h, l) })
    }

    /// The URL a driver sends `route` to on server `i`.
    pub async fn url(&self, i: usize, route: &driver::target::Route) -> Result<String> {
        let host = self.address(i).await?;
        Ok(format!(
            "http://{host}:{}{}",
            self.specs[i].port, route.path
        ))
    }

    /// Where a driver reaches server `i`.
    async fn address(&self, i: usize) -> Result<String> {
        let server = self.servers[i]
            .as_ref()
            .ok_or_else(|| PoolError::NotRunning(self.specs[i].key.clone()))?;
        Ok(self
            .engine
            .address(
                &server.handle,
                self.specs[i].network.as_deref(),
                &self.target_host,
            )
            .await?)
    }

    /// Starts server `i` (its first start or its one restart) and records what happened.
    pub async fn start(&mut self, i: usize, raw: &mut Raw) {
        let record = &mut raw.servers[i];
        record.starts += 1;
        self.launch_starts[i] += 1;
        let mut spec = self.specs[i].clone();
        if self.launch > 0 {
            spec.name = format!("{}-launch{}", spec.name, self.launch);
        }
        if self.launch_starts[i] > 1 {
            spec.name = format!("{}-restart{}", spec.name, self.launch_starts[i] - 1);
        }
        match self.start_ready(&spec).await {
            Ok((server, startup)) => {
                let source = format!(
                    "server CPU time from {}",
                    self.engine.cpu_source(&server.handle)
                );
                if !raw.notes.contains(&source) {
                    raw.notes.push(source);
                }
                raw.servers[i].startup = Some(startup);
                self.servers[i] = Some(server);
            }
            Err(e) => {
                let msg = format!("{}: did not start (start {}): {e}", spec.key, record.starts);
                eprintln!("bench-runner: {msg}");
                raw.servers[i]
                    .events
                    .push(Failure::new(FailureKind::DidNotStart, msg));
                self.servers[i] = None;
            }
        }
    }

    /// Starts the server and waits until it is ready — this project's server says so on its
    /// start-up line, a foreign one by accepting a connection; on failure the error carries
    /// its last log lines and nothing is left running.
    async fn start_ready(&self, spec: &ServerSpec) -> Result<(Server<E::Handle>, Startup)> {
        let lines: Lines = Arc::default();
        let handle = self.engine.launch(spec, &lines).await?;
        let server = Server {
            handle,
            lines,
            has_counters: spec.foreign.is_none(),
            snapshots: 0,
        };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(s) = self.ready(&server, spec).await {
                return Ok((server, s));
            }
            // A server that exits may still have lines on their way: look once more.
            let alive = self.engine.alive(&server.handle);
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(s) = self.ready(&server, spec).await {
                return Ok((server, s));
            }
            let why = if !alive {
                NotReady::Exited
            } else if Instant::now() > deadline {
                match spec.foreign {
                    None => NotReady::NoStartupLine(STARTUP_TIMEOUT),
                    Some(_) => NotReady::NotAccepting {
                        port: spec.port,
                        after: STARTUP_TIMEOUT,
                    },
                }
            } else {
                continue;
            };
            let log = server.tail(10);
            self.stop(server).await;
            return Err(PoolError::NotReady { why, log });
        }
    }

    /// What the server runs, once it is ready to be measured.
    async fn ready(&self, server: &Server<E::Handle>, spec: &ServerSpec) -> Option<Startup> {
        if spec.foreign.is_none() {
            return server.lines().iter().find_map(|l| Startup::parse(l));
        }
        let host = self
            .engine
            .address(&server.handle, spec.network.as_deref(), &self.target_host)
            .await
            .ok()?;
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), spec.port))
            .ok()?
            .next()?;
        // A blocking connect, so off the async workers' backs.
        tokio::task::block_in_place(|| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
        })
        .ok()?;
        Some(Startup::foreign(addr, spec.cpus.len().max(1) as u32))
    }

    /// Server `index` is running, or the reason it is not (restarted once at most).
    pub async fn ensure_alive(&mut self, index: usize, raw: &mut Raw) -> Result<()> {
        if let Some(s) = &self.servers[index] {
            if self.engine.alive(&s.handle) {
                return Ok(());
            }
            // A daemon that restarted took its containers with it: no restart can help.
            self.engine.answers().await?;
            let s = self.servers[index].take().expect("checked");
            let tail = s.tail(10);
            self.stop(s).await;
            let msg = format!("{}: exited; its last lines:\n{tail}", self.specs[index].key);
            eprintln!("bench-runner: {msg}");
            raw.servers[index]
                .events
                .push(Failure::new(FailureKind::Exited, msg));
        }
        let record = &raw.servers[index];
        if self.launch_starts[index] >= MAX_STARTS {
            return Err(PoolError::Down {
                key: self.specs[index].key.clone(),
                starts: record.starts,
                last: record
                    .events
                    .last()
                    .map_or("", Failure::headline)
                    .to_string(),
            });
        }
        self.start(index, raw).await;
        match &self.servers[index] {
            Some(_) => Ok(()),
            None => Err(PoolError::NoRestart(self.specs[index].key.clone())),
        }
    }

    pub fn alive(&self, i: usize) -> bool {
        self.servers[i]
            .as_ref()
            .is_some_and(|s| self.engine.alive(&s.handle))
    }

    /// SIGTERM, wait (bounded), and the counters line; nothing of the server is left.
    async fn stop(&self, s: Server<E::Handle>) -> Option<ServerCounters> {
        self.engine.signal(&s.handle, Signal::Stop).await;
        self.engine.reap(s.handle, STOP_LIMIT).await;
        let lines = s.lines.lock().unwrap().clone();
        lines
            .iter()
            .rev()
            .find_map(|l| ServerCounters::parse(l, CountersLine::Shutdown))
    }

    /// Every server stopped at once; their shutdown counters go to the record.
    pub async fn stop_all(&mut self, raw: &mut Raw) {
        let taken: Vec<(usize, Server<E::Handle>)> = self
            .servers
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.take().map(|s| (i, s)))
            .collect();
        let this = &*self;
        let stops = taken
            .into_iter()
            .map(|(i, s)| async move { (i, this.stop(s).await) });
        for (i, counters) in futures_util::future::join_all(stops).await {
            raw.servers[i].final_counters = counters;
        }
    }
}

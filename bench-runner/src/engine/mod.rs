//! Where the resident servers run — a Docker container each ([`docker`]) or a child process
//! each ([`native`]) — behind one small surface: start, alive, CPU time, counters snapshot,
//! stop. Both keep every line a server prints, so start-up and counters lines are read the
//! same way.

pub mod build;
pub mod docker;
pub mod native;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::model::{CountersLine, ForeignServer, ServerCounters, ServerKey, Startup, Subject};

/// Everything a server printed, stdout and stderr interleaved as they arrived.
pub type Lines = Arc<Mutex<Vec<String>>>;

/// One server to start.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    pub key: ServerKey,
    /// Container name (Docker).
    pub name: String,
    pub port: u16,
    pub cpus: Vec<usize>,
    /// The run's own Docker network (`--network bridge`); `None`: host networking.
    pub network: Option<String>,
    /// How to start it, for a foreign server (`--server`).
    pub foreign: Option<ForeignServer>,
}

impl ServerSpec {
    /// This project's server: its configuration's knobs, port and workers. A foreign one:
    /// `PORT` and what `--server` gave.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = match (&self.key.config, &self.foreign) {
            (Subject::Own(config), _) => {
                let mut env: Vec<(String, String)> = config
                    .env()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                env.push(("APP_PORT".into(), self.port.to_string()));
                env.push(("APP_WORKERS".into(), self.cpus.len().max(1).to_string()));
                env
            }
            (Subject::Foreign(_), f) => f.iter().flat_map(|f| f.env.clone()).collect(),
        };
        if self.foreign.is_some() {
            env.push(("PORT".into(), self.port.to_string()));
        }
        env
    }
}

pub enum Engine {
    Docker(docker::Docker),
    Native(native::Native),
}

enum Handle {
    Docker(docker::Container),
    Native(native::Process),
}

/// A running server.
pub struct Server {
    handle: Handle,
    lines: Lines,
    /// This project's server, which answers SIGUSR1 with its counters (a foreign server
    /// may take SIGUSR1 for something else — haproxy stops — so it never gets one).
    has_counters: bool,
    /// Snapshots asked for so far (the server numbers its snapshot lines from 1).
    snapshots: u64,
}

/// What a server is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGUSR1: print the counters line and keep serving.
    Snapshot,
    /// SIGTERM: finish what is in flight, print the counters line, exit.
    Stop,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Snapshot => "SIGUSR1",
            Signal::Stop => "SIGTERM",
        }
    }

    fn number(self) -> libc::c_int {
        match self {
            Signal::Snapshot => libc::SIGUSR1,
            Signal::Stop => libc::SIGTERM,
        }
    }
}

impl Engine {
    pub fn describe(&self) -> String {
        match self {
            Engine::Docker(d) => d.describe(),
            Engine::Native(n) => n.describe(),
        }
    }

    pub fn is_native(&self) -> bool {
        matches!(self, Engine::Native(_))
    }

    /// Starts the server and waits until it is ready — this project's server says so on its
    /// start-up line, a foreign one by accepting a connection at `target_host` (or its address
    /// on the run's network); on failure the error carries its last log lines and nothing is
    /// left running.
    pub async fn start(
        &self,
        spec: &ServerSpec,
        timeout: Duration,
        target_host: &str,
    ) -> Result<(Server, Startup)> {
        let lines: Lines = Arc::default();
        let handle = match self {
            Engine::Docker(d) => Handle::Docker(d.start(spec, &lines).await?),
            Engine::Native(n) => Handle::Native(n.start(spec, &lines)?),
        };
        let server = Server {
            handle,
            lines,
            has_counters: spec.foreign.is_none(),
            snapshots: 0,
        };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.ready(&server, spec, target_host).await {
                return Ok((server, s));
            }
            // A server that exits may still have lines on their way: look once more.
            let alive = self.alive(&server);
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(s) = self.ready(&server, spec, target_host).await {
                return Ok((server, s));
            }
            let why = if !alive {
                "the server exited before listening".to_string()
            } else if Instant::now() > deadline {
                match spec.foreign {
                    None => format!("no start-up line after {timeout:?}"),
                    Some(_) => format!("not accepting on port {} after {timeout:?}", spec.port),
                }
            } else {
                continue;
            };
            let tail = server.tail(10);
            self.stop(server).await;
            bail!("{why}; its log:\n{tail}");
        }
    }

    /// What the server runs, once it is ready to be measured.
    async fn ready(
        &self,
        server: &Server,
        spec: &ServerSpec,
        target_host: &str,
    ) -> Option<Startup> {
        if spec.foreign.is_none() {
            return server.lines().iter().find_map(|l| Startup::parse(l));
        }
        let host = self
            .address(server, spec.network.as_deref(), target_host)
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
        Some(Startup {
            line: format!("accepting on {addr} (a foreign server: no start-up line expected)"),
            backend: "foreign".into(),
            io_uring: "n/a".into(),
            workers: spec.cpus.len().max(1) as u32,
        })
    }

    pub fn alive(&self, s: &Server) -> bool {
        match (self, &s.handle) {
            (Engine::Docker(d), Handle::Docker(c)) => d.alive(c),
            (Engine::Native(n), Handle::Native(p)) => n.alive(p),
            _ => false,
        }
    }

    /// The server's process id on this host, where this process can see it: a native child,
    /// or a container of a local engine (its init, found through its cgroup).
    pub fn pid(&self, s: &Server) -> Option<i32> {
        match &s.handle {
            Handle::Native(p) => Some(native::Native::pid(p)),
            Handle::Docker(c) => docker::Docker::host_pid(c),
        }
    }

    /// Cumulative CPU time of the server, in nanoseconds.
    pub async fn cpu_ns(&self, s: &Server) -> Option<u64> {
        match (self, &s.handle) {
            (Engine::Docker(d), Handle::Docker(c)) => d.cpu_ns(c).await,
            (Engine::Native(n), Handle::Native(p)) => n.cpu_ns(p),
            _ => None,
        }
    }

    /// Where the CPU time comes from, for the report.
    pub fn cpu_source(&self, s: &Server) -> &'static str {
        match &s.handle {
            Handle::Docker(c) => match docker::Docker::cpu_source_of(c) {
                docker::CpuSource::CgroupV1(_) => "cgroup v1 cpuacct.usage",
                docker::CpuSource::CgroupV2(_) => "cgroup v2 cpu.stat",
                docker::CpuSource::StatsApi => "the engine's stats API",
            },
            Handle::Native(_) => "the process CPU clock",
        }
    }

    pub async fn signal(&self, s: &Server, signal: Signal) {
        match (self, &s.handle) {
            (Engine::Docker(d), Handle::Docker(c)) => d.signal(c, signal.name()).await,
            (Engine::Native(n), Handle::Native(p)) => n.signal(p, signal.number()),
            _ => {}
        }
    }

    /// Asks for a counters snapshot; returns the number of the line that will answer it
    /// (`None`: a foreign server, which has no counters).
    pub async fn request_snapshot(&self, s: &mut Server) -> Option<u64> {
        if !s.has_counters {
            return None;
        }
        s.snapshots += 1;
        self.signal(s, Signal::Snapshot).await;
        Some(s.snapshots)
    }

    /// The address a driver on this host aims at: the container's on the run's network, or
    /// `target_host` (host networking, native).
    pub async fn address(
        &self,
        s: &Server,
        network: Option<&str>,
        target_host: &str,
    ) -> Result<String> {
        match (self, &s.handle, network) {
            (Engine::Docker(d), Handle::Docker(c), Some(net)) => d.address_on(c, net).await,
            _ => Ok(target_host.to_string()),
        }
    }

    /// SIGTERM, wait (bounded), and the counters line; nothing of the server is left.
    pub async fn stop(&self, s: Server) -> (Option<ServerCounters>, Vec<String>) {
        self.signal(&s, Signal::Stop).await;
        let limit = Duration::from_secs(10);
        match (self, s.handle) {
            (Engine::Docker(d), Handle::Docker(c)) => d.reap(c, limit).await,
            (Engine::Native(n), Handle::Native(p)) => {
                tokio::task::block_in_place(|| n.reap(p, limit));
                // The reader threads drain the pipes right after exit.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ => {}
        }
        let lines = s.lines.lock().unwrap().clone();
        let counters = lines
            .iter()
            .rev()
            .find_map(|l| ServerCounters::parse(l, CountersLine::Shutdown));
        (counters, lines)
    }
}

impl Server {
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

pub fn tail(lines: &[String], n: usize) -> String {
    lines[lines.len().saturating_sub(n)..].join("\n")
}

//! Where the resident servers run, behind one trait: [`Engine`]. [`docker::Docker`] runs each
//! server as a locked-down container, [`native::Native`] as a pinned child process. Both keep
//! every line a server prints ([`Lines`]), so start-up and counters lines are read the same
//! way on either; readiness, restarts and stopping are [`crate::pool`]'s, on any engine.

pub mod build;
pub mod cgroup;
pub mod docker;
mod error;
pub mod native;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use error::EngineError;
use error::Result;

use wire::knobs;

use crate::cli::{EngineChoice, Network};
use crate::model::{ForeignServer, ServerKey, Subject};

/// Everything a server printed, stdout and stderr interleaved as they arrived.
pub type Lines = Arc<Mutex<Vec<String>>>;

/// One server to start.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    pub key: ServerKey,
    /// Which of its configuration's instances.
    pub instance: u32,
    /// Container name (Docker).
    pub name: String,
    pub port: u16,
    pub cpus: Vec<usize>,
    /// The run's own Docker network (`--network bridge`); `None`: host networking.
    pub network: Option<String>,
    /// Host networking aimed at a loopback address: this project's server binds 127.0.0.1
    /// only, so a benchmark server is never reachable from off the machine.
    pub loopback_only: bool,
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
                env.push((knobs::PORT.into(), self.port.to_string()));
                env.push((knobs::WORKERS.into(), self.cpus.len().max(1).to_string()));
                if self.loopback_only {
                    env.push((knobs::BIND.into(), "127.0.0.1".into()));
                }
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

/// What a server is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGUSR1: print the counters line and keep serving.
    Snapshot,
    /// SIGTERM: finish what is in flight, print the counters line, exit.
    Stop,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Snapshot => "SIGUSR1",
            Signal::Stop => "SIGTERM",
        }
    }

    pub fn number(self) -> libc::c_int {
        match self {
            Signal::Snapshot => libc::SIGUSR1,
            Signal::Stop => libc::SIGTERM,
        }
    }
}

/// A mechanism that runs servers. The run is generic over it ([`crate::run::run_on`]).
// The run drives an engine's futures on one task (`block_on`), never across threads, so the
// trait does not promise `Send` futures.
#[allow(async_fn_in_trait)]
pub trait Engine {
    /// One running server, as this engine knows it.
    type Handle;

    /// `docker <version>` or `native`, for the record.
    fn describe(&self) -> String;
    fn is_native(&self) -> bool;
    /// Whether the engine's own `default` seccomp profile denies io_uring (Docker ≥ 25);
    /// natively there is no engine default.
    fn default_blocks_io_uring(&self) -> bool {
        false
    }
    /// Builds what it runs (the server image, or the native server); `no_build`: use what is
    /// there.
    async fn prepare(&mut self, root: &Path, no_build: bool) -> Result<()>;
    /// Before the first server: what an earlier run left is removed, the run's network made
    /// (its name, for `--network bridge`).
    async fn open(&self, network: Network) -> Result<Option<String>>;
    /// After the last server stopped: the network removed, nothing of the run left.
    async fn close(&self, network: Option<&str>);
    /// Starts the server, its output going to `lines`; readiness is the caller's to wait for.
    async fn launch(&self, spec: &ServerSpec, lines: &Lines) -> Result<Self::Handle>;
    fn alive(&self, h: &Self::Handle) -> bool;
    /// The server's process id on this host, where this process can see it (what
    /// `strace -p` attaches to).
    fn pid(&self, h: &Self::Handle) -> Option<i32>;
    /// Cumulative CPU time of the server, in nanoseconds.
    async fn cpu_ns(&self, h: &Self::Handle) -> Option<u64>;
    /// Cumulative user and kernel time of the server, where the source splits it (read right
    /// after [`Engine::cpu_ns`] at each edge; none: not split).
    async fn cpu_split(&self, _h: &Self::Handle) -> Option<crate::model::CpuSplit> {
        None
    }
    /// Where the CPU time comes from, for the report.
    fn cpu_source(&self, h: &Self::Handle) -> &'static str;
    async fn signal(&self, h: &Self::Handle, signal: Signal);
    /// Waits (at most `limit`) for the server to exit after [`Signal::Stop`], then makes sure
    /// nothing of it is left.
    async fn reap(&self, h: Self::Handle, limit: Duration);
    /// The address a driver on this host aims at: the container's on the run's network, or
    /// `target_host` (host networking, native).
    async fn address(
        &self,
        h: &Self::Handle,
        network: Option<&str>,
        target_host: &str,
    ) -> Result<String>;
    /// Whether the engine still answers (asked when a server is found gone: a daemon that
    /// restarted takes every container with it, and the run cannot go on without it).
    async fn answers(&self) -> Result<()>;
}

/// The engine a run uses.
pub enum Picked {
    Docker(docker::Docker),
    Native(native::Native),
}

/// The engine for `choice`, and a note when `auto` fell back to native.
pub async fn pick(choice: EngineChoice) -> Result<(Picked, Option<String>)> {
    let native = || Picked::Native(native::Native::default());
    if choice == EngineChoice::Native {
        return Ok((native(), None));
    }
    match docker::connect().await {
        Ok(d) => Ok((Picked::Docker(d), None)),
        Err(e) if choice == EngineChoice::Docker => Err(e),
        Err(e) => {
            let note = format!("no Docker engine reachable ({e:#}); running natively: each server is a child process pinned with sched_setaffinity, and no-io-uring is a seccomp filter in the child");
            eprintln!("bench-runner: {note}");
            Ok((native(), Some(note)))
        }
    }
}

pub fn tail(lines: &[String], n: usize) -> String {
    lines[lines.len().saturating_sub(n)..].join("\n")
}

//! The Docker mechanism (bollard): each resident server is a locked-down container with its
//! seccomp profile, cpuset and port; its log is followed into memory; its CPU time is read
//! straight from its cgroup when the engine is local (exact and cheap), through the stats API
//! otherwise.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig, NetworkCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
    StatsOptionsBuilder, WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;

use super::build::IMAGE;
use super::cgroup::{cgroup_cpu_file, read_cgroup, read_cgroup_split, CpuSource};
use super::error::{EngineError, Result};
use super::{Engine, Lines, ServerSpec, Signal};
use crate::cli::Network;
use crate::model::{Launch, Profile};

/// Label on every container and network the runner makes; stale ones are removed at start.
pub const LABEL: &str = "rxbench";
const NO_IO_URING_PROFILE: &str = include_str!("../../../docker/seccomp/no-io-uring.json");

pub struct Docker {
    pub docker: bollard::Docker,
    pub version: String,
    /// Where it answers (`DOCKER_HOST` or the default socket), for the messages.
    pub at: String,
}

pub struct Container {
    pub id: String,
    /// Set when the log stream ends: the container stopped.
    ended: Arc<AtomicBool>,
    cpu: CpuSource,
    /// The container's init as this host numbers it, when its cgroup proves it is this
    /// container's (the engine is local): what `strace -p` attaches to.
    host_pid: Option<i32>,
}

/// The engine, if one answers (DOCKER_HOST is honoured).
pub async fn connect() -> Result<Docker> {
    let at = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let silent = |error| EngineError::NoEngine {
        at: at.clone(),
        error,
    };
    let docker = bollard::Docker::connect_with_defaults()
        .map_err(silent)?
        .with_timeout(Duration::from_secs(600));
    let docker = docker.negotiate_version().await.map_err(silent)?;
    let v = docker.version().await.map_err(silent)?;
    Ok(Docker {
        docker,
        version: v.version.unwrap_or_else(|| "unknown".into()),
        at,
    })
}

impl Docker {
    /// Removes every container and network left by an earlier run (Ctrl-C, crash).
    pub async fn remove_stale(&self) -> Result<usize> {
        let filters: HashMap<String, Vec<String>> =
            [("label".to_string(), vec![LABEL.to_string()])].into();
        let list = self
            .docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default()
                    .all(true)
                    .filters(&filters)
                    .build(),
            ))
            .await
            .map_err(EngineError::docker("listing rxbench containers"))?;
        let mut n = 0;
        for c in list {
            if let Some(id) = c.id {
                force_remove(&self.docker, &id).await;
                n += 1;
            }
        }
        let networks = self
            .docker
            .list_networks(Some(
                ListNetworksOptionsBuilder::default()
                    .filters(&filters)
                    .build(),
            ))
            .await
            .map_err(EngineError::docker("listing rxbench networks"))?;
        for net in networks {
            if let Some(name) = net.name {
                let _ = self.docker.remove_network(&name).await;
            }
        }
        Ok(n)
    }

    /// The run's own bridge network, labelled so that a later run removes it if this one dies.
    pub async fn create_network(&self, name: &str) -> Result<()> {
        let body = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            labels: Some([(LABEL.to_string(), "1".to_string())].into()),
            ..Default::default()
        };
        self.docker
            .create_network(body)
            .await
            .map_err(EngineError::docker(format!("creating network {name}")))?;
        Ok(())
    }

    pub async fn remove_network(&self, name: &str) {
        let _ = self.docker.remove_network(name).await;
    }

    /// The server image must be there (built by the runner or by `build-images`).
    pub async fn check_image(&self) -> Result<()> {
        match self.docker.inspect_image(IMAGE).await {
            Ok(_) => Ok(()),
            Err(_) => Err(EngineError::MissingImage(IMAGE)),
        }
    }

    async fn start(&self, spec: &ServerSpec, lines: &Lines) -> Result<Container> {
        let seccomp = match spec.key.profile {
            Profile::Default => None,
            Profile::NoIoUring => Some(format!("seccomp={NO_IO_URING_PROFILE}")),
            Profile::Relaxed => Some("seccomp=unconfined".to_string()),
        };
        let network = spec.network.as_deref().unwrap_or("host");
        let env = spec
            .env()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let image = match spec.foreign.as_ref().map(|f| &f.launch) {
            None => IMAGE,
            Some(Launch::Image(image)) => image.as_str(),
            Some(Launch::Cmd(_)) => return Err(EngineError::CmdUnderDocker(spec.key.clone())),
        };
        let mut body = ContainerCreateBody {
            env: Some(env),
            ..locked_down(image, network, &spec.cpus, seccomp)
        };
        if spec.foreign.is_some() {
            // A foreign image may need somewhere to write (pid files, temp files); the root
            // file system stays read-only.
            if let Some(host) = body.host_config.as_mut() {
                host.tmpfs = Some([("/tmp".to_string(), "size=64m".to_string())].into());
            }
        }
        let id = self
            .docker
            .create_container(
                Some(
                    CreateContainerOptionsBuilder::default()
                        .name(&spec.name)
                        .build(),
                ),
                body,
            )
            .await
            .map_err(EngineError::docker(format!(
                "creating container {}",
                spec.name
            )))?
            .id;
        if let Err(e) = self.docker.start_container(&id, None).await {
            force_remove(&self.docker, &id).await;
            return Err(EngineError::docker(format!(
                "starting container {}",
                spec.name
            ))(e));
        }
        let ended = Arc::new(AtomicBool::new(false));
        self.follow_logs(&id, lines.clone(), ended.clone());
        let (cpu, host_pid) = self.find_cpu_source(&id).await;
        Ok(Container {
            id,
            ended,
            cpu,
            host_pid,
        })
    }

    /// Copies the container's stdout and stderr, line by line, into `lines` until it stops.
    fn follow_logs(&self, id: &str, lines: Lines, ended: Arc<AtomicBool>) {
        let opts = LogsOptionsBuilder::default()
            .follow(true)
            .stdout(true)
            .stderr(true)
            .build();
        let mut stream = self.docker.logs(id, Some(opts));
        tokio::spawn(async move {
            let mut partial = String::new();
            while let Some(Ok(chunk)) = stream.next().await {
                partial.push_str(&chunk.to_string());
                while let Some(i) = partial.find('\n') {
                    let line: String = partial.drain(..=i).collect();
                    lines.lock().unwrap().push(line.trim_end().to_string());
                }
            }
            if !partial.is_empty() {
                lines.lock().unwrap().push(partial);
            }
            ended.store(true, Ordering::Release);
        });
    }

    /// The container's cgroup CPU counter, if this process can see it: the engine's host is
    /// this host, and the container's init is in our /proc with a cgroup named after the
    /// container — and then that init's pid, which is this host's.
    async fn find_cpu_source(&self, id: &str) -> (CpuSource, Option<i32>) {
        let pid = self
            .docker
            .inspect_container(id, None)
            .await
            .ok()
            .and_then(|i| i.state)
            .and_then(|s| s.pid)
            .filter(|&p| p > 0);
        let Some(pid) = pid else {
            return (CpuSource::StatsApi, None);
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return (CpuSource::StatsApi, None);
        };
        match cgroup_cpu_file(&text, id, std::path::Path::new("/sys/fs/cgroup")) {
            Some(src) if read_cgroup(&src).is_some() => (src, i32::try_from(pid).ok()),
            _ => (CpuSource::StatsApi, None),
        }
    }
}

impl Engine for Docker {
    type Handle = Container;

    fn describe(&self) -> String {
        format!("docker {}", self.version)
    }

    fn is_native(&self) -> bool {
        false
    }

    fn default_blocks_io_uring(&self) -> bool {
        blocks_io_uring(&self.version)
    }

    async fn prepare(&mut self, root: &std::path::Path, no_build: bool) -> Result<()> {
        if no_build {
            return self.check_image().await;
        }
        eprintln!(
            "bench-runner: engine {}; building the server image…",
            self.describe()
        );
        let root = root.to_path_buf();
        let binary =
            tokio::task::spawn_blocking(move || super::build::static_binary(&root, "server"))
                .await?
                .map_err(EngineError::Build)?;
        super::build::build_server_image(&self.docker, &binary)
            .await
            .map_err(EngineError::Build)
    }

    async fn open(&self, network: Network) -> Result<Option<String>> {
        let stale = self.remove_stale().await?;
        if stale > 0 {
            eprintln!("bench-runner: removed {stale} container(s) left by an earlier run");
        }
        if network == Network::Host {
            return Ok(None);
        }
        let name = format!("rxbench-net-{}", std::process::id());
        self.create_network(&name).await?;
        Ok(Some(name))
    }

    async fn close(&self, network: Option<&str>) {
        if let Some(net) = network {
            self.remove_network(net).await;
        }
        let left = self.remove_stale().await.unwrap_or(0);
        if left > 0 {
            eprintln!("bench-runner: removed {left} leftover container(s)");
        }
    }

    async fn launch(&self, spec: &ServerSpec, lines: &Lines) -> Result<Container> {
        self.start(spec, lines).await
    }

    fn alive(&self, c: &Container) -> bool {
        !c.ended.load(Ordering::Acquire)
    }

    /// The container's init as this host numbers it (a local engine only).
    fn pid(&self, c: &Container) -> Option<i32> {
        c.host_pid
    }

    async fn cpu_ns(&self, c: &Container) -> Option<u64> {
        match &c.cpu {
            CpuSource::StatsApi => {
                let opts = StatsOptionsBuilder::default()
                    .stream(false)
                    .one_shot(true)
                    .build();
                let stats = self.docker.stats(&c.id, Some(opts)).next().await?.ok()?;
                stats.cpu_stats?.cpu_usage?.total_usage
            }
            src => read_cgroup(src),
        }
    }

    async fn cpu_split(&self, c: &Container) -> Option<crate::model::CpuSplit> {
        read_cgroup_split(&c.cpu)
    }

    fn cpu_source(&self, c: &Container) -> &'static str {
        match c.cpu {
            CpuSource::CgroupV1(_) => "cgroup v1 cpuacct.usage",
            CpuSource::CgroupV2(_) => "cgroup v2 cpu.stat",
            CpuSource::StatsApi => "the engine's stats API",
        }
    }

    async fn signal(&self, c: &Container, signal: Signal) {
        let opts = KillContainerOptionsBuilder::default()
            .signal(signal.name())
            .build();
        let _ = self.docker.kill_container(&c.id, Some(opts)).await;
    }

    /// Waits for the container to stop, then removes it.
    async fn reap(&self, c: Container, limit: Duration) {
        let opts = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        let wait = self.docker.wait_container(&c.id, Some(opts));
        let _ = tokio::time::timeout(limit, wait.collect::<Vec<_>>()).await;
        // Let the log follower deliver the last lines (the counters) before removal.
        for _ in 0..50 {
            if c.ended.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        force_remove(&self.docker, &c.id).await;
    }

    /// The container's address on the run's network; `target_host` on the host's.
    async fn address(
        &self,
        c: &Container,
        network: Option<&str>,
        target_host: &str,
    ) -> Result<String> {
        let Some(network) = network else {
            return Ok(target_host.to_string());
        };
        let info = self
            .docker
            .inspect_container(&c.id, None)
            .await
            .map_err(EngineError::docker("inspecting the server container"))?;
        info.network_settings
            .and_then(|n| n.networks)
            .and_then(|mut n| n.remove(network))
            .and_then(|e| e.ip_address)
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| EngineError::NoAddress(network.to_string()))
    }

    async fn answers(&self) -> Result<()> {
        let lost = |error| EngineError::Lost {
            at: self.at.clone(),
            error,
        };
        match tokio::time::timeout(Duration::from_secs(5), self.docker.ping()).await {
            Ok(answer) => answer.map(|_| ()).map_err(lost),
            Err(_) => Err(lost(bollard::errors::Error::RequestTimeoutError)),
        }
    }
}

/// Removes the container, running or not; a container already gone is not an error here.
async fn force_remove(docker: &bollard::Docker, id: &str) {
    let opts = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker.remove_container(id, Some(opts)).await;
}

/// Memory for one server container (no swap beyond it): a worker with thousands of idle
/// connections needs a few MiB; a leak hits this wall instead of the machine.
const MEMORY_LIMIT: i64 = 512 << 20;

/// Every container the runner makes: labelled, pinned, read-only, no capabilities, no new
/// privileges, bounded memory and process count, plus the profile's seccomp option (`None`:
/// the engine's default) — the relaxed profile lifts seccomp and nothing else. The image
/// itself runs as nobody (USER 65534 in docker/Dockerfile*.scratch).
fn locked_down(
    image: &str,
    network: &str,
    cpus: &[usize],
    seccomp: Option<String>,
) -> ContainerCreateBody {
    let cpuset = cpus
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut security_opt = vec!["no-new-privileges:true".to_string()];
    security_opt.extend(seccomp);
    ContainerCreateBody {
        image: Some(image.into()),
        labels: Some([(LABEL.to_string(), "1".to_string())].into()),
        host_config: Some(HostConfig {
            network_mode: Some(network.into()),
            cpuset_cpus: (!cpuset.is_empty()).then_some(cpuset),
            security_opt: Some(security_opt),
            cap_drop: Some(vec!["ALL".into()]),
            readonly_rootfs: Some(true),
            memory: Some(MEMORY_LIMIT),
            memory_swap: Some(MEMORY_LIMIT),
            // A worker thread per CPU, the main thread and a few helpers.
            pids_limit: Some(2 * cpus.len().max(1) as i64 + 16),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Whether Docker Engine `version`'s built-in seccomp profile denies io_uring: from 25.0 on
/// (moby #46762); 20.10 as Debian ships it lets it through. An unreadable version: assumed not.
fn blocks_io_uring(version: &str) -> bool {
    version
        .split('.')
        .next()
        .and_then(|major| major.parse::<u32>().ok())
        .is_some_and(|major| major >= 25)
}

#[cfg(test)]
mod default_profile_tests {
    use super::blocks_io_uring;

    #[test]
    fn docker_25_and_later_block_io_uring_by_default() {
        assert!(!blocks_io_uring("20.10.24+dfsg1"));
        assert!(!blocks_io_uring("24.0.7"));
        assert!(blocks_io_uring("25.0.3"));
        assert!(blocks_io_uring("27.1.1"));
        assert!(!blocks_io_uring("unknown"));
    }
}

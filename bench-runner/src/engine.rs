//! Where the server runs: a Docker container (through bollard) or a native child process. Both
//! start one server per measurement, report what it printed, its CPU time, and its SIGTERM
//! counters, and leave nothing behind.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bollard::models::{ContainerCreateBody, HostConfig, NetworkCreateRequest};
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateContainerOptionsBuilder, KillContainerOptionsBuilder,
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder, StatsOptionsBuilder, WaitContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;

use crate::model::{Profile, ServerConfig, ServerCounters, Startup};

/// Label on every container and image the runner makes; stale ones are removed at start.
pub const LABEL: &str = "rxbench";
pub const IMAGE: &str = "rxbench-server:latest";
pub const RUNNER_IMAGE: &str = "rxbench-runner:latest";
pub const RXLOAD_IMAGE: &str = "rxbench-rxload:latest";
const RXLOAD_DOCKERFILE: &str = include_str!("../../docker/Dockerfile.rxload.scratch");
const NO_IO_URING_PROFILE: &str = include_str!("../../docker/seccomp/no-io-uring.json");
const DOCKERFILE: &str = include_str!("../../docker/Dockerfile.scratch");
const RUNNER_DOCKERFILE: &str = include_str!("../../docker/Dockerfile.runner.scratch");

/// One server to start.
pub struct Launch {
    pub name: String,
    pub profile: Profile,
    pub config: ServerConfig,
    pub port: u16,
    pub cpus: Vec<usize>,
    /// The run's own Docker network (`--network bridge`); `None`: host networking.
    pub network: Option<String>,
}

impl Launch {
    fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .config
            .env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.push(("APP_PORT".into(), self.port.to_string()));
        env.push(("APP_WORKERS".into(), self.cpus.len().max(1).to_string()));
        env
    }
}

pub enum Instance {
    Docker {
        id: String,
    },
    Native {
        child: Child,
        stderr: Arc<Mutex<Vec<String>>>,
    },
}

pub enum Engine {
    Docker { docker: Docker, version: String },
    Native { server: PathBuf },
}

/// The Docker engine, if one answers (DOCKER_HOST is honoured).
pub async fn connect_docker() -> Result<(Docker, String)> {
    let docker = Docker::connect_with_defaults()
        .context("no Docker client configuration")?
        .with_timeout(Duration::from_secs(600));
    let docker = docker
        .negotiate_version()
        .await
        .context("the Docker engine does not answer")?;
    let v = docker
        .version()
        .await
        .context("the Docker engine does not answer")?;
    Ok((docker, v.version.unwrap_or_else(|| "unknown".into())))
}

impl Engine {
    pub fn describe(&self) -> String {
        match self {
            Engine::Docker { version, .. } => format!("docker {version}"),
            Engine::Native { .. } => "native".into(),
        }
    }

    /// Removes every container left by an earlier run (Ctrl-C, crash).
    pub async fn remove_stale(&self) -> Result<usize> {
        let Engine::Docker { docker, .. } = self else {
            return Ok(0);
        };
        let filters: HashMap<String, Vec<String>> =
            [("label".to_string(), vec![LABEL.to_string()])].into();
        let list = docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default()
                    .all(true)
                    .filters(&filters)
                    .build(),
            ))
            .await?;
        let mut n = 0;
        for c in list {
            if let Some(id) = c.id {
                docker
                    .remove_container(
                        &id,
                        Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                    )
                    .await?;
                n += 1;
            }
        }
        let networks = docker
            .list_networks(Some(
                ListNetworksOptionsBuilder::default()
                    .filters(&filters)
                    .build(),
            ))
            .await?;
        for net in networks {
            if let Some(name) = net.name {
                let _ = docker.remove_network(&name).await;
            }
        }
        Ok(n)
    }

    /// The run's own bridge network, labelled so that a later run removes it if this one dies.
    pub async fn create_network(&self, name: &str) -> Result<()> {
        let Engine::Docker { docker, .. } = self else {
            bail!("--network bridge needs a Docker engine");
        };
        let body = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            labels: Some([(LABEL.to_string(), "1".to_string())].into()),
            ..Default::default()
        };
        docker
            .create_network(body)
            .await
            .with_context(|| format!("creating network {name}"))?;
        Ok(())
    }

    pub async fn remove_network(&self, name: &str) {
        if let Engine::Docker { docker, .. } = self {
            let _ = docker.remove_network(name).await;
        }
    }

    /// The server container's address on `network`.
    pub async fn address_on(&self, inst: &Instance, network: &str) -> Result<String> {
        let (Engine::Docker { docker, .. }, Instance::Docker { id }) = (self, inst) else {
            bail!("--network bridge needs a Docker engine");
        };
        let info = docker.inspect_container(id, None).await?;
        info.network_settings
            .and_then(|n| n.networks)
            .and_then(|mut n| n.remove(network))
            .and_then(|e| e.ip_address)
            .filter(|ip| !ip.is_empty())
            .with_context(|| format!("the server container has no address on {network}"))
    }

    /// Starts rxload in a container on `network`, pinned to `cpus`; the returned future waits
    /// for it, reads its JSON report and removes it.
    pub async fn start_driver_container(
        &self,
        name: &str,
        network: &str,
        cpus: &[usize],
        args: Vec<String>,
        time_limit: Duration,
    ) -> Result<impl std::future::Future<Output = Result<driver::report::Report>> + Send + 'static>
    {
        let Engine::Docker { docker, .. } = self else {
            bail!("--network bridge needs a Docker engine");
        };
        let body = ContainerCreateBody {
            cmd: Some(args),
            ..locked_down(RXLOAD_IMAGE, network, cpus, None)
        };
        let id = docker
            .create_container(
                Some(CreateContainerOptionsBuilder::default().name(name).build()),
                body,
            )
            .await
            .context("creating the driver container")?
            .id;
        docker
            .start_container(&id, None)
            .await
            .context("starting the driver container")?;
        let docker = docker.clone();
        Ok(async move {
            // rxload ends by itself after its warm-up and duration; this bound only stops a
            // hung container from hanging the run.
            wait_not_running(&docker, &id, time_limit).await;
            let opts = LogsOptionsBuilder::default()
                .stdout(true)
                .stderr(true)
                .build();
            let (mut out, mut err) = (String::new(), String::new());
            let mut logs = docker.logs(&id, Some(opts));
            while let Some(Ok(chunk)) = logs.next().await {
                match chunk {
                    bollard::container::LogOutput::StdOut { message } => {
                        out.push_str(&String::from_utf8_lossy(&message))
                    }
                    other => err.push_str(&other.to_string()),
                }
            }
            force_remove(&docker, &id).await;
            serde_json::from_str(out.trim())
                .with_context(|| format!("rxload in its container: {}", err.trim()))
        })
    }

    /// Builds the scratch image around a static `server` (Docker; `None`: use the image
    /// already there), or checks the native binary.
    pub async fn prepare(&self, static_server: Option<&Path>) -> Result<()> {
        match (self, static_server) {
            (Engine::Native { server }, _) => {
                if !server.exists() {
                    bail!("{} does not exist", server.display());
                }
                Ok(())
            }
            (Engine::Docker { docker, .. }, Some(binary)) => {
                build_image(docker, IMAGE, DOCKERFILE, "server", binary).await
            }
            (Engine::Docker { docker, .. }, None) => {
                docker.inspect_image(IMAGE).await.with_context(|| {
                    format!("--no-build: image {IMAGE} is missing (run `bench-runner build-images` first)")
                })?;
                Ok(())
            }
        }
    }

    pub async fn start(&self, launch: &Launch) -> Result<Instance> {
        match self {
            Engine::Docker { docker, .. } => {
                let seccomp = match launch.profile {
                    Profile::Default => None,
                    Profile::NoIoUring => Some(format!("seccomp={NO_IO_URING_PROFILE}")),
                    Profile::Relaxed => Some("seccomp=unconfined".to_string()),
                };
                let network = launch.network.as_deref().unwrap_or("host");
                let env = launch
                    .env()
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let body = ContainerCreateBody {
                    env: Some(env),
                    ..locked_down(IMAGE, network, &launch.cpus, seccomp)
                };
                let created = docker
                    .create_container(
                        Some(
                            CreateContainerOptionsBuilder::default()
                                .name(&launch.name)
                                .build(),
                        ),
                        body,
                    )
                    .await
                    .with_context(|| format!("creating container {}", launch.name))?;
                let id = created.id;
                if let Err(e) = docker.start_container(&id, None).await {
                    let _ = docker
                        .remove_container(
                            &id,
                            Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                        )
                        .await;
                    return Err(e).context(format!("starting container {}", launch.name));
                }
                Ok(Instance::Docker { id })
            }
            Engine::Native { server } => {
                let mut cmd = Command::new(server);
                cmd.envs(launch.env())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                if launch.profile == Profile::NoIoUring {
                    sandbox::deny_io_uring_in_child(&mut cmd, libc::EPERM)?;
                }
                let cpus = launch.cpus.clone();
                // SAFETY: runs in the forked child before exec: builds a cpu_set_t on the stack
                // and calls sched_setaffinity, both async-signal-safe; nothing is allocated.
                unsafe {
                    cmd.pre_exec(move || {
                        if cpus.is_empty() {
                            return Ok(());
                        }
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        for &c in &cpus {
                            libc::CPU_SET(c, &mut set);
                        }
                        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
                            != 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                let mut child = cmd
                    .spawn()
                    .with_context(|| format!("starting {}", server.display()))?;
                let stderr = Arc::new(Mutex::new(Vec::new()));
                let pipe = child.stderr.take().expect("piped");
                let lines = stderr.clone();
                std::thread::spawn(move || {
                    for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                        lines.lock().unwrap().push(line);
                    }
                });
                Ok(Instance::Native { child, stderr })
            }
        }
    }

    /// All the log lines the server printed so far (stdout and stderr).
    async fn logs(&self, inst: &Instance) -> Vec<String> {
        match (self, inst) {
            (Engine::Docker { docker, .. }, Instance::Docker { id }) => {
                let opts = LogsOptionsBuilder::default()
                    .stdout(true)
                    .stderr(true)
                    .build();
                let mut stream = docker.logs(id, Some(opts));
                let mut text = String::new();
                while let Some(Ok(chunk)) = stream.next().await {
                    text.push_str(&chunk.to_string());
                }
                text.lines().map(str::to_string).collect()
            }
            (_, Instance::Native { stderr, .. }) => stderr.lock().unwrap().clone(),
            _ => vec![],
        }
    }

    pub async fn alive(&self, inst: &mut Instance) -> bool {
        match (self, inst) {
            (Engine::Docker { docker, .. }, Instance::Docker { id }) => docker
                .inspect_container(id, None)
                .await
                .ok()
                .and_then(|i| i.state)
                .and_then(|s| s.running)
                .unwrap_or(false),
            (_, Instance::Native { child, .. }) => matches!(child.try_wait(), Ok(None)),
            _ => false,
        }
    }

    /// Waits for the server's first line; on failure the error carries its last log lines.
    pub async fn wait_startup(&self, inst: &mut Instance, timeout: Duration) -> Result<Startup> {
        let deadline = Instant::now() + timeout;
        loop {
            let lines = self.logs(inst).await;
            if let Some(s) = lines.iter().find_map(|l| Startup::parse(l)) {
                return Ok(s);
            }
            if !self.alive(inst).await {
                bail!(
                    "the server exited before listening; its log:\n{}",
                    tail(&lines, 10)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "no start-up line after {timeout:?}; log so far:\n{}",
                    tail(&lines, 10)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Cumulative CPU time of the server, in nanoseconds.
    pub async fn cpu_ns(&self, inst: &Instance) -> Option<u64> {
        match (self, inst) {
            (Engine::Docker { docker, .. }, Instance::Docker { id }) => {
                let opts = StatsOptionsBuilder::default()
                    .stream(false)
                    .one_shot(true)
                    .build();
                let stats = docker.stats(id, Some(opts)).next().await?.ok()?;
                stats.cpu_stats?.cpu_usage?.total_usage
            }
            (_, Instance::Native { child, .. }) => {
                let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).ok()?;
                let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
                let ticks: u64 =
                    f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
                // SAFETY: sysconf has no preconditions.
                let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
                Some(ticks * 1_000_000_000 / hz)
            }
            _ => None,
        }
    }

    /// SIGTERM, wait, and read the counters line. The instance is removed either way.
    pub async fn stop(&self, inst: Instance) -> (Option<ServerCounters>, Vec<String>) {
        match (self, inst) {
            (Engine::Docker { docker, .. }, Instance::Docker { id }) => {
                let _ = docker
                    .kill_container(
                        &id,
                        Some(
                            KillContainerOptionsBuilder::default()
                                .signal("SIGTERM")
                                .build(),
                        ),
                    )
                    .await;
                wait_not_running(docker, &id, Duration::from_secs(15)).await;
                let lines = self.logs(&Instance::Docker { id: id.clone() }).await;
                force_remove(docker, &id).await;
                (lines.iter().find_map(|l| ServerCounters::parse(l)), lines)
            }
            (_, Instance::Native { mut child, stderr }) => {
                // SAFETY: kill(2) on our own child, not yet reaped.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                let mut out = String::new();
                if let Some(mut stdout) = child.stdout.take() {
                    let _ = stdout.read_to_string(&mut out);
                }
                let _ = child.wait();
                let mut lines = stderr.lock().unwrap().clone();
                lines.extend(out.lines().map(str::to_string));
                (out.lines().find_map(ServerCounters::parse), lines)
            }
            (_, _) => (None, vec![]),
        }
    }
}

/// Waits (at most `limit`) until the container is no longer running.
async fn wait_not_running(docker: &Docker, id: &str, limit: Duration) {
    let opts = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let wait = docker.wait_container(id, Some(opts));
    let _ = tokio::time::timeout(limit, wait.collect::<Vec<_>>()).await;
}

/// Removes the container, running or not; a container already gone is not an error here.
async fn force_remove(docker: &Docker, id: &str) {
    let opts = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker.remove_container(id, Some(opts)).await;
}

/// Every container the runner makes: labelled, pinned, read-only, no capabilities, no new
/// privileges, plus the profile's seccomp option (`None`: the engine's default).
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
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn tail(lines: &[String], n: usize) -> String {
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Builds `tag` from an in-memory context: `dockerfile` and one static binary.
pub async fn build_image(
    docker: &Docker,
    tag: &str,
    dockerfile: &str,
    name: &str,
    binary: &Path,
) -> Result<()> {
    let context = tar_context(dockerfile, name, binary)?;
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(tag)
        .rm(true)
        .forcerm(true)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        let info = item.with_context(|| format!("building image {tag}"))?;
        if let Some(detail) = info.error_detail {
            bail!(
                "building image {tag}: {}",
                detail.message.unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// Both images compose.yaml uses: the server and the runner itself.
pub async fn build_all_images(docker: &Docker, root: &Path) -> Result<()> {
    let server = build_static(root, "server")?;
    build_image(docker, IMAGE, DOCKERFILE, "server", &server).await?;
    let runner = build_static(root, "bench-runner")?;
    build_image(
        docker,
        RUNNER_IMAGE,
        RUNNER_DOCKERFILE,
        "bench-runner",
        &runner,
    )
    .await
}

fn tar_context(dockerfile: &str, name: &str, binary: &Path) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut add = |name: &str, bytes: &[u8], mode: u32| -> Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        builder.append_data(&mut header, name, bytes)?;
        Ok(())
    };
    add("Dockerfile", dockerfile.as_bytes(), 0o644)?;
    let bytes = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    add(name, &bytes, 0o755)?;
    Ok(builder.into_inner()?)
}

/// `cargo build --release` of one binary into its own target dir, because the runner may itself
/// run under a cargo that holds the workspace's build lock (`cargo run`, `cargo test`), and so
/// that the static build does not invalidate the normal cache. Returns the binary's path.
fn cargo_build(
    root: &Path,
    target_dir: &str,
    static_crt: bool,
    args: &[&str],
    bin: &str,
) -> Result<PathBuf> {
    let target_dir = root.join(target_dir);
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root)
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["build", "--release"])
        .args(args);
    let mut out = target_dir;
    if static_crt {
        // --target keeps build scripts and proc-macros dynamically linked.
        let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        cmd.env("RUSTFLAGS", "-C target-feature=+crt-static")
            .args(["--target", &triple]);
        out = out.join(triple);
    }
    let status = cmd
        .status()
        .with_context(|| format!("running cargo to build {bin}"))?;
    if !status.success() {
        bail!("building {bin} failed ({status})");
    }
    Ok(out.join("release").join(bin))
}

/// A static `package` binary for `FROM scratch`.
pub fn build_static(root: &Path, package: &str) -> Result<PathBuf> {
    cargo_build(root, "target/static", true, &["-p", package], package)
}

/// `rxload` with its goose engine, for `--driver goose` (the runner itself links the driver
/// without goose).
pub fn build_rxload_with_goose(root: &Path) -> Result<PathBuf> {
    cargo_build(
        root,
        "target/native",
        false,
        &["-p", "driver", "--bin", "rxload"],
        "rxload",
    )
}

/// A static `rxload` without goose, and its image, for `--network bridge`.
pub async fn build_rxload_image(docker: &Docker, root: &Path) -> Result<()> {
    let root = root.to_path_buf();
    let binary = tokio::task::spawn_blocking(move || {
        cargo_build(
            &root,
            "target/static",
            true,
            &["-p", "driver", "--no-default-features", "--bin", "rxload"],
            "rxload",
        )
    })
    .await??;
    build_image(docker, RXLOAD_IMAGE, RXLOAD_DOCKERFILE, "rxload", &binary).await
}

/// The native `server`.
pub fn build_native_server(root: &Path) -> Result<PathBuf> {
    cargo_build(root, "target/native", false, &["-p", "server"], "server")
}

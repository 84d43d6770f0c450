//! Builds: the static binaries for `FROM scratch` images, the images themselves (offline, from
//! an in-memory tar context), and the native binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use bollard::query_parameters::BuildImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;

pub const IMAGE: &str = "rxbench-server:latest";
pub const RUNNER_IMAGE: &str = "rxbench-runner:latest";
pub const RXLOAD_IMAGE: &str = "rxbench-rxload:latest";
const DOCKERFILE: &str = include_str!("../../../docker/Dockerfile.scratch");
const RUNNER_DOCKERFILE: &str = include_str!("../../../docker/Dockerfile.runner.scratch");
const RXLOAD_DOCKERFILE: &str = include_str!("../../../docker/Dockerfile.rxload.scratch");

/// Why a binary or an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("running cargo to build {bin}: {error}")]
    Cargo { bin: String, error: std::io::Error },
    #[error("building {bin} failed ({status})")]
    Failed {
        bin: String,
        status: std::process::ExitStatus,
    },
    #[error("{} does not exist after its build", .0.display())]
    Missing(PathBuf),
    #[error("reading {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("packing the build context of {tag}: {error}")]
    Context { tag: String, error: std::io::Error },
    #[error("building image {tag}: {error}")]
    Engine {
        tag: String,
        error: bollard::errors::Error,
    },
    #[error("building image {tag}: {message}")]
    Refused { tag: String, message: String },
}

pub type Result<T, E = BuildError> = std::result::Result<T, E>;

/// Builds `tag` from an in-memory context: `dockerfile` and one static binary.
pub async fn build_image(
    docker: &Docker,
    tag: &str,
    dockerfile: &str,
    name: &str,
    binary: &Path,
) -> Result<()> {
    let context = tar_context(dockerfile, name, binary).map_err(|e| match e {
        Packing::Read(error) => BuildError::Read {
            path: binary.to_path_buf(),
            error,
        },
        Packing::Tar(error) => BuildError::Context {
            tag: tag.into(),
            error,
        },
    })?;
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(tag)
        .rm(true)
        .forcerm(true)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        // The engine's refusal arrives either as a stream error or as an item's error detail.
        let info = item.map_err(|error| match error {
            bollard::errors::Error::DockerStreamError { error } => BuildError::Refused {
                tag: tag.into(),
                message: error,
            },
            error => BuildError::Engine {
                tag: tag.into(),
                error,
            },
        })?;
        if let Some(detail) = info.error_detail {
            return Err(BuildError::Refused {
                tag: tag.into(),
                message: detail.message.unwrap_or_default(),
            });
        }
    }
    Ok(())
}

/// The server image from a static `server` binary.
pub async fn build_server_image(docker: &Docker, binary: &Path) -> Result<()> {
    build_image(docker, IMAGE, DOCKERFILE, "server", binary).await
}

/// Every image the project ships: the server, the runner (compose.yaml) and rxload
/// (deploy/k8s's driver Job).
pub async fn build_all_images(docker: &Docker, root: &Path) -> Result<()> {
    let server = static_binary(root, "server")?;
    build_server_image(docker, &server).await?;
    let runner = static_binary(root, "bench-runner")?;
    build_image(
        docker,
        RUNNER_IMAGE,
        RUNNER_DOCKERFILE,
        "bench-runner",
        &runner,
    )
    .await?;
    // Without goose: the driver Job needs rxload's own engines only.
    let rxload = cargo_build(
        root,
        "target/static",
        true,
        &["-p", "driver", "--no-default-features", "--bin", "rxload"],
        "rxload",
    )?;
    build_image(docker, RXLOAD_IMAGE, RXLOAD_DOCKERFILE, "rxload", &rxload).await
}

/// What went wrong packing a build context.
enum Packing {
    Read(std::io::Error),
    Tar(std::io::Error),
}

fn tar_context(dockerfile: &str, name: &str, binary: &Path) -> Result<Vec<u8>, Packing> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut add = |name: &str, bytes: &[u8], mode: u32| -> Result<(), Packing> {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        builder
            .append_data(&mut header, name, bytes)
            .map_err(Packing::Tar)
    };
    add("Dockerfile", dockerfile.as_bytes(), 0o644)?;
    let bytes = std::fs::read(binary).map_err(Packing::Read)?;
    add(name, &bytes, 0o755)?;
    builder.into_inner().map_err(Packing::Tar)
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
    let status = cmd.status().map_err(|error| BuildError::Cargo {
        bin: bin.into(),
        error,
    })?;
    if !status.success() {
        return Err(BuildError::Failed {
            bin: bin.into(),
            status,
        });
    }
    let binary = out.join("release").join(bin);
    if !binary.exists() {
        return Err(BuildError::Missing(binary));
    }
    Ok(binary)
}

/// A static `package` binary for `FROM scratch`.
pub fn static_binary(root: &Path, package: &str) -> Result<PathBuf> {
    cargo_build(root, "target/static", true, &["-p", package], package)
}

/// `rxload` with its goose engine, for `--driver goose` (the runner itself links the driver
/// without goose).
pub fn rxload_with_goose(root: &Path) -> Result<PathBuf> {
    cargo_build(
        root,
        "target/native",
        false,
        &["-p", "driver", "--bin", "rxload"],
        "rxload",
    )
}

/// The peers workspace (peers/: the floor and the Rust peers), release; returns the folder
/// holding their binaries.
pub fn peers(root: &Path) -> Result<PathBuf> {
    let floor = cargo_build(
        root,
        "target/peers",
        false,
        &["--manifest-path", "peers/Cargo.toml", "--workspace"],
        "floor",
    )?;
    Ok(floor.parent().expect("release folder").to_path_buf())
}

/// The native `server`.
/// The server binary a native run spawns: `RXBENCH_SERVER_BIN` when set (a prebuilt static
/// binary carried to a machine without a toolchain: scripts/scale-run.sh), else built here.
pub fn native_server(root: &Path) -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("RXBENCH_SERVER_BIN") {
        return Ok(PathBuf::from(bin));
    }
    cargo_build(root, "target/native", false, &["-p", "server"], "server")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many containers the engine holds, stopped ones included.
    async fn containers(docker: &Docker) -> usize {
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .build();
        docker.list_containers(Some(options)).await.unwrap().len()
    }

    /// A build the engine refuses (a `RUN` in a `FROM scratch` image has no shell) is an error
    /// naming the image and the engine's reason, and leaves no build container behind.
    #[tokio::test]
    async fn an_image_build_that_fails_names_the_image_and_the_cause_and_leaves_nothing() {
        let Ok(engine) = crate::engine::docker::connect().await else {
            assert!(
                std::env::var_os("RXBENCH_REQUIRE_DOCKER").is_none(),
                "RXBENCH_REQUIRE_DOCKER is set but no engine answers"
            );
            let line = "SKIPPED an_image_build_that_fails…: no Docker engine answers\n";
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return;
        };
        let docker = &engine.docker;
        let binary =
            std::env::temp_dir().join(format!("rxbench-build-test-{}", std::process::id()));
        std::fs::write(&binary, b"not a program").unwrap();
        let before = containers(docker).await;
        let tag = "rxbench-build-failure-test:latest";
        let err = build_image(
            docker,
            tag,
            "FROM scratch\nCOPY server /server\nRUN /server --never-runs\n",
            "server",
            &binary,
        )
        .await
        .unwrap_err();
        std::fs::remove_file(&binary).ok();
        assert!(matches!(err, BuildError::Refused { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("building image {tag}: ")), "{msg}");
        assert!(
            msg.len() > format!("building image {tag}: ").len() + 10,
            "{msg}"
        );
        assert_eq!(
            containers(docker).await,
            before,
            "a build container was left"
        );
        assert!(
            docker.inspect_image(tag).await.is_err(),
            "a failed build must not leave its tag"
        );
    }
}

//! `bench-runner export-benchmarker OUT`: the server as a the-benchmarker/web-frameworks entry.
//!
//! Their Rust template copies `**/*.rs` and the root `Cargo.toml` into `FROM rust:1.92-slim`,
//! runs `cargo build --release` and expects `target/release/server`. So the export is one
//! package named `server` whose library target is the reactor (`reactor/src/lib.rs`) and whose
//! binary is the app (`app/src/main.rs`): only .rs files and one manifest, nothing else needed.

use std::path::Path;

use anyhow::{Context, Result};

const MANIFEST: &str = r#"[package]
name = "server"
version = "0.1.0"
edition = "2021"
# Their build image is rust:1.92-slim: let the resolver pick versions that build there.
rust-version = "1.92"
autobins = false
autotests = false
autobenches = false
autoexamples = false

[lib]
name = "reactor"
path = "reactor/src/lib.rs"

[[bin]]
name = "server"
path = "app/src/main.rs"

[dependencies]
libc = "0.2.170"
io-uring = "0.7.10"
thiserror = "2.0"
httparse = "1.10"
httpdate = "1.0"
itoa = "1.0"
socket2 = { version = "0.6", features = ["all"] }
serde_json = "1.0"

[profile.release]
lto = true
codegen-units = 1
panic = "abort"
"#;

const CONFIG: &str =
    "# rxbench's contract server: one reactor with io_uring and epoll (rx / oneshot / legacy)
# receive paths. APP_BACKEND=auto (the default) uses io_uring where the seccomp profile allows
# it and falls back to edge-triggered epoll, naming the errno on its first log line.
framework:
  version: \"0.1\"
files:
  - \"**/*.rs\"
  - Cargo.toml
";

fn copy_rs(from: &Path, to: &Path) -> Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let path = entry?.path();
        let name = path.file_name().expect("entry name").to_owned();
        if path.is_dir() {
            if name == "bin" {
                continue; // test helpers (reactor-probe), not part of the server
            }
            n += copy_rs(&path, &to.join(&name))?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            std::fs::create_dir_all(to)?;
            std::fs::copy(&path, to.join(&name))
                .with_context(|| format!("copying {}", path.display()))?;
            n += 1;
        }
    }
    Ok(n)
}

pub fn export(root: &Path, out: &Path) -> Result<()> {
    let dir = out.join("rust").join("rxbench");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("Cargo.toml"), MANIFEST)?;
    std::fs::write(dir.join("config.yaml"), CONFIG)?;
    let n = copy_rs(&root.join("reactor/src"), &dir.join("reactor/src"))?
        + copy_rs(&root.join("app/src"), &dir.join("app/src"))?;
    println!("wrote {} ({} source files): build with `cargo build --release` there; the binary is target/release/server", dir.display(), n);
    Ok(())
}

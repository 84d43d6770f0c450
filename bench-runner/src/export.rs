//! `bench-runner export-benchmarker OUT`: the server as a the-benchmarker/web-frameworks entry.
//!
//! Their Rust template copies `**/*.rs` and the root `Cargo.toml` into `FROM rust:1.92-slim`
//! (and whatever `framework.files` in config.yaml adds), runs `cargo build --release` and
//! expects `target/release/server`. So the export is one package named `server` whose library
//! target is the reactor (`reactor/src/lib.rs`) and whose binary is the app
//! (`app/src/main.rs`), plus `wire` (what the server prints and reads, shared with the
//! runner) as a path dependency whose manifest `files` lists; config.yaml and a README for
//! the entry's reviewers come beside them.

use std::path::Path;

use crate::file::{self, FileError};

/// `wire`'s manifest in the entry (the workspace's inherits fields the entry has no workspace
/// for).
const WIRE_MANIFEST: &str = r#"[package]
name = "wire"
version = "0.1.0"
edition = "2021"
rust-version = "1.92"

[dependencies]
serde = { version = "1.0", features = ["derive"] }
serde_json = "1.0"
thiserror = "2.0"
"#;

const MANIFEST: &str = r#"[package]
name = "server"
version = "0.1.0"
edition = "2021"
# Their build image is rust:1.92-slim and their build copies no Cargo.lock: resolver 3 makes
# cargo pick dependency versions whose rust-version this toolchain meets (edition 2021's
# default resolver ignores rust-version).
rust-version = "1.92"
resolver = "3"
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
# Lower bounds that build: socket2 0.6 needs libc 0.2.172; min-wait needs io-uring 0.7.13.
libc = "0.2.172"
io-uring = "0.7.13"
thiserror = "2.0"
httparse = "1.10"
httpdate = "1.0"
itoa = "1.0"
memchr = "2.7"
socket2 = { version = "0.6", features = ["all"] }
serde_json = "1.0"
wire = { path = "wire" }

[profile.release]
lto = true
codegen-units = 1
panic = "abort"
"#;

/// Why the entry could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("--github {0}: expected OWNER/REPO")]
    Github(String),
    #[error("--website {0}: expected the project's host as their config holds it (hyper.rs), with or without http(s):// and a path")]
    Website(String),
    #[error(transparent)]
    Io(#[from] FileError),
}

type Result<T, E = ExportError> = std::result::Result<T, E>;

/// Where the entry's project lives: their results page links `framework.github` or
/// `framework.website`, and every Rust entry there has one.
#[derive(Debug, Default, Clone)]
pub struct Links {
    pub github: Option<String>,
    pub website: Option<String>,
}

/// Their config holds a bare host (`website: hyper.rs`) and their results page prints
/// `"#{scheme}://#{website}"`: a URL given here keeps its host and path, not its scheme or a
/// trailing slash (or the page would link `https://https://…`). `None` if there is no host.
fn bare_website(w: &str) -> Option<String> {
    let rest = w
        .strip_prefix("https://")
        .or_else(|| w.strip_prefix("http://"))
        .unwrap_or(w)
        .trim_end_matches('/');
    let host = rest.split('/').next()?;
    let label =
        |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let ok = host.contains('.')
        && host.split('.').all(label)
        && rest
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"\"'\\".contains(&b));
    ok.then(|| rest.to_string())
}

impl Links {
    /// The links as their config takes them: checked, the website as a bare host.
    fn normalized(&self) -> Result<Links> {
        self.check_github()?;
        let website = match &self.website {
            None => None,
            Some(w) => Some(bare_website(w).ok_or_else(|| ExportError::Website(w.clone()))?),
        };
        Ok(Links {
            github: self.github.clone(),
            website,
        })
    }

    fn check_github(&self) -> Result<()> {
        if let Some(g) = &self.github {
            let ok = g.split('/').count() == 2
                && g.split('/').all(|p| {
                    !p.is_empty()
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                });
            if !ok {
                return Err(ExportError::Github(g.clone()));
            }
        }
        Ok(())
    }
}

/// config.yaml: everything under `framework:`, where their Rakefile reads it (a top-level
/// `files:` is ignored there).
fn config(links: &Links) -> String {
    let mut s = String::from(
        "# rxbench's contract server: one reactor with io_uring and epoll (rx / oneshot / legacy)
# receive paths. APP_BACKEND=auto (the default) uses io_uring where the seccomp profile allows
# it and falls back to edge-triggered epoll, naming the errno on its first log line.
framework:
",
    );
    if let Some(g) = &links.github {
        s += &format!("  github: {g}\n");
    }
    if let Some(w) = &links.website {
        s += &format!("  website: {w}\n");
    }
    s += "  version: \"0.1\"\n  files:\n    - \"**/*.rs\"\n    - Cargo.toml\n    - wire/Cargo.toml\n";
    s
}

/// The entry's own README: the source's comments point here (the rest of rxbench's docs do
/// not travel with the entry).
const README: &str = "# rxbench server

The-benchmarker contract (`GET /`, `GET /user/:id`, `POST /user`; port 3000) on rxbench's
reactor: io_uring, or edge-triggered epoll registered once per connection.

## Knobs (environment)

| knob | default | meaning |
| --- | --- | --- |
| `APP_BIND` | `0.0.0.0` | IPv4 address every worker binds |
| `APP_PORT` | `3000` | port, bound on `APP_BIND` by every worker (`SO_REUSEPORT`) |
| `APP_WORKERS` | CPUs in the affinity mask | worker threads, one reactor each |
| `APP_PIN` | `0` | `1`: pin worker *i* to the *i*-th allowed CPU |
| `APP_BACKEND` | `auto` | `auto`, `io_uring` (refuse to start without it), `epoll` |
| `APP_EPOLL_MODE` | `rx` | `rx` (registered once), `oneshot`, `legacy` (the old re-arm) |
| `APP_HEADER_TIMEOUT` | `10` | seconds to deliver a whole request |
| `APP_KEEPALIVE_TIMEOUT` | `15` | seconds an idle keep-alive connection is kept |
| `APP_SEND_TIMEOUT` | `30` | seconds a send may wait for a client that does not read |
| `APP_MAX_BODY` | `1048576` | largest request body (413 above) |

## io_uring and Docker

Docker Engine >= 25 (and containerd >= 2, Podman, CRI-O) deny `io_uring_setup` under their
default seccomp profile. With `APP_BACKEND=auto` the server then runs on epoll and says why on
its first log line, e.g.
`server listening on 0.0.0.0:3000 workers=2 backend=epoll/rx io_uring=unavailable(EPERM)`.
SIGTERM prints one JSON line of per-worker request and syscall counters; SIGUSR1 prints the
same line and keeps serving.

## Load models

The board's load generator has changed with time, and with it what a result measures
(their pull requests): wrk with `Connection: close` — a connection per request — until
2025-03 (#8183); oha, a connection per request (#8258); wrk kept alive from 2025-04 (#8344);
oha a connection per request again from 2025-09 (#8630, `--disable-keepalive`); zrk, kept
alive, from 2026-08 (#9668; #9714, which asked for both modes, closed unmerged). rxbench
measures this server in the three models those periods used: `per-request` (a fresh TCP
connection per request: the wrk-close and oha periods), `keepalive` (closed loop, kept
alive: the wrk period of 2025 and zrk `--closed`) and `open` (zrk's default, `-R RATE`,
latency from each request's due time) — `bench-runner --load keepalive,per-request,open`,
with its own generator rxload and, as a cross-check, `--driver oha`; each of its results
names the load model it ran. With one request per connection the server answers
`Connection: close` by closing itself, without lingering when the client sent nothing after
its last request.

## Arguments

The server takes its configuration from the environment. Their pipeline starts containers
with `docker run -td IMAGE --network host`, whose trailing words reach an exec-form
entrypoint as arguments: the server ignores words it does not take, naming them once on
stderr after its start-up line.
";

/// Files that exist for rxbench's own tests and fuzz target, not for the server: the entry
/// leaves them out (and the declarations that name them, below).
const TEST_ONLY: [&str; 3] = [
    "app/src/http/tests.rs",
    "app/src/http/invariants.rs",
    "app/src/framing_reference.rs",
];

/// `text` without the `#[cfg(test)]` / `#[cfg(any(test, fuzzing))]` declarations of the
/// modules in [`TEST_ONLY`] (`mod m;`, `pub use m::…;`): the entry carries neither the files
/// nor a `fuzzing` cfg its manifest would have to declare.
fn without_test_modules(text: &str) -> String {
    let dropped: Vec<&str> = TEST_ONLY
        .iter()
        .filter_map(|p| Path::new(p).file_stem()?.to_str())
        .collect();
    let names_dropped = |line: &str| {
        let line = line.trim();
        let item = line
            .strip_prefix("pub use ")
            .or_else(|| line.strip_prefix("mod "))
            .unwrap_or("");
        dropped.iter().any(|m| {
            item.strip_prefix(m)
                .is_some_and(|rest| rest.starts_with([';', ':']))
        })
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < lines.len() {
        let gated = lines[i].trim_start().starts_with("#[cfg(") && lines[i].contains("test");
        if gated && lines.get(i + 1).is_some_and(|next| names_dropped(next)) {
            i += 2;
            continue;
        }
        out.push_str(lines[i]);
        out.push('\n');
        i += 1;
    }
    out
}

/// The entry's comments point at rxbench's docs where it has the page: the knobs are in its
/// own README; every other `docs/` page is rxbench's (at `docs_base` when the entry names the
/// project's repository).
fn relinked(text: &str, docs_base: &str) -> String {
    text.replace("docs/runtime-config.md", "README.md")
        .replace("docs/", &format!("{docs_base}docs/"))
}

/// The app's library target (app/src/lib.rs) is for the runner, whose mechanism probe serves
/// requests with the server's own worker; the entry's one library target is the reactor. So
/// the entry's binary declares the app's modules itself: main.rs gets lib.rs's module
/// declarations where it declares its own, and says `crate::` where it said `server::`. What
/// only the probe uses is dead code in a binary, allowed there by name.
fn binary_root(main: &str, lib: &str) -> String {
    let decls: String = lib
        .lines()
        .filter(|l| !l.starts_with("//!") && !l.trim().is_empty())
        .map(|l| match l.strip_prefix("pub mod ") {
            Some(rest) => format!(
                "#[allow(dead_code)] // what only the runner's in-process probe uses\nmod {rest}\n"
            ),
            None => format!("{l}\n"),
        })
        .collect();
    main.replacen(
        "mod healthcheck;\n",
        &format!("{decls}mod healthcheck;\n"),
        1,
    )
    .replace("use server::", "use crate::")
}

fn copy_rs(root: &Path, from: &str, to: &Path, docs_base: &str) -> Result<usize> {
    let dir = root.join(from);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).map_err(file::error("reading", &dir))? {
        let path = entry.map_err(file::error("reading", &dir))?.path();
        let name = path.file_name().expect("entry name").to_owned();
        let relative = format!("{from}/{}", name.to_string_lossy());
        if path.is_dir() {
            if name == "bin" {
                continue; // test helpers (reactor-probe), not part of the server
            }
            n += copy_rs(root, &relative, &to.join(&name), docs_base)?;
        } else if path.extension().is_some_and(|e| e == "rs")
            && !TEST_ONLY.contains(&relative.as_str())
            && relative != "app/src/lib.rs"
        {
            std::fs::create_dir_all(to).map_err(file::error("creating", to))?;
            let mut text = std::fs::read_to_string(&path).map_err(file::error("reading", &path))?;
            if relative == "app/src/main.rs" {
                let lib = dir.join("lib.rs");
                let lib = std::fs::read_to_string(&lib).map_err(file::error("reading", &lib))?;
                text = binary_root(&text, &lib);
            }
            let target = to.join(&name);
            std::fs::write(&target, relinked(&without_test_modules(&text), docs_base))
                .map_err(file::error("writing", &target))?;
            n += 1;
        }
    }
    Ok(n)
}

pub fn export(root: &Path, out: &Path, links: &Links) -> Result<()> {
    let links = &links.normalized()?;
    if links.github.is_none() && links.website.is_none() {
        eprintln!("bench-runner: warning: neither --github nor --website given; every Rust entry in the-benchmarker has one (their results page links it), so a maintainer would send this entry back");
    }
    let dir = out.join("rust").join("rxbench");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(file::error("clearing", &dir))?;
    }
    std::fs::create_dir_all(dir.join("wire")).map_err(file::error("creating", &dir))?;
    let files = [
        ("Cargo.toml", MANIFEST.to_string()),
        ("config.yaml", config(links)),
        ("README.md", README.to_string()),
        ("wire/Cargo.toml", WIRE_MANIFEST.to_string()),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(file::error("writing", &path))?;
    }
    let docs_base = match &links.github {
        Some(repo) => format!("https://github.com/{repo}/blob/main/"),
        None => "rxbench's ".to_string(),
    };
    let mut n = 0;
    for part in ["reactor", "app", "wire"] {
        n += copy_rs(
            root,
            &format!("{part}/src"),
            &dir.join(part).join("src"),
            &docs_base,
        )?;
    }
    println!("wrote {} ({} source files): build with `cargo build --release` there; the binary is target/release/server", dir.display(), n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_website_is_written_as_the_bare_host_their_page_puts_a_scheme_before() {
        for (given, written) in [
            ("hyper.rs", "hyper.rs"),
            ("https://hyper.rs/", "hyper.rs"),
            ("http://example.org/docs/server", "example.org/docs/server"),
        ] {
            assert_eq!(bare_website(given).as_deref(), Some(written), "{given}");
        }
        for bad in [
            "localhost",
            "https://",
            "not a host.rs",
            "a..rs",
            "x.rs/\"quoted\"",
        ] {
            assert_eq!(bare_website(bad), None, "{bad}");
        }
        let links = Links {
            github: None,
            website: Some("https://hyper.rs".into()),
        };
        assert!(config(&links.normalized().unwrap()).contains("  website: hyper.rs\n"));
    }

    #[test]
    fn test_only_declarations_go_and_everything_else_stays() {
        let text = "mod encode;\n#[cfg(any(test, fuzzing))]\nmod invariants;\nmod route;\n#[cfg(any(test, fuzzing))]\npub use invariants::check_invariants;\n#[cfg(test)]\npub use invariants::smoke_corpus;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod pool_tests;\n";
        assert_eq!(
            without_test_modules(text),
            "mod encode;\nmod route;\n#[cfg(test)]\nmod pool_tests;\n"
        );
    }

    #[test]
    fn docs_links_point_where_the_page_is() {
        let text = "// see docs/runtime-config.md and docs/performance.md";
        assert_eq!(
            relinked(text, "https://github.com/o/r/blob/main/"),
            "// see README.md and https://github.com/o/r/blob/main/docs/performance.md"
        );
        assert_eq!(
            relinked(text, "rxbench's "),
            "// see README.md and rxbench's docs/performance.md"
        );
    }
}

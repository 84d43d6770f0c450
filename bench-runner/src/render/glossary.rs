//! The terms every report uses, defined once; the headline links here.

/// table.md's (and report.html's) last section.
pub const GLOSSARY: &str = "\n## Glossary

- **the block**: a seccomp profile that denies `io_uring_setup` (Docker Engine ≥ 25, containerd ≥ 2: EPERM; Podman and CRI-O: ENOSYS). A server that asked for io_uring then falls back to epoll.
- **`default`, `no-io-uring`, `relaxed`**: the three seccomp profiles a server runs under — the engine's own default; this project's copy of it that denies io_uring (the block, on any engine); no seccomp filter at all (`seccomp=unconfined`). What the block costs is a server under `no-io-uring` against the same server under `relaxed`.
- **io_uring server**: this project's server with `APP_BACKEND=auto` — io_uring where the profile allows it, epoll `rx` where it does not (its start-up line names the errno).
- **`rx`, `legacy`, `oneshot`**: epoll receive paths. `rx` registers a connection once, edge-triggered (no `epoll_ctl` per request: nginx's way, and the seed PR's fix); `legacy` re-arms a one-shot registration on every request (a failed ADD, then MOD: two `epoll_ctl` a request, the seed PR's \"before\"); `oneshot` re-arms with one MOD.
- **CPU per request**: the server's CPU time (its cgroup's, or its process's natively) over a slice, divided by the requests it answered. Steadier than req/s on a shared machine, and meaningful whether or not the server is saturated.
- **saturated**: the server used at least 90 % of its CPUs in the slice; only then does its req/s measure the server rather than the driver or the machine.
- **kept alive / a connection per request / open loop**: the load models. Closed loop on keep-alive connections (wrk's); a fresh connection for every request (oha `--disable-keepalive`, the-benchmarker's 2025–2026 model); requests due on a fixed schedule at a share of the server's capacity, latency counted from the due time (wrk2's, zrk's).
- **slice, round, block**: a slice is one server driven for about a second; a round drives every server once per load model and connection level, in a fresh random order; a block is the run of slices of one load model and level within a round.
- **cell**: one load model, connection level (and route): every comparison is made within a cell.
- **paired change, interval**: the ratio of two servers' figures over the same rounds, and its 95 % interval over rounds and instances (docs/methodology.md). A change is reported as a result only when its interval excludes no change and it is larger than what two identical servers (the A/A control) differed by in its cell.
- **not resolved at ±x %**: the interval includes no change and reaches x % from it: this run cannot tell a difference smaller than that.
- **A/A control**: `io_uring-control`, the io_uring server again as a configuration of its own. Identical servers compared as if different: the width of their interval is the run's resolution, and they should come out apart in about one cell in twenty.
- **instances**: each configuration runs as several separate processes (2 by default), because two identical processes differ by 1–2 % (memory placement); the interval covers that. A run with `--relaunch round` starts them afresh before every round.
";

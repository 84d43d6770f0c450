//! The reactor's own syscall counters agree with `strace -c -f` on a short echo run, for every
//! backend. strace is the independent witness; `.ci/run` installs it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

const PROBE: &str = env!("CARGO_BIN_EXE_reactor-probe");

/// Syscalls that only the event loop makes in reactor-probe (std's own setup uses none of
/// them), so the two counts must be equal, not merely close.
const LOOP_ONLY: [&str; 6] = [
    "epoll_wait",
    "epoll_ctl",
    "recvfrom",
    "sendto",
    "accept4",
    "io_uring_enter",
];

fn strace_counts(path: &std::path::Path) -> HashMap<String, u64> {
    // Rows: "% time seconds usecs/call calls [errors] syscall".
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 || f[0].starts_with('%') || f[0].starts_with('-') {
                return None;
            }
            let name = *f.last()?;
            Some((name.to_string(), f[3].parse().ok()?))
        })
        .collect()
}

fn probe_counts(line: &str) -> HashMap<String, u64> {
    let mut out: HashMap<String, u64> = HashMap::new();
    for kv in line.trim_start_matches("counts ").split_whitespace() {
        let (k, v) = kv.split_once('=').unwrap();
        let k = if k.starts_with("epoll_ctl_") {
            "epoll_ctl"
        } else {
            k
        };
        *out.entry(k.to_string()).or_default() += v.parse::<u64>().unwrap();
    }
    out
}

#[test]
fn counters_match_strace() {
    if Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is not installed (apt-get install strace; .ci/run does this)");
    }
    let dir = std::env::temp_dir().join(format!("rxbench-strace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (backend, mode) in [
        ("io_uring", "rx"),
        ("epoll", "rx"),
        ("epoll", "oneshot"),
        ("epoll", "legacy"),
    ] {
        let out_file = dir.join(format!("{backend}-{mode}.txt"));
        let mut child = Command::new("strace")
            .args(["-f", "-c", "-o"])
            .arg(&out_file)
            .args([
                "--",
                PROBE,
                "--backend",
                backend,
                "--mode",
                mode,
                "--conns",
                "2",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();

        let mut clients: Vec<TcpStream> = (0..2)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        for i in 0..100 {
            for c in clients.iter_mut() {
                let msg = format!("request {i:04}");
                c.write_all(msg.as_bytes()).unwrap();
                let mut back = vec![0u8; msg.len()];
                c.read_exact(&mut back).unwrap();
                assert_eq!(back, msg.as_bytes());
            }
        }
        drop(clients);
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert!(child.wait().unwrap().success());

        let ours = probe_counts(&line);
        let theirs = strace_counts(&out_file);
        for name in LOOP_ONLY {
            let (o, t) = (ours[name], theirs.get(name).copied().unwrap_or(0));
            assert_eq!(o, t, "{backend}/{mode}: {name}: counters {o}, strace {t}");
        }
        // The run really exercised the path it claims.
        let busy = if backend == "io_uring" {
            "io_uring_enter"
        } else {
            "recvfrom"
        };
        assert!(ours[busy] >= 200, "{backend}/{mode}: {ours:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

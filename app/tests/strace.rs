//! The server's own syscall counters (its SIGTERM line — what bench-runner's tables are made
//! of) agree with strace's count of the same run: a keep-alive run on epoll/rx and io_uring.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use common::{Launch, Server};

/// strace -c's table: syscall -> calls (all threads).
fn strace_table(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 || f[0].starts_with('%') || f[0].starts_with('-') {
                return None;
            }
            Some((f.last()?.to_string(), f[3].parse().ok()?))
        })
        .collect()
}

#[test]
fn counters_agree_with_strace_within_one_percent_on_a_keep_alive_run() {
    if Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is needed (.ci/run installs it)");
    }
    for backend in ["epoll", "io_uring"] {
        let table =
            std::env::temp_dir().join(format!("rxbench-strace-{backend}-{}", std::process::id()));
        let table_path = table.to_str().unwrap();
        let server = Server::start_through(
            &["strace", "-f", "-c", "-o", table_path],
            Launch {
                env: &[("APP_BACKEND", backend)],
                deny_io_uring: None,
            },
        );
        let port = server.port;
        // 8 keep-alive connections, 250 requests each, one at a time per connection.
        let mut conns: Vec<std::net::TcpStream> = (0..8)
            .map(|_| {
                let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                c
            })
            .collect();
        let mut buf = [0u8; 256];
        for i in 0..250 {
            for c in conns.iter_mut() {
                c.write_all(format!("GET /user/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
                    .unwrap();
            }
            for c in conns.iter_mut() {
                let n = c.read(&mut buf).unwrap();
                assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
            }
        }
        drop(conns);
        std::thread::sleep(Duration::from_millis(200));
        // SIGTERM to the server itself (strace's child), then strace writes its table.
        let pids = Command::new("pgrep")
            .args(["-P", &server.pid().to_string()])
            .output()
            .unwrap();
        let pid = String::from_utf8_lossy(&pids.stdout)
            .lines()
            .next()
            .unwrap()
            .trim()
            .to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let (status, json, _) = server.exited();
        assert!(status.success());
        let ours = &json["workers"][0]["syscalls"];
        let theirs = strace_table(&std::fs::read_to_string(&table).unwrap());
        let _ = std::fs::remove_file(&table);
        let n = |k: &str| ours[k].as_u64().unwrap_or_else(|| panic!("{k} in {ours}"));
        // Syscalls only the worker makes (the main thread's writes, futexes and signal waits
        // are not the worker's and are not counted by it).
        let mut compared = vec![
            ("accept4", n("accept4")),
            (
                "epoll_ctl",
                n("epoll_ctl_add") + n("epoll_ctl_mod") + n("epoll_ctl_del"),
            ),
        ];
        match backend {
            "epoll" => compared.extend([
                ("recvfrom", n("recvfrom")),
                ("sendto", n("sendto")),
                ("epoll_wait", n("epoll_wait")),
            ]),
            _ => compared.push(("io_uring_enter", n("io_uring_enter"))),
        }
        for (name, mine) in compared {
            let strace_n = theirs.get(name).copied().unwrap_or(0);
            let diff = mine.abs_diff(strace_n) as f64;
            assert!(
                diff <= (strace_n as f64 * 0.01).max(1.0),
                "{backend}: {name}: counters {mine}, strace {strace_n}; {theirs:?}"
            );
        }
        if backend == "epoll" {
            assert!(n("recvfrom") >= 2000, "{ours}");
        }
    }
}

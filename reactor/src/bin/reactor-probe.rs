//! reactor-probe: a one-thread echo service on the reactor, for tests that need the reactor in
//! a process of its own (under strace, or under a seccomp filter).
//!
//! Prints `listening PORT backend=... io_uring=...` on stdout, echoes every received chunk back,
//! and after CONNS connections have closed prints one line of `name=count` syscall counters and
//! exits 0. Setup errors go to stderr with exit status 2.

use std::io::Write;
use std::net::TcpListener;
use std::os::fd::OwnedFd;

use reactor::{BackendChoice, Config, EpollMode, Event, Reactor, Recv};

const USAGE: &str = "usage: reactor-probe [--backend auto|io_uring|epoll] [--mode rx|oneshot|legacy] [--conns N] [--buf BYTES]";

fn main() {
    if let Err(e) = run() {
        eprintln!("reactor-probe: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut config = Config::default();
    let mut conns = 1usize;
    let mut buf_size = 4096usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--backend" => {
                config.backend = value()?
                    .parse::<BackendChoice>()
                    .map_err(|e| e.to_string())?
            }
            "--mode" => {
                config.epoll_mode = value()?.parse::<EpollMode>().map_err(|e| e.to_string())?
            }
            "--conns" => conns = value()?.parse().map_err(|e| format!("--conns: {e}"))?,
            "--buf" => buf_size = value()?.parse().map_err(|e| format!("--buf: {e}"))?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let mut reactor = Reactor::new(&config).map_err(|e| e.to_string())?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    reactor
        .listen(OwnedFd::from(listener))
        .map_err(|e| format!("listen: {e}"))?;
    println!("listening {port} {}", reactor.report());
    std::io::stdout().flush().map_err(|e| e.to_string())?;

    let mut closed = 0;
    let mut events = Vec::new();
    while closed < conns {
        reactor
            .poll(&mut events, None)
            .map_err(|e| format!("poll: {e}"))?;
        for event in events.drain(..) {
            match event {
                Event::Accepted { conn, .. } => {
                    arm(&mut reactor, conn, Vec::with_capacity(buf_size))
                }
                Event::Received {
                    conn,
                    buf,
                    result: Recv::Data(_),
                } => {
                    if let Err(refused) = reactor.send(conn, buf) {
                        return Err(format!("send refused: {refused}"));
                    }
                }
                Event::Received { conn, .. } => {
                    reactor.close(conn);
                    closed += 1;
                }
                Event::Sent {
                    conn,
                    mut buf,
                    result: Ok(()),
                } => {
                    buf.clear();
                    arm(&mut reactor, conn, buf);
                }
                Event::Sent { conn, .. } => {
                    reactor.close(conn);
                    closed += 1;
                }
                Event::AcceptFailed { error, .. } => return Err(format!("accept: {error}")),
                Event::Ready { .. } | Event::Woken => {}
            }
        }
    }
    // One more turn hands the last closes to the kernel (io_uring queues them), so that every
    // syscall the reactor makes is in the counts below and none comes after them.
    reactor
        .poll(&mut events, Some(std::time::Duration::ZERO))
        .map_err(|e| format!("poll: {e}"))?;
    let counts = reactor.counts();
    let line: Vec<String> = counts
        .iter()
        .map(|(name, n)| format!("{name}={n}"))
        .collect();
    println!("counts {}", line.join(" "));
    Ok(())
}

fn arm(reactor: &mut Reactor, conn: reactor::Conn, buf: Vec<u8>) {
    if let Err(refused) = reactor.arm_recv(conn, buf) {
        eprintln!("reactor-probe: arm refused: {refused}");
        std::process::exit(2);
    }
}

//! `bench-runner peers`: this project's server beside the peers users know — nginx, HAProxy,
//! the-benchmarker's hyper, actix-web and may-minihttp entries (as one-worker hello-worlds in
//! peers/) — and the floor, all native under the relaxed profile (no filter), one worker each
//! on the same CPUs, measured by the same run as the matrix: resident servers, alternating
//! slices, paired intervals, the io_uring control pair for the resolution, and a syscall
//! profile of every server from one extra slice under strace.

use std::path::Path;

use crate::cli::{
    DriverChoice, EngineChoice, MeasureArgs, Network, Peer, PeersArgs, RunArgs, StraceSlices,
};
use crate::engine::build;
use crate::model::{ForeignServer, Launch, Pairing, Profile, ServerConfig};
use driver::target::Route;

/// Why the peers run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum PeersError {
    #[error(
        "{program} is not installed (apt-get install {program}), or leave it out: --only {rest}"
    )]
    NotInstalled { program: &'static str, rest: String },
    #[error("building the peers: {0}")]
    Build(#[from] build::BuildError),
}

/// A path as one shell word.
fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// How each peer is started (`bin`: peers/'s release binaries).
fn command(peer: Peer, root: &Path, bin: &Path) -> String {
    let peers = root.join("peers");
    match peer {
        Peer::Floor => quoted(&bin.join("floor")),
        Peer::UringFloor => quoted(&bin.join("uring-floor")),
        Peer::Hyper => quoted(&bin.join("peer-hyper")),
        Peer::Actix => quoted(&bin.join("peer-actix")),
        Peer::MayMinihttp => quoted(&bin.join("peer-may-minihttp")),
        Peer::Nginx => format!("{} {{port}}", quoted(&peers.join("nginx.sh"))),
        Peer::Haproxy => format!("haproxy -db -f {}", quoted(&peers.join("haproxy.cfg"))),
    }
}

/// The program a peer needs from the system, with the flag that makes it answer.
fn system_program(peer: Peer) -> Option<(&'static str, &'static str)> {
    match peer {
        Peer::Nginx => Some(("nginx", "-v")),
        Peer::Haproxy => Some(("haproxy", "-v")),
        _ => None,
    }
}

/// The run's arguments: every peer as a foreign server beside io_uring, rx and legacy.
pub fn run_args(a: &PeersArgs, root: &Path) -> Result<RunArgs, PeersError> {
    let mut only = a.only.clone();
    only.sort();
    only.dedup();
    for peer in &only {
        if let Some((program, flag)) = system_program(*peer) {
            if std::process::Command::new(program)
                .arg(flag)
                .output()
                .is_err()
            {
                let rest = Peer::ALL
                    .iter()
                    .filter(|p| *p != peer)
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(",");
                let missing = PeersError::NotInstalled { program, rest };
                // A dry run runs nothing: it says what a real run would refuse.
                if !a.measure.dry_run {
                    return Err(missing);
                }
                eprintln!("bench-runner: note: {missing}; a real run would stop here");
            }
        }
    }
    let floor_only_get = a.measure.routes.iter().any(|r| *r != Route::get_root());
    let floors = [Peer::Floor, Peer::UringFloor];
    if floor_only_get && only.iter().any(|p| floors.contains(p)) {
        eprintln!("bench-runner: the floors answer every request alike; left out of --routes other than GET:/");
        only.retain(|p| !floors.contains(p));
    }
    let bin = if a.measure.dry_run {
        root.join("target/peers/release")
    } else {
        eprintln!("bench-runner: building the peers (peers/, release)…");
        build::peers(root)?
    };
    let servers = only
        .iter()
        .map(|&peer| ForeignServer {
            name: peer.name().to_string(),
            launch: Launch::Cmd(command(peer, root, &bin)),
            env: vec![],
        })
        .collect();
    Ok(RunArgs {
        // Peers alternate unless asked: their table's figures are req/s and latency, each
        // server's own on the server CPUs, which a duet would share between two.
        measure: MeasureArgs {
            pairing: Some(a.measure.pairing.unwrap_or(Pairing::Alternate)),
            ..a.measure.clone()
        },
        profiles: vec![Profile::Relaxed],
        // The control (io_uring twice) gives the run's resolution, as in the matrix.
        configs: vec![
            ServerConfig::IoUring,
            ServerConfig::IoUringControl,
            ServerConfig::Rx,
            ServerConfig::Legacy,
        ],
        // How far each peer is from the cheapest correct responder, paired like ours.
        references: if only.contains(&Peer::Floor) {
            vec![Peer::Floor.name().to_string()]
        } else {
            vec![]
        },
        servers,
        strace: StraceSlices::All,
        engine: EngineChoice::Native,
        driver: DriverChoice::Rxload,
        network: Network::Host,
        target_host: "127.0.0.1".into(),
        port: a.port,
        no_build: false,
        keep_firewall: false,
        label: Some("peers".into()),
        calibration: None,
    })
}

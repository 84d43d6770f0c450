//! `bench-runner peers`: which peers, and what else its run takes.

use clap::ValueEnum;

use super::MeasureArgs;

/// The peers `bench-runner peers` can run (all by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Peer {
    /// Edge-triggered epoll, one recv and one send a request, no parsing (peers/floor)
    Floor,
    /// io_uring's floor: multishot accept and receive into provided buffers, a static answer,
    /// closes as SQEs, no parsing (peers/uring-floor)
    UringFloor,
    /// Debian's nginx, one worker, `return 200` (peers/nginx.conf)
    Nginx,
    /// Debian's HAProxy, one thread, `http-request return` (peers/haproxy.cfg)
    Haproxy,
    /// hyper 1 on a current-thread tokio runtime (peers/hyper)
    Hyper,
    /// actix-web 4, one worker (peers/actix)
    Actix,
    /// may_minihttp, one may worker (peers/may-minihttp)
    MayMinihttp,
}

impl Peer {
    pub const ALL: [Peer; 7] = [
        Peer::Floor,
        Peer::UringFloor,
        Peer::Nginx,
        Peer::Haproxy,
        Peer::Hyper,
        Peer::Actix,
        Peer::MayMinihttp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Peer::Floor => "floor",
            Peer::UringFloor => "uring-floor",
            Peer::Nginx => "nginx",
            Peer::Haproxy => "haproxy",
            Peer::Hyper => "hyper",
            Peer::Actix => "actix",
            Peer::MayMinihttp => "may-minihttp",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct PeersArgs {
    /// Which peers (the floors answer every request with an empty 200, so they are left out
    /// of any --routes but GET:/)
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "floor,uring-floor,nginx,haproxy,hyper,actix,may-minihttp"
    )]
    pub only: Vec<Peer>,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// First server port (server i listens on PORT+i)
    #[arg(long, default_value_t = 3100)]
    pub port: u16,
}

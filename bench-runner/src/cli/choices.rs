//! Where servers and driver run and which driver: the run's typed choices besides the
//! matrix's own axes (profiles, configurations, load models, in `crate::model`).

use clap::ValueEnum;

use crate::model::LoadModel;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    /// Docker when an engine answers, else native (and say so)
    Auto,
    Docker,
    Native,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DriverChoice {
    /// rxload (io_uring, in this process): the saturating driver
    Rxload,
    /// Real wrk (Debian's), parsed: the cross-check (whole-second slices, no warm-up)
    Wrk,
    /// rxload's goose engine: the realism cross-check (whole-second slices, no warm-up)
    Goose,
    /// oha (cargo install oha --locked), its JSON parsed: the-benchmarker's generator of
    /// 2025-02 to 2026-08, for every load model (whole-second slices, no warm-up)
    Oha,
}

impl DriverChoice {
    pub fn name(self) -> &'static str {
        match self {
            DriverChoice::Rxload => "rxload",
            DriverChoice::Wrk => "wrk",
            DriverChoice::Goose => "goose",
            DriverChoice::Oha => "oha",
        }
    }

    /// Whether it can drive `model`. wrk and goose drive keep-alive only: sent
    /// `Connection: close`, they reconnect only where the server closes, so a server that
    /// ignores the header would be measured kept alive.
    pub fn supports(self, model: LoadModel) -> bool {
        match self {
            DriverChoice::Rxload | DriverChoice::Oha => true,
            DriverChoice::Wrk | DriverChoice::Goose => model == LoadModel::KeepAlive,
        }
    }
}

/// Which servers get one extra slice under `strace -c -f` after the rounds (their syscall
/// profile; never part of the figures: strace slows a server down).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StraceSlices {
    Off,
    /// Foreign servers (`--server`), which have no counters of their own
    Foreign,
    /// Every server (this project's too: a cross-check of its counters)
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Network {
    /// The servers share the host's network, each on its own port (no NAT in the path, as
    /// the seed PR measured); the driver aims at --target-host
    Host,
    /// Every server in a container of its own on a Docker network the runner creates for the
    /// run (and removes after), all on port --port; the driver aims at each container's address
    Bridge,
}

impl Network {
    pub fn name(self) -> &'static str {
        match self {
            Network::Host => "host",
            Network::Bridge => "bridge",
        }
    }
}

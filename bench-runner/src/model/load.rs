//! The load axis: how the driver loads a server (closed loop kept alive, a connection per
//! request, open loop at an offered rate), as raw.json names it and `--load` takes it.

use clap::ValueEnum;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How the driver loads a server: a level of the matrix, like the connection count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoadModel {
    /// Closed loop on kept-alive connections (wrk's model)
    #[default]
    KeepAlive,
    /// Closed loop, a fresh connection per request: the client sends `Connection: close` and
    /// closes after the response whatever the server said (oha --disable-keepalive, the
    /// board's model 2025-02 to 2026-08); connect, accept and close are per request
    PerRequest,
    /// Open loop on kept-alive connections: each connection's requests are due on a fixed
    /// schedule at the offered rate, latency counted from the due time (wrk2 -R, zrk -R)
    Open(Offered),
}

/// The rate an open-loop cell offers, as a share of keep-alive capacity measured in the same
/// run (in every planned round before the first share: the rate then stays fixed for every
/// round, so the rounds pair; `crate::offered`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Offered {
    /// This percentage of the configuration's own keep-alive req/s at the level and route:
    /// every server at the same fraction of what it can do.
    Own(u8),
    /// This percentage of the lowest keep-alive req/s of any configuration at the level and
    /// route: every server at the same absolute rate, so their latencies compare directly.
    Slowest(u8),
    /// This many requests a second, whatever anything measured: one rate across runs and
    /// drivers (a cross-check of two drivers at a rate below both one's limits).
    Fixed(u32),
}

impl Offered {
    /// The share of a capacity it offers (`None`: a fixed rate, no share).
    pub fn fraction(self) -> Option<f64> {
        match self {
            Offered::Own(p) | Offered::Slowest(p) => Some(f64::from(p) / 100.0),
            Offered::Fixed(_) => None,
        }
    }
}

/// A load model's name that no parser knows.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown load model '{0}': keepalive, per-request, open-P (P % of the server's own keep-alive rate), open-slowest-P (P % of the slowest server's), P in 1..=100, or open-N-rps (N requests a second)")]
pub struct UnknownLoad(pub String);

impl std::str::FromStr for LoadModel {
    type Err = UnknownLoad;

    fn from_str(s: &str) -> Result<Self, UnknownLoad> {
        let pct = |p: &str| {
            p.parse::<u8>()
                .ok()
                .filter(|p| (1..=100).contains(p))
                .ok_or_else(|| UnknownLoad(s.to_string()))
        };
        match s {
            "keepalive" | "keep-alive" => Ok(LoadModel::KeepAlive),
            "per-request" => Ok(LoadModel::PerRequest),
            _ => match s.strip_prefix("open-") {
                Some(rest) => match (rest.strip_prefix("slowest-"), rest.strip_suffix("-rps")) {
                    (Some(p), _) => Ok(LoadModel::Open(Offered::Slowest(pct(p)?))),
                    (None, Some(n)) => n
                        .parse::<u32>()
                        .ok()
                        .filter(|&n| n > 0)
                        .map(|n| LoadModel::Open(Offered::Fixed(n)))
                        .ok_or_else(|| UnknownLoad(s.to_string())),
                    (None, None) => Ok(LoadModel::Open(Offered::Own(pct(rest)?))),
                },
                None => Err(UnknownLoad(s.to_string())),
            },
        }
    }
}

impl std::fmt::Display for LoadModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadModel::KeepAlive => f.write_str("keepalive"),
            LoadModel::PerRequest => f.write_str("per-request"),
            LoadModel::Open(Offered::Own(p)) => write!(f, "open-{p}"),
            LoadModel::Open(Offered::Slowest(p)) => write!(f, "open-slowest-{p}"),
            LoadModel::Open(Offered::Fixed(n)) => write!(f, "open-{n}-rps"),
        }
    }
}

impl Serialize for LoadModel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LoadModel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl LoadModel {
    /// The closed-loop models (the open ones are named by their rate).
    pub const CLOSED: [LoadModel; 2] = [LoadModel::KeepAlive, LoadModel::PerRequest];

    /// As raw.json, the CSVs and `--load` spell it.
    pub fn name(self) -> String {
        self.to_string()
    }

    /// The offered rate, for an open-loop model.
    pub fn offered(self) -> Option<Offered> {
        match self {
            LoadModel::Open(o) => Some(o),
            LoadModel::KeepAlive | LoadModel::PerRequest => None,
        }
    }

    /// Whether its rate is a share of keep-alive capacity measured in the run: such a cell
    /// can only be driven once that capacity is.
    pub fn takes_share(self) -> bool {
        self.offered().and_then(Offered::fraction).is_some()
    }

    /// How a cell's name shows it: nothing for keep-alive (the names of the runs before the
    /// load axis), ` per-request` otherwise.
    pub fn suffix(self) -> String {
        match self {
            LoadModel::KeepAlive => String::new(),
            other => format!(" {other}"),
        }
    }

    /// How the headline and the why-section name a cell's load, in a phrase.
    pub fn phrase(self) -> String {
        match self {
            LoadModel::KeepAlive => "kept alive".into(),
            LoadModel::PerRequest => "a connection per request".into(),
            LoadModel::Open(Offered::Own(p)) => format!("open loop at {p} % of its capacity"),
            LoadModel::Open(Offered::Slowest(p)) => {
                format!("open loop, every server at {p} % of the slowest's capacity")
            }
            LoadModel::Open(Offered::Fixed(n)) => format!("open loop at {n} req/s"),
        }
    }

    /// What a table heading says.
    pub fn describe(self) -> String {
        match self {
            LoadModel::KeepAlive => "keep-alive connections, closed loop".into(),
            LoadModel::PerRequest => {
                "a connection per request, closed loop: connect, accept and close in every request"
                    .into()
            }
            LoadModel::Open(Offered::Own(p)) => format!(
                "open loop on keep-alive connections at {p} % of each server's own keep-alive req/s (measured in the same run), latency from each request's due time"
            ),
            LoadModel::Open(Offered::Slowest(p)) => format!(
                "open loop on keep-alive connections at {p} % of the slowest server's keep-alive req/s (measured in the same run): every server at the same rate, latency from each request's due time"
            ),
            LoadModel::Open(Offered::Fixed(n)) => format!(
                "open loop on keep-alive connections at {n} req/s for every server, latency from each request's due time"
            ),
        }
    }

    pub fn conn_mode(self) -> driver::ConnMode {
        match self {
            LoadModel::KeepAlive | LoadModel::Open(_) => driver::ConnMode::KeepAlive,
            LoadModel::PerRequest => driver::ConnMode::PerRequest,
        }
    }
}

/// What `--load` takes: a closed-loop model, or `open` (expanded into `--open-at` and
/// `--open-slowest` rates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoadChoice {
    /// Closed loop on kept-alive connections (wrk's model)
    #[value(name = "keepalive", alias = "keep-alive")]
    KeepAlive,
    /// A fresh connection per request, the client closing after each response
    PerRequest,
    /// Open loop at the rates of --open-at, --open-slowest and --open-rate
    Open,
}

impl LoadChoice {
    pub const ALL: [LoadChoice; 3] = [
        LoadChoice::KeepAlive,
        LoadChoice::PerRequest,
        LoadChoice::Open,
    ];
}

/// The connection levels of load model `load`: its own, where the run measured it at fewer
/// than every level (`by_load`), else all of them.
pub fn conns_of<'a>(
    all: &'a [u32],
    by_load: &'a std::collections::BTreeMap<LoadModel, Vec<u32>>,
    load: LoadModel,
) -> &'a [u32] {
    by_load.get(&load).map_or(all, Vec::as_slice)
}

/// The load models of runs recorded before the axis: keep-alive alone.
pub fn keep_alive_only() -> Vec<LoadModel> {
    vec![LoadModel::KeepAlive]
}

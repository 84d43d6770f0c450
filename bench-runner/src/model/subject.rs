//! What is measured: seccomp profiles, this project's server configurations, foreign servers,
//! and the resident server a (profile, subject) pair names.

use std::sync::Arc;

use clap::ValueEnum;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use wire::{knobs, Backend, BackendChoice, EpollMode};

/// The seccomp profile a server runs under.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// The engine's built-in profile (Docker 20.10–24 allow io_uring; >= 25 deny it)
    Default,
    /// The project's profile: io_uring_setup/enter/register fail with EPERM
    NoIoUring,
    /// `seccomp=unconfined`: no filter at all
    Relaxed,
}

impl Profile {
    pub const ALL: [Profile; 3] = [Profile::Default, Profile::NoIoUring, Profile::Relaxed];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::NoIoUring => "no-io-uring",
            Profile::Relaxed => "relaxed",
        }
    }
}

/// One server configuration of the seed PR's table.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ServerConfig {
    /// epoll "before": EPOLLONESHOT re-armed ADD -> EEXIST -> MOD
    Legacy,
    /// epoll "after": registered once, edge-triggered
    Rx,
    /// Ablation: one-shot with the registration hint (one MOD per request)
    Oneshot,
    /// io_uring (APP_BACKEND=auto: io_uring where the profile allows it, else its epoll/rx fallback)
    #[serde(rename = "io_uring")]
    #[value(name = "io_uring")]
    IoUring,
    /// The io_uring configuration again, as a configuration of its own: the A/A control that
    /// gives the run's resolution
    #[serde(rename = "io_uring-control")]
    #[value(name = "io_uring-control")]
    IoUringControl,
}

impl ServerConfig {
    pub const ALL: [ServerConfig; 5] = [
        ServerConfig::Legacy,
        ServerConfig::Rx,
        ServerConfig::Oneshot,
        ServerConfig::IoUring,
        ServerConfig::IoUringControl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ServerConfig::Legacy => "legacy",
            ServerConfig::Rx => "rx",
            ServerConfig::Oneshot => "oneshot",
            ServerConfig::IoUring => "io_uring",
            ServerConfig::IoUringControl => "io_uring-control",
        }
    }

    /// The column heading of the seed PR's table.
    pub fn heading(self) -> &'static str {
        match self {
            ServerConfig::Legacy => "epoll before (legacy)",
            ServerConfig::Rx => "epoll after (rx)",
            ServerConfig::Oneshot => "epoll oneshot (ablation)",
            ServerConfig::IoUring => "io_uring",
            ServerConfig::IoUringControl => "A/A control (io_uring again)",
        }
    }

    /// The knobs that choose this configuration's receive path.
    fn choice(self) -> (BackendChoice, EpollMode) {
        match self {
            ServerConfig::Legacy => (BackendChoice::Epoll, EpollMode::Legacy),
            ServerConfig::Rx => (BackendChoice::Epoll, EpollMode::Rx),
            ServerConfig::Oneshot => (BackendChoice::Epoll, EpollMode::Oneshot),
            ServerConfig::IoUring | ServerConfig::IoUringControl => {
                (BackendChoice::Auto, EpollMode::Rx)
            }
        }
    }

    /// The server's environment for this configuration.
    pub fn env(self) -> Vec<(&'static str, &'static str)> {
        let (backend, mode) = self.choice();
        vec![
            (knobs::BACKEND, backend.name()),
            (knobs::EPOLL_MODE, mode.name()),
        ]
    }

    /// The backend this configuration is meant to measure.
    pub fn intended_backend(self) -> Backend {
        match self.choice() {
            (BackendChoice::Epoll, mode) => Backend::Epoll(mode),
            _ => Backend::IoUring,
        }
    }

    /// The configuration this one is compared with in the table (the seed PR's "before").
    pub fn baseline(self) -> Option<ServerConfig> {
        match self {
            ServerConfig::Rx | ServerConfig::Oneshot => Some(ServerConfig::Legacy),
            ServerConfig::IoUring => Some(ServerConfig::Rx),
            ServerConfig::IoUringControl => Some(ServerConfig::IoUring),
            ServerConfig::Legacy => None,
        }
    }
}

/// What a resident server is: one of this project's configurations, or a server from outside
/// (`--server NAME=…`: a peer, the user's own framework), known by its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    Own(ServerConfig),
    Foreign(Arc<str>),
}

impl Subject {
    pub fn name(&self) -> &str {
        match self {
            Subject::Own(c) => c.name(),
            Subject::Foreign(name) => name,
        }
    }

    /// The column heading: the seed PR's for a configuration, the name for a foreign server.
    pub fn heading(&self) -> &str {
        match self {
            Subject::Own(c) => c.heading(),
            Subject::Foreign(name) => name,
        }
    }

    pub fn own(&self) -> Option<ServerConfig> {
        match self {
            Subject::Own(c) => Some(*c),
            Subject::Foreign(_) => None,
        }
    }

    /// The subject this one is compared with in the seed PR's table.
    pub fn baseline(&self) -> Option<Subject> {
        self.own()?.baseline().map(Subject::Own)
    }
}

impl PartialEq<ServerConfig> for Subject {
    fn eq(&self, other: &ServerConfig) -> bool {
        self.own() == Some(*other)
    }
}

impl From<ServerConfig> for Subject {
    fn from(c: ServerConfig) -> Subject {
        Subject::Own(c)
    }
}

// As a plain name in JSON, so raw.json files from before foreign servers read the same.
impl Serialize for Subject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Subject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Subject, D::Error> {
        let name = String::deserialize(d)?;
        Ok(match ServerConfig::from_str(&name, false) {
            Ok(c) => Subject::Own(c),
            Err(_) => Subject::Foreign(name.into()),
        })
    }
}

/// How a foreign server is started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Launch {
    /// A shell command line (native): `{port}` in it becomes the server's port.
    Cmd(String),
    /// A Docker image, run as this project's servers are.
    Image(String),
}

/// A server from outside this project, as `--server` gave it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignServer {
    pub name: String,
    pub launch: Launch,
    /// Extra environment (`,ENV=VALUE` pairs); `PORT` is always set to its port.
    pub env: Vec<(String, String)>,
}

/// One resident server of a run: a profile and what runs under it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServerKey {
    pub profile: Profile,
    pub config: Subject,
}

impl std::fmt::Display for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.profile.name(), self.config.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spelled_alike_on_the_command_line_and_in_json() {
        for p in Profile::ALL {
            let v = p.to_possible_value().unwrap();
            assert_eq!(v.get_name(), p.name());
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
        for c in ServerConfig::ALL {
            // The knobs it sets are the ones the server reads back.
            let env = c.env();
            assert_eq!(env[0].1.parse::<BackendChoice>().unwrap(), c.choice().0);
            assert_eq!(env[1].1.parse::<EpollMode>().unwrap(), c.choice().1);
            let v = c.to_possible_value().unwrap();
            assert_eq!(v.get_name(), c.name());
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
    }
}

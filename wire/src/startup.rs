//! The server's first log line: where it listens and which backend it really runs, with what
//! io_uring setup found — e.g.
//! `server listening on 0.0.0.0:3000 workers=1 nofile=1024 backend=epoll/rx io_uring=unavailable(EPERM)`.

use std::fmt;
use std::str::FromStr;

use crate::EpollMode;

/// The backend a server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    IoUring,
    Epoll(EpollMode),
}

/// What io_uring setup found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IoUringState {
    /// Not tried (`APP_BACKEND=epoll`).
    NotTried,
    /// Running, with these setup flags (`defer_taskrun+single_issuer`, ...); `recv_multishot`
    /// when receives are multishot.
    Active { setup: String, recv_multishot: bool },
    /// `io_uring_setup` failed with this errno (its symbolic name: `EPERM`, `ENOSYS`, ...).
    Unavailable(String),
}

/// The start-up line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupLine {
    /// `host:port`.
    pub addr: String,
    pub workers: u32,
    /// The open-file limit the server runs under (`None` when the line does not say).
    pub nofile: Option<u64>,
    pub backend: Backend,
    pub io_uring: IoUringState,
}

/// A line or a field that is not the start-up line's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StartupError {
    #[error("not a start-up line")]
    NotStartup,
    #[error("the start-up line has no {0}=")]
    Missing(&'static str),
    #[error("'{0}' is not a backend (io_uring or epoll/MODE)")]
    Backend(String),
    #[error("'{0}' is not an io_uring state (active(FLAGS), unavailable(ERRNO), not-tried)")]
    IoUring(String),
    #[error("'{0}' is not a number")]
    Number(String),
}

const PREFIX: &str = "server listening on ";

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::IoUring => f.write_str("io_uring"),
            Backend::Epoll(mode) => write!(f, "epoll/{mode}"),
        }
    }
}

impl FromStr for Backend {
    type Err = StartupError;
    fn from_str(s: &str) -> Result<Backend, StartupError> {
        if s == "io_uring" {
            return Ok(Backend::IoUring);
        }
        s.strip_prefix("epoll/")
            .and_then(|m| m.parse().ok())
            .map(Backend::Epoll)
            .ok_or_else(|| StartupError::Backend(s.to_string()))
    }
}

impl fmt::Display for IoUringState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoUringState::NotTried => f.write_str("not-tried"),
            IoUringState::Active {
                setup,
                recv_multishot: false,
            } => write!(f, "active({setup})"),
            IoUringState::Active {
                setup,
                recv_multishot: true,
            } => write!(f, "active({setup},recv_multishot)"),
            IoUringState::Unavailable(errno) => write!(f, "unavailable({errno})"),
        }
    }
}

impl FromStr for IoUringState {
    type Err = StartupError;
    fn from_str(s: &str) -> Result<IoUringState, StartupError> {
        let bad = || StartupError::IoUring(s.to_string());
        if s == "not-tried" {
            return Ok(IoUringState::NotTried);
        }
        let inner = |name: &str| {
            s.strip_prefix(name)?
                .strip_prefix('(')?
                .strip_suffix(')')
                .filter(|i| !i.is_empty() && !i.contains([' ', '(', ')']))
        };
        if let Some(errno) = inner("unavailable") {
            return Ok(IoUringState::Unavailable(errno.to_string()));
        }
        let flags = inner("active").ok_or_else(bad)?;
        let (setup, recv_multishot) = match flags.strip_suffix(",recv_multishot") {
            Some(setup) => (setup, true),
            None => (flags, false),
        };
        if setup.is_empty() || setup.contains(',') {
            return Err(bad());
        }
        Ok(IoUringState::Active {
            setup: setup.to_string(),
            recv_multishot,
        })
    }
}

impl fmt::Display for StartupLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{} workers={}", self.addr, self.workers)?;
        if let Some(n) = self.nofile {
            write!(f, " nofile={n}")?;
        }
        write!(f, " backend={} io_uring={}", self.backend, self.io_uring)
    }
}

impl FromStr for StartupLine {
    type Err = StartupError;
    fn from_str(line: &str) -> Result<StartupLine, StartupError> {
        let rest = line
            .trim()
            .strip_prefix(PREFIX)
            .ok_or(StartupError::NotStartup)?;
        let mut words = rest.split_whitespace();
        let addr = words.next().ok_or(StartupError::Missing("address"))?;
        let fields: Vec<(&str, &str)> = words.filter_map(|w| w.split_once('=')).collect();
        let field = |key: &'static str| {
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .ok_or(StartupError::Missing(key))
        };
        let number = |v: &str| v.parse().map_err(|_| StartupError::Number(v.to_string()));
        Ok(StartupLine {
            addr: addr.to_string(),
            workers: number(field("workers")?)? as u32,
            nofile: field("nofile").ok().map(number).transpose()?,
            backend: field("backend")?.parse()?,
            io_uring: field("io_uring")?.parse()?,
        })
    }
}

/// As strings in JSON (the counters line carries both), the same text the start-up line uses.
macro_rules! serde_as_text {
    ($($t:ty),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}

serde_as_text!(Backend, IoUringState);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_and_io_uring_state_prints_as_it_parses() {
        let backends = [
            Backend::IoUring,
            Backend::Epoll(EpollMode::Rx),
            Backend::Epoll(EpollMode::Oneshot),
            Backend::Epoll(EpollMode::Legacy),
        ];
        let states = [
            IoUringState::NotTried,
            IoUringState::Unavailable("EPERM".into()),
            IoUringState::Unavailable("errno 95".replace(' ', "_")),
            IoUringState::Active {
                setup: "defer_taskrun+single_issuer".into(),
                recv_multishot: true,
            },
            IoUringState::Active {
                setup: "coop_taskrun".into(),
                recv_multishot: false,
            },
        ];
        for backend in backends {
            for io_uring in states.clone() {
                for nofile in [None, Some(1024)] {
                    let line = StartupLine {
                        addr: "0.0.0.0:3000".into(),
                        workers: 2,
                        nofile,
                        backend,
                        io_uring: io_uring.clone(),
                    };
                    let text = line.to_string();
                    assert_eq!(text.parse::<StartupLine>().as_ref(), Ok(&line), "{text}");
                }
            }
        }
        let json = serde_json::to_string(&states[1]).unwrap();
        assert_eq!(json, r#""unavailable(EPERM)""#);
        assert_eq!(
            serde_json::from_str::<IoUringState>(&json).unwrap(),
            states[1]
        );
    }

    #[test]
    fn the_line_the_server_has_always_printed_reads_and_others_are_refused_by_cause() {
        let l: StartupLine = "server listening on 0.0.0.0:3000 workers=1 nofile=1048576 backend=epoll/rx io_uring=unavailable(EPERM)"
            .parse()
            .unwrap();
        assert_eq!(l.backend, Backend::Epoll(EpollMode::Rx));
        assert_eq!(l.io_uring, IoUringState::Unavailable("EPERM".into()));
        assert_eq!((l.workers, l.nofile), (1, Some(1048576)));
        for (line, err) in [
            ("something else", StartupError::NotStartup),
            (
                "server listening on x workers=1 io_uring=not-tried",
                StartupError::Missing("backend"),
            ),
            (
                "server listening on x workers=1 backend=kqueue io_uring=not-tried",
                StartupError::Backend("kqueue".into()),
            ),
            (
                "server listening on x workers=1 backend=io_uring io_uring=active()",
                StartupError::IoUring("active()".into()),
            ),
            (
                "server listening on x workers=many backend=io_uring io_uring=not-tried",
                StartupError::Number("many".into()),
            ),
        ] {
            assert_eq!(line.parse::<StartupLine>(), Err(err), "{line}");
        }
    }
}

//! The server's environment knobs (docs/runtime-config.md documents each) and the typed values
//! of the two that choose a receive path.

use std::fmt;
use std::str::FromStr;

/// `auto` | `io_uring` | `epoll`.
pub const BACKEND: &str = "APP_BACKEND";
/// `rx` | `oneshot` | `legacy`.
pub const EPOLL_MODE: &str = "APP_EPOLL_MODE";
pub const PORT: &str = "APP_PORT";
/// The IPv4 address every worker binds (`0.0.0.0`: all).
pub const BIND: &str = "APP_BIND";
pub const WORKERS: &str = "APP_WORKERS";
pub const PIN: &str = "APP_PIN";
pub const RECV_MULTISHOT: &str = "APP_RECV_MULTISHOT";
pub const RECV_BUFFER: &str = "APP_RECV_BUFFER";
/// `1`: io_uring connections keep a trail of their last steps, printed when a timer closes one.
pub const TRAIL: &str = "APP_TRAIL";
pub const HEADER_TIMEOUT: &str = "APP_HEADER_TIMEOUT";
pub const KEEPALIVE_TIMEOUT: &str = "APP_KEEPALIVE_TIMEOUT";
pub const SEND_TIMEOUT: &str = "APP_SEND_TIMEOUT";
pub const MAX_BODY: &str = "APP_MAX_BODY";

/// Which backend to run (`APP_BACKEND`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum BackendChoice {
    /// io_uring, falling back to epoll on any setup error (and naming the errno).
    #[default]
    Auto,
    /// io_uring or a start-up error naming the errno.
    IoUring,
    Epoll,
}

/// How the epoll backend receives (`APP_EPOLL_MODE`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub enum EpollMode {
    /// Register each connection once, edge-triggered; receive on readiness into the armed
    /// buffer. No `epoll_ctl` per keep-alive request.
    #[default]
    Rx,
    /// `EPOLLONESHOT` waits; the per-fd hint makes each re-arm one `EPOLL_CTL_MOD`.
    Oneshot,
    /// `EPOLLONESHOT` waits re-armed by ADD, then MOD on EEXIST: two `epoll_ctl` per request.
    Legacy,
}

/// A value that is not one of a knob's choices.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("'{value}' is not one of: {choices}")]
pub struct BadChoice {
    pub value: String,
    pub choices: &'static str,
}

impl BackendChoice {
    /// As the knob spells it.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::IoUring => "io_uring",
            BackendChoice::Epoll => "epoll",
        }
    }
}

impl FromStr for BackendChoice {
    type Err = BadChoice;
    fn from_str(s: &str) -> Result<Self, BadChoice> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "io_uring" | "io-uring" | "uring" => Ok(BackendChoice::IoUring),
            "epoll" => Ok(BackendChoice::Epoll),
            _ => Err(BadChoice {
                value: s.to_string(),
                choices: "auto, io_uring, epoll",
            }),
        }
    }
}

impl EpollMode {
    pub const ALL: [EpollMode; 3] = [EpollMode::Rx, EpollMode::Oneshot, EpollMode::Legacy];

    /// As the knob and the start-up line spell it.
    pub fn name(self) -> &'static str {
        match self {
            EpollMode::Rx => "rx",
            EpollMode::Oneshot => "oneshot",
            EpollMode::Legacy => "legacy",
        }
    }
}

impl FromStr for EpollMode {
    type Err = BadChoice;
    fn from_str(s: &str) -> Result<Self, BadChoice> {
        EpollMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| BadChoice {
                value: s.to_string(),
                choices: "rx, oneshot, legacy",
            })
    }
}

impl fmt::Display for EpollMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_values_parse_as_they_print() {
        for m in EpollMode::ALL {
            assert_eq!(m.to_string().parse::<EpollMode>(), Ok(m));
        }
        for b in [
            BackendChoice::Auto,
            BackendChoice::IoUring,
            BackendChoice::Epoll,
        ] {
            assert_eq!(b.name().parse::<BackendChoice>(), Ok(b));
        }
        assert_eq!("uring".parse::<BackendChoice>(), Ok(BackendChoice::IoUring));
        let e = "fast".parse::<EpollMode>().unwrap_err();
        assert_eq!(e.to_string(), "'fast' is not one of: rx, oneshot, legacy");
    }
}

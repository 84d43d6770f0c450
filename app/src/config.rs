//! The server's knobs, all from the environment (docs/runtime-config.md lists each one).

use std::net::Ipv4Addr;
use std::time::Duration;
use wire::knobs;

use reactor::{BackendChoice, EpollMode};

#[derive(Debug, Clone)]
pub struct Config {
    /// The address every worker binds (all, by default; tests bind 127.0.0.1).
    pub bind: Ipv4Addr,
    pub port: u16,
    /// `None`: one per CPU in the process's affinity mask.
    pub workers: Option<usize>,
    pub pin: bool,
    pub backend: BackendChoice,
    pub epoll_mode: EpollMode,
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    /// How long a send may wait for a client that does not read (nginx's `send_timeout`).
    pub send_timeout: Duration,
    pub max_body: u64,
    /// Bytes a connection's receive buffer starts with (nginx's `client_header_buffer_size`).
    pub recv_buffer: usize,
    /// io_uring: one multishot receive per connection into a provided-buffer ring.
    pub recv_multishot: bool,
    /// io_uring: each connection's last steps kept, and printed when a timer closes it.
    pub trail: bool,
}

/// A receive buffer holds a benchmark's request (under 200 bytes) several times over, and two
/// fit in a page, so 10 000 idle connections cost about 20 MiB, not 40.
pub const DEFAULT_RECV_BUFFER: usize = 2048;

/// A knob with a value it cannot take.
#[derive(Debug)]
pub struct BadKnob {
    pub knob: &'static str,
    pub value: String,
    pub expected: String,
}

impl std::fmt::Display for BadKnob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}='{}' is invalid: expected {}",
            self.knob, self.value, self.expected
        )
    }
}

/// A knob whose value is one of the reactor's named choices.
fn choice<T: std::str::FromStr<Err = reactor::BadChoice>>(
    read: &impl Fn(&'static str) -> Option<(&'static str, String)>,
    knob: &'static str,
    default: T,
) -> Result<T, BadKnob> {
    match read(knob) {
        None => Ok(default),
        Some((knob, value)) => value.parse().map_err(|e: reactor::BadChoice| BadKnob {
            knob,
            value,
            expected: format!("one of {}", e.choices),
        }),
    }
}

impl Config {
    /// Every knob at its default: the server as its image starts it with no environment.
    pub fn defaults() -> Config {
        Config::from_lookup(|_| None).expect("every default is a valid value")
    }

    /// The reactor a worker runs on, as configured.
    pub fn reactor_config(&self) -> reactor::Config {
        reactor::Config {
            backend: self.backend,
            epoll_mode: self.epoll_mode,
            recv_multishot: self.recv_multishot,
            trail: self.trail,
            ..reactor::Config::default()
        }
    }

    /// What a worker needs of the configuration.
    pub fn worker_settings(&self) -> crate::worker::Settings {
        crate::worker::Settings {
            header_timeout: self.header_timeout,
            keepalive_timeout: self.keepalive_timeout,
            send_timeout: self.send_timeout,
            recv_buffer: self.recv_buffer,
            limits: crate::http::Limits {
                max_body: self.max_body,
            },
        }
    }

    /// Reads every knob through `get` (the process environment in `main`).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, BadKnob> {
        let read = |knob: &'static str| get(knob).filter(|v| !v.is_empty()).map(|v| (knob, v));
        let number =
            |knob: &'static str, min: u64, max: u64, default: u64| -> Result<u64, BadKnob> {
                let Some((knob, v)) = read(knob) else {
                    return Ok(default);
                };
                match v.trim().parse::<u64>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(n),
                    _ => Err(BadKnob {
                        knob,
                        value: v,
                        expected: format!("a whole number from {min} to {max}"),
                    }),
                }
            };
        let backend = choice(&read, knobs::BACKEND, BackendChoice::Auto)?;
        let epoll_mode = choice(&read, knobs::EPOLL_MODE, EpollMode::Rx)?;
        let switch = |knob: &'static str, default: bool| match read(knob) {
            None => Ok(default),
            Some((_, v)) if v == "0" => Ok(false),
            Some((_, v)) if v == "1" => Ok(true),
            Some((knob, v)) => Err(BadKnob {
                knob,
                value: v,
                expected: "0 or 1".into(),
            }),
        };
        let pin = switch(knobs::PIN, false)?;
        // The reactor's default (measured: 9 % less CPU per request than a receive SQE per
        // request at 64 connections, docs/performance.md).
        let recv_multishot = switch(
            knobs::RECV_MULTISHOT,
            reactor::Config::default().recv_multishot,
        )?;
        let trail = switch(knobs::TRAIL, false)?;
        let workers = match read(knobs::WORKERS) {
            None => None,
            Some(_) => Some(number(knobs::WORKERS, 1, 1024, 1)? as usize),
        };
        let bind = match read(knobs::BIND) {
            None => Ipv4Addr::UNSPECIFIED,
            Some((knob, v)) => v.trim().parse().map_err(|_| BadKnob {
                knob,
                value: v,
                expected: "an IPv4 address (0.0.0.0 for all, 127.0.0.1 for loopback only)".into(),
            })?,
        };
        Ok(Config {
            bind,
            port: number(knobs::PORT, 0, 65535, 3000)? as u16,
            workers,
            pin,
            backend,
            epoll_mode,
            header_timeout: Duration::from_secs(number(knobs::HEADER_TIMEOUT, 1, 3600, 10)?),
            keepalive_timeout: Duration::from_secs(number(knobs::KEEPALIVE_TIMEOUT, 1, 3600, 15)?),
            send_timeout: Duration::from_secs(number(knobs::SEND_TIMEOUT, 1, 3600, 30)?),
            max_body: number(knobs::MAX_BODY, 0, 1 << 40, 1 << 20)?,
            recv_buffer: number(knobs::RECV_BUFFER, 256, 1 << 20, DEFAULT_RECV_BUFFER as u64)?
                as usize,
            recv_multishot,
            trail,
        })
    }

    pub fn from_env() -> Result<Config, BadKnob> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> Result<Config, BadKnob> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let c = with(&[]).unwrap();
        assert_eq!((c.port, c.workers, c.pin), (3000, None, false));
        assert_eq!(c.bind, Ipv4Addr::UNSPECIFIED);
        assert_eq!(
            (c.backend, c.epoll_mode),
            (BackendChoice::Auto, EpollMode::Rx)
        );
        assert_eq!(
            (
                c.header_timeout.as_secs(),
                c.keepalive_timeout.as_secs(),
                c.send_timeout.as_secs()
            ),
            (10, 15, 30)
        );
        assert_eq!(c.recv_buffer, DEFAULT_RECV_BUFFER);
        assert!(c.recv_multishot);
        assert!(!with(&[("APP_RECV_MULTISHOT", "0")]).unwrap().recv_multishot);
    }

    #[test]
    fn values_parse() {
        let c = with(&[
            ("APP_PORT", "8080"),
            ("APP_WORKERS", "3"),
            ("APP_PIN", "1"),
            ("APP_BACKEND", "epoll"),
            ("APP_EPOLL_MODE", "legacy"),
            ("APP_BIND", "127.0.0.1"),
        ])
        .unwrap();
        assert_eq!((c.port, c.workers, c.pin), (8080, Some(3), true));
        assert_eq!(c.bind, Ipv4Addr::LOCALHOST);
        assert_eq!(
            (c.backend, c.epoll_mode),
            (BackendChoice::Epoll, EpollMode::Legacy)
        );
    }

    #[test]
    fn bad_values_name_the_knob() {
        for (knob, value) in [
            ("APP_PORT", "70000"),
            ("APP_WORKERS", "0"),
            ("APP_WORKERS", "many"),
            ("APP_PIN", "yes"),
            ("APP_BACKEND", "kqueue"),
            ("APP_EPOLL_MODE", "fast"),
            ("APP_HEADER_TIMEOUT", "0"),
            ("APP_KEEPALIVE_TIMEOUT", "-1"),
            ("APP_SEND_TIMEOUT", "0"),
            ("APP_MAX_BODY", "1e9"),
            ("APP_RECV_BUFFER", "16"),
            ("APP_RECV_MULTISHOT", "yes"),
        ] {
            let err = with(&[(knob, value)]).unwrap_err();
            assert_eq!(err.knob, knob);
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!("{knob}='{value}' is invalid: expected ")),
                "{msg}"
            );
        }
    }
}

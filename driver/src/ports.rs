//! A connection per request leaves a TIME_WAIT socket behind every close a client makes first,
//! holding its local port for 60 s. Without `net.ipv4.tcp_tw_reuse` a run would soon measure
//! the exhaustion of the local port range (connects failing with EADDRNOTAVAIL) rather than the
//! server, so the mode checks the kernel's settings before it starts.

/// How long Linux keeps a TIME_WAIT socket (`TCP_TIMEWAIT_LEN`, not tunable).
const TIME_WAIT_S: u64 = 60;

/// The kernel settings that decide whether client ports come back soon enough.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sysctls {
    /// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 on for loopback traffic only (the default).
    pub tw_reuse: Option<u32>,
    /// `net.ipv4.tcp_timestamps`: reuse needs them (0 turns them off).
    pub timestamps: Option<u32>,
    /// `net.ipv4.ip_local_port_range`.
    pub port_range: Option<(u32, u32)>,
}

impl Sysctls {
    /// This machine's (`None` where a file cannot be read: a sandbox without /proc/sys/net).
    pub fn read() -> Sysctls {
        let read = |name: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).ok();
        let number = |name: &str| read(name)?.trim().parse().ok();
        Sysctls {
            tw_reuse: number("tcp_tw_reuse"),
            timestamps: number("tcp_timestamps"),
            port_range: read("ip_local_port_range").and_then(|t| {
                let mut it = t.split_whitespace().map(|x| x.parse().ok());
                Some((it.next()??, it.next()??))
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a connection per request leaves every port the client closes in TIME_WAIT for \
     {TIME_WAIT_S} s, and with net.ipv4.tcp_tw_reuse={reuse} and net.ipv4.tcp_timestamps={timestamps} \
     ports are not reused for {}: the {ports} local ports (ip_local_port_range) last about \
     {per_s} connections a second. Allow reuse first: sysctl -w net.ipv4.tcp_tw_reuse={needed}{stamps}",
    if *.loopback { "a loopback target" } else { "a target off loopback" }
)]
pub struct PortsError {
    pub reuse: String,
    pub timestamps: String,
    pub loopback: bool,
    pub ports: u64,
    pub per_s: u64,
    pub needed: u32,
    pub stamps: &'static str,
}

/// Whether closed client ports are reused at once for connections to a target on loopback
/// (`loopback`) or off it. Settings that cannot be read pass (nothing to say they are wrong).
pub fn check(loopback: bool, k: &Sysctls) -> Result<(), PortsError> {
    let reuse_ok = match k.tw_reuse {
        None | Some(1) => true,
        Some(2) => loopback,
        Some(_) => false,
    };
    let stamps_ok = k.timestamps != Some(0);
    if reuse_ok && stamps_ok {
        return Ok(());
    }
    let show = |v: Option<u32>| v.map_or("?".into(), |v| v.to_string());
    let ports = k
        .port_range
        .map_or(28_232, |(lo, hi)| u64::from(hi.saturating_sub(lo)) + 1);
    Err(PortsError {
        reuse: show(k.tw_reuse),
        timestamps: show(k.timestamps),
        loopback,
        ports,
        per_s: ports / TIME_WAIT_S,
        needed: if loopback { 2 } else { 1 },
        stamps: if stamps_ok {
            ""
        } else {
            " net.ipv4.tcp_timestamps=1"
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOPBACK: bool = true;
    /// A container on a Docker network, say.
    const BRIDGE: bool = false;

    fn k(tw_reuse: u32, timestamps: u32) -> Sysctls {
        Sysctls {
            tw_reuse: Some(tw_reuse),
            timestamps: Some(timestamps),
            port_range: Some((32768, 60999)),
        }
    }

    #[test]
    fn the_default_reuse_covers_loopback_only() {
        assert_eq!(check(LOOPBACK, &k(2, 1)), Ok(()));
        let e = check(BRIDGE, &k(2, 1)).unwrap_err();
        assert_eq!((e.ports, e.per_s, e.needed), (28232, 470, 1));
        let msg = e.to_string();
        assert!(msg.contains("sysctl -w net.ipv4.tcp_tw_reuse=1"), "{msg}");
        assert!(msg.contains("about 470 connections a second"), "{msg}");
        assert_eq!(check(BRIDGE, &k(1, 1)), Ok(()));
    }

    #[test]
    fn reuse_off_or_timestamps_off_is_refused_with_the_fix() {
        let e = check(LOOPBACK, &k(0, 1)).unwrap_err();
        assert!(e.to_string().ends_with("tcp_tw_reuse=2"), "{e}");
        let e = check(LOOPBACK, &k(2, 0)).unwrap_err();
        assert!(e.to_string().ends_with("net.ipv4.tcp_timestamps=1"), "{e}");
        // Unreadable settings are not a reason to refuse.
        assert_eq!(check(BRIDGE, &Sysctls::default()), Ok(()));
    }

    #[test]
    fn this_machine_s_settings_read_back() {
        let here = Sysctls::read();
        let (lo, hi) = here.port_range.expect("Linux has ip_local_port_range");
        assert!(0 < lo && lo <= hi, "{here:?}");
        assert!(
            here.tw_reuse.is_some() && here.timestamps.is_some(),
            "{here:?}"
        );
    }
}

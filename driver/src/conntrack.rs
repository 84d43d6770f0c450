//! Netfilter's connection tracking, where something has loaded it (Docker does, for its NAT),
//! keeps an entry for every TCP connection it sees — loopback ones too — and keeps each closed
//! one for `nf_conntrack_tcp_timeout_time_wait` (120 s). A connection per request at the rates
//! a server reaches here fills its table (`nf_conntrack_max`) within seconds; from then on it
//! drops new connections' packets, the client's SYN is retransmitted a second later or its
//! connect times out, and a run measures the table rather than the server. So the mode checks
//! whether loopback is tracked before it starts, and the runner counts the table's drops in
//! every slice.

use std::net::{Ipv4Addr, TcpListener, TcpStream};

/// The table's size and how long it keeps a closed connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// `net.netfilter.nf_conntrack_max`.
    pub max: u64,
    /// `net.netfilter.nf_conntrack_tcp_timeout_time_wait`, seconds.
    pub time_wait_s: u64,
}

impl Table {
    /// This machine's table, `None` where connection tracking is not loaded.
    pub fn read() -> Option<Table> {
        Some(Table {
            max: sysctl("nf_conntrack_max")?,
            time_wait_s: sysctl("nf_conntrack_tcp_timeout_time_wait").unwrap_or(120),
        })
    }

    /// The connections a second the table lasts at, every one kept `time_wait_s` after it closes.
    pub fn lasts_per_s(&self) -> u64 {
        self.max / self.time_wait_s.max(1)
    }
}

fn sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/net/netfilter/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Entries in the table now.
pub fn count() -> Option<u64> {
    sysctl("nf_conntrack_count")
}

/// Connections the table refused since boot — packets dropped for want of room (`drop`,
/// `early_drop`) and entries it failed to insert (`insert_failed`) — summed over the CPUs;
/// `None` where connection tracking is not loaded.
pub fn drops() -> Option<u64> {
    parse_drops(&std::fs::read_to_string("/proc/net/stat/nf_conntrack").ok()?)
}

/// [`drops`] from the text of `/proc/net/stat/nf_conntrack`: a header naming the columns, then
/// one row of hexadecimal counters per CPU.
pub fn parse_drops(text: &str) -> Option<u64> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split_whitespace().collect();
    let columns: Vec<usize> = ["drop", "early_drop", "insert_failed"]
        .iter()
        .filter_map(|name| header.iter().position(|h| h == name))
        .collect();
    if columns.is_empty() {
        return None;
    }
    let mut total = 0u64;
    for line in lines {
        let row: Vec<&str> = line.split_whitespace().collect();
        for &c in &columns {
            total += u64::from_str_radix(row.get(c)?, 16).ok()?;
        }
    }
    Some(total)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "netfilter's connection tracking is loaded (nf_conntrack_max {max}, a closed connection kept \
     {time_wait_s} s) and tracks loopback: a connection per request fills its table above about \
     {per_s} connections a second, and then it drops new connections (SYNs retransmitted a \
     second later, connects timing out), so the run would measure the table, not the server. \
     Exempt loopback from tracking first: iptables -t raw -I PREROUTING -i lo -j NOTRACK && \
     iptables -t raw -I OUTPUT -o lo -j NOTRACK (docs/methodology.md, \"A connection per \
     request\")"
)]
pub struct ConntrackError {
    pub max: u64,
    pub time_wait_s: u64,
    pub per_s: u64,
}

/// Connections the probe opens: enough that a tracked loopback shows in the table's count
/// above the entries that expire meanwhile.
const PROBE: u64 = 64;

/// Whether a connection per request to loopback would be tracked: `Ok` where connection
/// tracking is not loaded or leaves loopback alone (an iptables `NOTRACK` rule), measured by
/// opening [`PROBE`] loopback connections and watching the table's count and drops.
pub fn check_loopback() -> Result<(), ConntrackError> {
    check_loopback_on(0)
}

/// [`check_loopback`] with the probe's listener on `port` (0: any free port): a rule that
/// exempts only some ports (the runner's own servers', a test's server's) is checked on one of
/// them, even while a server listens there ([`probe`]).
pub fn check_loopback_on(port: u16) -> Result<(), ConntrackError> {
    let Some(table) = Table::read() else {
        return Ok(());
    };
    let (count0, drops0) = (count(), drops());
    if probe(port).is_err() {
        // No loopback listener to probe with: nothing says the table is in the way.
        return Ok(());
    }
    let grew = matches!((count0, count()), (Some(a), Some(b)) if b >= a + PROBE / 2);
    let dropped = matches!((drops0, drops()), (Some(a), Some(b)) if b > a);
    if grew || dropped {
        return Err(ConntrackError {
            max: table.max,
            time_wait_s: table.time_wait_s,
            per_s: table.lasts_per_s(),
        });
    }
    Ok(())
}

/// Opens [`PROBE`] connections to a listener of its own on `port` (0: any free one): on
/// 127.0.0.1, or where a server already holds that — the port a NOTRACK rule names, whatever
/// the loopback address — on 127.0.0.2 (beside a server bound to 0.0.0.0 with SO_REUSEPORT,
/// as ours are, the more specific address gets the probe's connections).
fn probe(port: u16) -> std::io::Result<()> {
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
        Err(e) if port != 0 && e.kind() == std::io::ErrorKind::AddrInUse => {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            s.set_reuse_port(true)?;
            s.bind(&std::net::SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port)).into())?;
            s.listen(128)?;
            TcpListener::from(s)
        }
        other => other?,
    };
    let addr = listener.local_addr()?;
    for _ in 0..PROBE {
        let client = TcpStream::connect(addr)?;
        let (server, _) = listener.accept()?;
        drop(client);
        drop(server);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_sum_the_refusing_columns_over_every_cpu() {
        let text = "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n\
                    0003a211  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000002 00000006 00000001 00000000  00000000 00000000 00000000 00000000\n\
                    0003a211  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000fbc 00000000 00000000  00000000 00000000 00000000 00000000\n";
        assert_eq!(parse_drops(text), Some(2 + 6 + 1 + 0xfbc));
        assert_eq!(parse_drops("entries found\n1 2\n"), None, "no such columns");
        assert_eq!(parse_drops(""), None);
        assert_eq!(
            parse_drops("drop early_drop insert_failed\nzz 0 0\n"),
            None,
            "not hexadecimal"
        );
    }

    #[test]
    fn the_table_lasts_its_size_over_its_time_wait() {
        let t = Table {
            max: 262_144,
            time_wait_s: 120,
        };
        assert_eq!(t.lasts_per_s(), 2184);
        let e = ConntrackError {
            max: t.max,
            time_wait_s: t.time_wait_s,
            per_s: t.lasts_per_s(),
        };
        assert!(
            e.to_string().contains("about 2184 connections a second"),
            "{e}"
        );
        assert!(e.to_string().contains("-j NOTRACK"), "{e}");
    }
}

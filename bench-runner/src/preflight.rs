//! What the machine must allow before a run starts a server: free ports, and, for a
//! connection per request, client ports that come back and no connection-tracking table to
//! fill. Each refusal names its cause and the fix.

use crate::cli::{Network, RunArgs};
use crate::engine::ServerSpec;
use crate::model::instance_label;
use crate::run::{Result, RunError};

/// Whether `host` resolves to a loopback address (`None`: it does not resolve).
pub(crate) fn is_loopback(host: &str) -> Option<bool> {
    use std::net::ToSocketAddrs;
    (host, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip().is_loopback())
}

/// Whether the driver's connections run on loopback (`None`: the target does not resolve).
fn driver_on_loopback(args: &RunArgs) -> Option<bool> {
    match args.network {
        // A container's address on the run's network: off loopback.
        Network::Bridge => Some(false),
        Network::Host => is_loopback(&args.target_host),
    }
}

/// A connection per request must not run the client out of local ports: checked before any
/// build or server start, for the address the driver will connect to.
pub(crate) fn check_port_reuse(args: &RunArgs) -> Result<()> {
    if let Some(loopback) = driver_on_loopback(args) {
        driver::ports::check(loopback, &driver::ports::Sysctls::read())?;
    }
    Ok(())
}

/// A connection per request to loopback must not be counted by a connection-tracking table
/// it would fill (checked before any server starts; every slice counts the table's drops too).
/// Off loopback the path (and any firewall on it) is the user's, a bridge network's rules are
/// Docker's: the slices' drop counts still mark what the table cost.
pub(crate) fn check_conntrack(args: &RunArgs) -> Result<(), driver::conntrack::ConntrackError> {
    match driver_on_loopback(args) {
        // On the run's own first port: an exemption of the run's ports is enough.
        Some(true) => driver::conntrack::check_loopback_on(args.port),
        _ => Ok(()),
    }
}

/// Every host-network server needs its own free port: say which is taken before starting any.
pub(crate) fn check_ports(specs: &[ServerSpec], instances: u32) -> Result<()> {
    for s in specs {
        if let Err(error) = std::net::TcpListener::bind(("0.0.0.0", s.port)) {
            let label = instance_label(s.instance, instances);
            return Err(RunError::PortTaken {
                port: s.port,
                server: format!("{} {label}", s.key).trim_end().to_string(),
                error,
            });
        }
    }
    Ok(())
}

/// Exempts `ports` on loopback from connection tracking for the run (crate::notrack), checks
/// that a connection to the first of them is no longer tracked, and says so in one line with
/// the rules. Rules left by runs that are gone are removed first.
pub(crate) fn exempt_loopback(
    ports: std::ops::RangeInclusive<u16>,
) -> Result<crate::notrack::Exemption, String> {
    let stale = crate::notrack::remove_stale();
    if stale > 0 {
        eprintln!(
            "bench-runner: removed {stale} connection-tracking exemption rule(s) a killed run left"
        );
    }
    // Where it fails, the rules are gone again: the run goes on as without them.
    let exemption = crate::notrack::install_checked(ports.clone()).map_err(|e| e.to_string())?;
    eprintln!(
        "bench-runner: connection tracking counts loopback: exempted this run's ports {}–{} on lo for the run, removed when it ends ({})",
        ports.start(),
        ports.end(),
        exemption.describe()
    );
    Ok(exemption)
}

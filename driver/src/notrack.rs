//! Exempting a run's own servers from netfilter's connection tracking, and nothing else.
//!
//! Docker loads connection tracking for its NAT, and it then counts every loopback connection:
//! a connection per request fills its table within seconds and the run would measure the
//! table ([`crate::conntrack`]). The runner (bench-runner) drives the engine with root's
//! reach, and the suite's own per-request tests run where it does, so where they can they add
//! four `NOTRACK` rules to iptables' `raw` table — loopback only, TCP,
//! only its servers' port range, both directions (to the servers and their answers) — tagged
//! with a comment naming this process, and removes exactly those when the run ends (Ctrl-C and
//! SIGTERM included; a run killed outright leaves them to `bench-runner clean` or the next
//! run, which remove every tagged rule whose process is gone). Not all of `lo`: a blanket
//! NOTRACK on loopback would break the NAT of a user's containers published on 127.0.0.1
//! when Docker's userland proxy is off.

use std::ops::RangeInclusive;
use std::process::Command;
use std::sync::Mutex;

/// The comment every rule carries: `rxbench-notrack-<pid>`.
const TAG: &str = "rxbench-notrack-";

/// Why the exemption could not be made; the run then says what to run, as before.
#[derive(Debug, thiserror::Error)]
pub enum NotrackError {
    #[error("iptables is not installed")]
    NoIptables,
    #[error("iptables -t raw {args}: {stderr}")]
    Iptables { args: String, stderr: String },
}

/// The rules this process added and has not removed yet (what the signal and panic paths
/// remove on their way out).
static ACTIVE: Mutex<Vec<Vec<String>>> = Mutex::new(Vec::new());

/// One rule's specification, without the `-I`/`-D` and chain position.
fn rules(ports: &RangeInclusive<u16>, pid: u32) -> Vec<Vec<String>> {
    let range = format!("{}:{}", ports.start(), ports.end());
    let tag = format!("{TAG}{pid}");
    let mut out = Vec::new();
    for (chain, iface) in [("PREROUTING", "-i"), ("OUTPUT", "-o")] {
        for dir in ["--dport", "--sport"] {
            out.push(
                [
                    chain,
                    iface,
                    "lo",
                    "-p",
                    "tcp",
                    dir,
                    &range,
                    "-m",
                    "comment",
                    "--comment",
                    &tag,
                    "-j",
                    "NOTRACK",
                ]
                .map(String::from)
                .to_vec(),
            );
        }
    }
    out
}

fn iptables(op: &str, rule: &[String]) -> Result<(), NotrackError> {
    let out = Command::new("iptables")
        .args(["-w", "-t", "raw", op])
        .args(rule)
        .output()
        .map_err(|_| NotrackError::NoIptables)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NotrackError::Iptables {
            args: format!("{op} {}", rule.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The exemption while it lives: dropping it removes its rules.
#[derive(Debug)]
pub struct Exemption {
    rules: Vec<Vec<String>>,
}

impl Exemption {
    /// The rules as iptables takes them, for the one line the runner prints.
    pub fn describe(&self) -> String {
        self.rules
            .iter()
            .map(|r| format!("iptables -t raw -I {}", r.join(" ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Drop for Exemption {
    fn drop(&mut self) {
        remove(&self.rules);
    }
}

fn remove(rules: &[Vec<String>]) {
    let mut active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    for rule in rules {
        if active.contains(rule) {
            let _ = iptables("-D", rule);
            active.retain(|r| r != rule);
        }
    }
}

/// Adds the four rules for `ports`; on any failure removes what it added and says why.
pub fn install(ports: RangeInclusive<u16>) -> Result<Exemption, NotrackError> {
    let rules = rules(&ports, std::process::id());
    let mut added: Vec<Vec<String>> = Vec::new();
    for rule in &rules {
        if let Err(e) = iptables("-I", rule) {
            for r in &added {
                let _ = iptables("-D", r);
            }
            return Err(e);
        }
        added.push(rule.clone());
        ACTIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(rule.clone());
    }
    Ok(Exemption { rules })
}

/// For a test or tool about to aim connections at loopback `ports`: `Ok(None)` where loopback
/// is not tracked, `Ok(Some(_))` once this process's rules exempt them (the rules go when the
/// value is dropped; rules of processes that are gone are removed first), else why they stay
/// tracked. A probe on the first port decides, before and after (`conntrack::check_loopback_on`,
/// which works beside a server listening there).
pub fn untracked_or_exempt(
    ports: RangeInclusive<u16>,
) -> Result<Option<Exemption>, crate::conntrack::ConntrackError> {
    let Err(tracked) = crate::conntrack::check_loopback_on(*ports.start()) else {
        return Ok(None);
    };
    remove_stale();
    match install_checked(ports) {
        Ok(exemption) => Ok(Some(exemption)),
        Err(ExemptError::StillTracked(still)) => Err(still),
        Err(ExemptError::Rules(_)) => Err(tracked),
    }
}

/// Why [`install_checked`] made no exemption.
#[derive(Debug, thiserror::Error)]
pub enum ExemptError {
    #[error(transparent)]
    Rules(#[from] NotrackError),
    #[error("loopback is still tracked with the rules in place: {0}")]
    StillTracked(crate::conntrack::ConntrackError),
}

/// [`install`], then the probe on the first port: the exemption only if loopback is no longer
/// tracked there (otherwise its rules are removed again as it is dropped).
pub fn install_checked(ports: RangeInclusive<u16>) -> Result<Exemption, ExemptError> {
    let first = *ports.start();
    let exemption = install(ports)?;
    crate::conntrack::check_loopback_on(first).map_err(ExemptError::StillTracked)?;
    Ok(exemption)
}

/// Removes every rule this process still has (the quit-at-once and panic paths).
pub fn remove_active() {
    let rules = ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    remove(&rules);
}

/// The tagged rules of `iptables -t raw -S` whose process is gone, as `-D` specifications.
fn stale_in(listing: &str, alive: impl Fn(u32) -> bool) -> Vec<Vec<String>> {
    listing
        .lines()
        .filter_map(|line| {
            let pid: u32 = line
                .split_whitespace()
                .find_map(|w| w.trim_matches('"').strip_prefix(TAG))?
                .parse()
                .ok()?;
            if alive(pid) {
                return None;
            }
            // `-A CHAIN spec…` → `CHAIN spec…` for `-D`.
            let spec = line.strip_prefix("-A ")?;
            Some(
                spec.split_whitespace()
                    .map(|w| w.trim_matches('"').to_string())
                    .collect(),
            )
        })
        .collect()
}

/// Removes the tagged rules of runs that are gone; how many. Nothing to do (no iptables, no
/// permission) is 0.
pub fn remove_stale() -> usize {
    let Ok(out) = Command::new("iptables")
        .args(["-w", "-t", "raw", "-S"])
        .output()
    else {
        return 0;
    };
    let listing = String::from_utf8_lossy(&out.stdout);
    let alive = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    stale_in(&listing, alive)
        .iter()
        .filter(|rule| iptables("-D", rule).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_rules_loopback_only_the_port_range_both_directions_tagged() {
        let r = rules(&(3000..=3029), 42);
        assert_eq!(r.len(), 4);
        let text: Vec<String> = r.iter().map(|r| r.join(" ")).collect();
        assert_eq!(
            text,
            [
                "PREROUTING -i lo -p tcp --dport 3000:3029 -m comment --comment rxbench-notrack-42 -j NOTRACK",
                "PREROUTING -i lo -p tcp --sport 3000:3029 -m comment --comment rxbench-notrack-42 -j NOTRACK",
                "OUTPUT -o lo -p tcp --dport 3000:3029 -m comment --comment rxbench-notrack-42 -j NOTRACK",
                "OUTPUT -o lo -p tcp --sport 3000:3029 -m comment --comment rxbench-notrack-42 -j NOTRACK",
            ]
        );
    }

    #[test]
    fn only_tagged_rules_of_gone_processes_are_stale() {
        let listing = "-P PREROUTING ACCEPT\n\
            -A PREROUTING -i lo -j NOTRACK\n\
            -A PREROUTING -i lo -p tcp -m tcp --dport 3000:3001 -m comment --comment rxbench-notrack-7 -j NOTRACK\n\
            -A OUTPUT -o lo -p tcp -m tcp --sport 3000:3001 -m comment --comment \"rxbench-notrack-8\" -j NOTRACK\n";
        let stale = stale_in(listing, |pid| pid == 8);
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert_eq!(
            stale[0].join(" "),
            "PREROUTING -i lo -p tcp -m tcp --dport 3000:3001 -m comment --comment rxbench-notrack-7 -j NOTRACK"
        );
    }
}

//! Host noise a slice can record about itself: the time the hypervisor gave each CPU's turn to
//! someone else (steal, /proc/stat), over the slice. A guest whose server CPU lost 30 % of a
//! second to steal measured a different machine for that second; the record lets an analysis
//! ask whether such slices explain the spread, decided before looking at any comparison
//! (issue: intervals that hold on noisy hosts).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Steal over a slice (warm-up included), in ms, on the server's and the driver's CPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Steal {
    pub server_ms: f64,
    pub load_ms: f64,
}

/// Each CPU's cumulative steal time, in ms, from /proc/stat's text (`cpuN user nice system
/// idle iowait irq softirq steal …`, in clock ticks of `tick_ms`).
pub fn parse(stat: &str, tick_ms: f64) -> BTreeMap<usize, f64> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let steal: f64 = f.nth(7)?.parse().ok()?;
            Some((cpu, steal * tick_ms))
        })
        .collect()
}

/// This machine's cumulative steal per CPU now (empty where /proc/stat cannot be read).
pub fn now() -> BTreeMap<usize, f64> {
    // SAFETY: sysconf reads a configuration value; it touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let tick_ms = if hz > 0 { 1000.0 / hz as f64 } else { 10.0 };
    std::fs::read_to_string("/proc/stat").map_or_else(|_| BTreeMap::new(), |s| parse(&s, tick_ms))
}

/// The steal between two readings, summed over `server` and `load` CPUs; `None` when either
/// reading lacks one of them.
pub fn between(
    a: &BTreeMap<usize, f64>,
    b: &BTreeMap<usize, f64>,
    server: &[usize],
    load: &[usize],
) -> Option<Steal> {
    let sum = |cpus: &[usize]| -> Option<f64> {
        cpus.iter()
            .map(|c| Some(b.get(c)? - a.get(c)?))
            .sum::<Option<f64>>()
    };
    Some(Steal {
        server_ms: sum(server)?,
        load_ms: sum(load)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_counter_of_each_cpu_line() {
        let stat = "cpu  10 0 10 100 0 0 0 7 0 0\ncpu0 5 0 5 50 0 0 0 3 0 0\ncpu1 5 0 5 50 0 0 0 4 0 0\nintr 1 2\n";
        let m = parse(stat, 10.0);
        assert_eq!(m, BTreeMap::from([(0, 30.0), (1, 40.0)]));
        let later = parse(
            "cpu0 5 0 5 50 0 0 0 13 0 0\ncpu1 5 0 5 50 0 0 0 4 0 0\n",
            10.0,
        );
        assert_eq!(
            between(&m, &later, &[0], &[1]),
            Some(Steal {
                server_ms: 100.0,
                load_ms: 0.0
            })
        );
        assert_eq!(between(&m, &later, &[0], &[2]), None, "no cpu2 reading");
    }
}

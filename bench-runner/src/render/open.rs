//! table.md's open-loop part: per profile the latency each server showed at the rate offered
//! to it (with the rate achieved and the schedule's own health), before the paired tables.

use crate::model::{LoadModel, Profile};
use crate::stats::short_rate;
use crate::summary::{Summary, KEPT_UP, MEAN_ROUTE};

/// A latency with the digits its histogram keeps (three significant): µs with one decimal
/// below 100 µs, whole µs below 10 ms, ms with one decimal above.
pub fn short_us(us: f64) -> String {
    if us < 100.0 {
        format!("{us:.1} µs")
    } else if us < 10_000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

/// evidence.md's latency tables of one open-loop model: what they show, said once, then a
/// table per profile and route.
pub(super) fn latency_tables(s: &Summary, load: LoadModel, routes: &[String]) -> String {
    let tables: String = Profile::ALL
        .into_iter()
        .flat_map(|p| routes.iter().map(move |r| (p, r)))
        .map(|(p, r)| latency_table(s, load, p, r))
        .collect();
    if tables.is_empty() {
        return tables;
    }
    format!("Load `{}`, latency at the offered rate, from each request's due time: P50 and P99 the medians over slices of each slice's own (a few overloaded slices would set a merged P99), P99.9 from the slices' histograms merged; `uncorrected`: from the actual send, as a closed-loop driver reports it. Overloaded: slices in which the server answered under {:.0} % of the rate offered, its queue growing through the slice (their latency is the backlog's); behind: slices in which the driver fell behind its own schedule (left out of the paired latency changes). `share`: the rate offered over the server's median keep-alive req/s at that level over the whole run — the share of its capacity it really got (the rate was fixed from the keep-alive slices before it; one slice's req/s swings by the machine's noise).\n\n{tables}", load.name(), KEPT_UP * 100.0)
}

/// The latency table of one open-loop model under one profile: a row per server and level.
fn latency_table(s: &Summary, load: LoadModel, profile: Profile, route: &str) -> String {
    if route == MEAN_ROUTE {
        return String::new();
    }
    let rows: Vec<_> = s
        .rows
        .iter()
        .filter(|r| r.profile == profile && r.load == load && r.route == route)
        .filter_map(|r| Some((r, r.open.as_ref()?)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut t = format!("`{}`, route `{route}`:\n\n| config | conns | offered req/s | share | achieved | P50 | P99 | P99.9 | P99 uncorrected | slices overloaded / behind / all |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", profile.name());
    for (r, o) in rows {
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} |\n",
            r.config.name(),
            r.conns,
            short_rate(o.offered_rps),
            o.share_of_run_capacity
                .map_or("–".into(), |f| format!("{:.0} %", f * 100.0)),
            short_rate(r.rps_median),
            short_us(r.p50_us_median),
            short_us(r.p99_us_median),
            o.p999_us.map_or("–".into(), short_us),
            short_us(o.uncorrected_p99_us),
            o.overloaded_rounds,
            o.behind_rounds,
            r.rounds_ok
        );
    }
    t + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_keeps_its_digits() {
        assert_eq!(short_us(42.345), "42.3 µs");
        assert_eq!(short_us(1234.5), "1234 µs");
        assert_eq!(short_us(26_000.0), "26.0 ms");
    }
}

//! results.csv and comparisons.csv: the summary's rows and comparisons, one per line.

use crate::summary::Summary;

/// results.csv: every row of the summary, one per line.
pub fn rows(s: &Summary) -> String {
    let mut t = String::from("profile,config,load,conns,route,backend_observed,io_uring,rounds_ok,rounds_failed,rps_median,rps_min,rps_max,cpu_us_per_request,p50_us,p99_us,server_cpu,load_bound_rounds,syscalls_per_request_total,epoll_ctl_per_request,flag,note\n");
    let q = |x: &str| format!("\"{}\"", x.replace('"', "\"\""));
    let opt = |v: Option<f64>, digits: usize| v.map_or(String::new(), |v| format!("{v:.digits$}"));
    for r in &s.rows {
        t += &format!(
            "{},{},{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{},{:.1},{:.1},{},{},{},{},{},{}\n",
            r.profile.name(),
            r.config.name(),
            r.load.name(),
            r.conns,
            q(&r.route),
            r.backend_observed,
            q(&r.io_uring),
            r.rounds_ok,
            r.rounds_failed,
            r.rps_median,
            r.rps_min,
            r.rps_max,
            opt(r.cpu_us_per_request, 3),
            r.p50_us,
            r.p99_us,
            opt(r.server_cpu, 1),
            r.load_bound_rounds,
            opt(r.syscalls_per_request.get("total").copied(), 4),
            opt(r.syscalls_per_request.get("epoll_ctl").copied(), 4),
            q(r.flag.as_deref().unwrap_or("")),
            q(r.note.as_deref().unwrap_or(""))
        );
    }
    t
}

/// comparisons.csv: every paired comparison, one per line.
pub fn comparisons(s: &Summary) -> String {
    let q = |x: &str| format!("\"{}\"", x.replace('"', "\"\""));
    let mut t = String::from("profile,config,baseline_profile,baseline,load,conns,route,metric,ratio_median,ci95_low,ci95_high,significant,pairs\n");
    for c in &s.comparisons {
        t += &format!(
            "{},{},{},{},{},{},{},{},{:.4},{:.4},{:.4},{},{}\n",
            c.profile.name(),
            c.config.name(),
            c.baseline_profile.name(),
            c.baseline.name(),
            c.load.name(),
            c.conns,
            q(&c.route),
            c.metric.key(),
            c.ratio_median,
            c.ci95_low,
            c.ci95_high,
            c.significant,
            c.pairs
        );
    }
    t
}

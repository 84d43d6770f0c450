//! Results: one schema for every driver (rxload's engines, goose, real wrk), wrk's text layout
//! (so scripts that parse wrk parse rxload), and a parser for that layout.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    /// Responses outside 2xx/3xx.
    pub status: u64,
    /// Open loop with `--deadline`: requests already staler than the deadline when their
    /// connection was free, shed without touching the wire.
    #[serde(default)]
    pub deadline: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub mean_us: f64,
    pub stdev_us: f64,
    pub max_us: f64,
    /// Share of samples within one standard deviation of the mean, in percent.
    pub within_stdev_pct: f64,
    pub p50_us: f64,
    pub p75_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    /// Not in wrk's text report; `None` when parsed from it.
    pub p999_us: Option<f64>,
}

/// Connection-per-request mode: who ended each connection. The client closes every connection
/// after its response whatever the server said, so a server that ignores `Connection: close`
/// is measured the same way as one that honours it — and this says which it was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Closes {
    /// Connections in the measured window (open at its start or opened in it), each carrying
    /// one request at most.
    pub opened: u64,
    /// Responses that announced the close (`Connection: close`, HTTP/1.0) or ended with it.
    pub server: u64,
    /// Responses after which the server would have kept the connection open: the client
    /// closed it.
    pub client: u64,
}

/// Open loop (`--rate`): the schedule, what it achieved, and the latency both ways. The
/// report's `latency` (and its buckets) is the corrected one, from each request's due time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// The requested rate, all connections together.
    pub target_rps: f64,
    pub deadline_s: Option<f64>,
    /// Latency from the actual send (what a closed-loop driver would report).
    pub uncorrected: Latency,
    /// How late the driver sent a request after it was due and its connection free: its
    /// own loop's delay (P99, µs).
    pub send_lag_p99_us: f64,
    /// The driver fell behind its schedule (`send_lag_p99_us` over
    /// [`OpenLoop::BEHIND_US`]): the slice measured the driver, not the server.
    pub behind: bool,
}

impl OpenLoop {
    /// Send lag (P99) over which a run is marked behind: twice epoll's 1 ms timer grain.
    pub const BEHIND_US: f64 = 2000.0;
}

/// Per-thread requests-per-second samples (wrk's "Req/Sec" row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RateStats {
    pub mean: f64,
    pub stdev: f64,
    pub max: f64,
    pub within_stdev_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub url: String,
    /// `io_uring`, `epoll/rx`, `goose`, `wrk`.
    pub engine: String,
    /// rxload's engines: the io_uring status (`active(<setup flags>[,recv_multishot])`,
    /// `unavailable(EPERM)`, `not-tried`). Not in wrk's report.
    #[serde(default)]
    pub io_uring: Option<String>,
    pub threads: u64,
    pub connections: u64,
    /// The requested duration, in seconds.
    pub duration_s: f64,
    /// Complete responses.
    pub requests: u64,
    /// Measured time, in seconds.
    pub elapsed_s: f64,
    pub bytes_read: u64,
    pub requests_per_s: f64,
    pub transfer_per_s: f64,
    pub latency: Latency,
    pub req_per_thread: RateStats,
    pub errors: Errors,
    /// Reconnections after `Connection: close` or an error (not in wrk's report).
    pub reconnects: Option<u64>,
    /// The driver process's CPU time (user + system) over the measured period.
    pub driver_cpu_s: Option<f64>,
    /// Syscalls the driver's event loops made, by name.
    pub driver_syscalls: Option<std::collections::BTreeMap<String, u64>>,
    /// rxload's engines: the latency histogram at two significant digits, so that reports
    /// can be merged (not in wrk's or goose's report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_buckets: Option<LatencyBuckets>,
    /// Connection-per-request mode only (`--disable-keepalive`): who closed the connections.
    /// Latency there runs from the connect to the response's last byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes: Option<Closes>,
    /// Open loop only (`--rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
}

/// A latency histogram reduced to two significant digits (1 % wide buckets): `(upper value
/// of the bucket in µs, count)` pairs in rising order. Small enough to keep one per
/// measurement, exact enough to merge several into one set of percentiles.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyBuckets(pub Vec<(u64, u64)>);

impl LatencyBuckets {
    pub fn from_histogram(h: &hdrhistogram::Histogram<u64>) -> LatencyBuckets {
        let mut buckets = std::collections::BTreeMap::new();
        for v in h.iter_recorded() {
            *buckets
                .entry(two_digits_up(v.value_iterated_to()))
                .or_insert(0) += v.count_at_value();
        }
        LatencyBuckets(buckets.into_iter().collect())
    }

    /// The `q` quantile (0–1) of all the parts together; `None` when they hold no sample.
    pub fn merged_quantile(parts: &[&LatencyBuckets], q: f64) -> Option<f64> {
        let mut all: Vec<(u64, u64)> = parts.iter().flat_map(|p| p.0.iter().copied()).collect();
        all.sort_unstable();
        let total: u64 = all.iter().map(|&(_, n)| n).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        all.into_iter().find_map(|(value, n)| {
            seen += n;
            (seen >= rank).then_some(value as f64)
        })
    }
}

/// `v` rounded up to two significant digits (1234 → 1300, 99 → 99, 7 → 7).
fn two_digits_up(v: u64) -> u64 {
    let mut step = 1;
    while v / step >= 100 {
        step *= 10;
    }
    v.div_ceil(step) * step
}

/// wrk's `format_units`: divide while the amount is at least 85 % of the next unit.
fn units(n: f64, scale: f64, base: &str, names: &[&str]) -> String {
    let (mut amt, mut unit) = (n, base);
    let mut i = 0;
    while i < names.len() && amt >= scale * 0.85 {
        amt /= scale;
        unit = names[i];
        i += 1;
    }
    format!("{amt:.2}{unit}")
}

fn time_us(us: f64) -> String {
    if us >= 60_000_000.0 {
        return units(us / 1_000_000.0, 60.0, "s", &["m", "h"]);
    }
    units(us, 1000.0, "us", &["ms", "s"])
}

fn metric(n: f64) -> String {
    units(n, 1000.0, "", &["k", "M", "G", "T"])
}

fn binary(n: f64) -> String {
    units(n, 1024.0, "", &["K", "M", "G", "T"])
}

/// wrk's `print_units`: right-aligned in `width`, two spaces of padding less per letter.
fn cell(s: String, width: usize) -> String {
    let b = s.as_bytes();
    let mut pad = 2;
    if b.last().is_some_and(u8::is_ascii_alphabetic) {
        pad -= 1;
    }
    if b.len() >= 2 && b[b.len() - 2].is_ascii_alphabetic() {
        pad -= 1;
    }
    format!("{s:>w$}{}", &"  "[..pad], w = width - pad)
}

/// One "Thread Stats" row: Avg, Stdev, Max in their columns, then +/- Stdev.
fn stats_row(name: &str, [avg, stdev, max]: [String; 3], within_pct: f64) -> String {
    format!(
        "    {name:<10}{}{}{}{within_pct:8.2}%\n",
        cell(avg, 8),
        cell(stdev, 10),
        cell(max, 9)
    )
}

impl Report {
    /// The report in wrk's layout.
    pub fn to_wrk_text(&self, with_latency_distribution: bool) -> String {
        let l = &self.latency;
        let r = &self.req_per_thread;
        let mut s = String::new();
        s += &format!(
            "Running {} test @ {}\n",
            crate::target::format_duration(std::time::Duration::from_secs_f64(self.duration_s)),
            self.url
        );
        s += &format!(
            "  {} threads and {} connections\n",
            self.threads, self.connections
        );
        s += &format!(
            "  Thread Stats{:>6}{:>11}{:>8}{:>12}\n",
            "Avg", "Stdev", "Max", "+/- Stdev"
        );
        s += &stats_row(
            "Latency",
            [l.mean_us, l.stdev_us, l.max_us].map(time_us),
            l.within_stdev_pct,
        );
        s += &stats_row(
            "Req/Sec",
            [r.mean, r.stdev, r.max].map(metric),
            r.within_stdev_pct,
        );
        if with_latency_distribution {
            s += "  Latency Distribution\n";
            for (p, v) in [
                (50, l.p50_us),
                (75, l.p75_us),
                (90, l.p90_us),
                (99, l.p99_us),
            ] {
                s += &format!("{p:>7}%{}\n", cell(time_us(v), 10));
            }
        }
        s += &format!(
            "  {} requests in {}, {}B read\n",
            self.requests,
            time_us(self.elapsed_s * 1e6),
            binary(self.bytes_read as f64)
        );
        let e = &self.errors;
        if e.connect + e.read + e.write + e.timeout > 0 {
            s += &format!(
                "  Socket errors: connect {}, read {}, write {}, timeout {}\n",
                e.connect, e.read, e.write, e.timeout
            );
        }
        if e.status > 0 {
            s += &format!("  Non-2xx or 3xx responses: {}\n", e.status);
        }
        if let Some(o) = &self.open_loop {
            s += &format!(
                "  Open loop: target {:.0} req/s, achieved {:.0}; uncorrected latency P50 {}, P99 {}; send lag P99 {}{}\n",
                o.target_rps,
                self.requests_per_s,
                time_us(o.uncorrected.p50_us),
                time_us(o.uncorrected.p99_us),
                time_us(o.send_lag_p99_us),
                if o.behind { " — BEHIND SCHEDULE: this run measured the driver" } else { "" }
            );
            if e.deadline > 0 {
                s += &format!("  Shed past the deadline: {}\n", e.deadline);
            }
        }
        if let Some(c) = &self.closes {
            s += &format!(
                "  A connection per request: {} opened; closed by the server {}, by the client {}\n",
                c.opened, c.server, c.client
            );
        }
        s += &format!("Requests/sec: {:9.2}\n", self.requests_per_s);
        s += &format!("Transfer/sec: {:>10}B\n", binary(self.transfer_per_s));
        s
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a wrk report: {0}")]
pub struct ParseError(String);

fn parse_value(s: &str, kind: &str) -> Result<f64, ParseError> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| ParseError(format!("'{s}' is not a number")))?;
    let factor = match (kind, unit) {
        ("time", "us") => 1.0,
        ("time", "ms") => 1e3,
        ("time", "s") => 1e6,
        ("time", "m") => 60e6,
        ("time", "h") => 3600e6,
        ("metric", "") => 1.0,
        ("metric", "k") => 1e3,
        ("metric", "M") => 1e6,
        ("metric", "G") => 1e9,
        ("binary", "B") => 1.0,
        ("binary", "KB") => 1024.0,
        ("binary", "MB") => 1024.0 * 1024.0,
        ("binary", "GB") => 1024.0 * 1024.0 * 1024.0,
        ("binary", "TB") => 1024f64.powi(4),
        _ => return Err(ParseError(format!("unit '{unit}' in '{s}'"))),
    };
    Ok(n * factor)
}

/// Reads wrk's (or rxload's) text report. Fields wrk does not print stay `None`/zero.
pub fn parse_wrk_text(text: &str) -> Result<Report, ParseError> {
    let missing = |what: &str| ParseError(format!("no {what} line"));
    let mut report = Report {
        url: String::new(),
        engine: "wrk".into(),
        threads: 0,
        connections: 0,
        duration_s: 0.0,
        requests: 0,
        elapsed_s: 0.0,
        bytes_read: 0,
        requests_per_s: 0.0,
        transfer_per_s: 0.0,
        latency: Latency::default(),
        req_per_thread: RateStats::default(),
        errors: Errors::default(),
        reconnects: None,
        closes: None,
        open_loop: None,
        io_uring: None,
        driver_cpu_s: None,
        driver_syscalls: None,
        latency_buckets: None,
    };
    let (mut saw_rps, mut saw_requests, mut saw_latency) = (false, false, false);
    for line in text.lines() {
        let t = line.trim();
        let f: Vec<&str> = t.split_whitespace().collect();
        if let Some(rest) = t.strip_prefix("Running ") {
            let (dur, url) = rest
                .split_once(" test @ ")
                .ok_or_else(|| missing("Running"))?;
            report.url = url.to_string();
            report.duration_s = crate::target::parse_duration(dur)
                .map_err(|e| ParseError(e.to_string()))?
                .as_secs_f64();
        } else if f.len() == 5 && f[1] == "threads" && f[4] == "connections" {
            report.threads = f[0].parse().map_err(|_| missing("threads"))?;
            report.connections = f[3].parse().map_err(|_| missing("connections"))?;
        } else if f.first() == Some(&"Latency") && f.len() == 5 {
            report.latency.mean_us = parse_value(f[1], "time")?;
            report.latency.stdev_us = parse_value(f[2], "time")?;
            report.latency.max_us = parse_value(f[3], "time")?;
            report.latency.within_stdev_pct = parse_value(f[4].trim_end_matches('%'), "metric")?;
            saw_latency = true;
        } else if f.first() == Some(&"Req/Sec") && f.len() == 5 {
            report.req_per_thread = RateStats {
                mean: parse_value(f[1], "metric")?,
                stdev: parse_value(f[2], "metric")?,
                max: parse_value(f[3], "metric")?,
                within_stdev_pct: parse_value(f[4].trim_end_matches('%'), "metric")?,
            };
        } else if f.len() == 2 && f[0].ends_with('%') && f[0].len() <= 4 {
            let v = parse_value(f[1], "time")?;
            match f[0] {
                "50%" => report.latency.p50_us = v,
                "75%" => report.latency.p75_us = v,
                "90%" => report.latency.p90_us = v,
                "99%" => report.latency.p99_us = v,
                _ => {}
            }
        } else if f.len() == 6 && f[1] == "requests" && f[2] == "in" {
            report.requests = f[0].parse().map_err(|_| missing("requests"))?;
            report.elapsed_s = parse_value(f[3].trim_end_matches(','), "time")? / 1e6;
            report.bytes_read = parse_value(f[4], "binary")? as u64;
            saw_requests = true;
        } else if let Some(rest) = t.strip_prefix("Socket errors:") {
            for part in rest.split(',') {
                let mut kv = part.split_whitespace();
                let (k, v) = (kv.next().unwrap_or(""), kv.next().unwrap_or("0"));
                let v: u64 = v.parse().map_err(|_| missing("socket errors"))?;
                match k {
                    "connect" => report.errors.connect = v,
                    "read" => report.errors.read = v,
                    "write" => report.errors.write = v,
                    "timeout" => report.errors.timeout = v,
                    _ => {}
                }
            }
        } else if let Some(rest) = t.strip_prefix("Non-2xx or 3xx responses:") {
            report.errors.status = rest.trim().parse().map_err(|_| missing("non-2xx"))?;
        } else if let Some(rest) = t.strip_prefix("Requests/sec:") {
            report.requests_per_s = rest.trim().parse().map_err(|_| missing("Requests/sec"))?;
            saw_rps = true;
        } else if let Some(rest) = t.strip_prefix("Transfer/sec:") {
            report.transfer_per_s = parse_value(rest.trim(), "binary")?;
        }
    }
    if !saw_rps {
        return Err(missing("Requests/sec"));
    }
    if !saw_requests {
        return Err(missing("'N requests in'"));
    }
    if !saw_latency {
        return Err(missing("Latency"));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_keep_two_digits_and_merge_into_the_right_percentiles() {
        assert_eq!(
            [7, 99, 100, 101, 1234, 99_999].map(two_digits_up),
            [7, 99, 100, 110, 1300, 100_000]
        );
        let mut fast = crate::load::new_histogram();
        let mut slow = crate::load::new_histogram();
        for us in 100..200 {
            fast.record_n(us, 9).unwrap(); // 900 samples in 100–199 µs
        }
        slow.record_n(5_000, 100).unwrap(); // 100 samples at 5 ms
        let (a, b) = (
            LatencyBuckets::from_histogram(&fast),
            LatencyBuckets::from_histogram(&slow),
        );
        assert!(a.0.len() <= 11, "two digits: {:?}", a.0);
        assert_eq!(a.0.iter().map(|&(_, n)| n).sum::<u64>(), 900);
        let p50 = LatencyBuckets::merged_quantile(&[&a, &b], 0.5).unwrap();
        assert!((150.0..=160.0).contains(&p50), "{p50}");
        // 10 % of the merged samples are at 5 ms: P99 is there (its bucket's upper edge, so
        // never below the truth, at most 2 % above), P89 is not.
        let p99 = LatencyBuckets::merged_quantile(&[&a, &b], 0.99).unwrap();
        assert!((5000.0..=5100.0).contains(&p99), "{p99}");
        assert!(LatencyBuckets::merged_quantile(&[&a, &b], 0.89).unwrap() < 300.0);
        assert_eq!(LatencyBuckets::merged_quantile(&[], 0.5), None);
    }

    /// A report as real wrk 4.2 printed it (Debian's wrk against nginx here).
    const REAL_WRK: &str = "Running 5s test @ http://127.0.0.1:3918/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   459.22us  171.80us   7.31ms   93.47%
    Req/Sec   137.25k     8.37k  147.24k    78.00%
  Latency Distribution
     50%  432.00us
     75%  490.00us
     90%  577.00us
     99%    1.06ms
  683047 requests in 5.00s, 47.56MB read
  Socket errors: connect 0, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 17
Requests/sec: 136578.28
Transfer/sec:      9.51MB
";

    #[test]
    fn parses_real_wrk_output() {
        let r = parse_wrk_text(REAL_WRK).unwrap();
        assert_eq!((r.threads, r.connections, r.requests), (1, 64, 683047));
        assert_eq!(r.url, "http://127.0.0.1:3918/");
        assert_eq!(r.duration_s, 5.0);
        assert!((r.latency.mean_us - 459.22).abs() < 1e-9);
        assert!((r.latency.max_us - 7310.0).abs() < 1e-6);
        assert!((r.latency.p99_us - 1060.0).abs() < 1e-6);
        assert!((r.req_per_thread.mean - 137_250.0).abs() < 1e-6);
        assert_eq!(
            r.errors,
            Errors {
                connect: 0,
                read: 3,
                write: 0,
                timeout: 2,
                status: 17,
                deadline: 0
            }
        );
        assert!((r.requests_per_s - 136578.28).abs() < 1e-9);
        assert!((r.bytes_read as f64 - 47.56 * 1024.0 * 1024.0).abs() < 1.0);
    }

    #[test]
    fn formats_like_wrk() {
        assert_eq!(time_us(459.22), "459.22us");
        assert_eq!(time_us(900.0), "0.90ms");
        assert_eq!(time_us(7310.0), "7.31ms");
        assert_eq!(time_us(5_000_000.0), "5.00s");
        assert_eq!(metric(137_250.0), "137.25k");
        assert_eq!(binary(47.56 * 1024.0 * 1024.0), "47.56M");
        assert_eq!(cell(time_us(459.22), 8), "459.22us");
        assert_eq!(cell(metric(137_250.0), 8), "137.25k ");
    }

    #[test]
    fn real_wrk_text_round_trips_through_our_renderer() {
        let parsed = parse_wrk_text(REAL_WRK).unwrap();
        let rendered = parsed.to_wrk_text(true);
        assert_eq!(rendered, REAL_WRK);
    }

    #[test]
    fn rejects_what_is_not_a_report() {
        assert!(parse_wrk_text("hello").is_err());
        assert!(parse_wrk_text("Requests/sec: 5\n").is_err());
    }
}

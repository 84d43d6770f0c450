//! The seed PR's table as the PR measured it: each server alone, kept alive, its median req/s
//! and P50 per connection level, paired with rx by round — right after the headline.

use crate::model::{Profile, Raw, ServerConfig, Subject};
use crate::stats::{ratio_text, short_rate, two_digit_latency, Interval};
use crate::summary::{SeedCell, SeedSource, SeedTable, Summary, SEED_COLUMNS};

/// The section: the table where the run drove its servers alone, else one line saying so.
pub fn section(raw: &Raw, s: &Summary) -> String {
    let Some(table) = &s.seed else {
        return "## The seed PR's table\n\nNot measured in this run: no server was driven alone (runs of duets before the solo phase drove every server beside another). The duets' comparisons follow.\n\n".to_string();
    };
    let st = &raw.settings;
    let how = match table.source {
        SeedSource::AloneBesideDuets => {
            "in the same shuffled groups as the duets and launched afresh with them every round"
        }
        SeedSource::Alternating => "one server at a time, the order shuffled every round",
    };
    let mut t = format!(
        "## The seed PR's table: each server alone\n\nKept alive, one worker on server CPU {:?}, each server driven alone by {} on CPU {:?} for {:.0} ms windows after a {:.0} ms warm-up, {how}; {} slices a cell over {} rounds, on `{}`. Each cell: the median req/s and its change against rx by round (95 % interval, Student's t over rounds; rx's own: ± the interval of its rate); P50 and P99 of the slices' merged histograms, P50's change against rx; what set the rate (the server's and the driver's CPU busy: server-bound, driver-bound, or neither — the pair's ping-pong). In a closed loop each connection has one request in flight, so P50 is about the connections over the rate (Little's law): a lower P50 beside a higher rate is the same finding.\n\n",
        st.server_cpus,
        raw.driver,
        st.load_cpus,
        st.slice_s * 1000.0,
        st.slice_warmup_s * 1000.0,
        slices_text(table),
        table.rounds,
        table.route,
    );
    if !st.intervals_cover_processes() {
        t += "The servers stayed resident for the run: these intervals over rounds do not carry what two processes of one server differ by (the A/A control's does).\n\n";
    }
    // The PR's own setting first (no filter), then the block, then the engine's default.
    for profile in [Profile::Relaxed, Profile::NoIoUring, Profile::Default] {
        if table.cells.iter().any(|c| c.profile == profile) {
            t += &profile_table(table, profile);
        }
    }
    t
}

/// `6–10`: the fewest and most slices a cell has (rounds added for the target resolution
/// visit only the groups still wider than it).
fn slices_text(table: &SeedTable) -> String {
    let n = table.cells.iter().map(|c| c.slices);
    match (n.clone().min(), n.max()) {
        (Some(a), Some(b)) if a < b => format!("{a}–{b}"),
        (Some(a), _) => a.to_string(),
        _ => "0".into(),
    }
}

/// One profile's rows: a level each, a column per server (and under the block the PR's own
/// figure last: the fallback's req/s as a share of io_uring's).
fn profile_table(table: &SeedTable, profile: Profile) -> String {
    let blocked = profile == Profile::NoIoUring;
    let mut t = format!(
        "`{}` — {}:\n\n| conns |",
        profile.name(),
        profile_words(profile)
    );
    for c in SEED_COLUMNS {
        let fell_back = table
            .cells
            .iter()
            .find(|x| x.profile == profile && x.config == Subject::Own(c))
            .filter(|x| c == ServerConfig::IoUring && !x.backend_observed.starts_with("io_uring"));
        t += &match fell_back {
            Some(x) => format!(" {} — ran {} |", c.heading(), x.backend_observed),
            None => format!(" {} |", c.heading()),
        };
    }
    if blocked {
        t += " io_uring's req/s under the block ÷ unblocked |";
    }
    t += "\n| --- | --- | --- | --- |";
    if blocked {
        t += " --- |";
    }
    t += "\n";
    let mut levels: Vec<u32> = table.cells.iter().map(|c| c.conns).collect();
    levels.sort_unstable();
    levels.dedup();
    for n in levels {
        t += &format!("| {n} |");
        for c in SEED_COLUMNS {
            let cell = table
                .cells
                .iter()
                .find(|x| x.profile == profile && x.config == Subject::Own(c) && x.conns == n);
            t += &format!(" {} |", cell.map_or("–".to_string(), cell_text));
        }
        if blocked {
            let share = table.fallback.iter().find(|f| f.conns == n);
            t += &format!(
                " {} |",
                share.map_or("–".to_string(), |f| share_text(&f.share))
            );
        }
        t += "\n";
    }
    t + "\n"
}

fn profile_words(p: Profile) -> &'static str {
    match p {
        Profile::Relaxed => "no seccomp filter, as the PR measured outside any container",
        Profile::NoIoUring => "the block (io_uring denied with EPERM, as Docker ≥ 25 does): the io_uring server falls back to epoll",
        Profile::Default => "the engine's own profile, which here denies io_uring",
    }
}

/// `41.6k −18.0 % [−20.1, −15.8] · P50 1.5 ms (+21.0 % [..]) · P99 2.0 ms · server-bound (server 98 %, driver 80 %)`.
fn cell_text(c: &SeedCell) -> String {
    let rate = match (&c.rps_vs_rx, &c.rps_level) {
        (Some(vs), _) => format!("{} {}", short_rate(c.rps_median), ratio_text(vs)),
        (None, Some(level)) => format!(
            "{} ±{:.1} %",
            short_rate(c.rps_median),
            (level.high / level.low).sqrt().ln() * 100.0
        ),
        (None, None) => short_rate(c.rps_median),
    };
    let p50 = match &c.p50_vs_rx {
        Some(vs) => format!("{} ({})", two_digit_latency(c.p50_us), ratio_text(vs)),
        None => two_digit_latency(c.p50_us),
    };
    let busy = |u: Option<f64>| u.map_or("?".to_string(), |u| format!("{:.0} %", u * 100.0));
    format!(
        "{rate} · P50 {p50} · P99 {} · {} (server {}, driver {})",
        two_digit_latency(c.p99_us),
        c.limit.describe(),
        busy(c.server_busy),
        busy(c.driver_busy)
    )
}

/// `0.87 [0.84, 0.90]`: a share, not a change.
fn share_text(i: &Interval) -> String {
    format!("{:.2} [{:.2}, {:.2}]", i.median, i.low, i.high)
}

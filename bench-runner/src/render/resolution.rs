//! table.md's paragraphs on what a run can resolve: the A/A control's half-width, whether the
//! run reached its `--target-resolution`, and how to read a `≈`.

use crate::model::{Pairing, Raw, Relaunch, Settings};
use crate::summary::{
    answered_after_s, resolution_limit, run_end_s, Metric, Reach, Summary, SATURATED,
};

pub(super) fn pct(x: f64) -> String {
    format!("±{:.1} %", x * 100.0)
}

/// The resolution paragraph: the worst A/A half-width, and a warning when it is too wide.
/// `limit`: the half-width the run is judged against ([`crate::summary::resolution_limit`]).
pub(super) fn resolution_text(s: &Summary, st: &Settings, limit: f64) -> String {
    let over = interval_over(st);
    let (pair, interval) = if st.instances > 1 {
        (
            format!(
                "the same server as two configurations of {} instances",
                st.instances
            ),
            format!("95 % interval {over}"),
        )
    } else if st.intervals_cover_processes() {
        (
            "the same server twice, launched afresh every round".to_string(),
            format!("95 % interval {over}"),
        )
    } else {
        (
            "the same server twice".to_string(),
            "paired 95 % interval".to_string(),
        )
    };
    let mut t = format!("**Resolution** (the A/A control — `io_uring-control` against `io_uring`, {pair} — half-width of its {interval}, worst cell): ");
    match (
        s.resolution_worst.get("cpu_per_request"),
        s.resolution_worst.get("rps"),
    ) {
        (None, None) => {
            t += "unknown: this run has no io_uring control pair, so it cannot say how small a difference it resolves.\n\n";
            return t;
        }
        (cpu, rps) => {
            t += &format!(
                "CPU per request {}, req/s {}.",
                cpu.map_or("–".into(), |c| pct(*c)),
                rps.map_or("–".into(), |r| pct(*r))
            );
            if cpu.is_some_and(|c| *c > limit) {
                t += &format!(" **This run was too noisy to separate effects smaller than {}** (its target is ±{:.0} %).", pct(*cpu.unwrap()), limit * 100.0);
            }
        }
    }
    t += "\n\n";
    let cpu: Vec<&crate::summary::Resolution> = s
        .resolution
        .iter()
        .filter(|r| r.metric == Metric::CpuPerRequest)
        .collect();
    let apart = cpu.iter().filter(|r| r.aa_apart).count();
    if st.intervals_cover_processes() {
        // The interval carries the processes' difference: no second bound.
        t += &format!("The A/A pair came out apart in {apart} of {} cells on CPU per request (a 95 % interval does so about one time in twenty).", cpu.len());
        t += "\n\n";
    } else if apart > 0 {
        let bound = cpu.iter().map(|r| r.aa_bound).fold(0.0, f64::max);
        t += &format!("The A/A pair itself came out apart in {apart} of {} cells on CPU per request, and its intervals reach {} from no change: two identical servers can differ that much on this machine (memory placement, which one ran when), so a difference smaller than that is not a result, whatever its interval.\n\n", cpu.len(), pct(bound).replace('±', ""));
    }
    let mut sorted = cpu.clone();
    sorted.sort_by_key(|r| (r.profile, r.conns, r.route.clone()));
    let cells: Vec<String> = sorted
        .iter()
        .map(|r| {
            let reach = s.reach.iter().find(|c| {
                (c.profile, c.load, c.conns, &c.route) == (r.profile, r.load, r.conns, &r.route)
            });
            format!(
                "{} c={}{}: {}{}",
                r.profile.name(),
                r.conns,
                route_suffix(&r.route),
                pct(r.half_width),
                reach.map_or(String::new(), |c| reached(c, limit))
            )
        })
        .collect();
    if !cells.is_empty() {
        let when = if s.reach.is_empty() {
            ""
        } else {
            "; in brackets, the round from which it stayed within the limit and when in the run that round ended"
        };
        t += &format!(
            "Per cell (CPU per request{when}): {}.\n\n",
            cells.join("; ")
        );
    }
    t
}

/// The run's own check of its intervals ([`crate::stats::calibration`]): each A/A pair over
/// all its cells, with the rounds as the unit, and the replicate contrasts (said once, for the
/// whole run, after how to read the intervals).
pub(super) fn calibration_text(s: &Summary) -> String {
    let Some(c) = &s.calibration else {
        return String::new();
    };
    let mut t = String::new();
    if c.pair_tally.made > 0 {
        let pairs: Vec<String> = c
            .pairs
            .iter()
            .map(|p| {
                format!(
                    "{} {}",
                    p.profile.name(),
                    crate::stats::ratio_text(&p.interval())
                )
            })
            .collect();
        t += &format!(
            " The A/A control counted by pair — each profile's pair with its cells averaged round by round, since they share each round's launch and the rounds are the replicates — is apart in {} of {} ({}).",
            c.pair_tally.apart,
            c.pair_tally.made,
            pairs.join("; ")
        );
    }
    if c.replicates.made > 0 {
        t += &format!(
            " Replicate contrasts — every comparison across profiles made with both copies of the io_uring server, which should differ by nothing — apart in {} of {}.",
            c.replicates.apart, c.replicates.made
        );
    }
    t
}

/// A span of a run: seconds under two minutes, else whole minutes.
pub(super) fn took(seconds: f64) -> String {
    if seconds < 120.0 {
        format!("{seconds:.0} s")
    } else {
        format!("{:.0} min", seconds / 60.0)
    }
}

/// One cell's reach, in brackets after its half-width.
fn reached(c: &Reach, limit: f64) -> String {
    match c.round {
        Some(round) => format!(" (round {round}, {})", took(c.after_s)),
        None => format!(" (not within {} by {})", pct(limit), took(c.after_s)),
    }
}

/// How long the run's answer took, as the headline's "Here" line ends: every A/A cell within
/// the run's limit from some time on, or how many were by the run's end.
pub(super) fn answer_took(raw: &Raw, s: &Summary) -> String {
    let Some(run) = run_end_s(raw).filter(|_| !s.reach.is_empty()) else {
        return String::new();
    };
    let within = s.reach.iter().filter(|r| r.round.is_some()).count();
    let limit = pct(resolution_limit(&raw.settings));
    answer_phrase(
        answered_after_s(&s.reach),
        run,
        (within, s.reach.len()),
        &limit,
    )
}

/// The Here line's ending: when every cell came within `limit` (`answered_s`), and the run's
/// own length only where it went on past that; else how many of the `cells` (within, of all)
/// did by its end.
fn answer_phrase(
    answered_s: Option<f64>,
    run_s: f64,
    (within, cells): (usize, usize),
    limit: &str,
) -> String {
    match answered_s {
        Some(t) if took(t) == took(run_s) => format!(
            "; the answer took {}: every cell within {limit} at the run's end",
            took(t)
        ),
        Some(t) => format!(
            "; the answer took {}: every cell within {limit} from then on (the run: {})",
            took(t),
            took(run_s)
        ),
        None => format!(
            "; {within} of {cells} cells came within {limit} in the run's {}",
            took(run_s)
        ),
    }
}

/// What every run's "How to read" says after how its intervals are made (`shown`: what
/// the run's figures are, to be told apart or not).
pub(super) fn how_to_read_rest(shown: &str) -> String {
    format!("`≈` means the interval contains no change: this run cannot tell the two apart, whatever the {shown} say. req/s is the median over slices in which the server was saturated (≥ {:.0} % CPU); CPU per request is the server's CPU time over the slice divided by the requests answered in it — the steadier of the two on a shared machine. ⚠: the server did not run what its column claims (see the evidence).\n\n", SATURATED * 100.0)
}

/// Whether the run reached its `--target-resolution`, and where it did not.
pub(super) fn target_text(
    target: &crate::target::Target,
    st: &crate::model::Settings,
    s: &Summary,
) -> String {
    let planned = st.planned_rounds.unwrap_or(st.rounds);
    let added = st.rounds.saturating_sub(planned);
    let budget = if target.budget_s < 120.0 {
        format!("{:.0} s", target.budget_s)
    } else {
        format!("{:.0} min", target.budget_s / 60.0)
    };
    let aim = format!(
        "**Target resolution** ±{:.1} % (the A/A control on CPU per request, every cell), within {budget} of measuring: ",
        target.half_width * 100.0,
    );
    let cells = s
        .resolution
        .iter()
        .filter(|r| r.metric == Metric::CpuPerRequest)
        .count();
    if cells == 0 {
        return aim + "not judged — this run has no A/A control.\n\n";
    }
    let open = target.open(s);
    // How the added rounds were decided: once from the first stage's spread, or (runs before
    // the two-stage rule) after every round on the spread so far.
    let rule = match st.added {
        Some(a) => {
            let cut = if a.driven < a.asked {
                format!("; the budget allowed {}", a.driven)
            } else {
                String::new()
            };
            format!(
                ": the planned rounds' spread asked for {} more of {} blocks (the two-stage rule, decided once){cut}",
                a.asked, a.blocks
            )
        }
        None if added > 0 => ": added one at a time while the A/A control was wider, judged on the spread so far (the rule before the two-stage one); the intervals take the planned rounds' spread, as a rule on the sample's own spread leaves the spread over all rounds too narrow".to_string(),
        None => String::new(),
    };
    if open.is_empty() {
        return aim
            + &format!(
            "reached in every cell after {} rounds ({planned} planned, {added} added{rule}).\n\n",
            st.rounds
        );
    }
    let names: Vec<String> = open
        .iter()
        .map(|r| {
            format!(
                "{} c={}{}{} {}",
                r.profile.name(),
                r.conns,
                r.load.suffix(),
                route_suffix(&r.route),
                pct(r.half_width)
            )
        })
        .collect();
    aim + &format!(
        "**not reached** in {} of {cells} cells after {} rounds ({planned} planned, {added} added{rule}): {}.\n\n",
        open.len(),
        st.rounds,
        names.join("; ")
    )
}

/// How many left-out rounds the text names before it counts the rest.
const DROPPED_NAMED: usize = 8;

/// The rounds failed slices left out, each with its cause (nothing where none failed).
pub(super) fn dropped_text(s: &Summary) -> String {
    if s.dropped.is_empty() {
        return String::new();
    }
    let named: Vec<String> = s
        .dropped
        .iter()
        .take(DROPPED_NAMED)
        .map(|d| {
            let beside = d
                .partner
                .as_ref()
                .map_or(String::new(), |p| format!(", beside {p}"));
            format!(
                "round {}, {} c={}{} ({}{beside}): {}",
                d.round,
                d.load.phrase(),
                d.conns,
                route_suffix(&d.route),
                d.server,
                d.cause.replace('|', "/")
            )
        })
        .collect();
    let more = s.dropped.len().saturating_sub(DROPPED_NAMED);
    let rest = if more > 0 {
        format!("; and {more} more (evidence.md counts every cell's failed slices)")
    } else {
        String::new()
    };
    format!(
        "**Rounds left out**: {} failed slice{}, each taking its round out of its server's comparisons in that cell (and its duet partner's, so their `n` is one round fewer) — {}{rest}.\n\n",
        s.dropped.len(),
        if s.dropped.len() == 1 { "" } else { "s" },
        named.join("; ")
    )
}

pub(super) fn route_suffix(route: &str) -> String {
    if route == "GET:/" {
        String::new()
    } else {
        format!(" {route}")
    }
}

/// What a comparison's interval is taken over, by how the run launched and paired its servers,
/// and whose spread it takes where rounds were added after a first stage.
pub(super) fn interval_over(st: &Settings) -> String {
    let over = match (st.relaunch, st.pairing) {
        (Relaunch::Once, _) => "over instances and rounds",
        (Relaunch::Round, Pairing::Duet) => {
            "over rounds of duets (Student's t; each round's processes new, the order within each duet drawn afresh)"
        }
        (Relaunch::Round, Pairing::Alternate) => {
            "over rounds (Student's t; each round's processes new)"
        }
    };
    match st.first_stage() {
        Some(first) if st.relaunch == Relaunch::Round => format!(
            "{over} — Stein's, as rounds were added after round {first}: the mean over all {} rounds, the spread and degrees of freedom of the first {first} alone, so that how many rounds were run cannot narrow it",
            st.rounds
        ),
        _ => over.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_out_round_is_named_with_its_cell_partner_and_cause() {
        use crate::model::{LoadModel, Profile, ServerConfig, ServerKey};
        use crate::summary::DroppedRound;
        let key = |p, c: ServerConfig| ServerKey {
            profile: p,
            config: c.into(),
        };
        let one = DroppedRound {
            round: 4,
            server: key(Profile::NoIoUring, ServerConfig::IoUring),
            load: LoadModel::KeepAlive,
            conns: 512,
            route: "GET:/".into(),
            partner: Some(key(Profile::Relaxed, ServerConfig::IoUring)),
            cause: "the server exited".into(),
        };
        let mut s = Summary::default();
        assert_eq!(dropped_text(&s), "");
        s.dropped = vec![one.clone()];
        assert_eq!(
            dropped_text(&s),
            "**Rounds left out**: 1 failed slice, each taking its round out of its server's comparisons in that cell (and its duet partner's, so their `n` is one round fewer) — round 4, kept alive c=512 (no-io-uring/io_uring, beside relaxed/io_uring): the server exited.\n\n"
        );
        // Past eight, the rest are counted.
        s.dropped = vec![one; 11];
        let t = dropped_text(&s);
        assert!(
            t.starts_with("**Rounds left out**: 11 failed slices"),
            "{t}"
        );
        assert_eq!(t.matches("round 4,").count(), DROPPED_NAMED);
        assert!(t.contains("; and 3 more"), "{t}");
    }

    #[test]
    fn the_answer_s_time_names_the_run_s_length_only_where_the_run_went_on() {
        let limit = "±2.0 %";
        assert_eq!(
            answer_phrase(Some(1370.0), 1390.0, (21, 21), limit),
            "; the answer took 23 min: every cell within ±2.0 % at the run's end"
        );
        assert_eq!(
            answer_phrase(Some(900.0), 1390.0, (21, 21), limit),
            "; the answer took 15 min: every cell within ±2.0 % from then on (the run: 23 min)"
        );
        assert_eq!(
            answer_phrase(None, 1680.0, (20, 21), limit),
            "; 20 of 21 cells came within ±2.0 % in the run's 28 min"
        );
    }
}

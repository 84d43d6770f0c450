//! The terms every report uses, defined once; the headline links here and lists the terms
//! its own lines use ([`terms_in`]), and a test holds every listed term to a definition.

/// One glossary entry: how it is shown, the words of the reports it defines, its text.
pub struct Term {
    pub shown: &'static str,
    pub covers: &'static [&'static str],
    pub text: &'static str,
}

/// Every term, in the order the glossary lists them.
pub const TERMS: &[Term] = &[
    Term {
        shown: "the block",
        covers: &["the block"],
        text: "a seccomp profile that denies `io_uring_setup` (Docker Engine ≥ 25, containerd ≥ 2: EPERM; Podman and CRI-O: ENOSYS). A server that asked for io_uring then falls back to epoll.",
    },
    Term {
        shown: "`default`, `no-io-uring`, `relaxed`",
        covers: &["default", "no-io-uring", "relaxed"],
        text: "the three seccomp profiles a server runs under — the engine's own default; this project's copy of it that denies io_uring (the block, on any engine); no seccomp filter at all (`seccomp=unconfined`). What the block costs is a server under `no-io-uring` against the same server under `relaxed`.",
    },
    Term {
        shown: "io_uring server",
        covers: &["io_uring server"],
        text: "this project's server with `APP_BACKEND=auto` — io_uring where the profile allows it, epoll `rx` where it does not (its start-up line names the errno).",
    },
    Term {
        shown: "epoll server",
        covers: &["epoll server"],
        text: "a server that never asks for io_uring (here `rx`): the block cannot make it fall back, so what the block costs it is the filter's own — seccomp checking each of its syscalls.",
    },
    Term {
        shown: "`rx`, `legacy`, `oneshot`",
        covers: &["rx", "legacy", "oneshot"],
        text: "epoll receive paths. `rx` registers a connection once, edge-triggered (no `epoll_ctl` per request: nginx's way, and the seed PR's fix); `legacy` re-arms a one-shot registration on every request (a failed ADD, then MOD: two `epoll_ctl` a request, the seed PR's \"before\"); `oneshot` re-arms with one MOD.",
    },
    Term {
        shown: "the seed PR",
        covers: &["the seed PR"],
        text: "the pull request that started this project: a C web framework whose io_uring server, denied io_uring by its container's profile, fell back to an epoll path that paid two `epoll_ctl` a keep-alive request (a failed ADD, then MOD: `legacy` here). Its fix (\"RX-epoll\", `rx` here) registers each connection once, edge-triggered. Its table — each server alone, 4 workers on 2 cores, the median of 3 interleaved rounds — gave epoll after the fix +8 % req/s at 64 connections and +10 % at 512, P50 −8 / −9 %, within a few percent of io_uring. The seed PR's table in each report measures the same: each server alone, kept alive.",
    },
    Term {
        shown: "alone",
        covers: &["alone"],
        text: "a server driven by itself, not in a duet: the whole server CPU is its own, so its req/s and latency are its own (the seed PR's table). A run of duets drives the seed table's servers alone too, in the same rounds.",
    },
    Term {
        shown: "CPU per request",
        covers: &["CPU per request"],
        text: "the server's CPU time (its cgroup's, or its process's natively) over a slice, divided by the requests it answered. Steadier than req/s on a shared machine, and meaningful whether or not the server is saturated.",
    },
    Term {
        shown: "saturated",
        covers: &["saturated"],
        text: "the server used at least 90 % of its CPUs in the slice; only then does its req/s measure the server rather than the driver or the machine.",
    },
    Term {
        shown: "capacity, share of capacity",
        covers: &["capacity"],
        text: "a server's keep-alive req/s in the same run (the median of its keep-alive slices at that level); an open-loop cell offers each server a share of its own (50 %, 90 %), or every server the same rate, 50 % of the slowest's.",
    },
    Term {
        shown: "kept alive / a connection per request / open loop",
        covers: &["kept alive", "a connection per request", "open loop"],
        text: "the load models. Closed loop on keep-alive connections (wrk's); a fresh connection for every request (oha `--disable-keepalive`, the-benchmarker's 2025–2026 model); requests due on a fixed schedule at a share of the server's capacity, latency counted from the due time (wrk2's, zrk's).",
    },
    Term {
        shown: "duet",
        covers: &["duet"],
        text: "the two servers of a comparison driven at once, over one window of about a second, on the same server CPUs (a full run's default, `--pairing duet`): whatever the host does in that second falls on both, and the change is the ratio within each duet. Each server then has about half the CPUs, so CPU per request is the figure; req/s and latency are those of a shared machine. `--pairing alternate` drives one server at a time.",
    },
    Term {
        shown: "slice, round, group",
        covers: &["slice", "round"],
        text: "a slice is one server driven for about a second (in a duet, each of its two servers has its slice over the same window); a round drives every server (in a run of duets, every comparison's duet) once per load model and connection level, in a fresh random order; a group is the run of slices of one load model and level within a round.",
    },
    Term {
        shown: "cell",
        covers: &["cell"],
        text: "one load model, connection level (and route): every comparison is made within a cell.",
    },
    Term {
        shown: "paired change, interval",
        covers: &["paired change", "interval"],
        text: "the ratio of two servers' figures over the same rounds (within each duet, in a run of duets), and its 95 % interval over rounds and instances (docs/methodology.md). A change is reported as a result when its interval excludes no change; with resident servers, whose intervals do not carry the processes' own luck, it must also be larger than what two identical servers (the A/A control) differed by in its cell.",
    },
    Term {
        shown: "+x % [a, b], ≈ [a, b]",
        covers: &["brackets"],
        text: "a change and, in brackets, its 95 % interval; `≈` where the interval contains no change, which is then not printed as a signed figure.",
    },
    Term {
        shown: "resolved, not resolved at ±x %",
        covers: &["resolved", "not resolved"],
        text: "a change is resolved when its 95 % interval excludes no change; not resolved at ±x %: the interval includes no change and reaches x % from it, so this run cannot tell a difference smaller than that.",
    },
    Term {
        shown: "A/A control",
        covers: &["A/A control"],
        text: "`io_uring-control`, the io_uring server again as a configuration of its own. Identical servers compared as if different: the width of their interval is the run's resolution, and they should come out apart in about one cell in twenty.",
    },
    Term {
        shown: "A/A pair, replicate contrast",
        covers: &["pairs", "replicate contrasts"],
        text: "the A/A control of one profile over all its cells, averaged round by round (its cells share each round's launches, so they are one test, not several); a replicate contrast is a comparison across profiles made twice, once with `io_uring` and once with `io_uring-control`, whose two results should differ by nothing: both check the intervals out of sample.",
    },
    Term {
        shown: "probe, prediction",
        covers: &["probe", "predicted"],
        text: "before any server starts, the runner measures on the server CPU (`bench-runner probe`): the mechanism probe serves the io_uring server's receive path in-process — unblocked, under the `no-io-uring` filter (falling back to `rx`) and as `rx`, the three at once — and predicts the block's cost kept alive as blocked over unblocked CPU per request, the median of five windows with their lowest and highest; the older syscall probe times a syscall's entry and exit (`getppid`) and a socket `recvfrom` with nothing to read, and prices the syscalls the block adds a request (the servers' own counters) between those two, over the unblocked server's CPU per request: a floor. Each prediction is set beside the measured cost.",
    },
    Term {
        shown: "instances, launches",
        covers: &["instances", "launches"],
        text: "two identical processes differ by 1–2 % (memory placement), so an interval must sample processes, not only seconds: a run of duets launches every server afresh before every round (`--relaunch round`), so each round draws new processes; alternating servers stay resident as several processes of each configuration (`--instances`, 2). The interval covers that difference either way.",
    },
];

/// The phrases the headline may use, each with the glossary term it belongs to (matched as
/// written, case and all).
pub const VOCABULARY: &[(&str, &str)] = &[
    ("the block", "the block"),
    ("`no-io-uring`", "no-io-uring"),
    ("`relaxed`", "relaxed"),
    ("`default`", "default"),
    ("io_uring server", "io_uring server"),
    ("epoll server", "epoll server"),
    ("`rx`", "rx"),
    ("`legacy`", "legacy"),
    ("seed PR", "the seed PR"),
    ("CPU per request", "CPU per request"),
    ("capacity", "capacity"),
    ("kept alive", "kept alive"),
    ("a connection per request", "a connection per request"),
    ("open loop", "open loop"),
    ("% [", "brackets"),
    ("resolve", "resolved"),
    ("A/A control", "A/A control"),
    ("pairs over", "pairs"),
    ("replicate contrasts", "replicate contrasts"),
    ("predicted", "predicted"),
    ("cells", "cell"),
];

/// The glossary terms `text` uses, each once, in the glossary's order (shown as the glossary
/// shows them).
pub fn terms_in(text: &str) -> Vec<&'static str> {
    TERMS
        .iter()
        .filter(|t| {
            VOCABULARY
                .iter()
                .any(|(phrase, term)| t.covers.contains(term) && text.contains(phrase))
        })
        .map(|t| t.shown)
        .collect()
}

/// table.md's (and report.html's) last section.
pub fn markdown() -> String {
    let mut t = String::from("\n## Glossary\n\n");
    for term in TERMS {
        t += &format!("- **{}**: {}\n", term.shown, term.text);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phrase_of_the_headline_vocabulary_names_a_defined_term() {
        for (phrase, term) in VOCABULARY {
            assert!(
                TERMS.iter().any(|t| t.covers.contains(term)),
                "{phrase:?} names {term:?}, which the glossary does not define"
            );
        }
    }

    #[test]
    fn the_terms_of_a_text_are_those_its_phrases_use() {
        let t = terms_in("The io_uring server under the block: +5.7 % [+4.4, +7.1]");
        assert_eq!(t, ["the block", "io_uring server", "+x % [a, b], ≈ [a, b]"]);
        assert!(terms_in("nothing here").is_empty());
        // Each glossary entry is a line of its own.
        let md = markdown();
        for term in TERMS {
            assert!(
                md.contains(&format!("- **{}**: ", term.shown)),
                "{}",
                term.shown
            );
        }
    }
}

//! The headline's **Here** line: the machine in one phrase, and how finely the run resolves.

use crate::model::Raw;
use crate::summary::{Metric, Summary};

/// The machine in one phrase: what a syscall costs depends on it.
pub fn machine_phrase(m: &crate::model::Machine) -> String {
    let cpu = match &m.cpu_id {
        Some(id) => format!("{} {id}", m.cpu_model),
        None => m.cpu_model.clone(),
    };
    let mut parts = vec![format!("{cpu} ({} cores)", m.cores)];
    parts.extend(m.virtualization.clone());
    if let Some(v2) = m.mitigations.get("spectre_v2") {
        let first = v2.split(';').next().unwrap_or(v2).trim();
        parts.push(format!(
            "spectre_v2 {}",
            first.trim_start_matches("Mitigation: ")
        ));
    } else if m.mitigations.is_empty() {
        parts.push("mitigations not recorded".into());
    }
    parts.push(format!("kernel {}", m.kernel));
    parts.join(", ")
}

/// The run's resolution in one phrase: the A/A control's half-widths on CPU per request, and
/// how long the run took to bring every cell within its limit.
pub(super) fn resolution(raw: &Raw, s: &Summary) -> String {
    let cpu: Vec<f64> = s
        .resolution
        .iter()
        .filter(|r| r.metric == Metric::CpuPerRequest)
        .map(|r| r.half_width * 100.0)
        .collect();
    if cpu.is_empty() {
        return "no A/A control in this run: it cannot say how small a difference it resolves"
            .into();
    }
    let apart = s
        .resolution
        .iter()
        .filter(|r| r.metric == Metric::CpuPerRequest && r.aa_apart)
        .count();
    // The pairs, counted with the rounds as their unit (their cells share each round's launch).
    let by_pair = s.calibration.as_ref().map_or(String::new(), |c| {
        format!(
            " ({} of {} pairs over all their cells; replicate contrasts apart in {} of {})",
            c.pair_tally.apart, c.pair_tally.made, c.replicates.apart, c.replicates.made
        )
    });
    format!(
        "two identical servers (the A/A control) resolve {} on CPU per request, and came out apart in {apart} of {} cells{by_pair}{}",
        half_widths(&cpu),
        cpu.len(),
        crate::render::resolution::answer_took(raw, s)
    )
}

/// The span of some intervals' half-widths (in %), "±0.4–3.2 %": one decimal, so that a
/// narrow span does not read "±1–1 %".
pub(super) fn half_widths(widths: &[f64]) -> String {
    let lo = widths.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = widths.iter().copied().fold(0.0, f64::max);
    if format!("{lo:.1}") == format!("{hi:.1}") {
        format!("±{hi:.1} %")
    } else {
        format!("±{lo:.1}–{hi:.1} %")
    }
}

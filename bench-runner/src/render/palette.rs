//! What every figure shares: each server's colour, the same in every run and chart, and the
//! legend's look. The colours: this project's configurations in
//! the blue/green (fast paths) and red (the old re-arm) families, the peers by name in muted
//! hues, and any other `--server` by a hash of its name, so a figure from one run reads like
//! another's.

use plotters::chart::{ChartContext, SeriesLabelPosition};
use plotters::coord::CoordTranslate;
use plotters::prelude::{SVGBackend, BLACK, WHITE};
use plotters::style::{Color, RGBColor};

use crate::model::{ServerConfig, Subject};

/// What plotters reports while drawing any figure: the SVG backend's own error is an
/// `io::Error`.
pub type ChartError = plotters::drawing::DrawingAreaErrorKind<std::io::Error>;

/// This project's configurations in the order the bars and lines draw them.
pub(super) const BAR_ORDER: [ServerConfig; 5] = [
    ServerConfig::Legacy,
    ServerConfig::Oneshot,
    ServerConfig::Rx,
    ServerConfig::IoUring,
    ServerConfig::IoUringControl,
];

/// The peers `bench-runner peers` runs, by the name their configurations carry.
const PEERS: [(&str, RGBColor); 7] = [
    ("nginx", RGBColor(90, 90, 90)),
    ("haproxy", RGBColor(128, 100, 162)),
    ("hyper", RGBColor(191, 129, 45)),
    ("actix", RGBColor(53, 151, 143)),
    ("may-minihttp", RGBColor(160, 160, 160)),
    ("floor", RGBColor(30, 30, 30)),
    ("uring-floor", RGBColor(140, 150, 40)),
];

/// For any other name: hues apart from the project's own.
const OTHERS: [RGBColor; 6] = [
    RGBColor(170, 120, 180),
    RGBColor(120, 90, 60),
    RGBColor(90, 160, 200),
    RGBColor(200, 170, 60),
    RGBColor(110, 110, 160),
    RGBColor(180, 110, 110),
];

pub(super) fn colour(c: &Subject) -> RGBColor {
    match c {
        Subject::Own(ServerConfig::Legacy) => RGBColor(214, 96, 77),
        Subject::Own(ServerConfig::Oneshot) => RGBColor(244, 165, 130),
        Subject::Own(ServerConfig::Rx) => RGBColor(33, 102, 172),
        Subject::Own(ServerConfig::IoUring) => RGBColor(27, 120, 55),
        Subject::Own(ServerConfig::IoUringControl) => RGBColor(127, 191, 123),
        Subject::Foreign(name) => match PEERS.iter().find(|(peer, _)| **peer == **name) {
            Some((_, col)) => *col,
            // FNV-1a: a fixed hash, unlike std's seeded one, so the colour survives the run.
            None => {
                let h = name.bytes().fold(0x811c_9dc5u32, |h, b| {
                    (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
                });
                OTHERS[h as usize % OTHERS.len()]
            }
        },
    }
}

/// Every figure's legend: a pale box with a thin border, at `at`, in `size`-point type.
pub(super) fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    at: SeriesLabelPosition,
    size: u32,
) -> Result<(), ChartError> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", size))
        .draw()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn foreign(name: &str) -> Subject {
        Subject::Foreign(Arc::from(name))
    }

    #[test]
    fn a_server_keeps_its_colour_whatever_else_the_run_holds() {
        // The colour depends on the name alone: no position among the run's servers.
        assert_eq!(colour(&foreign("nginx")), RGBColor(90, 90, 90));
        assert_eq!(colour(&foreign("my-server")), colour(&foreign("my-server")));
        let own: Vec<RGBColor> = BAR_ORDER
            .iter()
            .map(|&c| colour(&Subject::Own(c)))
            .collect();
        for (name, col) in PEERS {
            assert_eq!(colour(&foreign(name)), col);
            assert!(!own.contains(&col), "{name} shares a colour with ours");
        }
        for name in ["a", "b", "zrk-server", "before", "after"] {
            assert!(!own.contains(&colour(&foreign(name))));
        }
    }
}

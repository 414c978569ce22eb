//! Where things go in the timeline's SVG: its size, the x of a time, the ticks of its
//! axis, and how a coordinate is written.

use crate::report::model::Report;

/// Width of the SVG's coordinate system (it scales to the page).
pub(super) const WIDTH: f64 = 1120.0;
pub(super) const AXIS_H: f64 = 30.0;
pub(super) const WAVE_H: f64 = 22.0;
pub(super) const ROW_H: f64 = 24.0;
pub(super) const BAR_H: f64 = 14.0;

/// Where things go in the SVG.
pub(super) struct Geometry {
    pub(super) x0: f64,
    x1: f64,
    pub(super) span_ms: u64,
    pub(super) step_ms: u64,
    pub(super) height: f64,
    pub(super) max_label: usize,
}

impl Geometry {
    pub(super) fn new(r: &Report) -> Geometry {
        let longest = r
            .steps
            .iter()
            .map(|s| s.path.chars().count())
            .max()
            .unwrap_or(8);
        let max_label = longest.clamp(8, 48);
        let label_w = (max_label as f64 * 7.0 + 28.0).clamp(150.0, 380.0);
        let step_ms = tick_step(r.totals.wall_ms.max(1));
        let span_ms = r
            .totals
            .wall_ms
            .max(1)
            .div_ceil(step_ms)
            .saturating_mul(step_ms);
        let groups = r.groups();
        let height = AXIS_H
            + groups
                .iter()
                .map(|(_, m)| WAVE_H + m.len() as f64 * ROW_H)
                .sum::<f64>()
            + 10.0;
        Geometry {
            x0: label_w + 8.0,
            x1: WIDTH - 150.0,
            span_ms,
            step_ms,
            height: height.max(AXIS_H + 40.0),
            max_label,
        }
    }

    pub(super) fn x(&self, ms: u64) -> f64 {
        self.x0 + (self.x1 - self.x0) * ms as f64 / self.span_ms as f64
    }
}

/// A tick every `step` ms, with at most about ten ticks on `span`.
fn tick_step(span: u64) -> u64 {
    const STEPS: [u64; 22] = [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
        120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 10)
        .unwrap_or_else(|| span.div_ceil(10 * 3_600_000) * 3_600_000)
}

pub(super) fn tick_label(ms: u64, step: u64) -> String {
    if ms == 0 {
        "0".into()
    } else if step < 10 {
        format!("{:.3}s", ms as f64 / 1000.0)
    } else if step < 100 {
        format!("{:.2}s", ms as f64 / 1000.0)
    } else if step < 1000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 60_000 {
        format!("{}s", ms / 1000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

pub(super) fn f(v: f64) -> String {
    format!("{v:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(520), 50);
        assert_eq!(tick_step(1500), 200);
        assert_eq!(tick_step(1), 1);
        assert_eq!(tick_step(95_000), 10_000);
        assert_eq!(tick_step(4 * 3_600_000), 1_800_000);
        assert!(tick_step(50 * 3_600_000) * 10 >= 50 * 3_600_000);
        assert_eq!(tick_label(500, 100), "0.5s");
        assert_eq!(tick_label(90_000, 30_000), "1m30s");
        assert_eq!(tick_label(120_000, 60_000), "2m");
    }
}

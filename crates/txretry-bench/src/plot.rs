//! `--plot`: the sweep drawn as SVG by plotters. Two panels side by side, goodput and
//! retries per commit against workers (log₂ scale, a tick at each worker count of the
//! sweep), one line per policy through the medians, error bars from the smallest to the
//! largest run, and a legend. Every policy keeps its colour from plot to plot (Okabe–Ito
//! palette, legible to colour-blind readers); pgbench is dashed; a red ring marks a cell
//! whose invariant check failed.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::cell::{Cell, PGBENCH, Spread};

/// The whole plot, pixels.
const SIZE: (u32, u32) = (1180, 495);
/// The two title lines above the panels.
const HEADER: u32 = 64;
/// The legend's column on the right.
const LEGEND: u32 = 170;
/// How far apart (in log₂ of workers) the points of neighbouring policies are drawn at
/// one worker count, so that their error bars do not hide each other.
const DODGE: f64 = 0.025;
const FAILED_RED: RGBColor = RGBColor(0xC0, 0x00, 0x00);
const FONT: &str = "sans-serif";

/// A policy's colour: the same in every plot.
pub fn colour(policy: &str) -> RGBColor {
    match policy {
        PGBENCH => BLACK,
        "none" => RGBColor(0xD5, 0x5E, 0x00),
        "default" => RGBColor(0xE6, 0x9F, 0x00),
        "immediate" => RGBColor(0x56, 0xB4, 0xE9),
        "exp-jitter" => RGBColor(0x00, 0x9E, 0x73),
        "contention" => RGBColor(0x00, 0x72, 0xB2),
        "database" => RGBColor(0xCC, 0x79, 0xA7),
        _ => RGBColor(0x77, 0x77, 0x77),
    }
}

/// What the plot shows besides the cells.
#[derive(Clone, Debug)]
pub struct Titles {
    /// The first line: what ran where.
    pub headline: String,
    /// Runs per cell.
    pub repeat: u32,
}

/// One panel: which number of a cell it draws.
struct Panel {
    title: &'static str,
    axis: &'static str,
    value: fn(&Cell) -> Option<Spread>,
}

const PANELS: [Panel; 2] = [
    Panel {
        title: "goodput",
        axis: "commits per second",
        value: |c| c.goodput,
    },
    Panel {
        title: "retries per commit",
        axis: "retries per commit",
        value: |c| c.retries_per_commit,
    },
];

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// The SVG document of `cells` (in the order of the policies' rows), or what plotters
/// could not draw.
pub fn render(cells: &[Cell], titles: &Titles) -> Result<String, String> {
    let mut policies: Vec<&'static str> = Vec::new();
    let mut workers: Vec<f64> = Vec::new();
    for c in cells {
        if !policies.contains(&c.policy) {
            policies.push(c.policy);
        }
        if !workers.contains(&(c.workers as f64)) {
            workers.push(c.workers as f64);
        }
    }
    workers.sort_by(f64::total_cmp);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw(&root, cells, titles, &policies, &workers)
            .and_then(|()| root.present())
            .map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

fn draw(root: &Area, cells: &[Cell], titles: &Titles, policies: &[&str], workers: &[f64]) -> Drawn {
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER);
    let runs = if titles.repeat == 1 {
        "one run per point".to_owned()
    } else {
        format!(
            "lines through the median of {} runs per point; bars from the smallest to the largest run",
            titles.repeat
        )
    };
    let centred = |size| {
        (FONT, size)
            .into_font()
            .into_text_style(&header)
            .pos(Pos::new(HPos::Center, VPos::Top))
    };
    let middle = (SIZE.0 / 2) as i32;
    header.draw(&Text::new(
        titles.headline.clone(),
        (middle, 16),
        centred(19),
    ))?;
    header.draw(&Text::new(runs, (middle, 40), centred(15)))?;
    let (panels, legend) = body.split_horizontally(SIZE.0 - LEGEND);
    let (left, right) = panels.split_horizontally((SIZE.0 - LEGEND) / 2);
    for (area, panel) in [(&left, &PANELS[0]), (&right, &PANELS[1])] {
        draw_panel(area, panel, cells, policies, workers)?;
    }
    draw_legend(&legend, cells, policies)
}

fn draw_panel(
    area: &Area,
    panel: &Panel,
    cells: &[Cell],
    policies: &[&str],
    workers: &[f64],
) -> Drawn {
    let max = cells
        .iter()
        .filter_map(|c| (panel.value)(c).map(|s| s.max))
        .fold(0.0, f64::max);
    let top = if max > 0.0 { max * 1.1 } else { 1.0 };
    // No cell yet (a sweep stopped before its first run): empty panels around 1 worker.
    let lo = workers.first().copied().unwrap_or(1.0);
    let hi = workers.last().copied().unwrap_or(1.0);
    let x = (lo / 1.4..hi * 1.4)
        .log_scale()
        .base(2.0)
        .with_key_points(workers.to_vec());
    let mut chart = ChartBuilder::on(area)
        .caption(panel.title, (FONT, 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x, 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("workers (log scale)")
        .y_desc(panel.axis)
        .x_label_formatter(&|w| format!("{w:.0}"))
        .y_label_formatter(&|v| tick(*v))
        .max_light_lines(1)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()?;
    let n = policies.len() as f64;
    for (i, &policy) in policies.iter().enumerate() {
        let shift = 2f64.powf((i as f64 - (n - 1.0) / 2.0) * DODGE);
        let mut series: Vec<(f64, Spread, bool)> = cells
            .iter()
            .filter(|c| c.policy == policy)
            .filter_map(|c| (panel.value)(c).map(|s| (c.workers as f64 * shift, s, c.invariant_ok)))
            .collect();
        series.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ink = colour(policy);
        let medians = series.iter().map(|&(x, s, _)| (x, s.median));
        if policy == PGBENCH {
            chart.draw_series(DashedLineSeries::new(medians, 6, 4, ink.stroke_width(2)))?;
        } else {
            chart.draw_series(LineSeries::new(medians, ink.stroke_width(2)))?;
        }
        chart.draw_series(
            series
                .iter()
                .filter(|(_, s, _)| s.max > s.min)
                .map(|&(x, s, _)| ErrorBar::new_vertical(x, s.min, s.median, s.max, ink, 6)),
        )?;
        chart.draw_series(
            series
                .iter()
                .map(|&(x, s, _)| Circle::new((x, s.median), 3, ink.filled())),
        )?;
        chart.draw_series(
            series
                .iter()
                .filter(|(_, _, ok)| !ok)
                .map(|&(x, s, _)| Circle::new((x, s.median), 7, FAILED_RED.stroke_width(2))),
        )?;
    }
    Ok(())
}

/// A tick label with no more decimals than it needs (plotters' key points are multiples of
/// a step that may not be exact in binary: 0.30000000000000004).
fn tick(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A colour swatch and a marker per policy (a block, not a line, so that the only lines
/// in a policy's colour are its series), and the red ring when a check failed.
fn draw_legend(area: &Area, cells: &[Cell], policies: &[&str]) -> Drawn {
    area.draw(&Text::new("policy", (10, 30), (FONT, 16)))?;
    let mut y = 30;
    for &policy in policies {
        y += 24;
        let ink = colour(policy);
        area.draw(&Rectangle::new([(10, y + 6), (40, y + 9)], ink.filled()))?;
        area.draw(&Circle::new((25, y + 7), 3, ink.filled()))?;
        area.draw(&Text::new(policy, (48, y), (FONT, 15)))?;
    }
    if cells.iter().any(|c| !c.invariant_ok) {
        y += 30;
        area.draw(&Circle::new((25, y + 7), 7, FAILED_RED.stroke_width(2)))?;
        area.draw(&Text::new("invariant FAILED", (48, y), (FONT, 15)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_have_the_decimals_they_need() {
        assert_eq!(tick(0.30000000000000004), "0.3");
        assert_eq!(tick(1500.0), "1500");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.25), "0.25");
    }
}

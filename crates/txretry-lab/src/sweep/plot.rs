//! `--plot`: the sweep drawn as SVG. Two panels side by side, goodput and retries per
//! commit against workers (log₂ scale, a tick at each worker count of the sweep), one line
//! per policy through the medians, error bars from the smallest to the largest run, and
//! a legend. Every policy keeps its colour from plot to plot (Okabe–Ito palette, legible
//! to colour-blind readers); pgbench is dashed.

use crate::sweep::cell::{Cell, PGBENCH, Spread};
use crate::sweep::svg::{Svg, Value};

const WIDTH: f64 = 1180.0;
const HEIGHT: f64 = 495.0;
const TOP: f64 = 90.0;
const BOTTOM: f64 = 430.0;
const PANELS: [(f64, f64); 2] = [(90.0, 490.0), (590.0, 990.0)];
const LEGEND_X: f64 = 1020.0;
/// Pixels between the error bars of neighbouring policies at one worker count.
const DODGE: f64 = 3.0;
const GRID: &str = "#e3e3e3";
const AXIS: &str = "#444444";
const FAILED_RED: &str = "#c00000";

/// A policy's colour.
fn colour(policy: &str) -> &'static str {
    match policy {
        PGBENCH => "#000000",
        "none" => "#D55E00",
        "default" => "#E69F00",
        "immediate" => "#56B4E9",
        "exp-jitter" => "#009E73",
        "contention" => "#0072B2",
        "database" => "#CC79A7",
        _ => "#777777",
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
    x: (f64, f64),
}

/// The SVG document of `cells` (in the order of the policies' rows).
pub fn render(cells: &[Cell], titles: &Titles) -> String {
    let mut policies: Vec<&'static str> = Vec::new();
    let mut workers: Vec<usize> = Vec::new();
    for c in cells {
        if !policies.contains(&c.policy) {
            policies.push(c.policy);
        }
        if !workers.contains(&c.workers) {
            workers.push(c.workers);
        }
    }
    workers.sort_unstable();
    let mut svg = Svg::new(WIDTH, HEIGHT);
    svg.text((WIDTH / 2.0, 30.0), "middle", 15.0, &titles.headline);
    let runs = if titles.repeat == 1 {
        "one run per point".to_owned()
    } else {
        format!(
            "lines through the median of {} runs per point; bars from the smallest to the largest run",
            titles.repeat
        )
    };
    svg.text((WIDTH / 2.0, 52.0), "middle", 12.0, &runs);
    let panels = [
        Panel {
            title: "goodput",
            axis: "commits per second",
            value: |c| c.goodput,
            x: PANELS[0],
        },
        Panel {
            title: "retries per commit",
            axis: "retries per commit",
            value: |c| c.retries_per_commit,
            x: PANELS[1],
        },
    ];
    for panel in &panels {
        draw_panel(&mut svg, panel, cells, &policies, &workers);
    }
    draw_legend(&mut svg, cells, &policies);
    svg.finish()
}

/// Where worker count `w` goes between `x0` and `x1`: log₂ scale over the sweep's counts.
fn x_of(w: usize, workers: &[usize], (x0, x1): (f64, f64)) -> f64 {
    let (lo, hi) = match (workers.first(), workers.last()) {
        (Some(&lo), Some(&hi)) if hi > lo => ((lo as f64).log2(), (hi as f64).log2()),
        _ => return (x0 + x1) / 2.0,
    };
    let pad = 0.07 * (x1 - x0);
    x0 + pad + ((w as f64).log2() - lo) / (hi - lo) * (x1 - x0 - 2.0 * pad)
}

/// A round top for the y axis above `max`, and the step between its ticks (1, 2 or 5
/// times a power of ten, about five ticks).
pub fn nice_scale(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.2);
    }
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

/// A tick label: no decimals a step of 1 or more does not need.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

fn draw_panel(svg: &mut Svg, panel: &Panel, cells: &[Cell], policies: &[&str], workers: &[usize]) {
    let (x0, x1) = panel.x;
    let max = cells
        .iter()
        .filter_map(|c| (panel.value)(c).map(|s| s.max))
        .fold(0.0, f64::max);
    let (top, step) = nice_scale(max);
    let y_of = |v: f64| BOTTOM - v / top * (BOTTOM - TOP);
    svg.text(((x0 + x1) / 2.0, TOP - 14.0), "middle", 14.0, panel.title);
    // Horizontal grid and y ticks.
    let ticks = (top / step).round() as usize;
    for i in 0..=ticks {
        let v = i as f64 * step;
        let y = y_of(v);
        svg.line((x0, y), (x1, y), GRID, 1.0);
        svg.text((x0 - 8.0, y + 4.0), "end", 11.0, &tick_label(v, step));
    }
    // x ticks at each worker count.
    for &w in workers {
        let x = x_of(w, workers, panel.x);
        svg.line((x, BOTTOM), (x, BOTTOM + 5.0), AXIS, 1.0);
        svg.text((x, BOTTOM + 19.0), "middle", 11.0, &w.to_string());
    }
    svg.element(
        "rect",
        &[
            ("x", x0.into()),
            ("y", TOP.into()),
            ("width", (x1 - x0).into()),
            ("height", (BOTTOM - TOP).into()),
            ("fill", "none".into()),
            ("stroke", AXIS.into()),
        ],
    );
    svg.text(
        ((x0 + x1) / 2.0, BOTTOM + 42.0),
        "middle",
        12.0,
        "workers (log scale)",
    );
    let (ax, ay) = (x0 - 52.0, (TOP + BOTTOM) / 2.0);
    let rotate = format!("rotate(-90 {ax} {ay})");
    svg.text_element(
        "text",
        &[
            ("x", ax.into()),
            ("y", ay.into()),
            ("text-anchor", "middle".into()),
            ("font-size", 12.0.into()),
            ("transform", (&rotate).into()),
        ],
        panel.axis,
    );
    let n = policies.len() as f64;
    for (i, &policy) in policies.iter().enumerate() {
        let dodge = (i as f64 - (n - 1.0) / 2.0) * DODGE;
        let stroke = colour(policy);
        let mut series: Vec<(&Cell, Spread)> = cells
            .iter()
            .filter(|c| c.policy == policy)
            .filter_map(|c| (panel.value)(c).map(|s| (c, s)))
            .collect();
        series.sort_by_key(|(c, _)| c.workers);
        let at = |c: &Cell| x_of(c.workers, workers, panel.x) + dodge;
        svg.group(&[
            ("data-policy", policy.into()),
            ("data-panel", panel.title.into()),
        ]);
        let points: Vec<(f64, f64)> = series
            .iter()
            .map(|(c, s)| (at(c), y_of(s.median)))
            .collect();
        let dash = if policy == PGBENCH { "6 4" } else { "none" };
        svg.element(
            "polyline",
            &[
                ("class", "series".into()),
                ("data-policy", policy.into()),
                ("points", (&Svg::points(&points)).into()),
                ("fill", "none".into()),
                ("stroke", stroke.into()),
                ("stroke-width", 2.0.into()),
                ("stroke-dasharray", dash.into()),
            ],
        );
        for (c, s) in &series {
            let x = at(c);
            if s.max > s.min {
                svg.line((x, y_of(s.min)), (x, y_of(s.max)), stroke, 1.2);
                svg.line((x - 3.0, y_of(s.min)), (x + 3.0, y_of(s.min)), stroke, 1.2);
                svg.line((x - 3.0, y_of(s.max)), (x + 3.0, y_of(s.max)), stroke, 1.2);
            }
            marker(svg, (x, y_of(s.median)), stroke);
            if !c.invariant_ok {
                ring(svg, (x, y_of(s.median)));
            }
        }
        svg.end_group();
    }
}

fn marker(svg: &mut Svg, (cx, cy): (f64, f64), fill: &str) {
    svg.element(
        "circle",
        &[
            ("cx", cx.into()),
            ("cy", cy.into()),
            ("r", 3.5.into()),
            ("fill", fill.into()),
        ],
    );
}

/// Marks a cell where an invariant check failed.
fn ring(svg: &mut Svg, (cx, cy): (f64, f64)) {
    let attrs: [(&str, Value<'_>); 6] = [
        ("cx", cx.into()),
        ("cy", cy.into()),
        ("r", 7.5.into()),
        ("fill", "none".into()),
        ("stroke", FAILED_RED.into()),
        ("stroke-width", 2.0.into()),
    ];
    svg.element("circle", &attrs);
}

fn draw_legend(svg: &mut Svg, cells: &[Cell], policies: &[&str]) {
    let mut y = TOP + 6.0;
    svg.text((LEGEND_X, y), "start", 13.0, "policy");
    for &policy in policies {
        y += 24.0;
        let stroke = colour(policy);
        let dash = if policy == PGBENCH { "6 4" } else { "none" };
        svg.element(
            "line",
            &[
                ("x1", LEGEND_X.into()),
                ("y1", (y - 4.0).into()),
                ("x2", (LEGEND_X + 30.0).into()),
                ("y2", (y - 4.0).into()),
                ("stroke", stroke.into()),
                ("stroke-width", 2.0.into()),
                ("stroke-dasharray", dash.into()),
            ],
        );
        marker(svg, (LEGEND_X + 15.0, y - 4.0), stroke);
        svg.text((LEGEND_X + 38.0, y), "start", 12.0, policy);
    }
    if cells.iter().any(|c| !c.invariant_ok) {
        y += 30.0;
        ring(svg, (LEGEND_X + 15.0, y - 4.0));
        svg.text((LEGEND_X + 38.0, y), "start", 12.0, "invariant FAILED");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_round() {
        assert_eq!(nice_scale(0.0), (1.0, 0.2));
        assert_eq!(nice_scale(f64::NAN), (1.0, 0.2));
        assert_eq!(nice_scale(1613.0), (2000.0, 500.0));
        assert_eq!(nice_scale(3.34), (4.0, 1.0));
        let (top, step) = nice_scale(0.27);
        assert!(
            (top - 0.3).abs() < 1e-9 && (step - 0.1).abs() < 1e-9,
            "{top} {step}"
        );
        assert_eq!(nice_scale(100.0), (100.0, 20.0));
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
        assert_eq!(tick_label(1500.0, 500.0), "1500");
    }

    #[test]
    fn workers_go_left_to_right_on_a_log_scale() {
        let workers = [1, 4, 16];
        let x = |w| x_of(w, &workers, (0.0, 100.0));
        assert!(x(1) < x(4) && x(4) < x(16));
        assert!((x(4) - x(1) - (x(16) - x(4))).abs() < 1e-9);
        assert_eq!(x_of(8, &[8], (0.0, 100.0)), 50.0);
    }
}

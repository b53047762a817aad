//! SVG plots of a result file (`tcsparse-bench --plot FILE.json --out DIR`): per op and matrix
//! group, the headline backend's speedup over the vendor baseline per matrix and N, and its achieved
//! bandwidth (compulsory bytes / time) against the H200's measured 3.9 TB/s. plotters' SVG backend
//! only: text is written as `<text>` (no font files read), so the output is the same on every
//! machine and the committed SVGs are checked against a re-render (results.rs).

use std::collections::BTreeMap;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{Group, HEADLINE, Op, Report};

/// The H200's measured DRAM bandwidth (GB/s) the bandwidth plots are drawn against.
pub const PEAK_GBPS: f64 = 3900.0;

/// Bar colours per N (up to five widths; more reuse them).
const COLOURS: [RGBColor; 5] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// What a plot shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Speedup,
    Bandwidth,
}

fn group_name(g: Group) -> &'static str {
    g.name()
}

/// Values of the headline backend of `op` in `group`: matrix → (N → value), matrices sorted.
fn values(r: &Report, op: Op, group: Group, kind: Kind) -> BTreeMap<String, BTreeMap<usize, f64>> {
    let mut out: BTreeMap<String, BTreeMap<usize, f64>> = BTreeMap::new();
    for c in r
        .cases
        .iter()
        .filter(|c| c.op == op && c.group == group && c.backend == HEADLINE && c.ok())
    {
        let v = match kind {
            Kind::Speedup => r.speedup(c),
            Kind::Bandwidth => c.gbps(),
        };
        if let Some(v) = v.filter(|v| v.is_finite() && *v > 0.0) {
            out.entry(c.matrix.clone()).or_default().insert(c.n, v);
        }
    }
    out
}

/// One grouped bar chart as an SVG string; `None` when there is nothing to draw.
fn chart(r: &Report, op: Op, group: Group, kind: Kind, device: &str) -> Option<String> {
    let data = values(r, op, group, kind);
    if data.is_empty() {
        return None;
    }
    let mut ns: Vec<usize> = data.values().flat_map(|m| m.keys().copied()).collect();
    ns.sort_unstable();
    ns.dedup();
    let names: Vec<&String> = data.keys().collect();
    let max = data
        .values()
        .flat_map(|m| m.values().copied())
        .fold(0.0f64, f64::max);
    let (title, y_desc, reference, y_max) = match kind {
        Kind::Speedup => (
            format!(
                "{op} on the {device}, {} matrices: speedup of {HEADLINE} over {}",
                group_name(group),
                op.baseline()
            ),
            format!("speedup over {} (same process)", op.baseline()),
            (1.0, format!("1× = {}", op.baseline())),
            (max.max(1.0) * 1.3).ceil(),
        ),
        Kind::Bandwidth => (
            format!(
                "{op} on the {device}, {} matrices: achieved bandwidth of {HEADLINE}",
                group_name(group)
            ),
            match op {
                Op::Spmv => "GB/s (bitBSR A + X + y moved once / kernel time)",
                _ => "GB/s (compressed A + B + C moved once / kernel time)",
            }
            .to_string(),
            (
                PEAK_GBPS,
                format!("{:.1} TB/s measured DRAM bandwidth", PEAK_GBPS / 1000.0),
            ),
            (max.max(PEAK_GBPS) * 1.3 / 500.0).ceil() * 500.0,
        ),
    };
    let width = (160 + 46 * names.len() as u32).max(640);
    let (height, label_h) = (560u32, 150u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let (upper, _) = root.split_vertically(height - label_h);
        let mut c = ChartBuilder::on(&upper)
            .caption(&title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(0)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5f64..(names.len() as f64 - 0.5), 0.0f64..y_max)
            .ok()?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(y_desc)
            .y_labels(10)
            .y_label_formatter(&|v| match kind {
                Kind::Speedup => format!("{v:.1}"),
                Kind::Bandwidth => format!("{v:.0}"),
            })
            .light_line_style(RGBColor(0xf0, 0xf0, 0xf0))
            .draw()
            .ok()?;
        let slot = 0.8 / ns.len() as f64;
        for (k, n) in ns.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let bars: Vec<Rectangle<(f64, f64)>> = names
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    let v = *data[*m].get(n)?;
                    let x0 = i as f64 - 0.4 + slot * k as f64;
                    Some(Rectangle::new([(x0, 0.0), (x0 + slot, v)], colour.filled()))
                })
                .collect();
            c.draw_series(bars)
                .ok()?
                .label(format!("N = {n}"))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                });
        }
        let (line_y, line_label) = reference;
        c.draw_series(std::iter::once(PathElement::new(
            vec![(-0.5, line_y), (names.len() as f64 - 0.5, line_y)],
            RED.stroke_width(2),
        )))
        .ok()?
        .label(line_label)
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], RED.stroke_width(2)));
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .ok()?;
        // Matrix names under the plot, rotated, centred on their bars.
        let style = ("sans-serif", 13)
            .into_font()
            .transform(FontTransform::Rotate90)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (i, m) in names.iter().enumerate() {
            let (px, _) = c.backend_coord(&(i as f64, 0.0));
            root.draw(&Text::new(
                m.to_string(),
                (px, (height - label_h + 6) as i32),
                style.clone(),
            ))
            .ok()?;
        }
        root.present().ok()?;
    }
    Some(svg)
}

/// Every plot of a report: (file name, SVG). SpMM and SpMV plot the [`HEADLINE`] backend (the
/// tuned engine) over cuSPARSE; SpAMM has no plot (no single headline backend: one per precision,
/// each at its own error) and `--plot` says so. File names `<stem>-speedup-<group>.svg` and
/// `<stem>-bandwidth-<group>.svg`, `stem` = the result file's (`spmm-h200`).
pub fn render(r: &Report) -> Vec<(String, String)> {
    let device = r.device.split(" (").next().unwrap_or(&r.device).to_string();
    let mut out = Vec::new();
    for op in crate::results::ops(r) {
        let stem = crate::results::file_stem(op, r);
        for group in [Group::Shared, Group::Large] {
            for (kind, what) in [(Kind::Speedup, "speedup"), (Kind::Bandwidth, "bandwidth")] {
                if let Some(svg) = chart(r, op, group, kind, &device) {
                    out.push((format!("{stem}-{what}-{}.svg", group_name(group)), svg));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Case, Status};

    /// [`crate::report::tests::case`] moving 2 GB (bars of a visible bandwidth).
    fn case(matrix: &str, group: Group, n: usize, backend: &str, ms: f64) -> Case {
        Case {
            bytes: Some(2_000_000_000),
            ..crate::report::tests::case(matrix, group, n, backend, ms, Status::Ok)
        }
    }

    #[test]
    fn plots_show_every_matrix_and_the_reference_lines() {
        let mut cases = Vec::new();
        for (m, g) in [
            ("rmat20", Group::Large),
            ("banded", Group::Large),
            ("cora", Group::Shared),
        ] {
            for n in [128, 256] {
                cases.push(case(m, g, n, "cusparse", 2.0));
                cases.push(case(m, g, n, HEADLINE, 1.0));
            }
        }
        let r = Report {
            command: "c".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            config: None,
            baseline: None,
            cases,
        };
        let plots = render(&r);
        let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "spmm-h200-speedup-shared.svg",
                "spmm-h200-bandwidth-shared.svg",
                "spmm-h200-speedup-large.svg",
                "spmm-h200-bandwidth-large.svg"
            ]
        );
        let (_, large) = &plots[2];
        assert!(large.starts_with("<svg") && large.contains("rmat20") && large.contains("banded"));
        assert!(large.contains("N = 128") && large.contains("N = 256"));
        assert!(large.contains("1× = cusparse"));
        // Two matrices × two N: four bars of height 2 (speedup 2×).
        assert!(large.matches("<rect").count() >= 4);
        assert!(plots[3].1.contains("3.9 TB/s"));
        // Deterministic: the committed SVGs are compared with a re-render.
        assert_eq!(render(&r), plots);
    }

    #[test]
    fn spmv_is_plotted_and_spamm_is_not() {
        let mut cases = Vec::new();
        for n in [1, 8] {
            for (backend, ms) in [("cusparse", 2.0), (HEADLINE, 1.0)] {
                cases.push(Case {
                    op: Op::Spmv,
                    ..case("cora", Group::Shared, n, backend, ms)
                });
            }
        }
        for backend in ["cublas-tf32", "spamm-tf32"] {
            cases.push(Case {
                op: Op::Spamm,
                ..case("exp-r0.1", Group::Decay, 4096, backend, 1.0)
            });
        }
        let r = Report {
            command: "c".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            cases,
            config: None,
            baseline: None,
        };
        let plots = render(&r);
        let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "spmv-h200-speedup-shared.svg",
                "spmv-h200-bandwidth-shared.svg"
            ]
        );
        assert!(plots[1].1.contains("bitBSR A + X + y"));
        assert!(render(&crate::results::only(&r, Op::Spamm)).is_empty());
    }
}

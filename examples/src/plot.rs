//! `onic bench --plot DIR`: SVG charts of the tables of `docs/benchmarks.md`, drawn from the
//! figures the same run measured (and, for the peer ratios, from the `figure ours peer ratio`
//! lines `cargo xtask bench-peers` wrote).
//!
//! | file | group | what |
//! | --- | --- | --- |
//! | `compare.svg` | `compare` | Mpps per frame size, page per packet against the page pool |
//! | `scaling_queues.svg` | `scaling` | ns/packet for 1, 8 and 64 queues |
//! | `scaling_ring.svg` | `scaling` | ns/packet per ring size |
//! | `xdp.svg` | `xdp` | Mpps per frame size for each XDP verdict path and the plain RX drop path |
//! | `peers.svg` | `--peers FILE` | ours / peer for each comparison, with its goal |
//!
//! A chart whose figures were not measured in the run is not written.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use onic_testkit::bench::{ring_sizes, COMPARE_SIZES, SCALING_QUEUES};
use onic_testkit::bench_xdp::XDP_PATHS;

/// Figures of the run by name.
pub type Figures = BTreeMap<String, f64>;

const WIDTH: u32 = 760;
const HEIGHT: u32 = 440;
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One line of a chart: its name and a y per x (missing points are skipped).
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

/// A chart of lines with markers over numeric x values.
struct LineChart<'a> {
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    log_x: bool,
    series: Vec<Series>,
}

/// Writes every chart whose figures are in `figs` (and `peers.svg` from `peers`) into `dir`;
/// returns the files written.
pub fn write_all(dir: &Path, figs: &Figures, peers: Option<&str>) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for (file, chart) in charts(figs) {
        if chart.series.iter().any(|s| !s.points.is_empty()) {
            chart.draw(&dir.join(file))?;
            written.push(file.to_string());
        }
    }
    if let Some(text) = peers {
        draw_ratios(&dir.join("peers.svg"), &parse_ratios(text))?;
        written.push("peers.svg".into());
    }
    Ok(written)
}

/// Every file `write_all` may write.
pub const FILES: [&str; 5] = [
    "compare.svg",
    "scaling_queues.svg",
    "scaling_ring.svg",
    "xdp.svg",
    "peers.svg",
];

/// Checks before the benchmarks run that the charts can be written into `dir`: it is (or can be
/// made) a directory that accepts files, and no chart's name is in the way.
///
/// # Errors
///
/// `--plot DIR: ...` saying what is in the way.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "--plot {}: not a directory (--plot names the directory the SVG charts are written into)",
            dir.display()
        ));
    }
    onic_cli::file::writable_dir(dir, "--plot")?;
    for f in FILES {
        onic_cli::file::check_output(&dir.join(f), "--plot")?;
    }
    Ok(())
}

/// Reads the `--peers` file before the benchmarks run.
///
/// # Errors
///
/// `--peers FILE: ...`: missing, unreadable, not text, or larger than 1 MiB.
pub fn read_peers(path: &Path) -> Result<String, String> {
    let bytes =
        onic_cli::file::read_bounded(path, 1 << 20, "a --peers file").map_err(|e| format!("--peers {e}"))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "--peers {}: not UTF-8 text (byte {} is not): expected the `figure ours peer ratio` lines of cargo xtask bench-peers",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// The line charts, from the figures' names (see the module docs).
fn charts(figs: &Figures) -> Vec<(&'static str, LineChart<'static>)> {
    let pick = |name: String, x: f64| figs.get(&name).map(|&y| (x, y));
    let sizes = |f: &dyn Fn(usize) -> String| -> Vec<(f64, f64)> {
        COMPARE_SIZES
            .iter()
            .filter_map(|&s| pick(f(s), s as f64))
            .collect()
    };
    let compare = LineChart {
        title: "RX with a copying sink: page per packet vs page pool",
        x_label: "frame size on the wire (bytes)",
        y_label: "Mpps (one core)",
        log_x: false,
        series: vec![
            Series {
                name: "page pool".into(),
                points: sizes(&|s| format!("compare_pool_{s}")),
            },
            Series {
                name: "page per packet".into(),
                points: sizes(&|s| format!("compare_baseline_{s}")),
            },
        ],
    };
    let queues = LineChart {
        title: "RX drop path cost by queue count (driver only)",
        x_label: "queues (polled round-robin by one core)",
        y_label: "ns per packet",
        log_x: true,
        series: vec![Series {
            name: "1024-entry rings".into(),
            points: SCALING_QUEUES
                .iter()
                .filter_map(|&q| pick(format!("scaling_queues_{q}"), f64::from(q)))
                .collect(),
        }],
    };
    let rings = LineChart {
        title: "RX drop path cost by ring size (driver only)",
        x_label: "ring entries",
        y_label: "ns per packet",
        log_x: true,
        series: vec![Series {
            name: "one queue".into(),
            points: ring_sizes()
                .iter()
                .filter_map(|&(n, _)| pick(format!("scaling_ring_{n}"), f64::from(n)))
                .collect(),
        }],
    };
    let mut xdp_series = vec![Series {
        name: "RX drop, no XDP".into(),
        points: sizes(&|s| format!("xdp_driver_only_rx_drop_{s}B")),
    }];
    for (verdict, _) in XDP_PATHS {
        xdp_series.push(Series {
            name: format!("XDP {}", verdict.replace('_', " ")),
            points: sizes(&|s| format!("xdp_driver_only_{verdict}_{s}B")),
        });
    }
    let xdp = LineChart {
        title: "XDP verdict paths (driver only, one core)",
        x_label: "frame size on the wire (bytes)",
        y_label: "Mpps",
        log_x: false,
        series: xdp_series,
    };
    vec![
        ("compare.svg", compare),
        ("scaling_queues.svg", queues),
        ("scaling_ring.svg", rings),
        ("xdp.svg", xdp),
    ]
}

impl LineChart<'_> {
    fn draw(&self, path: &Path) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let pts = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let mut svg = String::new();
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut b = ChartBuilder::on(&root);
        b.caption(self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56);
        let y_range = 0.0..y1 * 1.15;
        if self.log_x {
            let mut chart = b
                .build_cartesian_2d((x0 * 0.8..x1 * 1.25).log_scale(), y_range)
                .map_err(|e| err(&e))?;
            mesh_and_lines(&mut chart, self).map_err(|e| err(&e))?;
        } else {
            let pad = (x1 - x0) * 0.05;
            let mut chart = b
                .build_cartesian_2d(x0 - pad..x1 + pad, y_range)
                .map_err(|e| err(&e))?;
            mesh_and_lines(&mut chart, self).map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
        drop(root);
        save(path, &svg)
    }
}

/// Writes a chart through the tool's one output path (complete or not at all).
fn save(path: &Path, svg: &str) -> Result<(), String> {
    let mut f = onic_cli::file::OutputFile::create(path)?;
    f.write_bytes(svg.as_bytes())?;
    f.commit()
}

type Chart<'a, X> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>;

/// The grid, the axis labels, one line with markers per series, and the legend.
fn mesh_and_lines<'a, X>(chart: &mut Chart<'a, X>, c: &LineChart<'_>) -> Result<(), String>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = |x: &dyn std::fmt::Display| x.to_string();
    chart
        .configure_mesh()
        .x_desc(c.x_label)
        .y_desc(c.y_label)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|x| e(&x))?;
    for (i, s) in c.series.iter().enumerate().filter(|(_, s)| !s.points.is_empty()) {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))
}

/// `(figure, ratio, goal)` from `figure ours peer ratio # ...; goal ratio >= 2.4: ...` lines.
fn parse_ratios(text: &str) -> Vec<(String, f64, Option<f64>)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?.to_string();
            let ratio: f64 = f.nth(2)?.parse().ok()?;
            let goal = l
                .split("goal ratio ")
                .nth(1)
                .and_then(|g| g.split(':').next())
                .and_then(|g| g.trim_start_matches(['>', '<', '=', ' ']).parse().ok());
            Some((name, ratio, goal))
        })
        .collect()
}

/// Horizontal bars: ours / peer per comparison, the goal as a red tick.
fn draw_ratios(path: &Path, rows: &[(String, f64, Option<f64>)]) -> Result<(), String> {
    let mut svg = String::new();
    render_ratios(&mut svg, path, rows)?;
    save(path, &svg)
}

/// The SVG text of [`draw_ratios`]; errors name `path`.
fn render_ratios(svg: &mut String, path: &Path, rows: &[(String, f64, Option<f64>)]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let height = 90 + 34 * rows.len().max(1) as u32;
    let root = SVGBackend::with_string(svg, (WIDTH + 200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let top = rows
        .iter()
        .flat_map(|r| [r.1, r.2.unwrap_or(0.0)])
        .fold(1.0f64, f64::max)
        * 1.15;
    let n = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("ours / peer, same run (goal in red)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..top, 0.0..n)
        .map_err(|e| err(&e))?;
    let label = |y: &f64| {
        let i = (n - y - 0.5).round();
        if (n - y - 0.5 - i).abs() < 0.01 && i >= 0.0 {
            rows.get(i as usize).map(|r| r.0.clone()).unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_desc("ratio")
        .y_labels(2 * rows.len() + 1)
        .y_label_formatter(&label)
        .disable_y_mesh()
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (_, ratio, goal)) in rows.iter().enumerate() {
        let y = n - i as f64 - 1.0;
        chart
            .draw_series([Rectangle::new(
                [(0.0, y + 0.2), (*ratio, y + 0.8)],
                PALETTE[0].filled(),
            )])
            .map_err(|e| err(&e))?;
        if let Some(g) = goal {
            chart
                .draw_series([PathElement::new(
                    vec![(*g, y + 0.1), (*g, y + 0.9)],
                    RED.stroke_width(3),
                )])
                .map_err(|e| err(&e))?;
        }
    }
    root.present().map_err(|e| err(&e))
}

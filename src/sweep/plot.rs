//! Scaling-curve figures: one line per implementation against a log-2 x axis
//! (batch size or image resolution), written as both SVG and PNG.

use std::ffi::OsString;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub struct Series {
    pub label: String,
    pub color: (u8, u8, u8),
    pub points: Vec<(f64, f64)>,
    /// Where a point stands for several sessions: (x, least, greatest), drawn as a bar through it.
    pub ranges: Vec<(f64, f64, f64)>,
}

pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

const WIDTH: u32 = 960;
const HEIGHT: u32 = 600;

// The PNG is rasterised with the embedded DejaVu Sans registered under this
// name; the SVG carries the same string as a CSS font-family list so viewers
// use DejaVu when installed and a generic sans-serif otherwise.
const FONT: &str = "DejaVu Sans, sans-serif";

const GRID: RGBColor = RGBColor(220, 220, 220);

/// Writes `<stem>.svg` and `<stem>.png` (e.g. stem = dir/"sample_time_vs_batch"). Returns the two paths.
pub fn write(figure: &Figure, stem: &Path) -> Result<[PathBuf; 2], String> {
    ensure_font()?;
    let svg_path = with_suffix(stem, "svg");
    let png_path = with_suffix(stem, "png");

    // Both images are rendered before either file is touched, so a rendering
    // failure cannot leave a new SVG next to a stale PNG.
    let mut svg = String::new();
    render(
        SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area(),
        figure,
    )
    .map_err(|e| one_line(format!("cannot render {}: {e}", svg_path.display())))?;

    let mut rgb = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
    render(
        BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area(),
        figure,
    )
    .map_err(|e| one_line(format!("cannot render {}: {e}", png_path.display())))?;
    let png = encode_png(&rgb)
        .map_err(|e| one_line(format!("cannot encode {}: {e}", png_path.display())))?;

    write_atomic(&svg_path, svg.as_bytes())?;
    write_atomic(&png_path, &png)?;
    Ok([svg_path, png_path])
}

fn ensure_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "embedded DejaVu Sans font cannot be parsed".to_string())
        })
        .clone()
}

// Appends rather than using `with_extension`, which would eat any dot already
// in the stem (e.g. "resnet50_v1.5").
fn with_suffix(stem: &Path, ext: &str) -> PathBuf {
    let mut name = OsString::from(stem.as_os_str());
    name.push(".");
    name.push(ext);
    PathBuf::from(name)
}

fn one_line(s: String) -> String {
    s.replace(['\n', '\r'], " ")
}

fn encode_png(rgb: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    crate::output_files::write_atomically(path, |file| file.write_all(bytes))
        .map_err(|e| one_line(format!("cannot write {}: {e}", path.display())))
}

/// A series reduced to what can be drawn: points with non-positive x (no
/// logarithm) or non-finite coordinates dropped, sorted so lines do not zigzag.
struct Curve<'a> {
    series: &'a Series,
    points: Vec<(f64, f64)>,
    ranges: Vec<(f64, f64, f64)>,
}

fn curves(figure: &Figure) -> Vec<Curve<'_>> {
    figure
        .series
        .iter()
        .map(|series| {
            let mut points: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && *x > 0.0 && y.is_finite())
                .copied()
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let ranges = series
                .ranges
                .iter()
                .filter(|(x, lo, hi)| x.is_finite() && *x > 0.0 && lo.is_finite() && hi.is_finite())
                .copied()
                .collect();
            Curve {
                series,
                points,
                ranges,
            }
        })
        .collect()
}

fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font())
}

fn rgb((r, g, b): (u8, u8, u8)) -> RGBColor {
    RGBColor(r, g, b)
}

fn render<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    figure: &Figure,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    // plotters puts the title flush with the top edge; a little air avoids
    // it looking clipped.
    let body = root.margin(8, 0, 0, 0).titled(&figure.title, font(26))?;
    let curves = curves(figure);
    let (Some(x_axis), Some(y_axis)) = (XAxis::new(&curves), YAxis::new(&curves)) else {
        let (w, h) = body.dim_in_pixel();
        body.draw(&Text::new(
            "no data",
            (w as i32 / 2, h as i32 / 2),
            font(22).pos(Pos::new(HPos::Center, VPos::Center)),
        ))?;
        return root.present();
    };

    let legend_width = legend_width(&root, &curves)?;
    let (plot_area, legend_area) = body.split_horizontally(WIDTH - legend_width);

    let mut chart = ChartBuilder::on(&plot_area)
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(90)
        .build_cartesian_2d(x_axis, y_axis.lo..y_axis.hi)?;
    let y_scale = YScale::for_span(y_axis.lo.abs().max(y_axis.hi.abs()));
    chart
        .configure_mesh()
        .x_desc(figure.x_label.as_str())
        .y_desc(figure.y_label.as_str())
        .axis_desc_style(font(18))
        .label_style(font(15))
        .x_label_formatter(&|x| x_tick_label(*x))
        .y_label_formatter(&|v| y_scale.label(*v))
        .y_labels(8)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .draw()?;

    for curve in &curves {
        let color = rgb(curve.series.color);
        chart.draw_series(LineSeries::new(
            curve.points.iter().copied(),
            color.stroke_width(2),
        ))?;
        chart.draw_series(
            curve
                .points
                .iter()
                .map(|&p| Circle::new(p, 4, color.filled())),
        )?;
        // A point's range of sessions, through its median; where the median is not drawn, through the range's middle.
        chart.draw_series(curve.ranges.iter().map(|&(x, lo, hi)| {
            let y = curve
                .points
                .iter()
                .find(|p| p.0 == x)
                .map_or((lo + hi) / 2.0, |p| p.1);
            ErrorBar::new_vertical(x, lo, y, hi, color.stroke_width(2), 10)
        }))?;
    }

    draw_legend(&legend_area, &curves)?;
    root.present()
}

const LEGEND_ROW: i32 = 28;
const LEGEND_SWATCH: i32 = 28;

fn legend_text(curve: &Curve<'_>) -> String {
    // An implementation that produced nothing (e.g. it ran out of memory at
    // every size) still gets a legend row, so its absence is visible.
    if curve.points.is_empty() {
        format!("{} (no data)", curve.series.label)
    } else {
        curve.series.label.clone()
    }
}

fn legend_width<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    curves: &[Curve<'_>],
) -> Result<u32, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut widest = 0;
    for curve in curves {
        widest = widest.max(root.estimate_text_size(&legend_text(curve), &font(16))?.0);
    }
    // Capped so a pathological label clips instead of squeezing the plot away.
    Ok((widest + LEGEND_SWATCH as u32 + 36).clamp(120, WIDTH * 35 / 100))
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    curves: &[Curve<'_>],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (row, curve) in curves.iter().enumerate() {
        let color = rgb(curve.series.color);
        let y = 30 + row as i32 * LEGEND_ROW;
        area.draw(&PathElement::new(
            vec![(0, y), (LEGEND_SWATCH, y)],
            color.stroke_width(2),
        ))?;
        area.draw(&Circle::new((LEGEND_SWATCH / 2, y), 4, color.filled()))?;
        area.draw(&Text::new(
            legend_text(curve),
            (LEGEND_SWATCH + 8, y),
            font(16)
                .color(&color)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// Log-2 x axis. Bounds are exponents; ticks and plotted values are plain x.
/// A custom coordinate so that exactly the powers of two are ticked; wrapping
/// an `f64` range in plotters' `WithKeyPoints` would do that but then
/// `configure_mesh` refuses it (no `ValueFormatter` for that combination).
struct XAxis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl XAxis {
    fn new(curves: &[Curve<'_>]) -> Option<Self> {
        let (mut lo, mut hi) = curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.0.log2()))
            .fold(None, |acc: Option<(f64, f64)>, e| match acc {
                None => Some((e, e)),
                Some((lo, hi)) => Some((lo.min(e), hi.max(e))),
            })?;
        let (data_lo, data_hi) = (lo, hi);
        if hi - lo < 1e-9 {
            // A single x value gets one octave either side so it sits centred
            // with labelled neighbours instead of on a zero-width axis.
            lo -= 1.0;
            hi += 1.0;
        }
        let mut exponents: Vec<f64> = ((lo - 1e-9).ceil() as i64..=(hi + 1e-9).floor() as i64)
            .map(|e| e as f64)
            .collect();
        if exponents.is_empty() {
            // Data confined within one octave (e.g. 100..120) has no power of
            // two to label, so label the data ends themselves.
            exponents = vec![data_lo, data_hi];
            exponents.dedup();
        }
        // Very wide ranges would crowd the axis; keep roughly a dozen labels.
        let step = exponents.len().div_ceil(12);
        let ticks = exponents.into_iter().step_by(step).map(f64::exp2).collect();
        // Padding keeps end markers from being clipped by the axes.
        let pad = (hi - lo) * 0.04;
        Some(Self {
            lo: lo - pad,
            hi: hi + pad,
            ticks,
        })
    }
}

impl Ranged for XAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, x: &f64, (start, end): (i32, i32)) -> i32 {
        let t = (x.log2() - self.lo) / (self.hi - self.lo);
        start + (t * f64::from(end - start)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Only bold grid lines: minor lines between octaves add clutter.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo.exp2()..self.hi.exp2()
    }
}

fn x_tick_label(x: f64) -> String {
    if (1.0..1e15).contains(&x) && (x - x.round()).abs() < 1e-6 {
        format!("{}", x.round() as u64)
    } else {
        trim_decimal(x, 3)
    }
}

struct YAxis {
    lo: f64,
    hi: f64,
}

impl YAxis {
    fn new(curves: &[Curve<'_>]) -> Option<Self> {
        let (min, max) = curves
            .iter()
            .flat_map(|c| {
                c.points
                    .iter()
                    .map(|p| p.1)
                    .chain(c.ranges.iter().flat_map(|r| [r.1, r.2]))
            })
            .fold(None, |acc: Option<(f64, f64)>, y| match acc {
                None => Some((y, y)),
                Some((lo, hi)) => Some((lo.min(y), hi.max(y))),
            })?;
        let lo = min.min(0.0);
        let hi = if max > 0.0 { max * 1.1 } else { 0.0 };
        // All-zero data (e.g. GPU utilisation of a CPU-only run) still needs a
        // non-empty range for the axis to be drawable.
        let hi = if hi - lo > 0.0 { hi } else { lo + 1.0 };
        Some(Self { lo, hi })
    }
}

/// One SI suffix for the whole axis, so ticks read 8k, 10k, 12k rather than
/// mixing 8000 with 1e4.
struct YScale {
    divisor: f64,
    suffix: &'static str,
    decimals: usize,
}

impl YScale {
    fn for_span(span: f64) -> Self {
        // "k" starts at 10k because four-digit plain numbers read better
        // than fractional thousands (0.5k..4k).
        let (divisor, suffix) = [
            (1e15, 1e15, "P"),
            (1e12, 1e12, "T"),
            (1e9, 1e9, "G"),
            (1e6, 1e6, "M"),
            (1e4, 1e3, "k"),
        ]
        .into_iter()
        .find(|&(threshold, _, _)| span >= threshold)
        .map_or((1.0, ""), |(_, divisor, suffix)| (divisor, suffix));
        // Enough decimals for ~3 significant digits of the largest tick;
        // trailing zeros are trimmed per label.
        let magnitude = (span / divisor).log10().floor();
        let decimals = (3.0 - magnitude).clamp(0.0, 12.0) as usize;
        Self {
            divisor,
            suffix,
            decimals,
        }
    }

    fn label(&self, v: f64) -> String {
        let digits = trim_decimal(v / self.divisor, self.decimals);
        if digits == "0" {
            digits
        } else {
            format!("{digits}{}", self.suffix)
        }
    }
}

fn trim_decimal(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    if s == "-0" { "0".into() } else { s.into() }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    const COLORS: [(u8, u8, u8); 3] = [(31, 119, 180), (255, 127, 14), (44, 160, 44)];

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("golow-plot-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn figure(series: Vec<Series>) -> Figure {
        Figure {
            title: "Sample time vs batch size".into(),
            x_label: "batch size".into(),
            y_label: "sample time (ms)".into(),
            series,
        }
    }

    fn three_series() -> Figure {
        let labels = ["PyTorch", "TorchScript", "golow & <friends>"];
        figure(
            labels
                .iter()
                .zip(COLORS)
                .enumerate()
                .map(|(i, (label, color))| Series {
                    label: (*label).into(),
                    color,
                    points: (3..11)
                        .map(|e| {
                            let x = f64::from(1u32 << e);
                            (x, x * (i as f64 + 1.0) * 0.37 + 5.0)
                        })
                        .collect(),
                    ranges: Vec::new(),
                })
                .collect(),
        )
    }

    fn svg_texts(path: &Path) -> Vec<String> {
        let text = fs::read_to_string(path).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let root = doc.root_element();
        assert_eq!(root.attribute("width"), Some("960"));
        assert_eq!(root.attribute("height"), Some("600"));
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_string())
            .collect()
    }

    fn png_pixels(path: &Path) -> image::RgbImage {
        let img =
            image::load_from_memory_with_format(&fs::read(path).unwrap(), image::ImageFormat::Png)
                .unwrap()
                .to_rgb8();
        assert_eq!(img.dimensions(), (WIDTH, HEIGHT));
        img
    }

    fn no_tmp_left(dir: &Path) {
        for entry in fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name();
            assert!(
                !name.to_string_lossy().ends_with(".tmp"),
                "{name:?} left behind"
            );
        }
    }

    #[test]
    fn three_series_render_to_valid_svg_and_png() {
        let dir = scratch_dir("three");
        let fig = three_series();
        let [svg, png] = write(&fig, &dir.join("sample_time_vs_batch")).unwrap();
        assert_eq!(svg, dir.join("sample_time_vs_batch.svg"));
        assert_eq!(png, dir.join("sample_time_vs_batch.png"));

        let texts = svg_texts(&svg);
        for s in &fig.series {
            assert!(
                texts.contains(&s.label),
                "{} missing from {texts:?}",
                s.label
            );
        }
        for tick in ["8", "16", "32", "64", "128", "256", "512", "1024"] {
            assert!(texts.iter().any(|t| t == tick), "x tick {tick} missing");
        }
        for t in [&fig.title, &fig.x_label, &fig.y_label] {
            assert!(texts.contains(t), "{t} missing");
        }

        let img = png_pixels(&png);
        let first = img.get_pixel(0, 0);
        assert!(img.pixels().any(|p| p != first), "PNG is a single colour");
        for (r, g, b) in COLORS {
            assert!(
                img.pixels().any(|p| p.0 == [r, g, b]),
                "no pixel in series colour {:?}",
                (r, g, b)
            );
        }
        no_tmp_left(&dir);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn nan_infinite_and_empty_series_do_not_panic() {
        let dir = scratch_dir("nan");
        let fig = figure(vec![
            Series {
                label: "holey".into(),
                color: COLORS[0],
                points: vec![
                    (8.0, f64::NAN),
                    (16.0, 3.0),
                    (32.0, f64::INFINITY),
                    (64.0, f64::NEG_INFINITY),
                    (f64::NAN, 1.0),
                    (0.0, 1.0),
                    (-4.0, 2.0),
                    (128.0, 5.0),
                ],
                ranges: vec![(16.0, f64::NAN, 4.0), (0.0, 1.0, 2.0), (128.0, 4.0, 6.0)],
            },
            Series {
                label: "empty".into(),
                color: COLORS[1],
                points: vec![],
                ranges: Vec::new(),
            },
        ]);
        let [svg, png] = write(&fig, &dir.join("holes")).unwrap();
        let texts = svg_texts(&svg);
        assert!(texts.iter().any(|t| t == "empty (no data)"));
        png_pixels(&png);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn ranges_are_drawn_through_their_points_and_widen_the_axis() {
        let dir = scratch_dir("ranges");
        let series = |ranges: Vec<(f64, f64, f64)>| Series {
            label: "repeated".into(),
            color: COLORS[0],
            points: vec![(8.0, 10.0), (16.0, 12.0), (32.0, 11.0)],
            ranges,
        };
        let drawn = |ranges| {
            let [svg, _] = write(&figure(vec![series(ranges)]), &dir.join("r")).unwrap();
            fs::read_to_string(svg).unwrap()
        };
        let (without, with) = (
            drawn(Vec::new()),
            drawn(vec![
                (8.0, 9.0, 11.0),
                (16.0, 11.0, 30.0),
                (32.0, 10.5, 11.5),
            ]),
        );
        let lines = |svg: &str| svg.matches("<line").count() + svg.matches("<polyline").count();
        assert!(lines(&with) >= lines(&without) + 3, "{with}");
        // The highest range end (30) is on the axis: its label reaches past the points' 12.
        assert!(
            with.contains("\n30\n") && !without.contains("\n30\n"),
            "{with}"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn figure_without_points_says_no_data() {
        let dir = scratch_dir("empty");
        for fig in [
            figure(vec![]),
            figure(vec![Series {
                label: "only nan".into(),
                color: COLORS[2],
                points: vec![(8.0, f64::NAN)],
                ranges: Vec::new(),
            }]),
        ] {
            let [svg, png] = write(&fig, &dir.join("nothing")).unwrap();
            assert!(svg_texts(&svg).iter().any(|t| t == "no data"));
            png_pixels(&png);
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn single_x_value_is_centred_and_labelled() {
        let dir = scratch_dir("single");
        let fig = figure(vec![Series {
            label: "one size".into(),
            color: COLORS[0],
            points: vec![(64.0, 12.0), (64.0, 14.0)],
            ranges: Vec::new(),
        }]);
        let [svg, png] = write(&fig, &dir.join("single")).unwrap();
        let texts = svg_texts(&svg);
        for tick in ["32", "64", "128"] {
            assert!(texts.iter().any(|t| t == tick), "x tick {tick} missing");
        }
        png_pixels(&png);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rewriting_replaces_previous_files() {
        let dir = scratch_dir("rewrite");
        let stem = dir.join("fig.v1.5");
        write(&figure(vec![]), &stem).unwrap();
        let [svg, _] = write(&three_series(), &stem).unwrap();
        assert_eq!(svg, dir.join("fig.v1.5.svg"));
        assert!(!svg_texts(&svg).iter().any(|t| t == "no data"));
        no_tmp_left(&dir);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unwritable_destination_is_a_one_line_error() {
        let dir = scratch_dir("missing");
        let stem = dir.join("no-such-dir").join("fig");
        let err = write(&three_series(), &stem).unwrap_err();
        assert!(err.starts_with("cannot write "), "{err}");
        assert!(err.contains("fig.svg"), "{err}");
        assert!(!err.contains('\n'));
        no_tmp_left(&dir);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn tick_labels() {
        assert_eq!(x_tick_label(8.0), "8");
        assert_eq!(x_tick_label(1024.0), "1024");
        assert_eq!(x_tick_label(0.5), "0.5");
        assert_eq!(x_tick_label(100f64.log2().exp2()), "100");

        let ms = YScale::for_span(12.5);
        assert_eq!(ms.label(2.5), "2.5");
        assert_eq!(ms.label(0.0), "0");
        let bytes = YScale::for_span(8.8e9);
        assert_eq!(bytes.label(2e9), "2G");
        assert_eq!(bytes.label(1.25e9), "1.25G");
        let throughput = YScale::for_span(13_000.0);
        assert_eq!(throughput.label(8_000.0), "8k");
        assert_eq!(YScale::for_span(5_000.0).label(4_000.0), "4000");
        assert_eq!(YScale::for_span(0.011).label(0.002), "0.002");
        assert_eq!(YScale::for_span(50.0).label(-20.0), "-20");
    }
}

//! `golow sweep` on the CPU: real workers over a 2 × 2 grid, the results checked against the cells' own
//! recordings, the figures decoded, a cell that runs out of memory, a cell that cannot start, and a sweep
//! interrupted and resumed.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{golow, golow_command, summary, text};

/// A small, fast grid: resnet18 evaluation, 3 steps per cell.
const BASE: [&str; 8] = [
    "sweep",
    "--headless",
    "--mode",
    "eval",
    "--model",
    "resnet18",
    "--warmup",
    "1",
];
const BOTH: &str = "libtorch,pytorch";

fn sweep_of(tmp: &Path, impls: &str, steps: &str, extra: &[&str]) -> Command {
    let mut cmd = golow_command(tmp);
    cmd.args(BASE)
        .args(["--impl", impls, "--steps", steps])
        .args(extra);
    cmd
}

fn sweep(tmp: &Path, extra: &[&str]) -> Command {
    sweep_of(tmp, BOTH, "3", extra)
}

fn results(dir: &Path) -> serde_json::Value {
    summary(&dir.join("results.json"))
}

fn rows(dir: &Path) -> Vec<serde_json::Value> {
    results(dir)["rows"].as_array().unwrap().clone()
}

#[test]
fn a_sweep_s_rows_are_its_cells_summaries_and_its_figures_decode() {
    let tmp = tempfile::tempdir().unwrap();
    let out = sweep(
        tmp.path(),
        &[
            "--batch-sizes",
            "4,8",
            "--resolutions",
            "32,48",
            "--out",
            "s",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let dir = tmp.path().join("s");
    let rows = rows(&dir);
    assert_eq!(rows.len(), 8, "2 implementations × 4 cells: {rows:?}");
    for row in &rows {
        assert_eq!(row["status"], "ok", "{row}");
        let recording = dir.join(row["recording"].as_str().unwrap());
        let summary_path = tmp.path().join("cell.json");
        let _ = std::fs::remove_file(&summary_path);
        let replayed = golow(
            tmp.path(),
            &[
                "replay",
                recording.to_str().unwrap(),
                "--headless",
                "--summary-json",
                summary_path.to_str().unwrap(),
            ],
        );
        assert!(replayed.status.success(), "{}", text(&replayed.stderr));
        let cell = summary(&summary_path);
        assert_eq!(cell["config"]["batch_size"], row["batch_size"]);
        assert_eq!(cell["config"]["resolution"], row["resolution"]);
        let w = common::worker(&cell, row["impl"].as_str().unwrap());
        assert_eq!(
            row["sample_time_p50_ms"], w["sample_time_ms"]["p50"],
            "{row}"
        );
        assert_eq!(
            row["sample_time_p90_ms"], w["sample_time_ms"]["p90"],
            "{row}"
        );
        assert_eq!(
            row["throughput_samples_per_s"],
            w["throughput_samples_per_s"]
        );
        assert_eq!(row["peak_host_rss_bytes"], w["peak_host_rss_bytes"]);
        // Step 1 of 3 had its operators recorded: the top one and its share of that step.
        let top = &w["top_operators"][0];
        assert_eq!(row["top_operator"], top["name"], "{row}");
        let share = top["self_ms_per_step"].as_f64().unwrap()
            / w["operators"]["compute_ms_per_step"].as_f64().unwrap();
        assert_eq!(row["top_operator_share"].as_f64(), Some(share), "{row}");
        assert!(share > 0.0 && share < 1.0, "{row}");
    }
    // The CSV says the same as the JSON, row for row.
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), rows.len() + 1);
    let columns: Vec<&str> = lines[0].split(',').collect();
    let column = |name: &str| columns.iter().position(|c| *c == name).unwrap();
    for (line, row) in lines[1..].iter().zip(&rows) {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields[column("impl")], row["impl"]);
        assert_eq!(fields[column("batch_size")], row["batch_size"].to_string());
        assert_eq!(fields[column("repeats")], "1");
        assert_eq!(
            fields[column("sample_time_p50_ms")].parse::<f64>().unwrap(),
            row["sample_time_p50_ms"].as_f64().unwrap()
        );
        assert_eq!(
            fields[column("sample_time_p50_min_ms")],
            "",
            "one session has no range"
        );
    }
    let mut pngs = 0;
    let mut svgs = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        match path.extension().and_then(|e| e.to_str()) {
            Some("png") => {
                let image =
                    image::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!((image.width(), image.height()), (960, 600));
                pngs += 1;
            }
            Some("svg") => {
                let svg = std::fs::read_to_string(&path).unwrap();
                let doc = roxmltree::Document::parse(&svg)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(
                    doc.descendants()
                        .any(|n| n.text().map(str::trim) == Some("libtorch"))
                );
                svgs += 1;
            }
            _ => {}
        }
    }
    // Sample time, throughput and host memory, against batch size at 2 resolutions and resolution at 2 batch sizes.
    // Sample time, throughput, host memory and the top operator's share; each against batch size at both
    // resolutions and against resolution at both batch sizes.
    assert_eq!((pngs, svgs), (16, 16));
    assert!(
        std::fs::read_dir(&dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp"))
    );
}

#[test]
fn a_cell_out_of_memory_or_unable_to_start_is_a_row_and_the_sweep_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = sweep(
        tmp.path(),
        &[
            "--batch-sizes",
            "8,512,1024",
            "--resolutions",
            "96",
            "--out",
            "s",
        ],
    );
    // Real memory pressure: 1.2 GB of data segment holds batch 8, not 512 images of 96 px.
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 1_200_000_000,
                rlim_max: 1_200_000_000,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = text(&out.stderr);
    // Running out of memory is a result; a cell that could not start is a failure.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let rows = rows(&tmp.path().join("s"));
    let status = |batch: u64| -> Vec<String> {
        rows.iter()
            .filter(|r| r["batch_size"] == batch)
            .map(|r| r["status"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(status(8), ["ok", "ok"], "{rows:?}");
    assert_eq!(status(512), ["oom", "oom"], "{rows:?}");
    assert_eq!(status(1024), ["failed", "failed"], "{rows:?}");
    let failed = rows.iter().find(|r| r["batch_size"] == 1024).unwrap();
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("larger than the test split"),
        "{failed}"
    );
    assert!(failed["recording"].is_null());
    let oom = rows
        .iter()
        .find(|r| r["batch_size"] == 512 && r["impl"] == "libtorch")
        .unwrap();
    assert!(
        oom["error"]
            .as_str()
            .unwrap()
            .contains("can't allocate memory"),
        "{oom}"
    );
    assert!(
        stderr.contains("cell 3/3 batch 1024 at 96 px: libtorch failed, pytorch failed"),
        "{stderr}"
    );
}

/// A sweep of `grid` (its results in `s`) sent `signal` once its first cell has finished: how it ended.
fn signalled_after_the_first_cell(tmp: &Path, grid: &[&str], signal: i32) -> std::process::Output {
    let child = sweep(tmp, grid)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dir = tmp.join("s");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join("results.json").is_file() || rows(&dir).is_empty() {
        assert!(Instant::now() < deadline, "the first cell never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    child.wait_with_output().unwrap()
}

#[test]
fn an_interrupted_sweep_resumes_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let grid = ["--batch-sizes", "4,8", "--resolutions", "32", "--out", "s"];
    let out = signalled_after_the_first_cell(tmp.path(), &grid, libc::SIGINT);
    let dir = tmp.path().join("s");
    let done = rows(&dir);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert_eq!(done.len(), 2, "only the first cell is kept: {done:?}");
    let first = dir.join("cells/b4-r32.golow");
    let first_bytes = std::fs::read(&first).unwrap();

    // Resuming with other steps measures something else: refused, nothing touched.
    let refused = sweep_of(tmp.path(), BOTH, "4", &grid)
        .arg("--resume")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("measured something else"),
        "{}",
        text(&refused.stderr)
    );

    let resumed = sweep(tmp.path(), &grid).arg("--resume").output().unwrap();
    let stderr = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("cell 1/1 batch 8 at 32 px: ok"),
        "only the missing cell runs: {stderr}"
    );
    assert_eq!(rows(&dir).len(), 4);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        first_bytes,
        "a finished cell is not run again"
    );

    // Without --resume, a directory holding a sweep is refused.
    let again = sweep(tmp.path(), &grid).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("already holds a sweep"));
}

/// One row of a `golow compare` table, as printed: its metric, B/A and verdict.
struct Compared {
    metric: String,
    ratio: String,
    verdict: String,
}

/// Each cell's table in `golow compare`'s output: the cell's line ("batch 4 at 32 px") and `worker`'s rows.
fn compared_cells(stdout: &str, worker: &str) -> Vec<(String, Vec<Compared>)> {
    let mut cells: Vec<(String, Vec<Compared>)> = Vec::new();
    for line in stdout.lines() {
        if line.starts_with("batch ") {
            cells.push((line.to_string(), Vec::new()));
        } else if line.starts_with(&format!("{worker} ")) {
            // impl, metric, A, B, B/A, 95% interval, verdict: columns two spaces apart or more.
            let fields: Vec<&str> = line
                .split("  ")
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .collect();
            assert_eq!(fields.len(), 7, "{line}");
            let (_, rows) = cells.last_mut().expect("a cell's line before its rows");
            rows.push(Compared {
                metric: fields[1].to_string(),
                ratio: fields[4].to_string(),
                verdict: fields[6].to_string(),
            });
        }
    }
    cells
}

/// The metrics that are times (and throughput, a time turned over): what a slower step changes.
fn is_time(metric: &str) -> bool {
    metric.contains("time") || metric.contains("throughput")
}

/// Every session's recording of every cell of a sweep (its `recording`, or with `--repeat` its `recordings`), relative
/// to its directory.
fn recordings(sweep: &Path) -> Vec<String> {
    let mut all = Vec::new();
    for row in rows(sweep) {
        match row["recordings"].as_array() {
            Some(several) => all.extend(several.iter().map(|r| r.as_str().unwrap().to_string())),
            None => all.extend(row["recording"].as_str().map(str::to_string)),
        }
    }
    assert!(!all.is_empty(), "{}: no recordings", sweep.display());
    all
}

/// A copy of the sweep in `from`, at `to`, whose every step took `factor` times as long: each cell's recording read
/// back and written again by golow's own player and recorder, with its steps' measured times (data, host-to-device,
/// compute) and every record's time stretched by `factor`, and all else (the header, the machine's load) as it was.
/// results.json is copied as it is: `compare` reads each cell's recording.
fn slowed_copy(from: &Path, to: &Path, factor: f64) {
    use golow_protocol::event::Body;
    std::fs::create_dir_all(to.join("cells")).unwrap();
    std::fs::copy(from.join("results.json"), to.join("results.json")).unwrap();
    for recording in recordings(from) {
        let mut player = golow::recording::Player::open(&from.join(&recording)).unwrap();
        let header = player.recording().header.clone();
        let records: Vec<_> = player.records().collect();
        let (recorder, mut sink) =
            golow::recording::Recorder::create(&to.join(&recording), &header).unwrap();
        for mut record in records.clone() {
            record.t_ms *= factor;
            if let Body::Step(step) = &mut record.body {
                step.data_ms *= factor;
                step.compute_ms *= factor;
                step.h2d_ms = step.h2d_ms.map(|ms| ms * factor);
            }
            sink.write(&record);
        }
        drop(sink);
        assert_eq!(recorder.finish().unwrap().events, records.len() as u64);
    }
}

/// How much slower than A a copy must be for every step of it to take at least twice A's slowest: twice A's own
/// spread, its slowest step over its fastest (warm-up and profiled steps left out, as compare leaves them).
fn twice_the_spread(sweep: &Path) -> f64 {
    use golow_protocol::event::Body;
    let mut spread: f64 = 1.0;
    for recording in recordings(sweep) {
        let recording = sweep.join(recording);
        let mut player = golow::recording::Player::open(&recording).unwrap();
        let times: Vec<f64> = player
            .records()
            .filter_map(|r| match r.body {
                Body::Step(s) if !s.warmup && !s.profiled => {
                    Some(s.h2d_ms.unwrap_or(0.0) + s.compute_ms)
                }
                _ => None,
            })
            .collect();
        let (fastest, slowest) = times.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &t| {
            (lo.min(t), hi.max(t))
        });
        assert!(fastest > 0.0, "{}: {times:?}", recording.display());
        spread = spread.max(slowest / fastest);
    }
    2.0 * spread
}

/// Two sweeps, cell by cell: a sweep against itself is every ratio 1 and no regression (exit 0); against a copy whose
/// steps all took longer (by twice the sweep's own spread, so beyond any noise of its own), each cell's times are
/// that much worse and judged a regression (exit 1); the copy against the sweep is that much better, which is not.
#[test]
fn two_sweeps_compare_cell_by_cell_and_replay_as_a_table() {
    let tmp = tempfile::tempdir().unwrap();
    // 20 steps a cell: enough measured steps for the medians' intervals (compare gives no ratio of times from fewer
    // than 5).
    let run = sweep_of(
        tmp.path(),
        "libtorch",
        "20",
        &["--batch-sizes", "4,8", "--resolutions", "32", "--out", "a"],
    )
    .output()
    .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    let cells = ["batch 4 at 32 px", "batch 8 at 32 px"];

    let itself = golow(tmp.path(), &["compare", "a", "a"]);
    let stdout = text(&itself.stdout);
    assert_eq!(
        itself.status.code(),
        Some(0),
        "{stdout}{}",
        text(&itself.stderr)
    );
    let compared = compared_cells(&stdout, "libtorch");
    assert_eq!(
        compared.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        cells,
        "{stdout}"
    );
    for (_, rows) in &compared {
        assert!(
            rows.iter().filter(|r| is_time(&r.metric)).count() >= 3,
            "{stdout}"
        );
        for Compared {
            metric,
            ratio,
            verdict,
        } in rows
        {
            // A time's interval holds 1: within noise; a single figure (a peak) has none.
            let same = if is_time(metric) {
                "within noise"
            } else {
                "ok"
            };
            assert_eq!(
                (ratio.as_str(), verdict.as_str()),
                ("1.000", same),
                "{metric}: {stdout}"
            );
        }
    }

    let factor = twice_the_spread(&tmp.path().join("a"));
    slowed_copy(&tmp.path().join("a"), &tmp.path().join("slower"), factor);
    for (a, b, worse) in [("a", "slower", true), ("slower", "a", false)] {
        let out = golow(tmp.path(), &["compare", a, b]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(if worse { 1 } else { 0 }),
            "{a} against {b}, {factor:.3} times slower: {stdout}{}",
            text(&out.stderr)
        );
        let compared = compared_cells(&stdout, "libtorch");
        assert_eq!(compared.len(), cells.len(), "{stdout}");
        for (_, rows) in &compared {
            assert!(
                rows.iter().filter(|r| is_time(&r.metric)).count() >= 3,
                "{stdout}"
            );
            for Compared {
                metric,
                ratio,
                verdict,
            } in rows
            {
                if !is_time(metric) {
                    assert_eq!(
                        (ratio.as_str(), verdict.as_str()),
                        ("1.000", "ok"),
                        "{metric}: {stdout}"
                    );
                    continue;
                }
                // B/A of a time is the factor when B is the copy, its inverse when A is; of throughput the other way.
                let above_one = worse != metric.contains("throughput");
                let expected = if above_one { factor } else { 1.0 / factor };
                let ratio: f64 = ratio
                    .parse()
                    .unwrap_or_else(|_| panic!("{metric}: {stdout}"));
                // As printed (3 decimals), from medians kept to 0.1%.
                assert!(
                    (ratio - expected).abs() <= 0.0005 + 0.01 * expected,
                    "{metric}: B/A {ratio}, expected {expected:.4}: {stdout}"
                );
                let judged = if worse { "REGRESSION" } else { "ok" };
                assert_eq!(verdict, judged, "{metric}: {stdout}");
            }
        }
    }

    let replayed = golow(tmp.path(), &["replay", "a", "--headless"]);
    assert!(replayed.status.success());
    assert_eq!(
        text(&replayed.stdout).lines().count(),
        3,
        "{}",
        text(&replayed.stdout)
    );
    let mixed = golow(tmp.path(), &["compare", "a", "a/cells/b4-r32.golow"]);
    assert_eq!(mixed.status.code(), Some(2));
}

/// SIGTERM ends a sweep as an interrupt does: the running cell stopped and not kept, the finished ones saved, no
/// further cell started; golow exits 143.
#[test]
fn a_terminated_sweep_keeps_its_finished_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let grid = [
        "--batch-sizes",
        "4,8,16",
        "--resolutions",
        "32",
        "--out",
        "s",
    ];
    let out = signalled_after_the_first_cell(tmp.path(), &grid, libc::SIGTERM);
    let dir = tmp.path().join("s");
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stderr));
    let done = rows(&dir);
    assert_eq!(done.len(), 2, "only the first cell is kept: {done:?}");
    assert!(
        !dir.join("cells/b16-r32.golow").exists(),
        "a later cell ran"
    );
}

/// `--repeat 3`: each cell runs three sessions; its rows give their median with the min–max range, in
/// results.json and results.csv, the figures draw the range, and compare weighs the spread between the sessions.
#[test]
fn a_repeated_sweep_gives_each_cell_s_median_and_range() {
    let tmp = tempfile::tempdir().unwrap();
    let out = sweep(
        tmp.path(),
        &[
            "--batch-sizes",
            "2,4",
            "--resolutions",
            "32",
            "--repeat",
            "3",
            "--out",
            "r",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.lines().next().unwrap().contains("range")
            && table.contains("medians over 3 sessions a cell"),
        "{table}"
    );
    let dir = tmp.path().join("r");
    assert_eq!(results(&dir)["config"]["repeat"], 3);
    let rows = rows(&dir);
    assert_eq!(rows.len(), 4, "{rows:?}");
    for row in &rows {
        assert_eq!(row["repeats"], 3, "{row}");
        let recordings: Vec<String> = row["recordings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect();
        assert_eq!(recordings.len(), 3, "{row}");
        // Each session's own median, from its recording's summary: the row's is their median, within their range.
        let mut medians: Vec<f64> = recordings
            .iter()
            .map(|r| {
                let replayed = tmp.path().join("replayed.json");
                let _ = std::fs::remove_file(&replayed);
                let out = golow(
                    tmp.path(),
                    &[
                        "replay",
                        &dir.join(r).display().to_string(),
                        "--headless",
                        "--summary-json",
                        &replayed.display().to_string(),
                    ],
                );
                assert!(out.status.success(), "{}", text(&out.stderr));
                let s = summary(&replayed);
                let w = common::worker(&s, row["impl"].as_str().unwrap());
                w["sample_time_ms"]["p50"].as_f64().unwrap()
            })
            .collect();
        medians.sort_by(f64::total_cmp);
        let f = |key: &str| row[key].as_f64().unwrap();
        assert_eq!(f("sample_time_p50_ms"), medians[1], "{row}");
        assert_eq!(
            (f("sample_time_p50_min_ms"), f("sample_time_p50_max_ms")),
            (medians[0], medians[2]),
            "{row}"
        );
        assert!(f("throughput_min") <= f("throughput_samples_per_s"));
        assert!(f("throughput_samples_per_s") <= f("throughput_max"));
    }
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for column in [
        "repeats",
        "sample_time_p50_min_ms",
        "sample_time_p50_max_ms",
        "throughput_min",
        "throughput_max",
    ] {
        assert!(header.split(',').any(|c| c == column), "{header}");
    }
    let figure = std::fs::read_to_string(dir.join("sample_time-vs-batch-at-32px.svg")).unwrap();
    assert!(figure.contains("<line") || figure.contains("<polyline"));
    // A sweep against itself, each cell's three sessions a side: judged by the spread between them.
    let compared = golow(tmp.path(), &["compare", "r", "r"]);
    let stdout = text(&compared.stdout);
    assert_eq!(compared.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("between the 3 and 3 sessions"), "{stdout}");
    assert!(!stdout.contains("REGRESSION"), "{stdout}");
}

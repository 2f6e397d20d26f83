//! Recordings end to end, on real CPU sessions: the live summary equals the replayed one, a killed
//! run leaves a replayable file, export writes valid Chrome trace and CSV, compare finds a regression.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use golow::recording::format::Header;
use golow::recording::{Player, Recorder};
use golow_protocol::event::{Body, Record};

/// One real session, recorded, shared by the tests of this file.
struct Session {
    dir: tempfile::TempDir,
    recording: PathBuf,
    /// The table it ended with.
    table: String,
}

fn session() -> &'static Session {
    static SESSION: OnceLock<Session> = OnceLock::new();
    SESSION.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = common::headless(
            dir.path(),
            &[
                "--impl",
                "libtorch,pytorch",
                "--model",
                "resnet18",
                // Steps of a tenth of a second or more: a frame (a second) holds a few of them, which the tests
                // that damage frames count on.
                "--batch-size",
                "16",
                "--steps",
                "24",
                "--warmup",
                "2",
            ],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        let stderr = common::text(&out.stderr);
        assert!(stderr.contains("recorded"), "{stderr}");
        // The last line says what the recording is for, with its path to paste.
        let next = stderr.lines().last().unwrap_or_default();
        assert!(
            next.starts_with("golow: next: golow replay recordings/")
                && next.contains("golow export recordings/")
                && next.contains("golow compare recordings/"),
            "{stderr}"
        );
        let recordings: Vec<PathBuf> = std::fs::read_dir(dir.path().join("recordings"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(recordings.len(), 1, "{recordings:?}");
        let name = recordings[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.ends_with("-libtorch-pytorch.golow"), "{name}");
        Session {
            recording: recordings[0].clone(),
            dir,
            table: common::text(&out.stdout),
        }
    })
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn a_replayed_summary_equals_the_live_one() {
    let s = session();
    let replayed = s.dir.path().join("replayed.json");
    let out = common::golow(
        s.dir.path(),
        &[
            "replay",
            &path(&s.recording),
            "--headless",
            "--summary-json",
            &path(&replayed),
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    assert_eq!(common::text(&out.stderr), "");
    let live = std::fs::read_to_string(s.dir.path().join("summary.json")).unwrap();
    assert_eq!(std::fs::read_to_string(&replayed).unwrap(), live);
    // The table on stdout is the live run's too.
    let table = common::text(&out.stdout);
    assert!(table.contains("libtorch"));
    // Its time per sample and its samples per second order the workers alike.
    // Each figure with half a unit of its last printed digit: what rounding to print it may have moved it by.
    let figure = |cell: &str| {
        let decimals = cell.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
        (cell.parse::<f64>().unwrap(), 0.5 * 10f64.powi(-decimals))
    };
    let figures: Vec<((f64, f64), (f64, f64))> = table
        .lines()
        .filter(|l| l.starts_with("libtorch ") || l.starts_with("pytorch "))
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (figure(cells[3]), figure(cells[7]))
        })
        .collect();
    assert_eq!(figures.len(), 2, "{table}");
    let (((ms_a, _), (rate_a, _)), ((ms_b, _), (rate_b, _))) = (figures[0], figures[1]);
    // The two columns order the workers alike (ties aside, which rounding may make).
    if ms_a < ms_b {
        assert!(rate_a >= rate_b, "{table}");
    } else if ms_a > ms_b {
        assert!(rate_a <= rate_b, "{table}");
    }
    // The rate is 1000 / the time per sample, as far as printing both allows.
    for ((ms, ms_rounding), (rate, rate_rounding)) in figures {
        let derived = 1e3 / ms;
        let allowed = rate_rounding + derived * ms_rounding / ms + 1e-9;
        assert!((derived - rate).abs() <= allowed, "{table}");
    }
}

#[test]
fn standard_tools_read_a_recording() {
    let s = session();
    let out = std::process::Command::new("zstd")
        .args(["-dc", &path(&s.recording)])
        .output()
        .expect("zstd is installed");
    assert!(out.status.success());
    let text = common::text(&out.stdout);
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["format"], "golow-recording");
    assert_eq!(header["config"]["impls"][0], "libtorch");
    assert!(header["command_line"].as_array().unwrap().len() > 3);
    let records: Vec<Record> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(matches!(records[0].body, Body::SessionStart(_)));
    assert!(matches!(records.last().unwrap().body, Body::SessionEnd));
    assert!(records.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
    let steps = records
        .iter()
        .filter(|r| matches!(r.body, Body::Step(_)))
        .count();
    assert_eq!(steps, 48);
}

#[test]
fn export_writes_a_chrome_trace_csv_and_json() {
    let s = session();
    let trace = s.dir.path().join("trace.json");
    let out = common::golow(
        s.dir.path(),
        &[
            "export",
            &path(&s.recording),
            "--format",
            "chrome-trace",
            "-o",
            &path(&trace),
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&"libtorch") && names.contains(&"pytorch"),
        "{names:?}"
    );
    let steps = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().is_some_and(|n| n.starts_with("step ")))
        .count();
    assert_eq!(steps, 48);
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "C" && e["name"] == "cpu %")
    );
    assert!(
        events
            .iter()
            .filter(|e| e["ph"] != "M")
            .all(|e| e["ts"].is_number())
    );

    let csv = s.dir.path().join("steps.csv");
    let out = common::golow(
        s.dir.path(),
        &[
            "export",
            &path(&s.recording),
            "--format",
            "csv",
            "-o",
            &path(&csv),
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut rows = text.lines();
    let columns: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert_eq!(columns.len(), 41);
    let rows: Vec<Vec<&str>> = rows.map(|r| r.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == columns.len()));
    let steps: Vec<&Vec<&str>> = rows.iter().filter(|r| r[2] == "step").collect();
    assert_eq!(steps.len(), 48);
    // The median golow gives is the one a reader gets from the CSV: measured steps, neither warm-up nor profiled.
    let cell = |row: &[&str], column: &str| {
        row[columns.iter().position(|c| *c == column).unwrap()].to_string()
    };
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.dir.path().join("summary.json")).unwrap())
            .unwrap();
    for worker in ["libtorch", "pytorch"] {
        let mut sample_ms: Vec<f64> = steps
            .iter()
            .filter(|r| {
                r[1] == worker && cell(r, "warmup") == "false" && cell(r, "profiled") == "false"
            })
            .map(|r| {
                let ms = |c: &str| cell(r, c).parse::<f64>().unwrap_or(0.0);
                (ms("h2d_ms") + ms("compute_ms")) / ms("batch_size")
            })
            .collect();
        assert!(
            steps
                .iter()
                .any(|r| r[1] == worker && cell(r, "profiled") == "true"),
            "{worker} had no profiled step"
        );
        sample_ms.sort_by(f64::total_cmp);
        let from_csv = sample_ms[(sample_ms.len() - 1) / 2];
        let golow = summary["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["impl"] == worker)
            .unwrap()["sample_time_ms"]["p50"]
            .as_f64()
            .unwrap();
        assert!(
            (golow / from_csv - 1.0).abs() < 2e-3,
            "{worker}: {golow} vs {from_csv}"
        );
    }

    let json = s.dir.path().join("all.json");
    let out = common::golow(
        s.dir.path(),
        &[
            "export",
            &path(&s.recording),
            "--format",
            "json",
            "-o",
            &path(&json),
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let all: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(all["header"]["format"], "golow-recording");
    assert!(all["records"].as_array().unwrap().len() > 48);
}

/// A copy of `from` whose steps of `worker` took `factor` times as long.
/// The largest over the smallest of `worker`'s measured compute times.
fn spread(recording: &Path, worker: &str) -> f64 {
    let times: Vec<f64> = Player::open(recording)
        .unwrap()
        .records()
        .filter_map(|r| match (r.worker.as_deref(), &r.body) {
            (Some(w), Body::Step(step)) if w == worker && !step.warmup => Some(step.compute_ms),
            _ => None,
        })
        .collect();
    let max = times.iter().copied().fold(f64::MIN, f64::max);
    let min = times.iter().copied().fold(f64::MAX, f64::min);
    assert!(min > 0.0 && max >= min, "{times:?}");
    max / min
}

/// A copy of `from` at `to`, its header and records edited.
fn rewritten(
    from: &Path,
    to: &Path,
    header: impl FnOnce(&mut Header),
    mut edit: impl FnMut(&mut Record),
) {
    let mut player = Player::open(from).unwrap();
    let mut copied = player.recording().header.clone();
    header(&mut copied);
    let (recorder, mut sink) = Recorder::create(to, &copied).unwrap();
    for mut record in player.records() {
        edit(&mut record);
        sink.write(&record);
    }
    drop(sink);
    recorder.finish().unwrap();
}

fn slowed(from: &Path, to: &Path, worker: &str, factor: f64) {
    rewritten(
        from,
        to,
        |_| {},
        |record| {
            if record.worker.as_deref() == Some(worker)
                && let Body::Step(step) = &mut record.body
            {
                step.compute_ms *= factor;
            }
        },
    );
}

#[test]
fn the_machine_s_load_is_recorded_and_summarised() {
    let s = session();
    let readings = Player::open(&s.recording)
        .unwrap()
        .records()
        .filter(|r| matches!(r.body, Body::MachineLoad { .. }))
        .count();
    assert!(readings >= 1, "no machine_load record");
    let out = common::golow(s.dir.path(), &["replay", &path(&s.recording), "--headless"]);
    let table = common::text(&out.stdout);
    assert!(table.contains("machine: load "), "{table}");
}

#[test]
fn compare_weighs_the_spread_between_sessions_when_given_several() {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    let copies = |name: &str, factors: &[f64]| -> Vec<String> {
        factors
            .iter()
            .enumerate()
            .map(|(i, &f)| {
                let to = dir.path().join(format!("{name}-{i}.golow"));
                slowed(&s.recording, &to, "pytorch", f);
                path(&to)
            })
            .collect()
    };
    let a = copies("a", &[1.0, 1.01, 0.99]);
    let slower = 1.5 * spread(&s.recording, "pytorch");
    let b = copies("b", &[slower, slower * 1.01, slower * 0.99]);
    let compare = |a: &[String], b: &[String]| {
        let mut args = vec!["compare".to_string()];
        args.extend_from_slice(a);
        args.push("--vs".into());
        args.extend_from_slice(b);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::golow(dir.path(), &args)
    };
    let out = compare(&a, &b);
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    assert!(table.contains("between the 3 and 3 sessions"), "{table}");
    let regressions: Vec<&str> = table.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert!(
        !regressions.is_empty() && regressions.iter().all(|l| l.starts_with("pytorch")),
        "{table}"
    );
    // B's sessions spread from faster than A to far slower: within noise between sessions, though the slowest alone
    // against A's first is called a regression.
    let noisy = copies("noisy", &[0.7, 1.0, slower]);
    let out = compare(&a, &noisy);
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(!table.contains("REGRESSION"), "{table}");
    let pytorch_times: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("pytorch") && l.contains("time"))
        .collect();
    assert!(
        !pytorch_times.is_empty() && pytorch_times.iter().all(|l| l.ends_with("within noise")),
        "{table}"
    );
    let alone = common::golow(dir.path(), &["compare", &a[0], &noisy[2]]);
    assert_eq!(
        alone.status.code(),
        Some(1),
        "{}",
        common::text(&alone.stdout)
    );
    // A side's sessions must be of one setup.
    let other = dir.path().join("other.golow");
    rewritten(&s.recording, &other, |h| h.config.threads += 1, |_| {});
    let mixed = compare(&[a[0].clone(), path(&other)], &b);
    let stderr = common::text(&mixed.stderr);
    assert_eq!(mixed.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("A's sessions are not of one setup: threads"),
        "{stderr}"
    );
}

#[test]
fn compare_says_when_setups_differ_and_judges_per_sample_time_across_batches() {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    let doubled = dir.path().join("doubled.golow");
    // Twice the batch for 1.5 times the step: per-sample time 25% better, step time 50% worse.
    rewritten(
        &s.recording,
        &doubled,
        |h| h.config.batch_size *= 2,
        |record| {
            if let Body::Step(step) = &mut record.body {
                step.batch_size *= 2;
                step.compute_ms *= 1.5;
            }
        },
    );
    let out = common::golow(
        dir.path(),
        &["compare", &path(&s.recording), &path(&doubled)],
    );
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.contains("setups differ: batch 16 vs 32"), "{table}");
    assert!(!table.contains("REGRESSION"), "{table}");
    let step_rows: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("median step time"))
        .collect();
    assert!(
        !step_rows.is_empty()
            && step_rows
                .iter()
                .all(|l| l.contains("not judged: batch 16 vs 32")),
        "{table}"
    );
    assert!(table.contains("median time per sample (ms)"), "{table}");
}

#[test]
fn compare_does_not_judge_times_of_sessions_under_different_conditions() {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    let busy = dir.path().join("busy.golow");
    let factor = 1.5 * spread(&s.recording, "pytorch");
    rewritten(
        &s.recording,
        &busy,
        |_| {},
        |record| match &mut record.body {
            Body::MachineLoad { others_percent, .. } => {
                *others_percent = (*others_percent + 40.0).min(100.0)
            }
            Body::Step(step) if record.worker.as_deref() == Some("pytorch") => {
                step.compute_ms *= factor
            }
            _ => {}
        },
    );
    let out = common::golow(dir.path(), &["compare", &path(&s.recording), &path(&busy)]);
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(
        table.contains("conditions differ: other processes used"),
        "{table}"
    );
    assert!(table.contains("by other processes"), "{table}");
    let pytorch_times: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("pytorch") && l.contains("(ms)"))
        .collect();
    assert!(
        !pytorch_times.is_empty()
            && pytorch_times
                .iter()
                .all(|l| l.contains("not judged: conditions differ")),
        "{table}"
    );
}

#[test]
fn compare_passes_a_recording_against_itself_and_fails_a_regression() {
    let s = session();
    let same = common::golow(
        s.dir.path(),
        &["compare", &path(&s.recording), &path(&s.recording)],
    );
    let table = common::text(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{table}");
    assert!(
        table.contains("libtorch") && table.contains("pytorch"),
        "{table}"
    );
    assert!(!table.contains("REGRESSION"), "{table}");
    // Every time's interval holds 1: within noise, not "ok"; memory is in the units golow shows elsewhere.
    for row in table
        .lines()
        .filter(|l| l.starts_with("libtorch") || l.starts_with("pytorch"))
    {
        if row.contains("(ms)") || row.contains("throughput") {
            assert!(row.ends_with("within noise"), "{row}");
        }
        if row.contains("peak host RSS") {
            assert!(row.contains(" MiB ") && row.ends_with("ok"), "{row}");
        }
    }

    let slower = s.dir.path().join("slower.golow");
    // Beyond the recording's own spread, so that it is a regression however loaded the machine was
    // while the session ran (the verdict's interval is conservative, and load widens it).
    let factor = 1.5 * spread(&s.recording, "pytorch");
    slowed(&s.recording, &slower, "pytorch", factor);
    let out = common::golow(
        s.dir.path(),
        &["compare", &path(&s.recording), &path(&slower)],
    );
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    let regressions: Vec<&str> = table.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert!(
        !regressions.is_empty() && regressions.iter().all(|l| l.starts_with("pytorch")),
        "{table}"
    );

    let bad = common::golow(
        s.dir.path(),
        &[
            "compare",
            &path(&s.recording),
            &path(&slower),
            "--threshold",
            "7",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
}

/// Every row's B/A lies inside its printed interval.
fn assert_estimates_inside_intervals(table: &str) {
    let mut checked = 0;
    for line in table.lines() {
        let Some((before, interval)) = line.split_once('[') else {
            continue;
        };
        let Some((low, high)) = interval
            .split_once(']')
            .and_then(|(i, _)| i.split_once(", "))
        else {
            continue;
        };
        let ratio: f64 = before.split_whitespace().last().unwrap().parse().unwrap();
        let (low, high): (f64, f64) = (low.parse().unwrap(), high.parse().unwrap());
        assert!(low <= ratio && ratio <= high, "{line}\n{table}");
        checked += 1;
    }
    assert!(checked >= 3, "{table}");
}

#[test]
fn compare_judges_neither_other_work_nor_a_worker_on_one_side_and_keeps_its_estimates_inside_intervals()
 {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    let (eval, renamed) = (
        dir.path().join("eval.golow"),
        dir.path().join("renamed.golow"),
    );
    let factor = 1.5 * spread(&s.recording, "pytorch");
    rewritten(
        &s.recording,
        &eval,
        |h| h.config.mode = golow_protocol::config::Mode::Eval,
        |record| {
            if let Body::Step(step) = &mut record.body {
                step.compute_ms *= factor;
            }
        },
    );
    let out = common::golow(dir.path(), &["compare", &path(&s.recording), &path(&eval)]);
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(
        table.contains("setups differ: mode train vs eval"),
        "{table}"
    );
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("pytorch") || l.starts_with("libtorch"))
        .collect();
    assert!(
        rows.len() >= 6
            && rows
                .iter()
                .all(|l| l.contains("not judged: mode train vs eval")),
        "{table}"
    );
    assert_estimates_inside_intervals(&table);

    let rename = |workers: &mut Vec<String>| {
        for w in workers.iter_mut().filter(|w| *w == "pytorch") {
            *w = "eager".into();
        }
    };
    rewritten(
        &s.recording,
        &renamed,
        |h| rename(&mut h.config.workers),
        |record| {
            if record.worker.as_deref() == Some("pytorch") {
                record.worker = Some("eager".into());
            }
            if let Body::SessionStart(config) = &mut record.body {
                rename(&mut config.workers);
            }
        },
    );
    let out = common::golow(
        dir.path(),
        &["compare", &path(&s.recording), &path(&renamed)],
    );
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(
        table.contains("pytorch is not compared: it ran in A only"),
        "{table}"
    );
    assert!(
        table.contains("eager is not compared: it ran in B only"),
        "{table}"
    );
    assert!(table.lines().any(|l| l.starts_with("libtorch")), "{table}");
    assert_estimates_inside_intervals(&table);

    // Paired by name: pytorch in A against eager in B.
    let paired = |pairs: &[&str]| {
        let mut args = vec!["compare".to_string(), path(&s.recording), path(&renamed)];
        for pair in pairs {
            args.extend(["--pair".to_string(), pair.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::golow(dir.path(), &args)
    };
    let out = paired(&["pytorch=eager"]);
    let table = common::text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{table}{}",
        common::text(&out.stderr)
    );
    assert!(!table.contains("not compared"), "{table}");
    assert!(
        table
            .lines()
            .filter(|l| l.starts_with("pytorch→eager "))
            .count()
            >= 3,
        "{table}"
    );
    assert_estimates_inside_intervals(&table);
    for (bad, says) in [
        (vec!["pytorch"], "--pair takes OLD=NEW"),
        (vec!["=eager"], "--pair takes OLD=NEW"),
        (vec!["jax=eager"], "A's"),
        (
            vec!["pytorch=jax"],
            "has no worker jax (it ran libtorch, eager)",
        ),
        (
            vec!["pytorch=eager", "pytorch=libtorch"],
            "pairs A's pytorch twice",
        ),
    ] {
        let out = paired(&bad);
        let stderr = common::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(
            stderr.lines().count() == 1 && stderr.contains(says),
            "{bad:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{bad:?}");
    }
}

#[test]
fn compare_of_hundreds_of_sessions_holds_none_whole_and_says_each_side_s_machine_once() {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    // Whatever the machine did while the session was recorded, A and most of B ran on a quiet one.
    let (quiet, busy) = (
        dir.path().join("quiet.golow"),
        dir.path().join("busy.golow"),
    );
    for (file, others) in [(&quiet, 1.0), (&busy, 60.0)] {
        rewritten(
            &s.recording,
            file,
            |_| {},
            |record| {
                if let Body::MachineLoad { others_percent, .. } = &mut record.body {
                    *others_percent = others;
                }
            },
        );
    }
    let copies = |side: &str, from: &Path| -> Vec<String> {
        (0..120)
            .map(|i| {
                let to = dir.path().join(format!("{side}-{i}.golow"));
                std::fs::copy(from, &to).unwrap();
                path(&to)
            })
            .collect()
    };
    let mut args = vec!["compare".to_string()];
    args.extend(copies("a", &quiet));
    args.push("--vs".into());
    let mut b = copies("b", &quiet);
    b[7] = path(&busy);
    args.extend(b);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_golow"))
        .args(&args)
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let reader = {
        let mut pipe = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut pipe, &mut text).unwrap();
            text
        })
    };
    let peak_kib = common::peak_kib_until_exit(&mut child);
    let stdout = reader.join().unwrap();
    assert!(
        stdout.contains("between the 120 and 120 sessions"),
        "{stdout}"
    );
    // Each session folded whole held about 2.6 MB: 240 of them, over 600 MB.
    assert!(peak_kib < 120 * 1024, "peak {peak_kib} KiB");
    let side_lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("A: ") || l.starts_with("B: "))
        .collect();
    assert_eq!(side_lines.len(), 2, "{stdout}");
    assert!(
        side_lines[1].contains("1 of them beside a busy machine, the busiest")
            && side_lines[1].contains("busy.golow"),
        "{stdout}"
    );
    assert!(!stdout.contains("during "), "{stdout}");
}

#[test]
fn recordings_that_are_not_golow_s_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let text = tmp.path().join("notes.golow");
    std::fs::write(&text, "hello\n").unwrap();
    let missing = tmp.path().join("missing.golow");
    for file in [&text, &missing] {
        for args in [
            vec!["replay", &path(file), "--headless"],
            vec!["export", &path(file), "--format", "csv", "-o", "out.csv"],
            vec!["compare", &path(file), &path(file)],
        ] {
            let out = common::golow(tmp.path(), &args);
            let stderr = common::text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.contains(&path(file)), "{stderr}");
        }
    }
    assert!(!tmp.path().join("out.csv").exists());
    assert!(!tmp.path().join("out.csv.tmp").exists());
}

fn steps_in(recording: &Path) -> usize {
    Player::open(recording).map_or(0, |mut p| {
        p.records()
            .filter(|r| matches!(r.body, Body::Step(_)))
            .count()
    })
}

#[test]
fn a_run_killed_with_sigkill_leaves_a_replayable_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let recording = tmp.path().join("killed.golow");
    let mut child = common::golow_command(tmp.path())
        .args([
            "run",
            "--headless",
            "--impl",
            "libtorch",
            "--model",
            "resnet18",
            "--batch-size",
            "4",
            "--steps",
            "100000",
            "--record",
            &path(&recording),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while steps_in(&recording) < 5 {
        assert!(Instant::now() < deadline, "no steps recorded");
        std::thread::sleep(Duration::from_millis(300));
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let on_disk = steps_in(&recording);

    let summary = tmp.path().join("replayed.json");
    let out = common::golow(
        tmp.path(),
        &[
            "replay",
            &path(&recording),
            "--headless",
            "--summary-json",
            &path(&summary),
        ],
    );
    let stderr = common::text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not closed cleanly") && stderr.lines().count() == 1,
        "{stderr}"
    );
    let s = common::summary(&summary);
    let steps = common::worker(&s, "libtorch")["steps"].as_u64().unwrap();
    assert!(
        steps as usize >= on_disk && on_disk >= 5,
        "{steps} steps, {on_disk} on disk"
    );
}

/// A run of two workers ends with the verdict the compare view gives them: the ratio of their medians of time per
/// sample, its interval and its words, in the table and in the summary.
#[test]
fn a_headless_run_of_two_workers_ends_with_their_verdict() {
    let s = session();
    let summary = common::summary_of(s.dir.path());
    let comparisons = summary["comparisons"].as_array().expect("comparisons");
    assert_eq!(comparisons.len(), 1, "{summary}");
    let c = &comparisons[0];
    assert_eq!(
        (&c["a"], &c["b"], &c["by"]),
        (&"libtorch".into(), &"pytorch".into(), &"sample_time".into())
    );
    let figure = |key: &str| c[key].as_f64().unwrap_or_else(|| panic!("{key}: {c}"));
    let (ratio, low, high) = (figure("ratio"), figure("low"), figure("high"));
    assert!(low <= ratio && ratio <= high, "{c}");
    let median = |w: &str| {
        common::worker(&summary, w)["sample_time_ms"]["p50"]
            .as_f64()
            .unwrap()
    };
    assert!(
        (ratio - median("libtorch") / median("pytorch")).abs() <= 1e-9 * ratio,
        "{c}"
    );
    let beyond = low > 1.0 || high < 1.0;
    assert_eq!(c["beyond_noise"], beyond, "{c}");
    let verdict = c["verdict"].as_str().unwrap();
    if beyond {
        assert!(
            verdict.ends_with("faster than pytorch, beyond noise")
                || verdict.ends_with("faster than libtorch, beyond noise"),
            "{verdict}"
        );
    } else {
        assert!(
            verdict.starts_with("libtorch and pytorch within noise"),
            "{verdict}"
        );
    }
    let line = s
        .table
        .lines()
        .find(|l| l.starts_with("verdict: "))
        .unwrap_or_else(|| panic!("{}", s.table));
    assert_eq!(
        line,
        format!(
            "verdict: {verdict}; time per sample libtorch/pytorch {ratio:.3}, 95% interval [{low:.3}, {high:.3}]"
        )
    );
}

/// The measured steps of `worker` in each frame of the recording at `path`.
fn measured_steps_per_frame(path: &Path, worker: &str) -> Vec<usize> {
    let recording = golow::recording::Recording::open(path).unwrap();
    (0..recording.frames.len())
        .map(|i| {
            recording
                .read_frame(i)
                .unwrap()
                .records
                .iter()
                .filter(|r| {
                    r.worker.as_deref() == Some(worker)
                        && matches!(&r.body, Body::Step(step) if !step.warmup && !step.profiled)
                })
                .count()
        })
        .collect()
}

/// A copy of `from` at `to` with the compressed bytes of frames that hold measured steps of `worker` flipped in
/// their middle (their checksum then fails and they are skipped) where `damage` says so of a frame's index; index and
/// all else as written. Returns the steps in the frames left whole.
fn damaged(from: &Path, to: &Path, worker: &str, damage: impl Fn(usize) -> bool) -> usize {
    let recording = golow::recording::Recording::open(from).unwrap();
    let mut bytes = std::fs::read(from).unwrap();
    let mut whole = 0;
    for (i, (frame, steps)) in recording
        .frames
        .iter()
        .zip(measured_steps_per_frame(from, worker))
        .enumerate()
    {
        if steps > 0 && damage(i) {
            bytes[(frame.offset + u64::from(frame.compressed_len) / 2) as usize] ^= 0xff;
        } else {
            whole += steps;
        }
    }
    std::fs::write(to, bytes).unwrap();
    whole
}

/// Compare says what damage skipped of each side; when too few of a side's measured steps survived for a verdict
/// from one session a side, it gives none, and says why in one line, rather than judge the few left.
#[test]
fn compare_says_what_damage_skipped_and_judges_no_few_steps_that_survived() {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    let slower = dir.path().join("slower.golow");
    slowed(
        &s.recording,
        &slower,
        "pytorch",
        1.5 * spread(&s.recording, "pytorch"),
    );
    // One frame lost, the one with the fewest of the steps: still judged, and said.
    let one_lost = dir.path().join("one-lost.golow");
    let counts = measured_steps_per_frame(&slower, "pytorch");
    let fewest = (0..counts.len())
        .filter(|&i| counts[i] > 0)
        .min_by_key(|&i| counts[i])
        .unwrap();
    let left = damaged(&slower, &one_lost, "pytorch", |i| i == fewest);
    assert!(left >= 11, "{left} steps left of {counts:?}");
    let out = common::golow(
        dir.path(),
        &["compare", &path(&s.recording), &path(&one_lost)],
    );
    let table = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    let said = format!("B: {} is damaged: 1 damaged frame(s) (", path(&one_lost));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&said) && l.ends_with("records) skipped")),
        "{table}"
    );
    // All but a few steps lost: no verdict, where the few left would have made a regression.
    let few_left = dir.path().join("few-left.golow");
    // The frames kept: of every choice of frames holding fewer than 11 steps, the one holding the most, so the
    // few left are as many as the split of steps over frames allows (it varies with the machine's speed).
    let stepped: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
    let kept: std::collections::BTreeSet<usize> = (0u32..1 << stepped.len())
        .map(|choice| {
            (0..stepped.len())
                .filter(|b| choice >> b & 1 == 1)
                .map(|b| stepped[b])
                .collect::<std::collections::BTreeSet<usize>>()
        })
        .filter(|frames| frames.iter().map(|&k| counts[k]).sum::<usize>() < 11)
        .max_by_key(|frames| frames.iter().map(|&k| counts[k]).sum::<usize>())
        .unwrap();
    let left = damaged(&slower, &few_left, "pytorch", |i| !kept.contains(&i));
    assert!((4..11).contains(&left), "{left} steps left of {counts:?}");
    let out = common::golow(
        dir.path(),
        &["compare", &path(&s.recording), &path(&few_left)],
    );
    let (table, stderr) = (common::text(&out.stdout), common::text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{table}{stderr}");
    assert!(!table.contains("REGRESSION"), "{table}");
    assert!(
        table.contains(&format!("B: {} is damaged: ", path(&few_left))),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.starts_with("pytorch")
            && l.ends_with(&format!(
                "not judged: too few measured steps ({left} in B; 11 needed)"
            ))),
        "{table}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no verdict on ")
            && stderr.contains("pytorch")
            && stderr.contains("too few measured steps"),
        "{stderr}"
    );
}

/// The recording at `from` copied to `to` with its frame `k`'s marker and index entry stamped far in the future.
fn one_frame_in_the_future(from: &Path, to: &Path, k: usize) {
    use golow::recording::format::{MARKER_LEN, encode_index, encode_marker};
    let mut frames = golow::recording::Recording::open(from).unwrap().frames;
    let mut bytes = std::fs::read(from).unwrap();
    frames[k].first_t_ms = 1e12;
    frames[k].last_t_ms = 1e12;
    let at = frames[k].offset as usize - MARKER_LEN;
    bytes[at..at + MARKER_LEN].copy_from_slice(&encode_marker(&frames[k]));
    let last = frames.last().unwrap();
    let index_at = last.offset + u64::from(last.compressed_len);
    bytes.truncate(index_at as usize);
    bytes.extend_from_slice(&encode_index(&frames, index_at));
    std::fs::write(to, bytes).unwrap();
}

/// A frame stamped far in the future costs that frame: the session still ends, its workers ok, not every frame after
/// it skipped and the workers failed.
#[test]
fn a_frame_stamped_in_the_future_costs_that_frame_only() {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    let future = dir.path().join("future.golow");
    let frames = golow::recording::Recording::open(&s.recording)
        .unwrap()
        .frames;
    one_frame_in_the_future(&s.recording, &future, frames.len() / 2);
    let summary = dir.path().join("summary.json");
    let out = common::golow(
        dir.path(),
        &[
            "replay",
            &path(&future),
            "--headless",
            "--summary-json",
            &path(&summary),
        ],
    );
    let stderr = common::text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("1 frame(s) out of time order"), "{stderr}");
    let summary = common::summary(&summary);
    for worker in ["libtorch", "pytorch"] {
        assert_eq!(
            common::worker(&summary, worker)["status"],
            "ok",
            "{summary}"
        );
    }
}

/// Two sessions in one file, their times rising, are refused in one line by replay, export and compare: joined as
/// files (the second's header inside), or the second's records written after the first's.
#[test]
fn two_sessions_in_one_file_are_refused_not_read_as_one() {
    let s = session();
    let dir = tempfile::tempdir().unwrap();
    let end_ms = Player::open(&s.recording)
        .unwrap()
        .records()
        .last()
        .unwrap()
        .t_ms;
    let later = dir.path().join("later.golow");
    rewritten(&s.recording, &later, |_| {}, |r| r.t_ms += end_ms + 1000.0);
    let joined = dir.path().join("joined.golow");
    let first = std::fs::read(&s.recording).unwrap();
    std::fs::write(
        &joined,
        [first.clone(), std::fs::read(&later).unwrap()].concat(),
    )
    .unwrap();
    let spliced = dir.path().join("spliced.golow");
    let mut player = Player::open(&s.recording).unwrap();
    let (recorder, mut sink) =
        Recorder::create(&spliced, &player.recording().header.clone()).unwrap();
    player.records().for_each(|r| sink.write(&r));
    Player::open(&later)
        .unwrap()
        .records()
        .for_each(|r| sink.write(&r));
    drop(sink);
    recorder.finish().unwrap();
    for (file, says) in [
        (&joined, format!("head -c {}", first.len())),
        (&spliced, "a second session starts at".to_string()),
    ] {
        for args in [
            vec!["replay", &path(file), "--headless"],
            vec!["export", &path(file), "--format", "csv", "-o", "out.csv"],
            vec!["compare", &path(&s.recording), &path(file)],
        ] {
            let out = common::golow(dir.path(), &args);
            let stderr = common::text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.lines().count() == 1
                    && stderr.contains("two sessions")
                    && stderr.contains(&says),
                "{args:?}: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{args:?}");
        }
        assert!(!dir.path().join("out.csv").exists());
    }
    the_replay_view_says_a_second_session_once_closed(&spliced);
}

/// The replay view reads a file as it plays it: a second session's records are found where it reaches them (here on
/// a jump to the end), are not shown, and are said in one line once the view is closed, exit 2.
fn the_replay_view_says_a_second_session_once_closed(file: &Path) {
    let (done, stderr) = (file.with_extension("exit"), file.with_extension("err"));
    let command = format!(
        "{golow} replay {file} 2> {stderr}; echo $? > {done}; sleep 30",
        golow = env!("CARGO_BIN_EXE_golow"),
        file = file.display(),
        stderr = stderr.display(),
        done = done.display(),
    );
    let tmux = common::tmux::Tmux::start(&command, 160, 45);
    tmux.wait_for("the replay to play", Duration::from_secs(30), |s| {
        s.contains("REPLAY")
    });
    tmux.keys("G");
    tmux.wait_for("the end of the recording", Duration::from_secs(10), |s| {
        s.contains("⏸")
    });
    assert_eq!(tmux.quit(&done, Duration::from_secs(10)), "2");
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        said.lines().count() == 1
            && said.contains("two sessions")
            && said.contains("a second session starts at"),
        "{said}"
    );
}

/// A recording made before golow stamped steps' spans and sent the collector's timelines still replays, and says
/// its CUPTI figures per step are not known rather than a tally of whole windows.
#[test]
fn a_recording_from_before_steps_were_placed_replays_without_per_step_cupti_figures() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings/20261126-h200-levels-train-b32.golow");
    let out = common::golow(
        dir.path(),
        &[
            "replay",
            &path(&sample),
            "--headless",
            "--summary-json",
            &path(&summary),
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let workers = summary["workers"].as_array().unwrap();
    assert!(workers.len() >= 4, "{summary}");
    for w in workers {
        // CUPTI measured these workers: their windows are there, their breakdown too.
        assert!(w["gpu_breakdown"].is_object(), "{w}");
        for field in [
            "kernel_launches_per_step",
            "cupti_h2d_bytes_per_step",
            "gpu_busy_ms_per_step",
            "cupti_outside_steps",
        ] {
            assert!(w[field].is_null(), "{field}: {w}");
        }
    }
}

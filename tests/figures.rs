//! Every GPU figure the README and the guide publish is `golow report`'s output for a recording in the repository:
//! each block between `<!-- golow report ARGS -->` and `<!-- end of report -->` must be what that command prints now,
//! and the prose around the blocks on the GPU pages cites no figure the blocks do not hold.
//! `GOLOW_BLESS_FIGURES=1 cargo test --release --test figures` (`make gpu-figures`) writes the blocks again.

mod common;

use std::path::Path;
use std::process::Command;

const BLESS_ENV: &str = "GOLOW_BLESS_FIGURES";
const OPEN: &str = "<!-- golow report ";
const OPEN_END: &str = " -->";
const CLOSE: &str = "<!-- end of report -->";

/// The pages with GPU figures, and the heading of the part of each that holds them (`None`: the whole page).
const GPU_PAGES: &[(&str, Option<&str>)] = &[
    ("README.md", Some("## GPU status")),
    ("docs/gpu.md", Some("## GPU status")),
    ("docs/paper.md", None),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(page: &str) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"))
}

/// A report block: the arguments its opening names, and where its body lies in the page.
struct Block {
    args: Vec<String>,
    body: std::ops::Range<usize>,
}

fn blocks(page: &str, text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find(OPEN).map(|i| i + from) {
        let line_end = text[start..].find('\n').map_or(text.len(), |i| i + start);
        let opening = &text[start + OPEN.len()..line_end];
        let args = opening
            .strip_suffix(OPEN_END)
            .unwrap_or_else(|| panic!("{page}: an opening without `-->`: {opening}"));
        let close = text[line_end..]
            .find(CLOSE)
            .map(|i| i + line_end)
            .unwrap_or_else(|| panic!("{page}: `{OPEN}{args}` has no `{CLOSE}`"));
        found.push(Block {
            args: args.split_whitespace().map(str::to_string).collect(),
            body: line_end + 1..close,
        });
        from = close + CLOSE.len();
    }
    found
}

/// What `golow report ARGS` prints, as a block's body holds it: blank lines around it.
fn report(args: &[String]) -> String {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = golow_report(root(), &args);
    assert!(
        out.status.success(),
        "golow report {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "\n{}\n\n",
        String::from_utf8(out.stdout).unwrap().trim_end()
    )
}

#[test]
fn every_published_gpu_figure_is_what_golow_report_computes_from_its_recording() {
    let bless = std::env::var_os(BLESS_ENV).is_some();
    let mut stale = Vec::new();
    let mut count = 0;
    // ARCHITECTURE.md names the block's form in prose; it publishes no figure.
    for path in common::documentation_pages()
        .into_iter()
        .filter(|p| !p.ends_with("ARCHITECTURE.md"))
    {
        let page = path.strip_prefix(root()).unwrap().display().to_string();
        let mut text = read(&page);
        let mut blocks = blocks(&page, &text);
        count += blocks.len();
        // From the last, so that a rewritten body leaves the ranges before it where they were.
        blocks.reverse();
        for block in blocks {
            for file in block.args.iter().filter(|a| a.ends_with(".golow")) {
                assert!(
                    root().join(file).is_file(),
                    "{page}: `golow report` names {file}, which the repository does not hold"
                );
            }
            let now = report(&block.args);
            if text[block.body.clone()] != now {
                stale.push(format!("{page}: golow report {}", block.args.join(" ")));
                text.replace_range(block.body, &now);
            }
        }
        if bless {
            std::fs::write(&path, text).unwrap();
        }
    }
    for (page, _) in GPU_PAGES {
        assert!(
            !blocks(page, &read(page)).is_empty(),
            "{page} publishes GPU figures: they must come in `golow report` blocks"
        );
    }
    assert!(count > 0);
    assert!(
        bless || stale.is_empty(),
        "these published figures are not what golow computes from their recordings now:\n{}\n\
         write them again with {BLESS_ENV}=1 cargo test --release --test figures (make gpu-figures), and read the \
         prose around them",
        stale.join("\n")
    );
}

/// The part of `text` under `heading`, to the next heading of the same level.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}`"));
    let level = heading.split(' ').next().unwrap();
    let body = &text[start + heading.len() + 2..];
    let end = body
        .match_indices(&format!("\n{level} "))
        .next()
        .map_or(body.len(), |(i, _)| i);
    &body[..end]
}

/// Units after which a number is a measurement.
const UNITS: &[&str] = &[
    "×",
    "%",
    " ms",
    " µs",
    " MiB",
    " GiB",
    " MB",
    " GB",
    " samples/s",
    " s ",
    " s,",
    " s.",
];
/// Words after which a dotted number is a version, not a measurement.
const VERSIONED: &[&str] = &[
    "torch ", "CUDA ", "cuDNN ", "driver ", "Python ", "torch==", "+cu", "arXiv:", "§",
];

/// The figures `prose` states: numbers with a decimal point that are not versions, and numbers with a unit.
fn figures_in(prose: &str) -> Vec<String> {
    let bytes = prose.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit() && (i == 0 || !is_number_byte(bytes[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < bytes.len() && is_number_byte(bytes[end]) {
            end += 1;
        }
        let number = prose[i..end].trim_end_matches(['.', ',']);
        let rest = &prose[i + number.len()..];
        let before = &prose[..i];
        let version = number.matches('.').count() > 1
            || VERSIONED.iter().any(|w| before.ends_with(w))
            || before.ends_with('v')
            || before.ends_with('/')
            || before.ends_with('-');
        let unit = UNITS.iter().any(|u| rest.starts_with(u)) && !rest.starts_with("% interval");
        if !version && (number.contains('.') || unit) {
            found.push(number.to_string());
        }
        i = end;
    }
    found
}

fn is_number_byte(b: u8) -> bool {
    b.is_ascii_digit() || b == b'.' || b == b','
}

/// `text` without its report blocks, its code, and its quotations (lines starting `> `: what others wrote).
fn prose_of(page: &str, text: &str) -> String {
    let mut prose = String::new();
    let mut from = 0;
    for block in blocks(page, text) {
        prose.push_str(&text[from..block.body.start]);
        from = block.body.end;
    }
    prose.push_str(&text[from..]);
    let unquoted: Vec<&str> = prose.lines().filter(|l| !l.starts_with("> ")).collect();
    unquoted
        .join("\n")
        .split("```")
        .step_by(2)
        .collect::<Vec<_>>()
        .join("")
}

#[test]
fn the_gpu_pages_cite_no_figure_their_reports_do_not_hold() {
    let mut typed = Vec::new();
    for (page, heading) in GPU_PAGES {
        let text = read(page);
        let part = heading.map_or(text.as_str(), |h| section(&text, h));
        let reported: String = blocks(page, part)
            .iter()
            .map(|b| &part[b.body.clone()])
            .collect();
        for figure in figures_in(&prose_of(page, part)) {
            if !reported.contains(&figure) {
                typed.push(format!("{page}: {figure}"));
            }
        }
    }
    assert!(
        typed.is_empty(),
        "figures typed by hand, which no `golow report` block on their page holds: put them in a block, or \
         remove them:\n{}",
        typed.join("\n")
    );
}

#[test]
fn the_prose_check_finds_figures_and_leaves_versions_alone() {
    let found = figures_in(
        "torch 2.11.0 and cuDNN 9.19 on driver 580.159.04: pytorch at 0.959 of libtorch, 9.8 ms against \
         1.76, 22.6% of the time, 1.45× faster, 434 readings, 4556 MiB, batch 32, 2026-11-26, a 95% interval, \
         §2.3, arXiv:2012.07163.",
    );
    assert_eq!(found, ["0.959", "9.8", "1.76", "22.6", "1.45", "4556"]);
}

fn golow_report(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_golow"))
        .current_dir(dir)
        .arg("report")
        .args(args)
        .output()
        .unwrap()
}

const SAMPLE: &str = "recordings/20261126-h200-levels-eval-b32.golow";

#[test]
fn a_report_is_the_summarys_figures_and_sessions_alike_make_one_table_with_their_range() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("summary.json");
    let replayed = Command::new(env!("CARGO_BIN_EXE_golow"))
        .current_dir(root())
        .args(["replay", "--headless", SAMPLE, "--summary-json"])
        .arg(&summary)
        .output()
        .unwrap();
    assert!(replayed.status.success());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let alone = golow_report(root(), &[SAMPLE]);
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    let alone = String::from_utf8(alone.stdout).unwrap();
    for (worker, comparison) in summary["workers"].as_array().unwrap().iter().zip(
        std::iter::once(None).chain(summary["comparisons"].as_array().unwrap().iter().map(Some)),
    ) {
        let name = worker["impl"].as_str().unwrap();
        let row = alone
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name}: {alone}"));
        let cells: Vec<&str> = row.split(" | ").collect();
        let throughput = worker["throughput_samples_per_s"].as_f64().unwrap();
        assert_eq!(cells[1], format!("{throughput:.0}"), "{row}");
        if let Some(c) = comparison {
            let interval = format!(
                "{:.3} [{:.3}, {:.3}]",
                c["ratio"].as_f64().unwrap(),
                c["low"].as_f64().unwrap(),
                c["high"].as_f64().unwrap()
            );
            assert_eq!(cells[2], interval, "{row}");
        }
    }
    // The same session twice is one set-up: one table whose figures are their own range.
    let copy = tmp.path().join("again.golow");
    std::fs::copy(root().join(SAMPLE), &copy).unwrap();
    let twice = golow_report(root(), &[SAMPLE, copy.to_str().unwrap()]);
    let twice = String::from_utf8(twice.stdout).unwrap();
    assert_eq!(twice.matches("| level |").count(), 1, "{twice}");
    assert!(twice.contains("2 sessions"), "{twice}");
    let libtorch = twice
        .lines()
        .find(|l| l.starts_with("| libtorch |"))
        .unwrap();
    let throughput = summary["workers"][0]["throughput_samples_per_s"]
        .as_f64()
        .unwrap();
    assert!(
        libtorch.contains(&format!(
            "{throughput:.0} ({throughput:.0}–{throughput:.0})"
        )),
        "{libtorch}"
    );
}

#[test]
fn what_is_not_a_whole_recording_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.golow"), "not a recording\n").unwrap();
    let mut damaged = std::fs::read(root().join(SAMPLE)).unwrap();
    let middle = damaged.len() / 2;
    for byte in &mut damaged[middle..middle + 64] {
        *byte ^= 0x5a;
    }
    std::fs::write(tmp.path().join("damaged.golow"), damaged).unwrap();
    let fifo = tmp.path().join("fifo.golow");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (args, expected) in [
        (&["notes.golow"][..], "notes.golow"),
        (&["damaged.golow"][..], "report an undamaged recording"),
        (&["."][..], "is a directory"),
        (&["fifo.golow"][..], "fifo.golow"),
        (
            &["--kernel", "", "damaged.golow"][..],
            "--kernel needs some text",
        ),
        (&["missing.golow"][..], "missing.golow"),
    ] {
        let out = golow_report(tmp.path(), args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

//! The GPU checklist's runner (`gpu/run`, the entry point of `make gpu-bundle`), walked here by dry runs: each plan
//! fits its deadline, and a run cut off part-way, as a device command killed at its limit is, leaves its report
//! with every finished step and never more than the eight files a device brings back.

mod common;

use common::left_in;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The runner beside the real `golow`, as the bundle lays them out.
fn kit(tmp: &Path) -> PathBuf {
    let dir = tmp.join("gpu-bundle");
    std::fs::create_dir_all(&dir).unwrap();
    let runner = dir.join("run");
    if !runner.exists() {
        std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/gpu/run"), &runner).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_golow"), dir.join("golow")).unwrap();
    }
    runner
}

fn runner(tmp: &Path) -> Command {
    // Through bash, not exec: a copy just written may still be open for writing in a child another test thread
    // forked meanwhile, and exec of such a file fails with ETXTBSY.
    let mut command = Command::new("bash");
    command.arg(kit(tmp));
    // Scratch goes here, so that a run killed before its own clean-up leaves nothing elsewhere.
    command.env("TMPDIR", tmp);
    command
}

/// The steps the report's plan table lists, with their budgets.
fn planned_steps(report: &str) -> Vec<(String, String)> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("| step |"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            (
                cells[0].trim_start_matches("| ").to_string(),
                cells[1].to_string(),
            )
        })
        .collect()
}

/// A dry run of one plan into `tmp`/out: the folder and its report.
fn dry_run(tmp: &Path, plan: &str) -> (PathBuf, String) {
    let out = tmp.join("out");
    let done = runner(tmp)
        .args(["--dry-run", "--plan", plan])
        .arg(&out)
        .output()
        .unwrap();
    assert!(done.status.success(), "{plan}: {done:?}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    (out, report)
}

fn dry_report(plan: &str) -> String {
    dry_run(tempfile::tempdir().unwrap().path(), plan).1
}

/// The commands a step's section says it would run.
fn would_run<'a>(report: &'a str, step: &str) -> Vec<&'a str> {
    let section = report
        .split(&format!("\n## {step}: "))
        .nth(1)
        .unwrap_or_else(|| panic!("no section for {step}: {report}"));
    section
        .split("\n## ")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("- would run `"))
        .collect()
}

#[test]
fn each_plan_walks_its_steps_inside_its_deadline() {
    for (plan, deadline) in [
        ("first", 520),
        ("second", 190),
        ("more", 520),
        ("last", 520),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (out, report) = dry_run(tmp.path(), plan);
        let steps = planned_steps(&report);
        assert!(steps.len() >= 2, "{plan}: {report}");
        let total: u64 = steps
            .iter()
            .map(|(_, b)| b.trim_end_matches('+').parse::<u64>().unwrap())
            .sum();
        // What the runner takes to set up before its first step (9 s on an H200) is kept aside.
        let setup = 15;
        assert!(total + setup <= deadline, "{plan}: {total} s of budgets");
        assert!(
            report.contains(&format!(
                "The budgets add up to {total} s of the {deadline} s deadline, with {setup} s kept for setting up."
            )),
            "{report}"
        );
        for (step, _) in &steps {
            assert!(
                !would_run(&report, step).is_empty(),
                "{plan}: {step} names no command: {report}"
            );
        }
        assert_eq!(left_in(&out), ["logs-and-summaries.tar.gz", "report.md"]);
        assert_eq!(
            left_in(tmp.path()),
            ["gpu-bundle", "out"],
            "scratch removed"
        );
    }
}

#[test]
fn the_first_plan_measures_what_no_lease_has_with_the_scripts_loss_test_early() {
    let report = dry_report("first");
    let steps: Vec<String> = planned_steps(&report).into_iter().map(|s| s.0).collect();
    assert_eq!(steps[..2], ["probe", "script-loss"]);
    assert_eq!(steps.last().unwrap(), "figures");
    for step in [
        "levels-train",
        "levels-eval",
        "cmd-scripts",
        "overhead",
        "wheel",
        "tf32-off",
    ] {
        assert!(steps.iter().any(|s| s == step), "{step}: {steps:?}");
    }
    assert!(report.contains("first plan, deadline 520 s"), "{report}");
    assert!(
        would_run(&report, "script-loss")[0]
            .contains("--exact a_scripts_loss_on_the_gpu_is_taken_without_a_sync_and_is_its_own"),
        "{report}"
    );
    // The paper's four levels and aten, train and eval, three sessions each, every one exported for its losses.
    for (step, mode) in [("levels-train", "train"), ("levels-eval", "eval")] {
        let commands = would_run(&report, step);
        let levels = "--impl libtorch,aten,cudnn,pytorch,torchscript";
        assert!(commands[0].contains(" --repeat 3 "), "{commands:?}");
        assert!(commands[0].contains(levels), "{commands:?}");
        assert!(
            commands[0].contains(&format!("--mode {mode} ")),
            "{commands:?}"
        );
        for run in 1..=3 {
            assert!(
                commands[run].contains(&format!("-{run}.records.json")),
                "{commands:?}"
            );
        }
    }
    assert!(would_run(&report, "tf32-off")[0].contains("--tf32 off"));
    // Both scripts, under the collector (no --no-cupti), in one session.
    let scripts = would_run(&report, "cmd-scripts");
    assert!(scripts[0].contains("--cmd loop=") && scripts[0].contains("scripts/loop.py"));
    assert!(
        scripts[0].contains("--cmd lightning=")
            && scripts[0].contains("scripts/lightning_trainer.py")
    );
    assert!(!scripts[0].contains("--no-cupti"));
    // At least five pairs, each with and without the collector, the order swapped from pair to pair.
    let overhead = would_run(&report, "overhead");
    let without: Vec<bool> = overhead.iter().map(|c| c.contains("--no-cupti")).collect();
    assert!(
        without.len() >= 10 && without.len().is_multiple_of(2),
        "{overhead:?}"
    );
    let pairs: Vec<&[bool]> = without.chunks(2).collect();
    assert!(pairs.iter().all(|p| p[0] != p[1]), "{overhead:?}");
    assert!(pairs.windows(2).all(|w| w[0] != w[1]), "{overhead:?}");
    assert!(
        overhead
            .iter()
            .all(|c| c.contains("--impl libtorch --mode train"))
    );
    // The wheel, installed offline and run as installed.
    let wheel = would_run(&report, "wheel");
    assert!(
        wheel
            .iter()
            .any(|c| c.contains("pip install --no-deps --no-index") && c.contains("wheel/golow-")),
        "{wheel:?}"
    );
    assert!(
        wheel
            .iter()
            .any(|c| c.contains("wheel-env/bin/golow run --headless --device cuda")),
        "{wheel:?}"
    );
}

#[test]
fn the_second_plan_runs_compile_and_aoti_on_the_card_the_first_measured() {
    let report = dry_report("second");
    let commands = would_run(&report, "compile-aoti-eval");
    assert!(
        commands[0].contains("--impl pytorch,compile,aoti --mode eval"),
        "{commands:?}"
    );
}

#[test]
fn a_run_cut_off_part_way_keeps_the_report_of_every_finished_step() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut child = runner(tmp.path())
        .args(["--dry-run", "--pause", "1"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    // Killed as a device command at its limit is: the runner and everything it started, with no time to tidy up.
    let report = out.join("report.md");
    let began = Instant::now();
    while std::fs::read_to_string(&report)
        .map(|r| r.matches("Not measured: a dry run").count() < 2)
        .unwrap_or(true)
    {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "two steps never ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signals the process group this test started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    child.wait().unwrap();
    let report = std::fs::read_to_string(&report).unwrap();
    let finished = report.matches("Not measured: a dry run").count();
    assert!(
        (2..planned_steps(&report).len()).contains(&finished),
        "cut off part-way: {report}"
    );
    for step in ["probe", "script-loss"] {
        assert!(report.contains(&format!("\n## {step}: ")), "{report}");
    }
    assert!(!report.contains("Ended after"), "{report}");
    let files = left_in(&out);
    assert!(files.len() <= 8, "{files:?}");
    assert_eq!(files, ["logs-and-summaries.tar.gz", "report.md"]);
    // The archive is whole: written aside and moved into place after each step.
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(out.join("logs-and-summaries.tar.gz"))
        .output()
        .unwrap();
    assert!(listing.status.success(), "{listing:?}");
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("logs/probe.log"), "{listing}");
}

#[test]
fn bad_arguments_get_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    for args in [
        vec!["--plan", "third"],
        vec!["--deadline", "soon"],
        vec!["--deadline", "0"],
        vec!["--step", "nothing"],
        vec!["--pause", "-1"],
        vec!["--frobnicate"],
    ] {
        let done = runner(tmp.path())
            .arg("--dry-run")
            .args(&args)
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} wrote {out:?}");
    }
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "keep").unwrap();
    let done = runner(tmp.path())
        .arg("--dry-run")
        .arg(file.join("out"))
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
}

//! The operator breakdown with real parts: every built-in level's profiled steps, recorded by libtorch's operator
//! callbacks (the Rust levels) or torch.profiler (the Python ones), explain its compute time; `--no-ops` records
//! none.

mod common;

use common::{headless, summary_of, text, worker};

#[test]
fn every_level_breaks_its_profiled_steps_down_into_operators() {
    let tmp = tempfile::tempdir().unwrap();
    let levels = ["libtorch", "pytorch", "torchscript", "aten"];
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            &levels.join(","),
            "--model",
            "resnet18",
            "--resolution",
            "32",
            "--batch-size",
            "8",
            "--steps",
            "12",
            "--warmup",
            "1",
            "--ops-every",
            "5",
            "--no-record",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    for level in levels {
        let w = worker(&s, level);
        let ops = &w["operators"];
        // Steps 1, 6 and 11: one in five past the warm-up; the Python levels only as their 2% budget allows.
        let profiled = ops["profiled_steps"].as_u64().unwrap();
        if level == "pytorch" {
            assert!((1..=3).contains(&profiled), "{level}: {w}");
        } else {
            assert_eq!(profiled, 3, "{level}: {w}");
        }
        assert_eq!(ops["every"], 5, "{level}");
        // Self times nest: summed, they are the compute time but for what runs between operators.
        let explained = ops["explained"].as_f64().unwrap();
        assert!(
            (0.85..=1.15).contains(&explained),
            "{level}: the operators explain {explained} of the profiled compute"
        );
        let top = w["top_operators"].as_array().unwrap();
        assert!(top.len() >= 5, "{level}: {top:?}");
        let self_ms: Vec<f64> = top
            .iter()
            .map(|o| o["self_ms_per_step"].as_f64().unwrap())
            .collect();
        assert!(
            self_ms.windows(2).all(|w| w[0] >= w[1]),
            "{level}: {self_ms:?}"
        );
        // A ResNet's time goes to its convolutions, forward and backward, whatever the level.
        let names: Vec<&str> = top.iter().map(|o| o["name"].as_str().unwrap()).collect();
        assert!(
            names[..3].iter().any(|n| n.contains("convolution")),
            "{level}: {names:?}"
        );
        assert!(
            top.iter()
                .all(|o| o["calls_per_step"].as_f64().unwrap() >= 1.0),
            "{level}: {top:?}"
        );
    }
}

#[test]
fn no_ops_records_no_operators() {
    let tmp = tempfile::tempdir().unwrap();
    let out = headless(
        tmp.path(),
        &[
            "--impl",
            "libtorch,pytorch",
            "--model",
            "resnet18",
            "--resolution",
            "32",
            "--batch-size",
            "4",
            "--steps",
            "4",
            "--warmup",
            "0",
            "--no-ops",
            "--no-record",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = summary_of(tmp.path());
    for level in ["libtorch", "pytorch"] {
        let w = worker(&s, level);
        assert!(w.get("operators").is_none(), "{level}: {w}");
        assert!(w.get("top_operators").is_none(), "{level}: {w}");
    }
}

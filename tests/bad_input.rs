//! Every bad input gets one clear line on stderr, exit code 2, no panic, and leaves nothing behind.

mod common;

use std::path::Path;

use common::{golow, headless, idx_file, text};

/// Runs `golow run --headless ARGS --summary-json` in a fresh directory and checks the contract.
fn rejects(args: &[&str], expected: &str) {
    let tmp = tempfile::tempdir().unwrap();
    rejects_in(tmp.path(), args, expected);
}

/// `rejects`, in `tmp`, which may hold files the arguments name.
fn rejects_in(tmp: &Path, args: &[&str], expected: &str) {
    rejects_command(tmp, headless(tmp, args), args, expected);
}

/// `rejects`, with `$CXX` naming no program.
fn rejects_without_a_compiler(args: &[&str], expected: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let mut command = headless(tmp.path(), args);
    command.env("CXX", "/nonexistent/g++");
    rejects_command(tmp.path(), command, args, expected);
}

/// `rejects_in` for a command made ready (an environment of its own).
fn rejects_command(tmp: &Path, mut command: std::process::Command, args: &[&str], expected: &str) {
    let out = command.output().unwrap();
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(lines.len(), 1, "{args:?} should give one line: {stderr}");
    assert!(lines[0].starts_with("golow: "), "{stderr}");
    assert!(
        lines[0].contains(expected),
        "{args:?}: expected '{expected}' in: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.iter().all(|n| n != "summary.json"
            && n != "recordings"
            && !n.to_string_lossy().starts_with("golow-session")),
        "{args:?} left {left:?}"
    );
}

/// `rejects_in` for a golow installed at `golow` (not the build's), run in `tmp` with its TMPDIR there.
fn rejects_from(golow: &Path, tmp: &Path, args: &[&str], expected: &str) {
    let mut command = std::process::Command::new(golow);
    command
        .env("TMPDIR", tmp)
        .current_dir(tmp)
        .args(["run", "--headless"])
        .args(args);
    rejects_command(tmp, command, args, expected);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn idx(magic: u32, dims: &[u32], payload: usize) -> Vec<u8> {
    idx_file(magic, dims, &vec![0; payload])
}

#[test]
fn a_recording_is_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let existing = tmp.path().join("mine.golow");
    std::fs::write(&existing, b"precious").unwrap();
    let out = headless(tmp.path(), &["--record", &existing.display().to_string()])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("never overwrites") && stderr.lines().count() == 1,
        "{stderr}"
    );
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");
    rejects(
        &["--record", "/nonexistent/dir/x.golow"],
        "directory /nonexistent/dir does not exist",
    );
    rejects(
        &["--record", "x.golow", "--no-record"],
        "cannot be used with",
    );
}

#[test]
fn unknown_implementation_lists_the_known_ones() {
    rejects(
        &["--impl", "libtorch,jax"],
        "unknown implementation 'jax' (known: pytorch, compile, torchscript, aoti, libtorch, aten, cudnn)",
    );
}

#[test]
fn non_positive_sizes_and_counts() {
    rejects(
        &["--batch-size", "0"],
        "--batch-size must be at least 1 (got 0)",
    );
    rejects(
        &["--batch-size", "-3"],
        "--batch-size must be at least 1 (got -3)",
    );
    rejects(&["--resolution", "0"], "--resolution must be at least 1");
    rejects(&["--steps", "0"], "--steps must be at least 1");
    rejects(&["--epochs", "-1"], "--epochs must be at least 1");
    rejects(&["--steps", "-5"], "--steps must be at least 1");
    rejects(
        &["--ops-every", "1"],
        "--ops-every must be at least 2: profiled steps are kept out of the timing figures (got 1;",
    );
}

#[test]
fn a_resolution_the_model_cannot_take() {
    rejects(
        &["--batch-size", "1", "--resolution", "16"],
        "ResNet cannot train at --resolution 16",
    );
    rejects(&["--resolution", "100000"], "above golow's limit");
}

#[test]
fn nothing_left_to_measure() {
    rejects(
        &["--impl", "libtorch", "--steps", "2", "--warmup", "2"],
        "nothing to measure",
    );
}

#[test]
fn unknown_flags_and_values() {
    rejects(&["--batchsize", "4"], "unexpected argument");
    rejects(&["--mode", "infer"], "invalid value 'infer'");
    rejects(&["--device", "tpu"], "unknown --device 'tpu'");
    rejects(&["--dataset", "imagenet:/data"], "imagenet");
}

#[test]
fn missing_dataset_directory() {
    rejects(
        &[
            "--impl",
            "libtorch",
            "--dataset",
            "mnist:/nonexistent/mnist",
        ],
        "/nonexistent/mnist",
    );
    rejects(
        &[
            "--impl",
            "libtorch",
            "--dataset",
            "cifar10:/nonexistent/cifar",
        ],
        "/nonexistent/cifar",
    );
}

#[test]
fn dataset_files_with_the_wrong_magic_or_truncated() {
    let data = tempfile::tempdir().unwrap();
    let mnist = data.path().join("mnist");
    write(
        &mnist,
        "train-images-idx3-ubyte",
        &idx(0x0000_0000, &[2, 28, 28], 2 * 784),
    );
    write(
        &mnist,
        "train-labels-idx1-ubyte",
        &idx(0x0000_0801, &[2], 2),
    );
    write(
        &mnist,
        "t10k-images-idx3-ubyte",
        &idx(0x0000_0803, &[2, 28, 28], 2 * 784),
    );
    write(&mnist, "t10k-labels-idx1-ubyte", &idx(0x0000_0801, &[2], 2));
    let spec = format!("mnist:{}", mnist.display());
    rejects(&["--impl", "libtorch", "--dataset", &spec], "wrong magic");

    let truncated = data.path().join("mnist-truncated");
    write(
        &truncated,
        "train-images-idx3-ubyte",
        &idx(0x0000_0803, &[2, 28, 28], 784 + 100),
    );
    write(
        &truncated,
        "train-labels-idx1-ubyte",
        &idx(0x0000_0801, &[2], 2),
    );
    write(
        &truncated,
        "t10k-images-idx3-ubyte",
        &idx(0x0000_0803, &[2, 28, 28], 2 * 784),
    );
    write(
        &truncated,
        "t10k-labels-idx1-ubyte",
        &idx(0x0000_0801, &[2], 2),
    );
    let spec = format!("mnist:{}", truncated.display());
    rejects(
        &["--impl", "libtorch", "--dataset", &spec],
        "train-images-idx3-ubyte",
    );

    let cifar = data.path().join("cifar");
    write(&cifar, "data_batch_1.bin", &vec![0u8; 3073 * 2 - 7]);
    write(&cifar, "test_batch.bin", &vec![0u8; 3073]);
    let spec = format!("cifar10:{}", cifar.display());
    rejects(
        &["--impl", "libtorch", "--dataset", &spec],
        "data_batch_1.bin",
    );

    let stl = data.path().join("stl");
    write(&stl, "train_X.bin", &vec![0u8; 27648 + 5]);
    write(&stl, "train_y.bin", &[1u8]);
    write(&stl, "test_X.bin", &vec![0u8; 27648]);
    write(&stl, "test_y.bin", &[1u8]);
    let spec = format!("stl10:{}", stl.display());
    rejects(&["--impl", "libtorch", "--dataset", &spec], "train_X.bin");
}

#[test]
fn batch_larger_than_the_dataset() {
    let data = tempfile::tempdir().unwrap();
    let cifar = data.path().join("cifar");
    let record = |label: u8| {
        let mut r = vec![label];
        r.resize(3073, 7);
        r
    };
    write(&cifar, "data_batch_1.bin", &[record(1), record(2)].concat());
    write(&cifar, "test_batch.bin", &record(3));
    let spec = format!("cifar10:{}", cifar.display());
    rejects(
        &[
            "--impl",
            "libtorch",
            "--dataset",
            &spec,
            "--batch-size",
            "4",
        ],
        "larger than the training split",
    );
}

/// Why this machine has no GPU, as golow's own check of the CUDA driver says: `Some(why)` without a driver that
/// starts, `None` when the driver reports no device. The tests of a machine without a GPU fail on a machine with one
/// rather than pass unchecked; their twins there are the `#[ignore]`d ones, run with `--ignored` on a GPU machine.
fn no_gpu_here() -> Option<String> {
    match golow::telemetry::cuda::device_count() {
        Err(why) => Some(why),
        Ok(0) => None,
        Ok(n) => panic!(
            "this test checks a machine without an NVIDIA GPU, and this one has {n}: run the #[ignore]d GPU \
             variants here (cargo test --release --test bad_input -- --ignored)"
        ),
    }
}

/// The number of GPUs of a machine with one; the `#[ignore]`d variants fail without.
fn gpus_here() -> usize {
    match golow::telemetry::cuda::device_count() {
        Ok(n) if n > 0 => n,
        other => panic!("this test needs an NVIDIA GPU: {other:?}"),
    }
}

#[test]
fn cuda_without_a_gpu() {
    let why = no_gpu_here();
    for (args, index) in [
        (&["--device", "cuda"][..], 0),
        (&["--device", "cuda:1", "--impl", "libtorch"], 1),
    ] {
        let expected = match &why {
            Some(why) => format!("no NVIDIA GPU here ({why})"),
            None => format!("this machine has 0 CUDA device(s), so cuda:{index} does not exist"),
        };
        rejects(args, &expected);
    }
}

/// The GPU machine's twin of `cuda_without_a_gpu`: a device beyond the GPUs there is refused, naming how many there
/// are.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cuda_beyond_the_gpus() {
    let n = gpus_here();
    rejects(
        &["--device", &format!("cuda:{n}"), "--impl", "libtorch"],
        &format!("this machine has {n} CUDA device(s), so cuda:{n} does not exist"),
    );
}

#[test]
fn a_python_without_torch() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python3 runs");
    assert!(made.success());
    let python = venv.join("bin/python");
    let python = python.display().to_string();
    rejects(
        &["--impl", "pytorch", "--python", &python],
        "cannot import torch",
    );
}

#[test]
fn an_unknown_export_format_names_the_known_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let out = golow(
        tmp.path(),
        &["export", "x.golow", "--format", "xml", "-o", "out.xml"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("invalid value 'xml'") && stderr.contains("chrome-trace, csv, json"),
        "{stderr}"
    );
    assert!(!tmp.path().join("out.xml").exists());
}

#[test]
fn summary_into_a_missing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = golow(
        tmp.path(),
        &[
            "run",
            "--headless",
            "--summary-json",
            "/nonexistent/dir/s.json",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("directory /nonexistent/dir does not exist"));
}

#[test]
fn malformed_commands() {
    rejects(&["--cmd", "my.job=python t.py"], "must be letters, digits");
    rejects(&["--cmd", "  "], "--cmd names no command");
    rejects(&["--cmd", "a=x", "--cmd", "a=y"], "already taken");
    rejects(
        &["--cmd", "a=x", "--schedule", "alternate"],
        "cannot take turns",
    );
}

#[test]
fn a_bad_theme_file_is_named_with_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let theme = dir.path().join("mine.toml");
    let mut text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/themes/dark.toml")).unwrap();
    text = text.replacen("muted = ", "mutted = ", 1);
    std::fs::write(&theme, &text).unwrap();
    let line = text.lines().position(|l| l.starts_with("mutted")).unwrap() + 1;
    let theme = theme.display().to_string();
    rejects(
        &["--theme", &theme],
        &format!("theme {theme}, line {line}: field colors.mutted is unknown"),
    );
    rejects(&["--theme", "solarized"], "no built-in theme of that name");
}

#[test]
fn repeats_are_counted_sessions_run_headless() {
    rejects(
        &["--repeat", "0"],
        "--repeat must be between 1 and 100 (got 0)",
    );
    rejects(&["--repeat", "101"], "--repeat must be between 1 and 100");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("x-2.golow"), b"taken").unwrap();
    rejects_in(
        tmp.path(),
        &["--repeat", "2", "--record", "x.golow"],
        "--record x-2.golow exists",
    );
    assert!(!tmp.path().join("x-1.golow").exists());
    let out = golow(tmp.path(), &["run", "--repeat", "2"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("add --headless"), "{stderr}");
}

#[test]
fn compare_takes_two_recordings_or_several_a_side() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["compare", "a.golow"],
        vec!["compare", "a.golow", "b.golow", "c.golow"],
    ] {
        let out = golow(tmp.path(), &args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let out = golow(tmp.path(), &["compare", "a.golow", "b.golow", "c.golow"]);
    assert!(
        text(&out.stderr).contains("A1 A2 … --vs B1 B2"),
        "{}",
        text(&out.stderr)
    );
    std::fs::create_dir(tmp.path().join("sweep")).unwrap();
    let out = golow(
        tmp.path(),
        &["compare", "sweep", "--vs", "b.golow", "c.golow"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("sweep is a directory"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn compare_names_workers_of_the_session() {
    rejects(
        &["--compare", "libtorch,jax"],
        "--compare names jax, which this session does not run",
    );
    rejects(&["--compare", "libtorch"], "needs two workers");
}

#[test]
fn the_live_view_needs_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let out = golow(tmp.path(), &["run", "--impl", "libtorch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("add --headless"),
        "{}",
        text(&out.stderr)
    );
}

/// torch.compile on the CPU needs the C++ compiler Inductor uses (`$CXX`, else g++), and CUDA graphs need a GPU: each
/// is said in one line before anything is prepared, not as a Python traceback from the worker.
#[test]
fn compile_without_a_cpp_compiler_or_with_cuda_graphs_on_the_cpu_says_so() {
    let args = ["--impl", "pytorch,compile", "--device", "cpu"];
    rejects_without_a_compiler(
        &args,
        "--impl compile on the CPU needs a C++ compiler: $CXX /nonexistent/g++ is not an executable here",
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut command = headless(tmp.path(), &args);
    command.env_remove("CXX").env("PATH", "/nonexistent");
    rejects_command(
        tmp.path(),
        command,
        &args,
        "Inductor's default g++ is not an executable here",
    );
    rejects(
        &[
            "--impl",
            "compile",
            "--device",
            "cpu",
            "--compile-mode",
            "reduce-overhead",
        ],
        "--compile-mode reduce-overhead records CUDA graphs, which need a GPU",
    );
}

/// An AOTInductor package only evaluates, and AOTInductor needs a C++ compiler on every device.
#[test]
fn aoti_to_train_or_without_a_cpp_compiler_says_so() {
    rejects(
        &["--impl", "pytorch,aoti", "--mode", "train"],
        "--impl aoti only evaluates (an AOTInductor package has no backward pass); use --mode eval",
    );
    rejects_without_a_compiler(
        &["--impl", "aoti", "--mode", "eval"],
        "--impl aoti needs a C++ compiler: $CXX /nonexistent/g++ is not an executable here",
    );
}

/// `--metrics-addr` that is no address, whose port is taken, or that is not this machine's: one line, before
/// anything runs.
#[test]
fn a_metrics_address_that_cannot_be_served_says_so() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    for (addr, expected) in [
        (
            "nowhere",
            "--metrics-addr 'nowhere': expected HOST:PORT or a port",
        ),
        (port.as_str(), "cannot listen: the port is in use"),
        (
            "192.0.2.1:9400",
            "--metrics-addr 192.0.2.1:9400: cannot listen: the address is not one of this machine's",
        ),
    ] {
        rejects(&["--impl", "libtorch", "--metrics-addr", addr], expected);
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = golow(
        tmp.path(),
        &["replay", "--headless", "x.golow", "--metrics-addr", "9400"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// Without an NVIDIA GPU the raw cuDNN implementation cannot run: said at once, before anything is prepared.
#[test]
fn cudnn_without_a_gpu_says_so() {
    let why = match no_gpu_here() {
        Some(why) => format!("this machine has none ({why})"),
        None => "the CUDA driver reports none".into(),
    };
    rejects(
        &["--impl", "libtorch,cudnn"],
        &format!("--impl cudnn needs an NVIDIA GPU, and {why}"),
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = golow(
        tmp.path(),
        &["sweep", "--headless", "--impl", "cudnn", "--out", "s"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!("--impl cudnn needs an NVIDIA GPU, and {why}")),
        "{}",
        text(&out.stderr)
    );
    assert!(!tmp.path().join("s").exists());
}

/// The GPU machine's twin of `cudnn_without_a_gpu_says_so`: there the cuDNN implementation is taken, but not on the
/// CPU.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cudnn_on_the_cpu_of_a_gpu_machine_says_so() {
    gpus_here();
    rejects(
        &["--impl", "libtorch,cudnn", "--device", "cpu"],
        "--impl cudnn runs only on an NVIDIA GPU, and this session's device is the CPU",
    );
}

/// A sweep's bad input: one line, exit 2, no directory made.
#[test]
fn sweep_bad_input_is_one_line() {
    for (args, expected) in [
        (
            &["--batch-sizes", "8,x"][..],
            "'x' is not a positive whole number",
        ),
        (
            &["--resolutions", "0"][..],
            "is not a positive whole number",
        ),
        (&["--resume", "--out", "nothing-here"][..], "holds no sweep"),
        (&["--steps", "0"][..], "--steps"),
        (
            &["--repeat", "0"][..],
            "--repeat 0 is not a number of sessions per cell between 1 and 20",
        ),
        (&["--repeat", "21"][..], "between 1 and 20"),
        (&["--repeat", "-3"][..], "between 1 and 20"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = golow(
            tmp.path(),
            &[&["sweep", "--headless", "--impl", "libtorch"][..], args].concat(),
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
            "{args:?} left files"
        );
    }
}

#[test]
fn live_view_and_pinning_options_out_of_range() {
    rejects(&["--fps", "0"], "--fps must be between 1 and 30 (got 0)");
    rejects(
        &["--fps", "100"],
        "--fps must be between 1 and 30 (got 100)",
    );
    rejects(
        &["--monitor-cpu", "4096"],
        "--monitor-cpu 4096: this machine has CPUs 0 to",
    );
    rejects(
        &["--monitor-cpu", "-1"],
        "--monitor-cpu -1: this machine has CPUs 0 to",
    );
}

#[test]
fn thread_counts_that_would_wrap_are_refused() {
    for threads in ["4294967296", "4294967297", "4097"] {
        rejects(
            &["--threads", threads],
            &format!("--threads must be at most 4096 (got {threads})"),
        );
    }
    rejects(&["--threads", "0"], "--threads must be at least 1 (got 0)");
}

fn c_path(path: &std::path::Path) -> std::ffi::CString {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

fn mkfifo(path: &std::path::Path) {
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c_path(path).as_ptr(), 0o600) }, 0);
}

/// In `dir`: a directory, a symlink to a file, a FIFO and (as root) a character device, each named for its kind.
fn unwritable_paths(dir: &std::path::Path) -> Vec<(std::path::PathBuf, &'static str)> {
    let target = dir.join("target.json");
    std::fs::write(&target, "precious").unwrap();
    let mut paths = vec![
        (dir.join("a-dir"), "a directory"),
        (dir.join("a-link"), "a symbolic link"),
        (dir.join("a-fifo"), "a FIFO"),
    ];
    std::fs::create_dir(&paths[0].0).unwrap();
    std::os::unix::fs::symlink(&target, &paths[1].0).unwrap();
    mkfifo(&paths[2].0);
    let device = dir.join("a-device");
    // SAFETY: mknod with a valid C string.
    let made = unsafe {
        libc::mknod(
            c_path(&device).as_ptr(),
            libc::S_IFCHR | 0o600,
            libc::makedev(1, 3),
        )
    };
    if made == 0 {
        paths.push((device, "a device"));
    }
    paths
}

fn assert_untouched(dir: &std::path::Path, paths: &[(std::path::PathBuf, &str)]) {
    assert_eq!(
        std::fs::read_to_string(dir.join("target.json")).unwrap(),
        "precious"
    );
    for (path, kind) in paths {
        let meta = std::fs::symlink_metadata(path).unwrap();
        assert!(!meta.file_type().is_file(), "{kind} was replaced by a file");
    }
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn a_summary_is_written_only_to_a_regular_file_or_a_new_path() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = unwritable_paths(tmp.path());
    for (path, kind) in &paths {
        let out = golow(
            tmp.path(),
            &[
                "run",
                "--headless",
                "--impl",
                "libtorch",
                "--summary-json",
                path.to_str().unwrap(),
            ],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{kind}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{kind}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "it is {kind}; golow writes only to a regular file"
            )),
            "{stderr}"
        );
    }
    assert_untouched(tmp.path(), &paths);
    assert!(!tmp.path().join("recordings").exists(), "a session ran");
}

/// Records a short real session (one --cmd worker) to `name` in `dir`.
fn record_a_quick_session(dir: &Path, name: &str) {
    let recorded = golow(
        dir,
        &["run", "--headless", "--cmd", "quick=true", "--record", name],
    );
    assert_eq!(
        recorded.status.code(),
        Some(0),
        "{}",
        text(&recorded.stderr)
    );
}

#[test]
fn an_export_is_written_only_to_a_regular_file_or_a_new_path() {
    let tmp = tempfile::tempdir().unwrap();
    record_a_quick_session(tmp.path(), "s.golow");
    let paths = unwritable_paths(tmp.path());
    let fresh = golow(
        tmp.path(),
        &["export", "s.golow", "--format", "json", "-o", "new.json"],
    );
    assert_eq!(fresh.status.code(), Some(0), "{}", text(&fresh.stderr));

    // Refused with and without --force: it does not make golow write through a link or into a FIFO, a device or a
    // directory.
    for force in [&[][..], &["--force"][..]] {
        for (path, kind) in &paths {
            let mut args = vec![
                "export",
                "s.golow",
                "--format",
                "json",
                "-o",
                path.to_str().unwrap(),
            ];
            args.extend(force);
            let out = golow(tmp.path(), &args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{force:?} {kind}: {stderr}");
            assert!(stderr.contains(&format!("it is {kind}")), "{stderr}");
        }
        assert_untouched(tmp.path(), &paths);
    }
}

#[test]
fn an_export_refuses_an_existing_file_unless_forced_and_replaces_it_whole() {
    let tmp = tempfile::tempdir().unwrap();
    record_a_quick_session(tmp.path(), "s.golow");
    let recording = std::fs::read(tmp.path().join("s.golow")).unwrap();
    // Not text, not JSON: whatever the file holds must come back byte for byte.
    let mine: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let existing = tmp.path().join("mine.csv");
    std::fs::write(&existing, &mine).unwrap();
    let export = |output: &str, extra: &[&str]| {
        let mut args = vec!["export", "s.golow", "--format", "json", "-o", output];
        args.extend(extra);
        golow(tmp.path(), &args)
    };
    let one_line = |out: &std::process::Output, code: i32, expected: &[&str]| {
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("golow: "), "{stderr}");
        for part in expected {
            assert!(stderr.contains(part), "expected '{part}' in: {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    let no_temporary_files = || {
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    };

    // Refused, with the file left as it was.
    one_line(
        &export("mine.csv", &[]),
        2,
        &["--output mine.csv exists", "add --force"],
    );
    assert!(
        std::fs::read(&existing).unwrap() == mine,
        "mine.csv was changed"
    );
    no_temporary_files();

    // --force with an export that fails half-way (the file size limit is hit while writing): the old file stays.
    let mut limited = common::golow_command(tmp.path());
    limited.args([
        "export", "s.golow", "--format", "json", "-o", "mine.csv", "--force",
    ]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut limited, || {
            // Past the limit a write fails with EFBIG rather than killing the process with SIGXFSZ.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 1024,
                rlim_max: 1024,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    one_line(&limited.output().unwrap(), 1, &["cannot write mine.csv"]);
    assert!(
        std::fs::read(&existing).unwrap() == mine,
        "mine.csv was changed"
    );
    no_temporary_files();

    // --force replaces it with a whole export.
    let forced = export("mine.csv", &["--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    let replaced = std::fs::read(&existing).unwrap();
    assert!(replaced.len() > 1024, "the limit above was hit half-way");
    let replaced: serde_json::Value = serde_json::from_slice(&replaced).unwrap();
    assert!(
        replaced["records"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );
    assert!(replaced["header"].is_object());
    no_temporary_files();

    // Not even --force writes over the recording being exported, however it is named.
    for output in ["s.golow", "./s.golow"] {
        one_line(
            &export(output, &["--force"]),
            2,
            &[
                "is the recording being exported",
                "never overwrites a recording",
            ],
        );
    }
    assert!(
        std::fs::read(tmp.path().join("s.golow")).unwrap() == recording,
        "the recording was changed"
    );
    no_temporary_files();
}

#[test]
fn fifos_and_devices_are_refused_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("pipe");
    mkfifo(&fifo);
    let fifo = fifo.display().to_string();
    rejects(&["--theme", &fifo], "it is a FIFO, not a regular file");
    let out = golow(tmp.path(), &["replay", "--headless", &fifo]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("it is a FIFO, not a regular file"),
        "{stderr}"
    );
    // A CIFAR-10 folder whose test batch is a FIFO, then a link to an endless device.
    let cifar = tmp.path().join("cifar");
    std::fs::create_dir(&cifar).unwrap();
    std::fs::write(cifar.join("data_batch_1.bin"), vec![0u8; 3073 * 10]).unwrap();
    let test_batch = cifar.join("test_batch.bin");
    std::fs::rename(tmp.path().join("pipe"), &test_batch).unwrap();
    let dataset = format!("cifar10:{}", cifar.display());
    rejects(&["--dataset", &dataset], "it is a FIFO, not a regular file");
    std::fs::remove_file(&test_batch).unwrap();
    std::os::unix::fs::symlink("/dev/urandom", &test_batch).unwrap();
    rejects(
        &["--dataset", &dataset],
        "it is a device, not a regular file",
    );
}

#[test]
fn a_worker_s_escape_sequences_never_reach_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    // Retitle the window, clear the screen and write the clipboard, then fail with that as the last stderr line.
    let evil = r"evil=printf '\033]0;pwned\007\033[2J\033]52;c;cHduZWQ=\007oops\n' >&2; exit 3";
    let out = headless(tmp.path(), &["--cmd", evil]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    for printed in [&out.stdout, &out.stderr] {
        let printed = text(printed);
        assert!(
            !printed.contains('\u{1b}') && !printed.contains('\u{7}'),
            "{printed:?}"
        );
    }
    let table = text(&out.stdout);
    assert!(table.contains(r"\u{1b}]0;pwned\u{7}"), "{table}");
}

/// Paths are bytes on Linux: a recording path that is not UTF-8 is taken where a path is (recorded, then replayed),
/// and where text is required (a `--cmd` command) it gets one line and exit 2, never a panic.
#[test]
fn arguments_that_are_not_utf8_are_paths_or_one_line() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let recording = tmp.path().join(OsStr::from_bytes(b"run-\xff.golow"));
    let out = headless(tmp.path(), &common::small_run("libtorch", "4"))
        .arg("--record")
        .arg(&recording)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(recording.is_file());
    let replayed = common::golow_command(tmp.path())
        .args(["replay", "--headless"])
        .arg(&recording)
        .output()
        .unwrap();
    assert_eq!(
        replayed.status.code(),
        Some(0),
        "{}",
        text(&replayed.stderr)
    );
    assert!(text(&replayed.stdout).contains("libtorch     ok"));

    let text_required = tempfile::tempdir().unwrap();
    let mut command = headless(text_required.path(), &[]);
    command.arg("--cmd").arg(OsStr::from_bytes(b"a=echo \xff"));
    rejects_command(
        text_required.path(),
        command,
        &["--cmd", "a=echo \\xff"],
        "invalid UTF-8",
    );
}

/// `--cmd` preloads golow's exec interposer, and puts the hook on PYTHONPATH: a golow installed where LD_PRELOAD
/// cannot name its library (a space in the path) refuses with one line, as does a TMPDIR that PYTHONPATH cannot carry
/// (a colon); neither starts the command.
#[test]
fn a_cmd_that_cannot_be_reached_by_preload_or_pythonpath_is_refused_before_it_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let installed = tmp.path().join("with space");
    std::fs::create_dir_all(&installed).unwrap();
    let built = Path::new(env!("CARGO_BIN_EXE_golow"));
    for file in ["golow", "libgolow_exec.so"] {
        std::fs::copy(built.with_file_name(file), installed.join(file)).unwrap();
    }
    let ran = tmp.path().join("ran");
    let cmd = format!("a=touch {}", ran.display());
    let args = ["--no-cupti", "--cmd", cmd.as_str()];
    rejects_from(
        &installed.join("golow"),
        tmp.path(),
        &args,
        "LD_PRELOAD cannot carry a path with a space or a colon",
    );
    assert!(!ran.exists());

    let tmp = tempfile::tempdir().unwrap();
    let colon = tmp.path().join("a:b");
    std::fs::create_dir_all(&colon).unwrap();
    let out = headless(tmp.path(), &args)
        .env("TMPDIR", &colon)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("golow: ")
            && stderr.contains("holds a colon, which PYTHONPATH cannot carry"),
        "{stderr}"
    );
    assert!(!ran.exists());
    assert_eq!(
        std::fs::read_dir(&colon).unwrap().count(),
        0,
        "nothing left"
    );
}

/// golow alone, as `cargo install golow` installs it: it replays, but a session (a level, a `--cmd` script, or the
/// collector a GPU run loads) is refused in one line that says what this install does and what to install to run
/// sessions.
#[test]
fn golow_installed_alone_replays_and_says_what_to_install_to_run_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let alone = tmp.path().join("bin");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_golow"), alone.join("golow")).unwrap();
    for args in [
        &["--no-cupti", "--impl", "libtorch"][..],
        &["--no-cupti", "--cmd", "a=true"],
        &["--impl", "libtorch"],
    ] {
        rejects_from(
            &alone.join("golow"),
            tmp.path(),
            args,
            "this golow replays, exports and compares recordings, but running sessions needs golow-worker",
        );
    }
    let sample = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings/20261126-h100-levels-train-b32.golow");
    let replayed = std::process::Command::new(alone.join("golow"))
        .current_dir(tmp.path())
        .args(["replay", "--headless"])
        .arg(&sample)
        .output()
        .unwrap();
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
}

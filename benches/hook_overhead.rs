//! What the step hook costs a `--cmd` script (docs/your-own-command.md), in two scripts under golow's hook reporting
//! to a real socket: ResNet-50 training at 32 px, batch 16, one thread; and a step of tens of microseconds (a small
//! MLP on 4 samples), where what watching costs shows. Whole runs differ by ±13% on this machine, far more than the
//! effect, so one run alternates: blocks of steps with the hook as golow loads it (its forward hooks on every module
//! call, the DataLoader, backward, optimiser and GradScaler wrappers) and blocks with all of it taken out (torch's own
//! functions back, no global hook), the first step of each block untimed. A run's ratio is the median step with the
//! hook over the median step without.
//!
//! ResNet-50's target: at most 1% (≤ 1.01), as the median of `GOLOW_BENCH_RUNS` runs (default 3), with their range,
//! for the hook as a `--cmd` script gets it and as `golow attach` loads it into a running process (phase `attached`:
//! blocks with the hook attached against blocks after it let go, so attaching and letting go are exercised too);
//! and the process ends as soon after its last step with the hook as without (what the hook does at exit: the last
//! run ends with it, and is set beside a run without it). The tiny step has no target: what watching it costs is
//! said (µs a step and its share) beside what the hook says it took (the median of its steps' `hook_ms`, which the
//! summary's `script.hook` and its notice past 5% come from), so the hook's own account can be checked.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::{env_or, median, spread};

const SCRIPT: &str = "\
import statistics, sys, time, torch
import torch.utils.data.dataloader as dataloader, torch.autograd as autograd, torch.optim.optimizer as optimizer
from torch.amp import grad_scaler
sys.path.insert(0, sys.argv[1])
import resnet
torch.manual_seed(0)
blocks, per_block, tiny = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == 'tiny'
if tiny:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    batch, shape = 4, (8,)
else:
    model = resnet.build('resnet50', 3, 10)
    batch, shape = 16, (3, 32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
hooked = 'golow-step-hook' in sys.modules
wrapped = [(dataloader._BaseDataLoaderIter, '__next__'), (autograd, 'backward'), (grad_scaler.GradScaler, 'step'),
           (grad_scaler.GradScaler, 'scale')]

def take_out():
    hook = sys.modules['golow-step-hook']
    for handle in hook._forward_hooks + hook._step_hooks:
        handle.remove()
    hook._forward_hooks.clear()
    hook._step_hooks.clear()
    for owner, name in wrapped:
        setattr(owner, name, getattr(owner, name).__wrapped__)

def put_back():
    hook = sys.modules['golow-step-hook']
    hook._register_forward(sys.modules['torch.nn.modules.module'])
    hook._register_steps(optimizer)
    hook._register_data(dataloader)
    hook._register_scaler(grad_scaler)

if len(sys.argv) > 5:  # as golow attach loads it: attached for a block, let go (uninstall) for the next
    import importlib.machinery
    hook_file, socket_path = sys.argv[5], sys.argv[6]

    def put_back():
        name = 'golow-step-hook'
        loader = importlib.machinery.SourceFileLoader(name, hook_file)
        hook = type(sys)(name)
        hook.__file__, hook.__loader__ = hook_file, loader
        sys.modules[name] = hook
        loader.exec_module(hook)
        assert hook.attach(socket_path)

    def take_out():
        sys.modules['golow-step-hook'].uninstall()

    put_back()
    hooked = True

n = batch * (2 * blocks * per_block + 3)
data = iter(torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(n, *shape), torch.randint(0, 10, (n,))), batch_size=batch))
times = {True: [], False: []}

def step():
    x, y = next(data)
    opt.zero_grad()
    out = model(x)
    loss = out.square().mean() if tiny else torch.nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()

for _ in range(3):
    step()
for block in range(2 * blocks):
    with_hook = hooked and block % 2 == 0
    if hooked and not with_hook:
        take_out()
    last = time.perf_counter()
    for i in range(per_block):
        step()
        now = time.perf_counter()
        if i > 0:
            times[with_hook].append((now - last) * 1e3)
        last = now
    if hooked and not with_hook:
        put_back()
print(statistics.median(times[True] or times[False]), statistics.median(times[False]), flush=True)
print(time.perf_counter(), flush=True)
";

/// The script's two kinds of step.
#[derive(Clone, Copy)]
enum Kind {
    ResNet,
    Tiny,
}

impl Kind {
    fn arg(self) -> &'static str {
        match self {
            Kind::ResNet => "resnet50",
            Kind::Tiny => "tiny",
        }
    }
}

/// How the script gets the hook: not at all, as a `--cmd` script does (golow's sitecustomize), or as `golow attach`
/// loads it into a running process (the script loads it and calls `attach`, and lets go with `uninstall`).
#[derive(Clone, Copy)]
enum Hook<'a> {
    None,
    Command(&'a Path),
    Attached(&'a Path),
}

/// One run of the script, `blocks` of `per_block` steps each way, with the hook as `hook` says, reporting to its
/// socket. Its median step with the hook and without (ms; the same without the hook at all), and how long the
/// process took to end after its last step (ms).
fn run(dir: &Path, kind: Kind, blocks: u32, per_block: u32, hook: Hook<'_>) -> (f64, f64, f64) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(root.join(".venv/bin/python"));
    command
        .arg(dir.join("train.py"))
        .arg(root.join("src/workers/pytorch"))
        .arg(blocks.to_string())
        .arg(per_block.to_string())
        .arg(kind.arg())
        .env("OMP_NUM_THREADS", "1")
        .env("MKL_NUM_THREADS", "1")
        .env_remove("PYTHONPATH")
        .env_remove("GOLOW_EVENT_SOCKET")
        .env_remove("GOLOW_OPS_EVERY");
    match hook {
        Hook::None => {}
        Hook::Command(socket) => {
            command
                .env("PYTHONPATH", root.join("src/workers/pyhook"))
                .env("GOLOW_EVENT_SOCKET", socket);
        }
        Hook::Attached(socket) => {
            command
                .arg(root.join("src/workers/pyhook/golow-hook/golow_step_hook.py"))
                .arg(socket);
        }
    }
    let out = command.output().expect("python runs");
    let ended = monotonic_s();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let numbers: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|n| n.parse().expect("a number"))
        .collect();
    let [with_ms, without_ms, last_step_s] = numbers[..] else {
        panic!("three numbers: {numbers:?}");
    };
    (with_ms, without_ms, (ended - last_step_s) * 1e3)
}

/// CLOCK_MONOTONIC in seconds, as Python's `time.perf_counter` reads it on Linux.
fn monotonic_s() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}

/// What a socket like golow's heard: its event lines, and the `hook_ms` its steps said.
#[derive(Default)]
struct Heard {
    lines: u64,
    hook_ms: Vec<f64>,
}

/// A socket like golow's that reads whatever each connection says, until the bench ends.
fn listen(path: &Path) -> Arc<Mutex<Heard>> {
    let listener = UnixListener::bind(path).expect("bind");
    let heard = Arc::new(Mutex::new(Heard::default()));
    let shared = heard.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let shared = shared.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    let hook_ms = serde_json::from_str::<serde_json::Value>(&line)
                        .ok()
                        .and_then(|event| event.pointer("/phases/hook_ms")?.as_f64());
                    let mut heard = shared.lock().unwrap();
                    heard.lines += 1;
                    heard.hook_ms.extend(hook_ms);
                }
            });
        }
    });
    heard
}

/// ResNet-50 with the hook as `hook` gives it (a `--cmd` script's, or attached and let go block by block) against
/// without it; whether the median ratio meets the target.
fn resnet(dir: &Path, hook: Hook<'_>, heard: &Mutex<Heard>, runs: u32) -> bool {
    let blocks: u32 = env_or("GOLOW_BENCH_BLOCKS", 8);
    let per_block: u32 = env_or("GOLOW_BENCH_BLOCK_STEPS", 4);
    let how = match hook {
        Hook::Attached(_) => "attached as golow attach loads it and let go, block by block",
        _ => "the hook as a --cmd script gets it",
    };
    println!(
        "ResNet-50 train, 32 px, batch 16, 1 thread, {how}; {runs} runs of {blocks} blocks of {per_block} steps each \
         way, alternating (the first step of a block untimed)"
    );
    let (mut ratios, mut exit_with, mut exit_without) = (Vec::new(), Vec::new(), Vec::new());
    let started = Instant::now();
    for r in 0..runs {
        let (with_ms, without_ms, exit_ms) = run(dir, Kind::ResNet, blocks, per_block, hook);
        let (_, _, plain_exit_ms) = run(dir, Kind::ResNet, 1, 2, Hook::None);
        println!(
            "  run {}: with the hook {with_ms:.2} ms a step, without {without_ms:.2} ms: {:.4}; \
             last step to exit {exit_ms:.0} ms (without the hook at all {plain_exit_ms:.0} ms)",
            r + 1,
            with_ms / without_ms
        );
        ratios.push(with_ms / without_ms);
        exit_with.push(exit_ms);
        exit_without.push(plain_exit_ms);
    }
    let (low, high) = spread(&ratios);
    let ratio = median(&mut ratios);
    println!(
        "ratio {ratio:.4} ({low:.4}–{high:.4}); from the last step to the process's end {:.0} ms with the hook, \
         {:.0} ms without (medians); {} event lines received; {:.0} s",
        median(&mut exit_with),
        median(&mut exit_without),
        heard.lock().unwrap().lines,
        started.elapsed().as_secs_f64()
    );
    let meets = ratio <= 1.01;
    println!(
        "{} the target of ≤ 1%",
        if meets { "meets" } else { "misses" }
    );
    meets
}

fn tiny(dir: &Path, socket: &Path, heard: &Mutex<Heard>, runs: u32) {
    let blocks: u32 = env_or("GOLOW_BENCH_TINY_BLOCKS", 20);
    let per_block: u32 = env_or("GOLOW_BENCH_TINY_BLOCK_STEPS", 100);
    println!(
        "A tiny step (an MLP of 8-16-1 on 4 samples, SGD), 1 thread; {runs} runs of {blocks} blocks of {per_block} \
         steps each way, alternating"
    );
    heard.lock().unwrap().hook_ms.clear();
    let (mut costs_us, mut shares, mut said_us) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        let (with_ms, without_ms, _) =
            run(dir, Kind::Tiny, blocks, per_block, Hook::Command(socket));
        let said_ms = median(&mut std::mem::take(&mut heard.lock().unwrap().hook_ms));
        println!(
            "  run {}: with the hook {:.1} µs a step, without {:.1} µs: +{:.1} µs ({:.0}%); the hook says it took \
             {:.1} µs",
            r + 1,
            with_ms * 1e3,
            without_ms * 1e3,
            (with_ms - without_ms) * 1e3,
            (with_ms / without_ms - 1.0) * 100.0,
            said_ms * 1e3
        );
        costs_us.push((with_ms - without_ms) * 1e3);
        shares.push(with_ms / without_ms - 1.0);
        said_us.push(said_ms * 1e3);
    }
    let (low, high) = spread(&costs_us);
    let (said_low, said_high) = spread(&said_us);
    println!(
        "watching a tiny step costs {:.1} µs ({low:.1}–{high:.1}), {:.0}% of it; the hook says {:.1} µs \
         ({said_low:.1}–{said_high:.1}) (medians of runs, their range)",
        median(&mut costs_us),
        median(&mut shares) * 100.0,
        median(&mut said_us)
    );
}

fn main() {
    let runs: u32 = env_or("GOLOW_BENCH_RUNS", 3);
    let dir = tempfile::tempdir().expect("a directory");
    std::fs::write(dir.path().join("train.py"), SCRIPT).expect("the script");
    let socket = dir.path().join("events.sock");
    let heard = listen(&socket);
    let phases = std::env::var("GOLOW_BENCH_PHASES").unwrap_or("tiny,resnet,attached".into());
    let mut meets = true;
    for phase in phases.split(',') {
        match phase {
            "tiny" => tiny(dir.path(), &socket, &heard, runs),
            "resnet" => meets &= resnet(dir.path(), Hook::Command(&socket), &heard, runs),
            "attached" => meets &= resnet(dir.path(), Hook::Attached(&socket), &heard, runs),
            other => panic!("GOLOW_BENCH_PHASES: no phase {other} (tiny, resnet, attached)"),
        }
    }
    if !meets {
        std::process::exit(1);
    }
}

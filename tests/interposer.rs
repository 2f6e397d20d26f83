//! golow's exec interposer in a real `--cmd` session, where it must not hurt the user's job: it grows nothing in the
//! process that starts programs, however many it starts; it puts nothing on PYTHONPATH but the hook; and a program
//! whose environment leaves no room for golow's additions still runs, unmeasured, and says so.

mod common;

use std::path::Path;
use std::process::Command;

use common::{headless_succeeds, text, with_venv_path};

fn write(dir: &Path, name: &str, source: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, source).unwrap();
}

/// What the script printed after `label` (its output reaches golow's stderr after its worker's name).
fn printed<'a>(stderr: &'a str, label: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter_map(|line| line.split_once(label).map(|(_, rest)| rest.trim()))
        .collect()
}

/// Starts programs in each way a python does, and prints, for each, its resident memory (KiB) and its number of
/// mappings after the first 100 starts and after all of them.
const STARTS: &str = r#"
import os, subprocess, threading, time

def resident_kib():
    with open('/proc/self/status') as status:
        return next(int(line.split()[1]) for line in status if line.startswith('VmRSS:'))

def mappings():
    with open('/proc/self/maps') as maps:
        return sum(1 for _ in maps)

small = {'PATH': '/usr/bin:/bin'}
large = dict(small, **{f'VARIABLE_{i}': 'x' * 8 for i in range(2000)})

def run(env):
    subprocess.run(['/bin/true'], env=env, check=True)

def spawn(env):
    pid = os.posix_spawn('/bin/true', ['/bin/true'], env)
    assert os.waitpid(pid, 0)[1] == 0

def threads():
    return len(os.listdir('/proc/self/task'))

def in_a_thread_of_its_own(env):
    alone = threads()
    thread = threading.Thread(target=run, args=(env,))
    thread.start()
    thread.join()
    # join returns once the thread's Python code is done, a moment before its system thread has gone: on a busy
    # machine the next one would start beside it, with a stack and a malloc arena of its own.
    while threads() > alone:
        time.sleep(0.001)

for name, start, env, count in [
    ('subprocess', run, small, 10_000),
    ('subprocess-large-environment', run, large, 3_000),
    ('posix_spawn-large-environment', spawn, large, 2_000),
    ('threads-large-environment', in_a_thread_of_its_own, large, 500),
]:
    for i in range(count):
        start(env)
        if i == 99:
            first = resident_kib(), mappings()
    print('STARTS', name, *first, resident_kib(), mappings(), flush=True)
"#;

#[test]
fn starting_thousands_of_programs_grows_nothing_in_the_process_that_starts_them() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "starts.py", STARTS);
    let out = headless_succeeds(tmp.path(), &["--cmd", "starts=python starts.py"]);
    let stderr = text(&out.stderr);
    let lines = printed(&stderr, "STARTS ");
    assert_eq!(lines.len(), 4, "{stderr}");
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, numbers @ ..] = fields.as_slice() else {
            panic!("{line}")
        };
        let [rss_first, maps_first, rss_last, maps_last] = numbers
            .iter()
            .map(|n| n.parse::<i64>().unwrap())
            .collect::<Vec<_>>()[..]
        else {
            panic!("{line}")
        };
        // What each start leaked was at least a page: 40 MB over these starts. Python's own allocator moves a
        // little.
        assert!(
            rss_last - rss_first < 2048,
            "{name}: resident memory grew from {rss_first} KiB to {rss_last} KiB"
        );
        assert!(
            maps_last - maps_first <= 2,
            "{name}: mappings went from {maps_first} to {maps_last}"
        );
    }
}

/// Run from another directory, which holds a `random.py` of its own that is not the standard library's.
const SEARCH_PATH: &str = "\
import json, sys
print('SYS_PATH', json.dumps(sys.path), flush=True)
import random
random.Random
import torch
print('IMPORTED', flush=True)
";

#[test]
fn an_empty_pythonpath_puts_the_hook_and_nothing_else_before_the_standard_library() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "random.py",
        "SHADOW = 'not the standard library'\n",
    );
    write(tmp.path(), "app/train.py", SEARCH_PATH);
    let command = "PYTHONPATH= python app/train.py";
    let plain = with_venv_path(Command::new("/bin/sh").args(["-c", command]))
        .current_dir(tmp.path())
        .env_remove("PYTHONPATH")
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let plain_stdout = text(&plain.stdout);
    let without: Vec<String> =
        serde_json::from_str(printed(&plain_stdout, "SYS_PATH ")[0]).unwrap();

    let out = headless_succeeds(tmp.path(), &["--cmd", &format!("path={command}")]);
    let stderr = text(&out.stderr);
    assert_eq!(printed(&stderr, "IMPORTED").len(), 1, "{stderr}");
    let with: Vec<String> = serde_json::from_str(printed(&stderr, "SYS_PATH ")[0]).unwrap();
    let added: Vec<&String> = with.iter().filter(|e| !without.contains(e)).collect();
    // Before the standard library the hook's directory alone; golow's API after everything of the user's.
    assert_eq!(added.len(), 2, "{with:?}");
    let cwd = tmp.path().canonicalize().unwrap();
    assert!(
        !added[0].is_empty() && Path::new(added[0]).canonicalize().ok() != Some(cwd),
        "{with:?}"
    );
    assert_eq!(
        (added[1], with.last()),
        (
            &Path::new(added[0]).join("golow-api").display().to_string(),
            Some(added[1])
        ),
        "{with:?}"
    );
    let kept: Vec<&String> = with.iter().filter(|e| without.contains(e)).collect();
    assert_eq!(kept, without.iter().collect::<Vec<_>>(), "in their order");
}

/// What `/bin/echo ran` is started with: `bytes` of padding in variables short enough for Linux (at most
/// `MAX_ARG_STRLEN`, 128 KiB, a string). The script below makes the same.
fn padding(bytes: usize) -> Vec<(String, String)> {
    (0..bytes.div_ceil(100_000))
        .map(|i| {
            let len = (bytes - i * 100_000).min(100_000);
            (format!("PAD{i}"), "x".repeat(len))
        })
        .collect()
}

fn echo_runs_with(bytes: usize) -> bool {
    Command::new("/bin/echo")
        .arg("ran")
        .env_clear()
        .envs(padding(bytes))
        .output()
        .is_ok_and(|out| out.status.success())
}

/// The most padding with which `/bin/echo ran` still starts: one byte more and Linux refuses it (E2BIG).
fn most_padding() -> usize {
    let (mut fits, mut too_much) = (0, 8 << 20);
    assert!(echo_runs_with(fits) && !echo_runs_with(too_much));
    while too_much - fits > 1 {
        let middle = (fits + too_much) / 2;
        if echo_runs_with(middle) {
            fits = middle;
        } else {
            too_much = middle;
        }
    }
    fits
}

/// Starts `/bin/echo ran` with the padding its argument says, from a vfork child, with posix_spawn and in its own
/// place.
const NO_ROOM: &str = "\
import os, subprocess, sys
bytes = int(sys.argv[1])
env = {f'PAD{i}': 'x' * min(bytes - i * 100_000, 100_000) for i in range((bytes + 99_999) // 100_000)}
subprocess.run(['/bin/echo', 'ran'], env=env, check=True)
assert os.waitpid(os.posix_spawn('/bin/echo', ['/bin/echo', 'ran'], env), 0)[1] == 0
os.execve('/bin/echo', ['/bin/echo', 'ran'], env)
";

#[test]
fn a_program_whose_environment_leaves_no_room_for_golows_additions_runs_unmeasured_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "no_room.py", NO_ROOM);
    let bytes = most_padding();
    let out = headless_succeeds(
        tmp.path(),
        &["--cmd", &format!("full=python no_room.py {bytes}")],
    );
    let stderr = text(&out.stderr);
    let ran = stderr
        .lines()
        .filter(|line| line.trim_end() == "full | ran");
    assert_eq!(ran.count(), 3, "{stderr}");
    assert_eq!(
        stderr
            .matches(
                "full | golow: /bin/echo is not measured: its environment leaves no room for golow's \
                 additions (E2BIG)"
            )
            .count(),
        3,
        "once for each start: {stderr}"
    );
}

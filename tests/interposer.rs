//! golow's exec interposer in a real `--cmd` session, where it must not hurt the user's job: it puts nothing on
//! PYTHONPATH but the hook.

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
    assert_eq!(added.len(), 1, "the hook's directory alone: {with:?}");
    let cwd = tmp.path().canonicalize().unwrap();
    assert!(
        !added[0].is_empty() && Path::new(added[0]).canonicalize().ok() != Some(cwd),
        "{with:?}"
    );
    let kept: Vec<&String> = with.iter().filter(|e| without.contains(e)).collect();
    assert_eq!(kept, without.iter().collect::<Vec<_>>(), "in their order");
}

//! Stamps the monitor with the commit it was built from (`GOLOW_COMMIT`), which every recording's header carries
//! (`golow_commit`): `git rev-parse HEAD`, with `-dirty` when the working tree held uncommitted changes, or `unknown`
//! when the sources are not a git checkout of their own (a crate from crates.io, an sdist).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let commit = commit_of(&manifest).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=GOLOW_COMMIT={commit}");
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The checkout's commit, when `dir` is the top of a git working tree: a package cargo unpacked under a checkout's
/// `target/` is inside that checkout's tree, not its own.
fn commit_of(dir: &Path) -> Option<String> {
    let top = PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let head = git(dir, &["rev-parse", "HEAD"])?;
    rerun_when_it_changes(dir);
    // Without optional locks, `git status` leaves the index as it found it: rewritten, the index would run this
    // script again on every build.
    let status = [
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
    ];
    let dirty = !git(dir, &status)?.is_empty();
    Some(if dirty { format!("{head}-dirty") } else { head })
}

/// What moves the commit or dirties the tree: HEAD, the branch it names, the index, and the monitor's own sources
/// (a change elsewhere in the workspace does not rebuild the monitor, so it cannot restamp it).
fn rerun_when_it_changes(dir: &Path) {
    let mut watched = vec!["HEAD".to_string(), "index".into(), "packed-refs".into()];
    watched.extend(git(dir, &["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        // A path that does not exist (no packed-refs yet, a branch only packed) would make every build rerun it.
        let path = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", &name],
        );
        if let Some(path) = path.filter(|p| Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    for own in ["src", "build.rs", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", dir.join(own).display());
    }
}

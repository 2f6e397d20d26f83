//! Which Python runs the Python-side work, and whether it has the torch golow is built for.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The torch release every implementation must use (tch 0.24 is built against it).
pub const TORCH_RELEASE: &str = "2.11";

/// `--python`, else $GOLOW_PYTHON, else the python of the environment golow is installed into (beside it in `bin/`),
/// else the venv `make build` created when this golow runs from that build, else `python3` on PATH.
pub fn resolve(flag: Option<PathBuf>) -> PathBuf {
    if let Some(p) = flag {
        return p;
    }
    if let Some(p) = std::env::var_os("GOLOW_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let golow_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    if let Some(dir) = &golow_dir
        && let Some(beside) = ["python3", "python"]
            .into_iter()
            .map(|name| dir.join(name))
            .find(|python| python.is_file())
    {
        return beside;
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = checkout.join(".venv/bin/python");
    if golow_dir.is_some_and(|dir| dir.starts_with(checkout)) && venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// The torch a python imports.
#[derive(Debug, Clone)]
pub struct Torch {
    pub version: String,
    /// Its shared libraries (`torch/lib`).
    pub lib: PathBuf,
}

/// The torch `python` imports, or one line saying why it is not usable.
pub fn torch(python: &Path) -> Result<Torch, String> {
    let output = Command::new(python)
        .args([
            "-c",
            "import os, torch; print(torch.__version__); print(os.path.join(os.path.dirname(torch.__file__), 'lib'))",
        ])
        .output()
        .map_err(|e| {
            format!(
                "cannot run python {}: {e} (pass --python PATH or set GOLOW_PYTHON)",
                python.display()
            )
        })?;
    if !output.status.success() {
        let last = super::last_stderr_line(&output);
        return Err(format!(
            "python {} cannot import torch ({last}); install torch {TORCH_RELEASE} there, or pass --python PATH to a \
             python that has it",
            python.display()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    match (lines.next(), lines.next()) {
        (Some(version), Some(lib)) => Ok(Torch {
            version: version.trim().to_string(),
            lib: PathBuf::from(lib.trim()),
        }),
        _ => Err(format!(
            "python {} did not say where its torch is (it printed {:?})",
            python.display(),
            stdout.trim()
        )),
    }
}

/// Checks that `python` has torch 2.11.x, which the levels need.
pub fn check(python: &Path) -> Result<Torch, String> {
    supported(python, torch(python)?)
}

/// `torch`, the one `python` imports, when the levels can run with it; else one line on which torch they need.
pub fn supported(python: &Path, torch: Torch) -> Result<Torch, String> {
    if !is_supported_release(&torch.version) {
        return Err(format!(
            "the levels (--impl) need torch {TORCH_RELEASE}, and python {} has torch {}: golow-worker is built against \
             torch {TORCH_RELEASE}'s libraries and writes every level's initial weights (--cmd runs with any torch); \
             install torch {TORCH_RELEASE} (pip install torch=={TORCH_RELEASE}.0) or pass --python PATH",
            python.display(),
            torch.version
        ));
    }
    Ok(torch)
}

/// True for torch 2.11.x, whatever its build tag (`2.11.0+cu130`, `2.11.1`).
fn is_supported_release(version: &str) -> bool {
    let release: Vec<&str> = version.split(['.', '+']).take(2).collect();
    release.join(".") == TORCH_RELEASE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_torch_2_11_is_accepted() {
        assert!(is_supported_release("2.11.0+cu130"));
        assert!(is_supported_release("2.11.1"));
        assert!(!is_supported_release("2.1.0"));
        assert!(!is_supported_release("2.5.0+cpu"));
        assert!(!is_supported_release("2.110"));
        assert!(!is_supported_release(""));
    }
}

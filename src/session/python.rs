//! Which Python runs the Python-side work, and whether it has the torch golow is built for.

use std::path::PathBuf;
use std::process::Command;

/// The torch release every implementation must use (tch 0.24 is built against it).
pub const TORCH_RELEASE: &str = "2.11";

/// `--python`, else $GOLOW_PYTHON, else the venv `make build` created, else `python3` on PATH.
pub fn resolve(flag: Option<PathBuf>) -> PathBuf {
    if let Some(p) = flag {
        return p;
    }
    if let Some(p) = std::env::var_os("GOLOW_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python"));
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// The torch version `python` imports, or one line saying why it is not usable.
pub fn torch_version(python: &std::path::Path) -> Result<String, String> {
    let output = Command::new(python)
        .args(["-c", "import torch; print(torch.__version__)"])
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
            "python {} cannot import torch ({last}); run `make build` or pass --python PATH to a python with torch {TORCH_RELEASE}",
            python.display()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Checks that `python` has torch 2.11.x; returns its exact version.
pub fn check(python: &std::path::Path) -> Result<String, String> {
    let version = torch_version(python)?;
    if !is_supported_release(&version) {
        return Err(format!(
            "python {} has torch {version}; golow needs torch {TORCH_RELEASE} (run `make build`, or pass --python PATH)",
            python.display()
        ));
    }
    Ok(version)
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

//! Where golow finds the other programs a session runs: `golow-worker`, the CUPTI collector library, the operator
//! recorder the Python levels load and the exec interposer of `--cmd` workers, all installed next to the `golow`
//! executable.

use std::path::PathBuf;

const WORKER_FILE: &str = "golow-worker";
const COLLECTOR_FILE: &str = "libgolow_cupti.so";
const OPS_LIBRARY_FILE: &str = "libgolow_ops.so";
const INTERPOSER_FILE: &str = "libgolow_exec.so";

fn beside_golow(file: &str) -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the golow executable: {e}"))?;
    Ok(exe.with_file_name(file))
}

/// `golow-worker`, the Rust workers.
pub fn worker() -> Result<PathBuf, String> {
    let worker = beside_golow(WORKER_FILE)?;
    if !worker.is_file() {
        return Err(format!(
            "{} is missing: golow-worker must sit next to golow (run `make build`)",
            worker.display()
        ));
    }
    Ok(worker)
}

/// A library golow needs beside itself, or `what_to_do` about its absence.
fn library(file: &str, what_to_do: &str) -> Result<PathBuf, String> {
    let library = beside_golow(file)?;
    if library.is_file() {
        Ok(library)
    } else {
        Err(format!("{} not found: {what_to_do}", library.display()))
    }
}

/// The collector library CUDA loads into every worker.
pub fn collector() -> Result<PathBuf, String> {
    library(
        COLLECTOR_FILE,
        "build it with `cargo build --release` (or pass --no-cupti)",
    )
}

/// The exec interposer preloaded into `--cmd` workers, which keeps the step hook within reach of every python they
/// start.
pub fn interposer() -> Result<PathBuf, String> {
    let library = library(
        INTERPOSER_FILE,
        "--cmd needs it beside golow (run `make build`)",
    )?;
    // The dynamic loader splits LD_PRELOAD at spaces and colons: no such path can be preloaded.
    if library.to_string_lossy().contains([' ', ':']) {
        return Err(format!(
            "{}: LD_PRELOAD cannot carry a path with a space or a colon, so --cmd cannot run from here; install \
             golow in a directory without them",
            library.display()
        ));
    }
    Ok(library)
}

/// The library of libtorch's operator callbacks the Python levels record their operators with, where it was built
/// (`cargo build --release`); without it they fall back to torch.profiler, which costs more.
pub fn ops_library() -> Option<PathBuf> {
    beside_golow(OPS_LIBRARY_FILE)
        .ok()
        .filter(|library| library.is_file())
}

/// The C++ compiler Inductor compiles the `compile` level's CPU kernels with: `$CXX`, else `g++` (torch's own
/// choice, `torch._inductor.config.cpp.cxx`), found as Inductor finds it: a path, or a name on PATH.
pub fn cpp_compiler() -> Result<PathBuf, String> {
    let named = std::env::var_os("CXX").filter(|c| !c.is_empty());
    let (name, from) = match &named {
        Some(cxx) => (PathBuf::from(cxx), "$CXX"),
        None => (PathBuf::from("g++"), "Inductor's default"),
    };
    let found = if name.components().count() > 1 {
        is_executable(&name).then(|| name.clone())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(&name))
                .find(|candidate| is_executable(candidate))
        })
    };
    found.ok_or_else(|| {
        format!(
            "{from} {} is not an executable here; install g++ (apt-get install g++) or point CXX at a C++ compiler",
            name.display()
        )
    })
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

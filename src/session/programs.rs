//! Where golow finds the other programs a session runs: `golow-worker`, the CUPTI collector library, the operator
//! recorder the Python levels load and the exec interposer of `--cmd` workers. A build keeps them next to the `golow`
//! executable; an install (the wheel) keeps them in `lib/golow/` beside the `bin/` that holds `golow`, as Unix
//! programs keep their helpers.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::python::{TORCH_RELEASE, Torch};

const WORKER_FILE: &str = "golow-worker";
const COLLECTOR_FILE: &str = "libgolow_cupti.so";
const OPS_LIBRARY_FILE: &str = "libgolow_ops.so";
const INTERPOSER_FILE: &str = "libgolow_exec.so";

/// Where an installed golow's helpers are, from the directory that holds `golow`.
const INSTALLED_HELPERS: &str = "../lib/golow";

/// The libraries of torch that golow-worker is linked against (its ELF `NEEDED` entries; `make wheel-check` holds
/// the list to the binary).
pub const WORKER_TORCH_LIBRARIES: [&str; 4] = [
    "libtorch.so",
    "libtorch_cpu.so",
    "libtorch_cuda.so",
    "libc10.so",
];

/// Said where a helper is missing: golow without them replays, exports and compares, and nothing more.
const INSTALL_TO_RUN: &str = "this golow replays, exports and compares recordings, but running sessions needs \
                              golow-worker and its libraries beside it: install the wheel (`make wheel`, then `pip \
                              install target/wheels/golow-*.whl`) or build the repository (`make build`)";

fn golow_dir() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the golow executable: {e}"))?;
    Ok(exe.parent().map_or_else(PathBuf::new, Path::to_path_buf))
}

/// Where golow keeps `file`: beside itself (a build) or in the installed layout, whichever holds it; `None` when
/// neither does.
fn helper(file: &str) -> Result<Option<Helper>, String> {
    Ok(find(&golow_dir()?, file))
}

/// `file` beside `golow_dir`, else in the installed layout from it.
fn find(golow_dir: &Path, file: &str) -> Option<Helper> {
    let beside = golow_dir.join(file);
    if beside.is_file() {
        return Some(Helper {
            path: beside,
            installed: false,
        });
    }
    let installed = golow_dir.join(INSTALLED_HELPERS).join(file);
    installed.is_file().then(|| Helper {
        path: normalise(&installed),
        installed: true,
    })
}

#[derive(Debug, PartialEq)]
struct Helper {
    path: PathBuf,
    /// In the installed layout: built elsewhere, so it names no library directory of this machine.
    installed: bool,
}

/// `dir/../lib/golow/file` without the `..`, for the messages and for LD_PRELOAD.
fn normalise(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `golow-worker`, the Rust workers.
pub fn worker() -> Result<WorkerProgram, String> {
    match helper(WORKER_FILE)? {
        Some(found) => Ok(WorkerProgram {
            path: found.path,
            finds_torch_itself: !found.installed,
            env: Vec::new(),
        }),
        None => Err(format!("golow-worker is missing: {INSTALL_TO_RUN}")),
    }
}

/// `golow-worker` and what its process needs to find torch's libraries.
#[derive(Debug, Clone)]
pub struct WorkerProgram {
    pub path: PathBuf,
    /// A build's worker names the libtorch it was linked with (its RUNPATH); an installed one, built elsewhere, is
    /// pointed at the torch of the python golow runs ([`WorkerProgram::use_torch`]).
    pub finds_torch_itself: bool,
    pub env: Vec<(String, String)>,
}

impl WorkerProgram {
    /// Points the worker at `torch`'s libraries, or says in one line which of them that torch lacks.
    pub fn use_torch(&mut self, torch: &Torch) -> Result<(), String> {
        if self.finds_torch_itself {
            return Ok(());
        }
        if let Some(missing) = WORKER_TORCH_LIBRARIES
            .into_iter()
            .find(|library| !torch.lib.join(library).is_file())
        {
            return Err(format!(
                "golow-worker needs torch {TORCH_RELEASE} with CUDA (PyPI's default wheel), and torch {} has no \
                 {missing} in {}; install it with `pip install torch=={TORCH_RELEASE}.0` (--cmd runs with any torch)",
                torch.version,
                torch.lib.display()
            ));
        }
        let mut path = torch.lib.display().to_string();
        if let Some(existing) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
            path.push(':');
            path.push_str(&existing.to_string_lossy());
        }
        self.env = vec![("LD_LIBRARY_PATH".into(), path)];
        Ok(())
    }

    /// A command that runs the worker with `args`.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut command = Command::new(&self.path);
        command.args(args).envs(self.env.iter().cloned());
        command
    }
}

/// A library golow needs, or `what_to_do` about its absence.
fn library(file: &str, what_to_do: &str) -> Result<PathBuf, String> {
    match helper(file)? {
        Some(found) => Ok(found.path),
        None => Err(format!("{file} not found: {what_to_do}")),
    }
}

/// The collector library CUDA loads into every worker.
pub fn collector() -> Result<PathBuf, String> {
    library(
        COLLECTOR_FILE,
        &format!("pass --no-cupti, or: {INSTALL_TO_RUN}"),
    )
}

/// The exec interposer preloaded into `--cmd` workers, which keeps the step hook within reach of every python they
/// start.
pub fn interposer() -> Result<PathBuf, String> {
    let library = library(
        INTERPOSER_FILE,
        &format!("--cmd needs it: {INSTALL_TO_RUN}"),
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
    helper(OPS_LIBRARY_FILE)
        .ok()
        .flatten()
        .map(|found| found.path)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_is_found_beside_golow_first_then_in_the_installed_layout() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        let lib = root.path().join("lib/golow");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        assert_eq!(find(&bin, WORKER_FILE), None);

        std::fs::write(lib.join(WORKER_FILE), "").unwrap();
        let installed = find(&bin, WORKER_FILE).unwrap();
        assert!(installed.installed);
        assert_eq!(
            installed.path,
            std::fs::canonicalize(lib.join(WORKER_FILE)).unwrap(),
            "named without the `..`"
        );

        std::fs::write(bin.join(WORKER_FILE), "").unwrap();
        assert_eq!(
            find(&bin, WORKER_FILE),
            Some(Helper {
                path: bin.join(WORKER_FILE),
                installed: false
            })
        );
    }

    #[test]
    fn an_installed_worker_is_pointed_at_torch_or_told_what_that_torch_lacks() {
        let torch_lib = tempfile::tempdir().unwrap();
        let torch = Torch {
            version: "2.11.0+cpu".into(),
            lib: torch_lib.path().to_path_buf(),
        };
        for library in WORKER_TORCH_LIBRARIES {
            if library != "libtorch_cuda.so" {
                std::fs::write(torch_lib.path().join(library), "").unwrap();
            }
        }
        let mut worker = WorkerProgram {
            path: "golow-worker".into(),
            finds_torch_itself: false,
            env: Vec::new(),
        };
        let why = worker.use_torch(&torch).unwrap_err();
        assert!(
            why.contains("libtorch_cuda.so") && why.contains("2.11.0+cpu") && !why.contains('\n'),
            "{why}"
        );
        assert!(worker.env.is_empty());

        std::fs::write(torch_lib.path().join("libtorch_cuda.so"), "").unwrap();
        worker.use_torch(&torch).unwrap();
        let (name, value) = &worker.env[0];
        assert_eq!(name, "LD_LIBRARY_PATH");
        assert!(
            value.starts_with(&torch_lib.path().display().to_string()),
            "{value}"
        );

        let mut built = WorkerProgram {
            finds_torch_itself: true,
            ..worker
        };
        built.env.clear();
        built.use_torch(&torch).unwrap();
        assert!(
            built.env.is_empty(),
            "a build's worker keeps its own RUNPATH"
        );
    }
}

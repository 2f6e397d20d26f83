//! Which CPython a process runs, and where its C API lies, from the files it maps: its executable (Debian's
//! python exports the API itself) or the libpython3.* it loaded (pyenv, conda, python.org builds), and libc.

use std::os::unix::fs::FileExt;

use super::permission::Access;
use super::process::{Mapped, Process};
use super::symbols::{Exports, Kind, Unreadable};
use super::{PythonVersion, Refusal, one_line};

/// The oldest and the newest CPython golow loads its hook into this way.
const OLDEST: PythonVersion = PythonVersion { major: 3, minor: 8 };
const NEWEST: PythonVersion = PythonVersion {
    major: 3,
    minor: 13,
};

const ADD_PENDING_CALL: &str = "Py_AddPendingCall";
const RUN_SIMPLE_STRING: &str = "PyRun_SimpleString";
/// `Py_Version`: the version as `PY_VERSION_HEX`, exported from 3.11 on.
const VERSION_DATA: &str = "Py_Version";
/// Functions each release added, newest first, which date a CPython that has no `Py_Version`.
const ADDED_IN: [(&str, u8); 4] = [
    ("PyModule_AddObjectRef", 10),
    ("PyObject_CallNoArgs", 9),
    ("PyVectorcall_Call", 8),
    ("PyContext_New", 7),
];
/// Python 2's string type, gone from Python 3.
const PYTHON_2: &str = "PyString_FromString";

/// The addresses gdb calls in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Api {
    pub mmap: u64,
    pub add_pending_call: u64,
    pub run_simple_string: u64,
}

/// The CPython a process runs.
pub(super) struct Interpreter {
    pub version: PythonVersion,
    /// The file exporting its C API, and that file's exports.
    file: Mapped,
    exports: Exports,
}

/// What a process's mapped files say of the interpreter in it, before its version is judged.
enum Found {
    Python3(PythonVersion),
    /// CPython older than 3.7: its minor version is not told apart.
    Before37,
    Python2,
}

impl Interpreter {
    /// The CPython in `target`, refused unless golow attaches to its version.
    pub fn find(target: &Process, access: &Access) -> Result<Interpreter, Refusal> {
        let pid = target.pid;
        let mapped = target
            .mapped_files()
            .map_err(|e| Refusal(format!("cannot read the memory map of process {pid}: {e}")))?;
        let exe = target.exe_path();
        let is_exe = |m: &Mapped| exe.as_deref() == Some(m.path.as_slice());
        let candidates = mapped
            .iter()
            .filter(|m| is_exe(m) || file_name(&m.path).starts_with(b"libpython"));
        let mut unreadable = None;
        for file in candidates.clone() {
            match read_exports(target, file, is_python_name) {
                Ok(exports) if exports.has(ADD_PENDING_CALL, Kind::Function) => {
                    let found = version(&exports, file, access).map_err(|why| {
                        Refusal(format!(
                            "cannot tell which CPython process {pid} runs: {why}"
                        ))
                    })?;
                    let version = judge(pid, found)?;
                    return Ok(Interpreter {
                        version,
                        file: file.clone(),
                        exports,
                    });
                }
                Ok(_) => {}
                Err(why) => unreadable = unreadable.or(Some((file, why))),
            }
        }
        let named_python = candidates.clone().any(|m| {
            let name = file_name(&m.path);
            name.starts_with(b"python") || name.starts_with(b"libpython")
        });
        match unreadable {
            Some((file, why)) if named_python => Err(Refusal(format!(
                "cannot read the symbols of process {pid}'s {}: {why}",
                shown(&file.path)
            ))),
            _ if named_python => Err(no_c_api(pid, ADD_PENDING_CALL)),
            _ => Err(Refusal(format!(
                "process {pid} is not a CPython process (it runs {})",
                target.program()
            ))),
        }
    }

    /// The addresses of the functions gdb calls: the two of CPython's C API and libc's `mmap`.
    pub fn c_api(&self, target: &Process) -> Result<Api, Refusal> {
        let pid = target.pid;
        let in_python = |name| self.exports.address(name, Kind::Function, self.file.start);
        let add_pending_call =
            in_python(ADD_PENDING_CALL).ok_or_else(|| no_c_api(pid, ADD_PENDING_CALL))?;
        let run_simple_string =
            in_python(RUN_SIMPLE_STRING).ok_or_else(|| no_c_api(pid, RUN_SIMPLE_STRING))?;
        let mapped = target
            .mapped_files()
            .map_err(|e| Refusal(format!("cannot read the memory map of process {pid}: {e}")))?;
        // libc's mmap, whatever else defines one; a statically linked python has its own.
        let libc = mapped.iter().filter(|m| is_libc(&m.path));
        let mmap = libc
            .chain(std::iter::once(&self.file))
            .find_map(|file| {
                read_exports(target, file, |name| name == b"mmap")
                    .ok()?
                    .address("mmap", Kind::Function, file.start)
            })
            .ok_or_else(|| no_c_api(pid, "mmap"))?;
        Ok(Api {
            mmap,
            add_pending_call,
            run_simple_string,
        })
    }
}

fn no_c_api(pid: u32, missing: &str) -> Refusal {
    Refusal(format!(
        "the Python in process {pid} does not export its C API ({missing}); golow cannot load its hook into it"
    ))
}

fn is_python_name(name: &[u8]) -> bool {
    [ADD_PENDING_CALL, RUN_SIMPLE_STRING, VERSION_DATA, PYTHON_2]
        .iter()
        .chain(ADDED_IN.iter().map(|(n, _)| n))
        .any(|n| n.as_bytes() == name)
}

fn file_name(path: &[u8]) -> &[u8] {
    path.rsplit(|&b| b == b'/').next().unwrap_or(path)
}

/// glibc's `libc.so.6` (or an older `libc-2.31.so`), or musl's, which its loader is.
fn is_libc(path: &[u8]) -> bool {
    let name = file_name(path);
    name.starts_with(b"libc.so") || name.starts_with(b"libc-") || name.starts_with(b"ld-musl-")
}

fn shown(path: &[u8]) -> String {
    one_line(&String::from_utf8_lossy(path), 160)
}

/// The exports of a mapped file, read from the process's own root (so that a process in a container is read from
/// its files, not the host's).
fn read_exports(
    target: &Process,
    file: &Mapped,
    wanted: impl Fn(&[u8]) -> bool,
) -> Result<Exports, String> {
    if file.deleted {
        return Err("it was replaced or removed on disk since the process loaded it".into());
    }
    let mut in_root = b"root".to_vec();
    in_root.extend_from_slice(&file.path);
    let opened = target
        .open_file_bytes(&in_root)
        .map_err(|e| e.to_string())?;
    Exports::read(opened, wanted).map_err(|why| match why {
        Unreadable::NotElf => "it is not an ELF file".to_string(),
        Unreadable::ForeignMachine => "it is built for another machine".to_string(),
        Unreadable::Damaged(part) => format!("{part} cannot be read"),
    })
}

/// The interpreter's version: `Py_Version` read from the process's memory, else dated by the functions it has.
fn version(exports: &Exports, file: &Mapped, access: &Access) -> Result<Found, String> {
    if let Some(address) = exports.address(VERSION_DATA, Kind::Data, file.start) {
        let mut hex = [0u8; 4];
        access
            .memory
            .read_exact_at(&mut hex, address)
            .map_err(|e| format!("Py_Version cannot be read ({e})"))?;
        let hex = u32::from_ne_bytes(hex);
        let version = PythonVersion {
            major: (hex >> 24) as u8,
            minor: (hex >> 16) as u8,
        };
        return match version.major {
            3 => Ok(Found::Python3(version)),
            _ => Err(format!("Py_Version reads {hex:#010x}")),
        };
    }
    if exports.has(PYTHON_2, Kind::Function) {
        return Ok(Found::Python2);
    }
    Ok(ADDED_IN
        .iter()
        .find(|(name, _)| exports.has(name, Kind::Function))
        .map_or(Found::Before37, |&(_, minor)| {
            Found::Python3(PythonVersion { major: 3, minor })
        }))
}

/// The version, or the line refusing it.
fn judge(pid: u32, found: Found) -> Result<PythonVersion, Refusal> {
    let supported = format!("golow attaches to CPython {OLDEST}–{NEWEST}");
    match found {
        Found::Python2 => Err(Refusal(format!("process {pid} runs Python 2; {supported}"))),
        Found::Before37 => Err(Refusal(format!(
            "process {pid} runs CPython 3.6 or older; {supported}"
        ))),
        Found::Python3(version) if version < OLDEST => Err(Refusal(format!(
            "process {pid} runs CPython {version}; {supported}"
        ))),
        Found::Python3(version) if version > NEWEST => Err(Refusal(format!(
            "process {pid} runs CPython {version}; CPython 3.14 and later attach through sys.remote_exec, \
             which golow does not use yet"
        ))),
        Found::Python3(version) => Ok(version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_outside_3_8_to_3_13_are_refused_each_in_its_words() {
        let v = |minor| Found::Python3(PythonVersion { major: 3, minor });
        assert_eq!(judge(7, v(8)), Ok(PythonVersion { major: 3, minor: 8 }));
        assert_eq!(
            judge(7, v(13)),
            Ok(PythonVersion {
                major: 3,
                minor: 13
            })
        );
        assert_eq!(
            judge(7, v(14)).unwrap_err().0,
            "process 7 runs CPython 3.14; CPython 3.14 and later attach through sys.remote_exec, which golow \
             does not use yet"
        );
        assert_eq!(
            judge(7, v(7)).unwrap_err().0,
            "process 7 runs CPython 3.7; golow attaches to CPython 3.8–3.13"
        );
        assert!(
            judge(7, Found::Before37)
                .unwrap_err()
                .0
                .contains("3.6 or older")
        );
        assert!(
            judge(7, Found::Python2)
                .unwrap_err()
                .0
                .contains("Python 2;")
        );
    }

    #[test]
    fn libc_is_glibcs_or_musls_and_nothing_that_merely_starts_alike() {
        assert!(is_libc(b"/usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(is_libc(b"/lib/libc-2.31.so"));
        assert!(is_libc(b"/lib/ld-musl-x86_64.so.1"));
        assert!(!is_libc(b"/usr/lib/libcrypto.so.3"));
        assert!(!is_libc(b"/usr/lib/libcap.so.2"));
    }
}

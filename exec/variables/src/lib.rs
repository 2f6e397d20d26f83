//! The environment variables golow sets for a `--cmd` worker and its exec interposer (`libgolow_exec.so`, on
//! LD_PRELOAD) reads. They live apart from golow-protocol so that the interposer, which every process of a user's job
//! loads, depends on these names and nothing else of golow's.
#![no_std]

/// The directory of the step hook (`sitecustomize.py` and what it loads), which every program a `--cmd` worker starts
/// gets first on PYTHONPATH from the interposer.
pub const HOOK_DIR_ENV: &str = "GOLOW_HOOK_DIR";
/// The names (`:`-separated) of the variables golow set for a `--cmd` worker, which the interposer puts back into
/// the environment of any program started without them.
pub const EXEC_KEEP_ENV: &str = "GOLOW_EXEC_KEEP";

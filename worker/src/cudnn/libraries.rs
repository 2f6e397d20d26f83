//! Finds the NVIDIA libraries the cudnn backend opens by name (cuDNN, NVRTC) where torch's wheels install them:
//! beside libtorch's own libraries, on no search path. A library the dynamic loader already finds by name (loaded
//! with libtorch, or on `LD_LIBRARY_PATH`) is left as it is; one found beside libtorch is loaded once by its full
//! path, after which the loader finds it by name as cudarc asks.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// cuDNN 9, as torch 2.11's CUDA wheels ship it.
pub const CUDNN: &[&str] = &["libcudnn.so.9"];
/// NVRTC opens its builtins by name when it compiles: they come first.
pub const NVRTC: &[&str] = &["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"];

/// Makes each of `files` (in order) loadable by name, or says which is missing.
pub fn preload(files: &[&str]) -> Result<(), String> {
    let dirs = beside_libtorch();
    for file in files {
        if open(Path::new(file)) {
            continue;
        }
        if !dirs
            .iter()
            .any(|dir| dir.join(file).exists() && open(&dir.join(file)))
        {
            return Err(format!(
                "{file} not found beside libtorch or on the library path: install torch's CUDA wheels, or put the \
                 library's folder on LD_LIBRARY_PATH"
            ));
        }
    }
    Ok(())
}

/// libtorch's folder and the NVIDIA wheels' library folders next to it (`…/site-packages/nvidia/*/lib`).
fn beside_libtorch() -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let Some(torch) = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.ends_with("/libtorch_cpu.so"))
        .and_then(|path| Path::new(path).parent())
    else {
        return Vec::new();
    };
    let mut dirs = vec![torch.to_path_buf()];
    if let Some(site) = torch.parent().and_then(Path::parent)
        && let Ok(entries) = std::fs::read_dir(site.join("nvidia"))
    {
        let mut wheels: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("lib")).collect();
        wheels.sort();
        dirs.extend(wheels);
    }
    dirs
}

/// dlopen for the life of the process (the handle is never closed); whether it opened.
fn open(path: &Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: loads a shared library; it stays loaded.
    !unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_s_wheels_have_cudnn_and_nvrtc_beside_libtorch() {
        preload(CUDNN).unwrap();
        preload(NVRTC).unwrap();
    }

    #[test]
    fn a_library_nowhere_is_named() {
        let error = preload(&["libgolow-nowhere.so.1"]).unwrap_err();
        assert!(
            error.starts_with("libgolow-nowhere.so.1 not found"),
            "{error}"
        );
    }
}

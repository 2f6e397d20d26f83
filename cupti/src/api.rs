//! libcupti, loaded by hand. The collector runs inside someone else's process during `cuInit`, so it finds the
//! CUPTI that belongs to the CUDA that process already loaded rather than whatever a search path offers, and it
//! keeps result codes as plain integers because a driver may return codes no header of ours names.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

pub const SUCCESS: u32 = 0;
pub const KIND_MEMCPY: u32 = 1;
pub const KIND_MEMSET: u32 = 2;
pub const KIND_CONCURRENT_KERNEL: u32 = 10;
/// `cuptiActivityFlushAll`'s flags: hand back the buffers whose records are all complete, or every buffer (at the
/// end only: CUPTI stops reading a buffer at its first incomplete record, so the records after it are lost).
pub const FLUSH_COMPLETED: u32 = 0;
pub const FLUSH_FORCED: u32 = 1;

pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);

/// The CUPTI functions the collector calls, resolved from one loaded libcupti.
pub struct Api {
    get_result_string: unsafe extern "C" fn(u32, *mut *const c_char) -> u32,
    get_version: unsafe extern "C" fn(*mut u32) -> u32,
    register_callbacks: unsafe extern "C" fn(BufferRequested, BufferCompleted) -> u32,
    enable: unsafe extern "C" fn(u32) -> u32,
    disable: unsafe extern "C" fn(u32) -> u32,
    flush_all: unsafe extern "C" fn(u32) -> u32,
    next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut c_void) -> u32,
    dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> u32,
    timestamp: unsafe extern "C" fn(*mut u64) -> u32,
    pub path: PathBuf,
}

/// A failed CUPTI call, in words fit for the monitor's pane.
pub type Failure = String;

impl Api {
    /// Loads libcupti: `GOLOW_CUPTI_LIB` if set, else one already in the process, else the one beside the CUDA
    /// runtime the process loaded, else whatever the dynamic linker finds.
    pub fn load() -> Result<Api, Failure> {
        if let Some(path) =
            std::env::var_os(golow_protocol::collector::LIBRARY_ENV).filter(|p| !p.is_empty())
        {
            return Api::open(Path::new(&path));
        }
        let mut tried = Vec::new();
        for candidate in candidates(&loaded_objects()) {
            match Api::open(&candidate) {
                Ok(api) => return Ok(api),
                Err(e) => tried.push(e),
            }
        }
        Err(format!(
            "libcupti not found (set {} to its path): {}",
            golow_protocol::collector::LIBRARY_ENV,
            tried.join("; ")
        ))
    }

    fn open(path: &Path) -> Result<Api, Failure> {
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| format!("{}: path contains a NUL byte", path.display()))?;
        // SAFETY: dlopen with a valid C string; the handle is never closed, so resolved symbols stay valid.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if handle.is_null() {
            return Err(dl_error());
        }
        let symbol = |name: &str| -> Result<*mut c_void, Failure> {
            let c_name = CString::new(name).expect("symbol names have no NUL");
            // SAFETY: dlsym on a live handle.
            let p = unsafe { libc::dlsym(handle, c_name.as_ptr()) };
            if p.is_null() {
                Err(format!("{}: no symbol {name}", path.display()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol becomes the signature CUPTI's header gives it (integers for enums).
        unsafe {
            Ok(Api {
                get_result_string: function(symbol("cuptiGetResultString")?),
                get_version: function(symbol("cuptiGetVersion")?),
                register_callbacks: function(symbol("cuptiActivityRegisterCallbacks")?),
                enable: function(symbol("cuptiActivityEnable")?),
                disable: function(symbol("cuptiActivityDisable")?),
                flush_all: function(symbol("cuptiActivityFlushAll")?),
                next_record: function(symbol("cuptiActivityGetNextRecord")?),
                dropped: function(symbol("cuptiActivityGetNumDroppedRecords")?),
                timestamp: function(symbol("cuptiGetTimestamp")?),
                path: path.to_path_buf(),
            })
        }
    }

    fn check(&self, call: &str, code: u32) -> Result<(), Failure> {
        if code == SUCCESS {
            return Ok(());
        }
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string, or leaves ours null.
        let known = unsafe { (self.get_result_string)(code, &mut text) } == SUCCESS;
        let words = if known && !text.is_null() {
            // SAFETY: a NUL-terminated static string from CUPTI.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        } else {
            format!("CUPTI error {code}")
        };
        Err(format!("{call}: {words}"))
    }

    pub fn version(&self) -> Result<u32, Failure> {
        let mut v = 0;
        // SAFETY: writes one u32.
        self.check("cuptiGetVersion", unsafe { (self.get_version)(&mut v) })?;
        Ok(v)
    }

    pub fn register_callbacks(
        &self,
        requested: BufferRequested,
        completed: BufferCompleted,
    ) -> Result<(), Failure> {
        // SAFETY: both callbacks are `extern "C"` functions that live as long as the process.
        self.check("cuptiActivityRegisterCallbacks", unsafe {
            (self.register_callbacks)(requested, completed)
        })
    }

    pub fn enable(&self, kind: u32, name: &str) -> Result<(), Failure> {
        // SAFETY: plain call with an activity kind.
        self.check(&format!("cuptiActivityEnable({name})"), unsafe {
            (self.enable)(kind)
        })
    }

    pub fn disable(&self, kind: u32) {
        // SAFETY: plain call with an activity kind; a failure leaves nothing to undo.
        unsafe { (self.disable)(kind) };
    }

    /// Hands buffers holding records back through the completion callback, the partly filled ones too.
    pub fn flush(&self, flag: u32) -> Result<(), Failure> {
        // SAFETY: plain call with a flag.
        self.check("cuptiActivityFlushAll", unsafe { (self.flush_all)(flag) })
    }

    /// CUPTI's clock, the one activity records are stamped with.
    pub fn now_ns(&self) -> Option<u64> {
        let mut t = 0;
        // SAFETY: writes one u64.
        (unsafe { (self.timestamp)(&mut t) } == SUCCESS).then_some(t)
    }

    /// Records CUPTI dropped for want of a buffer.
    ///
    /// # Safety
    /// `context` and `stream` must be what CUPTI passed its completion callback.
    pub unsafe fn dropped(&self, context: *mut c_void, stream: u32) -> u64 {
        let mut n = 0usize;
        // SAFETY: the caller vouches for context and stream.
        let ok = unsafe { (self.dropped)(context, stream, &mut n) } == SUCCESS;
        if ok { n as u64 } else { 0 }
    }

    /// Calls `each` with every record in a completed buffer.
    ///
    /// # Safety
    /// `buffer` must be a buffer CUPTI completed, with `valid` bytes of records.
    pub unsafe fn for_each_record(
        &self,
        buffer: *mut u8,
        valid: usize,
        mut each: impl FnMut(*const u8),
    ) {
        let mut record: *mut c_void = std::ptr::null_mut();
        // SAFETY: CUPTI walks its own buffer; it stops with MAX_LIMIT_REACHED, or an error on a corrupt one.
        while unsafe { (self.next_record)(buffer, valid, &mut record) } == SUCCESS {
            each(record.cast_const().cast());
        }
    }
}

/// # Safety
/// `F` must be the `extern "C"` function pointer type of the symbol at `p`.
unsafe fn function<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: a function pointer has a data pointer's size here, and the caller vouches for the type.
    unsafe { std::mem::transmute_copy(&p) }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a thread-local NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "dlopen failed".into()
    } else {
        // SAFETY: non-null result of dlerror.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Paths of the shared objects loaded in this process.
fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info for the call's duration; data is our Vec.
        let (info, paths) = unsafe { (&*info, &mut *data.cast::<Vec<PathBuf>>()) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated path (empty for the executable).
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                paths.push(PathBuf::from(name.to_string_lossy().into_owned()));
            }
        }
        0
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    // SAFETY: the callback only reads what the loader gives it and pushes into `paths`.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut paths as *mut Vec<PathBuf>).cast()) };
    paths
}

/// Where to look for libcupti, best first, given the objects the process has loaded.
fn candidates(loaded: &[PathBuf]) -> Vec<PathBuf> {
    let file_name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut found: Vec<PathBuf> = loaded
        .iter()
        .filter(|p| file_name(p).is_some_and(|n| n.starts_with("libcupti.so")))
        .cloned()
        .collect();
    for runtime in loaded
        .iter()
        .filter(|p| file_name(p).is_some_and(|n| n.starts_with("libcudart.so")))
    {
        if let Some(dir) = runtime.parent() {
            // pip's nvidia wheels keep it beside the runtime; a CUDA toolkit under extras/CUPTI.
            found.push(dir.join("libcupti.so.13"));
            found.push(dir.join("libcupti.so"));
            found.push(dir.join("../extras/CUPTI/lib64/libcupti.so"));
        }
    }
    found.extend(["libcupti.so.13", "libcupti.so"].map(PathBuf::from));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_cupti_comes_first_then_the_runtime_s_neighbour_then_the_linker() {
        let loaded = [
            "/usr/lib/libc.so.6",
            "/venv/nvidia/cu13/lib/libcudart.so.13",
            "/opt/profiler/libcupti.so.13",
        ]
        .map(PathBuf::from);
        let found = candidates(&loaded);
        assert_eq!(found[0], PathBuf::from("/opt/profiler/libcupti.so.13"));
        assert_eq!(
            found[1],
            PathBuf::from("/venv/nvidia/cu13/lib/libcupti.so.13")
        );
        assert_eq!(found.last(), Some(&PathBuf::from("libcupti.so")));
    }

    #[test]
    fn this_process_lists_its_own_libc() {
        assert!(
            loaded_objects()
                .iter()
                .any(|p| p.to_string_lossy().contains("libc.so"))
        );
    }
}

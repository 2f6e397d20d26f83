//! Links the Rust workers against the torch that `make build` installed, so they run without LD_LIBRARY_PATH, and
//! compiles the shim to what libtorch has and tch does not expose (csrc/: backward kernels, the AOTInductor
//! runtime, the operator callbacks), against that torch's headers.

fn main() {
    // torch-sys (links = "tch") tells dependants where libtorch lives.
    let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        return;
    };
    let lib_dir = std::fs::canonicalize(&lib_dir).unwrap_or_else(|_| lib_dir.into());
    // The version of the torch we link against, for the workers' hello event.
    let version_py = lib_dir.join("../version.py");
    println!("cargo:rerun-if-changed={}", version_py.display());
    let version = std::fs::read_to_string(&version_py)
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("__version__ = "))
                .map(|v| v.trim().trim_matches(['\'', '"']).to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=GOLOW_LIBTORCH_VERSION={version}");
    compile_shim(&lib_dir);
    let lib_dir = lib_dir.display();
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    // libtorch_cuda registers CUDA with the dispatcher only from static initialisers: without
    // --no-as-needed the linker drops it (no symbol is referenced) and CUDA never shows up. An AOTInductor
    // package's library needs libtorch.so by name, which nothing else here references either. Every binary this
    // crate links runs torch on the GPU (the worker, and the library's tests that `make gpu-bundle` ships), so
    // each gets them, not the worker alone.
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,-ltorch,--as-needed");
}

fn compile_shim(lib_dir: &std::path::Path) {
    let sources = [
        "csrc/aten_backward.cpp",
        "csrc/aoti_package.cpp",
        "csrc/errors.cpp",
        "csrc/gpu_policy.cpp",
        "csrc/operators.cpp",
    ];
    for source in sources.iter().chain(&["csrc/shim.h", "csrc/shim_build.rs"]) {
        println!("cargo:rerun-if-changed={source}");
    }
    shim_build(&lib_dir.join("../include"))
        .files(sources)
        .compile("golow_shim");
}

include!("csrc/shim_build.rs");

//! Compiles the Rust workers' operator callbacks (`worker/csrc/operators.cpp`) into this library, against the torch
//! `make build` installed (`LIBTORCH`, from `.cargo/config.toml`), the torch the Python levels import: the library is
//! loaded into their processes, where that torch's libraries are already loaded.

fn main() {
    let Some(libtorch) = std::env::var_os("LIBTORCH") else {
        return;
    };
    let libtorch = std::fs::canonicalize(&libtorch).unwrap_or_else(|_| libtorch.into());
    let include = libtorch.join("include");
    let sources = ["../worker/csrc/operators.cpp", "../worker/csrc/errors.cpp"];
    for source in sources.iter().chain(&["../worker/csrc/shim.h"]) {
        println!("cargo:rerun-if-changed={source}");
    }
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    cc::Build::new()
        .cpp(true)
        .files(sources)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag("-fPIC")
        // As the worker's shims (worker/build.rs): torch's ABI, and its classes' release layout.
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("NDEBUG", None)
        .warnings(false)
        .compile("golow_ops_shim");
    println!(
        "cargo:rustc-link-search=native={}",
        libtorch.join("lib").display()
    );
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    println!("cargo:rustc-cfg=golow_ops");
    println!("cargo::rustc-check-cfg=cfg(golow_ops)");
}

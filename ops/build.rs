//! Compiles the Rust workers' operator callbacks (`worker/csrc/operators.cpp`) into this library, against the torch
//! `make build` installed (`LIBTORCH`, from `.cargo/config.toml`), the torch the Python levels import: the library is
//! loaded into their processes, where that torch's libraries are already loaded.

fn main() {
    let Some(libtorch) = std::env::var_os("LIBTORCH") else {
        return;
    };
    let libtorch = std::fs::canonicalize(&libtorch).unwrap_or_else(|_| libtorch.into());
    let sources = ["../worker/csrc/operators.cpp", "../worker/csrc/errors.cpp"];
    let built_with = ["../worker/csrc/shim.h", "../worker/csrc/shim_build.rs"];
    for source in sources.iter().chain(&built_with) {
        println!("cargo:rerun-if-changed={source}");
    }
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    shim_build(&libtorch.join("include"))
        .files(sources)
        .flag("-fPIC")
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

include!("../worker/csrc/shim_build.rs");

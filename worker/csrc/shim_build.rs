// Included by worker/build.rs and ops/build.rs: how a shim is compiled against the torch in `include`.

/// A C++ build of shims against torch's headers in `include`, as torch itself was built.
fn shim_build(include: &std::path::Path) -> cc::Build {
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .include(include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        // torch's wheels since 2.7 are built with the C++11 ABI only.
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        // And without debug checks: some of its classes have members only where NDEBUG is not defined
        // (`at::RecordFunction::inputs_valid_`), so a shim built without it reads them at other offsets.
        .define("NDEBUG", None)
        .warnings(false);
    build
}

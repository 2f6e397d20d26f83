fn main() {
    std::process::exit(golow::cli::main());
}

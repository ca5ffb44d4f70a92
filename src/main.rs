fn main() {
    std::process::exit(warden::cli::main());
}

// The decision path allocates many small, short-lived values on many threads: mimalloc's
// per-thread free lists serve that better than glibc's arenas (benches/RESULTS.md, "serve
// load"). A library user keeps whatever allocator their program chose.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(warden::cli::main());
}

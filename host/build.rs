//! Exports the binary's `pthread_create` to the dynamic linker, so plugins' calls bind to it (see
//! `src/plugin/own_threads.rs`).

fn main() {
    println!("cargo:rustc-link-arg-bin=taskhost=-Wl,--export-dynamic-symbol=pthread_create");
}

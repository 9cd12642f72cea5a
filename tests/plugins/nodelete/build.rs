//! Links the test plugin with `-z nodelete` (DT_FLAGS_1 gets DF_1_NODELETE).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}

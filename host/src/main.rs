//! The taskhost binary.
fn main() {}

//! The `quartermaster` command line.
fn main() {}

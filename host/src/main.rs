//! The `lockgrid` command-line tool.
fn main() {}

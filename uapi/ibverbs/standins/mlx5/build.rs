//! Links the stand-in as `libmlx5.so.1` exporting every symbol of `symbols.txt`, each with
//! its version (see `../standin.rs`).

include!("../standin.rs");

fn main() {
    link_as("libmlx5.so.1");
}

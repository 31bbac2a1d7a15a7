//! Links the stand-in as `libefa.so.1` exporting every symbol of `symbols.txt`, each with its
//! version (see `../standin.rs`).

include!("../standin.rs");

fn main() {
    link_as("libefa.so.1");
}

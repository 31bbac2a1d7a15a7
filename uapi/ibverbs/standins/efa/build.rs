//! Links the stand-in as `libefa.so.1` with the version node of what perftest imports.

include!("../standin.rs");

fn main() {
    link_as("libefa.so.1", &["EFA_1.1"]);
}

//! Links the stand-in as `libmlx5.so.1` with the version nodes of what perftest imports.

include!("../standin.rs");

fn main() {
    link_as(
        "libmlx5.so.1",
        &["MLX5_1.3", "MLX5_1.7", "MLX5_1.10", "MLX5_1.21"],
    );
}

//! softrnic-testbed: test rigs (`testbed/*.sh`) and their helper programs (`src/bin/`).

pub mod soak;

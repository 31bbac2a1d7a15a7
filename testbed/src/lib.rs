//! softrnic-testbed: test rigs (`testbed/*.sh`) and their helper programs (`src/bin/`), the
//! soak ([`soak`]), and kernel rxe as a peer under QEMU ([`rxe`]).

pub mod rxe;
pub mod soak;

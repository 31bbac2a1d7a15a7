//! Exporting a C entry point under rdma-core's versioned name.
//!
//! `export! { "IBVERBS_1.1"; unsafe extern "C" fn ibv_x(..) -> T { .. } }` defines the Rust
//! function, emits it as the symbol `__softrnic_ibv_x`, and aliases that with
//! `.symver __softrnic_ibv_x, ibv_x@@IBVERBS_1.1`: the library then exports `ibv_x` with
//! version `IBVERBS_1.1` as its default, exactly as rdma-core's `libibverbs.so.1` does, which
//! is what programs linked against rdma-core ask for. (`build.rs` defines the version nodes;
//! see there for why a version script alone does not version the names.) The alias is left
//! out of unit-test builds, whose executables have no version nodes.
//!
//! `export_rdmacm! { unsafe extern "C" fn rdma_x(..) -> T { .. } }` does the same for the
//! implementation of librdmacm's `rdma_x` (`crate::rdmacm`): the library exports it as
//! `softrnic_rdma_x@@SOFTRNIC_RDMACM_PRIVATE` (helper symbol `__softrnic_softrnic_rdma_x`),
//! where softrnic's `librdmacm.so.1` (`uapi/rdmacm`) looks it up. The Rust function keeps
//! librdmacm's name, so that `rdmacm::signatures` can check it against the shim's list.
//!
//! Every body must catch panics itself ([`crate::ffi::catch`]): none may cross into C.

include!("export_versioned.rs");

macro_rules! export_rdmacm {
    ($(#[$m:meta])* unsafe extern "C" fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[export_name = concat!("__softrnic_softrnic_", stringify!($name))]
        pub(crate) unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? $body

        #[cfg(not(test))]
        core::arch::global_asm!(concat!(
            ".symver __softrnic_softrnic_", stringify!($name), ", softrnic_", stringify!($name),
            "@@SOFTRNIC_RDMACM_PRIVATE"
        ));
    };
}

pub(crate) use export;
pub(crate) use export_rdmacm;

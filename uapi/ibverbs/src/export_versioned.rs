// The `export!` macro, shared by softrnic's `libibverbs.so.1` (`export.rs` here) and its
// `librdmacm.so.1` (`uapi/rdmacm/src/export.rs`), which `include!` it: see their module docs.
// A file of its own, not a module, so that both crates define the one macro.

macro_rules! export {
    ($ver:literal; $(#[$m:meta])* unsafe extern "C" fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[export_name = concat!("__softrnic_", stringify!($name))]
        pub(crate) unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? $body

        #[cfg(not(test))]
        core::arch::global_asm!(concat!(
            ".symver __softrnic_", stringify!($name), ", ", stringify!($name), "@@", $ver
        ));
    };
}

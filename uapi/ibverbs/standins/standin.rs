// Shared by the stand-in crates (`include!`d by their lib.rs and build.rs halves): the
// version script and SONAME, and the macro that exports a "not supported" function under a
// versioned name.

/// Writes the version script defining `nodes` (none inherits: the dynamic linker matches a
/// symbol's version by name only) and passes it and the SONAME `soname` to the linker.
#[allow(dead_code)]
fn link_as(soname: &str, nodes: &[&str]) {
    let map: String = nodes.iter().map(|n| format!("{n} {{ }};\n")).collect();
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let path = out.join("standin.map");
    std::fs::write(&path, map).expect("writing the version script");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", path.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../standin.rs");
}

/// `unsupported! { "NODE" fn name(args) -> *mut c_void; }` exports `name@@NODE` returning
/// NULL with `errno = EOPNOTSUPP`; `-> c_int` returns `EOPNOTSUPP` (and leaves it in errno).
/// The bodies touch no argument, so they are safe for any input; nothing can panic.
#[allow(unused_macros)]
macro_rules! unsupported {
    ($($ver:literal fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:tt;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: not supported on softrnic.")]
        #[export_name = concat!("__softrnic_", stringify!($name))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> unsupported!(@ty $ret) {
            $(let _ = $arg;)*
            // SAFETY: __errno_location returns the calling thread's errno slot.
            unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
            unsupported!(@val $ret)
        }
        #[cfg(not(test))]
        core::arch::global_asm!(concat!(
            ".symver __softrnic_", stringify!($name), ", ", stringify!($name), "@@", $ver
        ));
    )*};
    (@ty ptr) => { *mut libc::c_void };
    (@ty int) => { libc::c_int };
    (@val ptr) => { core::ptr::null_mut() };
    (@val int) => { libc::EOPNOTSUPP };
}

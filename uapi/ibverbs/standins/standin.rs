// Shared by the stand-in crates (`include!`d by their lib.rs and build.rs halves): reading the
// crate's `symbols.txt` (every public symbol of the vendor library, written by
// `gen_symbols.py`) into the version script, the SONAME and the generated exports, and the
// macro that exports a "not supported" function under a versioned name.

/// The kinds of return type a `symbols.txt` line may name: pointer, `int`, `bool`, `void`,
/// and the other C integer types `unsupported!` maps to Rust.
#[allow(dead_code)]
const KINDS: &[&str] = &[
    "ptr",
    "int",
    "bool",
    "void",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "size_t",
    "ssize_t",
    "unsigned_int",
    "long",
    "unsigned_long",
];

/// Reads the crate's `symbols.txt`, writes the version script defining its nodes (none
/// inherits: the dynamic linker matches a symbol's version by name only) and passes it and
/// the SONAME `soname` to the linker, and writes `$OUT_DIR/exports.rs`, one `unsupported!`
/// line per symbol, for lib.rs to `include!`.
#[allow(dead_code)]
fn link_as(soname: &str) {
    let list = std::fs::read_to_string("symbols.txt").expect("reading symbols.txt");
    let mut map = String::new();
    let mut exports = String::from("unsupported! {\n");
    let mut rust_names = std::collections::BTreeSet::new();
    for (n, line) in list.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default();
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [] => {}
            ["node", node] => map.push_str(&format!("{node} {{ }};\n")),
            [name, version, kind] => {
                assert!(KINDS.contains(&kind), "symbols.txt:{}: kind {kind}", n + 1);
                // A compatibility version `(V)` is `name@V`, under its own Rust name.
                let (symver, rust) = match version.strip_prefix('(') {
                    Some(v) => {
                        let v = v.strip_suffix(')').expect("(version)");
                        let suffix = v.to_lowercase().replace(['.', '-'], "_");
                        (format!("{name}@{v}"), format!("{name}_{suffix}"))
                    }
                    None => (format!("{name}@@{version}"), name.to_string()),
                };
                assert!(rust_names.insert(rust.clone()), "{rust} twice");
                exports.push_str(&format!(
                    "    \"{symbol}\" fn {rust}() -> {kind};\n",
                    symbol = symver
                ));
            }
            _ => panic!("symbols.txt:{}: {line}", n + 1),
        }
    }
    exports.push_str("}\n");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let path = out.join("standin.map");
    std::fs::write(&path, map).expect("writing the version script");
    std::fs::write(out.join("exports.rs"), exports).expect("writing exports.rs");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        path.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=symbols.txt");
    println!("cargo:rerun-if-changed=../standin.rs");
}

/// `unsupported! { "name@@NODE" fn rust_name() -> kind; }` exports `name@@NODE` (or, for
/// `"name@NODE"`, that compatibility version) as the Rust function `rust_name`, answering
/// "not supported" by its return type's kind:
///
/// - `ptr`: NULL with `errno = EOPNOTSUPP`;
/// - `int`: `EOPNOTSUPP`, left in errno too (the mlx5dv and efadv man pages: their int
///   functions return 0 or an errno value);
/// - `bool`: false (`mlx5dv_is_supported`: not an mlx5 device), errno untouched;
/// - `ssize_t`: -1 with `errno = EOPNOTSUPP`, as `read(2)` (`mlx5dv_devx_get_event`'s man
///   page: the number of bytes read, or -1 with errno set; 0 would be an empty event);
/// - another integer type (`uint32_t`, ...): 0 with `errno = EOPNOTSUPP`;
/// - `void`: nothing.
///
/// The functions take no parameters whatever the C prototype says: under the x86-64 System V
/// and AArch64 procedure-call standards the caller passes arguments in registers (or on a
/// stack it owns and pops) and a callee may ignore them, so a parameterless function is a
/// correct callee for every prototype. Nothing is read, so no input is unsafe and nothing
/// can panic.
#[allow(unused_macros)]
macro_rules! unsupported {
    (@ty ptr) => { *mut libc::c_void };
    (@ty int) => { libc::c_int };
    (@ty bool) => { bool };
    (@ty void) => { () };
    (@ty uint8_t) => { u8 };
    (@ty uint16_t) => { u16 };
    (@ty uint32_t) => { u32 };
    (@ty uint64_t) => { u64 };
    (@ty int8_t) => { i8 };
    (@ty int16_t) => { i16 };
    (@ty int32_t) => { i32 };
    (@ty int64_t) => { i64 };
    (@ty size_t) => { libc::size_t };
    (@ty ssize_t) => { libc::ssize_t };
    (@ty unsigned_int) => { libc::c_uint };
    (@ty long) => { libc::c_long };
    (@ty unsigned_long) => { libc::c_ulong };
    (@val ptr) => {{ unsupported!(@errno); core::ptr::null_mut() }};
    (@val int) => {{ unsupported!(@errno); libc::EOPNOTSUPP }};
    (@val bool) => { false };
    (@val void) => {()};
    (@val ssize_t) => {{ unsupported!(@errno); -1 }};
    (@val $int:ident) => {{ unsupported!(@errno); 0 }};
    (@errno) => {
        // SAFETY: __errno_location returns the calling thread's errno slot.
        unsafe { *libc::__errno_location() = libc::EOPNOTSUPP }
    };
    ($($symbol:literal fn $name:ident() -> $kind:tt;)*) => {$(
        #[doc = concat!("`", $symbol, "`: not supported on softrnic.")]
        #[export_name = concat!("__softrnic_", stringify!($name))]
        pub extern "C" fn $name() -> unsupported!(@ty $kind) {
            unsupported!(@val $kind)
        }
        #[cfg(not(test))]
        core::arch::global_asm!(concat!(
            ".symver __softrnic_", stringify!($name), ", ", $symbol
        ));
    )*};
}

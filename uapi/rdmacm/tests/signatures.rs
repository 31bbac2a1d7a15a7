//! The C signatures of `symbols.rs` against the installed headers of rdma-core: each line
//! becomes a C redeclaration of its function after `<rdma/rdma_cma.h>` and
//! `<rdma/rdma_verbs.h>`. A C compiler accepts a redeclaration only if it is compatible with the
//! header's, so a wrong type, a missing `const` or a wrong argument count fails to compile.
//! The enums the list passes as `unsigned int` are checked to be that. Skips
//! (`softrnic_testkit::skip`) without `cc` or without the librdmacm-dev headers.

use std::process::Command;

/// The lines of `symbols.rs` as (name, Rust return type, Rust argument types).
macro_rules! rdmacm_functions {
    ($($ver:literal fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        const FUNCTIONS: &[(&str, &str, &[&str])] = &[
            $((stringify!($name), rdmacm_functions!(@ret $($ret)?), &[$(stringify!($ty)),*])),*
        ];
    };
    (@ret) => { "()" };
    (@ret $ret:ty) => { stringify!($ret) };
}
include!("../src/symbols.rs");

/// The enums of the list, which the shim and the ibverbs crate pass as `c_uint`.
const ENUMS: &[&str] = &["rdma_port_space", "rdma_cm_event_type", "ibv_event_type"];

/// The C spelling of a type name of `symbols.rs` with no pointer.
fn c_base(name: &str) -> String {
    match name {
        "()" => "void".into(),
        "c_void" => "void".into(),
        "c_int" => "int".into(),
        "c_char" => "char".into(),
        "u8" => "uint8_t".into(),
        "u16" => "uint16_t".into(),
        "usize" => "size_t".into(),
        n if ENUMS.contains(&n) => format!("enum {n}"),
        n => format!("struct {n}"),
    }
}

/// The C spelling of a Rust type of `symbols.rs`: `*const *mut rdma_cm_id` is
/// `struct rdma_cm_id * const *`.
fn c_type(rust: &str) -> String {
    let mut rest: String = rust.chars().filter(|c| !c.is_whitespace()).collect();
    // Outermost pointer first: whether each pointer's pointee is const.
    let mut pointee_const = Vec::new();
    loop {
        if let Some(r) = rest.strip_prefix("*mut") {
            pointee_const.push(false);
            rest = r.to_string();
        } else if let Some(r) = rest.strip_prefix("*const") {
            pointee_const.push(true);
            rest = r.to_string();
        } else {
            break;
        }
    }
    let mut c = c_base(&rest);
    let innermost = pointee_const.len().saturating_sub(1);
    for (i, &is_const) in pointee_const.iter().enumerate().rev() {
        if is_const {
            c = if i == innermost {
                format!("const {c}")
            } else {
                format!("{c} const")
            };
        }
        c.push_str(" *");
    }
    c
}

#[test]
fn c_spelling_of_the_rust_types() {
    assert_eq!(c_type("*mut *mut rdma_cm_id"), "struct rdma_cm_id * *");
    assert_eq!(c_type("*const c_char"), "const char *");
    assert_eq!(
        c_type("*const *mut ibv_context"),
        "struct ibv_context * const *"
    );
    assert_eq!(c_type("rdma_port_space"), "enum rdma_port_space");
    assert_eq!(c_type("()"), "void");
}

/// The C program: the headers, then one redeclaration per function, then the enum checks.
fn c_program() -> String {
    let mut c = String::from(
        "#include <stdint.h>\n#include <rdma/rdma_cma.h>\n#include <rdma/rdma_verbs.h>\n\n",
    );
    for (name, ret, args) in FUNCTIONS {
        let args: Vec<String> = args.iter().map(|a| c_type(a)).collect();
        let args = if args.is_empty() {
            "void".to_string()
        } else {
            args.join(", ")
        };
        c.push_str(&format!("{} {name}({args});\n", c_type(ret)));
    }
    for e in ENUMS {
        c.push_str(&format!(
            "_Static_assert(sizeof(enum {e}) == sizeof(unsigned int) && (enum {e})-1 > 0, \
             \"enum {e} is not unsigned int\");\n"
        ));
    }
    c
}

#[test]
fn every_signature_matches_the_installed_headers() {
    let test = "every_signature_matches_the_installed_headers";
    let header = std::path::Path::new("/usr/include/rdma/rdma_cma.h");
    if !header.exists() {
        let reason = format!("no {} (apt-get install librdmacm-dev)", header.display());
        softrnic_testkit::skip(test, &reason);
        return;
    }
    let dir = std::env::temp_dir().join(format!("softrnic-rdmacm-sig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("signatures.c");
    std::fs::write(&src, c_program()).expect("writing signatures.c");
    let out = match Command::new("cc").arg("-fsyntax-only").arg(&src).output() {
        Ok(out) => out,
        Err(e) => {
            softrnic_testkit::skip(test, &format!("cannot run cc: {e}"));
            return;
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "symbols.rs disagrees with the headers:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        c_program()
    );
    eprintln!(
        "{} signatures match rdma_cma.h/rdma_verbs.h",
        FUNCTIONS.len()
    );
}

//! The vendor stand-ins (`standins/README.md`) against rdma-core's real `libmlx5.so.1` and
//! `libefa.so.1`: every function the installed library defines is exported with the same
//! version, default or compatibility (pyverbs binds them all when its provider modules load,
//! perftest binds some with BIND_NOW: one missing and the program does not start), and a C
//! program calling a few through the vendor headers gets the documented "not supported"
//! answers.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Where Debian installs rdma-core's libraries.
const LIBDIR: &str = "/usr/lib/x86_64-linux-gnu";

/// The defined functions of `objdump -T path` as (name, version as objdump prints it: `V` for
/// `name@@V`, `(V)` for the compatibility `name@V`), or `None` if binutils is missing.
fn defined_functions(path: &Path) -> Option<BTreeSet<(String, String)>> {
    let out = Command::new("objdump").arg("-T").arg(path).output().ok()?;
    assert!(out.status.success(), "objdump -T {} failed", path.display());
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .filter(|l| l.contains(" DF ") && !l.contains("*UND*"))
            .filter_map(|l| {
                let mut f = l.split_whitespace().rev();
                let name = f.next()?;
                let ver = f.next()?;
                Some((name.to_string(), ver.to_string()))
            })
            .collect(),
    )
}

/// Asserts that the stand-in loaded as `soname` exports every versioned function of the
/// installed library of that name, with its version; skips without the library or objdump.
fn exports_all_of(soname: &str, test: &str) {
    let real = Path::new(LIBDIR).join(soname);
    if !real.exists() {
        let reason = format!("no {} (apt-get install ibverbs-providers)", real.display());
        softrnic_testkit::skip(test, &reason);
        return;
    }
    let ours = common::lib_dir().join(soname);
    let (Some(theirs), Some(ours)) = (defined_functions(&real), defined_functions(&ours)) else {
        softrnic_testkit::skip(test, "no objdump (apt-get install binutils)");
        return;
    };
    let wanted: BTreeSet<_> = theirs.into_iter().filter(|(_, v)| v != "Base").collect();
    assert!(
        !wanted.is_empty(),
        "no versioned functions read from {}",
        real.display()
    );
    let missing: Vec<String> = wanted
        .difference(&ours)
        .map(|(n, v)| format!("{n} {v}"))
        .collect();
    assert!(
        missing.is_empty(),
        "{soname}: not exported (or not with this version):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_function_of_libmlx5_is_exported_with_its_version() {
    exports_all_of(
        "libmlx5.so.1",
        "every_function_of_libmlx5_is_exported_with_its_version",
    );
}

#[test]
fn every_function_of_libefa_is_exported_with_its_version() {
    exports_all_of(
        "libefa.so.1",
        "every_function_of_libefa_is_exported_with_its_version",
    );
}

/// Calls one function of each kind of return type through the vendor headers' prototypes
/// (with their arguments, which the stand-ins ignore) and checks each answer and errno.
const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "failed: %s (errno %d)\n", #cond, errno); failed = 1; } } while (0)

int main(void)
{
    int failed = 0;
    struct efadv_device_attr attr;

    /* bool: "not an mlx5 device", errno untouched. */
    errno = 0;
    EXPECT(!mlx5dv_is_supported(NULL));
    EXPECT(errno == 0);

    /* pointer: NULL with errno EOPNOTSUPP. */
    errno = 0;
    EXPECT(mlx5dv_open_device(NULL, NULL) == NULL);
    EXPECT(errno == EOPNOTSUPP);
    errno = 0;
    EXPECT(efadv_create_cq(NULL, NULL, NULL, 0) == NULL);
    EXPECT(errno == EOPNOTSUPP);

    /* int: the errno value EOPNOTSUPP, in errno too. */
    errno = 0;
    EXPECT(efadv_query_device(NULL, &attr, sizeof(attr)) == EOPNOTSUPP);
    EXPECT(errno == EOPNOTSUPP);
    errno = 0;
    EXPECT(mlx5dv_query_device(NULL, NULL) == EOPNOTSUPP);

    /* ssize_t: -1 with errno EOPNOTSUPP, as read(2). */
    errno = 0;
    EXPECT(mlx5dv_devx_get_event(NULL, NULL, 0) == -1);
    EXPECT(errno == EOPNOTSUPP);

    /* void: returns. */
    mlx5dv_free_var(NULL);

    if (!failed)
        printf("ok\n");
    return failed;
}
"#;

#[test]
fn vendor_functions_answer_not_supported_from_c() {
    let test = "vendor_functions_answer_not_supported_from_c";
    if !Path::new("/usr/include/infiniband/efadv.h").exists() {
        softrnic_testkit::skip(
            test,
            "no <infiniband/efadv.h> (apt-get install libibverbs-dev)",
        );
        return;
    }
    let dir = common::lib_dir();
    let Some(exe) = common::compile_c_with(
        "standins",
        PROGRAM,
        test,
        ("infiniband/mlx5dv.h", "libibverbs-dev"),
        &[dir.join("libmlx5.so.1"), dir.join("libefa.so.1")],
    ) else {
        return;
    };
    let out = common::run(&exe, &[], None);
    let (stdout, stderr) = common::texts(&out);
    assert!(
        out.status.success() && stdout.contains("ok"),
        "status {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

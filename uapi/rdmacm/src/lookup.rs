//! Finding the implementation of each `rdma_*` call: `softrnic_<name>`, version
//! `SOFTRNIC_RDMACM_PRIVATE`, in softrnic's `libibverbs.so.1`.
//!
//! The connection manager keeps its state (devices, identifiers, event channels) in the same
//! library as the verbs, so that a process has one copy of its devices whichever library it
//! calls. The shim does not link against `libibverbs.so.1`: it opens it once with
//! `dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL)` — the copy the program already loaded,
//! or else the one the dynamic linker finds first, as `LD_LIBRARY_PATH` says — and looks each
//! function up with `dlvsym` on its first call, keeping the pointer.
//!
//! If the library is not softrnic's (rdma-core's has no `softrnic_*` symbols) or cannot be
//! opened, the process gets one message on stderr saying so, and every forwarded call fails
//! with `errno = ENOSYS`.

use std::ffi::{c_char, c_void, CStr};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::ffi::set_errno;

/// The library holding the implementations, by the name programs load it by.
const LIBRARY: &CStr = c"libibverbs.so.1";

/// The version node of the implementations (`uapi/ibverbs/build.rs`).
const VERSION: &CStr = c"SOFTRNIC_RDMACM_PRIVATE";

/// A C function of unknown signature, as `dlvsym` finds it; the caller casts it to the
/// signature of its line of `symbols.rs`.
pub(crate) type Function = unsafe extern "C" fn();

/// The implementation of one `rdma_*` call, looked up on first use.
pub(crate) struct Implementation {
    /// `softrnic_<name>`, NUL-terminated.
    name: &'static str,
    /// The function, or `None` if the library does not have it.
    function: OnceLock<Option<Function>>,
}

impl Implementation {
    /// The implementation named `name` (`"softrnic_rdma_x\0"`), not looked up yet.
    pub(crate) const fn new(name: &'static str) -> Implementation {
        // Checked where the statics are built, at compile time.
        assert!(!name.is_empty() && name.as_bytes()[name.len() - 1] == 0);
        Implementation {
            name,
            function: OnceLock::new(),
        }
    }

    /// The function; `None`, with `errno = ENOSYS`, if `libibverbs.so.1` is not softrnic's
    /// (said once per process on stderr).
    pub(crate) fn get(&self) -> Option<Function> {
        let f = *self.function.get_or_init(|| find(self.name));
        if f.is_none() {
            set_errno(libc::ENOSYS);
        }
        f
    }
}

/// A `dlopen` handle, never closed.
struct Handle(*mut c_void);

// SAFETY: a dlopen handle is an opaque token that any thread may pass to dlvsym.
unsafe impl Send for Handle {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for Handle {}

/// `libibverbs.so.1`, opened on the first lookup, or why it could not be.
fn library() -> Result<&'static Handle, &'static str> {
    static LIB: OnceLock<Result<Handle, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: a valid NUL-terminated name and flags.
        let h = unsafe { libc::dlopen(LIBRARY.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if h.is_null() {
            Err(last_dl_error())
        } else {
            Ok(Handle(h))
        }
    })
    .as_ref()
    .map_err(String::as_str)
}

/// The function `name` (NUL-terminated) of `SOFTRNIC_RDMACM_PRIVATE`, or `None` after the
/// one-time message.
fn find(name: &str) -> Option<Function> {
    let lib = match library() {
        Ok(lib) => lib,
        Err(why) => {
            complain(why);
            return None;
        }
    };
    // SAFETY: clears the thread's pending dlerror, so that the one read below is this lookup's.
    unsafe { libc::dlerror() };
    // SAFETY: a live handle and NUL-terminated strings.
    let p = unsafe { libc::dlvsym(lib.0, name.as_ptr().cast::<c_char>(), VERSION.as_ptr()) };
    if p.is_null() {
        complain(&last_dl_error());
        return None;
    }
    // SAFETY: a non-NULL address of a function in the library; callers cast it to its signature.
    Some(unsafe { std::mem::transmute::<*mut c_void, Function>(p) })
}

/// The calling thread's last `dlerror()` text.
fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "no dlerror() message".into()
    } else {
        // SAFETY: non-NULL, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Says once per process, on stderr, that the library is not softrnic's (a write error is
/// ignored: there is no one else to tell).
fn complain(why: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        let _ = writeln!(
            std::io::stderr(),
            "librdmacm.so.1 (softrnic) needs softrnic's libibverbs.so.1: {why} (put softrnic's \
             library directory first in LD_LIBRARY_PATH, or start the program with `softrnic \
             run`); the rdma_cm calls fail with ENOSYS"
        );
    }
}

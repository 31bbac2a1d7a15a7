//! MR descriptors in C, in softrnic's version node `SOFTRNIC_1.0` (declared in
//! `include/softrnic/ext.h`): librpma's 21-byte network-transferable description of a local
//! region (`softrnic_uapi`'s `descriptor.rs` gives the format) and the remote region parsed
//! back from one, with librpma's return codes:
//!
//! ```c
//! size_t softrnic_mr_descriptor_size(void);                             // 21
//! int softrnic_mr_get_descriptor(const struct ibv_mr *mr, void *desc); // writes 21 bytes
//! int softrnic_mr_remote_from_descriptor(const void *desc, size_t size,
//!                                        struct softrnic_mr_remote **out);
//! int softrnic_mr_remote_delete(struct softrnic_mr_remote **mr);
//! ```
//!
//! 0 on success, else `SOFTRNIC_E_INVAL` (-100004: NULL or stale argument, `size` below 21),
//! `SOFTRNIC_E_NOSUPP` (-100001: no usage bit, zero length, a range past the address space),
//! `SOFTRNIC_E_NOMEM` (-100003: no memory for the remote region): librpma's `RPMA_E_*`
//! values. As librpma does, a longer buffer is accepted and its first 21 bytes read. Unlike
//! librpma's opaque `struct rpma_mr_remote`, `struct softrnic_mr_remote` is public
//! ([`SoftrnicMrRemote`]): address, length, R_Key and usage bits, what a WR needs.

use std::ptr::null_mut;

use libc::{c_int, c_void, size_t};
use softrnic_uapi::{DescriptorError, RemoteMr, DESCRIPTOR_LEN};

use crate::abi::objects::ibv_mr;
use crate::export::export;
use crate::ffi::catch;
use crate::live::Live;
use crate::verbs::pd::mr_of;

/// `RPMA_E_INVAL`.
const E_INVAL: c_int = -100_004;

/// `struct softrnic_mr_remote`: a peer's region, as its descriptor tells.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct SoftrnicMrRemote {
    /// `uint64_t addr`: its first address, in the peer's address space.
    addr: u64,
    /// `uint64_t length`.
    length: u64,
    /// `uint32_t rkey`.
    rkey: u32,
    /// `uint8_t usage`: librpma's `RPMA_MR_USAGE_*` bits.
    usage: u8,
}

// ext.h's struct: two u64, a u32, a u8, padded to 24 bytes (the C test asserts the same).
const _: () = assert!(size_of::<SoftrnicMrRemote>() == 24);

/// The remote regions handed out and not deleted.
static REMOTES: Live = Live::new();

export! { "SOFTRNIC_1.0";
    /// `size_t softrnic_mr_descriptor_size(void)`: 21, the size of a descriptor.
    unsafe extern "C" fn softrnic_mr_descriptor_size() -> size_t {
        DESCRIPTOR_LEN
    }
}

export! { "SOFTRNIC_1.0";
    /// `int softrnic_mr_get_descriptor(const struct ibv_mr *mr, void *desc)`: writes the
    /// region's 21-byte descriptor to `desc`. 0, or `SOFTRNIC_E_INVAL` for a NULL `desc` or a
    /// pointer that is not a live MR.
    unsafe extern "C" fn softrnic_mr_get_descriptor(mr: *const ibv_mr, desc: *mut c_void) -> c_int {
        catch(E_INVAL, || {
            let Some(soft) = mr_of(mr) else { return E_INVAL };
            if desc.is_null() {
                return E_INVAL;
            }
            let d = soft.mr.descriptor();
            // SAFETY: the caller passes a buffer of at least 21 writable bytes, as librpma's
            // rpma_mr_get_descriptor requires; it is not Rust memory, so no overlap.
            unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), desc.cast::<u8>(), d.len()) };
            0
        })
    }
}

export! { "SOFTRNIC_1.0";
    /// `int softrnic_mr_remote_from_descriptor(const void *desc, size_t size,
    /// struct softrnic_mr_remote **out)`: parses the descriptor in the `size` bytes at `desc`
    /// into a new remote region (`*out`, freed by `softrnic_mr_remote_delete`). 0, or
    /// `SOFTRNIC_E_INVAL` / `_NOSUPP` / `_NOMEM` (see the module comment), `*out` untouched.
    unsafe extern "C" fn softrnic_mr_remote_from_descriptor(desc: *const c_void, size: size_t, out: *mut *mut SoftrnicMrRemote) -> c_int {
        catch(E_INVAL, || {
            if out.is_null() {
                return E_INVAL;
            }
            let bytes = (!desc.is_null()).then(|| {
                // SAFETY: the caller passes `size` readable bytes at a non-NULL `desc`.
                unsafe { std::slice::from_raw_parts(desc.cast::<u8>(), size) }
            });
            let remote = match RemoteMr::from_descriptor(bytes) {
                Ok(r) => r,
                Err(e) => return e.rpma_code(),
            };
            // malloc, not Box: an allocation failure is reported, not an abort.
            // SAFETY: plain allocation of a Copy struct's size; checked for NULL below.
            let p = unsafe { libc::malloc(size_of::<SoftrnicMrRemote>()) }.cast::<SoftrnicMrRemote>();
            if p.is_null() {
                return DescriptorError::NoMem.rpma_code();
            }
            let value = SoftrnicMrRemote {
                addr: remote.addr,
                length: remote.len,
                rkey: remote.rkey,
                usage: remote.usage.bits(),
            };
            // SAFETY: `p` is a fresh allocation of the struct's size, malloc-aligned (enough
            // for u64); `out` is non-NULL and the caller passes it writable.
            unsafe {
                p.write(value);
                *out = p;
            }
            REMOTES.insert(p);
            0
        })
    }
}

export! { "SOFTRNIC_1.0";
    /// `int softrnic_mr_remote_delete(struct softrnic_mr_remote **mr)`: frees `*mr` and sets
    /// it to NULL (as `rpma_mr_remote_delete`). 0 (also for `*mr` NULL), or
    /// `SOFTRNIC_E_INVAL` for a NULL `mr` or a `*mr` not handed out (or already deleted).
    unsafe extern "C" fn softrnic_mr_remote_delete(mr: *mut *mut SoftrnicMrRemote) -> c_int {
        catch(E_INVAL, || {
            if mr.is_null() {
                return E_INVAL;
            }
            // SAFETY: non-NULL; the caller passes a readable and writable pointer slot.
            let p = unsafe { *mr };
            if p.is_null() {
                return 0;
            }
            if !REMOTES.remove(p) {
                return E_INVAL;
            }
            // SAFETY: `p` was handed out by softrnic_mr_remote_from_descriptor (malloc) and
            // removing it from REMOTES makes this the only free; the slot is writable.
            unsafe {
                libc::free(p.cast());
                *mr = null_mut();
            }
            0
        })
    }
}

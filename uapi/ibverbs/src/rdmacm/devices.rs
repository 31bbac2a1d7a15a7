//! The devices the connection manager uses (rdma-core 44 `librdmacm/cma.c`): `rdma_get_devices`
//! lists an open `ibv_context` per device, the ones `id->verbs` point to, which stay open for
//! the life of the process; `rdma_free_devices` frees the array only.

use libc::c_int;

use super::{fail_null, source};
use crate::abi::context::ibv_context;
use crate::export::export_rdmacm;
use crate::ffi::catch;

export_rdmacm! {
    /// `struct ibv_context **rdma_get_devices(int *num_devices)`: a NULL-terminated array
    /// (from `malloc`) of the library's context on each device the process sees; NULL with
    /// `ENOMEM`, and then `*num_devices` (if given) is 0, as rdma-core.
    unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
        catch(std::ptr::null_mut(), || {
            source::install();
            let all = source::all_contexts();
            let size = (all.len() + 1) * std::mem::size_of::<*mut ibv_context>();
            // SAFETY: malloc of a size that cannot overflow (a handful of devices).
            let list = unsafe { libc::malloc(size) }.cast::<*mut ibv_context>();
            let n = if list.is_null() { 0 } else { all.len() };
            if !num_devices.is_null() {
                // SAFETY: non-NULL; the program passes a writable int.
                unsafe { *num_devices = c_int::try_from(n).unwrap_or(0) };
            }
            if list.is_null() {
                return fail_null(libc::ENOMEM);
            }
            // SAFETY: `list` holds all.len() + 1 pointers.
            unsafe {
                for (i, c) in all.iter().enumerate() {
                    list.add(i).write(*c);
                }
                list.add(all.len()).write(std::ptr::null_mut());
            }
            list
        })
    }
}

export_rdmacm! {
    /// `void rdma_free_devices(struct ibv_context **list)`: frees the array (the contexts
    /// stay open).
    unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
        catch((), || {
            // SAFETY: an array rdma_get_devices allocated with malloc (or NULL).
            unsafe { libc::free(list.cast()) }
        })
    }
}

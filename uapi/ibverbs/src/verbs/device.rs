//! The device list and opening devices: `ibv_get_device_list`, `ibv_free_device_list`,
//! `ibv_get_device_name`, `ibv_get_device_guid`, `ibv_get_device_index`, `ibv_open_device`,
//! `ibv_close_device`.

use std::ptr::null_mut;

use libc::{c_char, c_int};

use crate::abi::context::{ibv_context, ibv_device};
use crate::context;
use crate::devices;
use crate::export::export;
use crate::ffi::{catch, set_errno};

export! { "IBVERBS_1.1";
    /// `struct ibv_device **ibv_get_device_list(int *num_devices)`: a NULL-terminated array
    /// (free it with `ibv_free_device_list`); NULL with `errno` `ENODEV` if `SOFTRNIC_ADDR` is
    /// bad (said on stderr) or the interfaces cannot be read, `ENOMEM` if out of memory.
    unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
        catch(null_mut(), || {
            let devs = match devices::list() {
                Ok(d) => d,
                Err(msg) => {
                    eprintln!("softrnic: {msg}");
                    set_errno(libc::ENODEV);
                    return null_mut();
                }
            };
            // SAFETY: calloc of n+1 pointers; the result is checked for NULL below.
            let list = unsafe { libc::calloc(devs.len() + 1, size_of::<*mut ibv_device>()) }
                .cast::<*mut ibv_device>();
            if list.is_null() {
                set_errno(libc::ENOMEM);
                return null_mut();
            }
            for (i, d) in devs.iter().enumerate() {
                // SAFETY: i < devs.len(), inside the n+1 slots; the last stays NULL.
                unsafe { *list.add(i) = (&d.ibv as *const ibv_device).cast_mut() };
            }
            if !num_devices.is_null() {
                // SAFETY: the caller passes NULL or a writable int.
                unsafe { *num_devices = devs.len() as c_int };
            }
            list
        })
    }
}

export! { "IBVERBS_1.1";
    /// `void ibv_free_device_list(struct ibv_device **list)`.
    unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
        // SAFETY: `list` is NULL or came from ibv_get_device_list's calloc.
        catch((), || unsafe { libc::free(list.cast()) })
    }
}

export! { "IBVERBS_1.1";
    /// `const char *ibv_get_device_name(struct ibv_device *device)`: NULL (`ENODEV`) for a
    /// pointer that is not a softrnic device.
    unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
        catch(std::ptr::null(), || match devices::lookup(device) {
            Some(d) => d.ibv.name.as_ptr(),
            None => {
                set_errno(libc::ENODEV);
                std::ptr::null()
            }
        })
    }
}

export! { "IBVERBS_1.1";
    /// `__be64 ibv_get_device_guid(struct ibv_device *device)`: the node GUID, big-endian;
    /// 0 for an unknown device.
    unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
        catch(0, || devices::lookup(device).map_or(0, |d| d.guid.to_be()))
    }
}

export! { "IBVERBS_1.9";
    /// `int ibv_get_device_index(struct ibv_device *device)`: the interface index; -1 for an
    /// unknown device.
    unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
        catch(-1, || devices::lookup(device).map_or(-1, |d| d.index as c_int))
    }
}

export! { "IBVERBS_1.1";
    /// `struct ibv_context *ibv_open_device(struct ibv_device *device)`: NULL (`ENODEV`) for a
    /// pointer that is not a softrnic device.
    unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
        catch(null_mut(), || match devices::lookup(device) {
            Some(d) => context::open(d),
            None => {
                set_errno(libc::ENODEV);
                null_mut()
            }
        })
    }
}

export! { "IBVERBS_1.1";
    /// `int ibv_close_device(struct ibv_context *context)`: 0, or `EINVAL` for a pointer that
    /// is not an open context. Objects of the context still alive are destroyed with it
    /// (`teardown.rs`), as the kernel destroys a closed verbs file's objects.
    unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
        catch(libc::EIO, || if context::close(context) { 0 } else { libc::EINVAL })
    }
}

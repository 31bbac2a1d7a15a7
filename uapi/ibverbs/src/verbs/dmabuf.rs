//! `ibv_reg_dmabuf_mr` (rdma-core 44 `libibverbs/verbs.c`; `verbs.h`: "Register a dmabuf-based
//! memory region").
//!
//! A dma-buf is a kernel buffer shared between device drivers (typically GPU memory), named by
//! a file descriptor and an offset into it; a hardware NIC registers it so that it can DMA to
//! it directly. softrnic moves data with the CPU through the process's virtual addresses, and
//! a dma-buf need not be mapped into the process at all, so it cannot register one: the verb
//! fails with `errno` `EOPNOTSUPP`, what rdma-core answers for a provider without
//! `reg_dmabuf_mr` (`dummy_ops.c`). A program that has the buffer mapped can register that
//! mapping with `ibv_reg_mr`.

use std::ptr::null_mut;

use libc::{c_int, size_t};

use crate::abi::objects::{ibv_mr, ibv_pd};
use crate::export::export;
use crate::ffi::set_errno;

export! { "IBVERBS_1.12";
    /// `struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *, uint64_t offset, size_t length,
    /// uint64_t iova, int fd, int access)`: NULL with `errno` `EOPNOTSUPP` (see the module
    /// doc).
    unsafe extern "C" fn ibv_reg_dmabuf_mr(pd: *mut ibv_pd, offset: u64, length: size_t, iova: u64, fd: c_int, access: c_int) -> *mut ibv_mr {
        let _ = (pd, offset, length, iova, fd, access);
        set_errno(libc::EOPNOTSUPP);
        null_mut()
    }
}

//! Memory regions over device memory: `ibv_reg_dm_mr(3)` (see `ibv_alloc_dm(3)`).
//!
//! A device memory (DM) region covers `length` bytes of a DM allocation from `dm_offset`.
//! rdma-core requires `IBV_ACCESS_ZERO_BASED` (`ibv_cmd_reg_dm_mr`), so peers and SGEs
//! address it from 0; the rights a DM region may have are those of mlx5, the one provider
//! that implements it (`MLX5_DM_ALLOWED_ACCESS`): local write, remote read/write/atomic,
//! zero-based, and the optional bits. No memory window may bind to it and nothing flushes it.
//!
//! The kernel (`UVERBS_METHOD_DM_MR_REG`) accepts a zero-length region anywhere inside the
//! allocation, unlike `ibv_reg_mr`: a zero-length access is then the only one that passes the
//! bounds check. The memory is the DM's own (allocated by softrnic, never unmapped while a
//! region covers it), so no page is faulted in here.

use super::{Access, MrKeys, MrTable, PdHandle};
use crate::error::{Error, Result};

impl Access {
    /// Every right a device memory region may have (mlx5's `MLX5_DM_ALLOWED_ACCESS`).
    const DEVICE_MEMORY: Access = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ)
        .union(Access::REMOTE_ATOMIC)
        .union(Access::ZERO_BASED)
        .union(Access::OPTIONAL_RANGE);

    /// Checks the rights given to `ibv_reg_dm_mr` and returns them without the optional bits.
    ///
    /// # Errors
    ///
    /// `EINVAL`: `ZERO_BASED` missing, a right other than local write, remote write, read and
    /// atomic, `ZERO_BASED` and `OPTIONAL_RANGE` (what a device memory region may have), or
    /// what [`check_for_mr`](Self::check_for_mr) refuses.
    pub fn check_for_device_memory(self) -> Result<Access> {
        if !self.contains(Access::ZERO_BASED) {
            return Err(Error::InvalidArgument(
                "device memory regions must be zero-based",
            ));
        }
        if !Access::DEVICE_MEMORY.contains(self) {
            return Err(Error::InvalidArgument(
                "access flag not allowed on device memory",
            ));
        }
        self.check_for_mr()
    }
}

impl MrTable {
    /// Registers `len` bytes of device memory at `addr` for `pd` (`ibv_reg_dm_mr`),
    /// addressed from 0. `len` may be 0.
    ///
    /// # Safety
    ///
    /// As [`register`](Self::register): `addr..addr + len` valid for reads and writes until
    /// the region is deregistered; `addr` non-null even for `len` 0.
    ///
    /// # Errors
    ///
    /// - `EINVAL`: bad access flags ([`Access::check_for_device_memory`]); `addr` null;
    ///   `len > isize::MAX` or `addr + len` overflows.
    /// - `ENOMEM`: the table is full.
    pub unsafe fn register_device_memory(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MrKeys> {
        let access = access.check_for_device_memory()?;
        if addr.is_null() {
            return Err(Error::InvalidArgument("null address"));
        }
        if len > isize::MAX as usize || (addr as usize).checked_add(len).is_none() {
            return Err(Error::InvalidArgument("addr + length overflows"));
        }
        self.install(pd, addr, len, 0, access, false)
    }
}

//! File-backed memory regions, and the work requests of IBTA 1.5's FLUSH and ATOMIC WRITE
//! (rdma-core's `ibv_wr_flush` / `ibv_wr_atomic_write`).
//!
//! [`Pd::reg_mr_file`] maps a file (`MAP_SHARED`, read-write, through memmap2) and registers
//! the mapping; the region owns the mapping and unmaps it after deregistration. Such a region
//! may carry `FLUSH_PERSISTENT`: a peer's persistence FLUSH of it is answered only after
//! `msync(MS_SYNC)` of the flushed range has returned (the provider's `mr/persist.rs`), so
//! when the peer's FLUSH completes, the bytes are on the file's storage.
//!
//! As with any shared mapping, what other processes do to the file is outside this API's
//! control: truncating it below the region while registered makes accesses fault (SIGBUS).

use std::fs::File;
use std::path::Path;

use softrnic_provider::mr::Access;
use softrnic_provider::wr::{RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};
use softrnic_provider::{Error, Result};
use softrnic_wire::feth::{Selectivity, PLACEMENT_GLOBAL_VISIBILITY, PLACEMENT_PERSISTENCE};

use crate::context::Pd;
use crate::mr::MemoryRegion;

impl Pd {
    /// Maps the first `len` bytes of `file` (opened read-write) and registers them, as
    /// `ibv_reg_mr` of an `mmap(MAP_SHARED)` of the file. `FLUSH_PERSISTENT` is allowed.
    ///
    /// # Errors
    /// `EINVAL`: `len` 0, the file shorter than `len` (the mapping would fault), a file that
    /// cannot be measured or mapped, or access flags `ibv_reg_mr` refuses; `ENOMEM` if no key
    /// is left.
    pub fn reg_mr_file(&self, file: &File, len: usize, access: Access) -> Result<MemoryRegion> {
        if len == 0 {
            return Err(Error::InvalidArgument("zero-length memory region"));
        }
        let size = file
            .metadata()
            .map_err(|_| Error::InvalidArgument("cannot stat the file"))?
            .len();
        if size < len as u64 {
            return Err(Error::InvalidArgument(
                "the file is shorter than the region",
            ));
        }
        // SAFETY: a shared mapping of `len` bytes the file has; memmap2's caveat (another
        // process truncating or rewriting the file) is the module doc's.
        let mut map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(file) }
            .map_err(|_| Error::InvalidArgument("cannot map the file"))?;
        let addr = map.as_mut_ptr();
        let mrs = self.ctx.inner.device.mrs();
        // SAFETY: the mapping lives in the region and is unmapped only after deregistration
        // (`MemoryRegion::drop`); no Rust reference to its bytes is handed out.
        let keys = unsafe { mrs.register_file(self.handle, addr, len, addr as u64, access)? };
        let mut mr = self.registered(keys, addr, len, access);
        mr.mapping = Some(map);
        Ok(mr)
    }

    /// [`reg_mr_file`](Self::reg_mr_file) of the file at `path`, opened read-write (and
    /// created, then extended to `len` bytes, if it is shorter).
    ///
    /// # Errors
    /// As [`reg_mr_file`](Self::reg_mr_file); `EINVAL` if the file cannot be opened or grown.
    pub fn reg_mr_path(
        &self,
        path: impl AsRef<Path>,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|_| Error::InvalidArgument("cannot open the file"))?;
        let size = file
            .metadata()
            .map_err(|_| Error::InvalidArgument("cannot stat the file"))?
            .len();
        if size < len as u64 {
            file.set_len(len as u64)
                .map_err(|_| Error::InvalidArgument("cannot grow the file"))?;
        }
        self.reg_mr_file(&file, len, access)
    }
}

bitflags::bitflags! {
    /// A FLUSH's placement type (IBTA 1.5 FETH): what the responder makes of the range.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Placement: u8 {
        /// Global visibility: the data is visible to every reader of the responder's memory
        /// (`IBV_FLUSH_GLOBAL`). The region needs `FLUSH_GLOBAL`.
        const GLOBAL_VISIBILITY = PLACEMENT_GLOBAL_VISIBILITY;
        /// Persistence: the data is durable (`IBV_FLUSH_PERSISTENT`). The region needs
        /// `FLUSH_PERSISTENT`, which only file-backed regions get.
        const PERSISTENCE = PLACEMENT_PERSISTENCE;
        /// Both.
        const BOTH = PLACEMENT_GLOBAL_VISIBILITY | PLACEMENT_PERSISTENCE;
    }
}

/// A signaled FLUSH of `len` bytes at `remote` (`ibv_wr_flush`): the provider's encoding of
/// the FETH in `imm_data_or_inv_rkey` and of the length in `compare_add`.
pub fn flush_wr(
    wr_id: u64,
    remote: RemoteAddr,
    len: u32,
    placement: Placement,
    selectivity: Selectivity,
) -> SendWr {
    SendWr {
        wr_id,
        opcode: SendOpcode::Flush,
        flags: SendFlags::SIGNALED,
        sg_list: Vec::new(),
        imm_data_or_inv_rkey: u32::from(placement.bits()) | (selectivity as u32) << 4,
        remote,
        compare_add: u64::from(len),
        swap: 0,
        bind_mw: None,
        ud: None,
        xrc_srqn: 0,
        inline_data: None,
    }
}

/// A signaled ATOMIC WRITE (`ibv_wr_atomic_write`) of the 8 bytes `value` names (one 8-byte
/// SGE; copied when posted) to `remote`, which must be 8-byte aligned.
pub fn atomic_write_wr(wr_id: u64, remote: RemoteAddr, value: Sge) -> SendWr {
    SendWr {
        wr_id,
        opcode: SendOpcode::AtomicWrite,
        flags: SendFlags::SIGNALED,
        sg_list: vec![value],
        imm_data_or_inv_rkey: 0,
        remote,
        compare_add: 0,
        swap: 0,
        bind_mw: None,
        ud: None,
        xrc_srqn: 0,
        inline_data: None,
    }
}

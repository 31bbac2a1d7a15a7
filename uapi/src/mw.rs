//! Memory windows (`ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw`, and the `IBV_WR_BIND_MW` /
//! `IBV_WR_LOCAL_INV` / `IBV_WR_SEND_WITH_INV` work requests): see `softrnic_provider::mr`'s
//! `window.rs` for what the NIC checks.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use softrnic_provider::mr::{Access, MwBind, MwType};
use softrnic_provider::wr::{RemoteAddr, SendFlags, SendOpcode, SendWr};
use softrnic_provider::{Error, Result};

use crate::context::Pd;
use crate::mr::MemoryRegion;
use crate::qp::QueuePair;

/// A memory window (`ibv_mw`). Dropping it deallocates it.
pub struct Mw {
    pd: Pd,
    mw_type: MwType,
    /// The R_Key as of the last bind posted (`mw->rkey`).
    rkey: AtomicU32,
    allocated: bool,
}

/// `ibv_inc_rkey`: the next key byte, same index.
pub fn inc_rkey(rkey: u32) -> u32 {
    rkey & !0xff | (rkey.wrapping_add(1) & 0xff)
}

impl Pd {
    /// `ibv_alloc_mw`.
    ///
    /// # Errors
    /// `ENOMEM` when the key table (regions and windows together) is full.
    pub fn alloc_mw(&self, mw_type: MwType) -> Result<Mw> {
        let rkey = self
            .ctx
            .inner
            .device
            .mrs()
            .alloc_window(self.handle, mw_type)?;
        Ok(Mw {
            pd: self.clone(),
            mw_type,
            rkey: AtomicU32::new(rkey),
            allocated: true,
        })
    }
}

/// The bind of `range` (byte offsets) of `mr`, checked to lie inside it.
fn bind_of(
    mw: u32,
    rkey: u32,
    mr: &MemoryRegion,
    range: Range<usize>,
    access: Access,
) -> Result<MwBind> {
    if range.start > range.end || range.end > mr.len() {
        return Err(Error::InvalidArgument(
            "the range is not inside the memory region",
        ));
    }
    Ok(MwBind {
        mw_rkey: mw,
        rkey,
        mr_lkey: mr.lkey(),
        addr: mr.addr() + range.start as u64,
        length: (range.end - range.start) as u64,
        access,
    })
}

impl Mw {
    /// The R_Key peers use (`mw->rkey`): as of the last bind posted.
    pub fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Acquire)
    }

    /// The window's type.
    pub fn mw_type(&self) -> MwType {
        self.mw_type
    }

    /// A BIND_MW work request for a type 2 window (`IBV_WR_BIND_MW`), giving it `new_rkey`
    /// (only its low 8 bits are the consumer's; `ibv_inc_rkey(mw.rkey())` is the usual
    /// choice) over `range` of `mr` with `access` (remote read, write, atomic). The window's
    /// [`rkey`](Self::rkey) becomes `new_rkey` at once: post the WR before handing it out.
    /// The bind's outcome is its completion (`IBV_WC_BIND_MW`, or `IBV_WC_MW_BIND_ERR`).
    ///
    /// # Errors
    /// `EINVAL` for a type 1 window (bound with [`QueuePair::bind_mw`]) or a range outside
    /// `mr`.
    pub fn bind_wr(
        &self,
        wr_id: u64,
        new_rkey: u32,
        mr: &MemoryRegion,
        range: Range<usize>,
        access: Access,
    ) -> Result<SendWr> {
        if self.mw_type != MwType::Type2 {
            return Err(Error::InvalidArgument(
                "a type 1 window is bound with bind_mw",
            ));
        }
        let new_rkey = self.rkey() & !0xff | new_rkey & 0xff;
        let bind = bind_of(self.rkey(), new_rkey, mr, range, access)?;
        self.rkey.store(new_rkey, Ordering::Release);
        Ok(SendWr {
            bind_mw: Some(bind),
            ud: None,
            xrc_srqn: 0,
            ..plain_wr(wr_id, SendOpcode::BindMw)
        })
    }

    /// `ibv_dealloc_mw`: unbinds the window if bound and frees its key.
    ///
    /// # Errors
    /// `EINVAL` if the NIC no longer knows the window.
    pub fn dealloc(mut self) -> Result<()> {
        self.deallocate()
    }

    fn deallocate(&mut self) -> Result<()> {
        if self.allocated {
            self.allocated = false;
            let mrs = self.pd.ctx.inner.device.mrs();
            mrs.dealloc_window(self.pd.handle, self.rkey())?;
        }
        Ok(())
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        let _ = self.deallocate();
    }
}

/// A signaled WR of `opcode` with nothing else set.
fn plain_wr(wr_id: u64, opcode: SendOpcode) -> SendWr {
    SendWr {
        wr_id,
        opcode,
        flags: SendFlags::SIGNALED,
        sg_list: Vec::new(),
        imm_data_or_inv_rkey: 0,
        remote: RemoteAddr::default(),
        compare_add: 0,
        swap: 0,
        bind_mw: None,
        ud: None,
        xrc_srqn: 0,
        inline_data: None,
    }
}

/// A LOCAL_INV work request (`IBV_WR_LOCAL_INV`) of the type 2 window whose R_Key is `rkey`.
pub fn local_inv_wr(wr_id: u64, rkey: u32) -> SendWr {
    SendWr {
        imm_data_or_inv_rkey: rkey,
        ..plain_wr(wr_id, SendOpcode::LocalInv)
    }
}

impl QueuePair {
    /// `ibv_bind_mw`: binds the type 1 window `mw` to `range` (byte offsets) of `mr` with
    /// `access` (remote read, write, atomic; an empty range unbinds), by posting a BIND_MW on
    /// this QP's send queue. Returns the window's new R_Key (`ibv_inc_rkey` of the old one),
    /// which [`Mw::rkey`] also gives from now on; the bind's outcome is its completion
    /// (`wr_id`, `IBV_WC_BIND_MW` or `IBV_WC_MW_BIND_ERR`).
    ///
    /// # Errors
    /// `EINVAL` for a type 2 window (bound with [`Mw::bind_wr`]), a window or region of another
    /// device, a range outside `mr`, or what `ibv_post_send` refuses.
    pub fn bind_mw(
        &self,
        mw: &Mw,
        mr: &MemoryRegion,
        range: Range<usize>,
        access: Access,
        wr_id: u64,
    ) -> Result<u32> {
        if mw.mw_type != MwType::Type1 {
            return Err(Error::InvalidArgument(
                "a type 2 window is bound with a BIND_MW work request",
            ));
        }
        if !self.same_device(&mw.pd) || !self.same_device(mr.pd()) {
            return Err(Error::InvalidArgument("window or region of another device"));
        }
        let new_rkey = inc_rkey(mw.rkey());
        let bind = bind_of(mw.rkey(), new_rkey, mr, range, access)?;
        let wr = SendWr {
            bind_mw: Some(bind),
            ud: None,
            xrc_srqn: 0,
            ..plain_wr(wr_id, SendOpcode::BindMw)
        };
        self.post_send(&[wr]).map_err(|(_, e)| e)?;
        mw.rkey.store(new_rkey, Ordering::Release);
        Ok(new_rkey)
    }
}

//! librdmacm's `rdma_verbs.h` helpers on a connected QP: register a buffer
//! for messages, for remote reads or for remote writes, and post one-SGE SENDs, receives,
//! RDMA READs and RDMA WRITEs whose user context comes back as the completion's `wr_id`.
//!
//! | librdmacm | here | access |
//! |-----------|------|--------|
//! | `rdma_reg_msgs` | [`Pd::rdma_reg_msgs`] | LOCAL_WRITE |
//! | `rdma_reg_read` | [`Pd::rdma_reg_read`] | LOCAL_WRITE, REMOTE_READ |
//! | `rdma_reg_write` | [`Pd::rdma_reg_write`] | LOCAL_WRITE, REMOTE_WRITE |
//! | `rdma_post_send/recv/read/write` | [`QueuePair::rdma_post_send`] ... | — |
//!
//! The contract is librdmacm's: a posted buffer stays registered until its completion. If the
//! caller breaks it (drops the region first), softrnic's dead-key rule applies: the work
//! request completes with an error status and never touches the freed memory.

use softrnic_provider::mr::Access;
use softrnic_provider::Result;

use crate::context::Pd;
use crate::mr::MemoryRegion;
use crate::qp::QueuePair;
use crate::{RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr};

impl Pd {
    /// `rdma_reg_msgs`: a buffer for SENDs and receives.
    ///
    /// # Errors
    /// As [`Pd::reg_mr`].
    pub fn rdma_reg_msgs(&self, len: usize) -> Result<MemoryRegion> {
        self.reg_mr(len, Access::LOCAL_WRITE)
    }

    /// `rdma_reg_read`: a buffer the peer may RDMA READ (and this side may read into).
    ///
    /// # Errors
    /// As [`Pd::reg_mr`].
    pub fn rdma_reg_read(&self, len: usize) -> Result<MemoryRegion> {
        self.reg_mr(len, Access::LOCAL_WRITE | Access::REMOTE_READ)
    }

    /// `rdma_reg_write`: a buffer the peer may RDMA WRITE.
    ///
    /// # Errors
    /// As [`Pd::reg_mr`].
    pub fn rdma_reg_write(&self, len: usize) -> Result<MemoryRegion> {
        self.reg_mr(len, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
    }
}

impl QueuePair {
    /// `rdma_post_send`: SENDs `len` bytes at `offset` of `mr`; `context` comes back as the
    /// completion's `wr_id`.
    ///
    /// # Errors
    /// As `ibv_post_send`.
    pub fn rdma_post_send(
        &self,
        context: u64,
        mr: &MemoryRegion,
        offset: usize,
        len: u32,
        flags: SendFlags,
    ) -> Result<()> {
        self.post_one(
            context,
            SendOpcode::Send,
            mr,
            offset,
            len,
            flags,
            RemoteAddr::default(),
        )
    }

    /// `rdma_post_recv`: a receive into `len` bytes at `offset` of `mr`.
    ///
    /// # Errors
    /// `EINVAL` if the buffer leaves the region; as `ibv_post_recv`.
    pub fn rdma_post_recv(
        &self,
        context: u64,
        mr: &MemoryRegion,
        offset: usize,
        len: u32,
    ) -> Result<()> {
        let wr = RecvWr {
            wr_id: context,
            sg_list: vec![mr.try_sge(offset, len)?],
        };
        self.post_recv(&[wr]).map_err(|(_, e)| e)
    }

    /// `rdma_post_read`: RDMA READs `len` bytes at `remote_addr` (R_Key `rkey`) into
    /// `offset` of `mr`.
    ///
    /// # Errors
    /// As `ibv_post_send`.
    #[allow(clippy::too_many_arguments)] // librdmacm's own signature
    pub fn rdma_post_read(
        &self,
        context: u64,
        mr: &MemoryRegion,
        offset: usize,
        len: u32,
        flags: SendFlags,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<()> {
        let remote = RemoteAddr {
            addr: remote_addr,
            rkey,
        };
        self.post_one(
            context,
            SendOpcode::RdmaRead,
            mr,
            offset,
            len,
            flags,
            remote,
        )
    }

    /// `rdma_post_write`: RDMA WRITEs `len` bytes at `offset` of `mr` to `remote_addr`
    /// (R_Key `rkey`).
    ///
    /// # Errors
    /// As `ibv_post_send`.
    #[allow(clippy::too_many_arguments)] // librdmacm's own signature
    pub fn rdma_post_write(
        &self,
        context: u64,
        mr: &MemoryRegion,
        offset: usize,
        len: u32,
        flags: SendFlags,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<()> {
        let remote = RemoteAddr {
            addr: remote_addr,
            rkey,
        };
        self.post_one(
            context,
            SendOpcode::RdmaWrite,
            mr,
            offset,
            len,
            flags,
            remote,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn post_one(
        &self,
        context: u64,
        opcode: SendOpcode,
        mr: &MemoryRegion,
        offset: usize,
        len: u32,
        flags: SendFlags,
        remote: RemoteAddr,
    ) -> Result<()> {
        let wr = SendWr {
            wr_id: context,
            opcode,
            flags,
            sg_list: vec![mr.try_sge(offset, len)?],
            imm_data_or_inv_rkey: 0,
            remote,
            compare_add: 0,
            swap: 0,
            bind_mw: None,
            ud: None,
            xrc_srqn: 0,
            inline_data: None,
        };
        self.post_send(&[wr]).map_err(|(_, e)| e)
    }
}

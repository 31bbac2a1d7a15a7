//! Work requests: what a consumer posts to a send or receive queue (IBTA 11.4.1 "Post Send
//! Request", 11.4.2 "Post Receive Request"), with libibverbs' numeric values so that the C ABI
//! converts without tables.

/// A scatter/gather element: `length` bytes at `addr` of the memory region whose lkey is
/// `lkey` (ibv_sge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Start address (the MR's iova space).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the memory region.
    pub lkey: u32,
}

/// The operation of a send work request (ibv_wr_opcode values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SendOpcode {
    /// RDMA WRITE.
    RdmaWrite = 0,
    /// RDMA WRITE with immediate data (consumes a receive WQE at the responder).
    RdmaWriteWithImm = 1,
    /// SEND.
    Send = 2,
    /// SEND with immediate data.
    SendWithImm = 3,
    /// RDMA READ.
    RdmaRead = 4,
    /// Atomic compare and swap.
    AtomicCmpAndSwp = 5,
    /// Atomic fetch and add.
    AtomicFetchAndAdd = 6,
    /// Local invalidate of an MR or type 2 memory window.
    LocalInv = 7,
    /// Bind a type 2 memory window.
    BindMw = 8,
    /// SEND with invalidate of a remote rkey.
    SendWithInv = 9,
    /// FLUSH (IBTA 1.5).
    Flush = 14,
    /// ATOMIC WRITE (IBTA 1.5).
    AtomicWrite = 15,
}

impl SendOpcode {
    /// The opcode for an `ibv_wr_opcode` value, if softrnic knows it.
    pub fn from_raw(v: u32) -> Option<SendOpcode> {
        use SendOpcode::*;
        Some(match v {
            0 => RdmaWrite,
            1 => RdmaWriteWithImm,
            2 => Send,
            3 => SendWithImm,
            4 => RdmaRead,
            5 => AtomicCmpAndSwp,
            6 => AtomicFetchAndAdd,
            7 => LocalInv,
            8 => BindMw,
            9 => SendWithInv,
            14 => Flush,
            15 => AtomicWrite,
            _ => return None,
        })
    }

    /// Whether the operation is an atomic on 8 remote bytes.
    pub const fn is_atomic(self) -> bool {
        matches!(
            self,
            SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd
        )
    }

    /// Whether it is a SEND (plain, with immediate data or with invalidate).
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            SendOpcode::Send | SendOpcode::SendWithImm | SendOpcode::SendWithInv
        )
    }

    /// Whether the operation is done by the local channel interface alone, with no packet
    /// (IBTA 10.6.7: LOCAL_INV and BIND_MW are executed in send queue order).
    pub const fn is_local(self) -> bool {
        matches!(self, SendOpcode::LocalInv | SendOpcode::BindMw)
    }

    /// Whether the operation takes a responder resource (IBTA 9.5: RDMA READ and atomics
    /// count against max_rd_atomic / max_dest_rd_atomic).
    pub const fn uses_rd_atomic_resource(self) -> bool {
        matches!(
            self,
            SendOpcode::RdmaRead
                | SendOpcode::AtomicCmpAndSwp
                | SendOpcode::AtomicFetchAndAdd
                | SendOpcode::Flush
                | SendOpcode::AtomicWrite
        )
    }
}

bitflags::bitflags! {
    /// Send flags (ibv_send_flags bits).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct SendFlags: u32 {
        /// Wait for prior RDMA READs and atomics to complete before starting this request.
        const FENCE = 1 << 0;
        /// Generate a completion for this request (implied by sq_sig_all).
        const SIGNALED = 1 << 1;
        /// Set the Solicited Event bit of the last packet.
        const SOLICITED = 1 << 2;
        /// The SGEs' bytes are copied at post time; their lkeys are not checked.
        const INLINE = 1 << 3;
    }
}

/// Where an RDMA operation lands at the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// A send work request (ibv_send_wr, for RC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// The consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub opcode: SendOpcode,
    /// Flags.
    pub flags: SendFlags,
    /// Local buffers: gathered for SEND/WRITE, scattered into for READ and atomics (8 bytes).
    pub sg_list: Vec<Sge>,
    /// Immediate data (network byte order as the consumer gave it), or the rkey to invalidate
    /// for SEND_WITH_INV.
    pub imm_data_or_inv_rkey: u32,
    /// Target of RDMA WRITE/READ and atomics.
    pub remote: RemoteAddr,
    /// Compare operand (CmpSwap) or add operand (FetchAdd).
    pub compare_add: u64,
    /// Swap operand (CmpSwap).
    pub swap: u64,
    /// The bind of a BIND_MW (`ibv_send_wr.bind_mw`: the window, its new R_Key and the
    /// `ibv_mw_bind_info`); `None` for every other operation.
    pub bind_mw: Option<crate::mr::MwBind>,
    /// Where a UD SEND goes (`ibv_send_wr.wr.ud`); `None` on connected QPs.
    pub ud: Option<UdDest>,
    /// The XRC SRQ number at the target an XRC INI QP's message goes to
    /// (`ibv_send_wr.qp_type.xrc.remote_srqn`, carried in the XRCETH); 0 on other QPs.
    pub xrc_srqn: u32,
    /// The bytes of an inline request (or the 8 of an ATOMIC WRITE), copied by the caller out
    /// of its own memory at post time: inline data needs no lkey (ibv_post_send(3)), so the C
    /// ABI, which may read the program's memory, hands the bytes over. When set, they are the
    /// message (the request is inline, `sg_list` is not read); `None`: with
    /// [`SendFlags::INLINE`] the provider copies `sg_list` itself through the key table, which
    /// reads only registered memory of the QP's PD.
    pub inline_data: Option<InlineData>,
}

/// Inline data as a work request carries it: up to 64 bytes (a short message, such as a
/// ping-pong's) in place, longer on the heap.
pub type InlineData = smallvec::SmallVec<[u8; 64]>;

impl SendWr {
    /// A WR of `opcode` over `sg_list`, unsignaled, with no flags, no remote address, no
    /// immediate data and no operands (a struct update fills in what an operation needs).
    pub fn new(wr_id: u64, opcode: SendOpcode, sg_list: Vec<Sge>) -> SendWr {
        SendWr {
            wr_id,
            opcode,
            flags: SendFlags::empty(),
            sg_list,
            imm_data_or_inv_rkey: 0,
            remote: RemoteAddr { addr: 0, rkey: 0 },
            compare_add: 0,
            swap: 0,
            bind_mw: None,
            ud: None,
            xrc_srqn: 0,
            inline_data: None,
        }
    }

    /// The message's length: its inline bytes' if it carries them, else its SGEs' total;
    /// `None` beyond 2^31 bytes (IBTA: a message is at most 2^31 bytes).
    pub fn message_len(&self) -> Option<u32> {
        match &self.inline_data {
            Some(bytes) => u32::try_from(bytes.len()).ok().filter(|&n| n <= 1 << 31),
            None => total_len(&self.sg_list),
        }
    }

    /// Whether the message is copied at post time: [`SendFlags::INLINE`] or bytes given.
    pub fn is_inline(&self) -> bool {
        self.flags.contains(SendFlags::INLINE) || self.inline_data.is_some()
    }
}

/// The destination of a UD send work request (`ibv_send_wr.wr.ud`): the address handle's
/// peer, the remote QP number and the Q_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// The peer's IP address (the address handle's destination GID).
    pub dest: std::net::IpAddr,
    /// `remote_qpn` (24 bits).
    pub remote_qpn: u32,
    /// `remote_qkey`; with its high bit set the QP's own Q_Key is sent instead.
    pub remote_qkey: u32,
}

/// A receive work request (ibv_recv_wr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// The consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// Where an incoming SEND's payload is scattered.
    pub sg_list: Vec<Sge>,
}

/// An SGE list as a queued WQE keeps it: up to [`SGES_INLINE`] SGEs in place, more on the heap,
/// so that posting a WR with a short list allocates nothing.
pub type SgeList = smallvec::SmallVec<[Sge; SGES_INLINE]>;

/// SGEs a queued WQE holds without allocating.
pub const SGES_INLINE: usize = 2;

/// A posted receive WR as a receive queue keeps it (the QP's own RQ or an SRQ): its SGEs, their
/// total length, and the PD they are checked against (the QP's, or the SRQ's).
#[derive(Debug, Clone)]
pub struct RecvWqe {
    /// The consumer's identifier.
    pub wr_id: u64,
    /// Where the payload goes.
    pub sges: SgeList,
    /// The sum of the SGE lengths.
    pub total: u32,
    /// The protection domain of the queue it was posted to.
    pub pd: crate::mr::PdHandle,
}

impl RecvWqe {
    /// Checks `wr` (at most `max_sge` SGEs, at most 2^31 bytes) and keeps it for `pd`.
    ///
    /// # Errors
    /// `EINVAL` for too many SGEs or a buffer over 2^31 bytes.
    pub fn new(wr: &RecvWr, max_sge: u32, pd: crate::mr::PdHandle) -> crate::Result<RecvWqe> {
        if wr.sg_list.len() > max_sge as usize {
            return Err(crate::Error::InvalidArgument("more SGEs than max_sge"));
        }
        let total = total_len(&wr.sg_list).ok_or(crate::Error::InvalidArgument(
            "receive buffer longer than 2^31 bytes",
        ))?;
        Ok(RecvWqe {
            wr_id: wr.wr_id,
            sges: SgeList::from_slice(&wr.sg_list),
            total,
            pd,
        })
    }
}

/// The total length of a list of SGEs, or `None` if it overflows 2^31 (IBTA: a message is at
/// most 2^31 bytes).
pub fn total_len(sges: &[Sge]) -> Option<u32> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    (total <= 1 << 31).then_some(total as u32)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn opcodes_round_trip_their_ibverbs_values() {
        for v in 0..32 {
            if let Some(op) = SendOpcode::from_raw(v) {
                assert_eq!(op as u32, v);
            }
        }
        assert_eq!(SendOpcode::from_raw(10), None, "TSO is not for RC");
        assert!(SendOpcode::AtomicFetchAndAdd.is_atomic());
        assert!(SendOpcode::RdmaRead.uses_rd_atomic_resource());
        assert!(!SendOpcode::Send.uses_rd_atomic_resource());
        assert!(SendOpcode::LocalInv.is_local() && SendOpcode::BindMw.is_local());
        assert!(!SendOpcode::SendWithInv.is_local());
    }

    #[test]
    fn message_length_limit() {
        let sge = |length| Sge {
            addr: 0,
            length,
            lkey: 1,
        };
        assert_eq!(total_len(&[]), Some(0));
        assert_eq!(total_len(&[sge(10), sge(20)]), Some(30));
        assert_eq!(total_len(&[sge(1 << 30), sge(1 << 30)]), Some(1 << 31));
        assert_eq!(total_len(&[sge(1 << 31), sge(1)]), None);
    }
}

//! Work completions (IBTA 11.4.2.1 "Poll for Completion"), with libibverbs' numeric values for
//! `ibv_wc_status`, `ibv_wc_opcode` and `ibv_wc_flags`.

/// The status of a completion (ibv_wc_status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum WcStatus {
    /// The operation completed successfully.
    Success = 0,
    /// Local length error: a message did not fit the receive buffer, or an SGE list too long.
    LocLenErr = 1,
    /// Local QP operation error: an internal consistency error of the QP.
    LocQpOpErr = 2,
    /// Local protection error: an lkey, PD or access-right check of a local buffer failed.
    LocProtErr = 4,
    /// The QP entered the error state before this request completed.
    WrFlushErr = 5,
    /// Memory window bind error.
    MwBindErr = 6,
    /// Bad response: an unexpected opcode in a response.
    BadRespErr = 7,
    /// Local access error: a protection error on a local buffer of an incoming RDMA WRITE
    /// with immediate.
    LocAccessErr = 8,
    /// The responder found the request invalid (NAK invalid request).
    RemInvReqErr = 9,
    /// The responder refused the access (NAK remote access error).
    RemAccessErr = 10,
    /// The responder could not complete the operation (NAK remote operational error).
    RemOpErr = 11,
    /// The transport retry counter was exceeded (no ACK in time, retry_cnt times).
    RetryExcErr = 12,
    /// The RNR retry counter was exceeded.
    RnrRetryExcErr = 13,
    /// A fatal error.
    FatalErr = 19,
    /// A general error.
    GeneralErr = 21,
}

/// The operation a completion reports (ibv_wc_opcode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum WcOpcode {
    /// SEND (send queue).
    Send = 0,
    /// RDMA WRITE.
    RdmaWrite = 1,
    /// RDMA READ.
    RdmaRead = 2,
    /// Compare and swap.
    CompSwap = 3,
    /// Fetch and add.
    FetchAdd = 4,
    /// Memory window bind.
    BindMw = 5,
    /// Local invalidate.
    LocalInv = 6,
    /// FLUSH.
    Flush = 8,
    /// ATOMIC WRITE.
    AtomicWrite = 9,
    /// A receive completed (a SEND arrived).
    Recv = 1 << 7,
    /// An RDMA WRITE with immediate data arrived.
    RecvRdmaWithImm = (1 << 7) + 1,
}

bitflags::bitflags! {
    /// Completion flags (ibv_wc_flags bits).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct WcFlags: u32 {
        /// A GRH precedes the payload (UD).
        const GRH = 1 << 0;
        /// `imm_data` is valid.
        const WITH_IMM = 1 << 1;
        /// `invalidated_rkey` is valid.
        const WITH_INV = 1 << 3;
    }
}

/// One completion (ibv_wc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The wr_id of the completed work request.
    pub wr_id: u64,
    /// Its status.
    pub status: WcStatus,
    /// Its operation (valid when `status` is `Success`; set anyway where known).
    pub opcode: WcOpcode,
    /// Vendor error code (0).
    pub vendor_err: u32,
    /// Bytes transferred (receives: bytes of the message; READ/atomics: bytes read).
    pub byte_len: u32,
    /// Immediate data, or the invalidated rkey (see `wc_flags`).
    pub imm_data_or_inv_rkey: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// The remote QP number (UD; RC sets the connected peer's).
    pub src_qp: u32,
    /// Flags.
    pub wc_flags: WcFlags,
}

impl WorkCompletion {
    /// An error completion for `wr_id` (flush or failure): opcode as known, nothing else valid.
    pub fn error(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> Self {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            vendor_err: 0,
            byte_len: 0,
            imm_data_or_inv_rkey: 0,
            qp_num,
            src_qp: 0,
            wc_flags: WcFlags::default(),
        }
    }
}

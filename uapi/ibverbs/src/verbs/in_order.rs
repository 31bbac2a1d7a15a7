//! `ibv_query_qp_data_in_order` (rdma-core 44 `libibverbs/verbs.c`, man page
//! `ibv_query_qp_data_in_order(3)`).
//!
//! The man page: it "checks whether WQE data is guaranteed to be written in-order, and thus
//! reader may poll for data instead of poll for completion", within each WQE, at the
//! receiving side; it returns 1 if so, 0 otherwise. A reader polling the last byte of an
//! RDMA WRITE or SEND relies on every earlier byte being in memory once that one is.
//!
//! softrnic does not guarantee that, so the answer is always 0 (rdma-core's answer for a
//! provider without the operation too). Its responder places a message packet by packet in
//! PSN order (a packet out of sequence is dropped, never placed early), so whole packets do
//! land in order; but each packet's payload is one `memcpy` into the region
//! (`provider/src/qp/inbound.rs`, `InMessage::place`), and a `memcpy` promises nothing about
//! the order of its stores: glibc's vector copies of a few hundred bytes and more store the
//! first vector after the rest, and `rep movsb` may retire its stores out of order. So the
//! last byte of a message can be visible while the first bytes of its last packet are not
//! yet. (Reads, the third kind of operation the man page names, land in the requester's
//! memory the same way.)

use libc::{c_int, c_uint};

use crate::abi::objects::ibv_qp;
use crate::export::export;

export! { "IBVERBS_1.14";
    /// `int ibv_query_qp_data_in_order(struct ibv_qp *, enum ibv_wr_opcode op, uint32_t
    /// flags)`: 0, data is not guaranteed to be written in order, for every QP and
    /// operation (see the module doc).
    unsafe extern "C" fn ibv_query_qp_data_in_order(qp: *mut ibv_qp, op: c_uint, flags: u32) -> c_int {
        let _ = (qp, op, flags);
        0
    }
}

//! Extended QPs: the `verbs_context.create_qp_ex` op that verbs.h's inline `ibv_create_qp_ex`
//! calls, `ibv_qp_to_qp_ex`, and the `ibv_qp_ex` work-request builder (`ibv_wr_start`,
//! `ibv_wr_<opcode>`, `ibv_wr_set_sge(_list)`, `ibv_wr_set_inline_data(_list)`,
//! `ibv_wr_complete`, `ibv_wr_abort`).
//!
//! Every QP is a [`SoftQp`]: its `ibv_qp` is followed by a [`QpEx`], whose first field is the
//! tail of `struct ibv_qp_ex`, so the `ibv_qp_ex` of a QP is the QP's own address. A QP made
//! with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` has the builder ops; `ibv_qp_to_qp_ex` of any other
//! QP is NULL (as in rdma-core). The builder collects softrnic [`SendWr`]s in a batch that
//! `wr_complete` posts with one `post_send` (returning its errno) and `wr_abort` drops; a
//! builder call that cannot be honoured (no `wr_start`, an opcode the QP was not created
//! for, an SGE setter before any opcode, inline data beyond
//! [`softrnic_uapi::MAX_INLINE`] (`ENOMEM`), a bind that cannot be made, TSO, an XRC SRQ
//! number on a QP that is not XRC) makes the batch fail: `wr_complete` then posts nothing and returns the errno.
//!
//! Inline data (`wr_set_inline_data*`) and the 8-byte operand of `wr_atomic_write` are copied
//! into the WR's `inline_data` when the builder call is made, as verbs requires (the
//! application may reuse the buffer at once).

use std::cell::UnsafeCell;
use std::ptr::null_mut;
use std::sync::Mutex;

use libc::{c_int, c_void, size_t};
use softrnic_uapi::{InlineData, QpType, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};

use crate::abi::context::ibv_context;
use crate::abi::ex::*;
use crate::abi::objects::{ibv_ah, ibv_mw, ibv_qp};
use crate::abi::qp_attr::ibv_qp_init_attr;
use crate::abi::wr::{ibv_mw_bind_info, ibv_send_wr_ud, ibv_sge};
use crate::export::export;
use crate::ffi::{catch, set_errno};
use crate::verbs::ah::ud_dest;
use crate::verbs::pd::pd_of;
use crate::verbs::post::copy_inline;
use crate::verbs::qp::{ibv_create_qp, qp_of, SoftQp};

/// `IBV_QP_EX_WITH_LOCAL_INV`.
const WITH_LOCAL_INV: u64 = 1 << 7;
/// `WITH_BIND_MW`.
const WITH_BIND_MW: u64 = 1 << 8;
/// `IBV_QP_EX_WITH_SEND_WITH_INV`.
const WITH_SEND_WITH_INV: u64 = 1 << 9;
/// `IBV_QP_EX_WITH_ATOMIC_WRITE`.
const WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `IBV_QP_INIT_ATTR_CREATE_FLAGS` (`enum ibv_qp_init_attr_mask`).
const INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;

/// The send ops an RC QP's builder has: every RC operation softrnic performs (TSO is
/// `EOPNOTSUPP`).
const RC_SEND_OPS: u64 = WITH_BIND_MW
    | IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | WITH_LOCAL_INV
    | WITH_SEND_WITH_INV
    | WITH_ATOMIC_WRITE;

/// The send ops of a UC QP: SEND and RDMA WRITE, with or without immediate, the operations
/// with UC opcodes (IBTA vol. 1 §9.2.1, table 38: UC has no READ, ATOMIC or
/// SEND-with-Invalidate packets).
const UC_SEND_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM;

/// The send ops of a UD QP: SEND, with or without immediate (IBTA vol. 1 §9.2.1, table 38).
/// Each WR names its destination with `wr_set_ud_addr`.
const UD_SEND_OPS: u64 = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

/// The send ops a builder of a `qp_type` QP may be created with; `None` for a type without a
/// builder.
fn supported_send_ops(qp_type: u32) -> Option<u64> {
    [
        (QpType::Rc, RC_SEND_OPS),
        (QpType::Uc, UC_SEND_OPS),
        (QpType::Ud, UD_SEND_OPS),
        // An XRC INI QP is an RC requester (annex A14); each WR names its SRQ with
        // `wr_set_xrc_srqn`.
        (QpType::XrcSend, RC_SEND_OPS & !WITH_ATOMIC_WRITE),
    ]
    .into_iter()
    .find(|(t, _)| t.ibv() == qp_type)
    .map(|(_, ops)| ops)
}

/// The send flags a builder WR takes from `wr_flags`: FENCE, SIGNALED, SOLICITED (INLINE is
/// set by `wr_set_inline_data*`).
const WR_FLAGS: u32 = 0x7;

/// The WRs between `wr_start` and `wr_complete`.
#[derive(Default)]
struct Batch {
    /// Inside `wr_start` ... `wr_complete`/`wr_abort`.
    open: bool,
    /// The first error of a builder call, reported by `wr_complete`.
    err: c_int,
    wrs: Vec<SendWr>,
}

/// The extended part of a QP, right after its `ibv_qp`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct QpEx {
    /// The C fields of `ibv_qp_ex` after the `ibv_qp` head; the application writes `wr_id`
    /// and `wr_flags` itself, hence the cell.
    c: UnsafeCell<ibv_qp_ex_tail>,
    /// `send_ops_flags` of the creation; 0 for a QP without the builder.
    send_ops: u64,
    batch: Mutex<Batch>,
}

// SAFETY: `c` is written only by `create_qp_ex` before the QP is published and by the
// application (`wr_id`, `wr_flags`), which verbs forbids to race with the builder calls that
// read it; everything else is behind the mutex.
unsafe impl Sync for QpEx {}

/// The builder ops, all of them set (the inline `ibv_wr_*` call them without a NULL check;
/// the unsupported ones fail the batch with `EOPNOTSUPP`).
fn builder_ops() -> ibv_qp_ex_tail {
    ibv_qp_ex_tail {
        wr_atomic_cmp_swp: Some(wr_atomic_cmp_swp),
        wr_atomic_fetch_add: Some(wr_atomic_fetch_add),
        wr_bind_mw: Some(wr_bind_mw),
        wr_local_inv: Some(wr_local_inv),
        wr_rdma_read: Some(wr_rdma_read),
        wr_rdma_write: Some(wr_rdma_write),
        wr_rdma_write_imm: Some(wr_rdma_write_imm),
        wr_send: Some(wr_send),
        wr_send_imm: Some(wr_send_imm),
        wr_send_inv: Some(wr_send_inv),
        wr_send_tso: Some(wr_send_tso),
        wr_set_ud_addr: Some(wr_set_ud_addr),
        wr_set_xrc_srqn: Some(wr_set_xrc_srqn),
        wr_set_inline_data: Some(wr_set_inline_data),
        wr_set_inline_data_list: Some(wr_set_inline_data_list),
        wr_set_sge: Some(wr_set_sge),
        wr_set_sge_list: Some(wr_set_sge_list),
        wr_start: Some(wr_start),
        wr_complete: Some(wr_complete),
        wr_abort: Some(wr_abort),
        wr_atomic_write: Some(wr_atomic_write),
        ..Default::default()
    }
}

/// Runs `f` on the batch of the live QP `qp` with its `wr_id`/`wr_flags`; nothing for a
/// pointer that is not a live QP with a builder.
fn with_batch(qp: *mut ibv_qp_ex, f: impl FnOnce(&SoftQp, &mut Batch, u64, u32)) {
    catch((), || {
        let Some(soft) = qp_of(qp.cast::<ibv_qp>()) else {
            return;
        };
        if soft.ex.send_ops == 0 {
            return;
        }
        // SAFETY: a live QP's cell; the application does not write `wr_id`/`wr_flags`
        // while it calls the builder (verbs: one thread per QP's builder).
        let (wr_id, flags) = unsafe {
            let c = &*soft.ex.c.get();
            (c.wr_id, c.wr_flags)
        };
        let mut b = soft.ex.batch.lock().unwrap_or_else(|p| p.into_inner());
        f(soft, &mut b, wr_id, flags);
    })
}

impl Batch {
    /// Fails the batch with `e` (the first error is kept).
    fn fail(&mut self, e: c_int) {
        if self.err == 0 {
            self.err = e;
        }
    }

    /// Empties the batch, open or not.
    fn reset(&mut self, open: bool) {
        self.wrs.clear();
        self.err = 0;
        self.open = open;
    }

    /// The WR the SGE setters apply to, or `None` after failing the batch.
    fn last(&mut self) -> Option<&mut SendWr> {
        if self.wrs.is_empty() {
            self.fail(libc::EINVAL);
        }
        self.wrs.last_mut()
    }
}

/// Starts a WR of `opcode` (needing the creation flag `op`) with `remote`, `imm`, operands.
fn start_wr(
    qp: *mut ibv_qp_ex,
    op: u64,
    opcode: SendOpcode,
    remote: RemoteAddr,
    imm: u32,
    compare_add: u64,
    swap: u64,
) {
    with_batch(qp, |soft, b, wr_id, flags| {
        if !b.open {
            return b.fail(libc::EINVAL);
        }
        if soft.ex.send_ops & op == 0 {
            return b.fail(libc::EOPNOTSUPP);
        }
        b.wrs.push(SendWr {
            wr_id,
            opcode,
            flags: SendFlags::from_bits_retain(flags & WR_FLAGS),
            sg_list: Vec::new(),
            imm_data_or_inv_rkey: imm,
            remote,
            compare_add,
            swap,
            bind_mw: None,
            ud: None,
            xrc_srqn: 0,
            inline_data: None,
        });
    });
}

fn remote(rkey: u32, addr: u64) -> RemoteAddr {
    RemoteAddr { addr, rkey }
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    let op = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
    start_wr(
        qp,
        op,
        SendOpcode::AtomicCmpAndSwp,
        remote(rkey, addr),
        0,
        compare,
        swap,
    );
}
unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    let op = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    start_wr(
        qp,
        op,
        SendOpcode::AtomicFetchAndAdd,
        remote(rkey, addr),
        0,
        add,
        0,
    );
}
unsafe extern "C" fn wr_local_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    start_wr(
        qp,
        WITH_LOCAL_INV,
        SendOpcode::LocalInv,
        RemoteAddr::default(),
        rkey,
        0,
        0,
    );
}
unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    let op = IBV_QP_EX_WITH_RDMA_READ;
    start_wr(qp, op, SendOpcode::RdmaRead, remote(rkey, addr), 0, 0, 0);
}
unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    let op = IBV_QP_EX_WITH_RDMA_WRITE;
    start_wr(qp, op, SendOpcode::RdmaWrite, remote(rkey, addr), 0, 0, 0);
}
/// `imm_data` is `__be32`; softrnic keeps it as the wire value (as `post_send` does).
unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    let op = IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    let imm = u32::from_be(imm);
    start_wr(
        qp,
        op,
        SendOpcode::RdmaWriteWithImm,
        remote(rkey, addr),
        imm,
        0,
        0,
    );
}
unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    let op = IBV_QP_EX_WITH_SEND;
    start_wr(qp, op, SendOpcode::Send, RemoteAddr::default(), 0, 0, 0);
}
unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm: u32) {
    let op = IBV_QP_EX_WITH_SEND_WITH_IMM;
    let imm = u32::from_be(imm);
    start_wr(
        qp,
        op,
        SendOpcode::SendWithImm,
        RemoteAddr::default(),
        imm,
        0,
        0,
    );
}
unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    let op = WITH_SEND_WITH_INV;
    start_wr(
        qp,
        op,
        SendOpcode::SendWithInv,
        RemoteAddr::default(),
        rkey,
        0,
        0,
    );
}

/// An `ATOMIC WRITE` of the 8 bytes at `value` (copied now).
unsafe extern "C" fn wr_atomic_write(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    addr: u64,
    value: *const c_void,
) {
    let op = WITH_ATOMIC_WRITE;
    start_wr(qp, op, SendOpcode::AtomicWrite, remote(rkey, addr), 0, 0, 0);
    with_batch(qp, |_, b, _, _| {
        if b.err != 0 {
            return;
        }
        if value.is_null() {
            return b.fail(libc::EINVAL);
        }
        // SAFETY: the caller passes 8 readable bytes at non-NULL `value`.
        let v = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), 8) };
        if let Some(w) = b.last() {
            w.inline_data = Some(InlineData::from_slice(v));
        }
    });
}

/// A bind of the type 2 window `mw` to `info` with the new R_Key `rkey` (`IBV_WR_BIND_MW`;
/// `mw->rkey` is the new key from now, as `ibv_post_send` does it). `EINVAL` as that post:
/// a bad window, MR or range, a type 1 window, or a NULL `info`.
unsafe extern "C" fn wr_bind_mw(
    qp: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    with_batch(qp, |soft, b, wr_id, flags| {
        if !b.open {
            return b.fail(libc::EINVAL);
        }
        if soft.ex.send_ops & WITH_BIND_MW == 0 {
            return b.fail(libc::EOPNOTSUPP);
        }
        if info.is_null() {
            return b.fail(libc::EINVAL);
        }
        // SAFETY: non-NULL; the caller passes a readable ibv_mw_bind_info.
        let info = unsafe { &*info };
        match crate::verbs::mw::bind(
            wr_id,
            mw,
            rkey,
            info,
            SendFlags::from_bits_retain(flags & WR_FLAGS),
        ) {
            Ok(wr) => b.wrs.push(wr),
            Err(e) => b.fail(e),
        }
    });
}

/// TSO, which softrnic does not support (no raw packet QPs): it fails the batch.
unsafe extern "C" fn wr_send_tso(qp: *mut ibv_qp_ex, _hdr: *mut c_void, _sz: u16, _mss: u16) {
    with_batch(qp, |_, b, _, _| b.fail(libc::EOPNOTSUPP));
}

/// `wr_set_xrc_srqn`: the XRC SRQ at the target of the last WR of an XRC INI QP (as
/// `post_send`'s `qp_type.xrc.remote_srqn`); `EOPNOTSUPP` on a QP of another type.
unsafe extern "C" fn wr_set_xrc_srqn(qp: *mut ibv_qp_ex, srqn: u32) {
    with_batch(qp, |soft, b, _, _| {
        if soft.qp.qp_type() != QpType::XrcSend {
            return b.fail(libc::EOPNOTSUPP);
        }
        if let Some(w) = b.last() {
            w.xrc_srqn = srqn;
        }
    });
}

/// `wr_set_ud_addr`: the destination of the last WR of a UD QP (the AH, the remote QPN and
/// the Q_Key, whose high bit selects the QP's own Q_Key as `post_send`'s `wr.ud` does).
/// `EINVAL` for an AH that is not live, `EOPNOTSUPP` on a QP of another type.
unsafe extern "C" fn wr_set_ud_addr(qp: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    with_batch(qp, |soft, b, _, _| {
        if soft.qp.qp_type() != QpType::Ud {
            return b.fail(libc::EOPNOTSUPP);
        }
        let ud = ibv_send_wr_ud {
            ah,
            remote_qpn: qpn,
            remote_qkey: qkey,
        };
        let dest = match ud_dest(&ud) {
            Ok(d) => d,
            Err(e) => return b.fail(e),
        };
        if let Some(w) = b.last() {
            w.ud = Some(dest);
        }
    });
}
unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    with_batch(qp, |_, b, _, _| {
        if let Some(w) = b.last() {
            w.sg_list.clear();
            w.sg_list.push(Sge { addr, length, lkey });
        }
    });
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, num: size_t, list: *const ibv_sge) {
    with_batch(qp, |soft, b, _, _| {
        // `num` is checked before it says how far to read.
        if (num > 0 && list.is_null()) || num > soft.init.cap.max_send_sge as usize {
            return b.fail(libc::EINVAL);
        }
        let Some(w) = b.last() else { return };
        w.sg_list.clear();
        if num > 0 {
            // SAFETY: the caller passes `num` readable SGEs at non-NULL `list`.
            let l = unsafe { std::slice::from_raw_parts(list, num) };
            w.sg_list.extend(l.iter().map(|s| Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            }));
        }
    });
}

/// Sets the last WR's data to a copy of the buffers `bufs`, inline (see the module doc).
fn set_inline(qp: *mut ibv_qp_ex, bufs: &[ibv_data_buf]) {
    with_batch(qp, |_, b, _, _| {
        if b.last().is_none() {
            return;
        }
        let parts = bufs
            .iter()
            .map(|d| (d.addr.cast_const().cast::<u8>(), d.length));
        // SAFETY: the caller passes `length` readable bytes at each non-NULL `addr`.
        let bytes = match unsafe { copy_inline(parts, None) } {
            Ok(Some(bytes)) => bytes,
            Err(e) => return b.fail(e),
            // mlx5's builder says ENOMEM for inline data beyond what a WQE holds.
            Ok(None) => return b.fail(libc::ENOMEM),
        };
        if let Some(w) = b.last() {
            w.sg_list.clear();
            w.inline_data = Some(bytes);
            w.flags |= SendFlags::INLINE;
        }
    });
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: size_t) {
    set_inline(qp, &[ibv_data_buf { addr, length }]);
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    num: size_t,
    list: *const ibv_data_buf,
) {
    if num == 0 {
        return set_inline(qp, &[]);
    }
    if list.is_null() {
        return with_batch(qp, |_, b, _, _| b.fail(libc::EINVAL));
    }
    // SAFETY: the caller passes `num` readable buffers at non-NULL `list`.
    set_inline(qp, unsafe { std::slice::from_raw_parts(list, num) });
}

/// `wr_start`: an empty batch (dropping one left open).
unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    with_batch(qp, |_, b, _, _| b.reset(true));
}

/// `wr_complete`: posts the batch; 0, the batch's error (nothing posted), `post_send`'s errno
/// (the WRs before the refused one are posted), or `EINVAL` for a bad QP or no `wr_start`.
unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    let mut r = libc::EINVAL;
    with_batch(qp, |soft, b, _, _| {
        r = if !b.open {
            libc::EINVAL
        } else if b.err != 0 {
            b.err
        } else {
            match soft.qp.post_send(&b.wrs) {
                Ok(()) => 0,
                Err((_, e)) => e.errno(),
            }
        };
        b.reset(false);
    });
    r
}

/// `wr_abort`: drops the batch.
unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    with_batch(qp, |_, b, _, _| b.reset(false));
}

/// NULL with `errno = e`.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

/// `verbs_context.create_qp_ex`: `ibv_create_qp` on `attr->pd` (required), with the builder
/// when `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` is set. NULL with `errno`: `EINVAL` for a NULL
/// attr, a missing or bad PD or a PD of another context (and `ibv_create_qp`'s errors);
/// `EOPNOTSUPP` for other `comp_mask` bits, a non-empty `create_flags`, or send ops beyond
/// those of the QP type ([`supported_send_ops`]; none for types other than RC, UC and UD).
pub(crate) unsafe extern "C" fn op_create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    catch(null_mut(), || {
        if attr.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: non-NULL; the caller passes a readable ibv_qp_init_attr_ex.
        let a = unsafe { *attr };
        if a.qp_type == QpType::XrcRecv.ibv() {
            // SAFETY: `attr` is readable (forwarded).
            return unsafe { crate::verbs::xrc::create_recv_qp(context, attr) };
        }
        let known = IBV_QP_INIT_ATTR_PD | INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        if a.comp_mask & !known != 0 {
            return fail(libc::EOPNOTSUPP);
        }
        // No creation flag is honoured (they ask for device features: loopback blocking,
        // FCS scatter, VLAN stripping, a source QPN, ...); an empty set is no request.
        if a.comp_mask & INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0 {
            return fail(libc::EOPNOTSUPP);
        }
        let Some(pd) = pd_of(a.pd).filter(|_| a.comp_mask & IBV_QP_INIT_ATTR_PD != 0) else {
            return fail(libc::EINVAL);
        };
        if pd.ibv.context != context {
            return fail(libc::EINVAL);
        }
        let send_ops = if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
            let supported = supported_send_ops(a.qp_type).unwrap_or(0);
            if a.send_ops_flags & !supported != 0 {
                return fail(libc::EOPNOTSUPP);
            }
            a.send_ops_flags
        } else {
            0
        };
        // SAFETY: ibv_qp_init_attr_ex begins with the fields of ibv_qp_init_attr (verbs.h's
        // inline ibv_create_qp_ex makes the same cast); `attr` is readable.
        let qp = unsafe { ibv_create_qp(a.pd, attr.cast::<ibv_qp_init_attr>()) };
        if qp.is_null() || send_ops == 0 {
            return qp;
        }
        let soft = qp.cast::<SoftQp>();
        // SAFETY: `qp` was just created and not yet returned, so this is the only use of
        // its SoftQp: the builder is installed before the application can see the QP.
        unsafe {
            *(*soft).ex.c.get() = builder_ops();
            (*soft).ex.send_ops = send_ops;
        }
        qp
    })
}

export! { "IBVERBS_1.6";
    /// `struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *)`: the QP's own `ibv_qp_ex` if it
    /// was created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`; else NULL (`errno = EOPNOTSUPP`),
    /// or NULL with `EINVAL` for a pointer that is not a live QP.
    unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
        catch(null_mut(), || match qp_of(qp) {
            Some(soft) if soft.ex.send_ops != 0 => qp.cast::<ibv_qp_ex>(),
            Some(_) => fail(libc::EOPNOTSUPP),
            None => fail(libc::EINVAL),
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layout_of_the_soft_qp_is_an_ibv_qp_ex() {
        assert_eq!(offset_of!(SoftQp, ibv), offset_of!(ibv_qp_ex, qp_base));
        assert_eq!(
            offset_of!(SoftQp, ex) + offset_of!(QpEx, c),
            offset_of!(ibv_qp_ex, ex)
        );
    }
}

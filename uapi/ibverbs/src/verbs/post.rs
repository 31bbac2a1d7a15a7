//! The ops `post_send` and `post_recv` that verbs.h's inline `ibv_post_send` /
//! `ibv_post_recv` call: a chain of `struct ibv_send_wr` / `ibv_recv_wr` converted into
//! softrnic's [`SendWr`] / [`RecvWr`] and posted in order. On an error `*bad_wr` is the first
//! WR not posted (the ones before it are), and the errno is returned, as verbs documents.

use libc::c_int;
use softrnic_uapi::{QpType, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};

use crate::abi::objects::ibv_qp;
use crate::abi::wr::{ibv_recv_wr, ibv_send_wr, ibv_sge};
use crate::ffi::catch;
use crate::verbs::ah::ud_dest;
use crate::verbs::qp::qp_of;

/// The longest chain walked: beyond it a WR could not fit any queue (`ENOMEM`), and a
/// cyclic list ends.
const MAX_CHAIN: usize = 1 << 16;

/// The send flags softrnic honours: FENCE, SIGNALED, SOLICITED, INLINE (IP_CSUM is for raw
/// packet QPs and ignored).
const SEND_FLAGS: u32 = 0xf;

/// The SGEs of a WR.
///
/// # Safety
/// `sg_list` must point to `num_sge` readable SGEs when `num_sge > 0`.
pub(crate) unsafe fn sges(sg_list: *const ibv_sge, num_sge: c_int) -> Result<Vec<Sge>, c_int> {
    if num_sge < 0 || (num_sge > 0 && sg_list.is_null()) {
        return Err(libc::EINVAL);
    }
    if num_sge == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: forwarded from the caller; non-NULL, num_sge > 0.
    let list = unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) };
    Ok(list
        .iter()
        .map(|s| Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .collect())
}

/// softrnic's form of one send WR: `imm_data` as on the wire (verbs gives it in network
/// order), `invalidate_rkey` as is; `wr.rdma` for WRITE/READ, `wr.atomic` for atomics,
/// `bind_mw` for BIND_MW (type 2 windows, `verbs::mw`).
///
/// # Safety
/// `w`'s `sg_list` must point to `num_sge` readable SGEs.
pub(crate) unsafe fn to_send_wr(w: &ibv_send_wr) -> Result<SendWr, c_int> {
    use SendOpcode::*;
    let opcode = SendOpcode::from_raw(w.opcode).ok_or(libc::EINVAL)?;
    let flags = SendFlags(w.send_flags & SEND_FLAGS);
    if opcode == BindMw {
        return crate::verbs::mw::bind_wr(w, flags);
    }
    // SAFETY: forwarded from the caller.
    let sg_list = unsafe { sges(w.sg_list, w.num_sge)? };
    let imm = match opcode {
        SendWithImm | RdmaWriteWithImm => u32::from_be(w.imm_data),
        // `invalidate_rkey`, the other member of the union.
        SendWithInv | LocalInv => w.imm_data,
        _ => 0,
    };
    let (remote, compare_add, swap) = match opcode {
        // SAFETY: the union member these opcodes use; every bit pattern is a valid u64/u32.
        RdmaWrite | RdmaWriteWithImm | RdmaRead => unsafe {
            (
                RemoteAddr {
                    addr: w.wr.rdma.remote_addr,
                    rkey: w.wr.rdma.rkey,
                },
                0,
                0,
            )
        },
        // SAFETY: as above, for atomics.
        AtomicCmpAndSwp | AtomicFetchAndAdd => unsafe {
            let a = w.wr.atomic;
            (
                RemoteAddr {
                    addr: a.remote_addr,
                    rkey: a.rkey,
                },
                a.compare_add,
                a.swap,
            )
        },
        _ => (RemoteAddr::default(), 0, 0),
    };
    Ok(SendWr {
        wr_id: w.wr_id,
        opcode,
        flags,
        sg_list,
        imm_data_or_inv_rkey: imm,
        remote,
        compare_add,
        swap,
        // Only BIND_MW carries one (`verbs::mw::bind_wr`).
        bind_mw: None,
        ud: None,
    })
}

/// Walks a chain, converting each WR; posts the converted ones with `post`, which reports the
/// index of a WR it refused. Returns 0, or the errno with `*bad_wr` set.
///
/// # Safety
/// `first` must be NULL or a valid chain; `bad_wr` NULL or writable.
pub(crate) unsafe fn post_chain<W, C>(
    first: *mut W,
    bad_wr: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    convert: impl Fn(&W) -> Result<C, c_int>,
    post: impl FnOnce(&[C]) -> Result<(), (usize, c_int)>,
) -> c_int {
    let mut ptrs = Vec::new();
    let mut wrs = Vec::new();
    let mut failed = None;
    let mut p = first;
    while !p.is_null() {
        if ptrs.len() == MAX_CHAIN {
            failed = Some((ptrs.len(), libc::ENOMEM));
            ptrs.push(p);
            break;
        }
        ptrs.push(p);
        // SAFETY: a non-NULL link of the caller's chain.
        let w = unsafe { &*p };
        match convert(w) {
            Ok(c) => wrs.push(c),
            Err(e) => {
                failed = Some((ptrs.len() - 1, e));
                break;
            }
        }
        p = next(w);
    }
    let r = post(&wrs).err().or(failed);
    match r {
        None => 0,
        Some((i, e)) => {
            if !bad_wr.is_null() {
                // SAFETY: the caller passes NULL or a writable slot.
                unsafe { *bad_wr = ptrs[i] };
            }
            e
        }
    }
}

/// `ibv_context_ops.post_send`: 0, or the errno (`EINVAL` for a bad QP or WR, `ENOMEM` when
/// the send queue is full, ...) with `*bad_wr` the first WR not posted.
pub(crate) unsafe extern "C" fn op_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    catch(libc::EIO, || {
        let Some(soft) = qp_of(qp) else {
            // SAFETY: the caller passes NULL or a writable slot.
            return unsafe { refuse(wr, bad_wr) };
        };
        let ud = soft.qp.qp_type() == QpType::Ud;
        // SAFETY: the caller passes a valid chain and a NULL or writable bad_wr.
        unsafe {
            post_chain(
                wr,
                bad_wr,
                |w| w.next,
                // SAFETY: each WR of a valid chain has a valid sg_list.
                |w| {
                    let mut wr = to_send_wr(w)?;
                    if ud {
                        // SAFETY: a UD QP's WRs use the `ud` member; every bit pattern of
                        // it is valid (the AH pointer is checked before use).
                        wr.ud = Some(ud_dest(&w.wr.ud)?);
                    }
                    Ok(wr)
                },
                |wrs| soft.qp.post_send(wrs).map_err(|(i, e)| (i, e.errno())),
            )
        }
    })
}

/// `ibv_context_ops.post_recv`: as `post_send`, for the receive queue (`EINVAL` on a QP with
/// an SRQ).
pub(crate) unsafe extern "C" fn op_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    catch(libc::EIO, || {
        let Some(soft) = qp_of(qp) else {
            // SAFETY: the caller passes NULL or a writable slot.
            return unsafe { refuse(wr, bad_wr) };
        };
        // SAFETY: the caller passes a valid chain and a NULL or writable bad_wr.
        unsafe {
            post_chain(
                wr,
                bad_wr,
                |w| w.next,
                |w| {
                    Ok(RecvWr {
                        wr_id: w.wr_id,
                        // SAFETY: each WR of a valid chain has a valid sg_list.
                        sg_list: sges(w.sg_list, w.num_sge)?,
                    })
                },
                |wrs| soft.qp.post_recv(wrs).map_err(|(i, e)| (i, e.errno())),
            )
        }
    })
}

/// `EINVAL` with `*bad_wr = wr` (a bad QP: nothing is posted).
///
/// # Safety
/// `bad_wr` must be NULL or writable.
pub(crate) unsafe fn refuse<W>(wr: *mut W, bad_wr: *mut *mut W) -> c_int {
    if !bad_wr.is_null() {
        // SAFETY: forwarded from the caller.
        unsafe { *bad_wr = wr };
    }
    libc::EINVAL
}

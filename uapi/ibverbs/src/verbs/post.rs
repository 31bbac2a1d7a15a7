//! The ops `post_send` and `post_recv` that verbs.h's inline `ibv_post_send` /
//! `ibv_post_recv` call: a chain of `struct ibv_send_wr` / `ibv_recv_wr` converted into
//! softrnic's [`SendWr`] / [`RecvWr`] and posted in order. On an error `*bad_wr` is the first
//! WR not posted (the ones before it are), and the errno is returned, as verbs documents.

use std::cell::RefCell;
use std::thread::LocalKey;

use libc::c_int;
use softrnic_uapi::{
    InlineData, QpType, RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge, MAX_INLINE,
};

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

/// Writes the SGEs of a WR into `out` (replacing what it held, keeping its capacity).
/// `EINVAL`, nothing read, for a negative `num_sge` or one above `max_sge` (the queue's
/// granted capacity): a program's `num_sge` is checked before it says how far to read.
///
/// # Safety
/// `sg_list` must point to `num_sge` readable SGEs when `0 < num_sge <= max_sge`.
pub(crate) unsafe fn sges_into(
    sg_list: *const ibv_sge,
    num_sge: c_int,
    max_sge: u32,
    out: &mut Vec<Sge>,
) -> Result<(), c_int> {
    let fits = u32::try_from(num_sge).is_ok_and(|n| n <= max_sge);
    if !fits || (num_sge > 0 && sg_list.is_null()) {
        return Err(libc::EINVAL);
    }
    out.clear();
    if num_sge == 0 {
        return Ok(());
    }
    // SAFETY: forwarded from the caller; non-NULL, num_sge > 0.
    let list = unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) };
    out.extend(list.iter().map(|s| Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }));
    Ok(())
}

/// The program's buffers `parts` (address, length) copied into one message, as inline data
/// is read at post time (it needs no lkey, ibv_post_send(3), and the buffers may be reused as
/// soon as the call returns); `spare`, a previous copy, is reused. `EINVAL` for a NULL address
/// with a length; `Ok(None)`, nothing read, if they hold more than [`MAX_INLINE`] bytes.
///
/// # Safety
/// Each non-NULL address must name `length` readable bytes.
pub(crate) unsafe fn copy_inline(
    parts: impl Iterator<Item = (*const u8, usize)> + Clone,
    spare: Option<InlineData>,
) -> Result<Option<InlineData>, c_int> {
    if parts.clone().any(|(addr, len)| addr.is_null() && len > 0) {
        return Err(libc::EINVAL);
    }
    if parts.clone().map(|(_, len)| len).sum::<usize>() > MAX_INLINE {
        return Ok(None);
    }
    let mut bytes = spare.unwrap_or_default();
    bytes.clear();
    for (addr, len) in parts.filter(|&(_, len)| len > 0) {
        // SAFETY: forwarded from the caller; non-NULL, at most MAX_INLINE bytes in all.
        bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(addr, len) });
    }
    Ok(Some(bytes))
}

/// The bytes an INLINE WR sends ([`copy_inline`] of its SGEs). `None` for a WR that sends no
/// inline data, or more than softrnic takes (which the provider then refuses, `EINVAL`).
///
/// # Safety
/// Each SGE of `sg_list` must name `length` readable bytes at `addr`, as verbs requires.
unsafe fn inline_bytes(
    opcode: SendOpcode,
    flags: SendFlags,
    sg_list: &[Sge],
    spare: Option<InlineData>,
) -> Result<Option<InlineData>, c_int> {
    use SendOpcode::*;
    let sends = matches!(
        opcode,
        Send | SendWithImm | SendWithInv | RdmaWrite | RdmaWriteWithImm | AtomicWrite
    );
    if !flags.contains(SendFlags::INLINE) || !sends {
        return Ok(None);
    }
    let parts = sg_list
        .iter()
        .map(|s| (s.addr as usize as *const u8, s.length as usize));
    // SAFETY: forwarded from the caller.
    unsafe { copy_inline(parts, spare) }
}

/// A receive WR into `slot`, its SGE list reused; at most `max_sge` SGEs (`sges_into`).
///
/// # Safety
/// `w`'s `sg_list` must point to `num_sge` readable SGEs.
unsafe fn to_recv_wr(w: &ibv_recv_wr, slot: &mut RecvWr, max_sge: u32) -> Result<(), c_int> {
    slot.wr_id = w.wr_id;
    // SAFETY: forwarded from the caller.
    unsafe { sges_into(w.sg_list, w.num_sge, max_sge, &mut slot.sg_list) }
}

/// softrnic's form of one send WR: `imm_data` as on the wire (verbs gives it in network
/// order), `invalidate_rkey` as is; `wr.rdma` for WRITE/READ, `wr.atomic` for atomics,
/// `bind_mw` for BIND_MW (type 2 windows, `verbs::mw`), and the bytes of inline data.
///
/// Written into `slot`, whose SGE list and inline copy are reused; at most `max_sge` SGEs
/// (`sges_into`).
///
/// # Safety
/// `w`'s `sg_list` must point to `num_sge` readable SGEs, and for an INLINE WR each must
/// name readable memory.
pub(crate) unsafe fn to_send_wr(
    w: &ibv_send_wr,
    slot: &mut SendWr,
    max_sge: u32,
) -> Result<(), c_int> {
    use SendOpcode::*;
    let opcode = SendOpcode::from_raw(w.opcode).ok_or(libc::EINVAL)?;
    let flags = SendFlags::from_bits_retain(w.send_flags & SEND_FLAGS);
    if opcode == BindMw {
        *slot = crate::verbs::mw::bind_wr(w, flags)?;
        return Ok(());
    }
    let mut sg_list = std::mem::take(&mut slot.sg_list);
    // SAFETY: forwarded from the caller.
    unsafe { sges_into(w.sg_list, w.num_sge, max_sge, &mut sg_list)? };
    // SAFETY: the SGEs name the program's readable memory (forwarded from the caller).
    let inline_data = unsafe { inline_bytes(opcode, flags, &sg_list, slot.inline_data.take())? };
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
    *slot = SendWr {
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
        // The XRC SRQ at the target; only an XRC INI QP's requests carry it.
        xrc_srqn: w.qp_type.xrc_remote_srqn,
        inline_data,
    };
    Ok(())
}

/// A post's WRs in softrnic's form, kept per thread from one post to the next: the vectors,
/// and each WR's SGE list, keep their capacity, so that once they have grown to the chains a
/// program posts, posting allocates nothing (a verbs program posts for every message).
pub(crate) struct Chain<W, C> {
    /// The links walked (for `*bad_wr`).
    ptrs: Vec<*mut W>,
    /// Converted WRs; those past the current post's are spares.
    wrs: Vec<C>,
}

/// Spare WRs a thread keeps beyond a post (a long chain's are freed).
const KEPT: usize = 64;

thread_local! {
    /// The send chains of this thread's posts.
    pub(crate) static SENDS: RefCell<Chain<ibv_send_wr, SendWr>> = const { RefCell::new(Chain::new()) };
    /// The receive chains of this thread's posts (QPs and SRQs).
    static RECVS: RefCell<Chain<ibv_recv_wr, RecvWr>> = const { RefCell::new(Chain::new()) };
}

impl<W, C> Chain<W, C> {
    const fn new() -> Chain<W, C> {
        Chain {
            ptrs: Vec::new(),
            wrs: Vec::new(),
        }
    }
}

/// Walks a chain, converting each WR into a slot of this thread's chain in `scratch` (`fresh`
/// makes a new slot); posts the converted ones with `post`, which reports the index of a WR it
/// refused. Returns 0, or the errno with `*bad_wr` set. (A post from inside a post, which
/// verbs programs do not make, finds the thread's chain in use and gets one of its own.)
///
/// # Safety
/// `first` must be NULL or a valid chain; `bad_wr` NULL or writable.
pub(crate) unsafe fn post_chain<W: 'static, C: 'static>(
    scratch: &'static LocalKey<RefCell<Chain<W, C>>>,
    first: *mut W,
    bad_wr: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    fresh: impl Fn() -> C,
    convert: impl Fn(&W, &mut C) -> Result<(), c_int>,
    post: impl FnOnce(&[C]) -> Result<(), (usize, c_int)>,
) -> c_int {
    scratch.with(|cell| {
        let mut own = None;
        let mut shared = cell.try_borrow_mut().ok();
        let Chain { ptrs, wrs } = match shared.as_deref_mut() {
            Some(chain) => chain,
            None => own.insert(Chain::new()),
        };
        ptrs.clear();
        let mut n = 0;
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
            if wrs.len() == n {
                wrs.push(fresh());
            }
            match convert(w, &mut wrs[n]) {
                Ok(()) => n += 1,
                Err(e) => {
                    failed = Some((ptrs.len() - 1, e));
                    break;
                }
            }
            p = next(w);
        }
        let errno = match post(&wrs[..n]).err().or(failed) {
            None => 0,
            Some((i, e)) => {
                if !bad_wr.is_null() {
                    // SAFETY: the caller passes NULL or a writable slot.
                    unsafe { *bad_wr = ptrs[i] };
                }
                e
            }
        };
        ptrs.clear();
        wrs.truncate(KEPT);
        errno
    })
}

/// An empty send WR, for a chain's new slot.
fn fresh_send() -> SendWr {
    SendWr::new(0, SendOpcode::Send, Vec::new())
}

/// An empty receive WR, for a chain's new slot.
fn fresh_recv() -> RecvWr {
    RecvWr {
        wr_id: 0,
        sg_list: Vec::new(),
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
        let max_sge = soft.init.cap.max_send_sge;
        // SAFETY: the caller passes a valid chain and a NULL or writable bad_wr.
        unsafe {
            post_chain(
                &SENDS,
                wr,
                bad_wr,
                |w| w.next,
                fresh_send,
                // SAFETY: each WR of a valid chain has a valid sg_list.
                |w, slot| {
                    to_send_wr(w, slot, max_sge)?;
                    if ud {
                        // SAFETY: a UD QP's WRs use the `ud` member; every bit pattern of
                        // it is valid (the AH pointer is checked before use).
                        slot.ud = Some(ud_dest(&w.wr.ud)?);
                    }
                    Ok(())
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
        let max_sge = soft.init.cap.max_recv_sge;
        // SAFETY: the caller passes a valid chain and a NULL or writable bad_wr.
        unsafe { post_recv_chain(wr, bad_wr, max_sge, |wrs| soft.qp.post_recv(wrs)) }
    })
}

/// Posts a chain of receive WRs (a QP's or an SRQ's, of `max_sge` SGEs at most) with `post`,
/// through this thread's receive chain: 0, or the errno with `*bad_wr` set.
///
/// # Safety
/// `wr` must be NULL or a valid chain; `bad_wr` NULL or writable.
pub(crate) unsafe fn post_recv_chain(
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
    max_sge: u32,
    post: impl FnOnce(&[RecvWr]) -> Result<(), (usize, softrnic_uapi::Error)>,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        post_chain(
            &RECVS,
            wr,
            bad_wr,
            |w| w.next,
            fresh_recv,
            // SAFETY: each WR of a valid chain has a valid sg_list.
            |w, slot| to_recv_wr(w, slot, max_sge),
            |wrs| post(wrs).map_err(|(i, e)| (i, e.errno())),
        )
    }
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

#[cfg(test)]
mod tests {
    use softrnic_testkit::alloc_count::{allocations_in as allocations, CountingAlloc};

    use super::*;

    #[global_allocator]
    static GLOBAL: CountingAlloc = CountingAlloc;

    fn sge(addr: u64) -> ibv_sge {
        ibv_sge {
            addr,
            length: 64,
            lkey: 7,
        }
    }

    /// A chain of three receive WRs with 1, 2 and 0 SGEs, posted through this thread's chain
    /// to `post`.
    fn post_three(post: impl FnOnce(&[RecvWr]) -> Result<(), (usize, c_int)>) -> c_int {
        let mut sges = [sge(0x1000), sge(0x2000), sge(0x3000)];
        let mut wrs = [0u64, 1, 2].map(|wr_id| ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
        });
        (wrs[0].sg_list, wrs[0].num_sge) = (&raw mut sges[0], 1);
        (wrs[1].sg_list, wrs[1].num_sge) = (&raw mut sges[1], 2);
        let base = wrs.as_mut_ptr();
        // SAFETY: in bounds of `wrs`, which outlives the post; written through `base` only.
        unsafe {
            (*base).next = base.add(1);
            (*base.add(1)).next = base.add(2);
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: a valid chain over live arrays, a writable bad_wr.
        unsafe {
            post_chain(
                &RECVS,
                base,
                &raw mut bad,
                |w| w.next,
                fresh_recv,
                |w, slot| to_recv_wr(w, slot, 2),
                post,
            )
        }
    }

    #[test]
    fn once_its_chain_has_grown_a_thread_posts_without_allocating() {
        let check = |wrs: &[RecvWr]| {
            let addrs: Vec<Vec<u64>> = wrs
                .iter()
                .map(|w| w.sg_list.iter().map(|s| s.addr).collect())
                .collect();
            assert_eq!(addrs, [vec![0x1000], vec![0x2000, 0x3000], vec![]]);
            assert_eq!(wrs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
        };
        // A new chain (the tests may share a thread): the first post grows it, and the count
        // sees that. The check allocates, so it runs outside the count.
        RECVS.with(|c| *c.borrow_mut() = Chain::new());
        let mut seen = Vec::new();
        let first = allocations(|| {
            let r = post_three(|w| {
                seen.reserve_exact(3);
                seen.extend_from_slice(w);
                Ok(())
            });
            assert_eq!(r, 0);
        });
        check(&seen);
        assert!(first > 3, "{first}: the count misses the chain growing");
        let mut second = None;
        let n = allocations(|| {
            let r = post_three(|w| {
                second = Some((w.len(), w[1].sg_list.len(), w[1].sg_list[1].addr));
                Ok(())
            });
            assert_eq!(r, 0);
        });
        assert_eq!(second, Some((3, 2, 0x3000)));
        assert_eq!(n, 0, "the second post allocated");
    }

    #[test]
    fn a_refused_wr_is_named_by_bad_wr_and_the_chain_is_reusable_after() {
        // `post` refuses the second WR: the errno comes back.
        assert_eq!(post_three(|_| Err((1, libc::ENOMEM))), libc::ENOMEM);
        // A WR whose SGE list is NULL with num_sge > 0 stops the walk before `post` sees it.
        let mut w = ibv_recv_wr {
            wr_id: 9,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 1,
        };
        let mut bad = std::ptr::null_mut();
        let mut posted = usize::MAX;
        // SAFETY: a one-WR chain; bad_wr writable.
        let r = unsafe {
            post_chain(
                &RECVS,
                &raw mut w,
                &raw mut bad,
                |w| w.next,
                fresh_recv,
                |w, slot| to_recv_wr(w, slot, 2),
                |wrs| {
                    posted = wrs.len();
                    Ok(())
                },
            )
        };
        assert_eq!((r, posted, bad), (libc::EINVAL, 0, &raw mut w));
        assert_eq!(
            post_three(|w| if w.len() == 3 { Ok(()) } else { Err((0, 1)) }),
            0
        );
    }

    #[test]
    fn a_post_from_inside_a_post_gets_a_chain_of_its_own() {
        let ids = |w: &[RecvWr]| w.iter().map(|w| w.wr_id).collect::<Vec<_>>();
        let mut inner = None;
        let r = post_three(|outer| {
            inner = Some(post_three(|w| {
                assert_eq!(ids(w), [0, 1, 2]);
                Ok(())
            }));
            // The inner post did not touch the outer one's WRs.
            assert_eq!(ids(outer), [0, 1, 2]);
            assert_eq!(outer[1].sg_list.len(), 2);
            Ok(())
        });
        assert_eq!((r, inner), (0, Some(0)));
    }
}

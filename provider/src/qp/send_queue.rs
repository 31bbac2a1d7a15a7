//! The send queue of a QP of any transport (IBTA 11.4.1.1 "Post Send Request"): a send WR as
//! the QP keeps it until it completes, the checks of `ibv_post_send` — which operations the
//! transport has (UC: [`crate::uc::requester`]; UD: [`crate::ud::requester`]; XRC:
//! [`crate::xrc`]), SGEs, inline data, lengths — and the flush of the queue when the QP enters
//! ERR. The requester that sends from it (`requester.rs`) is every transport's; RC adds its
//! acknowledgements and retransmissions in `rc/requester.rs`.

use softrnic_wire::opcode::Transport as WireTransport;
use softrnic_wire::Psn;

use super::context::{CqSide, Events, QpContext};
use super::requester::Requester;
use super::transmit::{MAX_INLINE, MAX_SGE};
use crate::error::{Error, Result};
use crate::mr::MrTable;
use crate::wc::{WcOpcode, WcStatus, WorkCompletion};
use crate::wr::{InlineData, RemoteAddr, SendFlags, SendOpcode, SendWr, SgeList, UdDest};

/// A send work request as the requester keeps it.
#[derive(Debug, Clone)]
pub(crate) struct SendWqe {
    pub wr_id: u64,
    pub opcode: SendOpcode,
    pub signaled: bool,
    pub fence: bool,
    pub solicited: bool,
    pub sges: SgeList,
    pub inline: Option<InlineData>,
    pub total: u32,
    pub imm: u32,
    pub remote: RemoteAddr,
    pub compare_add: u64,
    pub swap: u64,
    /// The bind of a BIND_MW.
    pub bind: Option<crate::mr::MwBind>,
    /// The destination of a UD SEND.
    pub ud: Option<UdDest>,
    /// The target's XRC SRQ number (XRC INI QPs).
    pub xrc_srqn: u32,
    /// Set when first sent (a local operation: when executed).
    pub started: bool,
    pub first_psn: Psn,
    pub npkts: u32,
}

impl SendWqe {
    pub fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts.saturating_sub(1))
    }

    /// Whether `psn` is one of this WQE's PSNs.
    pub fn holds(&self, psn: Psn) -> bool {
        self.started && psn.distance_from(self.first_psn) < self.npkts
    }

    /// Completes it successfully: a work completion if it is signaled, and a SEND counted in
    /// `rdma_sends` whether signaled or not (as rxe's completer counts it).
    pub fn complete_ok(&self, qpn: u32, ev: &mut Events) {
        if self.opcode.is_send() {
            ev.counters.rdma_sends += 1;
        }
        if self.signaled {
            ev.complete(CqSide::Send, self.completion(qpn, WcStatus::Success));
        }
    }

    pub fn is_rd_atomic(&self) -> bool {
        self.opcode.uses_rd_atomic_resource()
    }

    /// Whether it is a local operation (no packets; `npkts` stays 0).
    pub fn is_local(&self) -> bool {
        self.opcode.is_local()
    }

    pub fn wc_opcode(&self) -> WcOpcode {
        match self.opcode {
            SendOpcode::Send | SendOpcode::SendWithImm | SendOpcode::SendWithInv => WcOpcode::Send,
            SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            SendOpcode::RdmaRead => WcOpcode::RdmaRead,
            SendOpcode::AtomicCmpAndSwp => WcOpcode::CompSwap,
            SendOpcode::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            SendOpcode::LocalInv => WcOpcode::LocalInv,
            SendOpcode::BindMw => WcOpcode::BindMw,
            SendOpcode::Flush => WcOpcode::Flush,
            SendOpcode::AtomicWrite => WcOpcode::AtomicWrite,
        }
    }

    pub fn completion(&self, qpn: u32, status: WcStatus) -> WorkCompletion {
        WorkCompletion {
            byte_len: if status == WcStatus::Success {
                self.total
            } else {
                0
            },
            ..WorkCompletion::error(self.wr_id, status, self.wc_opcode(), qpn)
        }
    }
}

impl Requester {
    /// `ibv_post_send` of one WR: checks it and queues it.
    ///
    /// # Errors
    /// `EINVAL` for what the WR itself gets wrong (opcode not supported on RC, too many SGEs,
    /// inline data too long or with an opcode that reads, a message over 2^31 bytes, an atomic
    /// whose buffer is not 8 bytes); `ENOMEM` when the send queue is full.
    pub fn post(&mut self, ctx: &QpContext, wr: &SendWr, mrs: &MrTable) -> Result<()> {
        use SendOpcode::*;
        if self.sq.len() >= self.max_send_wr {
            return Err(Error::NoMemory("send queue full"));
        }
        if ctx.transport == WireTransport::Uc && !crate::uc::requester::supports(wr.opcode) {
            return Err(Error::InvalidArgument("UC has no such operation"));
        }
        if ctx.transport == WireTransport::Ud {
            crate::ud::requester::check(ctx, wr)?;
        }
        if ctx.transport == WireTransport::Xrc {
            crate::xrc::check_send(wr)?;
        }
        match wr.opcode {
            Send | SendWithImm | SendWithInv | RdmaWrite | RdmaWriteWithImm | RdmaRead
            | AtomicCmpAndSwp | AtomicFetchAndAdd => {}
            LocalInv | BindMw => return self.post_local(ctx, wr),
            Flush | AtomicWrite => return self.post_flush_or_atomic_write(ctx, wr, mrs),
        }
        if wr.sg_list.len() > MAX_SGE {
            return Err(Error::InvalidArgument("more SGEs than max_send_sge"));
        }
        let total = wr
            .message_len()
            .ok_or(Error::InvalidArgument("message longer than 2^31 bytes"))?;
        let inline = wr.is_inline();
        if wr.opcode.is_atomic() && total != 8 {
            return Err(Error::InvalidArgument("an atomic needs one 8-byte buffer"));
        }
        let inline = if inline {
            if matches!(wr.opcode, RdmaRead | AtomicCmpAndSwp | AtomicFetchAndAdd) {
                return Err(Error::InvalidArgument(
                    "inline data with an operation that reads",
                ));
            }
            if total as usize > MAX_INLINE {
                return Err(Error::InvalidArgument(
                    "inline data longer than max_inline_data",
                ));
            }
            Some(gather_inline(ctx, wr, total, mrs)?)
        } else {
            None
        };
        self.sq.push_back(SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            signaled: ctx.sq_sig_all || wr.flags.contains(SendFlags::SIGNALED),
            fence: wr.flags.contains(SendFlags::FENCE),
            solicited: wr.flags.contains(SendFlags::SOLICITED),
            sges: if inline.is_some() {
                SgeList::new()
            } else {
                SgeList::from_slice(&wr.sg_list)
            },
            inline,
            total,
            imm: wr.imm_data_or_inv_rkey,
            remote: wr.remote,
            compare_add: wr.compare_add,
            swap: wr.swap,
            bind: None,
            ud: wr.ud,
            xrc_srqn: wr.xrc_srqn,
            started: false,
            first_psn: Psn::new(0),
            npkts: 0,
        });
        Ok(())
    }

    /// Completes every WR with `IBV_WC_WR_FLUSH_ERR` (the QP entered ERR).
    pub fn flush(&mut self, ctx: &QpContext, ev: &mut Events) {
        for w in self.sq.drain(..) {
            ev.complete(CqSide::Send, w.completion(ctx.qpn, WcStatus::WrFlushErr));
        }
        self.cur = 0;
        self.cur_offset = 0;
    }
}

/// The inline data of `wr`, `total` bytes, copied at post time (the buffers may be reused at
/// once): the caller's copy if it made one, else copied out of the SGEs.
pub(crate) fn gather_inline(
    ctx: &QpContext,
    wr: &SendWr,
    total: u32,
    mrs: &MrTable,
) -> Result<InlineData> {
    if let Some(bytes) = &wr.inline_data {
        return Ok(bytes.clone());
    }
    let mut out = InlineData::with_capacity(total as usize);
    for s in &wr.sg_list {
        // Inline data needs no lkey (ibv_post_send(3)); softrnic reads it through the table
        // all the same, so that only registered memory is ever read.
        mrs.with_local_read(s.lkey, ctx.pd, s.addr, s.length as usize, |b| {
            let at = out.len();
            out.resize(at + b.len(), 0);
            b.copy_to(&mut out[at..])
        })
        .map_err(|_| Error::InvalidArgument("inline data not in a registered region of the PD"))?;
    }
    Ok(out)
}

//! The UC responder (IBTA 9.7.5 as it applies to UC; kernel rxe's `check_psn` and
//! `check_op_seq` for `IB_QPT_UC`). There are no ACKs, NAKs, duplicates, READs, atomics or
//! RNR:
//!
//! * **PSN** — a packet with the expected PSN (ePSN) is executed. A gap (a packet lost) drops
//!   the message in progress, and every packet after it up to the next FIRST or ONLY, which
//!   starts a new message at its own PSN (the responder resynchronises, as rxe does).
//! * **Opcode sequence** — a MIDDLE or LAST that does not continue the message in progress,
//!   or a FIRST or ONLY inside one, drops the message in progress likewise.
//! * **Receive WQEs** — a SEND takes one at its first packet, a WRITE with immediate at its
//!   last. A dropped SEND does not consume its WQE: the next SEND fills it from the start (a
//!   WQE of a shared receive queue goes back to the SRQ's head, for whichever QP comes next).
//!   With no WQE posted the message is dropped (UC has no RNR).
//! * **Errors** — an R_Key violation or a malformed packet drops the message silently (rxe's
//!   UC "drop_msg"); a SEND longer than its receive WQE completes the WQE with
//!   `IBV_WC_LOC_LEN_ERR` and drops the rest of the message (rxe's "class D").

use softrnic_wire::opcode::{Operation, Position, Transport};
use softrnic_wire::roce::RocePacket;
use softrnic_wire::Psn;

use crate::mr::{Access, MrTable};
use crate::qp::context::{CqSide, Events, QpContext};
use crate::qp::inbound::{recv_wc, send_wc, write_imm_wc, InMessage, PlaceError};
use crate::qp::recv::Receives;
use crate::qp::segment::payload_fits;
use crate::wc::WcStatus;
use crate::wr::RecvWqe;

/// Why a packet was not executed.
enum Drop {
    /// Silently: the message in progress is dropped, its WQE kept for the next one.
    Silent,
    /// The SEND does not fit its WQE: the WQE completes with `IBV_WC_LOC_LEN_ERR`.
    Length,
}

/// The responder of one UC QP. Its receive queue is the QP's (or its SRQ), passed in.
#[derive(Debug, Default)]
pub(crate) struct UcResponder {
    /// The expected PSN.
    pub epsn: Psn,
    msg: Option<InMessage>,
    /// A WQE taken from the QP's own receive queue for a message that was dropped: the next
    /// SEND uses it first.
    spare: Option<RecvWqe>,
    /// Dropping packets until the next FIRST or ONLY.
    dropping: bool,
}

impl UcResponder {
    /// Forgets everything (RESET). A spare WQE is the consumer's: RESET discards the receive
    /// queue without completions, and it with it.
    pub fn reset(&mut self) {
        *self = UcResponder::default();
    }

    /// Completes the WQE held for a message (in progress or dropped) with
    /// `IBV_WC_WR_FLUSH_ERR`: it is older than any still in the receive queue.
    /// (On a QP with an SRQ, as on RC, the WQE of a message in progress is the QP's and is
    /// flushed with it.)
    pub fn flush(&mut self, ctx: &QpContext, ev: &mut Events) {
        if let Some(InMessage::Send { wqe, .. }) = self.msg.take() {
            ev.complete(CqSide::Recv, recv_wc(ctx, &wqe, WcStatus::WrFlushErr));
        }
        if let Some(wqe) = self.spare.take() {
            ev.complete(CqSide::Recv, recv_wc(ctx, &wqe, WcStatus::WrFlushErr));
        }
    }

    /// Handles a request packet for this QP.
    pub fn handle_request(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
        mut recv: Receives<'_>,
        ev: &mut Events,
    ) {
        let Ok(info) = pkt.repr.info() else { return };
        if info.transport != Transport::Uc {
            return;
        }
        let psn = pkt.repr.bth.psn;
        let starts = matches!(info.position, Position::First | Position::Only);
        if psn != self.epsn || self.dropping {
            self.drop_message(&mut recv);
            if !starts {
                self.dropping = true;
                return;
            }
            self.dropping = false;
        }
        match self.execute(ctx, pkt, mrs, &mut recv, ev) {
            Ok(()) => self.epsn = psn.add(1),
            Err(why) => {
                if let (Drop::Length, Some(InMessage::Send { wqe, .. })) = (why, self.msg.take()) {
                    ev.complete(CqSide::Recv, recv_wc(ctx, &wqe, WcStatus::LocLenErr));
                }
                self.drop_message(&mut recv);
                self.dropping = true;
            }
        }
    }

    /// Abandons the message in progress; a SEND's WQE is kept for the next message (given
    /// back to the SRQ it came from, if the QP has one).
    fn drop_message(&mut self, recv: &mut Receives<'_>) {
        if let Some(InMessage::Send { wqe, .. }) = self.msg.take() {
            if let Some(own) = recv.give_back(wqe) {
                self.spare = Some(own);
            }
        }
    }

    /// The next receive WQE: the spare one first.
    fn take_wqe(&mut self, recv: &mut Receives<'_>) -> Option<RecvWqe> {
        self.spare.take().or_else(|| recv.take())
    }

    fn wqe_ready(&self, recv: &Receives<'_>) -> bool {
        self.spare.is_some() || recv.ready()
    }

    /// Executes a packet that is in sequence by PSN.
    fn execute(
        &mut self,
        ctx: &QpContext,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
        recv: &mut Receives<'_>,
        ev: &mut Events,
    ) -> Result<(), Drop> {
        let repr = &pkt.repr;
        let info = repr.info().map_err(|_| Drop::Silent)?;
        let continues = matches!(info.position, Position::Middle | Position::Last);
        let last = matches!(info.position, Position::Last | Position::Only);
        let in_sequence = match (&self.msg, info.operation) {
            (Some(InMessage::Send { .. }), Operation::Send) => continues,
            (Some(InMessage::Write { .. }), Operation::RdmaWrite) => continues,
            (Some(_), _) => false,
            (None, _) => !continues,
        };
        if !in_sequence || !payload_fits(info.position, pkt.payload.len(), ctx.pmtu) {
            return Err(Drop::Silent);
        }
        match info.operation {
            Operation::Send => {
                if self.msg.is_none() {
                    let wqe = self.take_wqe(recv).ok_or(Drop::Silent)?;
                    self.msg = Some(InMessage::Send { wqe, offset: 0 });
                }
                let msg = self.msg.as_mut().ok_or(Drop::Silent)?;
                msg.place(ctx, mrs, pkt.payload, last)
                    .map_err(|e| match e {
                        PlaceError::Length => Drop::Length,
                        PlaceError::Access(_) => Drop::Silent,
                    })?;
                if last {
                    let Some(InMessage::Send { wqe, offset }) = self.msg.take() else {
                        return Err(Drop::Silent);
                    };
                    ev.complete(CqSide::Recv, send_wc(ctx, &wqe, offset, repr.immdt, None));
                }
                Ok(())
            }
            Operation::RdmaWrite => {
                if !ctx.access.contains(Access::REMOTE_WRITE) {
                    return Err(Drop::Silent);
                }
                if last && repr.immdt.is_some() && !self.wqe_ready(recv) {
                    return Err(Drop::Silent);
                }
                if let Some(reth) = &repr.reth {
                    let msg = InMessage::write(ctx, mrs, reth).map_err(|_| Drop::Silent)?;
                    self.msg = Some(msg);
                }
                // A FIRST or ONLY without a RETH has no message; payloads that do not add up
                // to the DMA length drop it.
                let msg = self.msg.as_mut().ok_or(Drop::Silent)?;
                msg.place(ctx, mrs, pkt.payload, last)
                    .map_err(|_| Drop::Silent)?;
                if last {
                    let Some(InMessage::Write { len: total, .. }) = self.msg.take() else {
                        return Err(Drop::Silent);
                    };
                    if let Some(imm) = repr.immdt {
                        let wqe = self.take_wqe(recv).ok_or(Drop::Silent)?;
                        ev.complete(CqSide::Recv, write_imm_wc(ctx, &wqe, total, imm));
                    }
                }
                Ok(())
            }
            _ => Err(Drop::Silent),
        }
    }
}

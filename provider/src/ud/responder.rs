//! The UD responder (IBTA 9.8.3; kernel rxe's `check_keys` and `send_data_in` for UD): a
//! datagram is a SEND ONLY (with immediate) with a DETH; one whose Q_Key is not the QP's is
//! silently dropped, as rxe's `check_keys` does (a Q_Key violation is counted, never an error
//! of the receive queue).
//! There are no PSN checks, ACKs or RNR: without a receive WQE the datagram is dropped.
//!
//! The receive buffer gets 40 bytes of GRH, then the payload (IBTA chapter 11, Post Receive
//! Request: a UD receive buffer starts with room for the GRH, whether the datagram carried one
//! or not; `ibv_ud_pingpong` posts `size + 40` bytes for that). On RoCE v2 the
//! GRH is the datagram's IP header: for IPv6 the 40-byte IPv6 header; for IPv4 the 20-byte
//! IPv4 header in the *last* 20 bytes of the 40, the first 20 zero (rxe copies `ip_hdr(skb)`
//! to `roce4grh`, rdma-core's `ibv_init_ah_from_wc` reads it there). The completion's
//! `byte_len` counts the 40 bytes, `src_qp` is the DETH's source QP and `IBV_WC_GRH` is set.
//! A datagram longer than the WQE's buffers completes it with `IBV_WC_LOC_LEN_ERR`.

use std::net::IpAddr;

use softrnic_wire::frame::IpHeader;
use softrnic_wire::opcode::{Operation, Position, Transport};
use softrnic_wire::roce::RocePacket;

use crate::mr::MrTable;
use crate::qp::context::{CqSide, Events, QpContext};
use crate::qp::inbound::recv_wc;
use crate::qp::recv::Receives;
use crate::qp::transmit::scatter;
use crate::wc::{WcFlags, WcStatus};

/// The GRH's length: what precedes the payload in a UD receive buffer.
pub const GRH_LEN: u32 = 40;

/// The UDP header's length.
const UDP_HEADER_LEN: usize = 8;

/// The TTL / hop limit written into the GRH (Linux's default; the sender's is not known on
/// a UDP socket).
const HOP_LIMIT: u8 = 64;

/// The 40 bytes of GRH for a datagram from `src` to `dst` whose UDP payload (BTH through
/// ICRC) is `roce_len` bytes. All zero when the addresses' families differ (unknown source).
pub fn grh(src: IpAddr, dst: IpAddr, roce_len: usize) -> [u8; GRH_LEN as usize] {
    let mut out = [0u8; GRH_LEN as usize];
    if let Some(h) = IpHeader::udp_socket(src, dst, HOP_LIMIT) {
        let at = GRH_LEN as usize - h.header_len();
        // Only fails for a buffer too small (it is not) or an impossible length: then zeros.
        let _ = h.emit(UDP_HEADER_LEN + roce_len, &mut out[at..]);
    }
    out
}

/// Handles a datagram for a UD QP from `src` to `dst`, taking a WQE from `recv`.
pub(crate) fn handle_datagram(
    ctx: &QpContext,
    pkt: &RocePacket<'_>,
    src: IpAddr,
    dst: IpAddr,
    mrs: &MrTable,
    mut recv: Receives<'_>,
    ev: &mut Events,
) {
    let repr = &pkt.repr;
    let Ok(info) = repr.info() else { return };
    if info.transport != Transport::Ud
        || info.operation != Operation::Send
        || info.position != Position::Only
    {
        return;
    }
    let Some(deth) = repr.deth else { return };
    if deth.qkey != ctx.qkey || pkt.payload.len() > ctx.pmtu as usize {
        return; // silently dropped
    }
    let Some(wqe) = recv.take() else { return };
    let n = pkt.payload.len() as u32;
    let byte_len = GRH_LEN + n;
    if byte_len > wqe.total {
        ev.complete(CqSide::Recv, recv_wc(ctx, &wqe, WcStatus::LocLenErr));
        return;
    }
    let header = grh(src, dst, repr.buffer_len());
    let placed = scatter(mrs, wqe.pd, &wqe.sges, 0, &header)
        .and_then(|()| scatter(mrs, wqe.pd, &wqe.sges, GRH_LEN, pkt.payload));
    if placed.is_err() {
        // The buffers are not writable (a region deregistered meanwhile): as on RC, a local
        // protection error, and the QP enters ERR.
        ev.complete(CqSide::Recv, recv_wc(ctx, &wqe, WcStatus::LocProtErr));
        ev.fatal = true;
        return;
    }
    let mut wc = recv_wc(ctx, &wqe, WcStatus::Success);
    wc.byte_len = byte_len;
    wc.src_qp = deth.src_qp;
    wc.wc_flags |= WcFlags::GRH;
    if let Some(imm) = repr.immdt {
        wc.imm_data_or_inv_rkey = imm.0;
        wc.wc_flags |= WcFlags::WITH_IMM;
    }
    ev.complete(CqSide::Recv, wc);
}

//! What the requester, completer and responder of one QP, of any transport, share: its
//! attributes (set by `ibv_modify_qp`, IBTA 11.2.5.2), and the queue of completions and state
//! changes they produce, with the CQ each completion goes to.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use softrnic_wire::bth::{self, BthRepr};
use softrnic_wire::opcode::Transport;
use softrnic_wire::roce::RoceRepr;
use softrnic_wire::{Opcode, Psn};

use crate::event::EventType;
use crate::mr::{Access, PdHandle};
use crate::wc::WorkCompletion;

/// Which completion queue a completion goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqSide {
    /// The send CQ (requester completions).
    Send,
    /// The receive CQ (responder completions).
    Recv,
    /// The CQ of an XRC SRQ (an XRC TGT QP's receive completions, [`crate::xrc`]).
    Xrc(crate::nic::CqId),
}

/// A completion for the CQ on `side`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The CQ.
    pub side: CqSide,
    /// The completion.
    pub wc: WorkCompletion,
}

/// The attributes a QP of any transport runs on (on a UD QP the peer's, `dest_qpn` and `dst`,
/// stay unset: each send WR names its destination).
#[derive(Debug, Clone)]
pub struct QpContext {
    /// This QP's number.
    pub qpn: u32,
    /// Its transport: RC, UC, UD or XRC; fixed at creation.
    pub transport: Transport,
    /// Its protection domain.
    pub pd: PdHandle,
    /// The connected peer's QP number (`dest_qp_num`).
    pub dest_qpn: u32,
    /// The peer's IP address (from the address vector's GID).
    pub dst: IpAddr,
    /// The UDP source port of this QP's packets.
    pub src_port: u16,
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// The remote operations the QP accepts (`qp_access_flags`).
    pub access: Access,
    /// `sq_sig_all`: every send WR completes, signaled or not.
    pub sq_sig_all: bool,
    /// RNR NAK timer code the responder sends (`min_rnr_timer`).
    pub min_rnr_timer: u8,
    /// Local ACK timeout (`None`: infinite).
    pub ack_timeout: Option<Duration>,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// READs and atomics the requester may have outstanding (`max_rd_atomic`).
    pub max_rd_atomic: u8,
    /// READs and atomics the responder keeps results for (`max_dest_rd_atomic`).
    pub max_dest_rd_atomic: u8,
    /// The Q_Key (UD): what incoming datagrams must carry, and what a send WR whose Q_Key
    /// has the high bit set sends.
    pub qkey: u32,
}

impl QpContext {
    /// A context with the defaults of a QP in RESET.
    pub fn new(qpn: u32, pd: PdHandle, src_port: u16, sq_sig_all: bool) -> QpContext {
        QpContext {
            qpn,
            transport: Transport::Rc,
            pd,
            dest_qpn: 0,
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            src_port,
            pmtu: 256,
            access: Access::empty(),
            sq_sig_all,
            min_rnr_timer: 0,
            ack_timeout: None,
            retry_cnt: 0,
            rnr_retry: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            qkey: 0,
        }
    }

    /// Whether the transport acknowledges and retransmits: RC, and XRC (which is RC with
    /// the target's receive resources named per message, annex A14).
    pub fn is_reliable(&self) -> bool {
        matches!(self.transport, Transport::Rc | Transport::Xrc)
    }

    /// A packet header to the peer with the defaults rxe uses (P_Key 0xFFFF, no MigReq). On
    /// an XRC QP the RC `opcode` becomes its XRC counterpart (transport bits 101, annex
    /// A14.6); the XRCETH of a request is the requester's to fill in.
    pub fn header(&self, opcode: Opcode, psn: Psn, ack_req: bool) -> RoceRepr {
        let opcode = if self.transport == Transport::Xrc && opcode.0 < 0x20 {
            Opcode(opcode.0 | 0xa0)
        } else {
            opcode
        };
        RoceRepr::new(BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pkey: bth::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: self.dest_qpn,
            ack_req,
            psn,
        })
    }
}

/// What a role of the QP produced besides packets: completions, affiliated asynchronous
/// events, and whether the QP must enter the error state (a fatal error: the failing WR
/// already has its completion).
#[derive(Debug, Default)]
pub struct Events {
    /// Completions, in order.
    pub completions: VecDeque<Completion>,
    /// Affiliated asynchronous events of the QP, in order.
    pub affiliated: VecDeque<EventType>,
    /// The QP must enter ERR.
    pub fatal: bool,
    /// What the QP counted (`softrnic stat`).
    pub counters: crate::counters::QpCounters,
}

impl Events {
    /// Queues a completion.
    pub fn complete(&mut self, side: CqSide, wc: WorkCompletion) {
        self.completions.push_back(Completion { side, wc });
    }
}

//! The queue pair of every transport (IBTA Vol. 1 chapter 10, "Software transport interface":
//! 10.3 for its states; 11.2.5.2 for `ibv_modify_qp`): what RC, UC, UD and XRC QPs share — the
//! state, `ibv_modify_qp`, the send and receive queues, the routing of completions to CQs —
//! sans-IO, in the manner of quinn-proto's `Connection`: the caller passes in packets
//! ([`Qp::handle_packet`]), work requests and the time ([`Qp::handle_timeout`]), and takes
//! out packets ([`Qp::poll_transmit`]), completions ([`Qp::poll_completion`]) and the next
//! deadline ([`Qp::poll_timeout`]). Memory is reached only through the [`MrTable`] passed in,
//! and a shared receive queue only through the [`SrqTable`] passed in.
//!
//! What differs per transport lives beside this module, each in its chapter of the spec:
//! [`crate::rc`] (9.7: AckReq and go-back-N retransmission for the requester, the completer,
//! the responder with ACKs and NAKs, ACK coalescing), [`crate::uc`] (no ACKs, no
//! retransmission, completion at hand-out, the UC responder), [`crate::ud`] (per-WR
//! addressing with a DETH, the Q_Key check, delivery with a GRH) and [`crate::xrc`]. Every
//! transport sends with the one requester here (`requester`), which asks the context's
//! transport where they differ.
//!
//! **XRC** ([`crate::xrc`]): an XRC INI QP is the RC requester with XRC opcodes (no
//! responder: requests to it are dropped); an XRC TGT QP the RC responder (no send queue)
//! that takes, per request, the SRQ its XRCETH names in the QP's XRC domain, and completes
//! on that SRQ's CQ ([`CqSide::Xrc`]).
//!
//! **SQD** (IBTA 10.3.1 "Send Queue Drain"): RTS -> SQD stops the requester from starting new
//! WQEs; a message already begun is sent to its end, and retransmissions go on. When every
//! request sent is acknowledged the send queue is drained ([`Qp::sq_draining`] turns false)
//! and, if `en_sqd_async_notify` was set, `IBV_EVENT_SQ_DRAINED` is raised. SQD -> RTS resumes.
//!
//! * [`connect`] — the RESET→INIT→RTR→RTS recipe every caller uses;
//! * [`attr`] — capacities and modify attributes as verbs passes them;
//! * [`context`] — the attributes the engine runs on, and the completions and events it
//!   produces;
//! * `send_queue` — the send WQEs, `ibv_post_send`'s checks, the flush;
//! * `requester` — request generation from the send queue (IBTA 9.7.2): segmentation, PSNs,
//!   opcodes, local buffer checks, and the local operations (BIND_MW, LOCAL_INV) in send
//!   queue order;
//! * [`segment`] — messages cut into packets, for every transport;
//! * `modify` — `ibv_modify_qp` and what each state change does;
//! * `responder` — which transport's responder a QP has;
//! * `inbound` — an inbound SEND or RDMA WRITE placed, which the RC and UC responders share;
//! * `recv` — where a responder takes its receive WQEs: the receive queue or the SRQ;
//! * [`transmit`] — packets out, with payload by reference to registered memory;
//! * `window` — the QP's share of its device's send window.

pub mod attr;
pub mod connect;
pub mod context;
pub(crate) mod inbound;
mod modify;
pub(crate) mod recv;
pub(crate) mod requester;
mod responder;
pub mod segment;
pub(crate) mod send_queue;
pub mod transmit;
mod window;

pub use attr::{QpAttr, QpCaps, QpLimits};
pub use connect::ConnectAttr;
pub use context::{Completion, CqSide, QpContext};
pub use transmit::{Chunk, Chunks, Payload, Transmit, TxQueue, MAX_INLINE, MAX_SGE};

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Instant;

use softrnic_wire::roce::RocePacket;

use crate::error::{Error, Result};
use crate::event::EventType;
use crate::mr::{MrTable, PdHandle};
use crate::nic::CqId;
use crate::qp_state::{QpState, QpType};
use crate::rc::ack_coalesce::AckCoalescer;
use crate::srq::{SrqId, SrqTable};
use crate::timer::TimerTable;
use crate::wr::{RecvWqe, RecvWr, SendWr};
use crate::xrc::XrcdId;
use context::Events;
use recv::Receives;
use requester::Requester;
use responder::Responder;

/// A queue pair of any transport (see the module comment).
#[derive(Debug)]
pub struct Qp {
    qp_type: QpType,
    ctx: QpContext,
    caps: QpCaps,
    state: QpState,
    /// The send queue and the requester: RC's, which UC and UD QPs run with their
    /// differences (it asks `ctx.transport`).
    req: Requester,
    /// The receive queue (empty on a QP with an SRQ).
    rq: VecDeque<RecvWqe>,
    /// The responder of the QP's transport.
    resp: Responder,
    timers: TimerTable,
    ev: Events,
    /// The shared receive queue the responder takes its WQEs from, if any.
    srq: Option<SrqId>,
    /// An XRC TGT QP's XRC domain.
    xrcd: Option<XrcdId>,
    /// An XRC TGT QP: the CQ of the SRQ of the request being handled, where its receive
    /// completions go.
    xrc_cq: Option<CqId>,
    /// In SQD: requests sent are not all acknowledged yet.
    sq_draining: bool,
    /// In SQD: raise `IBV_EVENT_SQ_DRAINED` once drained.
    sqd_notify: bool,
}

impl Qp {
    /// A QP in RESET.
    pub fn new(qpn: u32, pd: PdHandle, caps: QpCaps, src_port: u16, sq_sig_all: bool) -> Qp {
        Qp::new_of(QpType::Rc, qpn, pd, caps, src_port, sq_sig_all)
    }

    /// A QP of type `qp_type` in RESET.
    pub fn new_of(
        qp_type: QpType,
        qpn: u32,
        pd: PdHandle,
        caps: QpCaps,
        src_port: u16,
        sq_sig_all: bool,
    ) -> Qp {
        let mut ctx = QpContext::new(qpn, pd, src_port, sq_sig_all);
        ctx.transport = match qp_type {
            QpType::Rc => softrnic_wire::opcode::Transport::Rc,
            QpType::Uc => softrnic_wire::opcode::Transport::Uc,
            QpType::Ud => softrnic_wire::opcode::Transport::Ud,
            QpType::XrcSend | QpType::XrcRecv => softrnic_wire::opcode::Transport::Xrc,
        };
        Qp {
            qp_type,
            ctx,
            caps,
            state: QpState::Reset,
            req: Requester::new(caps.max_send_wr as usize),
            rq: VecDeque::with_capacity(caps.max_recv_wr as usize),
            resp: Responder::new(qp_type),
            timers: TimerTable::default(),
            ev: Events::default(),
            srq: None,
            xrcd: None,
            xrc_cq: None,
            sq_draining: false,
            sqd_notify: false,
        }
    }

    /// The same XRC TGT QP bound to the XRC domain `xrcd`; set at creation.
    pub fn with_xrcd(mut self, xrcd: XrcdId) -> Qp {
        self.xrcd = Some(xrcd);
        self
    }

    /// The XRC domain of an XRC TGT QP.
    pub fn xrcd(&self) -> Option<XrcdId> {
        self.xrcd
    }

    /// The same QP taking its receive WQEs from the SRQ `srq` (`ibv_qp_init_attr.srq`); set at
    /// creation. Its own receive queue then stays empty: `post_recv` is refused.
    pub fn with_srq(mut self, srq: SrqId) -> Qp {
        self.srq = Some(srq);
        self
    }

    /// The SRQ the QP takes receive WQEs from.
    pub fn srq(&self) -> Option<SrqId> {
        self.srq
    }

    /// In SQD, whether requests sent are still unacknowledged (`ibv_qp_attr.sq_draining`).
    pub fn sq_draining(&self) -> bool {
        self.state == QpState::Sqd && self.sq_draining
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.ctx.qpn
    }

    /// The state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The capacities.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// The context (attributes) the engine runs on.
    pub fn context(&self) -> &QpContext {
        &self.ctx
    }

    /// Applies what a role asked for: a fatal error moves the QP to ERR; in SQD, the last
    /// acknowledgement drains the send queue.
    fn settle(&mut self) {
        if std::mem::take(&mut self.ev.fatal) && self.state != QpState::Err {
            self.enter_error();
        }
        if let Some(cq) = self.xrc_cq {
            // An XRC TGT QP's receives complete on the CQ of the SRQ they came from.
            for c in self.ev.completions.iter_mut() {
                if c.side == CqSide::Recv {
                    c.side = CqSide::Xrc(cq);
                }
            }
        }
        self.check_drained();
        self.count_window();
    }

    /// `ibv_post_send` of one WR.
    ///
    /// # Errors
    /// `EINVAL` in RESET, INIT and RTR, and for a malformed WR (see `Requester::post`);
    /// `ENOMEM` when the SQ is full; `EOPNOTSUPP` for operations softrnic does not do yet.
    /// In ERR the WR is accepted and completes with `IBV_WC_WR_FLUSH_ERR`.
    pub fn post_send(&mut self, wr: &SendWr, mrs: &MrTable) -> Result<()> {
        if self.qp_type == QpType::XrcRecv {
            return Err(Error::InvalidArgument("an XRC TGT QP has no send queue"));
        }
        if !self.state.can_post_send() {
            return Err(Error::InvalidArgument(
                "the QP is not ready to send (below RTS)",
            ));
        }
        if wr.sg_list.len() > self.caps.max_send_sge as usize {
            return Err(Error::InvalidArgument("more SGEs than max_send_sge"));
        }
        self.req.post(&self.ctx, wr, mrs)?;
        if self.state == QpState::Err {
            self.req.flush(&self.ctx, &mut self.ev);
        }
        Ok(())
    }

    /// `ibv_post_recv` of one WR.
    ///
    /// # Errors
    /// `EINVAL` on a QP with an SRQ (post to the SRQ instead), in RESET, or for too many SGEs
    /// or a message over 2^31 bytes; `ENOMEM` when the RQ is full. In ERR the WR is accepted
    /// and completes with `IBV_WC_WR_FLUSH_ERR`.
    pub fn post_recv(&mut self, wr: &RecvWr) -> Result<()> {
        if self.qp_type.is_xrc() {
            return Err(Error::InvalidArgument(
                "an XRC QP has no receive queue: post to the XRC SRQ",
            ));
        }
        if self.srq.is_some() {
            return Err(Error::InvalidArgument(
                "the QP takes its receives from an SRQ: use ibv_post_srq_recv",
            ));
        }
        if !self.state.can_post_recv() {
            return Err(Error::InvalidArgument("the QP is in RESET"));
        }
        if wr.sg_list.len() > self.caps.max_recv_sge as usize {
            return Err(Error::InvalidArgument("more SGEs than max_recv_sge"));
        }
        if self.rq.len() >= self.caps.max_recv_wr as usize {
            return Err(Error::NoMemory("receive queue full"));
        }
        let wqe = RecvWqe::new(wr, self.caps.max_recv_sge, self.ctx.pd)?;
        self.rq.push_back(wqe);
        if self.state == QpState::Err {
            self.flush_rq();
        }
        Ok(())
    }

    /// Handles a RoCE packet addressed to this QP (its ICRC already checked). A QP with an
    /// SRQ takes receive WQEs from `srqs`. (A UD QP's GRH then has no addresses: see
    /// [`Qp::handle_packet_from`].)
    pub fn handle_packet(
        &mut self,
        now: Instant,
        pkt: &RocePacket<'_>,
        mrs: &MrTable,
        srqs: &mut SrqTable,
    ) {
        let none = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
        self.handle_packet_from(now, pkt, none, none, mrs, srqs);
    }

    /// [`Qp::handle_packet`] for a packet from IP address `src` to `dst`, which a UD QP
    /// writes into the receive buffer's GRH.
    pub fn handle_packet_from(
        &mut self,
        now: Instant,
        pkt: &RocePacket<'_>,
        src: IpAddr,
        dst: IpAddr,
        mrs: &MrTable,
        srqs: &mut SrqTable,
    ) {
        self.ev.counters.rcvd_pkts += 1;
        let Ok(info) = pkt.repr.info() else { return };
        match &mut self.resp {
            Responder::Rc { .. } => {}
            Responder::Uc(uc) => {
                // Every UC packet is a request; the UC responder drops other transports'.
                if self.state.accepts_incoming() {
                    let srq = self.srq.and_then(|id| srqs.get_mut(id));
                    let recv = Receives::new(&mut self.rq, srq);
                    uc.handle_request(&self.ctx, pkt, mrs, recv, &mut self.ev);
                }
                return;
            }
            Responder::Ud => {
                if self.state.accepts_incoming() {
                    let srq = self.srq.and_then(|id| srqs.get_mut(id));
                    let recv = Receives::new(&mut self.rq, srq);
                    let ev = &mut self.ev;
                    crate::ud::responder::handle_datagram(&self.ctx, pkt, src, dst, mrs, recv, ev);
                    self.settle();
                }
                return;
            }
        }
        // IBTA 9.6.1.1 (and rxe's `check_type_qp`): an opcode of another transport (UC, UD,
        // CNP) is not for an RC QP: dropped silently, never an invalid request. An XRC INI QP
        // has no responder, an XRC TGT QP no requester.
        if info.transport != self.ctx.transport
            || (self.qp_type == QpType::XrcSend && info.is_request())
            || (self.qp_type == QpType::XrcRecv && !info.is_request())
        {
            return;
        }
        if info.is_request() {
            if self.state.accepts_incoming() {
                let srq_id = match self.qp_type {
                    QpType::XrcRecv => self.xrc_target(pkt, srqs),
                    _ => self.srq,
                };
                let Responder::Rc { resp, acks } = &mut self.resp else {
                    unreachable!("matched above")
                };
                if self.qp_type == QpType::XrcRecv && srq_id.is_none() {
                    resp.refuse(pkt, &mut self.ev);
                } else {
                    let srq = srq_id.and_then(|id| srqs.get_mut(id));
                    let recv = Receives::new(&mut self.rq, srq);
                    resp.handle_request(&self.ctx, pkt, mrs, recv, &mut self.ev);
                }
                let (rts, timeout) = (self.state == QpState::Rts, self.ctx.ack_timeout);
                acks.request_handled(resp, rts, now, timeout, &mut self.timers);
            }
        } else if self.state.accepts_responses() {
            self.req
                .handle_response(&self.ctx, now, pkt, &mut self.timers, mrs, &mut self.ev);
        }
        self.settle();
    }

    /// An XRC TGT QP's SRQ for request `pkt`: the XRC SRQ of the QP's domain its XRCETH
    /// names, whose PD the request's memory accesses then use and whose CQ its completion
    /// goes to; `None` when there is no such SRQ.
    fn xrc_target(&mut self, pkt: &RocePacket<'_>, srqs: &mut SrqTable) -> Option<SrqId> {
        let srqn = pkt.repr.xrceth?.srqn;
        let (id, pd, cq) = crate::xrc::target_srq(srqs, self.xrcd?, srqn)?;
        self.ctx.pd = pd;
        self.xrc_cq = Some(cq);
        Some(id)
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Responder::Rc { acks, .. } = &mut self.resp {
            acks.handle_timeout(now, &mut self.timers);
        }
        if matches!(self.state, QpState::Rts | QpState::Sqd | QpState::Sqe) {
            self.req
                .handle_timeout(&self.ctx, now, &mut self.timers, &mut self.ev);
            self.settle();
        }
    }

    /// Lets a held ACK leave with the next transmit (before the QP is destroyed, say).
    pub fn release_acks(&mut self) {
        if let Responder::Rc { acks, .. } = &mut self.resp {
            acks.release(&mut self.timers);
        }
    }

    /// The next packet to send: responses carrying data first, then requests, with plain
    /// ACKs interleaved and perhaps held (`rc/ack_coalesce.rs`, "The order"). In SQD only a
    /// message already begun goes on.
    pub fn poll_transmit(&mut self, now: Instant, mrs: &MrTable) -> Option<Transmit> {
        let mut t = Transmit::empty();
        self.poll_transmit_into(now, mrs, &mut t).then_some(t)
    }

    /// [`Qp::poll_transmit`] writing the packet into `out` (see [`TxQueue`]):
    /// `true` if there was one.
    pub fn poll_transmit_into(&mut self, now: Instant, mrs: &MrTable, out: &mut Transmit) -> bool {
        let sent = self.transmit_into(now, mrs, out);
        self.ev.counters.sent_pkts += u64::from(sent);
        sent
    }

    /// [`Qp::poll_transmit_into`], uncounted.
    fn transmit_into(&mut self, now: Instant, mrs: &MrTable, out: &mut Transmit) -> bool {
        if self.state == QpState::Reset {
            return false;
        }
        // RC: the responder's packets and the requester's in the order ACK coalescing says
        // (`rc/ack_coalesce.rs`, "The order").
        let Responder::Rc { resp, acks } = &mut self.resp else {
            // UC and UD: the requester alone sends.
            return self.request_into(now, mrs, out);
        };
        let held = AckCoalescer::held(resp, &self.timers);
        if acks.response_first(resp, held) && resp.poll_transmit(&self.ctx, out) {
            return true;
        }
        let sent = self.request_into(now, mrs, out);
        let Responder::Rc { resp, acks } = &mut self.resp else {
            unreachable!("matched above")
        };
        if sent {
            acks.request_sent(resp, held);
            return true;
        }
        !held && resp.poll_transmit(&self.ctx, out)
    }

    /// The requester's next packet, if it may send: in RTS, or in SQD to finish a message.
    fn request_into(&mut self, now: Instant, mrs: &MrTable, out: &mut Transmit) -> bool {
        let start_new = match self.state {
            QpState::Rts => Some(true),
            QpState::Sqd => Some(false),
            _ => None,
        };
        start_new.is_some_and(|start_new| {
            let sent = self.req.poll_transmit(
                &self.ctx,
                now,
                start_new,
                &mut self.timers,
                mrs,
                &mut self.ev,
                out,
            );
            if !self.ctx.is_reliable() {
                self.req.complete_handed_out(&self.ctx, &mut self.ev);
            }
            self.settle();
            sent
        })
    }

    /// The earliest time [`Qp::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_timeout()
    }

    /// What the QP counted (`softrnic stat`, [`crate::counters`]).
    pub fn counters(&self) -> &crate::counters::QpCounters {
        &self.ev.counters
    }

    /// The next completion, in order.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.ev.completions.pop_front()
    }

    /// The next affiliated asynchronous event of this QP (`IBV_EVENT_SQ_DRAINED`,
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`), in order.
    pub fn poll_event(&mut self) -> Option<EventType> {
        self.ev.affiliated.pop_front()
    }

    /// Whether an affiliated event waits for [`Qp::poll_event`].
    pub fn has_event(&self) -> bool {
        !self.ev.affiliated.is_empty()
    }

    /// Whether [`Qp::poll_transmit`] may have something (cheap; for drivers' loops).
    pub fn wants_transmit(&self) -> bool {
        let req = match self.state {
            QpState::Rts => self.req.cur < self.req.sq.len(),
            QpState::Sqd => self.req.sq.get(self.req.cur).is_some_and(|w| w.started),
            _ => false,
        };
        // (A held ACK is the only response then, and waits for its deadline.)
        let resp = match &self.resp {
            Responder::Rc { resp, .. } => AckCoalescer::may_respond(resp, &self.timers),
            Responder::Uc(_) | Responder::Ud => false,
        };
        resp || req
    }

    /// Send WRs not completed yet.
    pub fn send_queue_len(&self) -> usize {
        self.req.sq.len()
    }
}

//! The active side of connection establishment (IBTA 12.6.5, 12.6.8, 12.6.9; 12.9.6): send
//! the REQ and retry it, take the REP (or an MRA, which stretches the wait), and send the RTU
//! once the application's QP is ready.

use std::net::IpAddr;
use std::time::Instant;

use softrnic_wire::cm::mra::{MSG_MRAED_REP, MSG_MRAED_REQ};
use softrnic_wire::cm::rej::{MSG_REJECTED_OTHER, REASON_INVALID_COMM_ID};
use softrnic_wire::cm::{CmMessage, MraRepr, RepRepr, ReqRepr, RtuRepr};

use super::conn::{Conn, State};
use super::{cm_timeout, private_data, rej, Cm, CmError, ConnId, Event};

impl Cm {
    /// Sends `req` to the CM at `peer` and waits for its answer. The CM fills in the REQ's
    /// Local Communication ID and Local CA GUID; the rest (the QP, its starting PSN, the path,
    /// the Service ID, the timeouts, the private data) is the caller's.
    ///
    /// # Errors
    /// [`CmError::NoResources`]: too many connections.
    pub fn connect(
        &mut self,
        now: Instant,
        peer: IpAddr,
        mut req: ReqRepr,
    ) -> Result<ConnId, CmError> {
        if !self.has_room() {
            return Err(CmError::NoResources);
        }
        let id = self.new_id();
        req.local_comm_id = id;
        req.local_ca_guid = self.cfg.ca_guid;
        let tid = self.new_tid(id);
        let mad = self.send(peer, tid, &CmMessage::Req(req));
        let mut c = Conn {
            state: State::ReqSent,
            peer,
            passive: false,
            remote_comm_id: 0,
            remote_ca_guid: 0,
            remote_qpn: 0,
            local_qpn: req.local_qpn,
            service_id: req.service_id,
            tid,
            last: Box::new(mad),
            every: Default::default(),
            retries_left: 0,
            max_retries: req.max_cm_retries,
            peer_response: req.remote_cm_response_timeout,
            deadline: None,
            timewait: cm_timeout(req.primary_path.local_ack_timeout),
            orphan: false,
        };
        c.await_answer(now, mad, self.wait_for(req.remote_cm_response_timeout));
        self.conns.insert(id, c);
        Ok(ConnId(id))
    }

    /// The REP to a REQ of ours: report it; a repeated one gets the RTU again.
    pub(super) fn on_rep(&mut self, from: IpAddr, tid: u64, rep: RepRepr) {
        let id = rep.remote_comm_id;
        let Some(c) = self
            .conns
            .get_mut(&id)
            .filter(|c| c.peer == from && !c.passive)
        else {
            // 12.6.8: a REP for no connection is rejected, so that its sender stops.
            self.stats.unknown += 1;
            let r = rej(
                id,
                rep.local_comm_id,
                MSG_REJECTED_OTHER,
                REASON_INVALID_COMM_ID,
            );
            self.send(from, tid, &CmMessage::Rej(r));
            return;
        };
        match c.state {
            State::ReqSent => {
                c.remote_comm_id = rep.local_comm_id;
                c.remote_qpn = rep.local_qpn;
                c.remote_ca_guid = rep.local_ca_guid;
                c.state = State::RepRcvd;
                c.answered(None);
                self.by_remote_id.insert((from, rep.local_comm_id), id);
                self.by_remote_qpn.insert((from, rep.local_qpn), id);
                if !c.orphan {
                    self.events.push_back(Event::Reply {
                        conn: ConnId(id),
                        rep,
                    });
                }
            }
            State::RepRcvd => self.stats.duplicates += 1,
            State::Established if rep.local_comm_id == c.remote_comm_id => {
                // Our RTU was lost: send it again.
                self.stats.duplicates += 1;
                let mad = *c.last;
                self.out.push_back(super::Transmit { to: from, mad });
            }
            _ => self.stats.out_of_state += 1,
        }
    }

    /// The application's QP is ready (RTS): send the RTU, with `data` as its private data;
    /// the connection is established.
    ///
    /// # Errors
    /// [`CmError::NotFound`], [`CmError::State`] unless the REP was reported,
    /// [`CmError::PrivateDataTooLong`] beyond 224 bytes.
    pub fn ready_to_use(&mut self, conn: ConnId, data: &[u8]) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        if c.state != State::RepRcvd {
            return Err(CmError::State(c.state));
        }
        let rtu = RtuRepr {
            local_comm_id: conn.0,
            remote_comm_id: c.remote_comm_id,
            private_data: private_data(data)?,
        };
        let (peer, tid) = (c.peer, c.tid);
        let mad = self.send(peer, tid, &CmMessage::Rtu(rtu));
        let c = self.conns.get_mut(&conn.0).expect("looked up above");
        c.state = State::Established;
        c.answered(Some(mad));
        Ok(())
    }

    /// An MRA: the peer got our REQ or REP and needs longer to answer; wait its Service
    /// Timeout before the next retry.
    pub(super) fn on_mra(&mut self, now: Instant, from: IpAddr, mra: MraRepr) {
        let wait = self.wait_for(mra.service_timeout);
        let Some(c) = self
            .conns
            .get_mut(&mra.remote_comm_id)
            .filter(|c| c.peer == from)
        else {
            self.stats.unknown += 1;
            return;
        };
        match (c.state, mra.message_mraed) {
            (State::ReqSent, MSG_MRAED_REQ) | (State::RepSent, MSG_MRAED_REP) => {
                c.deadline = Some(now + wait);
            }
            _ => self.stats.out_of_state += 1,
        }
    }
}

//! The passive side of connection establishment (IBTA 12.6.5-12.6.9; 12.9.6): a REQ for a
//! Service ID listened on is reported; the application accepts it (REP, retried until the RTU)
//! or rejects it. A REQ seen before gets an MRA while the application thinks (12.6.6), a REQ
//! from a QP that still has a connection here is stale (12.9.8.3.1), and a REQ nobody
//! listens for is rejected with reason 8, Invalid Service ID (12.6.7.2).

use std::net::IpAddr;
use std::time::Instant;

use softrnic_wire::cm::mra::MSG_MRAED_REQ;
use softrnic_wire::cm::rej::{
    ARI_LEN, MSG_REJECTED_REP, MSG_REJECTED_REQ, REASON_INVALID_SERVICE_ID,
    REASON_INVALID_TRANSPORT_TYPE, REASON_NO_RESOURCES, REASON_STALE_CONN, REASON_UNSUPPORTED,
};
use softrnic_wire::cm::{CmMessage, MraRepr, RepRepr, ReqRepr, RtuRepr};
use softrnic_wire::cm::{TRANSPORT_RC, TRANSPORT_UC};

use super::conn::{Conn, State};
use super::{cm_timeout, private_data, rej, Cm, CmError, ConnId, Event};

impl Cm {
    /// A REQ: report it if it is new and listened for; otherwise answer as 12.9 says.
    pub(super) fn on_req(&mut self, now: Instant, from: IpAddr, tid: u64, req: ReqRepr) {
        let their_id = req.local_comm_id;
        let refuse = |cm: &mut Cm, reason: u16| {
            let r = rej(0, their_id, MSG_REJECTED_REQ, reason);
            cm.send(from, tid, &CmMessage::Rej(r));
        };
        if let Some(&id) = self.by_remote_id.get(&(from, their_id)) {
            self.stats.duplicates += 1;
            match self.state(ConnId(id)) {
                Some(State::ReqRcvd) => {
                    let mra = MraRepr {
                        local_comm_id: id,
                        remote_comm_id: their_id,
                        message_mraed: MSG_MRAED_REQ,
                        service_timeout: self.cfg.mra_service_timeout,
                        private_data: [0; softrnic_wire::cm::mra::PRIVATE_DATA_LEN],
                    };
                    self.send(from, tid, &CmMessage::Mra(mra));
                }
                Some(State::TimeWait) => refuse(self, REASON_STALE_CONN),
                _ => {} // the REP's own retries answer it
            }
            return;
        }
        if let Some(&old) = self.by_remote_qpn.get(&(from, req.local_qpn)) {
            // The peer's QP is connected here still: it must have lost that connection.
            // Refuse the new one and release the old (12.9.8.3.1).
            refuse(self, REASON_STALE_CONN);
            if self.state(ConnId(old)) == Some(State::Established) {
                let _ = self.disconnect(now, ConnId(old), &[]);
            }
            return;
        }
        if req.extended_transport_type != 0 {
            return refuse(self, REASON_UNSUPPORTED);
        }
        if ![TRANSPORT_RC, TRANSPORT_UC].contains(&req.transport_service_type) {
            return refuse(self, REASON_INVALID_TRANSPORT_TYPE);
        }
        let room = self.has_room();
        let Some(l) = self.listeners.get_mut(&req.service_id) else {
            return refuse(self, REASON_INVALID_SERVICE_ID);
        };
        if l.pending >= l.backlog || !room {
            self.stats.refused += 1;
            return refuse(self, REASON_NO_RESOURCES);
        }
        l.pending += 1;
        let id = self.new_id();
        self.conns.insert(
            id,
            Conn {
                state: State::ReqRcvd,
                peer: from,
                passive: true,
                remote_comm_id: their_id,
                remote_ca_guid: req.local_ca_guid,
                remote_qpn: req.local_qpn,
                local_qpn: 0,
                service_id: req.service_id,
                tid,
                last: Box::new([0; softrnic_wire::mad::MAD_LEN]),
                every: Default::default(),
                retries_left: 0,
                max_retries: req.max_cm_retries,
                peer_response: req.local_cm_response_timeout,
                deadline: None,
                timewait: cm_timeout(req.primary_path.local_ack_timeout),
                orphan: false,
            },
        );
        self.by_remote_id.insert((from, their_id), id);
        self.by_remote_qpn.insert((from, req.local_qpn), id);
        self.events.push_back(Event::Request {
            conn: ConnId(id),
            from,
            req,
        });
    }

    /// Accepts a reported REQ: sends `rep` (the CM fills in both Communication IDs and the
    /// Local CA GUID) and retries it until the RTU comes.
    ///
    /// # Errors
    /// [`CmError::NotFound`]; [`CmError::State`] unless the REQ was reported and not answered.
    pub fn accept(&mut self, now: Instant, conn: ConnId, mut rep: RepRepr) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        if c.state != State::ReqRcvd {
            return Err(CmError::State(c.state));
        }
        rep.local_comm_id = conn.0;
        rep.remote_comm_id = c.remote_comm_id;
        rep.local_ca_guid = self.cfg.ca_guid;
        let (peer, tid, service) = (c.peer, c.tid, c.service_id);
        let every = self.wait_for(c.peer_response);
        let mad = self.send(peer, tid, &CmMessage::Rep(rep));
        self.unpend(service);
        let c = self.conns.get_mut(&conn.0).expect("looked up above");
        c.local_qpn = rep.local_qpn;
        c.state = State::RepSent;
        c.await_answer(now, mad, every);
        Ok(())
    }

    /// Rejects a reported REQ (or, on the active side, a reported REP) with `reason`, up to
    /// 72 bytes of Additional Reject Information and up to 148 of private data; the
    /// connection is forgotten.
    ///
    /// # Errors
    /// [`CmError::NotFound`]; [`CmError::State`] unless a REQ or REP waits for an answer;
    /// [`CmError::PrivateDataTooLong`].
    pub fn reject(
        &mut self,
        conn: ConnId,
        reason: u16,
        ari: &[u8],
        data: &[u8],
    ) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        let rejected = match c.state {
            State::ReqRcvd => MSG_REJECTED_REQ,
            State::RepRcvd => MSG_REJECTED_REP,
            s => return Err(CmError::State(s)),
        };
        let mut r = rej(conn.0, c.remote_comm_id, rejected, reason);
        r.private_data = private_data(data)?;
        r.ari = private_data::<ARI_LEN>(ari)?;
        r.reject_info_length = ari.len() as u8;
        let (peer, tid) = (c.peer, c.tid);
        self.send(peer, tid, &CmMessage::Rej(r));
        self.forget(conn.0);
        Ok(())
    }

    /// The RTU: the passive side's connection is established.
    pub(super) fn on_rtu(&mut self, from: IpAddr, rtu: RtuRepr) {
        let Some(c) = self
            .conns
            .get_mut(&rtu.remote_comm_id)
            .filter(|c| c.peer == from && c.passive && c.remote_comm_id == rtu.local_comm_id)
        else {
            self.stats.unknown += 1;
            return;
        };
        match c.state {
            State::RepSent => {
                c.state = State::Established;
                c.answered(None);
                if !c.orphan {
                    self.events.push_back(Event::Established {
                        conn: ConnId(rtu.remote_comm_id),
                    });
                }
            }
            State::Established => self.stats.duplicates += 1,
            _ => self.stats.out_of_state += 1,
        }
    }

    /// The QP received a packet of the connection before the RTU arrived (the RTU was lost,
    /// or is late): the connection is established (12.9.6, "RTU or data received").
    ///
    /// # Errors
    /// [`CmError::NotFound`]; [`CmError::State`] unless the REP is waiting for the RTU.
    pub fn establish(&mut self, conn: ConnId) -> Result<(), CmError> {
        let c = self.conns.get_mut(&conn.0).ok_or(CmError::NotFound)?;
        if c.state != State::RepSent {
            return Err(CmError::State(c.state));
        }
        c.state = State::Established;
        c.answered(None);
        self.events.push_back(Event::Established { conn });
        Ok(())
    }

    /// One REQ of listener `service` less waits for an answer.
    pub(super) fn unpend(&mut self, service: u64) {
        if let Some(l) = self.listeners.get_mut(&service) {
            l.pending = l.pending.saturating_sub(1);
        }
    }
}

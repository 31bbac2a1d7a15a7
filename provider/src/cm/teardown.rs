//! Connection release (IBTA 12.6.10, 12.6.11, 12.9.7): DREQ, DREP and TimeWait; the REJ that
//! ends an establishment (12.6.7); what the application's destroying a connection sends in
//! each state; and the timers: retries, giving up, the end of TimeWait.

use std::net::IpAddr;
use std::time::Instant;

use softrnic_wire::cm::rej::{
    MSG_REJECTED_OTHER, MSG_REJECTED_REP, MSG_REJECTED_REQ, REASON_CONSUMER_DEFINED,
    REASON_STALE_CONN, REASON_TIMEOUT,
};
use softrnic_wire::cm::{CmMessage, DrepRepr, DreqRepr, RejRepr};

use super::conn::State;
use super::{dreq, private_data, rej, Cm, CmError, ConnId, Event, Transmit};

impl Cm {
    /// Disconnects: from an established connection, sends a DREQ (with `data` as private
    /// data) and retries it until the DREP; after the peer's DREQ, sends the DREP. Either
    /// way the connection then waits in TimeWait. Calling it again does nothing.
    ///
    /// # Errors
    /// [`CmError::NotFound`]; [`CmError::State`] before the connection is established;
    /// [`CmError::PrivateDataTooLong`].
    pub fn disconnect(&mut self, now: Instant, conn: ConnId, data: &[u8]) -> Result<(), CmError> {
        let c = self.conns.get(&conn.0).ok_or(CmError::NotFound)?;
        match c.state {
            State::Established => {
                let d = dreq(conn.0, c, private_data(data)?);
                let (peer, every) = (c.peer, self.wait_for(c.peer_response));
                let tid = self.new_tid(conn.0);
                let mad = self.send(peer, tid, &CmMessage::Dreq(d));
                let c = self.conns.get_mut(&conn.0).expect("looked up above");
                c.tid = tid;
                c.state = State::DreqSent;
                c.await_answer(now, mad, every);
            }
            State::DreqRcvd => {
                let drep = DrepRepr {
                    local_comm_id: conn.0,
                    remote_comm_id: c.remote_comm_id,
                    private_data: private_data(data)?,
                };
                let (peer, tid) = (c.peer, c.tid);
                let mad = self.send(peer, tid, &CmMessage::Drep(drep));
                self.conns
                    .get_mut(&conn.0)
                    .expect("looked up above")
                    .answered(Some(mad));
                self.enter_timewait(now, conn.0);
            }
            State::DreqSent | State::TimeWait => {}
            s => return Err(CmError::State(s)),
        }
        Ok(())
    }

    /// A DREQ: report it (the application flushes its QP, then calls [`Cm::disconnect`]); a
    /// DREQ of a connection not known (any more) gets a DREP all the same (12.6.10).
    pub(super) fn on_dreq(&mut self, now: Instant, from: IpAddr, tid: u64, d: DreqRepr) {
        let id = d.remote_comm_id;
        let drep = DrepRepr {
            local_comm_id: id,
            remote_comm_id: d.local_comm_id,
            private_data: [0; softrnic_wire::cm::drep::PRIVATE_DATA_LEN],
        };
        let Some(c) = self
            .conns
            .get_mut(&id)
            .filter(|c| c.peer == from && c.remote_comm_id == d.local_comm_id)
        else {
            self.stats.unknown += 1;
            self.send(from, tid, &CmMessage::Drep(drep));
            return;
        };
        if d.remote_qpn_eecn != c.local_qpn {
            self.stats.unknown += 1;
            return;
        }
        match c.state {
            // A DREQ before the RTU: the RTU was lost, and the connection was established.
            State::Established | State::RepSent => {
                c.tid = tid;
                c.state = State::DreqRcvd;
                c.answered(None);
                if c.orphan {
                    let _ = self.disconnect(now, ConnId(id), &[]);
                } else {
                    self.events.push_back(Event::DisconnectRequested {
                        conn: ConnId(id),
                        private_data: d.private_data,
                    });
                }
            }
            // Both sides asked at once: answer, and count ours as answered.
            State::DreqSent => {
                let orphan = c.orphan;
                let mad = self.send(from, tid, &CmMessage::Drep(drep));
                self.conns
                    .get_mut(&id)
                    .expect("found above")
                    .answered(Some(mad));
                self.enter_timewait(now, id);
                if !orphan {
                    self.events
                        .push_back(Event::Disconnected { conn: ConnId(id) });
                }
            }
            State::TimeWait | State::DreqRcvd => {
                self.stats.duplicates += 1;
                if c.state == State::TimeWait {
                    self.send(from, tid, &CmMessage::Drep(drep));
                }
            }
            _ => self.stats.out_of_state += 1,
        }
    }

    /// The DREP to our DREQ.
    pub(super) fn on_drep(&mut self, now: Instant, from: IpAddr, drep: DrepRepr) {
        let id = drep.remote_comm_id;
        let Some(c) = self
            .conns
            .get_mut(&id)
            .filter(|c| c.peer == from && c.remote_comm_id == drep.local_comm_id)
        else {
            self.stats.unknown += 1;
            return;
        };
        match c.state {
            State::DreqSent => {
                let orphan = c.orphan;
                c.answered(None);
                self.enter_timewait(now, id);
                if !orphan {
                    self.events
                        .push_back(Event::Disconnected { conn: ConnId(id) });
                }
            }
            State::TimeWait => self.stats.duplicates += 1,
            _ => self.stats.out_of_state += 1,
        }
    }

    /// A REJ: the establishment ends (a stale connection's IDs go through TimeWait).
    pub(super) fn on_rej(&mut self, now: Instant, from: IpAddr, r: RejRepr) {
        let id = r.remote_comm_id;
        let Some(c) = self.conns.get_mut(&id).filter(|c| {
            c.peer == from && (c.remote_comm_id == 0 || c.remote_comm_id == r.local_comm_id)
        }) else {
            self.stats.unknown += 1;
            return;
        };
        match c.state {
            State::ReqSent
            | State::ReqRcvd
            | State::RepSent
            | State::RepRcvd
            | State::Established => {
                let orphan = c.orphan;
                if r.reason == REASON_STALE_CONN || c.state == State::Established {
                    c.answered(None);
                    self.enter_timewait(now, id);
                } else {
                    self.forget(id);
                }
                if !orphan {
                    self.events.push_back(Event::Rejected {
                        conn: ConnId(id),
                        rej: r,
                    });
                }
            }
            _ => self.stats.out_of_state += 1,
        }
    }

    /// The application is done with `conn`: whatever it was doing ends as the peer expects
    /// (a REJ, a DREQ or a DREP), and no more events come for it. A connection in TimeWait
    /// stays known until TimeWait ends.
    ///
    /// # Errors
    /// [`CmError::NotFound`].
    pub fn destroy(&mut self, now: Instant, conn: ConnId) -> Result<(), CmError> {
        if self.sidr_destroy(conn) {
            return Ok(());
        }
        let c = self.conns.get_mut(&conn.0).ok_or(CmError::NotFound)?;
        c.orphan = true;
        let (rejected, reason) = match c.state {
            State::ReqSent => (MSG_REJECTED_OTHER, REASON_TIMEOUT),
            State::ReqRcvd => (MSG_REJECTED_REQ, REASON_CONSUMER_DEFINED),
            State::RepRcvd => (MSG_REJECTED_REP, REASON_CONSUMER_DEFINED),
            State::RepSent => (MSG_REJECTED_OTHER, REASON_CONSUMER_DEFINED),
            State::Established | State::DreqRcvd => return self.disconnect(now, conn, &[]),
            State::DreqSent | State::TimeWait => return Ok(()),
        };
        let r = rej(conn.0, c.remote_comm_id, rejected, reason);
        let (peer, tid) = (c.peer, c.tid);
        self.send(peer, tid, &CmMessage::Rej(r));
        self.forget(conn.0);
        Ok(())
    }

    /// The application is done with every connection and SIDR request at once, as when its
    /// process exits: each ends as [`Cm::destroy`] ends it (an established connection with a
    /// DREQ, a REQ not answered yet with a REJ, a SIDR_REQ with a SIDR_REP). Linux does this
    /// for a process whose rdma_cm file closes (`ucma_close` destroys each of its ids), so a
    /// peer never waits for a connection whose process is gone.
    pub fn destroy_all(&mut self, now: Instant) {
        let mut ids: Vec<u32> = self.conns.keys().copied().collect();
        ids.extend(self.sidr_in.keys().chain(self.sidr_out.keys()));
        ids.sort_unstable();
        for id in ids {
            let _ = self.destroy(now, ConnId(id));
        }
    }

    /// Connection `id`'s timer fired: retry, give up, or leave TimeWait.
    pub(super) fn on_conn_timeout(&mut self, now: Instant, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.deadline = None;
        let (state, orphan, peer) = (c.state, c.orphan, c.peer);
        if state == State::TimeWait {
            self.forget(id);
            if !orphan {
                self.events
                    .push_back(Event::TimewaitExit { conn: ConnId(id) });
            }
            return;
        }
        if !matches!(state, State::ReqSent | State::RepSent | State::DreqSent) {
            return;
        }
        if c.retries_left > 0 {
            c.retries_left -= 1;
            c.deadline = Some(now + c.every);
            let mad = *c.last;
            self.out.push_back(Transmit { to: peer, mad });
            return;
        }
        // Every retry went unanswered.
        if state == State::DreqSent {
            self.enter_timewait(now, id);
            if !orphan {
                self.events
                    .push_back(Event::Disconnected { conn: ConnId(id) });
            }
            return;
        }
        let r = rej(id, c.remote_comm_id, MSG_REJECTED_OTHER, REASON_TIMEOUT);
        let tid = c.tid;
        self.send(peer, tid, &CmMessage::Rej(r));
        self.forget(id);
        if !orphan {
            self.events.push_back(Event::TimedOut { conn: ConnId(id) });
        }
    }

    /// Connection `id` enters TimeWait.
    fn enter_timewait(&mut self, now: Instant, id: u32) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = State::TimeWait;
            c.deadline = Some(now + c.timewait);
        }
    }

    /// Connection `id` is gone, with its entries in the lookup tables.
    pub(super) fn forget(&mut self, id: u32) {
        let Some(c) = self.conns.remove(&id) else {
            return;
        };
        for (map, key) in [
            (&mut self.by_remote_id, (c.peer, c.remote_comm_id)),
            (&mut self.by_remote_qpn, (c.peer, c.remote_qpn)),
        ] {
            if map.get(&key) == Some(&id) {
                map.remove(&key);
            }
        }
        if c.state == State::ReqRcvd {
            self.unpend(c.service_id);
        }
    }
}

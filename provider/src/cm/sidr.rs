//! Service ID Resolution (IBTA 12.11): a UD QP's way to learn which QP and Q_Key serve a
//! Service ID. One request, one reply, no connection: the requester retries its SIDR_REQ
//! until the SIDR_REP comes; the responder reports the request once, and keeps its reply a
//! while to send it again to a retried request.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use softrnic_wire::cm::sidr_rep::{STATUS_REJECTED, STATUS_UNSUPPORTED};
use softrnic_wire::cm::{CmMessage, SidrRepRepr, SidrReqRepr};
use softrnic_wire::mad::MAD_LEN;

use super::{Cm, CmError, ConnId, Event, Transmit};

/// How long a responder keeps a SIDR_REP for retried requests: past Linux's whole retry
/// budget (15 retries, 4 s apart).
pub const SIDR_REPLY_KEPT: Duration = Duration::from_secs(64);

/// A SIDR_REQ of ours, waiting for its SIDR_REP.
#[derive(Debug)]
pub(super) struct SidrOut {
    peer: IpAddr,
    mad: [u8; MAD_LEN],
    every: Duration,
    retries_left: u8,
    pub deadline: Instant,
}

/// A peer's SIDR_REQ, reported, and then answered.
#[derive(Debug)]
pub(super) struct SidrIn {
    peer: IpAddr,
    request_id: u32,
    tid: u64,
    reply: Option<[u8; MAD_LEN]>,
    /// When the reply is forgotten.
    pub deadline: Option<Instant>,
}

impl Cm {
    /// Sends `req` to the CM at `peer` (the CM fills in its Request ID), and again every
    /// `every`, `retries` times, until the SIDR_REP comes.
    ///
    /// # Errors
    /// [`CmError::NoResources`]: too many connections and requests.
    pub fn sidr_request(
        &mut self,
        now: Instant,
        peer: IpAddr,
        mut req: SidrReqRepr,
        every: Duration,
        retries: u8,
    ) -> Result<ConnId, CmError> {
        if !self.has_room() {
            return Err(CmError::NoResources);
        }
        let id = self.new_id();
        req.request_id = id;
        let tid = self.new_tid(id);
        let mad = self.send(peer, tid, &CmMessage::SidrReq(req));
        self.sidr_out.insert(
            id,
            SidrOut {
                peer,
                mad,
                every,
                retries_left: retries,
                deadline: now + every,
            },
        );
        Ok(ConnId(id))
    }

    /// The SIDR_REP to a request of ours.
    pub(super) fn on_sidr_rep(&mut self, from: IpAddr, rep: SidrRepRepr) {
        match self.sidr_out.get(&rep.request_id) {
            Some(s) if s.peer == from => {
                self.sidr_out.remove(&rep.request_id);
                self.events.push_back(Event::SidrReply {
                    id: ConnId(rep.request_id),
                    rep,
                });
            }
            _ => self.stats.unknown += 1,
        }
    }

    /// A peer's SIDR_REQ: report it if new and listened for; a retried one gets the reply
    /// again; one nobody listens for gets status 1, Service ID not supported.
    pub(super) fn on_sidr_req(&mut self, from: IpAddr, tid: u64, req: SidrReqRepr) {
        if let Some(s) = self
            .sidr_in
            .values()
            .find(|s| s.peer == from && s.request_id == req.request_id)
        {
            self.stats.duplicates += 1;
            if let Some(mad) = s.reply {
                self.out.push_back(Transmit { to: from, mad });
            }
            return;
        }
        let refuse = |cm: &mut Cm, status: u8| {
            let rep = sidr_rep(req.request_id, req.service_id, status);
            cm.send(from, tid, &CmMessage::SidrRep(rep));
        };
        if !self.listeners.contains_key(&req.service_id) {
            return refuse(self, STATUS_UNSUPPORTED);
        }
        if !self.has_room() {
            self.stats.refused += 1;
            return refuse(self, STATUS_REJECTED);
        }
        let id = self.new_id();
        self.sidr_in.insert(
            id,
            SidrIn {
                peer: from,
                request_id: req.request_id,
                tid,
                reply: None,
                deadline: None,
            },
        );
        self.events.push_back(Event::SidrRequest {
            id: ConnId(id),
            from,
            req,
        });
    }

    /// Answers a reported SIDR_REQ with `rep` (the CM fills in its Request ID).
    ///
    /// # Errors
    /// [`CmError::NotFound`], or [`CmError::Answered`] if it was answered already.
    pub fn sidr_reply(
        &mut self,
        now: Instant,
        id: ConnId,
        mut rep: SidrRepRepr,
    ) -> Result<(), CmError> {
        let s = self.sidr_in.get(&id.0).ok_or(CmError::NotFound)?;
        if s.reply.is_some() {
            return Err(CmError::Answered);
        }
        rep.request_id = s.request_id;
        let (peer, tid) = (s.peer, s.tid);
        let mad = self.send(peer, tid, &CmMessage::SidrRep(rep));
        let s = self.sidr_in.get_mut(&id.0).expect("looked up above");
        s.reply = Some(mad);
        s.deadline = Some(now + SIDR_REPLY_KEPT);
        Ok(())
    }

    /// Retries SIDR_REQs, gives them up, and forgets old replies.
    pub(super) fn sidr_timeouts(&mut self, now: Instant) {
        let mut gone = Vec::new();
        for (id, s) in self.sidr_out.iter_mut().filter(|(_, s)| s.deadline <= now) {
            if s.retries_left == 0 {
                gone.push(*id);
                continue;
            }
            s.retries_left -= 1;
            s.deadline = now + s.every;
            self.out.push_back(Transmit {
                to: s.peer,
                mad: s.mad,
            });
        }
        for id in gone {
            self.sidr_out.remove(&id);
            self.events
                .push_back(Event::SidrTimedOut { id: ConnId(id) });
        }
        self.sidr_in
            .retain(|_, s| s.deadline.is_none_or(|d| d > now));
    }

    /// If `id` is a SIDR request, drops it (an unanswered peer's request is rejected, as
    /// Linux does) and says so.
    pub(super) fn sidr_destroy(&mut self, id: ConnId) -> bool {
        if self.sidr_out.remove(&id.0).is_some() {
            return true;
        }
        let Some(s) = self.sidr_in.remove(&id.0) else {
            return false;
        };
        if s.reply.is_none() {
            let rep = sidr_rep(s.request_id, 0, STATUS_REJECTED);
            self.send(s.peer, s.tid, &CmMessage::SidrRep(rep));
        }
        true
    }
}

/// A SIDR_REP with only a status.
fn sidr_rep(request_id: u32, service_id: u64, status: u8) -> SidrRepRepr {
    SidrRepRepr {
        request_id,
        status,
        info_length: 0,
        qpn: 0,
        service_id,
        q_key: 0,
        info: [0; softrnic_wire::cm::sidr_rep::INFO_LEN],
        private_data: [0; softrnic_wire::cm::sidr_rep::PRIVATE_DATA_LEN],
    }
}

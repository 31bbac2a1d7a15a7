//! One connection's record: its state in the communication state machine (IBTA 12.9.6,
//! figure "Communication state transition diagram"), who the peer is, and the one message it
//! may have to send again.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use softrnic_wire::mad::MAD_LEN;

/// The states of a connection (12.9.6). The MRA sub-states are not states here: an MRA
/// received only stretches the timer, and one sent changes nothing but what a duplicate REQ
/// gets back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Active: the REQ is sent; waiting for REP, REJ or MRA.
    ReqSent,
    /// Passive: the REQ is reported; waiting for the application to accept or reject.
    ReqRcvd,
    /// Passive: the REP is sent; waiting for the RTU.
    RepSent,
    /// Active: the REP is reported; waiting for the application's QP to reach RTS.
    RepRcvd,
    /// Both: connected.
    Established,
    /// The DREQ is sent; waiting for the DREP.
    DreqSent,
    /// The peer's DREQ is reported; waiting for the application to flush its QP.
    DreqRcvd,
    /// Released; the IDs are kept until the peer's packets are surely gone.
    TimeWait,
}

/// A connection.
#[derive(Debug)]
pub(super) struct Conn {
    pub state: State,
    /// The peer's address (its RoCEv2 GID).
    pub peer: IpAddr,
    /// Whether this side received the REQ.
    pub passive: bool,
    /// The peer's Communication ID (0 until its REP, on the active side).
    pub remote_comm_id: u32,
    /// The peer's CA GUID.
    pub remote_ca_guid: u64,
    /// The peer's QPN (0 until its REP, on the active side).
    pub remote_qpn: u32,
    /// This side's QPN.
    pub local_qpn: u32,
    /// The Service ID of the REQ.
    pub service_id: u64,
    /// The Transaction ID of the exchange in progress (REQ's, then a DREQ's).
    pub tid: u64,
    /// The last message sent that may have to go again: REQ, REP or DREQ until answered
    /// (on timeout), then RTU or DREP (on a duplicate of what it answered).
    pub last: Box<[u8; MAD_LEN]>,
    /// How long to wait for an answer before sending `last` again.
    pub every: Duration,
    /// Sends of `last` left.
    pub retries_left: u8,
    /// Max CM Retries of the connection (from the REQ).
    pub max_retries: u8,
    /// The CM response timeout (an exponent) the peer asked for its own answers.
    pub peer_response: u8,
    /// When the running timer fires.
    pub deadline: Option<Instant>,
    /// How long TimeWait lasts.
    pub timewait: Duration,
    /// The application destroyed it: no more events.
    pub orphan: bool,
}

impl Conn {
    /// Starts waiting for an answer to `last`, which was just sent, retrying it
    /// `max_retries` times, every `every`.
    pub fn await_answer(&mut self, now: Instant, last: [u8; MAD_LEN], every: Duration) {
        *self.last = last;
        self.every = every;
        self.retries_left = self.max_retries;
        self.deadline = Some(now + every);
    }

    /// The answer came: keep `last` for duplicates, stop the timer.
    pub fn answered(&mut self, last: Option<[u8; MAD_LEN]>) {
        if let Some(m) = last {
            *self.last = m;
        }
        self.deadline = None;
    }
}

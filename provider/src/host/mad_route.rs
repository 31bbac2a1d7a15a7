//! Where a connection manager MAD for QP1 goes on an address several processes share. The
//! agent's socket 0 receives every QP1 datagram of the address (`agent.rs`); this is how it
//! picks the process, the routing the connection manager (IBTA vol. 1 ch. 12) is built on.
//!
//! * **Answers carry their owner.** Each process makes its CM's Local Communication IDs, and
//!   its SIDR Request IDs, with the number of its QPN block in their top 10 bits
//!   ([`comm_id`]). Every MAD that answers one (MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR,
//!   SIDR_REP: [`softrnic_wire::cm::addressee()`]) so names the block that must get it: no table
//!   for connections, nothing to rebuild when the agent changes hands, and a peer's stale or
//!   forged ID reaches at most the process whose block it names, whose CM rejects it.
//! * **Listeners are a table** ([`Listeners`]): a process registers the Service IDs it
//!   listens on with the agent, over the link of `cm_link.rs`; a REQ or SIDR_REQ goes to the
//!   listener of its Service ID. One block per Service ID per address, as one port per
//!   listener in rdma_cm's TCP port space; when the process exits, its connection to the
//!   agent ends and its listeners go. The table is the one thing to rebuild when the agent
//!   changes hands: each process registers its Service IDs again with the new agent, and a
//!   block registering its own Service ID again changes nothing.
//! * **What is nobody's** goes to the agent's own connection manager, which has no listener
//!   and no connection and answers as IBTA ch. 12 says for those: a REQ gets REJ reason 8
//!   (Invalid Service ID, 12.6.7.2), a SIDR_REQ a SIDR_REP with status 1, a DREQ its DREP, a
//!   REP a REJ reason 6; so an answer whose block no process holds (its process exited) ends
//!   its peer's wait at once. ClassPortInfo is for the agent to answer.

use std::collections::HashMap;

use softrnic_wire::cm::{addressee, Addressee};

use super::block::{QpnBlock, BLOCKS};

/// Bits of a communication ID below its block's number.
pub const COMM_ID_BITS: u32 = 32 - (BLOCKS.trailing_zeros());

/// The `n`th communication ID of `block` (wrapping within the block's 2^22).
pub fn comm_id(block: QpnBlock, n: u32) -> u32 {
    u32::from(block.0) << COMM_ID_BITS | (n & ((1 << COMM_ID_BITS) - 1))
}

/// The block whose process made communication ID `id`.
pub fn comm_id_block(id: u32) -> QpnBlock {
    QpnBlock((id >> COMM_ID_BITS) as u16)
}

/// Where a MAD goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To the process holding this block.
    Block(QpnBlock),
    /// A REQ or SIDR_REQ for a Service ID nobody listens on: the agent rejects it.
    NoListener(u64),
    /// ClassPortInfo: the agent answers.
    Agent,
}

/// The Service IDs listened on, and by which block.
#[derive(Debug, Default)]
pub struct Listeners {
    by_service: HashMap<u64, QpnBlock>,
}

/// A Service ID is already listened on by another block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InUse(pub QpnBlock);

impl Listeners {
    /// Block `block` listens on `service` (again: no change).
    ///
    /// # Errors
    /// [`InUse`] with the block that already listens on it (`EADDRINUSE` to the process).
    pub fn listen(&mut self, service: u64, block: QpnBlock) -> Result<(), InUse> {
        match *self.by_service.entry(service).or_insert(block) {
            b if b == block => Ok(()),
            other => Err(InUse(other)),
        }
    }

    /// Block `block` stops listening on `service`; another block's listener stays.
    pub fn unlisten(&mut self, service: u64, block: QpnBlock) {
        if self.by_service.get(&service) == Some(&block) {
            self.by_service.remove(&service);
        }
    }

    /// Every Service ID listened on, with its block.
    pub fn entries(&self) -> impl Iterator<Item = (u64, QpnBlock)> + '_ {
        self.by_service.iter().map(|(s, b)| (*s, *b))
    }

    /// Every listener of `block` goes (its process exited).
    pub fn forget(&mut self, block: QpnBlock) {
        self.by_service.retain(|_, b| *b != block);
    }

    /// Where the CM MAD with AttributeID `attribute_id` and class data `data` goes.
    ///
    /// # Errors
    /// The MAD is too short for its addressee or not a CM attribute: the agent drops it.
    pub fn route(&self, attribute_id: u16, data: &[u8]) -> softrnic_wire::Result<Route> {
        Ok(match addressee(attribute_id, data)? {
            Addressee::Service(s) => match self.by_service.get(&s) {
                Some(b) => Route::Block(*b),
                None => Route::NoListener(s),
            },
            Addressee::Id(id) => Route::Block(comm_id_block(id)),
            Addressee::Port => Route::Agent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use softrnic_wire::cm::{req, rtu, MSG_LEN};
    use softrnic_wire::mad::{ATTR_CLASS_PORT_INFO, ATTR_CM_DREQ, ATTR_CM_REP, ATTR_CM_REQ};

    fn req_for(service: u64) -> [u8; MSG_LEN] {
        let mut data = [0u8; MSG_LEN];
        let mut p = req::Packet::new_unchecked(&mut data[..]);
        p.set_local_comm_id(0xdead_beef);
        p.set_service_id(service);
        data
    }

    fn answer_to(id: u32) -> [u8; MSG_LEN] {
        let mut data = [0u8; MSG_LEN];
        let mut p = rtu::Packet::new_unchecked(&mut data[..]);
        p.set_local_comm_id(0xdead_beef);
        p.set_remote_comm_id(id);
        data
    }

    #[test]
    fn a_comm_id_names_its_block_across_the_whole_range() {
        assert_eq!(COMM_ID_BITS, 22);
        for b in [1, 2, 511, BLOCKS as u16 - 1] {
            for n in [0, 1, (1 << 22) - 1, 1 << 22, u32::MAX] {
                assert_eq!(comm_id_block(comm_id(QpnBlock(b), n)), QpnBlock(b));
            }
        }
        assert_ne!(comm_id(QpnBlock(1), 0), 0, "no process's ID is 0");
    }

    #[test]
    fn a_req_goes_to_its_listener_and_answers_to_the_block_their_id_names() {
        let mut l = Listeners::default();
        let (a, b) = (QpnBlock(1), QpnBlock(7));
        l.listen(0x0106_1c06, a).unwrap();
        l.listen(0x0106_1c06, a).unwrap();
        assert_eq!(l.listen(0x0106_1c06, b), Err(InUse(a)));
        l.listen(0x0106_4e20, b).unwrap();
        assert_eq!(
            l.route(ATTR_CM_REQ, &req_for(0x0106_1c06)),
            Ok(Route::Block(a))
        );
        assert_eq!(
            l.route(ATTR_CM_REQ, &req_for(0x0106_4e20)),
            Ok(Route::Block(b))
        );
        assert_eq!(
            l.route(ATTR_CM_REQ, &req_for(0x0106_0001)),
            Ok(Route::NoListener(0x0106_0001))
        );
        // Answers need no listener: the REP to b's REQ, a DREQ of a's connection.
        let rep = answer_to(comm_id(b, 42));
        assert_eq!(l.route(ATTR_CM_REP, &rep), Ok(Route::Block(b)));
        assert_eq!(
            l.route(ATTR_CM_DREQ, &answer_to(comm_id(a, 9))),
            Ok(Route::Block(a))
        );
        assert_eq!(l.route(ATTR_CLASS_PORT_INFO, &[]), Ok(Route::Agent));
        assert!(l.route(ATTR_CM_REQ, &[0; 10]).is_err());
    }

    #[test]
    fn an_exited_process_takes_its_listeners_and_no_one_elses() {
        let mut l = Listeners::default();
        let (a, b) = (QpnBlock(1), QpnBlock(2));
        l.listen(10, a).unwrap();
        l.listen(11, a).unwrap();
        l.listen(12, b).unwrap();
        l.unlisten(12, a);
        assert_eq!(
            l.route(ATTR_CM_REQ, &req_for(12)),
            Ok(Route::Block(b)),
            "not a's"
        );
        l.forget(a);
        assert_eq!(
            l.route(ATTR_CM_REQ, &req_for(10)),
            Ok(Route::NoListener(10))
        );
        assert_eq!(l.route(ATTR_CM_REQ, &req_for(12)), Ok(Route::Block(b)));
        l.listen(10, b).unwrap();
        l.unlisten(10, b);
        assert_eq!(
            l.route(ATTR_CM_REQ, &req_for(10)),
            Ok(Route::NoListener(10))
        );
    }
}

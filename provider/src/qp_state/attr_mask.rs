//! `AttrMask`: the `ibv_modify_qp` attribute mask, with libibverbs' `IBV_QP_*` bit values.

use core::fmt;

macro_rules! attributes {
    ($($(#[$attr:ident $($args:tt)*])* $name:ident = $bit:literal, $cname:literal;)*) => {
        bitflags::bitflags! {
            /// An `ibv_modify_qp` attribute mask: a set of libibverbs `IBV_QP_*` bits.
            ///
            /// A mask from a C caller is taken with [`from_bits_retain`](Self::from_bits_retain):
            /// an unknown bit must reach [`check_transition`](super::check_transition), which
            /// refuses it with `EINVAL`.
            #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
            pub struct AttrMask: u32 {
                $($(#[$attr $($args)*])* const $name = 1 << $bit;)*
            }
        }

        /// Every named bit: (bit, libibverbs name, "missing" reason, "not allowed" reason).
        const NAMED: &[(AttrMask, &str, &str, &str)] = &[$((
            AttrMask::$name,
            $cname,
            concat!("modify QP: required attribute missing: ", $cname),
            concat!("modify QP: attribute not allowed in this transition: ", $cname),
        )),*];
    };
}

attributes! {
    /// `IBV_QP_STATE`: `qp_state` holds the next state.
    STATE = 0, "IBV_QP_STATE";
    /// `IBV_QP_CUR_STATE`: `cur_qp_state` holds the state the consumer believes the QP is in.
    CUR_STATE = 1, "IBV_QP_CUR_STATE";
    /// `IBV_QP_EN_SQD_ASYNC_NOTIFY`: raise an event when the SQ has drained.
    EN_SQD_ASYNC_NOTIFY = 2, "IBV_QP_EN_SQD_ASYNC_NOTIFY";
    /// `IBV_QP_ACCESS_FLAGS`: remote read/write/atomic enables.
    ACCESS_FLAGS = 3, "IBV_QP_ACCESS_FLAGS";
    /// `IBV_QP_PKEY_INDEX`: the P_Key table index.
    PKEY_INDEX = 4, "IBV_QP_PKEY_INDEX";
    /// `IBV_QP_PORT`: the physical port.
    PORT = 5, "IBV_QP_PORT";
    /// `IBV_QP_QKEY`: the Q_Key (UD).
    QKEY = 6, "IBV_QP_QKEY";
    /// `IBV_QP_AV`: the primary path's address vector.
    AV = 7, "IBV_QP_AV";
    /// `IBV_QP_PATH_MTU`: the path MTU ([`Mtu`](super::Mtu)).
    PATH_MTU = 8, "IBV_QP_PATH_MTU";
    /// `IBV_QP_TIMEOUT`: the local ACK timeout ([`local_ack_timeout`](super::local_ack_timeout)).
    TIMEOUT = 9, "IBV_QP_TIMEOUT";
    /// `IBV_QP_RETRY_CNT`: the transport retry count ([`transport_retries`](super::transport_retries)).
    RETRY_CNT = 10, "IBV_QP_RETRY_CNT";
    /// `IBV_QP_RNR_RETRY`: the RNR retry count ([`rnr_retries`](super::rnr_retries)).
    RNR_RETRY = 11, "IBV_QP_RNR_RETRY";
    /// `IBV_QP_RQ_PSN`: the expected PSN of the receive queue.
    RQ_PSN = 12, "IBV_QP_RQ_PSN";
    /// `IBV_QP_MAX_QP_RD_ATOMIC`: outstanding RDMA reads/atomics as initiator.
    MAX_QP_RD_ATOMIC = 13, "IBV_QP_MAX_QP_RD_ATOMIC";
    /// `IBV_QP_ALT_PATH`: the alternate path (automatic path migration).
    ALT_PATH = 14, "IBV_QP_ALT_PATH";
    /// `IBV_QP_MIN_RNR_TIMER`: the RNR NAK timer this QP advertises as responder.
    MIN_RNR_TIMER = 15, "IBV_QP_MIN_RNR_TIMER";
    /// `IBV_QP_SQ_PSN`: the first PSN of the send queue.
    SQ_PSN = 16, "IBV_QP_SQ_PSN";
    /// `IBV_QP_MAX_DEST_RD_ATOMIC`: outstanding RDMA reads/atomics as responder.
    MAX_DEST_RD_ATOMIC = 17, "IBV_QP_MAX_DEST_RD_ATOMIC";
    /// `IBV_QP_PATH_MIG_STATE`: the path migration state.
    PATH_MIG_STATE = 18, "IBV_QP_PATH_MIG_STATE";
    /// `IBV_QP_CAP`: queue capacities (not accepted by any RC/UC/UD transition).
    CAP = 19, "IBV_QP_CAP";
    /// `IBV_QP_DEST_QPN`: the remote QP number.
    DEST_QPN = 20, "IBV_QP_DEST_QPN";
    /// `IBV_QP_RATE_LIMIT`: packet pacing (RAW_PACKET only; refused for RC, UC, UD).
    RATE_LIMIT = 25, "IBV_QP_RATE_LIMIT";
}

impl AttrMask {
    /// No attribute.
    pub const EMPTY: AttrMask = AttrMask::empty();
    /// Every bit libibverbs names.
    pub const KNOWN: AttrMask = AttrMask::all();

    /// The libibverbs name of a single named bit (`"IBV_QP_AV"`), if it is one.
    pub fn name(self) -> Option<&'static str> {
        NAMED.iter().find(|n| n.0 == self).map(|n| n.1)
    }
}

impl fmt::Debug for AttrMask {
    /// `AttrMask(IBV_QP_STATE | IBV_QP_AV | 0x200000)`: libibverbs' names rather than the
    /// constants' (what a consumer searching `verbs.h` looks for); unknown bits in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AttrMask(")?;
        for (i, b) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            match b.name() {
                Some(n) => f.write_str(n)?,
                None => write!(f, "{:#x}", b.bits())?,
            }
        }
        f.write_str(")")
    }
}

/// "modify QP: required attribute missing: IBV_QP_AV" for a single bit.
pub(super) fn missing(bit: AttrMask) -> &'static str {
    NAMED.iter().find(|n| n.0 == bit).map_or(UNKNOWN, |n| n.2)
}

/// "modify QP: attribute not allowed in this transition: IBV_QP_AV" for a single bit.
pub(super) fn not_allowed(bit: AttrMask) -> &'static str {
    NAMED.iter().find(|n| n.0 == bit).map_or(UNKNOWN, |n| n.3)
}

/// The reason for a bit libibverbs does not name.
pub(super) const UNKNOWN: &str = "modify QP: unknown bit in attr_mask";

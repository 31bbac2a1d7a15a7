//! The BTH opcode table (IBTA 9.2.1, table 38 "OpCode field"; IBTA 1.5 adds FLUSH and ATOMIC
//! WRITE; annex A17.9.3 adds the RoCEv2 CNP).
//!
//! The opcode's top three bits select the transport (000 RC, 001 UC, 011 UD, 100 CNP, 101 XRC
//! (annex A14.6: the RC operations, requests carrying an XRCETH first)), the low
//! five the operation. For every opcode softrnic speaks, [`OpcodeInfo`] says its name, which
//! extension headers follow the BTH and in which order, whether a payload follows, and where the
//! packet stands in its message. All header parsing goes through this one table; RD opcodes,
//! and reserved codes, are not in it and parse as [`Error::UnknownOpcode`].
//!
//! [`Error::UnknownOpcode`]: crate::Error::UnknownOpcode

use core::fmt;

use ExtHeader::*;

/// An extension header that may follow the BTH (IBTA 9.3), in on-the-wire order when listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtHeader {
    /// XRC ETH: the XRC SRQ number at the target (XRC requests, annex A14.6.1).
    Xrceth,
    /// Datagram ETH: Q_Key and source QP (UD).
    Deth,
    /// FLUSH ETH: selectivity level and placement type (IBTA 1.5).
    Feth,
    /// RDMA ETH: virtual address, R_Key, DMA length.
    Reth,
    /// Atomic ETH: virtual address, R_Key, swap/add and compare data.
    AtomicEth,
    /// ACK ETH: syndrome and MSN.
    Aeth,
    /// Atomic ACK ETH: the original remote data.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate ETH: the R_Key to invalidate.
    Ieth,
    /// The 16 reserved bytes that follow the BTH of a RoCEv2 CNP.
    CnpPad,
}

impl ExtHeader {
    /// The header's bit in [`OpcodeInfo::header_set`].
    pub const fn bit(self) -> u16 {
        1 << self as u16
    }

    /// The set of `headers` and their total length.
    const fn set_and_len(headers: &[ExtHeader]) -> (u16, usize) {
        let (mut set, mut len, mut i) = (0, 0, 0);
        while i < headers.len() {
            set |= headers[i].bit();
            len += headers[i].size();
            i += 1;
        }
        (set, len)
    }

    /// The header's length in bytes.
    pub const fn size(self) -> usize {
        match self {
            Xrceth => crate::xrceth::HEADER_LEN,
            Deth => crate::deth::HEADER_LEN,
            Feth => crate::feth::HEADER_LEN,
            Reth => crate::reth::HEADER_LEN,
            AtomicEth => crate::atomic_eth::HEADER_LEN,
            Aeth => crate::aeth::HEADER_LEN,
            AtomicAckEth => crate::atomic_ack_eth::HEADER_LEN,
            ImmDt => crate::immdt::HEADER_LEN,
            Ieth => crate::ieth::HEADER_LEN,
            CnpPad => crate::cnp::HEADER_LEN,
        }
    }
}

/// The transport service an opcode belongs to (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Reliable Connected, `000xxxxx`.
    Rc,
    /// Unreliable Connected, `001xxxxx`.
    Uc,
    /// Unreliable Datagram, `011xxxxx`.
    Ud,
    /// Extended Reliable Connected, `101xxxxx` (annex A14).
    Xrc,
    /// RoCEv2 Congestion Notification Packet, `0x81`.
    Cnp,
}

/// What the packet does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// SEND (with or without immediate data or invalidate).
    Send,
    /// RDMA WRITE (with or without immediate data).
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// ACKnowledge (ACK, RNR NAK or NAK).
    Acknowledge,
    /// ATOMIC ACKnowledge.
    AtomicAcknowledge,
    /// CmpSwap atomic request.
    CompareSwap,
    /// FetchAdd atomic request.
    FetchAdd,
    /// FLUSH request (IBTA 1.5).
    Flush,
    /// ATOMIC WRITE request (IBTA 1.5).
    AtomicWrite,
    /// Congestion notification.
    Cnp,
}

/// Where a packet stands in its message (IBTA 9.2.1: "First", "Middle", "Last", "Only").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// The first packet of a multi-packet message.
    First,
    /// A middle packet.
    Middle,
    /// The last packet of a multi-packet message.
    Last,
    /// A single-packet message (also: ACKs, READ requests, atomics, CNPs).
    Only,
}

/// The payload an opcode carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadRule {
    /// No payload: the packet ends after its headers (pad count must be 0).
    None,
    /// Any length, 0 included.
    Any,
    /// Exactly one path MTU (256, 512, 1024, 2048 or 4096 bytes): first and middle packets
    /// (IBTA C9-?? "the payload of First and Middle packets shall be exactly PMTU bytes").
    FullMtu,
    /// Exactly this many bytes (the 8 bytes of an ATOMIC WRITE).
    Exact(usize),
}

/// Everything the table knows about one opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The opcode byte.
    pub code: u8,
    /// Its name, as `softrnic decode` prints it (e.g. `RC_SEND_FIRST`).
    pub name: &'static str,
    /// The transport service.
    pub transport: Transport,
    /// The operation.
    pub operation: Operation,
    /// Where the packet stands in its message.
    pub position: Position,
    /// The extension headers that follow the BTH, in order.
    pub headers: &'static [ExtHeader],
    /// The payload rule.
    pub payload: PayloadRule,
    /// `headers` as a set (bit [`ExtHeader::bit`] of each) and their total length, worked out
    /// when the table is built: every packet sent or received asks for them, some several
    /// times.
    header_set: u16,
    header_len: usize,
}

impl OpcodeInfo {
    /// Total length of the extension headers.
    pub const fn ext_len(&self) -> usize {
        self.header_len
    }

    /// Whether the extension header `h` is present.
    pub const fn has(&self, h: ExtHeader) -> bool {
        self.header_set & h.bit() != 0
    }

    /// The extension headers as a set: bit [`ExtHeader::bit`] of each.
    pub const fn header_set(&self) -> u16 {
        self.header_set
    }

    /// Whether this packet is sent by a requester (as opposed to a responder's ACK/READ
    /// response, or a CNP).
    pub const fn is_request(&self) -> bool {
        !matches!(
            self.operation,
            Operation::RdmaReadResponse
                | Operation::Acknowledge
                | Operation::AtomicAcknowledge
                | Operation::Cnp
        )
    }

    /// Whether a payload may follow the headers.
    pub const fn has_payload(&self) -> bool {
        !matches!(self.payload, PayloadRule::None)
    }
}

/// A BTH opcode byte. Any value can be held; [`Opcode::info`] says whether it is one softrnic
/// speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode(pub u8);

macro_rules! table {
    ($( $code:literal $name:ident $tr:ident $op:ident $pos:ident [$($h:ident),*] $pl:expr; )*) => {
        impl Opcode {
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub const $name: Opcode = Opcode($code);
            )*
        }

        /// Every opcode softrnic speaks, in numeric order.
        pub const TABLE: &[OpcodeInfo] = &[
            $(OpcodeInfo {
                code: $code,
                name: stringify!($name),
                transport: Transport::$tr,
                operation: Operation::$op,
                position: Position::$pos,
                headers: &[$($h),*],
                payload: $pl,
                header_set: ExtHeader::set_and_len(&[$($h),*]).0,
                header_len: ExtHeader::set_and_len(&[$($h),*]).1,
            },)*
        ];
    };
}

use PayloadRule::{Any, Exact, FullMtu, None as NoPayload};

table! {
    0x00 RC_SEND_FIRST                     Rc Send First  []                 FullMtu;
    0x01 RC_SEND_MIDDLE                    Rc Send Middle []                 FullMtu;
    0x02 RC_SEND_LAST                      Rc Send Last   []                 Any;
    0x03 RC_SEND_LAST_WITH_IMMEDIATE       Rc Send Last   [ImmDt]            Any;
    0x04 RC_SEND_ONLY                      Rc Send Only   []                 Any;
    0x05 RC_SEND_ONLY_WITH_IMMEDIATE       Rc Send Only   [ImmDt]            Any;
    0x06 RC_RDMA_WRITE_FIRST               Rc RdmaWrite First  [Reth]        FullMtu;
    0x07 RC_RDMA_WRITE_MIDDLE              Rc RdmaWrite Middle []            FullMtu;
    0x08 RC_RDMA_WRITE_LAST                Rc RdmaWrite Last   []            Any;
    0x09 RC_RDMA_WRITE_LAST_WITH_IMMEDIATE Rc RdmaWrite Last   [ImmDt]       Any;
    0x0a RC_RDMA_WRITE_ONLY                Rc RdmaWrite Only   [Reth]        Any;
    0x0b RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE Rc RdmaWrite Only   [Reth, ImmDt] Any;
    0x0c RC_RDMA_READ_REQUEST              Rc RdmaReadRequest Only [Reth]    NoPayload;
    0x0d RC_RDMA_READ_RESPONSE_FIRST       Rc RdmaReadResponse First  [Aeth] FullMtu;
    0x0e RC_RDMA_READ_RESPONSE_MIDDLE      Rc RdmaReadResponse Middle []     FullMtu;
    0x0f RC_RDMA_READ_RESPONSE_LAST        Rc RdmaReadResponse Last   [Aeth] Any;
    0x10 RC_RDMA_READ_RESPONSE_ONLY        Rc RdmaReadResponse Only   [Aeth] Any;
    0x11 RC_ACKNOWLEDGE                    Rc Acknowledge Only [Aeth]        NoPayload;
    0x12 RC_ATOMIC_ACKNOWLEDGE             Rc AtomicAcknowledge Only [Aeth, AtomicAckEth] NoPayload;
    0x13 RC_COMPARE_SWAP                   Rc CompareSwap Only [AtomicEth]   NoPayload;
    0x14 RC_FETCH_ADD                      Rc FetchAdd Only [AtomicEth]      NoPayload;
    0x16 RC_SEND_LAST_WITH_INVALIDATE      Rc Send Last [Ieth]               Any;
    0x17 RC_SEND_ONLY_WITH_INVALIDATE      Rc Send Only [Ieth]               Any;
    0x1c RC_FLUSH                          Rc Flush Only [Feth, Reth]        NoPayload;
    0x1d RC_ATOMIC_WRITE                   Rc AtomicWrite Only [Reth]        Exact(8);
    0x20 UC_SEND_FIRST                     Uc Send First  []                 FullMtu;
    0x21 UC_SEND_MIDDLE                    Uc Send Middle []                 FullMtu;
    0x22 UC_SEND_LAST                      Uc Send Last   []                 Any;
    0x23 UC_SEND_LAST_WITH_IMMEDIATE       Uc Send Last   [ImmDt]            Any;
    0x24 UC_SEND_ONLY                      Uc Send Only   []                 Any;
    0x25 UC_SEND_ONLY_WITH_IMMEDIATE       Uc Send Only   [ImmDt]            Any;
    0x26 UC_RDMA_WRITE_FIRST               Uc RdmaWrite First  [Reth]        FullMtu;
    0x27 UC_RDMA_WRITE_MIDDLE              Uc RdmaWrite Middle []            FullMtu;
    0x28 UC_RDMA_WRITE_LAST                Uc RdmaWrite Last   []            Any;
    0x29 UC_RDMA_WRITE_LAST_WITH_IMMEDIATE Uc RdmaWrite Last   [ImmDt]       Any;
    0x2a UC_RDMA_WRITE_ONLY                Uc RdmaWrite Only   [Reth]        Any;
    0x2b UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE Uc RdmaWrite Only   [Reth, ImmDt] Any;
    0x64 UD_SEND_ONLY                      Ud Send Only [Deth]               Any;
    0x65 UD_SEND_ONLY_WITH_IMMEDIATE       Ud Send Only [Deth, ImmDt]        Any;
    0x81 CNP                               Cnp Cnp Only [CnpPad]             NoPayload;
    0xa0 XRC_SEND_FIRST                     Xrc Send First  [Xrceth]           FullMtu;
    0xa1 XRC_SEND_MIDDLE                    Xrc Send Middle [Xrceth]           FullMtu;
    0xa2 XRC_SEND_LAST                      Xrc Send Last   [Xrceth]           Any;
    0xa3 XRC_SEND_LAST_WITH_IMMEDIATE       Xrc Send Last   [Xrceth, ImmDt]    Any;
    0xa4 XRC_SEND_ONLY                      Xrc Send Only   [Xrceth]           Any;
    0xa5 XRC_SEND_ONLY_WITH_IMMEDIATE       Xrc Send Only   [Xrceth, ImmDt]    Any;
    0xa6 XRC_RDMA_WRITE_FIRST               Xrc RdmaWrite First  [Xrceth, Reth] FullMtu;
    0xa7 XRC_RDMA_WRITE_MIDDLE              Xrc RdmaWrite Middle [Xrceth]      FullMtu;
    0xa8 XRC_RDMA_WRITE_LAST                Xrc RdmaWrite Last   [Xrceth]      Any;
    0xa9 XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE Xrc RdmaWrite Last   [Xrceth, ImmDt] Any;
    0xaa XRC_RDMA_WRITE_ONLY                Xrc RdmaWrite Only   [Xrceth, Reth] Any;
    0xab XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE Xrc RdmaWrite Only   [Xrceth, Reth, ImmDt] Any;
    0xac XRC_RDMA_READ_REQUEST              Xrc RdmaReadRequest Only [Xrceth, Reth] NoPayload;
    0xad XRC_RDMA_READ_RESPONSE_FIRST       Xrc RdmaReadResponse First  [Aeth] FullMtu;
    0xae XRC_RDMA_READ_RESPONSE_MIDDLE      Xrc RdmaReadResponse Middle []     FullMtu;
    0xaf XRC_RDMA_READ_RESPONSE_LAST        Xrc RdmaReadResponse Last   [Aeth] Any;
    0xb0 XRC_RDMA_READ_RESPONSE_ONLY        Xrc RdmaReadResponse Only   [Aeth] Any;
    0xb1 XRC_ACKNOWLEDGE                    Xrc Acknowledge Only [Aeth]        NoPayload;
    0xb2 XRC_ATOMIC_ACKNOWLEDGE             Xrc AtomicAcknowledge Only [Aeth, AtomicAckEth] NoPayload;
    0xb3 XRC_COMPARE_SWAP                   Xrc CompareSwap Only [Xrceth, AtomicEth] NoPayload;
    0xb4 XRC_FETCH_ADD                      Xrc FetchAdd Only [Xrceth, AtomicEth] NoPayload;
    0xb6 XRC_SEND_LAST_WITH_INVALIDATE      Xrc Send Last [Xrceth, Ieth]       Any;
    0xb7 XRC_SEND_ONLY_WITH_INVALIDATE      Xrc Send Only [Xrceth, Ieth]       Any;
}

/// Table index by opcode byte; `NONE` where the opcode is not in [`TABLE`].
static INDEX: [u8; 256] = {
    let mut idx = [NONE; 256];
    let mut i = 0;
    while i < TABLE.len() {
        idx[TABLE[i].code as usize] = i as u8;
        i += 1;
    }
    idx
};
const NONE: u8 = u8::MAX;

/// The valid path MTUs (IBTA 9.7.1 / ibv_mtu): what a First or Middle packet carries.
pub const PATH_MTUS: [usize; 5] = [256, 512, 1024, 2048, 4096];

impl Opcode {
    /// The table entry, or `None` for a reserved or unsupported opcode.
    pub fn info(self) -> Option<&'static OpcodeInfo> {
        match INDEX[self.0 as usize] {
            NONE => None,
            i => Some(&TABLE[i as usize]),
        }
    }

    /// The opcode's name, or `"UNKNOWN"`.
    pub fn name(self) -> &'static str {
        self.info().map_or("UNKNOWN", |i| i.name)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Some(i) => f.write_str(i.name),
            None => write!(f, "UNKNOWN({:#04x})", self.0),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn table_is_sorted_and_indexed() {
        for w in TABLE.windows(2) {
            assert!(w[0].code < w[1].code, "{} before {}", w[0].name, w[1].name);
        }
        for code in 0..=255u8 {
            match Opcode(code).info() {
                Some(i) => assert_eq!(i.code, code),
                None => assert!(TABLE.iter().all(|e| e.code != code)),
            }
        }
    }

    #[test]
    fn transport_matches_top_bits() {
        for e in TABLE {
            let expect = match e.code >> 5 {
                0 => Transport::Rc,
                1 => Transport::Uc,
                3 => Transport::Ud,
                4 => Transport::Cnp,
                5 => Transport::Xrc,
                _ => unreachable!("{} has an unexpected prefix", e.name),
            };
            assert_eq!(e.transport, expect, "{}", e.name);
            assert!(e.name.starts_with(match expect {
                Transport::Rc => "RC_",
                Transport::Uc => "UC_",
                Transport::Ud => "UD_",
                Transport::Cnp => "CNP",
                Transport::Xrc => "XRC_",
            }));
        }
    }

    #[test]
    fn header_lengths_follow_ibta() {
        // IBTA table 38 packet layouts: RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8, ImmDt 4,
        // IETH 4, DETH 8; FETH 4 (IBTA 1.5); CNP 16 reserved bytes (A17.9.3).
        let len = |c: Opcode| c.info().unwrap().ext_len();
        assert_eq!(len(Opcode::RC_SEND_FIRST), 0);
        assert_eq!(len(Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE), 20);
        assert_eq!(len(Opcode::RC_ATOMIC_ACKNOWLEDGE), 12);
        assert_eq!(len(Opcode::RC_COMPARE_SWAP), 28);
        assert_eq!(len(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE), 12);
        assert_eq!(len(Opcode::RC_FLUSH), 20);
        assert_eq!(len(Opcode::CNP), 16);
        assert!(Opcode(0x15).info().is_none(), "0x15 is reserved");
        assert!(Opcode(0x40).info().is_none(), "RD is not supported");
        // XRC requests carry the 4-byte XRCETH first; responses do not (annex A14.6).
        assert_eq!(len(Opcode::XRC_SEND_ONLY), 4);
        assert_eq!(len(Opcode::XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE), 24);
        assert_eq!(len(Opcode::XRC_COMPARE_SWAP), 32);
        assert_eq!(len(Opcode::XRC_ACKNOWLEDGE), 4);
        for e in TABLE.iter().filter(|e| e.transport == Transport::Xrc) {
            let rc = Opcode(e.code & 0x1f).info().unwrap();
            assert_eq!((e.operation, e.position), (rc.operation, rc.position));
            assert_eq!(e.has(Xrceth), e.is_request(), "{}", e.name);
            assert_eq!(e.headers.first() == Some(&Xrceth), e.is_request());
        }
    }
}

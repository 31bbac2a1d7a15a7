//! Property tests of the wire layer:
//! * for every opcode and random field values, parse(emit(frame)) gives back the same `Repr`
//!   and payload, and the ICRC verifies;
//! * flipping any single bit that the ICRC covers makes the frame fail (the ICRC check, or a
//!   parse error when the bit broke a header).

use proptest::prelude::*;
use smoltcp::wire::{
    EthernetAddress, EthernetProtocol, EthernetRepr, IpProtocol, Ipv4Repr, Ipv6Repr,
};
use softrnic_wire::aeth::{AethRepr, CreditCode, NakCode, RnrTimer, Syndrome};
use softrnic_wire::atomic_ack_eth::AtomicAckEthRepr;
use softrnic_wire::atomic_eth::AtomicEthRepr;
use softrnic_wire::bth::BthRepr;
use softrnic_wire::deth::DethRepr;
use softrnic_wire::feth::{FethRepr, Selectivity};
use softrnic_wire::frame::{
    DatagramRepr, Frame, FrameRepr, IpHeader, Ipv4Header, Ipv6Header, UdpHeader,
};
use softrnic_wire::icrc::Icrc;
use softrnic_wire::ieth::IethRepr;
use softrnic_wire::immdt::ImmDtRepr;
use softrnic_wire::opcode::{ExtHeader, PayloadRule, PATH_MTUS, TABLE};
use softrnic_wire::reth::RethRepr;
use softrnic_wire::roce::{pad_len, RoceRepr};
use softrnic_wire::xrceth::XrcethRepr;
use softrnic_wire::{Opcode, Psn};

fn syndrome() -> impl Strategy<Value = Syndrome> {
    prop_oneof![
        (0u8..32).prop_map(|c| Syndrome::Ack(CreditCode(c))),
        (0u8..32).prop_map(|t| Syndrome::RnrNak(RnrTimer(t))),
        prop::sample::select(vec![
            NakCode::PsnSequenceError,
            NakCode::InvalidRequest,
            NakCode::RemoteAccessError,
            NakCode::RemoteOperationalError,
            NakCode::InvalidRdRequest,
        ])
        .prop_map(Syndrome::Nak),
    ]
}

fn bth(opcode: Opcode) -> impl Strategy<Value = BthRepr> {
    (
        any::<[bool; 6]>(),
        any::<u16>(),
        0u32..1 << 24,
        0u32..1 << 24,
    )
        .prop_map(move |(b, pkey, dest_qp, psn)| BthRepr {
            opcode,
            solicited: b[0],
            mig_req: b[1],
            pkey,
            fecn: b[2],
            becn: b[3],
            dest_qp,
            ack_req: b[4],
            psn: Psn::new(psn),
        })
}

/// A transport packet of a random opcode, with random values in every header it carries, and
/// a payload that obeys the opcode's rule.
fn roce() -> impl Strategy<Value = (RoceRepr, Vec<u8>)> {
    prop::sample::select(TABLE.to_vec()).prop_flat_map(|info| {
        let payload = match info.payload {
            PayloadRule::None => Just(0usize).boxed(),
            PayloadRule::Any => (0usize..600).boxed(),
            PayloadRule::FullMtu => prop::sample::select(PATH_MTUS.to_vec()).boxed(),
            PayloadRule::Exact(n) => Just(n).boxed(),
        }
        .prop_flat_map(|n| prop::collection::vec(any::<u8>(), n));
        let ext = (
            (any::<u64>(), any::<u32>(), any::<u32>()),
            syndrome(),
            0u32..1 << 24,
            (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()),
            (any::<u64>(), any::<u32>(), any::<u32>(), 0u32..1 << 24),
            (any::<bool>(), 0u8..16),
        );
        (bth(Opcode(info.code)), ext, payload).prop_map(move |(bth, ext, payload)| {
            let (
                (va, rkey, len),
                syn,
                msn,
                (ava, arkey, swap, cmp),
                (orig, imm, qkey, src_qp),
                (sel, plt),
            ) = ext;
            let mut r = RoceRepr::new(bth);
            for h in info.headers {
                match h {
                    ExtHeader::Deth => r.deth = Some(DethRepr { qkey, src_qp }),
                    ExtHeader::Feth => {
                        r.feth = Some(FethRepr {
                            selectivity: if sel {
                                Selectivity::MemoryRegion
                            } else {
                                Selectivity::MemoryRange
                            },
                            placement: plt,
                        })
                    }
                    ExtHeader::Reth => {
                        r.reth = Some(RethRepr {
                            va,
                            rkey,
                            dma_len: len,
                        })
                    }
                    ExtHeader::AtomicEth => {
                        r.atomic_eth = Some(AtomicEthRepr {
                            va: ava,
                            rkey: arkey,
                            swap_add: swap,
                            compare: cmp,
                        })
                    }
                    ExtHeader::Aeth => r.aeth = Some(AethRepr { syndrome: syn, msn }),
                    ExtHeader::AtomicAckEth => {
                        r.atomic_ack_eth = Some(AtomicAckEthRepr { orig_rem_dt: orig })
                    }
                    ExtHeader::ImmDt => r.immdt = Some(ImmDtRepr(imm)),
                    ExtHeader::Ieth => r.ieth = Some(IethRepr(rkey)),
                    ExtHeader::Xrceth => {
                        r.xrceth = Some(XrcethRepr {
                            srqn: rkey & 0xff_ffff,
                        })
                    }
                    ExtHeader::CnpPad => {}
                }
            }
            r.payload_len = payload.len();
            (r, payload)
        })
    })
}

fn ip() -> impl Strategy<Value = IpHeader> {
    prop_oneof![
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            any::<u16>(),
            0u8..64,
            0u8..4,
            any::<bool>()
        )
            .prop_map(
                |(s, d, ttl, ident, dscp, ecn, df)| IpHeader::V4(Ipv4Header {
                    repr: Ipv4Repr {
                        src_addr: s.into(),
                        dst_addr: d.into(),
                        next_header: IpProtocol::Udp,
                        payload_len: 0,
                        hop_limit: ttl,
                    },
                    ident,
                    dscp,
                    ecn,
                    dont_frag: df,
                })
            ),
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            any::<u8>(),
            0u32..1 << 20
        )
            .prop_map(|(s, d, hop, tc, fl)| IpHeader::V6(Ipv6Header {
                repr: Ipv6Repr {
                    src_addr: s.into(),
                    dst_addr: d.into(),
                    next_header: IpProtocol::Udp,
                    payload_len: 0,
                    hop_limit: hop,
                },
                traffic_class: tc,
                flow_label: fl,
            })),
    ]
}

/// A whole frame, with the IP payload length set to what emit will write (so that parse gives
/// back an equal `Repr`).
fn frame() -> impl Strategy<Value = (FrameRepr, Vec<u8>)> {
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        ip(),
        any::<u16>(),
        roce(),
    )
        .prop_map(|(src, dst, ip, sport, (roce, payload))| {
            let mut datagram = DatagramRepr {
                ip,
                udp: UdpHeader {
                    src_port: sport,
                    dst_port: 4791,
                    checksum: 0,
                },
                roce,
            };
            let udp_len = datagram.udp_len();
            match &mut datagram.ip {
                IpHeader::V4(h) => h.repr.payload_len = udp_len,
                IpHeader::V6(h) => h.repr.payload_len = udp_len,
            }
            let ethertype = match ip {
                IpHeader::V4(_) => EthernetProtocol::Ipv4,
                IpHeader::V6(_) => EthernetProtocol::Ipv6,
            };
            let ethernet = EthernetRepr {
                src_addr: EthernetAddress(src),
                dst_addr: EthernetAddress(dst),
                ethertype,
            };
            (FrameRepr { ethernet, datagram }, payload)
        })
}

fn emit(repr: &FrameRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0xa5; repr.buffer_len()];
    // Emit the payload in two pieces, as a data path gathering from two SGEs would.
    let (a, b) = payload.split_at(payload.len() / 3);
    let n = repr.emit(&mut buf, &[a, b]).unwrap();
    assert_eq!(n, buf.len());
    buf
}

/// Whether bit `bit` of byte `i` of an emitted frame is masked out of the ICRC (A17.4.2) or
/// lies outside it (the Ethernet header).
fn is_masked(frame: &FrameRepr, i: usize, bit: u8) -> bool {
    let ip = 14;
    let (udp, masked_ip): (usize, &[usize]) = match frame.datagram.ip {
        IpHeader::V4(_) => (ip + 20, &[1, 8, 10, 11]),
        IpHeader::V6(_) => (ip + 40, &[1, 2, 3, 7]),
    };
    let bth = udp + 8;
    i < ip
        || masked_ip.contains(&(i - ip))
        || (matches!(frame.datagram.ip, IpHeader::V6(_)) && i == ip && bit < 4)
        || i == udp + 6
        || i == udp + 7
        || i == bth + 4
}

/// The IPv4 header as smoltcp writes it, with the fields its `Repr` leaves out set after: the
/// reference for the wire crate's own writing of it.
fn smoltcp_ipv4(h: &Ipv4Header, udp_len: usize) -> [u8; 20] {
    let mut buf = [0u8; 20];
    let mut p = smoltcp::wire::Ipv4Packet::new_unchecked(&mut buf[..]);
    let repr = Ipv4Repr {
        payload_len: udp_len,
        next_header: IpProtocol::Udp,
        ..h.repr
    };
    repr.emit(&mut p, &smoltcp::phy::ChecksumCapabilities::ignored());
    p.set_ident(h.ident);
    p.set_dscp(h.dscp);
    p.set_ecn(h.ecn);
    p.set_dont_frag(h.dont_frag);
    p.fill_checksum();
    buf
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn an_ipv4_header_is_written_as_smoltcp_writes_it(
        ip in ip(),
        udp_len in prop_oneof![8usize..64, 8usize..65_495],
    ) {
        if let IpHeader::V4(h) = ip {
            let mut buf = [0u8; 40];
            prop_assert_eq!(ip.emit(udp_len, &mut buf).unwrap(), 20);
            prop_assert_eq!(&buf[..20], &smoltcp_ipv4(&h, udp_len)[..]);
        }
    }

    #[test]
    fn emit_then_parse_is_identity((repr, payload) in frame()) {
        let bytes = emit(&repr, &payload);
        let f = Frame::parse(&bytes).unwrap();
        prop_assert!(f.datagram.icrc_ok);
        prop_assert_eq!(f.repr(), repr);
        prop_assert_eq!(f.datagram.payload, &payload[..]);
    }

    #[test]
    fn any_single_covered_bit_flip_is_caught((repr, payload) in frame(), pick in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = emit(&repr, &payload);
        let i = pick.index(bytes.len());
        prop_assume!(!is_masked(&repr, i, bit));
        bytes[i] ^= 1 << bit;
        // A parse error is fine too: the flip broke a header and the parser said so.
        if let Ok(f) = Frame::parse(&bytes) {
            prop_assert!(!f.datagram.icrc_ok, "flip of bit {} of byte {} not caught", bit, i);
        }
    }

    #[test]
    fn the_masked_view_gives_the_icrc_of_the_headers_as_sent((repr, payload) in frame()) {
        let d = &repr.datagram;
        let mut sent = vec![0u8; d.header_len()];
        let n = d.emit_headers(&mut sent).unwrap();
        let sent_roce = &sent[n - d.roce.header_len()..n];
        let bth_at = d.masked_prefix_len();
        let mut view = vec![0u8; bth_at + d.roce.header_len()];
        let m = d.emit_masked(&mut view).unwrap();
        prop_assert_eq!(m, view.len());
        prop_assert_eq!(&view[bth_at..], sent_roce);
        let mut icrc = Icrc::start_masked(&mut view, bth_at).unwrap();
        // The BTH's masked byte is back as sent: the view's tail can go on the wire.
        prop_assert_eq!(&view[bth_at..], sent_roce);
        icrc.update(&payload);
        icrc.update(&[0u8; 3][..pad_len(payload.len())]);
        prop_assert_eq!(icrc.finish(), d.icrc(&sent[..n], &[&payload[..]]).unwrap());
    }

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = Frame::parse(&bytes);
        let _ = DatagramRepr::parse(&bytes);
        let _ = RoceRepr::parse(&bytes);
    }
}

#[test]
fn masked_fields_really_are_masked() {
    // The complement of the property above: flipping a masked bit keeps the ICRC valid.
    let ip = IpHeader::V4(Ipv4Header {
        repr: Ipv4Repr {
            src_addr: [10, 0, 0, 1].into(),
            dst_addr: [10, 0, 0, 2].into(),
            next_header: IpProtocol::Udp,
            payload_len: 0,
            hop_limit: 64,
        },
        ident: 7,
        dscp: 0,
        ecn: 0,
        dont_frag: true,
    });
    let bth = BthRepr {
        opcode: Opcode::RC_SEND_ONLY,
        solicited: false,
        mig_req: false,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: 0x11,
        ack_req: true,
        psn: Psn::new(5),
    };
    let mut roce = RoceRepr::new(bth);
    roce.payload_len = 5;
    let repr = FrameRepr {
        ethernet: EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EthernetProtocol::Ipv4,
        },
        datagram: DatagramRepr {
            ip,
            udp: UdpHeader {
                src_port: 0xc000,
                dst_port: 4791,
                checksum: 0,
            },
            roce,
        },
    };
    let bytes = emit(&repr, b"hello");
    let mut masked = 0;
    for i in 0..bytes.len() {
        for bit in 0..8 {
            if is_masked(&repr, i, bit) && i >= 14 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let f = Frame::parse(&b).unwrap();
                assert!(f.datagram.icrc_ok, "bit {bit} of byte {i}");
                masked += 1;
            }
        }
    }
    assert_eq!(masked, 7 * 8);
}

//! Robustness of UC and UD QPs against forged packets: seeded requests of every UC, UD and RC
//! opcode, at PSNs around the expected one, their extension headers made of plausible values
//! (the window's address, its real R_Key, the right Q_Key) and random bytes, with payloads of
//! random length, fed through `accept` to a QP with receive WQEs posted. Then: nothing
//! panicked, the QP is still in RTS (UC and UD errors are not fatal) and has nothing to send,
//! and no byte outside the remote-writable window and the receive buffers changed.

mod common;

use std::net::SocketAddr;

use common::wrs::{recv_wr, sge_of};
use common::*;
use softrnic_provider::driver::accept;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::{QpState, QpType};
use softrnic_provider::transport::{
    seal_as_socket_sent, FabricConfig, RecvMeta, RecvPacket, SplitMix64,
};
use softrnic_wire::opcode::ExtHeader;
use softrnic_wire::Opcode;

const GUARD: u8 = 0x5a;

fn run(qp_type: QpType, seed: u64) {
    let c = Connect::default();
    let mut p = Pair::new_of(qp_type, FabricConfig::default(), seed, c);
    let guard_before = p.b.region(8192, Access::LOCAL_WRITE);
    let win =
        p.b.region(8192, Access::LOCAL_WRITE.union(Access::REMOTE_WRITE));
    let recv = p.b.region(8192, Access::LOCAL_WRITE);
    let guard_after = p.b.region(8192, Access::LOCAL_WRITE);
    for g in [&guard_before, &guard_after] {
        p.b.fill(g, 0, &[GUARD; 8192]);
    }
    for i in 0..64u64 {
        p.b.qp
            .post_recv(&recv_wr(i, vec![sge_of(&recv, (i % 4) * 2048, 2048)]))
            .unwrap();
    }
    let opcodes: Vec<u8> = (0u8..=0xff)
        .filter(|&op| Opcode(op).info().is_some())
        .collect();
    let mut rng = SplitMix64(seed);
    let from = SocketAddr::new(A_ADDR, 0xc011);
    let now = p.now();
    for _ in 0..10_000 {
        let op = opcodes[rng.below(opcodes.len() as u64) as usize];
        let info = Opcode(op).info().unwrap();
        let psn = c.a_psn.wrapping_add(rng.below(8) as u32).wrapping_sub(2) & 0x00ff_ffff;
        let mut b = vec![op, rng.below(4) as u8 * 0x10, 0xff, 0xff, 0];
        b.extend_from_slice(&0x22u32.to_be_bytes()[1..]);
        b.push(0);
        b.extend_from_slice(&psn.to_be_bytes()[1..]);
        let mut ext = vec![0u8; info.ext_len()];
        for x in &mut ext {
            *x = rng.next_u64() as u8;
        }
        if rng.below(4) != 0 {
            if info.has(ExtHeader::Reth) && ext.len() >= 16 {
                let va = win.addr() + rng.below(8192);
                ext[0..8].copy_from_slice(&va.to_be_bytes());
                ext[8..12].copy_from_slice(&win.keys.rkey.to_be_bytes());
                ext[12..16].copy_from_slice(&(rng.below(5000) as u32).to_be_bytes());
            }
            if info.has(ExtHeader::Deth) && ext.len() >= 8 {
                ext[0..4].copy_from_slice(&0x1111_1111u32.to_be_bytes());
            }
        }
        b.extend_from_slice(&ext);
        let len = [0, 1, 1024, 1023, 4096, 5000][rng.below(6) as usize];
        b.extend((0..len).map(|_| rng.next_u64() as u8));
        let pad = (4 - len % 4) % 4;
        b[1] |= (pad as u8) << 4;
        b.extend(std::iter::repeat_n(0, pad + 4));
        seal_as_socket_sent(from, B_ADDR, &mut b);
        let meta = RecvMeta::from_socket(from, B_ADDR, b.len());
        let pkt = RecvPacket {
            meta: &meta,
            payload: &b,
        };
        if let Ok((pkt, _)) = accept(&pkt) {
            p.b.qp
                .handle_packet_from(now, &pkt, A_ADDR, B_ADDR, &p.b.mrs, &mut p.b.srqs);
        }
    }
    assert_eq!(p.b.qp.state(), QpState::Rts, "{qp_type:?} seed {seed}");
    for g in [&guard_before, &guard_after] {
        assert!(
            p.b.read(g, 0, 8192).iter().all(|&x| x == GUARD),
            "{qp_type:?} seed {seed}"
        );
    }
    assert!(
        !p.b.qp.wants_transmit(),
        "UC and UD responders never answer"
    );
    let delivered = std::iter::from_fn(|| p.b.qp.poll_completion()).count();
    assert!(
        delivered > 0,
        "{qp_type:?}: some forged requests are executed"
    );
}

#[test]
fn forged_packets_never_panic_nor_touch_memory_outside_the_windows() {
    for seed in 1..=4 {
        run(QpType::Uc, seed);
        run(QpType::Ud, seed);
    }
}

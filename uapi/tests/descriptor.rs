//! MR descriptors end to end: B describes a region, the 21 bytes travel to A, A turns them
//! into a `RemoteMr` and WRITEs and READs through it; what the descriptor does not allow
//! (a range past its end, a use the region was not registered for) is refused before any
//! packet leaves, and B's memory outside the written range stays as it was.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

mod common;

use common::{Node, Setup};
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{
    Access, DescriptorError, RemoteMr, SendFlags, SendOpcode, SendWr, Usage, WcStatus,
};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 2, 2));

const SETUP: Setup = Setup {
    seed: 3,
    ..Setup::DEFAULT
};

fn side(fabric: &Fabric, addr: IpAddr, access: Access) -> Node {
    Node::new(SETUP.on(fabric, addr), 8192, access)
}

fn run(
    a: &Node,
    opcode: SendOpcode,
    local_off: usize,
    len: u32,
    remote: softrnic_uapi::RemoteAddr,
) {
    let wr = SendWr {
        flags: SendFlags::SIGNALED,
        remote,
        ..SendWr::new(1, opcode, vec![a.mem.sge(local_off, len)])
    };
    a.qp.post_send(&[wr]).map_err(|(_, e)| e).unwrap();
    let wc = a.cq.wait(1, Duration::from_secs(10)).unwrap();
    assert_eq!(wc[0].status, WcStatus::Success);
}

#[test]
fn a_peer_writes_and_reads_through_a_descriptor() {
    let fabric = Fabric::new(FabricConfig::default(), 7);
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let (a, b) = common::pair_on(&fabric, (A, &SETUP), (B, &SETUP));
    let (a, b) = (
        Node::new(a, 8192, Access::LOCAL_WRITE),
        Node::new(b, 8192, rw),
    );
    b.mem.write(0, &[0xEE; 8192]).unwrap();

    // The 21 bytes are all A gets.
    let desc: Vec<u8> = b.mem.descriptor().to_vec();
    let remote = RemoteMr::from_descriptor(Some(&desc)).unwrap();
    assert_eq!(remote.len, 8192);
    assert!(remote.usage.contains(Usage::WRITE_DST | Usage::READ_SRC));

    a.mem.write(0, &[0x5A; 100]).unwrap();
    run(
        &a,
        SendOpcode::RdmaWrite,
        0,
        100,
        remote.at(1000, 100, Usage::WRITE_DST).unwrap(),
    );
    let mut got = vec![0u8; 8192];
    b.mem.read(0, &mut got).unwrap();
    assert!(got[1000..1100].iter().all(|&x| x == 0x5A));
    assert!(
        got[..1000].iter().chain(&got[1100..]).all(|&x| x == 0xEE),
        "only the range moved"
    );

    run(
        &a,
        SendOpcode::RdmaRead,
        4096,
        300,
        remote.at(900, 300, Usage::READ_SRC).unwrap(),
    );
    let mut back = vec![0u8; 300];
    a.mem.read(4096, &mut back).unwrap();
    assert_eq!(&back[..], &got[900..1200]);

    // What the descriptor does not cover is refused before anything is posted.
    assert!(matches!(
        remote.at(8100, 100, Usage::WRITE_DST),
        Err(DescriptorError::Inval(_))
    ));
}

#[test]
fn a_read_only_region_describes_itself_as_such() {
    let fabric = Fabric::new(FabricConfig::default(), 8);
    let b = side(&fabric, B, Access::REMOTE_READ);
    let remote = RemoteMr::from_descriptor(Some(&b.mem.descriptor())).unwrap();
    assert!(remote.usage.contains(Usage::READ_SRC));
    assert!(!remote.usage.contains(Usage::WRITE_DST));
    assert!(remote.at(0, 8, Usage::WRITE_DST).is_err());
    assert_eq!(remote.rkey, b.mem.rkey());
    assert_eq!(remote.addr, b.mem.addr());
}

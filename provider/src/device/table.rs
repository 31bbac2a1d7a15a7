//! The GID table of a device's one port (`ibv_query_gid`, `ibv_query_gid_ex`,
//! `ibv_query_gid_table`).

use std::io;
use std::net::IpAddr;

use super::gid::{Gid, GidType};
use super::iface::InterfaceInfo;

/// The GID table's capacity. Kernel rxe reserves 1024 (`RXE_PORT_GID_TBL_LEN`); a softrnic
/// device is bound to one address, so its table holds the link-local GID, that address and
/// the other addresses of its interface, and 16 is plenty. Addresses past the 16th are left
/// out. `ibv_port_attr.gid_tbl_len` reports the entries in use, not this capacity: programs
/// (perftest) query every index below it and expect each to succeed.
pub const GID_TBL_LEN: u32 = 16;

/// The index of the device's own address, the GID its packets are sent from.
pub const LOCAL_GID_INDEX: u32 = 1;

/// One entry of the table, as `struct ibv_gid_entry` gives it (the port is always 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
    /// Its index in the table (`gid_index`).
    pub index: u32,
    /// Its type: always [`GidType::RoceV2`].
    pub gid_type: GidType,
    /// The interface the GID belongs to (`ndev_ifindex`).
    pub ndev_ifindex: u32,
}

/// The GID table of a softrnic device bound to one local IP address.
///
/// Laid out like kernel rxe's table, with every entry RoCE v2:
///
/// | index | GID                                                                  |
/// |-------|----------------------------------------------------------------------|
/// | 0     | the IPv6 link-local GID of the interface's MAC (`fe80::` + EUI-64)    |
/// | 1     | the device's own address (IPv4-mapped if IPv4): the one it sends from |
/// | 2..   | the interface's other addresses, in `getifaddrs` order, no duplicates |
///
/// Index 1 is the device's address even when the interface has other addresses listed first,
/// because unmodified programs are run with `-g 1` (`ibv_rc_pingpong -g 1`, perftest
/// `-x 1`) and must send from the address the device is bound to. Kernel rxe on an interface
/// with one IPv4 address has the same layout (index 0 link-local, index 1 IPv4-mapped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidTable {
    gids: Vec<Gid>,
    iface: InterfaceInfo,
}

impl GidTable {
    /// The table of a device bound to `local` on interface `iface` (which should own it; see
    /// [`InterfaceInfo::owning`]).
    pub fn build(local: IpAddr, iface: &InterfaceInfo) -> GidTable {
        let cap = GID_TBL_LEN as usize;
        // Index 1 is `local` even in the odd case where it equals the link-local GID.
        let mut gids = vec![Gid::link_local_from_mac(iface.mac), Gid::from_ip(local)];
        for a in &iface.addrs {
            let g = Gid::from_ip(a.addr);
            if gids.len() < cap && !gids.contains(&g) {
                gids.push(g);
            }
        }
        GidTable {
            gids,
            iface: iface.clone(),
        }
    }

    /// The table of a device bound to `local`, from the interface that owns it on this host
    /// ([`InterfaceInfo::for_address`]).
    ///
    /// # Errors
    /// `AddrNotAvailable` if no interface owns `local`; the OS errors of the discovery.
    pub fn for_address(local: IpAddr) -> io::Result<GidTable> {
        let iface = InterfaceInfo::for_address(local)?;
        Ok(GidTable::build(local, &iface))
    }

    /// The number of entries in use (at most [`GID_TBL_LEN`], at least 2).
    pub fn len(&self) -> usize {
        self.gids.len()
    }

    /// Always `false`: indices 0 and 1 are always present.
    pub fn is_empty(&self) -> bool {
        self.gids.is_empty()
    }

    /// The entry at `index`, or `None` past the entries in use (an empty slot: the kernel
    /// answers `ENODATA` to `ibv_query_gid_ex` there).
    pub fn get(&self, index: u32) -> Option<GidEntry> {
        let gid = *self.gids.get(usize::try_from(index).ok()?)?;
        Some(self.entry(index, gid))
    }

    /// The lowest index holding `gid`.
    pub fn find(&self, gid: Gid) -> Option<u32> {
        self.gids.iter().position(|g| *g == gid).map(|i| i as u32)
    }

    /// The entries in use, by index.
    pub fn iter(&self) -> impl Iterator<Item = GidEntry> + '_ {
        self.gids
            .iter()
            .enumerate()
            .map(|(i, g)| self.entry(i as u32, *g))
    }

    /// Where packets to `dest` (a destination GID as an address) go. The link-local GID at
    /// index 0 is made from the interface's MAC and routes nowhere by itself (on loopback no
    /// host has it; elsewhere it would need a scope), so a destination equal to it names this
    /// device: its packets go to the device's own address. Programs pick GID index 0 when
    /// they pick the first usable GID (rdma-core's tests do), then connect a device to
    /// itself. Every other destination is left as it is.
    pub fn route(&self, dest: IpAddr) -> IpAddr {
        if Gid::from_ip(dest) == self.gids[0] {
            self.local_gid().to_ip()
        } else {
            dest
        }
    }

    /// The device's own GID (index [`LOCAL_GID_INDEX`]).
    pub fn local_gid(&self) -> Gid {
        self.gids[LOCAL_GID_INDEX as usize]
    }

    /// The interface the table was built from.
    pub fn interface(&self) -> &InterfaceInfo {
        &self.iface
    }

    fn entry(&self, index: u32, gid: Gid) -> GidEntry {
        GidEntry {
            gid,
            index,
            gid_type: GidType::RoceV2,
            ndev_ifindex: self.iface.index,
        }
    }
}

//! `SOFTRNIC_PCAP=FILE`: every RoCE packet a device sends and receives, one Ethernet frame
//! each, in the pcapng file FILE (`softrnic_provider::transport::capture`: the headers as on
//! the wire, a comment on each packet the NIC drops; 64 MiB files, four kept as FILE, FILE.1,
//! ...). A process's second device writes to `FILE-<its address>`.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use softrnic_provider::transport::{Capture, CaptureConfig, Transport, UdpTransport};

/// The environment variable naming the capture file.
pub const PCAP_ENV: &str = "SOFTRNIC_PCAP";

/// `t`, captured if `SOFTRNIC_PCAP` asks (see the module doc); a file that cannot be created
/// is reported on standard error, and the device runs uncaptured.
pub(crate) fn capture_if_asked(addr: IpAddr, t: UdpTransport) -> Box<dyn Transport + Send> {
    static DEVICES: AtomicUsize = AtomicUsize::new(0);
    let Some(path) = std::env::var_os(PCAP_ENV).filter(|p| !p.is_empty()) else {
        return Box::new(t);
    };
    let mut path = std::path::PathBuf::from(path);
    if DEVICES.fetch_add(1, Ordering::Relaxed) > 0 {
        let mut name = path.into_os_string();
        name.push(format!("-{addr}"));
        path = name.into();
    }
    match Capture::new(t, CaptureConfig::new(&path)) {
        Ok(c) => Box::new(c),
        Err((t, e)) => {
            eprintln!("softrnic: {PCAP_ENV}: cannot write {}: {e}", path.display());
            Box::new(t)
        }
    }
}

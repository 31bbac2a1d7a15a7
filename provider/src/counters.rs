//! The counters `softrnic stat` shows, as kernel rxe's `hw_counters`
//! (`/sys/class/infiniband/rxe0/ports/1/hw_counters`): what a device and each of its QPs
//! sent, received, dropped and recovered from, readable from another process of the host
//! through the status report ([`crate::host::status`]).
//!
//! Each QP counts its own events ([`QpCounters`], kept in the QP: a plain add under the NIC
//! lock the QP is already handled under, no atomic and no lock of its own). The device
//! ([`DeviceCounters`]) adds the packet counts its driver and NIC keep (the transport's
//! `packets_sent`, an atomic; the NIC's [`crate::nic::RxStats`]) to the sum of its QPs'
//! counters, those of destroyed QPs included. A device is one process's: on a device shared
//! by several processes, each reports its own QPs and packets.
//!
//! | counter | rxe name | counted when |
//! |---|---|---|
//! | `sent_pkts` | `sent_pkts` | device: a packet is handed to the transport; QP: the QP built a packet to send (request, response, ACK or NAK) |
//! | `rcvd_pkts` | `rcvd_pkts` | a packet passed the NIC's checks (ICRC, QPN, source, P_Key): device, once; QP, each QP it was handed to (every member of a multicast group) |
//! | `send_err` | `send_err` | device: the transport failed to send a packet, or the driver gave up on a full socket (RC retransmits it) |
//! | `duplicate_request` | `duplicate_request` | the responder got a request with a PSN before the expected PSN (IBTA 9.7.5.1.2) |
//! | `out_of_seq_request` | `out_of_seq_request` | the responder NAKed a PSN Sequence Error (a request beyond the expected PSN; once per gap, C9-102) |
//! | `send_rnr_err` | `send_rnr_err` | the responder sent an RNR NAK (a SEND found no receive WQE) |
//! | `rcvd_seq_err` | `rcvd_seq_err` | the completer got a PSN Sequence Error NAK for a PSN it sent |
//! | `rcvd_rnr_err` | `rcvd_rnr_err` | the completer got an RNR NAK for a PSN it sent |
//! | `completer_retry_err` | `completer_retry_err` | the requester resent, counting against `retry_cnt` (local ACK timeout, sequence NAK, a READ response beyond the oldest) |
//! | `timeout_resends` | - | the local ACK timer fired with requests outstanding and the requester went back (early resends after a measured round trip included, which count no retry) |
//! | `retry_exceeded_err` | `retry_exceeded_err` | `retry_cnt` ran out: `IBV_WC_RETRY_EXC_ERR` |
//! | `retry_rnr_exceeded_err` | `retry_rnr_exceeded_err` | `rnr_retry` ran out: `IBV_WC_RNR_RETRY_EXC_ERR` |
//! | `rdma_sends` | `rdma_sends` | a SEND, SEND_WITH_IMM or SEND_WITH_INV WR completed successfully, signaled or not (as rxe's completer counts it) |
//! | `rdma_recvs` | `rdma_recvs` | a receive WR completed successfully (a SEND, or a WRITE_WITH_IMM that consumed it) |
//! | `icrc_errors` | - | device: a packet's ICRC did not match (dropped) |
//! | `addr_mismatch` | - | device: a packet to a connected QP came from another address than its peer's (dropped) |
//! | `no_qp` | - | device: a packet named a QPN the process does not have (dropped) |
//! | `malformed` | - | device: a packet could not be parsed (dropped) |
//! | `bad_pkey` | - | device: a packet's P_Key did not match the port's (dropped) |
//! | `no_group` | - | device: a multicast packet to a group no QP is attached to (dropped) |
//! | `local_sent` | - | device: of `sent_pkts`, those written into another device's inbox on this host instead of sent over UDP (`transport/udp/local/`) |
//! | `local_rcvd` | - | device: a packet read from this device's inbox (before the checks) |
//! | `local_dropped` | - | device: of `sent_pkts`, those dropped because the peer's inbox lane was full (its receiver behind; RC resends), as a full socket buffer drops them |
//! | `local_rung` | - | device: the peer's doorbell rung because packets written into its inbox were left unread (its application stopped polling) |
//! | `ring_dropped` | - | device: a packet the kernel found no free slot for in the device's packet ring (`transport/udp/ring.rs`; lost, as from a full socket buffer, and RC resends) |
//!
//! rxe's `ack_deferred` (its completer rescheduled), `link_downed` and `lack_of_resources`
//! have no counterpart here: softrnic's ports do not go down, and its ACK coalescing and
//! resources differ from rxe's.

use crate::nic::RxStats;

/// A struct of named `u64` counters, with its names in order and a way to read and write
/// them by name (the status report carries them as `name=value`).
macro_rules! counters {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: u64,)*
        }

        impl $name {
            /// The counters' names, in the order they are shown.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Each counter's name and value, in the order of [`Self::NAMES`].
            pub fn values(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($field), self.$field)),*].into_iter()
            }

            /// Sets the counter `name`; `false` if there is none of that name.
            pub fn set(&mut self, name: &str, value: u64) -> bool {
                match name {
                    $(stringify!($field) => self.$field = value,)*
                    _ => return false,
                }
                true
            }

            /// Adds `other`'s counts to these.
            pub fn add(&mut self, other: &$name) {
                $(self.$field = self.$field.wrapping_add(other.$field);)*
            }
        }
    };
}

counters! {
    /// One QP's counters (see the module comment for what increments each).
    QpCounters {
        /// Packets the QP built to send.
        sent_pkts,
        /// Packets handed to the QP.
        rcvd_pkts,
        /// Requests with a PSN before the expected one.
        duplicate_request,
        /// PSN Sequence Error NAKs sent.
        out_of_seq_request,
        /// RNR NAKs sent.
        send_rnr_err,
        /// PSN Sequence Error NAKs received.
        rcvd_seq_err,
        /// RNR NAKs received.
        rcvd_rnr_err,
        /// Resends counted against `retry_cnt`.
        completer_retry_err,
        /// Local ACK timer expiries that resent.
        timeout_resends,
        /// WRs failed with `IBV_WC_RETRY_EXC_ERR`.
        retry_exceeded_err,
        /// WRs failed with `IBV_WC_RNR_RETRY_EXC_ERR`.
        retry_rnr_exceeded_err,
        /// SEND WRs completed successfully, signaled or not.
        rdma_sends,
        /// Receive WRs completed successfully.
        rdma_recvs,
    }
}

counters! {
    /// One device's counters in one process: its packets, and its QPs' counters summed (see
    /// the module comment).
    DeviceCounters {
        /// Packets handed to the transport.
        sent_pkts,
        /// Packets handed to a QP.
        rcvd_pkts,
        /// Packets the transport failed to send.
        send_err,
        /// Requests with a PSN before the expected one.
        duplicate_request,
        /// PSN Sequence Error NAKs sent.
        out_of_seq_request,
        /// RNR NAKs sent.
        send_rnr_err,
        /// PSN Sequence Error NAKs received.
        rcvd_seq_err,
        /// RNR NAKs received.
        rcvd_rnr_err,
        /// Resends counted against `retry_cnt`.
        completer_retry_err,
        /// Local ACK timer expiries that resent.
        timeout_resends,
        /// WRs failed with `IBV_WC_RETRY_EXC_ERR`.
        retry_exceeded_err,
        /// WRs failed with `IBV_WC_RNR_RETRY_EXC_ERR`.
        retry_rnr_exceeded_err,
        /// SEND WRs completed successfully, signaled or not.
        rdma_sends,
        /// Receive WRs completed successfully.
        rdma_recvs,
        /// Packets dropped for a bad ICRC.
        icrc_errors,
        /// Packets to a connected QP from another address than its peer's, dropped.
        addr_mismatch,
        /// Packets to a QPN that does not exist, dropped.
        no_qp,
        /// Malformed packets, dropped.
        malformed,
        /// Packets with a P_Key not the port's, dropped.
        bad_pkey,
        /// Multicast packets to a group without QPs, dropped.
        no_group,
        /// Packets sent through another device's inbox on this host.
        local_sent,
        /// Packets read from this device's inbox.
        local_rcvd,
        /// Packets dropped for a full lane of the peer's inbox.
        local_dropped,
        /// Doorbells rung for packets a peer's inbox left unread.
        local_rung,
        /// Packets the device's packet ring had no free slot for.
        ring_dropped,
    }
}

impl DeviceCounters {
    /// The device's counters from its driver's packet counts (`sent`, `send_err`), its
    /// NIC's receive counters `rx`, and the sum `qps` of its QPs' counters.
    pub fn of(sent: u64, send_err: u64, rx: &RxStats, qps: &QpCounters) -> DeviceCounters {
        let mut d = DeviceCounters::default();
        // The QPs' events, by name: every QP counter is a device counter too.
        for (name, value) in qps.values() {
            d.set(name, value);
        }
        // The packets are the device's own counts (a QP counts only its own, and none of
        // what the NIC dropped).
        d.sent_pkts = sent;
        d.rcvd_pkts = rx.delivered;
        d.send_err = send_err;
        d.icrc_errors = rx.icrc_errors;
        d.addr_mismatch = rx.addr_mismatch;
        d.no_qp = rx.no_qp;
        d.malformed = rx.malformed;
        d.bad_pkey = rx.bad_pkey;
        d.no_group = rx.no_group;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_qp_counter_is_a_device_counter() {
        for name in QpCounters::NAMES {
            assert!(DeviceCounters::NAMES.contains(name), "{name}");
        }
    }

    #[test]
    fn counters_read_and_write_by_name_in_order() {
        let mut c = QpCounters::default();
        assert!(c.set("rcvd_rnr_err", 7));
        assert!(!c.set("no_such_counter", 1));
        assert_eq!(c.rcvd_rnr_err, 7);
        let names: Vec<&str> = c.values().map(|(n, _)| n).collect();
        assert_eq!(names, QpCounters::NAMES);
        assert_eq!(names[0], "sent_pkts");
        let mut sum = c;
        sum.add(&c);
        assert_eq!(sum.rcvd_rnr_err, 14);
    }

    #[test]
    fn a_device_sums_its_qps_and_keeps_its_packet_counts() {
        let rx = RxStats {
            delivered: 5,
            icrc_errors: 2,
            no_qp: 1,
            ..RxStats::default()
        };
        let qps = QpCounters {
            sent_pkts: 99,
            duplicate_request: 3,
            retry_exceeded_err: 1,
            ..QpCounters::default()
        };
        let d = DeviceCounters::of(4, 1, &rx, &qps);
        assert_eq!((d.sent_pkts, d.rcvd_pkts, d.send_err), (4, 5, 1));
        assert_eq!((d.duplicate_request, d.retry_exceeded_err), (3, 1));
        assert_eq!((d.icrc_errors, d.no_qp), (2, 1));
    }
}

//! The IPv4 Identification of each datagram of a batch, per source port: a transport whose
//! datagrams carry the IDs of a counter (a connected socket's, [`Transport::ipv4_ident`])
//! numbers each port's messages from it, one number per message (a segmentation run is one),
//! and each segment of a run from its message's number; without a counter a datagram carries
//! its place in its run (see [`SegmentLimits`]). The ICRC covers the ID (A17.4.2), so the
//! emitter numbers the packets it builds this way, and a capture the packets that were sent.
//!
//! [`Transport::ipv4_ident`]: super::Transport::ipv4_ident
//! [`SegmentLimits`]: super::SegmentLimits

/// The numbering of one batch (see the module comment).
#[derive(Debug, Default)]
pub(crate) struct PortIdents {
    /// Per source port of the batch: the port, its first message's ID (`None`: no counter),
    /// and the messages numbered so far.
    ports: Vec<(u16, Option<u16>, u16)>,
}

impl PortIdents {
    /// Forgets the last batch.
    pub(crate) fn clear(&mut self) {
        self.ports.clear();
    }

    /// Numbers `src_port`'s messages from `first` (`None`: no counter), before any of them.
    pub(crate) fn start(&mut self, src_port: u16, first: Option<u16>) {
        self.ports.retain(|p| p.0 != src_port);
        self.ports.push((src_port, first, 0));
    }

    /// The ID of the next packet, from `src_port` at place `segment` in its run (0 starts a
    /// message); `first` gives the port's first ID if the port is new to the batch. `None`:
    /// the port has no counter (the packet carries `segment`, or whatever its sender gave it).
    pub(crate) fn next(
        &mut self,
        src_port: u16,
        segment: u16,
        first: impl FnOnce() -> Option<u16>,
    ) -> Option<u16> {
        let at = match self.ports.iter().position(|p| p.0 == src_port) {
            Some(at) => at,
            None => {
                self.ports.push((src_port, first(), 0));
                self.ports.len() - 1
            }
        };
        let (_, counter, messages) = &mut self.ports[at];
        if segment == 0 {
            *messages += 1;
        }
        // (A run's later packets follow its first: `messages` is at least 1 here.)
        counter.map(|c| {
            c.wrapping_add(messages.wrapping_sub(1))
                .wrapping_add(segment)
        })
    }

    /// The packet numbered last, from `src_port` at place `segment`, is not sent after all:
    /// its number goes to the next one.
    pub(crate) fn drop_last(&mut self, src_port: u16, segment: u16) {
        if let Some(p) = self.ports.iter_mut().find(|p| p.0 == src_port) {
            if segment == 0 {
                p.2 = p.2.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Port 7 has a counter at 0xfffe; port 8 has none (an unconnected socket).
    fn counter(port: u16) -> Option<u16> {
        (port == 7).then_some(0xfffe)
    }

    #[test]
    fn ids_follow_the_counter_per_message_or_else_the_place_in_the_run() {
        let mut ids = PortIdents::default();
        // (port, place) -> ID: port 7 counts one number per message, wrapping; port 8's
        // packets carry their place in the run.
        let got: Vec<u16> = [(7, 0), (8, 0), (7, 0), (7, 1), (7, 2), (8, 1), (7, 0)]
            .iter()
            .map(|&(port, place)| ids.next(port, place, || counter(port)).unwrap_or(place))
            .collect();
        assert_eq!(got, [0xfffe, 0, 0xffff, 0, 1, 1, 0]);
        // A dropped message start gives its number to the next one.
        ids.drop_last(7, 0);
        assert_eq!(ids.next(7, 0, || counter(7)), Some(0));
        ids.clear();
        assert_eq!(
            ids.next(7, 0, || counter(7)),
            Some(0xfffe),
            "a new batch starts over"
        );
    }

    #[test]
    fn a_port_started_from_a_known_first_id_is_numbered_from_it() {
        let mut ids = PortIdents::default();
        ids.start(7, Some(100));
        ids.start(8, None);
        let asked = std::cell::Cell::new(false);
        let mut next = |port, place| {
            ids.next(port, place, || {
                asked.set(true);
                None
            })
        };
        assert_eq!(next(7, 0), Some(100));
        assert_eq!(next(7, 1), Some(101));
        assert_eq!(next(7, 0), Some(101));
        assert_eq!(next(8, 0), None);
        assert!(!asked.get(), "a started port's first ID is not asked for");
    }
}

//! Capture files of Ethernet frames: reading captures to decode or replay them (classic
//! libpcap files and pcapng, told apart by their first four bytes), and writing frames so that
//! Wireshark and tshark can show them — pcap, or pcapng, where a frame may carry a comment
//! (why the receiver dropped it, say). A thin layer over the `pcap-file` crate, which does the
//! file formats.

use std::borrow::Cow;
use std::io::{self, BufRead, Write};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};
use pcap_file::{DataLink, PcapError};

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Capture time since the Unix epoch.
    pub timestamp: Duration,
    /// The frame as captured (possibly cut to the snap length).
    pub data: Vec<u8>,
    /// The frame's length on the wire.
    pub orig_len: u32,
    /// The frame's comment (pcapng's `opt_comment`), if any.
    pub comment: Option<String>,
}

fn io_error(e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}

/// The first four bytes of a pcapng file (its Section Header Block's type).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

fn not_ethernet(link: DataLink) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unsupported link type {link:?} (only Ethernet is supported)"),
    )
}

/// Reads Ethernet frames from a pcap or pcapng stream.
pub struct Reader<R: BufRead> {
    inner: Inner<R>,
}

enum Inner<R: BufRead> {
    Pcap(PcapReader<R>),
    /// With each interface's link type and timestamp unit, in the order their descriptions
    /// came.
    PcapNg(PcapNgReader<R>, Vec<(DataLink, TsUnit)>),
}

impl<R: BufRead> Reader<R> {
    /// Reads the file header; fails unless it is a pcap or pcapng file of Ethernet frames.
    pub fn new(mut r: R) -> io::Result<Reader<R>> {
        let pcapng = r.fill_buf()?.starts_with(&PCAPNG_MAGIC);
        let inner = if pcapng {
            Inner::PcapNg(PcapNgReader::new(r).map_err(io_error)?, Vec::new())
        } else {
            let inner = PcapReader::new(r).map_err(io_error)?;
            let link = inner.header().datalink;
            if link != DataLink::ETHERNET {
                return Err(not_ethernet(link));
            }
            Inner::Pcap(inner)
        };
        Ok(Reader { inner })
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = io::Result<Record>;

    fn next(&mut self) -> Option<io::Result<Record>> {
        match &mut self.inner {
            Inner::Pcap(r) => r.next_packet().map(|r| {
                r.map(|p| Record {
                    timestamp: p.timestamp,
                    orig_len: p.orig_len,
                    data: p.data.into_owned(),
                    comment: None,
                })
                .map_err(io_error)
            }),
            Inner::PcapNg(r, links) => loop {
                let block = match r.next_block()? {
                    Ok(b) => b,
                    Err(e) => return Some(Err(io_error(e))),
                };
                match block {
                    Block::InterfaceDescription(i) => {
                        links.push((i.linktype, TsUnit::of(&i.options)));
                    }
                    Block::EnhancedPacket(p) => {
                        let (link, unit) = match links.get(p.interface_id as usize) {
                            Some(&(link, unit)) => (Some(link), unit),
                            None => (None, TsUnit::default()),
                        };
                        if link != Some(DataLink::ETHERNET) {
                            return Some(Err(not_ethernet(link.unwrap_or(DataLink::NULL))));
                        }
                        let comment = p.options.iter().find_map(|o| match o {
                            EnhancedPacketOption::Comment(c) => Some(c.to_string()),
                            _ => None,
                        });
                        return Some(Ok(Record {
                            timestamp: unit.duration(p.timestamp),
                            orig_len: p.original_len,
                            data: p.data.into_owned(),
                            comment,
                        }));
                    }
                    Block::SimplePacket(p) => {
                        return Some(Ok(Record {
                            timestamp: Duration::ZERO,
                            orig_len: p.original_len,
                            data: p.data.into_owned(),
                            comment: None,
                        }))
                    }
                    _ => {}
                }
            },
        }
    }
}

/// The unit of a pcapng interface's timestamps (its `if_tsresol` option, pcapng 4.2): 10^-n
/// or 2^-n seconds, 10^-6 when the option is absent.
///
/// `pcap-file` reads an Enhanced Packet Block's timestamp as nanoseconds whatever the unit, and
/// writes nanoseconds, so a reader must scale what it reads, and a writer must say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TsUnit(u8);

impl Default for TsUnit {
    fn default() -> TsUnit {
        TsUnit(6)
    }
}

impl TsUnit {
    /// Nanoseconds, the unit `pcap-file` writes.
    const NANOS: TsUnit = TsUnit(9);

    fn of(options: &[InterfaceDescriptionOption<'_>]) -> TsUnit {
        options
            .iter()
            .find_map(|o| match o {
                InterfaceDescriptionOption::IfTsResol(r) => Some(TsUnit(*r)),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The time `raw`, read by `pcap-file` as nanoseconds, means in this unit.
    fn duration(self, raw: Duration) -> Duration {
        let ticks = raw.as_nanos();
        let exp = u32::from(self.0 & 0x7f);
        let nanos = if self.0 & 0x80 != 0 {
            // 2^-exp seconds.
            ticks.saturating_mul(1_000_000_000) >> exp.min(127)
        } else if exp <= 9 {
            ticks.saturating_mul(10u128.pow(9 - exp))
        } else {
            ticks / 10u128.saturating_pow(exp - 9)
        };
        let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
        Duration::new(secs, (nanos % 1_000_000_000) as u32)
    }
}

/// Reads every frame of a pcap or pcapng file.
pub fn read_file(path: impl AsRef<std::path::Path>) -> io::Result<Vec<Record>> {
    let file = std::fs::File::open(path)?;
    Reader::new(io::BufReader::new(file))?.collect()
}

/// Writes Ethernet frames to a pcapng stream, each with an optional comment.
pub struct NgWriter<W: Write> {
    inner: PcapNgWriter<W>,
}

impl<W: Write> NgWriter<W> {
    /// Writes the section header and the one interface's description (Ethernet, timestamps
    /// in nanoseconds).
    pub fn new(w: W) -> io::Result<NgWriter<W>> {
        let mut inner = PcapNgWriter::new(w).map_err(io_error)?;
        inner
            .write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: 0,
                options: vec![InterfaceDescriptionOption::IfTsResol(TsUnit::NANOS.0)],
            })
            .map_err(io_error)?;
        Ok(NgWriter { inner })
    }

    /// Appends one frame captured at `timestamp` (since the Unix epoch), with `comment`.
    pub fn write(
        &mut self,
        timestamp: Duration,
        frame: &[u8],
        comment: Option<&str>,
    ) -> io::Result<()> {
        let len = u32::try_from(frame.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
        let options = comment
            .map(|c| vec![EnhancedPacketOption::Comment(Cow::Borrowed(c))])
            .unwrap_or_default();
        self.inner
            .write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp,
                original_len: len,
                data: Cow::Borrowed(frame),
                options,
            })
            .map(drop)
            .map_err(io_error)
    }

    /// The underlying writer.
    pub fn get_mut(&mut self) -> &mut W {
        self.inner.get_mut()
    }

    /// Gives back the underlying writer.
    pub fn into_inner(self) -> W {
        self.inner.into_inner()
    }
}

/// Writes Ethernet frames to a pcap stream (microsecond timestamps).
pub struct Writer<W: Write> {
    inner: PcapWriter<W>,
}

impl<W: Write> Writer<W> {
    /// Writes the file header.
    pub fn new(w: W) -> io::Result<Writer<W>> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ..PcapHeader::default()
        };
        Ok(Writer {
            inner: PcapWriter::with_header(w, header).map_err(io_error)?,
        })
    }

    /// Appends one frame captured at `timestamp`.
    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
        self.inner
            .write_packet(&PcapPacket::new(timestamp, len, frame))
            .map(drop)
            .map_err(io_error)
    }

    /// Gives back the underlying writer.
    pub fn into_inner(self) -> W {
        self.inner.into_writer()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn pcapng_frames_come_back_with_their_comments() {
        let mut w = NgWriter::new(Vec::new()).unwrap();
        w.write(Duration::from_micros(1_500_000), &[1, 2, 3], None)
            .unwrap();
        w.write(Duration::from_micros(2_000_001), &[4, 5], Some("bad ICRC"))
            .unwrap();
        let bytes = w.into_inner();
        let got: Vec<Record> = Reader::new(&bytes[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].data.as_slice(), got[0].comment.as_deref()),
            (&[1, 2, 3][..], None)
        );
        assert_eq!(got[1].data, vec![4, 5]);
        assert_eq!(got[1].comment.as_deref(), Some("bad ICRC"));
        assert_eq!(got[1].timestamp, Duration::from_micros(2_000_001));
    }

    #[test]
    fn pcapng_says_its_timestamps_are_nanoseconds() {
        let w = NgWriter::new(Vec::new()).unwrap();
        let bytes = w.into_inner();
        // The interface description (type 1) carries if_tsresol (code 9, length 1) = 9: without
        // it Wireshark reads the nanoseconds written as microseconds, 1000 times too late.
        let idb = bytes
            .windows(4)
            .position(|b| b == [1, 0, 0, 0])
            .expect("an interface description block");
        assert!(
            bytes[idb..].windows(5).any(|o| o == [9, 0, 1, 0, 9]),
            "{bytes:02x?}"
        );
    }

    #[test]
    fn pcapng_timestamps_are_read_in_the_interface_s_unit() {
        let raw = Duration::from_nanos(1_500_000); // what pcap-file gives for 1_500_000 ticks
        assert_eq!(
            TsUnit::default().duration(raw),
            Duration::from_micros(1_500_000)
        );
        assert_eq!(TsUnit::NANOS.duration(raw), raw);
        assert_eq!(TsUnit(3).duration(raw), Duration::from_millis(1_500_000));
        assert_eq!(TsUnit(12).duration(raw), Duration::from_nanos(1_500));
        // 2^-10 s ticks: 1024 of them are a second.
        assert_eq!(
            TsUnit(0x80 | 10).duration(Duration::from_nanos(1024)),
            Duration::from_secs(1)
        );
        let opts = [InterfaceDescriptionOption::IfTsResol(9)];
        assert_eq!(TsUnit::of(&opts), TsUnit::NANOS);
        assert_eq!(TsUnit::of(&[]), TsUnit(6));
    }

    #[test]
    fn write_then_read() {
        let mut w = Writer::new(Vec::new()).unwrap();
        w.write(Duration::from_micros(1_500_000), &[1, 2, 3])
            .unwrap();
        w.write(Duration::from_micros(2_000_001), &[4; 70]).unwrap();
        let bytes = w.into_inner();
        let records: Vec<Record> = Reader::new(&bytes[..])
            .unwrap()
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].data, [1, 2, 3]);
        assert_eq!(records[0].timestamp, Duration::from_micros(1_500_000));
        assert_eq!(records[1].data, [4; 70]);
        assert_eq!(records[1].orig_len, 70);
    }

    #[test]
    fn rejects_other_link_types_and_garbage() {
        let mut w = PcapWriter::with_header(
            Vec::new(),
            PcapHeader {
                datalink: DataLink::RAW,
                ..PcapHeader::default()
            },
        )
        .unwrap();
        w.write_packet(&PcapPacket::new(Duration::ZERO, 1, &[0]))
            .unwrap();
        let bytes = w.into_writer();
        assert!(Reader::new(&bytes[..]).is_err());
        assert!(Reader::new(&b"not a pcap file at all"[..]).is_err());
    }
}

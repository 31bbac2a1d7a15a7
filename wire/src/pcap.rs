//! pcap capture files (the classic libpcap format, Ethernet link type): reading captures to
//! decode or replay them, and writing frames so that Wireshark and tshark can show them.
//! A thin layer over the `pcap-file` crate, which does the file format.

use std::io::{self, Read, Write};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
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
}

fn io_error(e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}

/// Reads Ethernet frames from a pcap stream.
pub struct Reader<R: Read> {
    inner: PcapReader<R>,
}

impl<R: Read> Reader<R> {
    /// Reads the file header; fails unless it is a pcap file of Ethernet frames.
    pub fn new(r: R) -> io::Result<Reader<R>> {
        let inner = PcapReader::new(r).map_err(io_error)?;
        let link = inner.header().datalink;
        if link != DataLink::ETHERNET {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unsupported pcap link type {link:?} (only Ethernet is supported)"),
            ));
        }
        Ok(Reader { inner })
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = io::Result<Record>;

    fn next(&mut self) -> Option<io::Result<Record>> {
        self.inner.next_packet().map(|r| {
            r.map(|p| Record {
                timestamp: p.timestamp,
                orig_len: p.orig_len,
                data: p.data.into_owned(),
            })
            .map_err(io_error)
        })
    }
}

/// Reads every frame of a pcap file.
pub fn read_file(path: impl AsRef<std::path::Path>) -> io::Result<Vec<Record>> {
    let file = std::fs::File::open(path)?;
    Reader::new(io::BufReader::new(file))?.collect()
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

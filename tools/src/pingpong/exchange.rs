//! The out-of-band connection exchange of `softrnic pingpong`, in the manner of rdma-core's
//! `ibv_rc_pingpong`: each side writes one text line over TCP naming its QP, and reads the
//! other's. `ibv_rc_pingpong` sends `LID:QPN:PSN:GID` (`%04x:%06x:%06x:` and the GID's 32 hex
//! digits); softrnic appends the R_Key and address of the buffer the peer may RDMA WRITE:
//!
//! ```text
//! 0000:000011:c0ffee:00000000000000000000ffff7f000002:00000103:00007f2a1c000000
//! ```
//!
//! RoCE has no LIDs; the field is kept (0) so the line reads like `ibv_rc_pingpong`'s.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::str::FromStr;

use softrnic_uapi::Gid;

/// The longest line accepted (a valid one is 77 bytes and a newline).
pub const MAX_LINE: usize = 128;

/// One side's connection data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// LID (always 0 on RoCE).
    pub lid: u16,
    /// The QP number (24 bits).
    pub qpn: u32,
    /// The first PSN the side sends with (24 bits).
    pub psn: u32,
    /// The GID, whose IP address the peer sends to.
    pub gid: Gid,
    /// The R_Key of the buffer the peer may write.
    pub rkey: u32,
    /// That buffer's address.
    pub addr: u64,
}

impl fmt::Display for Dest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:06x}:{:06x}:", self.lid, self.qpn, self.psn)?;
        for b in self.gid.raw() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ":{:08x}:{:016x}", self.rkey, self.addr)
    }
}

/// What is wrong with a connection line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Not six `:`-separated fields.
    FieldCount(usize),
    /// A field is not hex of the right width.
    BadField {
        /// Which field.
        field: &'static str,
        /// Its text.
        text: String,
        /// How many hex digits it must have.
        digits: usize,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::FieldCount(n) => {
                write!(f, "expected 6 fields LID:QPN:PSN:GID:RKEY:ADDR, found {n}")
            }
            ParseError::BadField {
                field,
                text,
                digits,
            } => write!(f, "{field} must be {digits} hex digits, not {text:?}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Parses `text` as exactly `digits` hex digits.
fn hex(field: &'static str, text: &str, digits: usize) -> Result<u128, ParseError> {
    let bad = || ParseError::BadField {
        field,
        text: text.chars().take(40).collect(),
        digits,
    };
    if text.len() != digits || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    u128::from_str_radix(text, 16).map_err(|_| bad())
}

impl FromStr for Dest {
    type Err = ParseError;

    /// Parses a line as [`Dest`]'s `Display` writes it (surrounding white space ignored).
    fn from_str(s: &str) -> Result<Dest, ParseError> {
        let fields: Vec<&str> = s.trim().split(':').collect();
        let [lid, qpn, psn, gid, rkey, addr] = fields[..] else {
            return Err(ParseError::FieldCount(fields.len()));
        };
        // Each value fits its type: the widths are checked first.
        Ok(Dest {
            lid: hex("LID", lid, 4)? as u16,
            qpn: hex("QPN", qpn, 6)? as u32,
            psn: hex("PSN", psn, 6)? as u32,
            gid: Gid::from_raw(hex("GID", gid, 32)?.to_be_bytes()),
            rkey: hex("RKEY", rkey, 8)? as u32,
            addr: hex("ADDR", addr, 16)? as u64,
        })
    }
}

/// Writes `mine` as a line to `stream`.
///
/// # Errors
/// The stream's.
pub fn send(stream: &mut impl Write, mine: &Dest) -> io::Result<()> {
    writeln!(stream, "{mine}")?;
    stream.flush()
}

/// Reads the peer's line from `stream` (at most [`MAX_LINE`] bytes).
///
/// # Errors
/// The stream's; `UnexpectedEof` if it closes first; `InvalidData` for a line that does not
/// parse, saying why.
pub fn receive(stream: &mut impl Read) -> io::Result<Dest> {
    let mut line = String::new();
    BufReader::new(stream.take(MAX_LINE as u64)).read_line(&mut line)?;
    if !line.ends_with('\n') {
        let why = if line.is_empty() {
            "the peer closed the connection before sending its address"
        } else {
            "the peer's address line is too long or unterminated"
        };
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, why));
    }
    line.parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad address line from the peer: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest() -> Dest {
        Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xc0ffee,
            gid: Gid::from_ip("127.0.0.2".parse().unwrap()),
            rkey: 0x103,
            addr: 0x7f2a_1c00_0000,
        }
    }

    const LINE: &str =
        "0000:000011:c0ffee:00000000000000000000ffff7f000002:00000103:00007f2a1c000000";

    #[test]
    fn display_writes_the_documented_line() {
        assert_eq!(dest().to_string(), LINE);
    }

    #[test]
    fn parse_reads_it_back() {
        assert_eq!(LINE.parse::<Dest>(), Ok(dest()));
        assert_eq!(format!("  {LINE}\r\n").parse::<Dest>(), Ok(dest()));
        let max = Dest {
            lid: 0xffff,
            qpn: 0xff_ffff,
            psn: 0xff_ffff,
            gid: Gid::from_raw([0xff; 16]),
            rkey: u32::MAX,
            addr: u64::MAX,
        };
        assert_eq!(max.to_string().parse::<Dest>(), Ok(max));
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        assert_eq!("".parse::<Dest>(), Err(ParseError::FieldCount(1)));
        assert_eq!(
            "0000:000011:c0ffee".parse::<Dest>(),
            Err(ParseError::FieldCount(3))
        );
        let cases = [
            (LINE.replacen("0000", "00g0", 1), "LID"),
            (LINE.replacen("000011", "0000011", 1), "QPN"),
            (LINE.replacen("c0ffee", "+0ffee", 1), "PSN"),
            (LINE.replacen("ffff7f000002", "ffff7f00002", 1), "GID"),
            (LINE.replacen("00000103", "103", 1), "RKEY"),
            (LINE.replacen("00007f2a1c000000", "", 1), "ADDR"),
        ];
        for (line, want) in cases {
            match line.parse::<Dest>() {
                Err(ParseError::BadField { field, .. }) => assert_eq!(field, want, "{line}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        let e = LINE
            .replacen("c0ffee", "xyz", 1)
            .parse::<Dest>()
            .unwrap_err();
        assert_eq!(e.to_string(), "PSN must be 6 hex digits, not \"xyz\"");
    }

    #[test]
    fn send_and_receive_over_a_byte_stream() {
        let mut buf = Vec::new();
        send(&mut buf, &dest()).unwrap();
        assert_eq!(buf, format!("{LINE}\n").into_bytes());
        assert_eq!(receive(&mut &buf[..]).unwrap(), dest());
    }

    #[test]
    fn receive_refuses_eof_long_and_bad_lines() {
        let e = receive(&mut &b""[..]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = receive(&mut &b"0000:0000"[..]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let long = vec![b'0'; 4 * MAX_LINE];
        let e = receive(&mut &long[..]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = receive(&mut &b"hello\n"[..]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("expected 6 fields"), "{e}");
        let utf = receive(&mut &b"\xff\xfe\n"[..]).unwrap_err();
        assert_eq!(utf.kind(), io::ErrorKind::InvalidData);
    }
}

//! `softrnic`: the command line of the softrnic software RoCE NIC.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use softrnic_tools::decode;
use softrnic_wire::pcap;

#[derive(Parser)]
#[command(
    name = "softrnic",
    version,
    about = "A software RoCEv2 RDMA NIC in userspace Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode a pcap capture of RoCEv2 traffic: one line (or JSON object) per frame.
    Decode {
        /// The capture file (classic pcap, Ethernet link type).
        file: PathBuf,
        /// One JSON object per line and per frame instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode { file, json } => run_decode(&file, json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("softrnic: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_decode(file: &PathBuf, json: bool) -> io::Result<()> {
    let f = std::fs::File::open(file)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
    let reader = pcap::Reader::new(io::BufReader::new(f))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
    let mut out = BufWriter::new(io::stdout().lock());
    for (i, rec) in reader.enumerate() {
        let rec = rec?;
        if json {
            writeln!(out, "{}", decode::json_object(i + 1, &rec.data))?;
        } else {
            writeln!(out, "{}", decode::summary_line(i + 1, &rec.data))?;
        }
    }
    out.flush()
}

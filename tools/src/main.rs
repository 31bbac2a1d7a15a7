//! `softrnic`: the command line of the softrnic software RoCE NIC.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use softrnic_tools::{decode, perf};
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
    /// Decode a pcap capture of RoCEv2 traffic: one line (or JSON object) per packet (a UDP
    /// GSO super-packet split into its segments, `12.1`, `12.2`, ...).
    Decode {
        /// The capture file (classic pcap, Ethernet link type).
        file: PathBuf,
        /// One JSON object per line and per packet instead of text.
        #[arg(long)]
        json: bool,
        /// Instead of the packets, a summary per connection (source, destination, QP):
        /// packets by opcode, messages, bytes, retransmissions, PSN gaps, ACKs, NAKs.
        #[arg(long)]
        stats: bool,
        /// Also write a ladder diagram of the first `--max` packets to this SVG file.
        #[arg(long, value_name = "OUT")]
        svg: Option<PathBuf>,
        /// Packets drawn in the ladder diagram.
        #[arg(long, default_value_t = 200)]
        max: usize,
    },
    /// Two devices in this process (127.0.0.1 and 127.0.0.2) connect RC QPs, run SEND, WRITE,
    /// WRITE_WITH_IMM, READ, CMP_SWP and FETCH_ADD, verify every byte, and report throughput
    /// and latency.
    Demo {
        /// Address of the first device.
        #[arg(long, default_value = "127.0.0.1")]
        a: std::net::IpAddr,
        /// Address of the second device.
        #[arg(long, default_value = "127.0.0.2")]
        b: std::net::IpAddr,
        /// Progress from the callers' poll_cq instead of a thread per device.
        #[arg(long)]
        polling: bool,
        /// The teaching lab: lose this share of packets ("2%" or "0.02"). Any fault flag runs
        /// the operations over the in-memory fabric, on virtual time, and reports what
        /// recovered them instead of measuring throughput and latency.
        #[arg(long, value_parser = parse_share)]
        loss: Option<f64>,
        /// The lab: hold back this share of packets behind later ones ("5%" or "0.05").
        #[arg(long, value_parser = parse_share)]
        reorder: Option<f64>,
        /// The lab: deliver this share of packets twice ("1%" or "0.01").
        #[arg(long, value_parser = parse_share)]
        dup: Option<f64>,
        /// The lab: the seed of the fault draws (the same seed, the same run).
        #[arg(long)]
        seed: Option<u64>,
        /// The lab: capture device A's packets into this pcapng file.
        #[arg(long)]
        pcap: Option<std::path::PathBuf>,
    },
    /// The RC SEND ping-pong of ibv_rc_pingpong between two processes: run the server with
    /// `--bind ADDR`, then the client with `--bind ADDR SERVER`. Each side opens a device on
    /// its --bind address; the QPs are connected over TCP; every message is verified.
    Pingpong {
        /// The server's address (omit to be the server).
        server: Option<std::net::IpAddr>,
        /// The local address (the device's, and the server's TCP address).
        #[arg(long, default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
        /// TCP port of the exchange (server: 0 picks one, printed first).
        #[arg(short, long, default_value_t = 18515)]
        port: u16,
        /// Bytes per message.
        #[arg(short, long, default_value_t = 4096)]
        size: u32,
        /// Round trips.
        #[arg(short = 'n', long, default_value_t = 1000)]
        iters: u32,
        /// Path MTU in bytes (256, 512, 1024, 2048, 4096).
        #[arg(short, long, default_value_t = 1024)]
        mtu: u32,
        /// The GID index the peer sends to (1: the --bind address).
        #[arg(short, long, default_value_t = 1)]
        gid_idx: u32,
        /// Receives kept posted.
        #[arg(short, long, default_value_t = 500)]
        rx_depth: u32,
        /// A progress thread per device (default: progress from the polling loop).
        #[arg(long)]
        progress_thread: bool,
    },
    /// The peer process of the two-process scenario tests: a device on --bind, driven by
    /// command lines over TCP (see `softrnic_tools::peer::protocol`).
    #[command(hide = true)]
    ScenarioPeer {
        /// The device's address (and the command port's).
        #[arg(long)]
        bind: std::net::IpAddr,
    },
    /// Run an unmodified verbs program (ibv_rc_pingpong, perftest, ...) on softrnic: its
    /// libibverbs.so.1 is softrnic's drop-in library, and with --addr its device is the one
    /// owning that address. Exits with the program's status.
    Run {
        /// The local address whose device the program uses (sets SOFTRNIC_ADDR).
        #[arg(long)]
        addr: Option<std::net::IpAddr>,
        /// The folder holding the built libsoftrnic_ibverbs.so (default: beside this
        /// executable, or in its deps/ folder).
        #[arg(long)]
        lib: Option<PathBuf>,
        /// Capture every RoCE packet the program's devices send and receive into this pcapng
        /// file, one frame per packet (sets SOFTRNIC_PCAP).
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// The program and its arguments (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        program: Vec<std::ffi::OsString>,
    },
    /// Each softrnic device in use on this host, the processes using it and their QPs (QPN,
    /// type, state, peer address and QPN), like `rdma resource show qp`.
    Status {
        /// Only the device of this address.
        #[arg(long)]
        addr: Option<std::net::IpAddr>,
        /// One JSON array (of devices) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The counters of each softrnic device in use on this host, per process and per QP
    /// (packets sent and received, duplicate and out-of-sequence requests, sequence and RNR
    /// NAKs, retries, drops), like kernel rxe's hw_counters.
    Stat {
        /// Only the device of this address.
        #[arg(long)]
        addr: Option<std::net::IpAddr>,
        /// One JSON array (of devices) instead of text (a line per reading with --watch).
        #[arg(long, conflicts_with = "prometheus")]
        json: bool,
        /// The Prometheus text exposition format instead of text.
        #[arg(long)]
        prometheus: bool,
        /// Read again every SECS seconds until interrupted (text: with the rates per second).
        #[arg(long, value_name = "SECS", value_parser = parse_secs)]
        watch: Option<Duration>,
    },
    /// Measure throughput and latency over loopback (127.0.0.1 to 127.0.0.2): RC RDMA WRITE
    /// and RC SEND ping-pong, each next to the raw kernel UDP baseline of the same run.
    Perf {
        /// Seconds each throughput test sends, after a short warm-up.
        #[arg(long, default_value = "3", value_parser = parse_secs)]
        secs: Duration,
        /// Round trips measured by each latency test (in 5 rounds, the tests taking turns).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
        iters: u64,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Instead: what sharing devices among processes costs (1, 2, 4 and 8 process
        /// pairs writing at once; a ping-pong shared and with SOFTRNIC_SHARED=0), in rounds.
        #[arg(long)]
        host: bool,
        /// Rounds of --host, --perftest (5 if not given) and --qps (1 if not given); each
        /// figure is the median of its rounds.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: Option<u64>,
        /// Instead (or with --sizes or --all): RC WRITE 64 KiB throughput with each of these
        /// numbers of QPs writing at once (e.g. 1,2,4,16,64,256,1024), each next to the first
        /// count's figure.
        #[arg(long, value_parser = perf::qps::parse_counts, conflicts_with = "host")]
        qps: Option<perf::qps::QpCounts>,
        /// With --qps or --all: one pair of devices for all the QP counts, which take turns
        /// writing in slices of 200 ms until each has had --secs; each count judged against
        /// the first slice by slice (steadier than --rounds on a machine whose speed changes
        /// by phases).
        #[arg(long, conflicts_with_all = ["rounds", "host", "perftest"])]
        interleave: bool,
        /// Instead (or with --qps or --all): RC WRITE throughput for each of these message
        /// sizes in bytes (e.g. 4096,16384,65536,262144,1048576), one QP, each next to the
        /// raw UDP GSO+GRO limit for the same packets, measured right before it.
        #[arg(long, value_parser = perf::sizes::parse_sizes, conflicts_with = "host")]
        sizes: Option<perf::sizes::MessageSizes>,
        /// Every set in one run: the default lines, then --sizes and --qps (where not given,
        /// 4096,16384,65536,262144,1048576 and 1,4,16,64,256,1024), as
        /// tools/scripts/perf_plot.py draws them.
        #[arg(long, conflicts_with = "host")]
        all: bool,
        /// Instead: perftest's ib_send_lat, ib_write_lat and ib_read_lat (64 B, through the
        /// drop-in library, default progress) next to the raw UDP ping-pong, in --rounds
        /// rounds of --iters iterations; then ib_write_bw -s 65536 for --secs with 1, 4 and
        /// 16 QPs and -b with 4, next to the raw UDP GSO+GRO limit, in as many rounds.
        #[arg(long, conflicts_with_all = ["host", "qps", "sizes", "all"])]
        perftest: bool,
        /// The two addresses (devices) of --perftest: server, client.
        #[arg(long, num_args = 2, value_names = ["SERVER", "CLIENT"],
              default_values = ["127.0.0.1", "127.0.0.2"])]
        addrs: Vec<std::net::IpAddr>,
    },
    /// One process of a `perf --host` WRITE pair, driven by the parent on stdin/stdout.
    #[command(hide = true)]
    PerfPair {
        /// writer or target.
        role: String,
        /// The device's address.
        #[arg(long)]
        bind: std::net::IpAddr,
        /// How long the writer streams.
        #[arg(long, value_parser = parse_secs)]
        secs: Duration,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            addr,
            lib,
            pcap,
            program,
        } => {
            let o = softrnic_tools::run::Options {
                addr,
                lib,
                pcap,
                program,
            };
            return match softrnic_tools::run::run(&o) {
                // The program's own status (a signal's death as 128 + signal, as shells do).
                Ok(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    let code = status
                        .code()
                        .or(status.signal().map(|s| 128 + s))
                        .unwrap_or(1);
                    ExitCode::from(u8::try_from(code).unwrap_or(1))
                }
                Err(e) => {
                    eprintln!("softrnic run: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Decode {
            file,
            json,
            stats,
            svg,
            max,
        } => run_decode(&file, json, stats, svg.as_deref(), max),
        Command::Status { addr, json } => run_status(addr, json),
        Command::Stat {
            addr,
            json,
            prometheus,
            watch,
        } => run_stat(addr, json, prometheus, watch),
        Command::Perf {
            iters,
            json,
            rounds,
            perftest: true,
            addrs,
            secs,
            ..
        } => run_perf_perftest(iters, secs, rounds.unwrap_or(5), &addrs, json),
        Command::Perf {
            secs,
            iters,
            json,
            host: true,
            rounds,
            ..
        } => run_perf_host(secs, iters, rounds.unwrap_or(5), json),
        Command::Perf {
            secs,
            iters,
            json,
            qps,
            sizes,
            all,
            rounds,
            interleave,
            ..
        } => perf_options(
            secs,
            iters,
            sizes.map(|s| s.0),
            qps.map(|c| c.0),
            all,
            rounds,
            interleave,
        )
        .and_then(|o| print_report(&perf::run(&o)?, json)),
        Command::PerfPair { role, bind, secs } => {
            let role = match role.as_str() {
                "writer" => perf::pair::Role::Writer,
                "target" => perf::pair::Role::Target,
                _ => {
                    eprintln!("softrnic perf-pair: the role is writer or target");
                    return ExitCode::FAILURE;
                }
            };
            perf::pair::run(
                role,
                bind,
                secs,
                &mut io::stdin().lock(),
                &mut io::stdout().lock(),
            )
        }
        Command::Demo {
            a,
            b,
            polling,
            loss,
            reorder,
            dup,
            seed,
            pcap,
        } => {
            if loss.is_some()
                || reorder.is_some()
                || dup.is_some()
                || seed.is_some()
                || pcap.is_some()
            {
                let lab = softrnic_tools::demo::Lab {
                    loss: loss.unwrap_or(0.0),
                    reorder: reorder.unwrap_or(0.0),
                    duplicate: dup.unwrap_or(0.0),
                    seed: seed.unwrap_or(1),
                    pcap,
                };
                run_lab(a, b, &lab)
            } else {
                run_demo(a, b, polling)
            }
        }
        Command::ScenarioPeer { bind } => {
            softrnic_tools::peer::server::serve(bind, &mut io::stdout().lock())
        }
        Command::Pingpong {
            server,
            bind,
            port,
            size,
            iters,
            mtu,
            gid_idx,
            rx_depth,
            progress_thread,
        } => {
            let o = softrnic_tools::pingpong::Options {
                bind,
                server,
                port,
                size,
                iters,
                mtu,
                gid_idx,
                rx_depth,
                progress_thread,
            };
            softrnic_tools::pingpong::run(&o, &mut io::stdout().lock()).map(|_| ())
        }
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

fn run_demo(a: std::net::IpAddr, b: std::net::IpAddr, polling: bool) -> io::Result<()> {
    let progress = if polling {
        softrnic_uapi::Progress::Polling
    } else {
        softrnic_uapi::Progress::Thread
    };
    println!("softrnic demo: RC between {a} and {b} over RoCEv2/UDP");
    let r = softrnic_tools::demo::run(a, b, progress)?;
    softrnic_tools::demo::print(&r, &mut io::stdout().lock())
}

/// A share of packets: "2%" or "0.02", in 0..=1.
fn parse_share(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (s, 1.0),
    };
    let v = num
        .trim()
        .parse::<f64>()
        .map_err(|e| format!("{s}: {e} (a share is \"2%\" or \"0.02\")"))?
        / scale;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s}: a share is between 0 and 100%"))
    }
}

fn run_lab(
    a: std::net::IpAddr,
    b: std::net::IpAddr,
    lab: &softrnic_tools::demo::Lab,
) -> io::Result<()> {
    println!(
        "softrnic demo: RC between {a} and {b} over the in-memory fabric: loss {}%, reorder {}%, dup {}%, seed {}",
        lab.loss * 100.0,
        lab.reorder * 100.0,
        lab.duplicate * 100.0,
        lab.seed
    );
    let r = softrnic_tools::demo::run_lab(a, b, lab)?;
    softrnic_tools::demo::print_lab(&r, &mut io::stdout().lock())
}

fn run_status(addr: Option<std::net::IpAddr>, json: bool) -> io::Result<()> {
    use softrnic_tools::status;
    let devices = status::collect(addr)?;
    if json {
        println!("{}", status::json(&devices));
    } else {
        print!("{}", status::text(&devices));
    }
    Ok(())
}

fn run_stat(
    addr: Option<std::net::IpAddr>,
    json: bool,
    prometheus: bool,
    watch: Option<Duration>,
) -> io::Result<()> {
    use softrnic_tools::{stat, status};
    let mut out = io::stdout().lock();
    let mut before: Option<(stat::Readings, std::time::Instant)> = None;
    loop {
        let devices = status::collect(addr)?;
        let now = std::time::Instant::now();
        if json {
            // One line per reading, so that a watcher can read them one by one.
            writeln!(out, "{}", stat::json(&devices))?;
        } else if prometheus {
            write!(out, "{}", stat::prometheus(&devices))?;
        } else {
            let earlier = before
                .as_ref()
                .map(|(r, t)| (r, now.duration_since(*t).as_secs_f64()));
            write!(out, "{}", stat::text(&devices, earlier))?;
        }
        let Some(every) = watch else {
            return Ok(());
        };
        if !json {
            writeln!(out)?;
        }
        out.flush()?;
        before = Some((stat::readings(&devices), now));
        std::thread::sleep(every);
    }
}

fn run_decode(
    file: &PathBuf,
    json: bool,
    stats: bool,
    svg: Option<&std::path::Path>,
    max: usize,
) -> io::Result<()> {
    let with_name = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", file.display()));
    let f = std::fs::File::open(file).map_err(with_name)?;
    let reader = pcap::Reader::new(io::BufReader::new(f)).map_err(with_name)?;
    let mut decoder = decode::Decoder::default();
    // The packets the ladder draws: RoCE ones, the first `max`.
    let (mut drawn, mut drawn_notes) = (Vec::new(), Vec::new());
    let mut out = BufWriter::new(io::stdout().lock());
    for (i, rec) in reader.enumerate() {
        for (p, note) in decoder.frame(i + 1, &rec?.data) {
            if !stats {
                let text = if json {
                    decode::render::object(&p, &note).to_string()
                } else {
                    decode::render::line(&p, &note)
                };
                writeln!(out, "{text}")?;
            }
            if svg.is_some() && drawn.len() < max && matches!(p.kind, decode::Kind::Roce(_)) {
                drawn.push(p);
                drawn_notes.push(note);
            }
        }
    }
    match (stats, json) {
        (true, true) => writeln!(out, "{}", decode::stats::json(decoder.analysis()))?,
        (true, false) => write!(out, "{}", decode::stats::text(decoder.analysis()))?,
        _ => {}
    }
    if let Some(path) = svg {
        std::fs::write(path, decode::svg::ladder(&drawn, &drawn_notes, max))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    }
    out.flush()
}

/// What `softrnic perf` measures: the default lines unless only `--sizes` or `--qps` ask for
/// something else; with `--all`, every set, a list not given taking its default.
fn perf_options(
    duration: Duration,
    iters: u64,
    sizes: Option<Vec<usize>>,
    qps: Option<Vec<usize>>,
    all: bool,
    rounds: Option<u64>,
    interleave: bool,
) -> io::Result<perf::Options> {
    let iters = usize::try_from(iters)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "--iters is too large"))?;
    if interleave && qps.is_none() && !all {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--interleave is for QP counts: give --qps or --all",
        ));
    }
    let standard = all || (sizes.is_none() && qps.is_none());
    let or_default = |given: Option<Vec<usize>>, default: &[usize]| {
        given
            .or_else(|| all.then(|| default.to_vec()))
            .unwrap_or_default()
    };
    Ok(perf::Options {
        duration,
        iters,
        standard,
        sizes: or_default(sizes, &perf::sizes::DEFAULT_SIZES),
        qps: or_default(qps, &perf::qps::DEFAULT_COUNTS),
        qps_rounds: usize::try_from(rounds.unwrap_or(1))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "--rounds is too large"))?,
        qps_interleave: interleave,
    })
}

fn run_perf_host(duration: Duration, iters: u64, rounds: u64, json: bool) -> io::Result<()> {
    let o = perf::host::Options {
        duration,
        iters: u32::try_from(iters)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "--iters is too large"))?,
        rounds: rounds as usize,
    };
    print_report(&perf::host::run(&std::env::current_exe()?, &o)?, json)
}

fn run_perf_perftest(
    iters: u64,
    secs: Duration,
    rounds: u64,
    addrs: &[std::net::IpAddr],
    json: bool,
) -> io::Result<()> {
    let o = perf::perftest::Options {
        iters: u32::try_from(iters)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "--iters is too large"))?,
        rounds: rounds as usize,
        server: addrs[0],
        client: addrs[1],
        secs,
    };
    print_report(&perf::perftest::run(&std::env::current_exe()?, &o)?, json)
}

/// A perf report on stdout, as text or one JSON object (with the `run` it came from).
fn print_report(report: &perf::Report, json: bool) -> io::Result<()> {
    let mut out = io::stdout().lock();
    if json {
        let mut v = report.to_json();
        v["run"] = perf::machine::record();
        writeln!(out, "{v}")?;
    } else {
        report.print(&mut out)?;
    }
    out.flush()
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|e| format!("{e}"))?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("must be a positive number of seconds".into()),
    }
}

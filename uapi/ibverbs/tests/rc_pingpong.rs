//! rdma-core's unmodified `ibv_rc_pingpong -g 1` between two processes on softrnic's library,
//! one device each (`SOFTRNIC_ADDR` 127.0.13.1 for the server, 127.0.13.2 for the client:
//! addresses of `lo` no other test or `softrnic demo` binds), over a free TCP port: both must
//! exit 0 and print their throughput lines; with `-e` too (completion channels). Skips without `/usr/bin/ibv_rc_pingpong`.

mod common;

const SERVER: &str = "127.0.13.1";
const CLIENT: &str = "127.0.13.2";

/// [`common::pingpong`] between this test's two addresses.
fn pingpong(prog: &std::path::Path, extra: &[&str]) {
    common::pingpong(prog, SERVER, CLIENT, extra);
}

#[test]
fn rc_pingpong_between_two_processes() {
    let Some(prog) = common::program("ibv_rc_pingpong", "rc_pingpong_between_two_processes") else {
        return;
    };
    // The two runs: the defaults (4096 bytes, 1000 round trips) and 64 KiB x 1000.
    pingpong(&prog, &[]);
    pingpong(&prog, &["-s", "65536", "-n", "1000", "-c"]);
    pingpong(&prog, &["-n", "100", "-c"]);
    // -e: completion channels (ibv_req_notify_cq, poll on the channel, ibv_get_cq_event).
    pingpong(&prog, &["-e", "-n", "100", "-c"]);
    pingpong(&prog, &["-e", "-s", "65536", "-n", "100"]);
    // Progress from the program's own polls instead of a thread per device.
    let polling = [("SOFTRNIC_PROGRESS", "polling")];
    common::pingpong_env(&prog, SERVER, CLIENT, &["-n", "1000", "-c"], &polling);
    common::pingpong_env(&prog, SERVER, CLIENT, &["-e", "-n", "100"], &polling);
}

//! rdma-core's unmodified `ibv_srq_pingpong -g 1` between two processes on softrnic's library,
//! one device each (`SOFTRNIC_ADDR` 127.0.19.1 for the server, 127.0.19.2 for the client:
//! addresses of `lo` no other test binds), over a free TCP port: 16 RC QPs per side take their
//! receives from one SRQ (`ibv_create_srq`, `ibv_post_srq_recv`, `ibv_create_qp` with
//! `init_attr->srq`, `ibv_destroy_srq` after the QPs). Both must exit 0 and print their
//! throughput lines; with `-c` (data checked) and `-e` (completion channels) too. Skips
//! without `/usr/bin/ibv_srq_pingpong`.

mod common;

const SERVER: &str = "127.0.19.1";
const CLIENT: &str = "127.0.19.2";

/// [`common::pingpong`] between this test's two addresses.
fn pingpong(prog: &std::path::Path, extra: &[&str]) {
    common::pingpong(prog, SERVER, CLIENT, extra);
}

#[test]
fn srq_pingpong_between_two_processes() {
    let Some(prog) = common::program("ibv_srq_pingpong", "srq_pingpong_between_two_processes")
    else {
        return;
    };
    // The defaults: 16 QPs, one SRQ of 500 WQEs, 1000 iterations of 4096 bytes.
    pingpong(&prog, &[]);
    pingpong(&prog, &["-c"]);
    pingpong(&prog, &["-e", "-n", "200", "-c"]);
    pingpong(&prog, &["-s", "8192", "-n", "200", "-c"]);
    pingpong(&prog, &["-q", "4", "-s", "65536", "-n", "100", "-c"]);
}

//! The process's limit of open files, for the tests that run many QPs under the limit a
//! fresh machine has (`ulimit -n`, usually 1024) rather than whatever this one was given.

/// Lowers this process's soft limit of open files to `soft`, if it is higher; the programs
/// it starts from then on inherit it. The whole process feels it: call it only in a test
/// binary whose other tests need fewer.
///
/// # Panics
/// If the limit cannot be read or set.
pub fn limit_open_files(soft: u64) {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `l` is a valid rlimit for both calls to read and write.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
        l.rlim_cur = l.rlim_cur.min(soft);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &l), 0);
    }
}

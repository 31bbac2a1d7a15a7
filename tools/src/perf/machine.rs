//! What a `softrnic perf` run ran on, recorded beside its figures in `--json` (as `run`):
//! figures from a shared 2-core VM mean little without it, and a picture drawn from the file
//! later (`tools/scripts/perf_plot.py`) says it under its title.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

/// The command line (the program named `softrnic`), when the run ended (seconds since the
/// Unix epoch), the kernel's release, the CPUs this process may use and their model; each
/// null where it cannot be read.
pub fn record() -> Value {
    let command: Vec<String> = std::iter::once("softrnic".to_owned())
        .chain(std::env::args().skip(1))
        .collect();
    json!({
        "command": command.join(" "),
        "unix_time": SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs()),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned()),
        "cpus": std::thread::available_parallelism().ok().map(|n| n.get()),
        "cpu_model": cpu_model(),
    })
}

/// The first `model name` of `/proc/cpuinfo` (x86 has one; other machines may not).
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        (name.trim() == "model name").then(|| value.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_record_names_the_command_and_the_machine() {
        let r = super::record();
        assert!(r["command"].as_str().unwrap().starts_with("softrnic"));
        assert!(r["unix_time"].as_u64().is_some_and(|t| t > 0), "{r}");
        assert!(r["cpus"].as_u64().is_some_and(|n| n > 0), "{r}");
        // Linux always has /proc/sys/kernel/osrelease.
        assert!(!r["kernel"].as_str().unwrap().is_empty(), "{r}");
        assert!(
            r["cpu_model"].is_string() || r["cpu_model"].is_null(),
            "{r}"
        );
    }
}

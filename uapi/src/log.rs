//! `SOFTRNIC_LOG`: printing the engine's events (`softrnic_provider`'s QP state changes,
//! retransmissions, NAKs, RNR waits, ACK coalescing) on standard error.
//!
//! The variable holds a `tracing` filter, e.g. `SOFTRNIC_LOG=debug` for everything worth a
//! person's attention, `SOFTRNIC_LOG=softrnic::rc=trace` for every ACK decision of the
//! reliable transport, `SOFTRNIC_LOG=softrnic::qp=debug` for state changes only. The first
//! device a process opens installs the printer, once; unset or empty, nothing is installed,
//! and a program with its own `tracing` subscriber keeps it.

use std::io::IsTerminal;
use std::sync::Once;

/// The environment variable holding the filter.
pub const LOG_ENV: &str = "SOFTRNIC_LOG";

/// Installs the printer `SOFTRNIC_LOG` asks for, the first time it is called in the process.
/// A filter that does not parse is reported on standard error, and nothing is printed.
pub fn init_from_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(filter) = std::env::var(LOG_ENV) else {
            return;
        };
        if filter.trim().is_empty() {
            return;
        }
        match tracing_subscriber::EnvFilter::try_new(&filter) {
            Ok(filter) => {
                // Another subscriber, installed by the program, wins: keep it.
                let _ = tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr)
                    .try_init();
            }
            Err(e) => eprintln!("softrnic: {LOG_ENV}={filter:?} is not a filter: {e}"),
        }
    });
}

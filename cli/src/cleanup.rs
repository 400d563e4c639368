//! Ctrl-C, SIGTERM and SIGHUP remove the temporary files of writes under
//! way (`export`, `report --summary-out`), then end the process as the
//! signal would have.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Watches for the signals on a thread of its own; without it (signals
/// cannot be watched) the default actions stay and a next write removes
/// what is left.
pub fn remove_temp_files_on_signals() {
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("signal-cleanup".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                streamscope_core::load::remove_temp_files();
                // The default action: the process ends by the signal.
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        });
}

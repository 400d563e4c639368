//! fsdp-ref: runs the reference ZeRO-3 workload and prints what it measured
//! beside the analytic model. Errors end the process with one line and a
//! non-zero exit; a watchdog ends it if a peer never shows up.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;

use streamscope_kernels::config::{plan, Args};
use streamscope_kernels::gpu::launch::{device_count, run_local, run_process};
use streamscope_kernels::rendezvous::launch_from_env;
use streamscope_kernels::report;

/// Ends the process if the run outlives `timeout_s`: a rank whose peer died
/// inside a collective would otherwise wait forever.
fn start_watchdog(timeout_s: u64, who: String) {
    let spawned = std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_secs(timeout_s));
            eprintln!(
                "fsdp-ref: error: {who} still running after --timeout-s {timeout_s} s \
             (a peer rank probably failed or never arrived); exiting"
            );
            std::process::exit(3);
        });
    if let Err(e) = spawned {
        eprintln!("fsdp-ref: warning: no watchdog thread ({e})");
    }
}

fn print(args: &Args, p: &streamscope_kernels::config::Plan, m: &report::Measured) {
    let r = report::build(
        p,
        m,
        args.model_tflops,
        args.model_busbw_gbs,
        args.peak_tflops,
    );
    if args.json {
        match serde_json::to_string(&r) {
            Ok(line) => println!("{line}"),
            Err(e) => eprintln!("fsdp-ref: error: cannot serialise the report: {e}"),
        }
    } else {
        print!("{}", report::text(&r));
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    match launch_from_env(&env)? {
        Some(launch) => {
            let p = plan(args, launch.world)?;
            start_watchdog(args.timeout_s, format!("rank {}", launch.rank));
            let timeout = Duration::from_secs(args.rendezvous_timeout_s);
            let r = run_process(&p, &launch, timeout)
                .with_context(|| format!("rank {}", launch.rank))?;
            if launch.rank == 0 {
                print(args, &p, &r.measured());
            }
        }
        None => {
            let world = match args.gpus {
                Some(g) => g,
                None => device_count()?,
            };
            let p = plan(args, world)?;
            start_watchdog(args.timeout_s, "fsdp-ref".into());
            let results = run_local(&p)?;
            let first = results.first().context("no rank reported")?;
            print(args, &p, &first.measured());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fsdp-ref: error: {e:#}");
            // Exit at once: rank threads may still be blocked inside NCCL.
            std::process::exit(1);
        }
    }
}

//! `streamscope-gpu-sampler`: CUPTI PM sampling of every visible GPU in a
//! process of its own, beside a job `streamscope record --gpu-metrics`
//! runs (collector/src/pm_sampling/sidecar.rs).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(streamscope_collector::pm_sampling::sidecar::main(&args));
}

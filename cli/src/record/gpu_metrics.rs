//! `record --gpu-metrics[=LIST] [--gpu-metrics-hz N]`: the flags' checks
//! and the environment they set for the collector (its PM sampler:
//! collector/src/pm_sampling).

use std::process::Command;

use streamscope_core::gpu_metrics::{parse_list, DEFAULT_HZ};
use streamscope_core::protocol::env::{GPU_METRICS, GPU_METRICS_HZ};

/// Opts in to `--gpu-metrics`, which is not safe yet (docs/GPU.md).
pub const ENV_EXPERIMENTAL: &str = "STREAMSCOPE_EXPERIMENTAL_GPU_METRICS";

/// `--gpu-metrics` is refused unless [`ENV_EXPERIMENTAL`] is 1: on the
/// H200 (CUDA 13.0, driver 580) CUPTI PM sampling crashed or hung the
/// recorded program.
pub fn allowed(requested: bool) -> anyhow::Result<()> {
    if requested && std::env::var(ENV_EXPERIMENTAL).as_deref() != Ok("1") {
        anyhow::bail!(
            "--gpu-metrics is experimental: on the H200 (CUDA 13.0, driver 580) CUPTI PM sampling \
             crashed or hung the recorded program; set {ENV_EXPERIMENTAL}=1 to use it anyway"
        );
    }
    Ok(())
}

/// `--gpu-metrics=LIST`: checked (names of letters, digits, `_` and `.`),
/// passed on as given; unknown names are probed on the GPU.
pub fn parse_gpu_metrics(s: &str) -> Result<String, String> {
    parse_list(s)?;
    Ok(if s.trim().is_empty() {
        "default".into()
    } else {
        s.trim().to_string()
    })
}

/// Name prefix of this host's GPU lock files (removed at the end).
pub fn lock_prefix(host_tag: &str) -> String {
    format!(
        "{}{host_tag}-",
        streamscope_core::protocol::GPU_METRICS_LOCK_PREFIX
    )
}

/// Sets (or clears: an inherited value must not turn sampling on) the
/// collector's GPU metrics variables.
pub fn set_env(cmd: &mut Command, list: Option<&str>, hz: Option<u32>) {
    match list {
        Some(l) => {
            cmd.env(GPU_METRICS, l);
            cmd.env(GPU_METRICS_HZ, hz.unwrap_or(DEFAULT_HZ).to_string());
        }
        None => {
            cmd.env_remove(GPU_METRICS);
            cmd.env_remove(GPU_METRICS_HZ);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::RecordArgs;
    use super::*;

    #[derive(clap::Parser, Debug)]
    struct Wrap {
        #[command(flatten)]
        a: RecordArgs,
    }

    fn parse(args: &[&str]) -> Result<RecordArgs, String> {
        use clap::Parser;
        Wrap::try_parse_from(std::iter::once("record").chain(args.iter().copied()))
            .map(|w| w.a)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn gpu_metrics_flags_parse_and_validate() {
        let a = parse(&["--", "python", "x.py"]).expect("as set up");
        assert_eq!(a.gpu_metrics, None);
        let a = parse(&["--gpu-metrics", "--", "python"]).expect("as set up");
        assert_eq!(a.gpu_metrics.as_deref(), Some("default"));
        assert_eq!(a.gpu_metrics_hz, None);
        // Without `=` the next word is the command, not a list.
        let a = parse(&["--gpu-metrics", "python", "x.py"]).expect("as set up");
        assert_eq!(a.gpu_metrics.as_deref(), Some("default"));
        assert_eq!(a.command, ["python", "x.py"]);
        // Unknown names pass (probed on the GPU); bad characters do not.
        let a = parse(&[
            "--gpu-metrics=sm_active,nvlrx__bytes_data_user.sum",
            "--gpu-metrics-hz=20k",
            "--",
            "a.out",
        ])
        .expect("as set up");
        assert_eq!(
            a.gpu_metrics.as_deref(),
            Some("sm_active,nvlrx__bytes_data_user.sum")
        );
        assert_eq!(a.gpu_metrics_hz, Some(20_000));
        assert!(parse(&["--gpu-metrics=a;b", "--", "x"])
            .expect_err("an error")
            .contains("';'"));
        assert!(parse(&["--gpu-metrics", "--gpu-metrics-hz=500", "--", "x"])
            .expect_err("an error")
            .contains("1 kHz to 100 kHz"));
        // The rate alone means nothing.
        assert!(parse(&["--gpu-metrics-hz=20000", "--", "x"]).is_err());
    }
    #[test]
    fn the_environment_is_set_or_cleared() {
        let mut c = Command::new("true");
        set_env(&mut c, Some("sm_active"), None);
        let envs: Vec<_> = c.get_envs().collect();
        assert!(envs.contains(&(GPU_METRICS.as_ref(), Some("sm_active".as_ref()))));
        assert!(envs.contains(&(GPU_METRICS_HZ.as_ref(), Some("10000".as_ref()))));
        let mut c = Command::new("true");
        set_env(&mut c, None, None);
        assert!(c.get_envs().all(|(_, v)| v.is_none()));
    }
}

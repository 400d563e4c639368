//! `streamscope sweep -o DIR --env NAME=v1,v2 ... -- COMMAND...`: runs the
//! command once per configuration of the environment grid, each recorded
//! into `DIR/<config>/`, then tabulates step time, overlap, exposed
//! communication and bus bandwidth per configuration (markdown, JSON, SVG).
//!
//! Each configuration runs `--repeat` times (default 3): its step time is
//! the median of its runs, its spread the range of the runs' medians, each
//! widened by its own noise (twice the standard error of the run's median
//! step). A best is named only when its spread lies wholly below every
//! other configuration's; else the sweep says there is no difference
//! beyond noise.
//!
//! Resumable: a configuration whose directory holds [`DONE`] is kept; one
//! that failed leaves [`FAILED`] with the reason and is run again next
//! time. The grid, the plan and the table are plain functions over
//! directories; running a configuration is one `streamscope record` child.

mod table;

pub use table::{markdown, table, write_outputs};

use crate::error::{ArgError, RunError};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// Written into a configuration's directory once its run succeeded.
pub const DONE: &str = ".sweep-done";
/// Written into a configuration's directory when its run failed (the reason inside).
pub const FAILED: &str = ".sweep-failed";

fn parse_env(s: &str) -> Result<(String, Vec<String>), ArgError> {
    let (name, values) = s
        .split_once('=')
        .ok_or_else(|| ArgError::EnvAxis(s.to_string()))?;
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(ArgError::EnvName(name.to_string()));
    }
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(|v| v.is_empty()) {
        return Err(ArgError::EnvValue(s.to_string()));
    }
    Ok((name.to_string(), values))
}

#[derive(Debug, Clone, clap::Args)]
pub struct SweepArgs {
    /// Directory of the sweep: one subdirectory per configuration, and
    /// sweep.md, sweep.json, sweep.svg.
    #[arg(short = 'o', long = "output", required = true)]
    pub output: PathBuf,
    /// NAME=v1,v2,...: one axis of the grid (repeatable; the grid is every combination).
    #[arg(long = "env", value_name = "NAME=V1,V2", value_parser = parse_env, required = true)]
    pub envs: Vec<(String, Vec<String>)>,
    /// Runs per configuration (their spread is what a best must beat).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// The command to run, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// One configuration of the grid (one repeat of it).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Directory name under the sweep's directory.
    pub name: String,
    /// The environment it sets.
    pub env: Vec<(String, String)>,
}

/// Every combination of `axes`, first axis slowest, each repeated `repeat` times.
pub fn grid(axes: &[(String, Vec<String>)], repeat: u32) -> Vec<Config> {
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in axes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    combos
        .into_iter()
        .flat_map(|env| {
            let base = env
                .iter()
                .map(|(k, v)| format!("{}-{}", safe(k), safe(v)))
                .collect::<Vec<_>>()
                .join("+");
            (1..=repeat).map(move |r| Config {
                name: if repeat > 1 {
                    format!("{base}+run-{r}")
                } else {
                    base.clone()
                },
                env: env.clone(),
            })
        })
        .collect()
}

/// Whether a configuration's run is already done (kept on a re-run).
pub fn is_done(dir: &Path, c: &Config) -> bool {
    dir.join(&c.name).join(DONE).is_file()
}

/// Runs one configuration under `streamscope record`; Err is the reason it failed.
fn run_one(dir: &Path, c: &Config, command: &[OsString]) -> Result<(), RunError> {
    let cdir = dir.join(&c.name);
    // A run that stopped half way: start it over (the directory is the sweep's own).
    if cdir.exists() {
        std::fs::remove_dir_all(&cdir).map_err(|source| RunError::Clear {
            path: cdir.clone(),
            source,
        })?;
    }
    let exe = std::env::current_exe().map_err(RunError::Executable)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("record")
        .arg("-o")
        .arg(&cdir)
        .arg("--no-python-lines")
        .arg("--")
        .args(command);
    for (k, v) in &c.env {
        cmd.env(k, v);
    }
    let out = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(RunError::Start)?;
    // What record said last: the reason when it failed or wrote nothing.
    let said = String::from_utf8_lossy(&out.stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(" ({})", l.trim()))
        .unwrap_or_default();
    if !out.status.success() {
        return Err(match out.status.code() {
            Some(code) => RunError::Exited { code, said },
            None => RunError::Killed { said },
        });
    }
    let traces = streamscope_core::load::expand(&cdir).unwrap_or_default();
    if traces.is_empty() {
        return Err(RunError::NoTrace { dir: cdir, said });
    }
    Ok(())
}

pub fn run(args: &SweepArgs) -> anyhow::Result<i32> {
    let dir = &args.output;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let configs = grid(&args.envs, args.repeat);
    let pb = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        indicatif::ProgressBar::new(configs.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let terminal = !pb.is_hidden();
    let say = |m: String| {
        if terminal {
            pb.println(m);
        } else {
            eprintln!("{m}");
        }
    };
    let mut failed = 0usize;
    for (k, c) in configs.iter().enumerate() {
        pb.set_message(c.name.clone());
        let what = format!("[{}/{}] {}", k + 1, configs.len(), c.name);
        if is_done(dir, c) {
            say(format!("{what}: kept (done before)"));
        } else {
            match run_one(dir, c, &args.command) {
                Ok(()) => {
                    let marker = dir.join(&c.name).join(DONE);
                    std::fs::write(&marker, "ok\n")
                        .with_context(|| format!("writing {}", marker.display()))?;
                    say(format!("{what}: done"));
                }
                Err(why) => {
                    failed += 1;
                    let cdir = dir.join(&c.name);
                    let _ = std::fs::create_dir_all(&cdir);
                    let _ = std::fs::write(cdir.join(FAILED), format!("{why}\n"));
                    say(format!("{what}: failed: {why}; skipped"));
                }
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let t = table(dir, &configs);
    write_outputs(dir, &t)?;
    print!("{}", markdown(&t));
    eprintln!(
        "streamscope: wrote {}, sweep.json, sweep.svg",
        dir.join("sweep.md").display()
    );
    if t.fastest.is_none() {
        bail!(
            "no configuration of the sweep ran ({failed} failed; reasons in {}/*/{FAILED})",
            dir.display()
        );
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_is_every_combination_in_order() {
        let axes = vec![
            parse_env("NCCL_MAX_NCHANNELS=2,4").expect("axis"),
            parse_env("NCCL_PROTO=Simple,LL128").expect("axis"),
        ];
        let g = grid(&axes, 1);
        let names: Vec<&str> = g.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "NCCL_MAX_NCHANNELS-2+NCCL_PROTO-Simple",
                "NCCL_MAX_NCHANNELS-2+NCCL_PROTO-LL128",
                "NCCL_MAX_NCHANNELS-4+NCCL_PROTO-Simple",
                "NCCL_MAX_NCHANNELS-4+NCCL_PROTO-LL128",
            ]
        );
        assert_eq!(g[3].env[1], ("NCCL_PROTO".into(), "LL128".into()));
        let r = grid(&axes[..1], 2);
        assert_eq!(r.len(), 4);
        assert_eq!(r[1].name, "NCCL_MAX_NCHANNELS-2+run-2");
        assert!(parse_env("NCCL_PROTO").is_err());
        assert!(parse_env("A B=1").is_err());
        assert!(parse_env("A=1,,2").is_err());
    }
}

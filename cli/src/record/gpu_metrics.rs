//! `record --gpu-metrics[=LIST] [--gpu-metrics-hz N]`: the flags' checks
//! and the environment they set for the collector (its PM sampler:
//! collector/src/pm_sampling).

use crate::error::ArgError;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use streamscope_core::gpu_metrics::{parse_list, DEFAULT_HZ};
use streamscope_core::protocol::env::{GPU_METRICS, GPU_METRICS_FEED, GPU_METRICS_HZ};
use streamscope_core::protocol::{GPU_METRICS_FEED_PREFIX, GPU_SAMPLER_EXE};

/// `--gpu-metrics=LIST`: checked (names of letters, digits, `_` and `.`),
/// passed on as given; unknown names are probed on the GPU.
pub fn parse_gpu_metrics(s: &str) -> Result<String, ArgError> {
    parse_list(s).map_err(ArgError::GpuMetrics)?;
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

/// Clears the sampling variables a recorded process could inherit: the
/// job never samples in its own process; [`Sampler`] feeds it.
pub fn clear_env(cmd: &mut Command) {
    cmd.env_remove(GPU_METRICS);
    cmd.env_remove(GPU_METRICS_HZ);
    cmd.env_remove(GPU_METRICS_FEED);
}

/// The sampler's environment: the list and the rate.
fn sampler_env(cmd: &mut Command, list: &str, hz: Option<u32>) {
    cmd.env(GPU_METRICS, list);
    cmd.env(GPU_METRICS_HZ, hz.unwrap_or(DEFAULT_HZ).to_string());
}

/// The sampler executable: next to the collector library, else next to
/// `streamscope`.
pub fn find_sampler(collector: Option<&Path>, exe: Option<&Path>) -> Option<PathBuf> {
    [collector, exe]
        .into_iter()
        .flatten()
        .filter_map(Path::parent)
        .map(|d| d.join(GPU_SAMPLER_EXE))
        .find(|p| p.is_file())
}

/// How long `record` waits for the sampler to set every GPU up.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How long it waits for the sampler's last decode at the end.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The running sampler process.
pub struct Sampler {
    child: Child,
}

impl Sampler {
    /// Starts `streamscope-gpu-sampler` writing its feeds into `out` and
    /// waits until it has set the GPUs up; then points `cmd` (the job) at
    /// the feeds. None (with a line on stderr) when it cannot run: the job
    /// is then recorded without GPU metrics.
    pub fn start(
        sampler: Option<PathBuf>,
        cmd: &mut Command,
        out: &Path,
        list: &str,
        hz: Option<u32>,
    ) -> Option<Sampler> {
        let Some(exe) = sampler else {
            eprintln!(
                "streamscope: {GPU_SAMPLER_EXE} not found next to the collector; recording without GPU metrics"
            );
            return None;
        };
        let mut sc = Command::new(&exe);
        sc.arg("--dir").arg(out);
        sampler_env(&mut sc, list, hz);
        sc.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = match sc.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "streamscope: cannot run {}: {e}; recording without GPU metrics",
                    exe.display()
                );
                return None;
            }
        };
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(so) = child.stdout.take() {
            std::thread::spawn(move || {
                let _ = tx.send(read_ready(so));
            });
        }
        let ready = rx.recv_timeout(READY_WAIT).unwrap_or(false);
        match child.try_wait() {
            Ok(Some(st)) => {
                // Exit code 2: it said why on stderr ("GPU metrics
                // unavailable: ..."), once is enough. Anything else (a
                // crash) is said here.
                if st.code() != Some(2) {
                    eprintln!(
                        "streamscope: the GPU sampler ended ({st}); recording without GPU metrics"
                    );
                }
                None
            }
            _ if !ready => {
                eprintln!(
                    "streamscope: the GPU sampler did not start within {} s; recording without GPU metrics",
                    READY_WAIT.as_secs()
                );
                let _ = child.kill();
                let _ = child.wait();
                None
            }
            _ => {
                cmd.env(GPU_METRICS_FEED, out);
                Some(Sampler { child })
            }
        }
    }

    /// Closes its stdin (it takes a last decode and stops), waits for it
    /// (killed after [`STOP_WAIT`]) and removes this host's feed files.
    pub fn stop(mut self, out: &Path, host_tag: &str) {
        drop(self.child.stdin.take());
        let t0 = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if t0.elapsed() >= STOP_WAIT => {
                    eprintln!("streamscope: the GPU sampler did not stop; killed");
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let prefix = format!("{GPU_METRICS_FEED_PREFIX}{host_tag}-");
        if let Ok(rd) = std::fs::read_dir(out) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// Reads the sampler's stdout until its `ready` line (true) or its end.
fn read_ready(out: impl std::io::Read) -> bool {
    use std::io::BufRead;
    std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.trim() == "ready")
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

    fn parse(args: &[&str]) -> Result<RecordArgs, clap::Error> {
        use clap::Parser;
        Wrap::try_parse_from(std::iter::once("record").chain(args.iter().copied())).map(|w| w.a)
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
            .to_string()
            .contains("';'"));
        assert!(parse(&["--gpu-metrics", "--gpu-metrics-hz=500", "--", "x"])
            .expect_err("an error")
            .to_string()
            .contains("1 kHz to 100 kHz"));
        // The rate alone means nothing.
        assert!(parse(&["--gpu-metrics-hz=20000", "--", "x"]).is_err());
    }
    #[test]
    fn the_environment_is_set_or_cleared() {
        let mut c = Command::new("true");
        sampler_env(&mut c, "sm_active", None);
        let envs: Vec<_> = c.get_envs().collect();
        assert!(envs.contains(&(GPU_METRICS.as_ref(), Some("sm_active".as_ref()))));
        assert!(envs.contains(&(GPU_METRICS_HZ.as_ref(), Some("10000".as_ref()))));
        let mut c = Command::new("true");
        clear_env(&mut c);
        assert_eq!(c.get_envs().count(), 3);
        assert!(c.get_envs().all(|(_, v)| v.is_none()));
    }

    #[test]
    fn the_sampler_is_found_beside_the_collector_or_streamscope() {
        let dir = std::env::temp_dir().join(format!("ss-sampler-{}", std::process::id()));
        let (lib, bin) = (dir.join("lib"), dir.join("bin"));
        std::fs::create_dir_all(&lib).expect("as set up");
        std::fs::create_dir_all(&bin).expect("as set up");
        let collector = lib.join("libstreamscope_collector.so");
        let exe = bin.join("streamscope");
        assert_eq!(find_sampler(Some(&collector), Some(&exe)), None);
        std::fs::write(bin.join(GPU_SAMPLER_EXE), b"").expect("as set up");
        assert_eq!(
            find_sampler(Some(&collector), Some(&exe)),
            Some(bin.join(GPU_SAMPLER_EXE))
        );
        std::fs::write(lib.join(GPU_SAMPLER_EXE), b"").expect("as set up");
        assert_eq!(
            find_sampler(Some(&collector), Some(&exe)),
            Some(lib.join(GPU_SAMPLER_EXE))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_sampler_that_cannot_start_leaves_the_job_unfed() {
        // A program that exits at once without `ready`.
        let mut job = Command::new("true");
        let out = std::env::temp_dir();
        let s = Sampler::start(
            Some(PathBuf::from("/bin/false")),
            &mut job,
            &out,
            "default",
            None,
        );
        assert!(s.is_none());
        assert!(job.get_envs().all(|(k, _)| k != GPU_METRICS_FEED));
        assert!(Sampler::start(None, &mut job, &out, "default", None).is_none());
        // One that says ready and stops when its stdin closes.
        let dir = std::env::temp_dir().join(format!("ss-fake-sampler-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("as set up");
        let fake = dir.join("fake-sampler");
        std::fs::write(&fake, "#!/bin/sh\necho ready\ncat >/dev/null\n").expect("as set up");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("as set up");
        let feed = dir.join(format!("{GPU_METRICS_FEED_PREFIX}h-0000-01-00.points"));
        std::fs::write(&feed, b"").expect("as set up");
        let mut job = Command::new("true");
        let s = Sampler::start(Some(fake), &mut job, &dir, "default", Some(20_000))
            .expect("the fake sampler said ready");
        assert!(job
            .get_envs()
            .any(|(k, v)| k == GPU_METRICS_FEED && v == Some(dir.as_os_str())));
        let t0 = Instant::now();
        s.stop(&dir, "h");
        assert!(t0.elapsed() < STOP_WAIT, "stopped by closing its stdin");
        assert!(!feed.exists(), "the host's feed files are removed");
        assert!(read_ready(std::io::Cursor::new("x\nready\n")));
        assert!(!read_ready(std::io::Cursor::new("x\n")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

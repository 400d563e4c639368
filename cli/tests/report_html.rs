//! `report --format html` in a real browser: Debian's headless chromium
//! opens the page of every run folder of traces/; its console stays
//! silent, the numbers of the DOM it dumps (after the page's script ran)
//! equal `report --format json`, each page is at most 2 MB, and
//! screenshots of three of them are not blank. Then `-o` and its refusals.
//!
//! Without chromium the browser test is skipped with a message, unless
//! STREAMSCOPE_REQUIRE_BROWSER=1 (CI sets it), when it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use streamscope_core::analysis::render::html_check;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_streamscope"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp() -> PathBuf {
    let d = std::env::temp_dir().join(format!("streamscope-html-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

/// chromium on the PATH (or STREAMSCOPE_CHROMIUM).
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STREAMSCOPE_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Every run folder of traces/: a folder of trace files, or each
/// subfolder of one that holds runs in subfolders.
fn run_folders() -> Vec<PathBuf> {
    let holds = |d: &Path| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.path().is_file() && streamscope_core::load::is_trace_name(&e.path()))
        })
    };
    let dirs = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut out = Vec::new();
    for d in dirs(&repo().join("traces")) {
        if holds(&d) {
            out.push(d);
        } else {
            out.extend(dirs(&d).into_iter().filter(|s| holds(s)));
        }
    }
    out
}

/// What chromium printed and wrote.
struct Browsed {
    stdout: String,
    /// Lines of the page's console (chromium logs them as `CONSOLE`).
    console: Vec<String>,
}

/// Runs headless chromium on `page` with `extra` (`--dump-dom`,
/// `--screenshot=...`), its console logged; killed after 120 s.
fn browse(browser: &Path, page: &Path, extra: &[String]) -> Browsed {
    let profile = tmp().join(format!(
        "profile-{}",
        page.file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default()
    ));
    let _ = std::fs::create_dir_all(&profile);
    let url = format!("file://{}", page.display());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(&url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", browser.display()));
    // Read both pipes while it runs (a full pipe would stall it).
    let mut so = child.stdout.take();
    let mut se = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = so.as_mut() {
            let _ = std::io::Read::read_to_string(p, &mut s);
        }
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = se.as_mut() {
            let _ = std::io::Read::read_to_string(p, &mut s);
        }
        s
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < Duration::from_secs(120) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish on {url} in 120 s");
            }
        }
    }
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&profile);
    Browsed {
        stdout,
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(String::from)
            .collect(),
    }
}

/// Whether a PNG shows something: at least 16 colours, and at least 2 %
/// of its pixels unlike the top-left one (the background).
fn shows_something(png_path: &Path) -> Result<(usize, f64), String> {
    let f = std::fs::File::open(png_path).map_err(|e| format!("{}: {e}", png_path.display()))?;
    let mut reader = png::Decoder::new(std::io::BufReader::new(f))
        .read_info()
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let px = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => return Err(format!("unexpected colour type {other:?}")),
    };
    let data = &buf[..info.buffer_size()];
    let bg = &data[..3];
    let (mut colours, mut differ, mut n) = (std::collections::HashSet::new(), 0usize, 0usize);
    for p in data.chunks_exact(px) {
        colours.insert([p[0], p[1], p[2]]);
        differ += usize::from(&p[..3] != bg);
        n += 1;
    }
    let share = differ as f64 / n.max(1) as f64;
    if colours.len() >= 16 && share >= 0.02 {
        Ok((colours.len(), share))
    } else {
        Err(format!(
            "{}: blank ({} colours, {:.2} % of pixels unlike the background)",
            png_path.display(),
            colours.len(),
            share * 100.0
        ))
    }
}

/// The page and JSON of `folder`.
fn render(folder: &Path, out: &Path) -> serde_json::Value {
    let o = bin()
        .args(["report", "--format", "html", "-o"])
        .arg(out)
        .arg(folder)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        o.status.success(),
        "{}: {}",
        folder.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let j = bin()
        .args(["report", "--format", "json"])
        .arg(folder)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(j.status.success(), "{}", String::from_utf8_lossy(&j.stderr));
    serde_json::from_slice(&j.stdout).unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
}

#[test]
fn every_bundled_run_in_a_browser() {
    let Some(browser) = chromium() else {
        if std::env::var("STREAMSCOPE_REQUIRE_BROWSER").as_deref() == Ok("1") {
            panic!("STREAMSCOPE_REQUIRE_BROWSER=1 and no chromium on the PATH (apt-get install chromium)");
        }
        eprintln!(
            "skipped: no chromium on the PATH (apt-get install chromium; \
             STREAMSCOPE_REQUIRE_BROWSER=1 makes this a failure)"
        );
        return;
    };
    let dir = tmp().join("browser");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    // The checks themselves can fail: a console error and a blank page
    // planted in a page of our own are seen.
    let planted = dir.join("planted.html");
    std::fs::write(
        &planted,
        "<!DOCTYPE html><html><body><script>console.error('planted')</script></body></html>",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let shot = dir.join("planted.png");
    let b = browse(
        &browser,
        &planted,
        &[format!("--screenshot={}", shot.display())],
    );
    assert!(
        b.console.iter().any(|l| l.contains("planted")),
        "a planted console.error was not seen: {:?}",
        b.console
    );
    assert!(shows_something(&shot).is_err(), "a blank page passed");

    let folders = run_folders();
    assert!(folders.len() >= 10, "{folders:?}");
    let screenshot_of = [
        "torch-fsdp2-h200x2",
        "fsdp-ref-overlap-metrics-h200x2",
        "sync-zoo-h200",
    ];
    // Two at a time (CI has two cores).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(folder) = folders.get(i) else {
                            return done;
                        };
                        let name = folder
                            .strip_prefix(repo().join("traces"))
                            .map(|p| p.to_string_lossy().replace('/', "_"))
                            .unwrap_or_else(|_| format!("run-{i}"));
                        let page = dir.join(format!("{name}.html"));
                        let json = render(folder, &page);
                        let size = std::fs::metadata(&page).map(|m| m.len()).unwrap_or(0);
                        assert!(size <= 2 << 20, "{name}: {size} bytes > 2 MB");
                        let b = browse(&browser, &page, &["--dump-dom".to_string()]);
                        assert!(b.console.is_empty(), "{name}: console: {:?}", b.console);
                        assert!(
                            b.stdout.contains("<section id=\"headline\">"),
                            "{name}: no DOM dumped"
                        );
                        let n = html_check::check(&b.stdout, &json)
                            .unwrap_or_else(|e| panic!("{name}: {e}"));
                        assert!(n >= 20, "{name}: only {n} keyed numbers");
                        let mut line = format!("{name}: {size} bytes, {n} numbers checked");
                        if screenshot_of.contains(&name.as_str()) {
                            let png = dir.join(format!("{name}.png"));
                            let b = browse(
                                &browser,
                                &page,
                                &[format!("--screenshot={}", png.display())],
                            );
                            assert!(b.console.is_empty(), "{name}: console: {:?}", b.console);
                            let (c, share) =
                                shows_something(&png).unwrap_or_else(|e| panic!("{e}"));
                            line.push_str(&format!(
                                ", screenshot {c} colours, {:.0} % drawn",
                                share * 100.0
                            ));
                        }
                        done.push(line);
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let _ = std::fs::remove_dir_all(&dir);
    for l in &results {
        eprintln!("{l}");
    }
    assert_eq!(results.len(), folders.len());
    assert_eq!(
        results.iter().filter(|l| l.contains("screenshot")).count(),
        screenshot_of.len()
    );
}

#[test]
fn output_file_is_written_safely() {
    let dir = tmp().join("out");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let trace = repo().join("traces/sync-zoo-h200");
    let out = dir.join("report.html");
    let run = |args: &[&str], out: &Path| {
        bin()
            .arg("report")
            .arg(&trace)
            .args(args)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let o = run(&["--format", "html"], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    // Again without --force: refused, the file kept.
    let o = run(&["--format", "html"], &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("already exists") && err.lines().count() == 1,
        "{err}"
    );
    // With --force: replaced (here by the JSON), no temporary file left.
    let o = run(&["--format", "json", "--force"], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(json["ranks"].is_array());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert_eq!(left.len(), 1, "{left:?}");
    // An input is never an output, whatever --force says.
    let input = std::fs::read_dir(&trace)
        .ok()
        .and_then(|rd| rd.flatten().map(|e| e.path()).find(|p| p.is_file()))
        .unwrap_or_else(|| panic!("no file in {}", trace.display()));
    let before = std::fs::metadata(&input).map(|m| m.len()).ok();
    let o = run(&["--format", "html", "--force"], &input);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("input"), "{err}");
    assert_eq!(std::fs::metadata(&input).map(|m| m.len()).ok(), before);
    // Without -o the page goes to stdout; compare refuses html.
    let o = bin()
        .args(["report", "--format", "html"])
        .arg(&trace)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("<section id=\"syncs\">"));
    let o = bin()
        .args(["compare", "--format", "html"])
        .arg(&trace)
        .arg(&trace)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--format html is for `report` only"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

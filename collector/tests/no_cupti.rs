//! Without CUPTI the injection entry point reports it on one line, returns
//! 1 and leaves the program running untraced.

use streamscope_collector::cupti_api::Cupti;

#[test]
fn initialize_without_cupti_returns_one_and_writes_nothing() {
    if Cupti::open(&[]).is_ok() {
        return; // a machine with CUPTI: covered by the GPU tests
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-nocupti-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("STREAMSCOPE_OUT", &dir);
    std::env::set_var("STREAMSCOPE_CUPTI_LIB", dir.join("libcupti.so.13"));
    assert_eq!(streamscope_collector::InitializeInjection(), 1);
    assert_eq!(
        streamscope_collector::InitializeInjection(),
        1,
        "a second call is harmless"
    );
    assert!(streamscope_collector::session::session().is_none());
    let traces = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(traces, 0, "no trace without CUPTI");
    let _ = std::fs::remove_dir_all(&dir);
}

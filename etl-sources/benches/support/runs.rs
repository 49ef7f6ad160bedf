//! What the benches that time whole loads and processes share: their
//! runtime, the median of their runs, and the sections asked for on the
//! command line.

// Each bench takes what it needs of these.
#![allow(dead_code)]

/// The runtime the loads run on: two workers, as on the 2-core machine
/// the figures are from.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The median of `xs` (the upper one of an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The sections named by the first argument that is not a flag
/// (`a,b,c`), or `all` of them.
pub fn sections(all: &[&str]) -> Vec<String> {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| a.split(',').map(String::from).collect())
        .unwrap_or_else(|| all.iter().map(|s| s.to_string()).collect())
}

/// The `etl` binary a bench runs: this build's, or `ETL_BENCH_ETL_BIN` (an
/// earlier release's, for before and after in one sitting).
pub fn etl_bin() -> String {
    std::env::var("ETL_BENCH_ETL_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_etl").to_owned())
}

/// Writes `dir/FILE`, a pipeline file of resource `name` that reads
/// `/results` of the pages from `first` on, by their `next` URL, with ids
/// at `/id` and update times at `/updated_at`; `top` is more top-level
/// keys (`shape = "json"\n`, say). Returns its path.
pub fn next_url_pipeline(
    dir: &std::path::Path,
    file: &str,
    name: &str,
    first: &str,
    top: &str,
) -> std::path::PathBuf {
    let path = dir.join(file);
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\nurl = \"{first}\"\nrecords = \"/results\"\nid = \"/id\"\n\
             updated_at = \"/updated_at\"\n{top}[paginate]\nstyle = \"next_url\"\nnext = \"/next\"\n"
        ),
    )
    .unwrap();
    path
}

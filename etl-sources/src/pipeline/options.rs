//! [`RunOptions`]: how [`crate::Pipeline::run`] runs a file, what `etl
//! run`'s flags say.

use std::time::Duration;

/// How a [`crate::Pipeline`] runs: which resources, from where, how far.
/// The default reads every resource with `load` not false, whole, with a
/// 30-second timeout a request, every server-asked wait honoured and no
/// progress bar.
///
/// ```
/// use etl_sources::RunOptions;
/// use std::time::Duration;
///
/// let options = RunOptions::default()
///     .incremental(true)
///     .resources(["comments"])
///     .max_pages(10)
///     .max_retry_after(Duration::from_secs(600))
///     .timeout(None);
/// assert!(options.is_incremental());
/// ```
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub(crate) incremental: bool,
    pub(crate) resources: Vec<String>,
    pub(crate) max_pages: Option<u32>,
    pub(crate) max_retry_after: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) progress: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            incremental: false,
            resources: Vec::new(),
            max_pages: None,
            max_retry_after: None,
            timeout: Some(Duration::from_secs(30)),
            progress: false,
        }
    }
}

impl RunOptions {
    /// Ask only for what changed since the newest update time each
    /// output holds (`--incremental`): every written resource needs
    /// `[incremental]` and `updated_at`, else the run is refused before
    /// any request.
    pub fn incremental(mut self, incremental: bool) -> Self {
        self.incremental = incremental;
        self
    }

    /// Whether the run is incremental.
    pub fn is_incremental(&self) -> bool {
        self.incremental
    }

    /// Write only these resources (`--resource`), their ancestors read to
    /// feed them; none named: every resource with `load` not false. A name
    /// the file lacks refuses the run before any request.
    pub fn resources<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.resources = names.into_iter().map(Into::into).collect();
        self
    }

    /// At most `pages` pages for each resource, all of a child's chains
    /// together (`--max-pages`).
    pub fn max_pages(mut self, pages: impl Into<Option<u32>>) -> Self {
        self.max_pages = pages.into();
        self
    }

    /// The longest server-asked wait (Retry-After, a spent quota) to sit
    /// out; a longer one ends the run with an error naming it
    /// (`--max-retry-after`). `None` (the default): every wait.
    pub fn max_retry_after(mut self, wait: impl Into<Option<Duration>>) -> Self {
        self.max_retry_after = wait.into();
        self
    }

    /// The timeout of one request (`None`: none; default 30 s).
    pub fn timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.timeout = timeout.into();
        self
    }

    /// Draw a progress bar on stderr while the run goes, when stderr is a
    /// terminal (default: none). Needs the feature `progress` (part of
    /// `cli`).
    #[cfg(feature = "progress")]
    pub fn progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }
}

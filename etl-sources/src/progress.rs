//! The progress bar of a long run, drawn on stderr when it is a terminal,
//! with the run's log lines printed above it instead of through it.

use crate::pipeline::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{self, IsTerminal, Write};
use std::sync::OnceLock;
use std::time::Duration;
#[cfg(feature = "cli")]
use tracing_subscriber::fmt::MakeWriter;

/// The bar, once a run on a terminal made one.
static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// A bar on stderr when it is a terminal; `None` under cron or CI, where
/// the log lines alone tell the story.
pub fn start() -> Option<&'static ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let style =
        ProgressStyle::with_template("{spinner} pages {pos}/{len} [{bar:30}] {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(BAR.get_or_init(|| bar))
}

/// Shows where the run stands.
pub fn update(bar: &ProgressBar, progress: &Progress) {
    let done = &progress.done;
    if let Some(total) = progress.pages_total {
        bar.set_length(total.max(u64::from(done.pages)));
    }
    bar.set_position(u64::from(done.pages));
    let mut msg = format!(
        "rows {} new, {} seen",
        done.new_rows,
        done.rows - done.new_rows
    );
    if done.rejected > 0 {
        msg.push_str(&format!(", {} rejected", done.rejected));
    }
    if progress.in_flight > 0 {
        msg.push_str(&format!(" · {} in flight", progress.in_flight));
    }
    if !progress.throttled.is_zero() {
        let waited = humantime::format_duration(Duration::from_secs(progress.throttled.as_secs()));
        msg.push_str(&format!(" · held back {waited}"));
    }
    bar.set_message(msg);
}

/// The `tracing` writer: stderr, with the bar (if any) cleared while a line
/// is written and drawn again below it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stderr;

#[cfg(feature = "cli")]
impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        Stderr
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The formatter hands over one whole event per write_all.
        match BAR.get() {
            Some(bar) => bar.suspend(|| io::stderr().write_all(buf))?,
            None => io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Summary;

    #[test]
    fn the_bar_shows_pages_rows_rejects_requests_in_flight_and_the_time_held_back() {
        let bar = ProgressBar::hidden();
        let progress = Progress {
            done: Summary {
                pages: 3,
                rows: 300,
                new_rows: 20,
                rejected: 2,
                new_rejects: 1,
                deleted: 0,
            },
            pages_total: Some(75),
            throttled: Duration::from_millis(2_429_400),
            in_flight: 8,
        };
        update(&bar, &progress);
        assert_eq!((bar.position(), bar.length()), (3, Some(75)));
        assert_eq!(
            bar.message(),
            "rows 20 new, 280 seen, 2 rejected · 8 in flight · held back 40m 29s"
        );
    }
}

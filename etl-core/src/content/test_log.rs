//! Test helper: the events a closure logs (warnings, or down to a level
//! asked for), as `message key=value ...` lines.

use std::fmt::{Debug, Write as _};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

#[derive(Clone)]
struct Recorder(Arc<Mutex<Vec<String>>>, Level);

struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        *m.level() <= self.1
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = String::new();
        event.record(&mut Line(&mut line));
        self.0.lock().unwrap().push(line);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Runs `f` and returns its result with the warnings it logged.
pub(crate) fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    capture_at(Level::WARN, f)
}

/// Runs `f` and returns its result with the events it logged at `level`
/// or above.
pub(crate) fn capture_at<T>(level: Level, f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let recorder = Recorder(Arc::default(), level);
    let out = tracing::subscriber::with_default(recorder.clone(), f);
    let lines = recorder.0.lock().unwrap().clone();
    (out, lines)
}

//! What [`crate::Pipeline::run`] did: a [`RunReport`] when the run
//! completed, a [`PipelineError`] (with the report of what did end) when it
//! did not.

use std::fmt;

use super::output::Described;

/// The exit status of a clean run.
pub const EXIT_OK: i32 = 0;
/// The exit status of a run that failed; the rows of the pages loaded
/// before stay written.
pub const EXIT_FAILED: i32 = 1;
/// The exit status of a run refused before any request: an invalid file,
/// an option it cannot serve, an output that cannot be opened as given.
pub const EXIT_USAGE: i32 = 2;
/// The exit status of a run that completed but rejected at least one
/// entry: cron and CI notice.
pub const EXIT_REJECTED: i32 = 3;

/// What a completed run did, one entry a resource, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunReport {
    pub(crate) entries: Vec<ResourceReport>,
}

impl RunReport {
    /// The resources the run wrote, in file order.
    pub fn resources(&self) -> impl Iterator<Item = &ResourceReport> + '_ {
        self.entries.iter().filter(|r| r.written)
    }

    /// Every resource the run read, in file order: the written ones and
    /// those read only to feed their children (`load = false`, or the
    /// ancestors of the resources named).
    pub fn entries(&self) -> &[ResourceReport] {
        &self.entries
    }

    /// The run's exit status: 0 clean, 3 when a written resource rejected
    /// an entry.
    pub fn exit_code(&self) -> i32 {
        self.resources()
            .map(ResourceReport::exit_code)
            .max()
            .unwrap_or(EXIT_OK)
    }
}

/// What a run did with one resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceReport {
    pub(crate) name: String,
    pub(crate) written: bool,
    pub(crate) pages: u32,
    pub(crate) read: usize,
    pub(crate) new: usize,
    pub(crate) deleted: usize,
    pub(crate) rejects: usize,
    pub(crate) new_rejects: usize,
    pub(crate) place: Option<Described>,
    pub(crate) since: Option<Option<String>>,
}

impl ResourceReport {
    /// The resource's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether its records were written (`false`: read only, to feed its
    /// children).
    pub fn written(&self) -> bool {
        self.written
    }

    /// Pages read.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Records read.
    pub fn read(&self) -> usize {
        self.read
    }

    /// Rows written: records new to the output, or changed since.
    // The contract's name (`r.new()`, beside `seen()`), not a constructor.
    #[allow(clippy::new_ret_no_self, clippy::wrong_self_convention)]
    pub fn new(&self) -> usize {
        self.new
    }

    /// Rows taken out: a merge's records marked deleted
    /// (`hard_delete`).
    pub fn deleted(&self) -> usize {
        self.deleted
    }

    /// Records read that changed nothing: the output held them already,
    /// or (a merge) a newer version of their key.
    pub fn seen(&self) -> usize {
        // A sink of a user's own may count what it wrote differently: the
        // report never panics for it.
        if self.written {
            self.read.saturating_sub(self.new + self.deleted)
        } else {
            0
        }
    }

    /// Entries that did not read as records.
    pub fn rejects(&self) -> usize {
        self.rejects
    }

    /// Rejected entries the output did not hold before this run.
    pub fn new_rejects(&self) -> usize {
        self.new_rejects
    }

    /// Its part of the run's exit status: 3 when it was written and
    /// rejected an entry, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.written && self.rejects > 0 {
            EXIT_REJECTED
        } else {
            EXIT_OK
        }
    }

    /// Where its rows and rejects went (`None` for a resource read only).
    pub fn place(&self) -> Option<&Described> {
        self.place.as_ref()
    }

    /// `Some` for an incremental read: the cursor it read from (`None`
    /// inside: the output held nothing, so it read everything).
    pub fn since(&self) -> Option<Option<&str>> {
        self.since.as_ref().map(Option::as_deref)
    }
}

/// A run that did not complete: refused before any request
/// ([`PipelineError::exit_code`] 2), or failed ([`PipelineError::exit_code`]
/// 1; every row of the pages loaded before stays written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineError {
    pub(crate) refused: bool,
    pub(crate) failures: Vec<Failure>,
    pub(crate) report: RunReport,
}

/// One thing that stopped a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The resource it stopped, where it was one resource's.
    pub resource: Option<String>,
    /// What stopped it.
    pub message: String,
}

impl Failure {
    /// What stopped `resource`.
    pub(crate) fn of(resource: &str, message: impl Into<String>) -> Self {
        Failure {
            resource: Some(resource.to_owned()),
            message: message.into(),
        }
    }
}

impl PipelineError {
    /// A run refused before any request, for `message`.
    pub(crate) fn refused(message: impl Into<String>) -> Self {
        PipelineError {
            refused: true,
            failures: vec![Failure {
                resource: None,
                message: message.into(),
            }],
            report: RunReport::default(),
        }
    }

    /// A run that failed for `failures`, after `report`'s resources ended.
    pub(crate) fn failed(failures: Vec<Failure>, report: RunReport) -> Self {
        PipelineError {
            refused: false,
            failures,
            report,
        }
    }

    /// 2 for a run refused before any request, 1 for one that failed.
    pub fn exit_code(&self) -> i32 {
        if self.refused {
            EXIT_USAGE
        } else {
            EXIT_FAILED
        }
    }

    /// What stopped the run: one entry a resource that failed, in file
    /// order (or one for the run, when it was refused).
    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// What the resources that did end did, in file order.
    pub fn report(&self) -> &RunReport {
        &self.report
    }
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (at, failure) in self.failures.iter().enumerate() {
            if at > 0 {
                f.write_str("; ")?;
            }
            match &failure.resource {
                Some(resource) => write!(f, "{resource}: {}", failure.message)?,
                None => f.write_str(&failure.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for PipelineError {}

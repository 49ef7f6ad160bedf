//! Write dispositions: how a run's records change a table, in dlt's words
//! (`write_disposition`), so that a dlt user finds what they know.

use std::fmt;

use super::Pointer;

pub mod merge;

/// How a run's records change a table: a pipeline file's `write`.
///
/// ```
/// use etl_core::content::write::{MergeKeys, Write};
///
/// assert_eq!(Write::default(), Write::Append);
/// let merge = Write::Merge(MergeKeys::new(["/id".parse()?]).hard_delete("/deleted".parse()?));
/// assert_eq!(merge.to_string(), "merge");
/// assert!(Write::NAMES.contains(&merge.name()));
/// assert_eq!(merge.summary(), "merge (primary key /id, hard delete /deleted)");
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Write {
    /// Every version a row: the table is a history (the default).
    #[default]
    Append,
    /// One row per primary key, the newest version read; a record marked
    /// deleted takes its row out.
    Merge(MergeKeys),
    /// After a complete run, the table holds exactly that run's records,
    /// switched in at once.
    Replace,
}

impl Write {
    /// The dispositions' names, as a file writes them.
    pub const NAMES: &'static [&'static str] = &["append", "merge", "replace"];

    /// The disposition's name, as a file writes it.
    pub fn name(&self) -> &'static str {
        match self {
            Write::Append => "append",
            Write::Merge(_) => "merge",
            Write::Replace => "replace",
        }
    }
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Write {
    /// Where a table written as `self` cannot take a run that writes as
    /// `asked`, in words; `None` when they are the same. A table keeps
    /// how it was made to be written: a merge table is unique on its key,
    /// an append table holds every version.
    ///
    /// ```
    /// use etl_core::content::write::{MergeKeys, Write};
    /// let merge = Write::Merge(MergeKeys::new(["/id".parse()?]));
    /// assert_eq!(Write::Append.differs(&Write::Append), None);
    /// let why = Write::Append.differs(&merge).unwrap();
    /// assert!(why.contains("append") && why.contains("merge"), "{why}");
    /// # Ok::<(), String>(())
    /// ```
    pub fn differs(&self, asked: &Write) -> Option<String> {
        (self != asked).then(|| {
            format!(
                "it is written by `write = \"{}\"`{}, and the run asks for `write = \"{}\"`{}",
                self.name(),
                self.keys(),
                asked.name(),
                asked.keys()
            )
        })
    }

    /// The disposition and, for a merge, its keys, in words: `merge
    /// (primary key /id, hard delete /deleted)`.
    pub fn summary(&self) -> String {
        format!("{}{}", self.name(), self.keys())
    }

    /// A merge's keys, in words (` (primary key /id)`); empty otherwise.
    fn keys(&self) -> String {
        match self {
            Write::Merge(keys) => {
                let delete = keys
                    .hard_delete
                    .as_ref()
                    .map_or(String::new(), |at| format!(", hard delete {at}"));
                let key: Vec<&str> = keys.primary_key.iter().map(Pointer::as_str).collect();
                format!(" (primary key {}{delete})", key.join(", "))
            }
            _ => String::new(),
        }
    }
}

/// What a merge knows a record by, and how a record says it was deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MergeKeys {
    /// The primary key: JSON Pointers into the record, one or more (a
    /// compound key).
    pub primary_key: Vec<Pointer>,
    /// Where a record says it was deleted upstream (`hard_delete`): true
    /// there, or for any other type not null (a `deleted_at` time).
    pub hard_delete: Option<Pointer>,
}

impl MergeKeys {
    /// A merge on the primary key of these JSON Pointers.
    pub fn new(primary_key: impl IntoIterator<Item = Pointer>) -> Self {
        MergeKeys {
            primary_key: primary_key.into_iter().collect(),
            hard_delete: None,
        }
    }

    /// A record whose member at the JSON Pointer `at` is true (or not
    /// null, for any other type) deletes the row of its key.
    pub fn hard_delete(mut self, at: Pointer) -> Self {
        self.hard_delete = Some(at);
        self
    }
}

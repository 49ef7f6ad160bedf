//! [`Row`]: the unit of data that flows from a source to a [`crate::Sink`].

use serde::{Deserialize, Serialize};

use crate::Launch;

/// One record of a pipeline, tagged with the entity it holds.
///
/// Its serialised form (`serde_json::to_string`) is both the line a
/// [`crate::JsonlSink`] writes and the canonical form
/// [`Row::content_key`](crate::Row::content_key) hashes.
///
/// ```
/// use etl_core::{Launch, Row};
///
/// let row = Row::Launches(Launch { id: "e92f".into(), name: "Falcon 9".into(), ..Default::default() });
/// assert!(serde_json::to_string(&row)?.starts_with(r#"{"Launches":{"id":"e92f""#));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Row {
    /// A Launch Library 2 launch.
    Launches(Launch),
}

//! `write`, `primary_key` and `hard_delete`: how a run's records change a
//! resource's table ([`Write`]), read from the pipeline file.

use toml::Spanned;

use etl_core::content::write::{MergeKeys, Write};
use etl_core::content::Pointer;

use super::error::{closest, ConfigError, Locator, Problems};
use super::file_pointer::in_record;

/// The keys of a file that say how its records change a table, as
/// written (a resource's own, else the top level's).
pub(crate) struct WriteKeys<'f> {
    /// `write`: append (the default), merge or replace.
    pub write: Option<&'f Spanned<String>>,
    /// `primary_key`: one pointer, or a list of them (a compound key).
    pub primary_key: Option<&'f Spanned<toml::Value>>,
    /// `hard_delete`: a pointer.
    pub hard_delete: Option<&'f Spanned<String>>,
    /// `id`: the primary key where `primary_key` is not given.
    pub id: Option<&'f Spanned<String>>,
    /// `shape`: merge and replace make typed tables.
    pub shape: Option<&'f Spanned<String>>,
}

/// The disposition the keys say. Every problem is named with its line,
/// all at once.
pub(crate) fn write_disposition(
    keys: &WriteKeys<'_>,
    at: &Locator<'_>,
) -> Result<Write, ConfigError> {
    let mut problems = Problems::default();
    let name = keys.write.map_or("append", |w| w.get_ref().as_str());
    let known = Write::NAMES.contains(&name);
    if let Some(write) = keys.write.filter(|_| !known) {
        let hint =
            closest(name, Write::NAMES).map_or(String::new(), |k| format!("; did you mean `{k}`?"));
        problems.take(Err::<(), _>(at.key(
            write.span(),
            "write",
            &format!(
                "is {name:?}: the dispositions are {}{hint}",
                Write::NAMES.join(", ")
            ),
        )));
    }
    // A misspelt disposition is named already: what only merge takes is
    // not named again as misplaced.
    let merge = name == "merge";
    if known && !merge {
        let only_merge = [
            ("primary_key", keys.primary_key.map(Spanned::span)),
            ("hard_delete", keys.hard_delete.map(Spanned::span)),
        ];
        for (key, span) in only_merge {
            if let Some(span) = span {
                problems.take(Err::<(), _>(at.key(
                    span,
                    key,
                    &format!("is for `write = \"merge\"`, and the table's is {name:?}"),
                )));
            }
        }
    }
    if let (Some(write), Some(shape)) = (keys.write, keys.shape) {
        if name != "append" && known && shape.get_ref() == "json" {
            problems.take(Err::<(), _>(at.at(
                write.span(),
                &format!(
                    "`write = \"{name}\"` makes a typed table (one row per key needs columns), and `shape = \"json\"` asks for the JSON shape"
                ),
            )));
        }
    }
    let primary_key = match (keys.primary_key, keys.id) {
        (Some(given), _) => problems.take(pointers(given, at)),
        // An `id` that is not a pointer is named where `id` is read.
        (None, Some(id)) => Pointer::parse(id.get_ref()).ok().map(|id| vec![id]),
        (None, None) => None,
    };
    let hard_delete = keys
        .hard_delete
        .and_then(|h| problems.take(in_record(h, "hard_delete", at)));
    problems.check()?;
    Ok(match name {
        "merge" => {
            // `id` is required of every resource: without it, it is named.
            let mut keys = MergeKeys::new(primary_key.unwrap_or_default());
            if let Some(h) = hard_delete {
                keys = keys.hard_delete(h);
            }
            Write::Merge(keys)
        }
        "replace" => Write::Replace,
        _ => Write::Append,
    })
}

/// `primary_key`: a pointer into the record, or a list of them.
fn pointers(given: &Spanned<toml::Value>, at: &Locator<'_>) -> Result<Vec<Pointer>, ConfigError> {
    let wrong = || {
        at.key(
            given.span(),
            "primary_key",
            "must be a JSON Pointer into the record (\"/id\"), or a list of them for a compound key",
        )
    };
    let texts: Vec<&str> = match given.get_ref() {
        toml::Value::String(one) => vec![one.as_str()],
        toml::Value::Array(many) if !many.is_empty() => many
            .iter()
            .map(|v| v.as_str().ok_or_else(wrong))
            .collect::<Result<_, _>>()?,
        _ => return Err(wrong()),
    };
    let mut problems = Problems::default();
    let read: Vec<Option<Pointer>> = texts
        .iter()
        .map(|text| {
            let spanned = Spanned::new(given.span(), (*text).to_owned());
            problems.take(in_record(&spanned, "primary_key", at))
        })
        .collect();
    problems.check()?;
    Ok(read.into_iter().flatten().collect())
}

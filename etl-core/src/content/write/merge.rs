//! How a merge weighs a page's versions against what a table holds: the
//! rule every output applies the same way (PostgreSQL under its row
//! locks, Delta in an optimistic commit), kept apart from any store.
//!
//! Of a page's versions of one key the newest stays. It replaces the row
//! held for its key unless that row is newer: a greater update time, or a
//! time where the version has none; at an equal time the version read
//! later wins. A version marked deleted takes the held row out and is
//! remembered, so that an older version read later does not bring the row
//! back; a newer one does.
//!
//! ```
//! use etl_core::content::write::merge::{weigh, Gone, Held, Version};
//! use std::time::{Duration, SystemTime};
//!
//! let at = |s| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
//! let held: Held = [("7".to_string(), ("old".to_string(), at(5)))].into();
//! let page = [
//!     Version { key: "7", row: "newer", updated: at(9), deleted: false },
//!     Version { key: "7", row: "older", updated: at(1), deleted: false },
//! ];
//! let (merged, change) = weigh(&page, &held, &Gone::new());
//! assert_eq!(merged.insert, [true, false]);
//! assert_eq!(change.out, ["old"]);
//! ```

use serde::de::DeserializeSeed;
use serde_json::Value;
use std::collections::HashMap;
use std::time::SystemTime;

use crate::content::pointer::{last_named, Kept, Members};
use crate::content::Pointer;

use super::MergeKeys;

/// A record's primary key as a merge table's `_etl_id` holds it (a string
/// as it is, an integer as its digits, any other value as its JSON; a
/// compound key as the JSON array of its values), and whether the record
/// says it was deleted. `Err` names the pointer that found nothing, or
/// says the record is not JSON.
///
/// ```
/// use etl_core::content::write::{merge::key_of, MergeKeys};
///
/// let keys = MergeKeys::new(["/id".parse()?]).hard_delete("/deleted".parse()?);
/// assert_eq!(key_of(r#"{"id":5,"deleted":true}"#, &keys), Ok(("5".into(), true)));
/// assert!(key_of(r#"{"name":"x"}"#, &keys).unwrap_err().contains("/id"));
/// # Ok::<(), String>(())
/// ```
pub fn key_of(json: &str, keys: &MergeKeys) -> Result<(String, bool), String> {
    // Only the members the pointers name are kept, as their raw text, and
    // the others skipped: a merge reads the key of every record on the
    // write's path, and a map of every member (each name hashed and
    // copied) was a large share of a merge page's CPU.
    let pointers = keys.primary_key.iter().chain(&keys.hard_delete);
    let names: Vec<&str> = pointers
        .filter_map(|at| at.tokens().first().map(String::as_str))
        .collect();
    let record = Members(&names)
        .deserialize(&mut serde_json::Deserializer::from_str(json))
        .map_err(|e| e.to_string())?;
    let found = |at: &Pointer| {
        member(&record, at)
            .filter(|v| !v.is_null())
            .ok_or_else(|| format!("primary key {at}: not found (merge needs it)"))
    };
    let key = match keys.primary_key.as_slice() {
        [one] => match found(one)? {
            Value::String(s) => s,
            other => other.to_string(),
        },
        many => {
            let values = many.iter().map(found);
            Value::Array(values.collect::<Result<_, _>>()?).to_string()
        }
    };
    let deleted = keys
        .hard_delete
        .as_ref()
        .and_then(|at| member(&record, at))
        .is_some_and(|v| match v {
            Value::Bool(b) => b,
            other => !other.is_null(),
        });
    Ok((key, deleted))
}

/// The value at `at` in the record whose top-level members `record`
/// keeps (of a name sent twice, the last), each level below read only as
/// far as the pointer goes.
fn member(record: &Kept<'_>, at: &Pointer) -> Option<Value> {
    // The record read as JSON already: a level below cannot fail to.
    at.value_below(|name| last_named(record, name))
        .ok()
        .flatten()
}

/// One version of a page, as the merge weighs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version<'a> {
    /// Its primary key ([`key_of`]).
    pub key: &'a str,
    /// Its content key (`_etl_key`): the same version held is seen, not
    /// written again.
    pub row: &'a str,
    /// Its update time, if it has one.
    pub updated: Option<SystemTime>,
    /// Whether it says it was deleted (`hard_delete`).
    pub deleted: bool,
}

/// What a page's merge did, and which of its versions go in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Merged {
    /// Per version of the page: whether its row is inserted.
    pub insert: Vec<bool>,
    /// Rows taken out by a deletion.
    pub deleted: usize,
    /// Versions held already, or older than what is held.
    pub seen: usize,
}

/// The rows a table holds for a page's keys: key -> (content key, update
/// time).
pub type Held = HashMap<String, (String, Option<SystemTime>)>;

/// The deletions a table remembers for a page's keys: key -> the deleted
/// version's update time.
pub type Gone = HashMap<String, Option<SystemTime>>;

/// What a page's merge changes at the table's side, besides inserting the
/// versions [`Merged::insert`] marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change<'a> {
    /// Content keys of held rows to take out (with their child rows).
    pub out: Vec<&'a str>,
    /// Deletions to remember: the key and the deleted version's time.
    pub remember: Vec<(&'a str, Option<SystemTime>)>,
    /// Remembered deletions a newer version undoes.
    pub forget: Vec<&'a str>,
}

/// Whether a version of time `new`, read now, replaces one of time `held`:
/// unless `held` is newer (a greater time, or a time where `new` has none).
pub fn replaces(new: Option<SystemTime>, held: Option<SystemTime>) -> bool {
    new >= held
}

/// Weighs the page's `versions` against the rows `held` for their keys and
/// the deletions remembered (`gone`): which versions go in, what is
/// counted, and what the table side must change. A key's held row, where
/// there is one, is what a version is weighed against; a remembered
/// deletion only where no row is held.
pub fn weigh<'a>(versions: &[Version<'a>], held: &'a Held, gone: &Gone) -> (Merged, Change<'a>) {
    let mut merged = Merged {
        insert: vec![false; versions.len()],
        ..Merged::default()
    };
    let newest = newest_of_page(versions, &mut merged);
    let mut change = Change::default();
    // In page order, so that what a store does follows the page.
    let mut keys: Vec<(&str, usize)> = newest.into_iter().collect();
    keys.sort_unstable_by_key(|&(_, i)| i);
    for (key, i) in keys {
        let v = &versions[i];
        let row = held.get(key);
        let stays = match (row, gone.get(key)) {
            // The same version, held: nothing to do.
            (Some((held_row, _)), _) if held_row == v.row => true,
            (Some((_, at)), _) => !replaces(v.updated, *at),
            (None, Some(at)) => !replaces(v.updated, *at),
            (None, None) => false,
        };
        if stays {
            merged.seen += 1;
            continue;
        }
        if let Some((held_row, _)) = row {
            change.out.push(held_row.as_str());
        }
        if v.deleted {
            merged.deleted += usize::from(row.is_some());
            change.remember.push((v.key, v.updated));
        } else {
            if gone.contains_key(key) {
                change.forget.push(v.key);
            }
            merged.insert[i] = true;
        }
    }
    (merged, change)
}

/// The index of the newest of the page's versions of each key; the others
/// are counted as seen.
fn newest_of_page<'a>(versions: &[Version<'a>], merged: &mut Merged) -> HashMap<&'a str, usize> {
    let mut newest: HashMap<&str, usize> = HashMap::new();
    for (i, v) in versions.iter().enumerate() {
        match newest.get(v.key) {
            Some(&j) if !replaces(v.updated, versions[j].updated) => merged.seen += 1,
            Some(_) => {
                merged.seen += 1;
                newest.insert(v.key, i);
            }
            None => {
                newest.insert(v.key, i);
            }
        }
    }
    newest
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn p(text: &str) -> Pointer {
        Pointer::parse(text).unwrap()
    }

    fn keys_at(primary_key: &[&str]) -> MergeKeys {
        MergeKeys::new(primary_key.iter().map(|at| p(at)))
    }

    fn at(s: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s))
    }

    fn version<'a>(key: &'a str, row: &'a str, updated: Option<SystemTime>) -> Version<'a> {
        Version {
            key,
            row,
            updated,
            deleted: false,
        }
    }

    #[test]
    fn a_key_is_read_as_id_is_and_a_deletion_is_true_or_not_null() {
        let keys = keys_at(&["/id"]).hard_delete(p("/deleted"));
        assert_eq!(key_of(r#"{"id":5}"#, &keys).unwrap(), ("5".into(), false));
        assert_eq!(
            key_of(r#"{"id":"a","deleted":true}"#, &keys).unwrap(),
            ("a".into(), true)
        );
        assert!(!key_of(r#"{"id":1,"deleted":false}"#, &keys).unwrap().1);
        assert!(!key_of(r#"{"id":1,"deleted":null}"#, &keys).unwrap().1);
        let when = keys_at(&["/id"]).hard_delete(p("/deleted_at"));
        assert!(
            key_of(r#"{"id":1,"deleted_at":"2026-01-01"}"#, &when)
                .unwrap()
                .1
        );
        let e = key_of(r#"{"name":"x"}"#, &keys).unwrap_err();
        assert!(e.contains("primary key /id: not found"), "{e}");
        let nested = keys_at(&["/repo/owner/id", "/tags/1"]);
        assert_eq!(
            key_of(r#"{"repo":{"owner":{"id":7}},"tags":["a","b~/"]}"#, &nested)
                .unwrap()
                .0,
            r#"[7,"b~/"]"#
        );
        let escaped = keys_at(&["/a~1b"]);
        assert_eq!(key_of(r#"{"a/b":"x"}"#, &escaped).unwrap().0, "x");
        assert!(key_of("[1]", &keys).is_err(), "a record is an object");
        let both = keys_at(&["/org", "/n"]);
        assert_eq!(
            key_of(r#"{"org":"rust","n":7}"#, &both).unwrap().0,
            r#"["rust",7]"#
        );
    }

    #[test]
    fn a_key_is_found_among_members_skipped_unread_and_the_last_of_a_name_counts() {
        let keys = keys_at(&["/id"]).hard_delete(p("/gone"));
        // Members around the key of every kind, skipped; a name with an
        // escape is the name it spells.
        let record = r#"{"a":{"id":1,"x":[{"id":2}]},"b":[1,{"c":"}"}],"i\u0064":"k","z":null}"#;
        assert_eq!(key_of(record, &keys).unwrap(), ("k".into(), false));
        // A name sent twice counts as its last, as a map reads it.
        let twice = r#"{"id":1,"gone":false,"id":2,"gone":true}"#;
        assert_eq!(key_of(twice, &keys).unwrap(), ("2".into(), true));
        // Below the record too.
        let nested = keys_at(&["/o/id"]);
        assert_eq!(key_of(r#"{"o":{"id":3,"id":4}}"#, &nested).unwrap().0, "4");
        assert!(key_of(r#"{"id":1"#, &keys).is_err(), "not JSON");
    }

    #[test]
    fn an_older_time_never_replaces_and_an_equal_one_read_later_does() {
        assert!(replaces(at(2), at(1)));
        assert!(replaces(at(1), at(1)));
        assert!(!replaces(at(1), at(2)));
        assert!(!replaces(None, at(1)));
        assert!(replaces(at(1), None));
        assert!(replaces(None, None));
    }

    #[test]
    fn a_deletion_is_remembered_and_only_a_newer_version_brings_the_row_back() {
        let held: Held = [("1".to_string(), ("v1".to_string(), at(1)))].into();
        let mut gone = Gone::new();
        let deletion = Version {
            deleted: true,
            ..version("1", "d2", at(2))
        };
        let (merged, change) = weigh(std::slice::from_ref(&deletion), &held, &gone);
        assert_eq!((merged.insert, merged.deleted), (vec![false], 1));
        assert_eq!(
            (change.out, change.remember),
            (vec!["v1"], vec![("1", at(2))])
        );
        gone.insert("1".into(), at(2));
        let none = Held::new();
        let (older, _) = weigh(&[version("1", "v1", at(1))], &none, &gone);
        assert_eq!((older.insert, older.seen), (vec![false], 1));
        let (newer, change) = weigh(&[version("1", "v3", at(3))], &none, &gone);
        assert_eq!((newer.insert, change.forget), (vec![true], vec!["1"]));
    }

    #[test]
    fn the_same_version_held_is_seen_and_a_page_keeps_its_newest_of_a_key() {
        let held: Held = [("1".to_string(), ("v2".to_string(), at(2)))].into();
        let page = [
            version("1", "v2", at(2)),
            version("2", "a", at(1)),
            version("2", "b", at(1)),
        ];
        let (merged, change) = weigh(&page, &held, &Gone::new());
        // Key 1 held as it is; of key 2's equal times the later read wins.
        assert_eq!(merged.insert, [false, false, true]);
        assert_eq!((merged.seen, change.out.len()), (2, 0));
    }
}

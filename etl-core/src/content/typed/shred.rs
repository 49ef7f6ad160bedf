//! [`Schema::shred`]: one pass over a record's text, straight into the
//! rows of its tables. serde_json's parser hands each value to the column
//! its pointer names; there is no JSON tree and no row-wise copy between
//! the text and the output's own buffers.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{
    Deserialize as _, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::value::RawValue;

use super::column::{Cell, ColumnType, Misfit, Scalar};
use super::schema::{Contract, Schema};
use crate::content::JsonKey;

/// Where [`Schema::shred`] puts rows: an output's buffers (COPY rows,
/// column builders). Tables and columns are indices into
/// [`Schema::tables`] and [`super::Table::columns`]; a column index past
/// what the writer has seen is a new column, whose type the [`Cell`] says.
///
/// Rows nest: a child table's rows begin and end inside their parent's,
/// so a writer keeps one open row a table. A column with no `cell` in a
/// row is NULL there.
pub trait RowWriter {
    /// A row of `table` begins.
    fn begin_row(&mut self, table: usize, keys: RowKeys<'_>);
    /// The row's value in `column`.
    fn cell(&mut self, table: usize, column: usize, cell: Cell<'_>);
    /// The row is whole. `misfits` are the record's (and its child rows'),
    /// handed with the resource's row (`table` 0); empty for child rows.
    fn end_row(&mut self, table: usize, misfits: &[Misfit]);
}

/// The keys of a row [`RowWriter::begin_row`] opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowKeys<'a> {
    /// The row's `_etl_key`: the record's content key, or for a child row
    /// [`element_key`] of its parent's.
    pub key: &'a str,
    /// The parent row's `_etl_key`; `None` for the resource's table.
    pub parent_key: Option<&'a str>,
    /// The record's content key.
    pub root_key: &'a str,
    /// The row's place in its list, from 0; `None` for the resource's
    /// table.
    pub list_idx: Option<usize>,
}

/// The `_etl_key` of the element `idx` of the list at `path` (a JSON
/// Pointer from the parent row's element) in the row keyed `parent_key`:
/// [`crate::content_id`] of kind `list element` over the parent's key
/// (64 hex digits) followed by the element's pointer. The same element of
/// the same record has the same key in every run and every output.
///
/// ```
/// use etl_core::content::typed::element_key;
/// use etl_core::content_id;
///
/// let parent = content_id("row", "{}");
/// let key = element_key(&parent, "/labels", 12);
/// assert_eq!(key, content_id("list element", &format!("{parent}/labels/12")));
/// assert_ne!(key, element_key(&parent, "/labels", 1));
/// ```
pub fn element_key(parent_key: &str, path: &str, idx: usize) -> String {
    // Hashed piece by piece, with no text made of the pieces: this runs
    // once for every child row, several times for each record.
    let mut digits = itoa::Buffer::new();
    hex::encode(crate::content::digest_of(
        "list element",
        &[
            parent_key.as_bytes(),
            path.as_bytes(),
            b"/",
            digits.format(idx).as_bytes(),
        ],
    ))
}

/// An object nested in a record whose members are more than this many,
/// every one named by a number (`{"1001": {...}, "1002": {...}}`), is a map
/// keyed by ids: it is kept whole in one json column, as a hinted `json`
/// member is, rather than flattened into a column an id (which would spend
/// a table's column budget on ids). One of this many or fewer is
/// flattened as any object.
pub const ID_MAP_MEMBERS: usize = 32;

/// Why [`Schema::shred`] did not take a record.
#[derive(Debug, thiserror::Error)]
pub enum ShredError {
    /// The text is not one JSON value.
    #[error("the record is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The contract is `freeze` and the record would change the tables.
    #[error("{0}")]
    Refused(Refused),
}

/// A record a frozen table refuses, by the first member that would change
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The member, a JSON Pointer into the record.
    pub path: String,
    /// The table it would change.
    pub table: String,
    /// What it would do: add a column or a table, or not fit a column.
    pub reason: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "member {:?} {} of table {:?}, whose schema is frozen",
            self.path, self.reason, self.table
        )
    }
}

impl Schema {
    /// Walks the record `record` (its canonical JSON text, the bytes its
    /// content key `key` hashes) once, handing `writer` its row in the
    /// resource's table and a row in a child table for each element of
    /// each list, and adding the columns and tables new members need.
    ///
    /// A value that does not fit its column is left out of it and listed
    /// in the misfits [`RowWriter::end_row`] gets: the row is written all
    /// the same. A member past a table's column limit has no column: its
    /// value stays in the raw record.
    ///
    /// Under [`Contract::Freeze`], once the tables exist ([`Schema::set_exists`]),
    /// a record that would add a column or table, or that has a misfit, is
    /// [`ShredError::Refused`] before `writer` sees any of it.
    ///
    /// `record` is meant to be text that was read already (a record's
    /// [`crate::Record::json_text`]). Text that is not JSON is
    /// [`ShredError::Json`], found where the parser stops: `writer` may
    /// hold the record's first rows, so the batch it belongs to is not to
    /// be committed.
    ///
    /// ```
    /// use etl_core::content::typed::{Cell, Misfit, RowKeys, RowWriter, Schema, SchemaOptions};
    ///
    /// /// Each cell as text, by table.
    /// #[derive(Default)]
    /// struct Print(Vec<String>);
    /// impl RowWriter for Print {
    ///     fn begin_row(&mut self, table: usize, keys: RowKeys<'_>) {
    ///         self.0.push(format!("{table}: row {:?}", keys.list_idx));
    ///     }
    ///     fn cell(&mut self, table: usize, column: usize, cell: Cell<'_>) {
    ///         self.0.push(format!("{table}: {column} = {cell:?}"));
    ///     }
    ///     fn end_row(&mut self, _: usize, misfits: &[Misfit]) {
    ///         assert!(misfits.is_empty());
    ///     }
    /// }
    ///
    /// let mut schema = Schema::new("issues", SchemaOptions::postgres())?;
    /// let mut rows = Print::default();
    /// let record = r#"{"labels":["bug"],"n":7,"user":{"login":"ada"}}"#;
    /// schema.shred(record, &etl_core::content_id("row", record), &mut rows)?;
    /// let issues = &schema.tables()[0];
    /// let names: Vec<_> = issues.columns().iter().map(|c| c.name.as_str()).collect();
    /// assert_eq!(names, ["n", "user__login"]);
    /// assert_eq!(schema.tables()[1].name(), "issues__labels");
    /// assert_eq!(rows.0[1], "1: row Some(0)");
    /// assert_eq!(rows.0[2], r#"1: 0 = Text("bug")"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shred<W: RowWriter>(
        &mut self,
        record: &str,
        key: &str,
        writer: &mut W,
    ) -> Result<(), ShredError> {
        if self.exists && self.options.contract == Contract::Freeze {
            // A dry walk first: a refused record must leave no row behind,
            // and a writer cannot take back what it was handed.
            let mut none = NoRows;
            let mut check = Walk::new(self, &mut none, true);
            check.run(record, key)?;
            if let Some(refused) = check.refused {
                return Err(ShredError::Refused(refused));
            }
        }
        let past_room = self.past_room(record, key)?;
        let mut walk = Walk::new(self, writer, false);
        walk.past_room = past_room;
        walk.run(record, key)
    }

    /// The new members of `record` that get no column because the tables'
    /// limits run short, by table: when they do, a member nearer the top
    /// of its row gets its column before a deeper one (every top-level
    /// scalar, then the next level), whatever the canonical order of the
    /// names. A census walk (nothing added, nothing written) finds what
    /// the record would add; it runs only when the record could hold more
    /// members than a table surely has room for (its `:` are at least its
    /// members).
    fn past_room(
        &mut self,
        record: &str,
        key: &str,
    ) -> Result<HashSet<(usize, String)>, ShredError> {
        let room = self
            .tables
            .iter()
            .map(|t| t.sure_room(&self.options))
            .min()
            .unwrap_or(usize::MAX);
        // A member is at least four bytes (`"":0`), so a short record needs
        // no count of its `:` to be known to fit.
        if room == usize::MAX
            || record.len() / 4 <= room
            || memchr::memchr_iter(b':', record.as_bytes()).count() <= room
        {
            return Ok(HashSet::new());
        }
        let mut none = NoRows;
        let mut census = Walk::new(self, &mut none, true);
        census.census = Some(Vec::new());
        census.run(record, key)?;
        let mut wanted = census.census.take().unwrap_or_default();
        // Nearest the top first, in the record's order at each depth.
        wanted.sort_by_key(|w| w.path.matches('/').count());
        let mut seen = HashSet::new();
        wanted.retain(|w| seen.insert((w.table, w.path.clone())));
        let mut past = HashSet::new();
        for (at, table) in self.tables.iter().enumerate() {
            let of_table = wanted.iter().filter(|w| w.table == at);
            for path in table.past_room(
                &self.options,
                of_table.map(|w| (w.path.as_str(), w.column_type)),
            ) {
                past.insert((at, path.to_owned()));
            }
        }
        Ok(past)
    }
}

/// A column a census walk found a record would add.
struct Wanted {
    table: usize,
    /// The member's pointer from its table's element.
    path: String,
    column_type: ColumnType,
}

/// The writer of the dry walk.
struct NoRows;

impl RowWriter for NoRows {
    fn begin_row(&mut self, _: usize, _: RowKeys<'_>) {}
    fn cell(&mut self, _: usize, _: usize, _: Cell<'_>) {}
    fn end_row(&mut self, _: usize, _: &[Misfit]) {}
}

/// One record's walk.
struct Walk<'s, W> {
    schema: &'s mut Schema,
    writer: &'s mut W,
    /// A dry walk: nothing is added or written, and the first change is
    /// noted in `refused`.
    dry: bool,
    refused: Option<Refused>,
    misfits: Vec<Misfit>,
    /// The value's pointer from its table's element.
    at: String,
    /// The pointer of that element from the record (empty for the
    /// record's own table): the value's pointer from the record is this
    /// followed by `at`, made only where a misfit or refusal names it.
    element_at: String,
    /// The `_etl_key`s of the open rows, the record's first.
    keys: Vec<String>,
    /// A census walk: each column the record would add, noted here (and
    /// nothing refused for it).
    census: Option<Vec<Wanted>>,
    /// Members that get no column, by table: the limits run short, and
    /// members nearer the top take the room ([`Schema::past_room`]).
    past_room: HashSet<(usize, String)>,
}

impl<'s, W: RowWriter> Walk<'s, W> {
    fn new(schema: &'s mut Schema, writer: &'s mut W, dry: bool) -> Self {
        Walk {
            schema,
            writer,
            dry,
            refused: None,
            misfits: Vec::new(),
            at: String::new(),
            element_at: String::new(),
            keys: Vec::new(),
            census: None,
            past_room: HashSet::new(),
        }
    }

    fn run(&mut self, record: &str, key: &str) -> Result<(), ShredError> {
        let mut de = serde_json::Deserializer::from_str(record);
        self.keys.push(key.to_owned());
        self.writer.begin_row(
            0,
            RowKeys {
                key,
                parent_key: None,
                root_key: key,
                list_idx: None,
            },
        );
        Value {
            walk: self,
            table: 0,
            depth: 0,
            column: None,
        }
        .deserialize(&mut de)?;
        de.end()?;
        self.writer.end_row(0, &self.misfits);
        Ok(())
    }

    /// A scalar at `self.at` of `table`.
    fn scalar(&mut self, table: usize, value: Scalar<'_>) {
        let column = self.schema.tables[table].column_at(&self.at);
        self.scalar_in(table, column, value);
    }

    /// [`Walk::scalar`], the column at `self.at` already looked up.
    fn scalar_in(&mut self, table: usize, column: Option<usize>, value: Scalar<'_>) {
        match column {
            Some(column) => {
                let column_type = self.schema.tables[table].columns()[column].column_type;
                let found = value.found();
                match value.fit(column_type) {
                    Some(cell) => self.writer.cell(table, column, cell),
                    None => self.misfit(table, column, found),
                }
            }
            None => {
                let cell = value.infer();
                if let Some(column) = self.new_column(table, cell.column_type()) {
                    self.writer.cell(table, column, cell);
                }
            }
        }
    }

    /// A value at `self.at` of `table` kept whole: `text` is its JSON.
    fn whole(&mut self, table: usize, text: &str) -> Result<(), serde_json::Error> {
        if text == "null" {
            return Ok(());
        }
        let nested = text.starts_with(['{', '[']);
        let column = self.schema.tables[table].column_at(&self.at);
        let column_type = column.map(|c| self.schema.tables[table].columns()[c].column_type);
        match (column, column_type) {
            (Some(c), Some(ColumnType::Json)) => {
                self.writer.cell(table, c, Cell::Json(Cow::Borrowed(text)));
            }
            (Some(c), _) if nested => self.misfit(table, c, found_nested(text)),
            (None, _) if nested => {
                if let Some(c) = self.new_column(table, ColumnType::Json) {
                    self.writer.cell(table, c, Cell::Json(Cow::Borrowed(text)));
                }
            }
            // A scalar past the nesting limit is typed as any other.
            _ => {
                let value = serde_json::from_str::<ScalarOf>(text)?.0;
                self.scalar(table, value);
            }
        }
        Ok(())
    }

    /// A new column for the value at `self.at` of `table`, if it may have
    /// one.
    fn new_column(&mut self, table: usize, column_type: ColumnType) -> Option<usize> {
        if let Some(census) = &mut self.census {
            census.push(Wanted {
                table,
                path: self.at.clone(),
                column_type,
            });
            return None;
        }
        let past_room =
            !self.past_room.is_empty() && self.past_room.contains(&(table, self.at.clone()));
        let t = &mut self.schema.tables[table];
        if past_room || !t.has_room(&self.schema.options, column_type) {
            if !self.dry && t.refuse(&self.at) {
                tracing::warn!(
                    table = t.name(),
                    member = %format_args!("{}{}", self.element_at, self.at),
                    "the table has no room for more columns: this member and later new ones stay in _etl_row only"
                );
            }
            return None;
        }
        if self.dry {
            self.refuse(table, self.record_at(), "would add a column");
            return None;
        }
        Some(self.schema.add_column(table, &self.at, column_type))
    }

    /// The value at `self.at` does not fit `column` of `table`.
    fn misfit(&mut self, table: usize, column: usize, found: &'static str) {
        let c = &self.schema.tables[table].columns()[column];
        if self.dry {
            let reason = format!(
                "does not fit column {:?} ({}): it is {found}",
                c.name, c.column_type
            );
            self.refuse(table, self.record_at(), &reason);
            return;
        }
        self.misfits.push(Misfit {
            path: self.record_at(),
            column: c.name.clone(),
            column_type: c.column_type,
            found,
        });
    }

    /// The value's pointer from the record.
    fn record_at(&self) -> String {
        format!("{}{}", self.element_at, self.at)
    }

    /// Notes the first change a dry walk finds: at `path`, from the record.
    fn refuse(&mut self, table: usize, path: String, reason: &str) {
        self.refused.get_or_insert_with(|| Refused {
            path,
            table: self.schema.tables[table].name().to_owned(),
            reason: reason.to_owned(),
        });
    }

    /// The child table of `table` for its list at `list_at`, if it has or
    /// may have one.
    fn child(&mut self, table: usize, list_at: &str) -> Option<usize> {
        match self.schema.child_at(table, list_at) {
            Some(child) => Some(child),
            None if self.dry => {
                // Asked at the first element, once the list's pointer was
                // taken from `at`.
                let path = format!("{}{list_at}", self.element_at);
                self.refuse(table, path, "would add a table");
                None
            }
            None => Some(self.schema.child(table, list_at)),
        }
    }
}

fn found_nested(text: &str) -> &'static str {
    if text.starts_with('{') {
        "object"
    } else {
        "list"
    }
}

/// Appends `/` and `key` escaped as RFC 6901 says to `pointer`.
fn push_member(pointer: &mut String, key: &str) {
    pointer.push('/');
    // memchr's two-byte search, not `contains` of a char array: this runs
    // for every member of every record.
    if memchr::memchr2(b'~', b'/', key.as_bytes()).is_some() {
        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
    } else {
        pointer.push_str(key);
    }
}

/// The value at `walk.at` of `table`, `depth` levels below the record (its
/// members are 1).
struct Value<'w, 's, W> {
    walk: &'w mut Walk<'s, W>,
    table: usize,
    depth: usize,
    /// The column at `walk.at`, once `deserialize` looked it up: every
    /// value is looked up once, not again by the visitor.
    column: Option<usize>,
}

impl<'de, W: RowWriter> DeserializeSeed<'de> for Value<'_, '_, W> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(mut self, d: D) -> Result<(), D::Error> {
        let table = &self.walk.schema.tables[self.table];
        self.column = table.column_at(&self.walk.at);
        let json_column = self
            .column
            .is_some_and(|c| table.columns()[c].column_type == ColumnType::Json);
        let past_nesting = self
            .walk
            .schema
            .options
            .max_nesting
            .is_some_and(|levels| self.depth > levels);
        if json_column || past_nesting {
            let raw = <&RawValue as serde::Deserialize>::deserialize(d)?;
            return self
                .walk
                .whole(self.table, raw.get())
                .map_err(serde::de::Error::custom);
        }
        d.deserialize_any(self)
    }
}

impl<W: RowWriter> Value<'_, '_, W> {
    /// Walks the members `ahead` read whole (an object's members named by
    /// numbers, before it showed to be no map keyed by ids) as members
    /// read in place are walked.
    fn walk_ahead<'de>(
        &mut self,
        ahead: Vec<(Cow<'de, str>, &'de RawValue)>,
    ) -> Result<(), serde_json::Error> {
        for (key, value) in ahead {
            let at = self.walk.at.len();
            push_member(&mut self.walk.at, &key);
            let mut de = serde_json::Deserializer::from_str(value.get());
            Value {
                walk: &mut *self.walk,
                table: self.table,
                depth: self.depth + 1,
                column: None,
            }
            .deserialize(&mut de)?;
            self.walk.at.truncate(at);
        }
        Ok(())
    }
}

/// Whether a member's name is a number (`"1234"`): the key of a map keyed
/// by ids.
fn is_number(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

impl<'de, W: RowWriter> Visitor<'de> for Value<'_, '_, W> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.walk
            .scalar_in(self.table, self.column, Scalar::Bool(v));
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.walk.scalar_in(self.table, self.column, Scalar::Int(v));
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        let value = i64::try_from(v).map_or(Scalar::Uint(v), Scalar::Int);
        self.walk.scalar_in(self.table, self.column, value);
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.walk
            .scalar_in(self.table, self.column, Scalar::Float(v));
        Ok(())
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<(), E> {
        self.walk
            .scalar_in(self.table, self.column, Scalar::Str(Cow::Borrowed(v)));
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.walk
            .scalar_in(self.table, self.column, Scalar::Str(Cow::Borrowed(v)));
        Ok(())
    }

    fn visit_map<M: MapAccess<'de>>(mut self, mut map: M) -> Result<(), M::Error> {
        if let Some(column) = self.column {
            // An object where a scalar was: a misfit, kept in the raw
            // record.
            self.walk.misfit(self.table, column, "object");
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        // Members named by numbers are read ahead, whole: an object of
        // more than ID_MAP_MEMBERS of them and nothing else is a map keyed
        // by ids, kept as one json column rather than a column an id.
        // (The record's own object, and a list element's, are rows.)
        let mut numbers_only = !self.walk.at.is_empty();
        let mut ahead: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::new();
        while let Some(JsonKey(key)) = map.next_key::<JsonKey<'de>>()? {
            if numbers_only && is_number(&key) {
                let value = map.next_value::<&'de RawValue>()?;
                ahead.push((key, value));
                continue;
            }
            if numbers_only {
                // A member not named by a number: the object is no map,
                // and the members read ahead are walked as any other.
                numbers_only = false;
                self.walk_ahead(std::mem::take(&mut ahead))
                    .map_err(serde::de::Error::custom)?;
            }
            let at = self.walk.at.len();
            push_member(&mut self.walk.at, &key);
            map.next_value_seed(Value {
                walk: &mut *self.walk,
                table: self.table,
                depth: self.depth + 1,
                column: None,
            })?;
            self.walk.at.truncate(at);
        }
        if ahead.len() > ID_MAP_MEMBERS {
            // The object's text as the record holds it: the record is
            // canonical JSON, and a number needs no escape as a key.
            let mut text = String::from("{");
            for (i, (key, value)) in ahead.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push('"');
                text.push_str(key);
                text.push_str("\":");
                text.push_str(value.get());
            }
            text.push('}');
            return self
                .walk
                .whole(self.table, &text)
                .map_err(serde::de::Error::custom);
        }
        self.walk_ahead(ahead).map_err(serde::de::Error::custom)
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        if let Some(column) = self.column {
            // A list where a scalar was: a misfit, kept in the raw record.
            self.walk.misfit(self.table, column, "list");
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        // The elements' pointers start again from each element.
        let list_at = std::mem::take(&mut self.walk.at);
        // The child table is found (or made) at the first element: an
        // empty list makes none.
        let mut child = Child::Unknown;
        let mut idx = 0;
        while seq
            .next_element_seed(Element {
                walk: &mut *self.walk,
                parent: self.table,
                child: &mut child,
                depth: self.depth,
                list_at: &list_at,
                idx,
            })?
            .is_some()
        {
            idx += 1;
        }
        self.walk.at = list_at;
        Ok(())
    }
}

/// A list's child table, once its first element asked.
enum Child {
    Unknown,
    Table(usize),
    /// A dry walk's refused table: the elements are skipped.
    None,
}

/// The element `idx` of the list at `list_at` of the table `parent`: a row
/// of its child table.
struct Element<'w, 's, 'l, W> {
    walk: &'w mut Walk<'s, W>,
    parent: usize,
    child: &'l mut Child,
    depth: usize,
    list_at: &'l str,
    idx: usize,
}

impl<'de, W: RowWriter> DeserializeSeed<'de> for Element<'_, '_, '_, W> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let walk = self.walk;
        if let Child::Unknown = self.child {
            *self.child = match walk.child(self.parent, self.list_at) {
                Some(table) => Child::Table(table),
                None => Child::None,
            };
        }
        let Child::Table(table) = *self.child else {
            IgnoredAny::deserialize(d)?;
            return Ok(());
        };
        let parent = walk.keys.last().map_or("", String::as_str);
        let key = element_key(parent, self.list_at, self.idx);
        walk.writer.begin_row(
            table,
            RowKeys {
                key: &key,
                parent_key: Some(parent),
                root_key: &walk.keys[0],
                list_idx: Some(self.idx),
            },
        );
        walk.keys.push(key);
        let element_at = walk.element_at.len();
        walk.element_at.push_str(self.list_at);
        walk.element_at.push('/');
        walk.element_at
            .push_str(itoa::Buffer::new().format(self.idx));
        Value {
            walk: &mut *walk,
            table,
            depth: self.depth,
            column: None,
        }
        .deserialize(d)?;
        walk.element_at.truncate(element_at);
        walk.keys.pop();
        walk.writer.end_row(table, &[]);
        Ok(())
    }
}

/// A scalar read back from a value kept whole past the nesting limit.
struct ScalarOf<'a>(Scalar<'a>);

impl<'de> serde::Deserialize<'de> for ScalarOf<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Read;
        impl<'de> Visitor<'de> for Read {
            type Value = ScalarOf<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON scalar")
            }
            fn visit_bool<E>(self, v: bool) -> Result<ScalarOf<'de>, E> {
                Ok(ScalarOf(Scalar::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<ScalarOf<'de>, E> {
                Ok(ScalarOf(Scalar::Int(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<ScalarOf<'de>, E> {
                Ok(ScalarOf(
                    i64::try_from(v).map_or(Scalar::Uint(v), Scalar::Int),
                ))
            }
            fn visit_f64<E>(self, v: f64) -> Result<ScalarOf<'de>, E> {
                Ok(ScalarOf(Scalar::Float(v)))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<ScalarOf<'de>, E> {
                Ok(ScalarOf(Scalar::Str(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<ScalarOf<'de>, E> {
                Ok(ScalarOf(Scalar::Str(Cow::Owned(v.to_owned()))))
            }
        }
        d.deserialize_any(Read)
    }
}

//! What a typed output holds: its tables (the resource's, and one for each
//! list), their columns in order, and the options that shape them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;

use super::column::ColumnType;
use super::loader;
use crate::content::naming::{self, Names};
use crate::content::write::{MergeKeys, Write};
use crate::content::Pointer;

/// The schema's maps, keyed by member pointers from the API: looked up once
/// or twice for every value of every record, so foldhash (fast, and seeded
/// per process against keys chosen to collide) rather than SipHash.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Whether records may add columns to a table that exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Contract {
    /// New members add columns (the default).
    #[default]
    Evolve,
    /// Once the table exists, a record that would add a column or table,
    /// or whose value does not fit its column, is refused whole.
    Freeze,
}

impl FromStr for Contract {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "evolve" => Ok(Contract::Evolve),
            "freeze" => Ok(Contract::Freeze),
            other => Err(format!(
                "unknown contract {other:?}; the contracts are evolve, freeze"
            )),
        }
    }
}

/// How records become columns: hints, the contract, nesting, and the
/// limits of the output.
///
/// ```
/// use etl_core::content::typed::{ColumnType, Contract, SchemaOptions};
///
/// let options = SchemaOptions::postgres()
///     .hint("price", ColumnType::Double)
///     .contract(Contract::Freeze)
///     .max_nesting(2);
/// assert_eq!(options.max_name_bytes, Some(63));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaOptions {
    /// Whether new members add columns.
    pub contract: Contract,
    /// Objects and lists this many levels below the record are kept whole
    /// in one json column (`Some(0)`: every object or list member of the
    /// record); `None`: no limit.
    pub max_nesting: Option<usize>,
    /// Types by column name (as the table names it, `user__id`) of the
    /// resource's table. A hinted column exists from the first load.
    pub hints: BTreeMap<String, ColumnType>,
    /// Most data columns a table takes; further members stay in the raw
    /// record only.
    pub max_columns: usize,
    /// Longest name of a table or column, in bytes; `None`: no limit.
    pub max_name_bytes: Option<usize>,
    /// Most bytes of fixed-width values (booleans, integers, doubles,
    /// times) a row's data columns may take; `None`: no limit.
    pub max_fixed_bytes: Option<usize>,
    /// How a run's records change the tables: a new family is made for
    /// it, and a family made for another refuses to be opened
    /// ([`Schema::write`]).
    pub write: Write,
}

/// Most data columns a table takes (PostgreSQL allows 1,600 in all).
pub const MAX_COLUMNS: usize = 1_000;

/// The fixed-width bytes PostgreSQL's 8 KB page leaves a row's data
/// columns: the page's 8,160 bytes for one tuple, less the tuple header,
/// the null bitmap of 1,600 columns and the loader columns' own.
const POSTGRES_FIXED_BYTES: usize = 8_160 - 24 - 200 - 64;

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            contract: Contract::Evolve,
            max_nesting: None,
            hints: BTreeMap::new(),
            max_columns: MAX_COLUMNS,
            max_name_bytes: None,
            max_fixed_bytes: None,
            write: Write::Append,
        }
    }
}

impl SchemaOptions {
    /// The defaults with PostgreSQL's limits: 63-byte names, and no more
    /// fixed-width columns than a row of one 8 KB page holds.
    pub fn postgres() -> Self {
        SchemaOptions {
            max_name_bytes: Some(naming::POSTGRES_MAX_BYTES),
            max_fixed_bytes: Some(POSTGRES_FIXED_BYTES),
            ..SchemaOptions::default()
        }
    }

    /// Hints the column `name` (as the table names it) to `column_type`.
    pub fn hint(mut self, name: &str, column_type: ColumnType) -> Self {
        self.hints.insert(name.to_owned(), column_type);
        self
    }

    /// Sets the contract.
    pub fn contract(mut self, contract: Contract) -> Self {
        self.contract = contract;
        self
    }

    /// Sets how deep objects and lists are flattened.
    pub fn max_nesting(mut self, levels: usize) -> Self {
        self.max_nesting = Some(levels);
        self
    }

    /// Sets how a run's records change the tables.
    pub fn write(mut self, write: Write) -> Self {
        self.write = write;
        self
    }
}

/// One data column.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Column {
    /// Its name in the table.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    /// The member it holds: a JSON Pointer from the table's element (the
    /// record for the resource's table, the list's element for a child
    /// table; `""` is the element itself, a list of scalars' `value`).
    pub path: String,
    /// The hint that set its type, if any.
    pub hint: Option<ColumnType>,
}

/// One table: the resource's, or a child table of a list.
#[derive(Clone, Debug)]
pub struct Table {
    name: String,
    parent: Option<usize>,
    path: String,
    /// Names this table's tables are made from: the resource's name, then
    /// the members down to this list.
    parts: Vec<String>,
    /// What tells this table apart from every other of the output, for
    /// [`Names`] (the chain of list pointers, each ended by `~`, which no
    /// escaped pointer holds).
    key: String,
    columns: Vec<Column>,
    by_path: Map<String, usize>,
    names: Names,
    fixed_bytes: usize,
    untyped: BTreeSet<String>,
    /// How many untyped members were not listed (past [`UNTYPED_LISTED`]).
    untyped_unlisted: usize,
}

/// Whether a table of `columns` columns taking `fixed` bytes has room for
/// one more of type `column_type`.
fn room_for(
    (columns, fixed): (usize, usize),
    options: &SchemaOptions,
    column_type: ColumnType,
) -> bool {
    columns < options.max_columns
        && options
            .max_fixed_bytes
            .is_none_or(|max| fixed + column_type.fixed_width() <= max)
}

/// Most untyped members a table lists (a map keyed by ids has thousands).
const UNTYPED_LISTED: usize = 100;

impl Table {
    fn new(
        name: String,
        parent: Option<usize>,
        path: &str,
        parts: Vec<String>,
        key: String,
        options: &SchemaOptions,
    ) -> Self {
        Table {
            name,
            parent,
            path: path.to_owned(),
            parts,
            key,
            columns: Vec::new(),
            by_path: Map::default(),
            names: Names::new(loader::ALL, options.max_name_bytes),
            fixed_bytes: 0,
            untyped: BTreeSet::new(),
            untyped_unlisted: 0,
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The index of the table whose rows hold this table's lists; `None`
    /// for the resource's table.
    pub fn parent(&self) -> Option<usize> {
        self.parent
    }

    /// The list this table holds, a JSON Pointer from its parent's element.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The data columns, in the order they were added.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The members that have no column of their own (past the column
    /// limit): their values are in the raw record only. A member of a
    /// flattened object is listed by its object.
    pub fn untyped(&self) -> impl Iterator<Item = &str> {
        self.untyped.iter().map(String::as_str)
    }

    /// How many more untyped members there are than [`Table::untyped`]
    /// lists.
    pub fn untyped_unlisted(&self) -> usize {
        self.untyped_unlisted
    }

    /// The loader columns of this table, in order.
    pub fn loader_columns(&self) -> &'static [&'static str] {
        match self.parent {
            None => loader::RECORD_COLUMNS,
            Some(_) => loader::CHILD_COLUMNS,
        }
    }

    /// The column holding the member at `path`, if any.
    pub(crate) fn column_at(&self, path: &str) -> Option<usize> {
        self.by_path.get(path).copied()
    }

    /// Whether one more column of type `column_type` fits the limits.
    pub(crate) fn has_room(&self, options: &SchemaOptions, column_type: ColumnType) -> bool {
        room_for((self.columns.len(), self.fixed_bytes), options, column_type)
    }

    /// How many more columns of any type surely fit the limits.
    pub(crate) fn sure_room(&self, options: &SchemaOptions) -> usize {
        let by_count = options.max_columns.saturating_sub(self.columns.len());
        let by_bytes = options.max_fixed_bytes.map_or(usize::MAX, |max| {
            max.saturating_sub(self.fixed_bytes) / ColumnType::WIDEST
        });
        by_count.min(by_bytes)
    }

    /// Of the new members `wanted` (each its path and type, nearest the
    /// top first), the paths of those that get no column: those past the
    /// limits once the ones before them have theirs.
    pub(crate) fn past_room<'p>(
        &self,
        options: &SchemaOptions,
        wanted: impl Iterator<Item = (&'p str, ColumnType)>,
    ) -> Vec<&'p str> {
        let mut taken = (self.columns.len(), self.fixed_bytes);
        let mut past = Vec::new();
        for (path, column_type) in wanted {
            if room_for(taken, options, column_type) {
                taken = (taken.0 + 1, taken.1 + column_type.fixed_width());
            } else {
                past.push(path);
            }
        }
        past
    }

    /// Adds the column for the member at `path`, named from its members
    /// (`value` for the element itself).
    pub(crate) fn add_column(
        &mut self,
        path: &str,
        column_type: ColumnType,
        hint: Option<ColumnType>,
    ) -> usize {
        let name = match path {
            "" => self.names.name_at("", &[loader::VALUE_COLUMN]),
            _ => self.names.name_at(path, &pointer_parts(path)),
        }
        .to_owned();
        self.push_column(Column {
            name,
            column_type,
            path: path.to_owned(),
            hint,
        })
    }

    fn push_column(&mut self, column: Column) -> usize {
        let at = self.columns.len();
        self.fixed_bytes += column.column_type.fixed_width();
        self.by_path.insert(column.path.clone(), at);
        self.columns.push(column);
        at
    }

    /// Notes that the member at `path` got no column (the table is full).
    /// Returns whether this is the table's first.
    pub(crate) fn refuse(&mut self, path: &str) -> bool {
        let first = self.untyped.is_empty() && self.untyped_unlisted == 0;
        // A member of a flattened object is listed by its object: a map
        // keyed by ids is one entry, not thousands.
        let listed = match path.rfind('/') {
            Some(0) | None => path,
            Some(at) => &path[..at],
        };
        if !self.untyped.contains(listed) {
            if self.untyped.len() < UNTYPED_LISTED {
                self.untyped.insert(listed.to_owned());
            } else {
                self.untyped_unlisted += 1;
            }
        }
        first
    }
}

/// The tables of one resource in a typed output, and how records become
/// their rows: [`Schema::shred`] walks a record once, adding the columns
/// and tables its members need.
///
/// Table 0 is the resource's; every other is a child table of a list,
/// after its parent. Columns are only ever added, each once, with one type
/// that never changes; a name, once given, is kept.
#[derive(Clone, Debug)]
pub struct Schema {
    pub(crate) options: SchemaOptions,
    pub(crate) tables: Vec<Table>,
    /// Child tables by parent, then list pointer.
    children: Map<usize, Map<String, usize>>,
    table_names: Names,
    /// Whether the output holds the tables already (a frozen contract
    /// holds from then on).
    pub(crate) exists: bool,
    /// Grows with every column or table added.
    generation: u64,
    /// How the tables are written: the options' for a new family, the
    /// stored one for a family read back.
    write: Write,
}

impl Schema {
    /// The schema of a new table for the resource `name` (the table is
    /// named from it as columns are), with the hinted columns.
    ///
    /// `Err` when a hint names a loader column.
    pub fn new(name: &str, options: SchemaOptions) -> Result<Self, String> {
        let mut table_names = Names::new(&[], options.max_name_bytes);
        let table_name = table_names.name_at("", &[name]).to_owned();
        let root = Table::new(
            table_name,
            None,
            "",
            vec![name.to_owned()],
            String::new(),
            &options,
        );
        let mut schema = Schema::with_root(root, table_names, options);
        schema.add_hinted()?;
        Ok(schema)
    }

    fn with_root(root: Table, table_names: Names, options: SchemaOptions) -> Self {
        Schema {
            write: options.write.clone(),
            options,
            tables: vec![root],
            children: Map::default(),
            table_names,
            exists: false,
            generation: 0,
        }
    }

    /// The hinted columns the resource's table lacks, added.
    fn add_hinted(&mut self) -> Result<(), String> {
        let root = &mut self.tables[0];
        for (hinted, &column_type) in &self.options.hints {
            if loader::ALL.contains(&hinted.as_str()) {
                return Err(format!(
                    "the hint {hinted:?} names a loader column; hints name data columns"
                ));
            }
            // A column that exists keeps its type: types never change in
            // place.
            if root.columns.iter().any(|c| c.name == *hinted) {
                continue;
            }
            // A hint names the column its member path spells: `user__id`
            // is the member `id` of `user`.
            let parts: Vec<&str> = hinted.split(naming::PATH_SEPARATOR).collect();
            let path = naming::pointer(&parts);
            root.names.keep(&path, hinted)?;
            root.push_column(Column {
                name: hinted.clone(),
                column_type,
                path,
                hint: Some(column_type),
            });
        }
        Ok(())
    }

    /// The schema as `etl schema --format json` prints it and an output
    /// stores it: `{"tables": [{"name", "parent", "path", "columns":
    /// [{"name", "type", "path", "hint"}], "untyped": [...]}]}`, the
    /// resource's table first. [`Schema::from_json`] reads it back.
    pub fn to_json(&self) -> String {
        let tables = self
            .tables
            .iter()
            .map(|t| TableDoc {
                name: t.name.clone(),
                parent: t.parent.map(|p| self.tables[p].name.clone()),
                path: t.path.clone(),
                columns: t.columns.clone(),
                untyped: t.untyped.iter().cloned().collect(),
            })
            .collect();
        let write = WriteDoc::of(&self.write);
        // Strings and enums alone: serialising cannot fail.
        serde_json::to_string(&SchemaDoc { tables, write }).unwrap_or_default()
    }

    /// A schema an output stored ([`Schema::to_json`]), to go on growing:
    /// every table and column keeps its name, type and path, and the
    /// tables exist ([`Schema::set_exists`]). Hinted columns of `options`
    /// the stored schema lacks are added; a stored column keeps its type
    /// whatever its hint says now.
    ///
    /// ```
    /// use etl_core::content::typed::{RowKeys, Schema, SchemaOptions};
    /// # struct Skip;
    /// # impl etl_core::content::typed::RowWriter for Skip {
    /// #     fn begin_row(&mut self, _: usize, _: RowKeys<'_>) {}
    /// #     fn cell(&mut self, _: usize, _: usize, _: etl_core::content::typed::Cell<'_>) {}
    /// #     fn end_row(&mut self, _: usize, _: &[etl_core::content::typed::Misfit]) {}
    /// # }
    /// let mut first = Schema::new("issues", SchemaOptions::default())?;
    /// first.shred(r#"{"createdAt":"x","tags":[1]}"#, "k", &mut Skip)?;
    /// let mut later = Schema::from_json(&first.to_json(), SchemaOptions::default())?;
    /// // A member that comes out as a held name never takes it.
    /// later.shred(r#"{"created_at":"y"}"#, "k", &mut Skip)?;
    /// let names: Vec<_> = later.tables()[0].columns().iter().map(|c| c.name.as_str()).collect();
    /// assert_eq!(names[0], "created_at");
    /// assert!(names[1].starts_with("created_at_"));
    /// assert_eq!(later.tables()[1].name(), "issues__tags");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_json(text: &str, options: SchemaOptions) -> Result<Self, String> {
        let doc: SchemaDoc = serde_json::from_str(text)
            .map_err(|e| format!("the stored schema does not read: {e}"))?;
        let mut docs = doc.tables.into_iter();
        let root = docs
            .next()
            .ok_or_else(|| "the stored schema has no table".to_owned())?;
        if root.parent.is_some() {
            return Err(format!(
                "the stored schema's first table {:?} has a parent",
                root.name
            ));
        }
        let mut table_names = Names::new(&[], options.max_name_bytes);
        table_names.keep("", &root.name)?;
        let table = Table::new(
            root.name.clone(),
            None,
            "",
            vec![root.name.clone()],
            String::new(),
            &options,
        );
        let mut schema = Schema::with_root(table, table_names, options);
        schema.write = doc
            .write
            .map(WriteDoc::read)
            .transpose()?
            .unwrap_or_default();
        schema.keep_columns(0, root.columns)?;
        schema.tables[0].untyped.extend(root.untyped);
        for table in docs {
            let parent = table.parent.as_deref().unwrap_or_default();
            if schema
                .child_at_name(parent, &table.path, &table.name)?
                .is_some()
            {
                return Err(format!(
                    "the stored table {:?} holds a list held already",
                    table.name
                ));
            }
            let at = schema.keep_table(parent, &table.path, &table.name)?;
            schema.keep_columns(at, table.columns)?;
            schema.tables[at].untyped.extend(table.untyped);
        }
        schema.add_hinted()?;
        schema.exists = true;
        Ok(schema)
    }

    /// Adds what an output holds of the child table `name` (of the table
    /// `parent`, for its list at `path`) that the schema lacks: the table,
    /// and its `columns`, each keeping its name, type and path. Returns
    /// whether anything was added ([`Schema::generation`] grows then).
    ///
    /// For an output whose child tables take their new columns in their
    /// own commits, before the schema it stores lists them (Delta's, where
    /// a table commits alone): what such a table holds is what it holds,
    /// and a schema read back from the stored text takes it in before
    /// making more columns. `Err` when the schema holds a name or path of
    /// it otherwise (another table at the list, or a column's name or
    /// path given to another).
    ///
    /// ```
    /// use etl_core::content::typed::{Column, ColumnType, Schema, SchemaOptions};
    /// let mut schema = Schema::new("issues", SchemaOptions::default())?;
    /// let held = Column {
    ///     name: "name".into(),
    ///     column_type: ColumnType::Text,
    ///     path: "/name".into(),
    ///     hint: None,
    /// };
    /// assert!(schema.keep_child("issues__labels", "issues", "/labels", &[held.clone()])?);
    /// assert!(!schema.keep_child("issues__labels", "issues", "/labels", &[held])?);
    /// assert_eq!(schema.tables()[1].columns()[0].name, "name");
    /// # Ok::<(), String>(())
    /// ```
    pub fn keep_child(
        &mut self,
        name: &str,
        parent: &str,
        path: &str,
        columns: &[Column],
    ) -> Result<bool, String> {
        let before = self.generation;
        let at = match self.child_at_name(parent, path, name)? {
            Some(at) => at,
            None => self.keep_table(parent, path, name)?,
        };
        self.keep_columns(at, columns.iter().cloned())?;
        Ok(self.generation != before)
    }

    /// The child table of the table named `parent` for its list at
    /// `path`, if the schema has one; `Err` when it is named other than
    /// `name`, or there is no table `parent`.
    fn child_at_name(&self, parent: &str, path: &str, name: &str) -> Result<Option<usize>, String> {
        let up = self.table_named(parent, name)?;
        match self.child_at(up, path) {
            Some(at) if self.tables[at].name != name => Err(format!(
                "the list {path} of {parent:?} is table {:?} already, not {name:?}",
                self.tables[at].name
            )),
            found => Ok(found),
        }
    }

    /// The index of the table named `parent`, the parent of `child`.
    fn table_named(&self, parent: &str, child: &str) -> Result<usize, String> {
        self.tables
            .iter()
            .position(|t| t.name == parent)
            .ok_or_else(|| format!("the stored table {child:?} has no parent {parent:?} before it"))
    }

    /// Adds the child table `name` of `parent` for its list at `path`,
    /// which the schema lacks, under that name.
    fn keep_table(&mut self, parent: &str, path: &str, name: &str) -> Result<usize, String> {
        let up = self.table_named(parent, name)?;
        let (key, parts) = self.child_key(up, path);
        self.table_names.keep(&key, name)?;
        Ok(self.add_child(up, path, name.to_owned(), key, parts))
    }

    /// The stored `columns` into table `at`, but for those it holds as
    /// they are.
    fn keep_columns(
        &mut self,
        at: usize,
        columns: impl IntoIterator<Item = Column>,
    ) -> Result<(), String> {
        let table = &mut self.tables[at];
        let mut kept = 0;
        for column in columns {
            if let Some(held) = table.column_at(&column.path).map(|i| &table.columns[i]) {
                if held.name == column.name && held.column_type == column.column_type {
                    continue;
                }
                if held.name == column.name {
                    return Err(format!(
                        "table {:?}: column {:?} is {} already, not {}",
                        table.name, held.name, held.column_type, column.column_type
                    ));
                }
            }
            table
                .names
                .keep(&column.path, &column.name)
                .map_err(|e| format!("table {:?}: {e}", table.name))?;
            table.push_column(column);
            kept += 1;
        }
        self.generation += kept;
        Ok(())
    }

    /// How the tables are written: for a schema read back, as they were
    /// made ([`SchemaOptions::write`] when they were), whatever the options
    /// say now. An output refuses to load a family whose `write` differs
    /// from its run's.
    pub fn write(&self) -> &Write {
        &self.write
    }

    /// The options the schema was made with.
    pub fn options(&self) -> &SchemaOptions {
        &self.options
    }

    /// The tables, the resource's first, every child after its parent.
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// Marks the tables as existing in the output (from now on a frozen
    /// contract refuses records that would change them), or as not yet
    /// shaped by a first load (an output whose tables were made empty:
    /// the first load still adds its columns).
    pub fn set_exists(&mut self, exists: bool) {
        self.exists = exists;
    }

    /// Whether the tables count as existing in the output
    /// ([`Schema::set_exists`]; a schema read back with
    /// [`Schema::from_json`] does).
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// A number that grows whenever a column or table is added: an output
    /// compares it before and after a batch to know it has DDL to run.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The child table of `parent` for its list at `path`, made if new.
    pub(crate) fn child(&mut self, parent: usize, path: &str) -> usize {
        if let Some(at) = self.child_at(parent, path) {
            return at;
        }
        let (key, parts) = self.child_key(parent, path);
        let name = self.table_names.name_at(&key, &parts).to_owned();
        self.add_child(parent, path, name, key, parts)
    }

    /// What names and tells apart the child table of `parent` for its
    /// list at `path`: its key in the table namespace and its name parts.
    fn child_key(&self, parent: usize, path: &str) -> (String, Vec<String>) {
        let up = &self.tables[parent];
        let mut parts = up.parts.clone();
        match path {
            "" => parts.push(loader::VALUE_COLUMN.to_owned()),
            _ => parts.extend(pointer_parts(path)),
        }
        (format!("{}{path}~", up.key), parts)
    }

    fn add_child(
        &mut self,
        parent: usize,
        path: &str,
        name: String,
        key: String,
        parts: Vec<String>,
    ) -> usize {
        let at = self.tables.len();
        let table = Table::new(name, Some(parent), path, parts, key, &self.options);
        self.tables.push(table);
        self.children
            .entry(parent)
            .or_default()
            .insert(path.to_owned(), at);
        self.generation += 1;
        at
    }

    /// The child table of `parent` for its list at `path`, if made.
    pub(crate) fn child_at(&self, parent: usize, path: &str) -> Option<usize> {
        self.children.get(&parent)?.get(path).copied()
    }

    /// Adds a column to `table` (see [`Table::add_column`]).
    pub(crate) fn add_column(
        &mut self,
        table: usize,
        path: &str,
        column_type: ColumnType,
    ) -> usize {
        self.generation += 1;
        self.tables[table].add_column(path, column_type, None)
    }
}

impl fmt::Display for Schema {
    /// Each table, its columns in order with type and path, and what it
    /// keeps untyped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.write != Write::Append {
            writeln!(f, "write {}", self.write.summary())?;
        }
        for table in &self.tables {
            match table.parent {
                None => writeln!(f, "{}", table.name)?,
                Some(p) => writeln!(
                    f,
                    "{} (child of {}, list {})",
                    table.name, self.tables[p].name, table.path
                )?,
            }
            for c in &table.columns {
                let hint = if c.hint.is_some() { " (hinted)" } else { "" };
                writeln!(f, "  {} {} {}{hint}", c.name, c.column_type, c.path)?;
            }
            for u in &table.untyped {
                writeln!(f, "  untyped {u}")?;
            }
        }
        Ok(())
    }
}

/// A stored table ([`Schema::to_json`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct TableDoc {
    name: String,
    parent: Option<String>,
    path: String,
    columns: Vec<Column>,
    #[serde(default)]
    untyped: Vec<String>,
}

/// A stored schema ([`Schema::to_json`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct SchemaDoc {
    tables: Vec<TableDoc>,
    /// Absent for append, as every schema stored before dispositions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write: Option<WriteDoc>,
}

/// A stored disposition other than append.
#[derive(serde::Serialize, serde::Deserialize)]
struct WriteDoc {
    disposition: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    primary_key: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hard_delete: Option<String>,
}

impl WriteDoc {
    fn of(write: &Write) -> Option<WriteDoc> {
        let doc = |disposition: &str| WriteDoc {
            disposition: disposition.to_owned(),
            primary_key: Vec::new(),
            hard_delete: None,
        };
        match write {
            Write::Append => None,
            Write::Merge(keys) => Some(WriteDoc {
                primary_key: keys.primary_key.iter().map(|p| p.to_string()).collect(),
                hard_delete: keys.hard_delete.as_ref().map(Pointer::to_string),
                ..doc("merge")
            }),
            other => Some(doc(other.name())),
        }
    }

    fn read(self) -> Result<Write, String> {
        match self.disposition.as_str() {
            "append" => Ok(Write::Append),
            "replace" => Ok(Write::Replace),
            "merge" => {
                let read = |at: &str| {
                    Pointer::parse(at).map_err(|e| format!("the stored schema's merge keys: {e}"))
                };
                let primary_key = self.primary_key.iter().map(|at| read(at));
                let keys = MergeKeys::new(primary_key.collect::<Result<Vec<_>, _>>()?);
                Ok(Write::Merge(match self.hard_delete {
                    Some(at) => keys.hard_delete(read(&at)?),
                    None => keys,
                }))
            }
            other => Err(format!(
                "the stored schema's write {other:?} is not a disposition"
            )),
        }
    }
}

/// The member names of a JSON Pointer (`/a~1b/c` is `a/b`, `c`).
fn pointer_parts(path: &str) -> Vec<String> {
    Pointer::parse(path)
        .map(|p| p.tokens().to_vec())
        .unwrap_or_default()
}

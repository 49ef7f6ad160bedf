use std::collections::{BTreeMap, HashSet};

use super::*;
use crate::content::naming::{tag, POSTGRES_MAX_BYTES};

/// A row as a test reads it back.
#[derive(Clone, Debug, Default, PartialEq)]
struct Row {
    key: String,
    parent_key: Option<String>,
    root_key: String,
    list_idx: Option<usize>,
    cells: BTreeMap<usize, Cell<'static>>,
    misfits: Vec<Misfit>,
}

/// Rows by table, in the order they ended, plus the order of events.
#[derive(Default)]
struct Rows {
    open: BTreeMap<usize, Row>,
    done: Vec<(usize, Row)>,
    events: Vec<String>,
}

impl RowWriter for Rows {
    fn begin_row(&mut self, table: usize, keys: RowKeys<'_>) {
        assert!(
            !self.open.contains_key(&table),
            "a row of {table} is open already"
        );
        self.events.push(format!("begin {table}"));
        self.open.insert(
            table,
            Row {
                key: keys.key.to_owned(),
                parent_key: keys.parent_key.map(str::to_owned),
                root_key: keys.root_key.to_owned(),
                list_idx: keys.list_idx,
                ..Row::default()
            },
        );
    }

    fn cell(&mut self, table: usize, column: usize, cell: Cell<'_>) {
        let row = self.open.get_mut(&table).expect("a cell outside a row");
        assert!(
            row.cells.insert(column, cell.into_owned()).is_none(),
            "a cell twice"
        );
    }

    fn end_row(&mut self, table: usize, misfits: &[Misfit]) {
        self.events.push(format!("end {table}"));
        let mut row = self.open.remove(&table).expect("an end without a begin");
        row.misfits = misfits.to_vec();
        self.done.push((table, row));
    }
}

impl Rows {
    fn of(&self, table: usize) -> Vec<&Row> {
        self.done
            .iter()
            .filter(|(t, _)| *t == table)
            .map(|(_, r)| r)
            .collect()
    }
}

/// `record` shredded into `schema`, by its own content key.
fn shred(schema: &mut Schema, record: &str) -> Rows {
    let mut rows = Rows::default();
    schema
        .shred(record, &crate::content_id("row", record), &mut rows)
        .expect("shredded");
    assert!(rows.open.is_empty(), "a row left open");
    rows
}

fn new_schema() -> Schema {
    Schema::new("issues", SchemaOptions::postgres()).expect("schema")
}

/// The cell of `table`'s column `name` in `row`.
fn cell<'r>(schema: &Schema, table: usize, row: &'r Row, name: &str) -> Option<&'r Cell<'static>> {
    let at = schema.tables()[table]
        .columns()
        .iter()
        .position(|c| c.name == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    row.cells.get(&at)
}

fn columns(schema: &Schema, table: usize) -> Vec<(String, ColumnType, String)> {
    schema.tables()[table]
        .columns()
        .iter()
        .map(|c| (c.name.clone(), c.column_type, c.path.clone()))
        .collect()
}

#[test]
fn members_become_typed_columns_and_objects_flatten() {
    let mut schema = new_schema();
    let record = r#"{"big":18446744073709551615,"closed":false,"comments":3,"createdAt":"2024-05-01T14:00:00+02:00","gone":null,"ratio":0.5,"title":"It breaks","user":{"login":"ada","site":{"id":7}}}"#;
    let rows = shred(&mut schema, record);
    assert_eq!(
        columns(&schema, 0),
        [
            ("big".into(), ColumnType::Double, "/big".into()),
            ("closed".into(), ColumnType::Bool, "/closed".into()),
            ("comments".into(), ColumnType::Bigint, "/comments".into()),
            (
                "created_at".into(),
                ColumnType::Timestamp,
                "/createdAt".into()
            ),
            ("ratio".into(), ColumnType::Double, "/ratio".into()),
            ("title".into(), ColumnType::Text, "/title".into()),
            ("user__login".into(), ColumnType::Text, "/user/login".into()),
            (
                "user__site__id".into(),
                ColumnType::Bigint,
                "/user/site/id".into()
            ),
        ]
    );
    let row = rows.of(0)[0];
    assert_eq!(row.key, crate::content_id("row", record));
    assert_eq!(row.parent_key, None);
    assert_eq!(
        cell(&schema, 0, row, "created_at"),
        Some(&Cell::Timestamp(1_714_564_800_000_000))
    );
    assert_eq!(
        cell(&schema, 0, row, "big"),
        Some(&Cell::Double(18446744073709551615.0))
    );
    assert_eq!(
        cell(&schema, 0, row, "user__site__id"),
        Some(&Cell::Bigint(7))
    );
    assert!(row.misfits.is_empty());
    assert_eq!(schema.tables().len(), 1, "no list, no child table");
}

#[test]
fn a_member_null_so_far_has_no_column_until_a_value_comes() {
    let mut schema = new_schema();
    shred(&mut schema, r#"{"a":null,"n":1}"#);
    assert_eq!(columns(&schema, 0).len(), 1);
    let before = schema.generation();
    shred(&mut schema, r#"{"a":"x","n":2}"#);
    assert_eq!(columns(&schema, 0)[1].0, "a");
    assert!(schema.generation() > before);
    let again = schema.generation();
    shred(&mut schema, r#"{"a":"y","n":3}"#);
    assert_eq!(schema.generation(), again, "nothing new, nothing added");
}

#[test]
fn lists_become_child_tables_with_keys_written_inside_their_parent() {
    let mut schema = new_schema();
    let record = r#"{"empty":[],"labels":[{"name":"bug","tags":["a","b"]},{"name":"ui"}],"nil":null,"points":[[1,2]],"tags":["x"]}"#;
    let rows = shred(&mut schema, record);
    let names: Vec<_> = schema
        .tables()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "issues",
            "issues__labels",
            "issues__labels__tags",
            "issues__points",
            "issues__points__value",
            "issues__tags"
        ]
    );
    assert_eq!(schema.tables()[2].parent(), Some(1));
    assert_eq!(schema.tables()[4].path(), "");
    let root = rows.of(0)[0];
    let labels = rows.of(1);
    assert_eq!(labels.len(), 2);
    for (i, label) in labels.iter().enumerate() {
        assert_eq!(label.list_idx, Some(i));
        assert_eq!(label.parent_key.as_deref(), Some(root.key.as_str()));
        assert_eq!(label.root_key, root.key);
        assert_eq!(label.key, element_key(&root.key, "/labels", i));
    }
    assert_eq!(
        cell(&schema, 1, labels[1], "name"),
        Some(&Cell::Text("ui".into()))
    );
    let tags = rows.of(2);
    assert_eq!(tags.len(), 2);
    assert_eq!(tags[1].parent_key.as_deref(), Some(labels[0].key.as_str()));
    assert_eq!(tags[1].root_key, root.key);
    assert_eq!(tags[1].key, element_key(&labels[0].key, "/tags", 1));
    assert_eq!(
        columns(&schema, 2),
        [("value".into(), ColumnType::Text, String::new())]
    );
    assert_eq!(
        rows.of(4).len(),
        2,
        "a list in a list is a table of its own"
    );
    assert_eq!(
        cell(&schema, 4, rows.of(4)[1], "value"),
        Some(&Cell::Bigint(2))
    );
    // Each child row begins and ends inside its parent's row.
    assert_eq!(rows.events.first().map(String::as_str), Some("begin 0"));
    assert_eq!(rows.events.last().map(String::as_str), Some("end 0"));
    assert_eq!(
        &rows.events[1..5],
        ["begin 1", "begin 2", "end 2", "begin 2"]
    );
}

#[test]
fn the_same_record_gives_the_same_keys_in_another_schema() {
    let record = r#"{"labels":[{"name":"bug"}]}"#;
    let a = shred(&mut new_schema(), record);
    let b = shred(
        &mut Schema::new("issues", SchemaOptions::default()).unwrap(),
        record,
    );
    assert_eq!(a.of(1)[0].key, b.of(1)[0].key);
}

#[test]
fn misfits_are_null_and_named_and_the_row_still_comes() {
    let mut schema = new_schema();
    shred(
        &mut schema,
        r#"{"count":1,"labels":[{"id":1}],"ratio":1.5,"state":"open","user":{"id":2}}"#,
    );
    let rows = shred(
        &mut schema,
        r#"{"count":"many","labels":[{"id":"x"}],"ratio":2,"state":12.5,"user":{"id":{"deep":1}}}"#,
    );
    let root = rows.of(0)[0];
    assert_eq!(cell(&schema, 0, root, "count"), None);
    assert_eq!(
        cell(&schema, 0, root, "ratio"),
        Some(&Cell::Double(2.0)),
        "an integer fits a double"
    );
    assert_eq!(
        cell(&schema, 0, root, "state"),
        Some(&Cell::Text("12.5".into())),
        "a number fits text as JSON"
    );
    let found: Vec<_> = root
        .misfits
        .iter()
        .map(|m| (m.path.as_str(), m.column.as_str(), m.column_type, m.found))
        .collect();
    assert_eq!(
        found,
        [
            ("/count", "count", ColumnType::Bigint, "string"),
            ("/labels/0/id", "id", ColumnType::Bigint, "string"),
            ("/user/id", "user__id", ColumnType::Bigint, "object"),
        ]
    );
    assert!(
        rows.of(1)[0].misfits.is_empty(),
        "a record's misfits come with its own row"
    );
    assert_eq!(
        schema.tables()[0].columns().len(),
        4,
        "a misfit adds no column"
    );
    let meta = meta_json(&root.misfits).unwrap();
    let read: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(read["misfits"][0]["type"], "bigint");
}

#[test]
fn a_list_where_a_scalar_was_is_a_misfit_and_a_scalar_where_an_object_was_is_a_column() {
    let mut schema = new_schema();
    shred(&mut schema, r#"{"a":1,"user":{"id":1}}"#);
    let rows = shred(&mut schema, r#"{"a":[1,2],"user":"ada"}"#);
    assert_eq!(rows.of(0)[0].misfits[0].found, "list");
    assert_eq!(schema.tables().len(), 1, "no child table for a misfit");
    assert!(columns(&schema, 0).contains(&("user".into(), ColumnType::Text, "/user".into())));
}

#[test]
fn max_nesting_keeps_deeper_values_whole() {
    let record = r#"{"a":{"b":{"c":1},"n":2},"l":[{"m":{"x":1}}],"s":3}"#;
    let mut none = Schema::new("t", SchemaOptions::default().max_nesting(0)).unwrap();
    let rows = shred(&mut none, record);
    assert_eq!(
        columns(&none, 0),
        [
            ("a".into(), ColumnType::Json, "/a".into()),
            ("l".into(), ColumnType::Json, "/l".into()),
            ("s".into(), ColumnType::Bigint, "/s".into()),
        ]
    );
    assert_eq!(
        cell(&none, 0, rows.of(0)[0], "a"),
        Some(&Cell::Json(r#"{"b":{"c":1},"n":2}"#.into()))
    );
    assert_eq!(none.tables().len(), 1);

    let mut one = Schema::new("t", SchemaOptions::default().max_nesting(1)).unwrap();
    let rows = shred(&mut one, record);
    assert_eq!(
        columns(&one, 0),
        [
            ("a__b".into(), ColumnType::Json, "/a/b".into()),
            ("a__n".into(), ColumnType::Bigint, "/a/n".into()),
            ("s".into(), ColumnType::Bigint, "/s".into()),
        ]
    );
    assert_eq!(
        columns(&one, 1),
        [("m".into(), ColumnType::Json, "/m".into())]
    );
    assert_eq!(
        cell(&one, 1, rows.of(1)[0], "m"),
        Some(&Cell::Json(r#"{"x":1}"#.into()))
    );
}

#[test]
fn hints_make_columns_before_their_values_and_set_their_type() {
    let options = SchemaOptions::postgres()
        .hint("price", ColumnType::Double)
        .hint("payload", ColumnType::Json)
        .hint("user__id", ColumnType::Text)
        .hint("due", ColumnType::Date)
        .hint("never", ColumnType::Bigint);
    let mut schema = Schema::new("orders", options).unwrap();
    assert_eq!(
        schema.tables()[0].columns().len(),
        5,
        "hinted columns exist before any value"
    );
    let rows = shred(
        &mut schema,
        r#"{"due":"2024-01-02","payload":{"a":[1,{"b":2}]},"price":3,"user":{"id":42}}"#,
    );
    let row = rows.of(0)[0];
    assert_eq!(cell(&schema, 0, row, "price"), Some(&Cell::Double(3.0)));
    assert_eq!(
        cell(&schema, 0, row, "payload"),
        Some(&Cell::Json(r#"{"a":[1,{"b":2}]}"#.into()))
    );
    assert_eq!(
        cell(&schema, 0, row, "user__id"),
        Some(&Cell::Text("42".into()))
    );
    assert_eq!(cell(&schema, 0, row, "due"), Some(&Cell::Date(19_724)));
    assert_eq!(cell(&schema, 0, row, "never"), None);
    assert_eq!(
        schema.tables().len(),
        1,
        "a json hint keeps its lists whole"
    );
    assert!(schema.tables()[0]
        .columns()
        .iter()
        .all(|c| c.hint == Some(c.column_type)));
}

#[test]
fn a_hint_on_a_loader_column_or_an_unknown_name_is_an_error() {
    let e = Schema::new(
        "t",
        SchemaOptions::default().hint("_etl_key", ColumnType::Text),
    )
    .unwrap_err();
    assert!(e.contains("_etl_key") && e.contains("loader column"), "{e}");
    let e = "integer".parse::<ColumnType>().unwrap_err().to_string();
    assert!(e.contains("\"integer\"") && e.contains("bigint"), "{e}");
    assert!("melt"
        .parse::<Contract>()
        .unwrap_err()
        .contains("evolve, freeze"));
}

#[test]
fn freeze_refuses_what_would_change_the_table_and_writes_nothing_of_it() {
    let mut schema = Schema::new("t", SchemaOptions::default().contract(Contract::Freeze)).unwrap();
    shred(&mut schema, r#"{"n":1,"tags":["a"],"objs":[{"x":1}]}"#);
    shred(&mut schema, r#"{"fresh":1}"#); // not made yet: it still grows
    schema.set_exists(true);
    let columns_before = columns(&schema, 0);
    for (record, path, reason) in [
        (r#"{"n":1,"new":true}"#, "/new", "would add a column"),
        (
            r#"{"n":"x"}"#,
            "/n",
            "does not fit column \"n\" (bigint): it is string",
        ),
        (r#"{"n":1,"more":[1]}"#, "/more", "would add a table"),
        (
            r#"{"tags":[{"a":1}]}"#,
            "/tags/0",
            "does not fit column \"value\" (text): it is object",
        ),
        // Inside a child row, the pointer from the record.
        (
            r#"{"objs":[{"x":1},{"x":2,"inner":[1]}]}"#,
            "/objs/1/inner",
            "would add a table",
        ),
        (
            r#"{"objs":[{"x":1},{"x":"s"}]}"#,
            "/objs/1/x",
            "does not fit column \"x\" (bigint): it is string",
        ),
    ] {
        let mut rows = Rows::default();
        let err = schema.shred(record, "k", &mut rows).unwrap_err();
        let ShredError::Refused(refused) = err else {
            panic!("{err}")
        };
        assert_eq!(
            (refused.path.as_str(), refused.reason.as_str()),
            (path, reason)
        );
        assert!(rows.events.is_empty(), "a refused record is not written");
    }
    assert_eq!(columns(&schema, 0), columns_before);
    let rows = shred(&mut schema, r#"{"n":2,"tags":["b","c"]}"#);
    assert_eq!(rows.of(1).len(), 2, "a record that fits loads");
}

#[test]
fn a_map_of_thousands_of_ids_is_one_json_column_beside_the_records_own_members() {
    let mut map = serde_json::Map::new();
    for id in 0..2_000 {
        map.insert(id.to_string(), serde_json::json!({"n": id}));
    }
    let record = serde_json::json!({"by_id": map, "id": 1, "updated_at": "2026-01-01T00:00:00Z"})
        .to_string();
    let mut schema = new_schema();
    let rows = shred(&mut schema, &record);
    assert_eq!(
        columns(&schema, 0),
        [
            ("by_id".into(), ColumnType::Json, "/by_id".into()),
            ("id".into(), ColumnType::Bigint, "/id".into()),
            (
                "updated_at".into(),
                ColumnType::Timestamp,
                "/updated_at".into()
            ),
        ]
    );
    // The object's text as the record holds it.
    let Some(Cell::Json(text)) = cell(&schema, 0, rows.of(0)[0], "by_id") else {
        panic!("no json cell")
    };
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(text.as_ref(), record["by_id"].to_string());
    // A later small map at the same place goes to that column too.
    let rows = shred(&mut schema, r#"{"by_id":{"7":{"n":7}},"id":2}"#);
    assert_eq!(schema.tables()[0].columns().len(), 3);
    assert!(matches!(
        cell(&schema, 0, rows.of(0)[0], "by_id"),
        Some(Cell::Json(t)) if t == r#"{"7":{"n":7}}"#
    ));
}

#[test]
fn an_object_of_few_numbered_members_or_of_names_too_is_flattened() {
    let few: serde_json::Map<_, _> = (0..=ID_MAP_MEMBERS)
        .map(|i| (i.to_string(), serde_json::Value::from(i)))
        .collect();
    assert_eq!(few.len(), ID_MAP_MEMBERS + 1);
    let mut mixed = few.clone();
    mixed.insert("total".into(), serde_json::Value::from(3));
    let mut few = few;
    few.remove("0");
    let mut schema = new_schema();
    let rows = shred(
        &mut schema,
        &serde_json::json!({"few": few, "mixed": mixed}).to_string(),
    );
    let names: Vec<String> = columns(&schema, 0).into_iter().map(|c| c.0).collect();
    assert_eq!(
        names.len(),
        ID_MAP_MEMBERS + ID_MAP_MEMBERS + 2,
        "{names:?}"
    );
    assert!(names.contains(&"few___1".to_owned()), "{names:?}");
    assert!(names.contains(&"mixed__total".to_owned()), "{names:?}");
    assert!(matches!(
        cell(&schema, 0, rows.of(0)[0], "mixed___0"),
        Some(Cell::Bigint(0))
    ));
}

#[test]
fn when_the_columns_run_short_the_records_top_level_members_get_theirs_first() {
    let mut wide = serde_json::Map::new();
    for i in 0..5_000 {
        wide.insert(format!("k{i}"), serde_json::Value::from(i));
    }
    // `a_wide` comes first in canonical order, its members before `id`.
    let record = serde_json::json!({
        "a_wide": wide, "id": 1, "title": "t", "updated_at": "2026-01-01T00:00:00Z",
        "user": {"login": "ada"}
    })
    .to_string();
    let mut schema = new_schema();
    let rows = shred(&mut schema, &record);
    let table = &schema.tables()[0];
    // 8 bytes a bigint: PostgreSQL's page fits fewer than 1,000.
    assert!(
        table.columns().len() < MAX_COLUMNS && table.columns().len() > 900,
        "{}",
        table.columns().len()
    );
    let names: Vec<&str> = table.columns().iter().map(|c| c.name.as_str()).collect();
    for top in ["id", "title", "updated_at", "user__login"] {
        assert!(names.contains(&top), "no {top}");
    }
    assert_eq!(table.untyped().collect::<Vec<_>>(), ["/a_wide"]);
    assert_eq!(rows.of(0)[0].cells.len(), table.columns().len());
    assert!(matches!(
        cell(&schema, 0, rows.of(0)[0], "id"),
        Some(Cell::Bigint(1))
    ));

    let mut unlimited = Schema::new("t", SchemaOptions::default()).unwrap();
    shred(&mut unlimited, &record);
    let names: Vec<String> = columns(&unlimited, 0).into_iter().map(|c| c.0).collect();
    assert_eq!(names.len(), MAX_COLUMNS);
    assert!(
        names.contains(&"id".to_owned()),
        "id first at 1,000 columns too"
    );
}

#[test]
fn hostile_member_names_each_get_a_distinct_valid_name() {
    let long = "k".repeat(10_000);
    let keys = [
        "\"quoted\"",
        "semi;colon",
        "drop table x; --",
        "select",
        "user",
        "order",
        "",
        "naïve",
        "日本",
        "Name",
        "name",
        "NAME",
        "createdAt",
        "created_at",
        "a__b",
        "_etl_key",
        "_etl_row",
        "value",
        "~/",
        long.as_str(),
    ];
    let mut object = serde_json::Map::new();
    for (i, key) in keys.iter().enumerate() {
        object.insert((*key).to_owned(), serde_json::Value::from(i));
    }
    object.insert("a".into(), serde_json::json!({"b": "nested"}));
    let record = serde_json::Value::Object(object).to_string();
    let mut schema = new_schema();
    let rows = shred(&mut schema, &record);
    let table = &schema.tables()[0];
    assert_eq!(
        table.columns().len(),
        keys.len() + 1,
        "every member has a column"
    );
    let mut seen = HashSet::new();
    for column in table.columns() {
        assert!(column.name.len() <= POSTGRES_MAX_BYTES, "{}", column.name);
        assert!(
            column.name.is_ascii() && !column.name.is_empty(),
            "{:?}",
            column.name
        );
        assert!(
            !loader::ALL.contains(&column.name.as_str()),
            "{}",
            column.name
        );
        assert!(
            seen.insert(column.name.clone()),
            "two members on {}",
            column.name
        );
    }
    assert_eq!(rows.of(0)[0].cells.len(), keys.len() + 1);
    let named = |path: &str| {
        table
            .columns()
            .iter()
            .find(|c| c.path == path)
            .unwrap()
            .name
            .clone()
    };
    assert_eq!(named("/select"), "select");
    assert_eq!(named("/_etl_key"), format!("_etl_key_{}", tag("/_etl_key")));
    assert_eq!(
        named("/"),
        format!("_{}", tag("/")),
        "an empty key is named by its hash"
    );
}

#[test]
fn a_record_that_is_not_an_object_is_one_value_and_bad_text_is_an_error() {
    let mut schema = new_schema();
    let rows = shred(&mut schema, "7");
    assert_eq!(
        columns(&schema, 0),
        [("value".into(), ColumnType::Bigint, String::new())]
    );
    assert_eq!(rows.of(0)[0].cells.len(), 1);
    for bad in ["{\"a\":", "{} {}", ""] {
        let e = schema.shred(bad, "k", &mut Rows::default()).unwrap_err();
        assert!(matches!(e, ShredError::Json(_)), "{bad:?}: {e}");
    }
}

#[test]
fn the_printed_schema_lists_tables_columns_and_untyped_members() {
    let mut schema = Schema::new(
        "issues",
        SchemaOptions::default().hint("score", ColumnType::Double),
    )
    .unwrap();
    shred(&mut schema, r#"{"labels":[{"name":"bug"}],"n":1}"#);
    let text = schema.to_string();
    assert!(
        text.starts_with("issues\n  score double /score (hinted)\n  n bigint /n\n"),
        "{text}"
    );
    assert!(
        text.contains("issues__labels (child of issues, list /labels)\n  name text /name\n"),
        "{text}"
    );
}

#[test]
fn a_stored_schema_reads_back_and_grows_as_the_one_that_stored_it() {
    let first_records = [
        r#"{"createdAt":"2024-05-01T12:00:00Z","labels":[{"name":"bug","tags":["x"]}],"n":1,"user":{"id":1}}"#,
        r#"{"by_id":{"1":1,"2":2},"n":"misfit"}"#,
    ];
    let later_records = [
        r#"{"created_at":"clash","labels":[{"name":"ui","Name":"twin"}],"n":2,"points":[[1]]}"#,
        r#"{"user":{"id":2,"login":"ada"}}"#,
    ];
    let options = SchemaOptions::postgres().hint("score", ColumnType::Double);
    let mut kept = Schema::new("issues", options.clone()).unwrap();
    for r in first_records {
        shred(&mut kept, r);
    }
    let stored = kept.to_json();
    let mut read = Schema::from_json(&stored, options).unwrap();
    assert_eq!(read.to_json(), stored, "reads back as stored");
    for r in later_records {
        let a = shred(&mut kept, r);
        let b = shred(&mut read, r);
        assert_eq!(a.done, b.done, "the same rows from both");
    }
    assert_eq!(read.to_json(), kept.to_json(), "both grew the same");

    let doc: serde_json::Value = serde_json::from_str(&kept.to_json()).unwrap();
    assert_eq!(doc["tables"][0]["name"], "issues");
    assert_eq!(doc["tables"][0]["parent"], serde_json::Value::Null);
    assert_eq!(
        doc["tables"][0]["columns"][0],
        serde_json::json!({"name": "score", "type": "double", "path": "/score", "hint": "double"})
    );
    assert_eq!(doc["tables"][1]["parent"], "issues");
    assert_eq!(doc["tables"][1]["path"], "/labels");
}

#[test]
fn hints_added_later_join_a_stored_schema_and_stored_types_stay() {
    let mut first = new_schema();
    shred(&mut first, r#"{"n":1}"#);
    let options = SchemaOptions::postgres()
        .hint("n", ColumnType::Text)
        .hint("due", ColumnType::Date);
    let read = Schema::from_json(&first.to_json(), options).unwrap();
    assert_eq!(
        columns(&read, 0),
        [
            ("n".into(), ColumnType::Bigint, "/n".into()),
            ("due".into(), ColumnType::Date, "/due".into()),
        ]
    );
}

#[test]
fn a_broken_stored_schema_is_an_error_naming_what_is_wrong() {
    let options = SchemaOptions::default;
    for (text, says) in [
        ("{", "does not read"),
        (r#"{"tables":[]}"#, "no table"),
        (
            r#"{"tables":[{"name":"a","parent":"b","path":"","columns":[]}]}"#,
            "has a parent",
        ),
        (
            r#"{"tables":[{"name":"a","parent":null,"path":"","columns":[]},{"name":"a__x","parent":"zz","path":"/x","columns":[]}]}"#,
            "no parent",
        ),
        (
            r#"{"tables":[{"name":"a","parent":null,"path":"","columns":[{"name":"c","type":"text","path":"/c","hint":null},{"name":"c","type":"text","path":"/d","hint":null}]}]}"#,
            "names /c already",
        ),
        (
            r#"{"tables":[{"name":"a","parent":null,"path":"","columns":[{"name":"c","type":"int","path":"/c","hint":null}]}]}"#,
            "unknown column type",
        ),
    ] {
        let e = Schema::from_json(text, options()).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            "(2024-05-01T12:00:00Z|[a-zA-Z _]{0,8})".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-zA-Z_~/ ]{0,6}", inner, 0..5)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any records: every row whole, every name distinct in its table
        /// and valid, every non-null scalar of the record either in a
        /// column or named as a misfit.
        #[test]
        fn any_records_shred_into_consistent_tables(records in prop::collection::vec(json(), 1..4)) {
            let mut schema = new_schema();
            for record in &records {
                let text = record.to_string();
                let mut rows = Rows::default();
                schema.shred(&text, "k", &mut rows).unwrap();
                prop_assert!(rows.open.is_empty());
                let cells: usize = rows.done.iter().map(|(_, r)| r.cells.len()).sum();
                let misfits = rows.of(0)[0].misfits.len();
                let untyped = schema.tables().iter().map(|t| t.untyped().count()).sum::<usize>();
                prop_assert!(cells <= scalars(record));
                if misfits == 0 && untyped == 0 {
                    prop_assert_eq!(cells, scalars(record));
                }
            }
            for table in schema.tables() {
                let mut seen = HashSet::new();
                for c in table.columns() {
                    prop_assert!(c.name.len() <= POSTGRES_MAX_BYTES && !c.name.is_empty());
                    prop_assert!(seen.insert(c.name.clone()));
                }
            }
        }
    }

    fn scalars(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::Null => 0,
            serde_json::Value::Array(a) => a.iter().map(scalars).sum(),
            serde_json::Value::Object(o) => o.values().map(scalars).sum(),
            _ => 1,
        }
    }
}

#[test]
fn the_write_disposition_is_stored_and_read_back_and_append_leaves_the_text_as_it_was() {
    use crate::content::write::{MergeKeys, Write};
    let append = Schema::new("issues", SchemaOptions::default()).unwrap();
    assert!(!append.to_json().contains("write"), "{}", append.to_json());
    let merge = Write::Merge(
        MergeKeys::new(["/number".parse().unwrap()]).hard_delete("/deleted".parse().unwrap()),
    );
    let made = Schema::new("issues", SchemaOptions::default().write(merge.clone())).unwrap();
    // Read back with other options, the stored disposition holds.
    let read = Schema::from_json(&made.to_json(), SchemaOptions::default()).unwrap();
    assert_eq!(read.write(), &merge);
    assert_eq!(
        read.to_string().lines().next(),
        Some("write merge (primary key /number, hard delete /deleted)")
    );
    let old = Schema::from_json(&append.to_json(), SchemaOptions::default().write(merge)).unwrap();
    assert_eq!(
        old.write(),
        &Write::Append,
        "a schema stored before dispositions"
    );
    let replace = Schema::new("x", SchemaOptions::default().write(Write::Replace)).unwrap();
    let read = Schema::from_json(&replace.to_json(), SchemaOptions::default()).unwrap();
    assert_eq!(read.write(), &Write::Replace);
    assert!(Schema::from_json(
        &replace.to_json().replace("replace", "replase"),
        SchemaOptions::default()
    )
    .unwrap_err()
    .contains("\"replase\" is not a disposition"));
}

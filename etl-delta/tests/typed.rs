//! Typed Delta tables (`DeltaSink::open_typed`), read back by the Python
//! `deltalake` package with its own SQL engine, as an analyst reads them.
//! The tests need `ETL_DELTA_PYTHON` (a Python with deltalake; `.ci/delta`
//! makes one) and are ignored without `--include-ignored`.

use etl_core::content::typed::{ColumnType, Contract, SchemaOptions};
use etl_core::content::write::{MergeKeys, Write};
use etl_core::{Record, Sink};
use etl_delta::DeltaSink;
use serde_json::{json, Value};
use std::path::Path;

const NEEDS_PYTHON: &str = "needs ETL_DELTA_PYTHON: a Python with deltalake";

/// A JSON record with an `id` and an `updated_at`.
#[derive(serde::Serialize, Clone)]
#[serde(transparent)]
struct Doc(Value);

impl Record for Doc {
    fn record_id(&self) -> Option<String> {
        self.0.get("id").map(|id| id.to_string())
    }

    fn updated_at(&self) -> Option<String> {
        self.0
            .get("updated_at")
            .and_then(|t| t.as_str())
            .map(str::to_owned)
    }
}

fn docs(values: &[Value]) -> Vec<Doc> {
    values.iter().cloned().map(Doc).collect()
}

/// The tables' schemas (`[[name, type], ...]` each) and the rows of `sql`
/// over them (registered as `t0`, `t1`, ...), as Python `deltalake` reads
/// them.
const QUERY: &str = r#"
import json, sys
from deltalake import DeltaTable, QueryBuilder
sql, paths = sys.argv[1], sys.argv[2:]
qb = QueryBuilder()
schemas = []
for i, path in enumerate(paths):
    dt = DeltaTable(path)
    schemas.append([[f.name, str(f.type)] for f in dt.schema().fields])
    qb.register(f"t{i}", dt)
t = qb.execute(sql).read_all()
names = t.column_names
columns = [t.column(n).to_pylist() for n in names]
rows = [[str(c[r]) if c[r] is not None and not isinstance(c[r], (bool, int, float, str)) else c[r]
         for c in columns] for r in range(t.num_rows)]
print(json.dumps({"schemas": schemas, "rows": rows}))
"#;

#[derive(Debug, serde::Deserialize)]
struct Read {
    schemas: Vec<Vec<(String, String)>>,
    rows: Vec<Vec<Value>>,
}

fn query(sql: &str, tables: &[&Path]) -> Read {
    let python = std::env::var("ETL_DELTA_PYTHON").expect(NEEDS_PYTHON);
    let out = std::process::Command::new(python)
        .args(["-c", QUERY, sql])
        .args(tables)
        .output()
        .expect("python starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The type Python reads for `column` of a table's schema.
fn type_of<'a>(schema: &'a [(String, String)], column: &str) -> &'a str {
    schema
        .iter()
        .find(|(name, _)| name == column)
        .map(|(_, t)| t.as_str())
        .unwrap_or_else(|| panic!("no column {column} in {schema:?}"))
}

fn at(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_owned()
}

fn issues() -> Vec<Doc> {
    docs(&[
        json!({"id": 1, "title": "It breaks", "updated_at": "2026-11-01T10:00:00+02:00",
               "user": {"login": "ann", "site": {"admin": false}}, "score": 1.5, "count": 3,
               "labels": [{"name": "bug", "color": "red"}, {"name": "ui"}],
               "assignees": ["bob", "cy"]}),
        json!({"id": 2, "title": "Slow", "updated_at": "2026-11-02T10:00:00Z",
               "user": {"login": "bo"}, "count": "many", "labels": []}),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn members_become_typed_columns_and_lists_child_tables_beside_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "gh");
    let sink = DeltaSink::open_typed::<Doc>(&root, "issues", SchemaOptions::default())
        .await
        .unwrap();
    assert!(sink.is_typed());
    assert_eq!(sink.load(&issues()).await.unwrap(), 2);
    assert_eq!(
        sink.load(&issues()).await.unwrap(),
        0,
        "a re-run adds nothing"
    );

    let labels = dir.path().join("gh__labels");
    let assignees = dir.path().join("gh__assignees");
    assert!(
        labels.join("_delta_log").is_dir(),
        "the child table is beside its parent"
    );
    assert!(!dir.path().join("gh").join("gh__labels").exists());

    let read = query(
        "SELECT t0.title, t1.name, t1.color FROM t0 JOIN t1 ON t1._etl_parent_key = t0._etl_key \
         ORDER BY t1._etl_list_idx",
        &[Path::new(&root), &labels],
    );
    assert_eq!(
        read.rows,
        [
            vec![json!("It breaks"), json!("bug"), json!("red")],
            vec![json!("It breaks"), json!("ui"), Value::Null]
        ]
    );
    let (issue, label) = (&read.schemas[0], &read.schemas[1]);
    let names: Vec<&str> = issue.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..6],
        [
            "_etl_key",
            "_etl_id",
            "_etl_updated_at",
            "_etl_loaded_at",
            "_etl_row",
            "_etl_meta"
        ]
    );
    assert!(
        !names.contains(&"labels"),
        "a list is a child table: {names:?}"
    );
    assert_eq!(type_of(issue, "user__login"), "PrimitiveType(\"string\")");
    assert_eq!(
        type_of(issue, "user__site__admin"),
        "PrimitiveType(\"boolean\")"
    );
    assert_eq!(type_of(issue, "count"), "PrimitiveType(\"long\")");
    assert_eq!(type_of(issue, "score"), "PrimitiveType(\"double\")");
    assert_eq!(
        type_of(issue, "_etl_updated_at"),
        "PrimitiveType(\"timestamp\")"
    );
    assert_eq!(type_of(label, "_etl_list_idx"), "PrimitiveType(\"long\")");

    // A misfit is null in its column and named in `_etl_meta`; the update
    // time is read at its offset, in UTC.
    let read = query(
        "SELECT _etl_id, count, _etl_meta, CAST(_etl_updated_at AS VARCHAR) FROM t0 ORDER BY _etl_id",
        &[Path::new(&root)],
    );
    assert_eq!(read.rows[0][1], json!(3));
    assert!(
        read.rows[0][3]
            .as_str()
            .unwrap()
            .starts_with("2026-11-01T08:00:00"),
        "{read:?}"
    );
    assert_eq!(read.rows[1][1], Value::Null);
    let meta: Value = serde_json::from_str(read.rows[1][2].as_str().unwrap()).unwrap();
    assert_eq!(
        meta,
        json!({"misfits": [{"path": "/count", "column": "count", "type": "bigint", "found": "string"}]})
    );
    // A list of scalars has a `value` column.
    let read = query("SELECT value FROM t0 ORDER BY _etl_list_idx", &[&assignees]);
    assert_eq!(read.rows, [vec![json!("bob")], vec![json!("cy")]]);

    // The cursor reads the typed table's update time.
    assert_eq!(
        sink.newest_updated_at().await.unwrap().as_deref(),
        Some("2026-11-02T10:00:00Z")
    );
    assert_eq!(sink.count().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn the_schema_evolves_across_runs_and_a_frozen_one_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "issues");
    let options = SchemaOptions::default().hint("closed_at", ColumnType::Timestamp);
    let sink = DeltaSink::open_typed::<Doc>(&root, "issues", options.clone())
        .await
        .unwrap();
    sink.load(&issues()).await.unwrap();
    drop(sink);

    // A later run, another process's sink: a new member in the records and
    // in their list elements.
    let sink = DeltaSink::open_typed::<Doc>(&root, "issues", options.clone())
        .await
        .unwrap();
    let later = docs(&[
        json!({"id": 3, "title": "New", "milestone": {"due": "2026-12-24"},
                               "labels": [{"name": "p1", "description": "urgent"}]}),
    ]);
    assert_eq!(sink.load(&later).await.unwrap(), 1);
    let labels = dir.path().join("issues__labels");
    let read = query("SELECT name, description FROM t0 ORDER BY name", &[&labels]);
    assert_eq!(
        read.rows,
        [
            vec![json!("bug"), Value::Null],
            vec![json!("p1"), json!("urgent")],
            vec![json!("ui"), Value::Null]
        ]
    );
    let read = query(
        "SELECT milestone__due, closed_at FROM t0 WHERE _etl_id = '3'",
        &[Path::new(&root)],
    );
    assert_eq!(read.rows, [vec![json!("2026-12-24"), Value::Null]]);
    assert_eq!(
        type_of(&read.schemas[0], "closed_at"),
        "PrimitiveType(\"timestamp\")",
        "a hinted column exists while all its values are null"
    );
    let schema = sink.schema().await.unwrap();
    let mut names: Vec<&str> = schema.tables().iter().map(|t| t.name()).collect();
    names.sort();
    assert_eq!(names, ["issues", "issues__assignees", "issues__labels"]);

    // Frozen: a record that would add a column is a reject naming it; the
    // others load.
    let frozen = DeltaSink::open_typed::<Doc>(&root, "issues", options.contract(Contract::Freeze))
        .await
        .unwrap();
    let batch = docs(&[
        json!({"id": 4, "title": "Fits"}),
        json!({"id": 5, "title": "Does not", "surprise": true}),
    ]);
    assert_eq!(frozen.load(&batch).await.unwrap(), 1);
    assert_eq!(frozen.rejects_count().await.unwrap(), 1);
    let rejects = dir.path().join("issues_rejects");
    let read = query("SELECT error FROM t0", &[&rejects]);
    assert!(
        read.rows[0][0].as_str().unwrap().contains("surprise"),
        "{read:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_json_shape_table_keeps_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "old");
    let old = DeltaSink::open_as::<Doc>(&root).await.unwrap();
    old.load(&issues()).await.unwrap();
    drop(old);
    let sink = DeltaSink::open_typed::<Doc>(&root, "old", SchemaOptions::default())
        .await
        .unwrap();
    assert!(!sink.is_typed());
    assert!(sink.schema().await.is_none());
    let more = docs(&[json!({"id": 9, "title": "Still JSON"})]);
    assert_eq!(sink.load(&more).await.unwrap(), 1);
    let read = query("SELECT count(*) FROM t0", &[Path::new(&root)]);
    assert_eq!(read.rows, [vec![json!(3)]]);
    assert!(read.schemas[0].iter().any(|(n, _)| n == "content_key"));
    assert!(!dir.path().join("old__labels").exists());
}

/// A family's counts over its table `t0` and child table `t1`: records,
/// distinct record keys, child rows, distinct child keys, and child rows
/// whose record is not in the table.
const COUNTS: &str = "(SELECT count(*) FROM t0) AS records, \
    (SELECT count(DISTINCT _etl_key) FROM t0) AS record_keys, \
    (SELECT count(*) FROM t1) AS children, (SELECT count(DISTINCT _etl_key) FROM t1) AS child_keys, \
    (SELECT count(*) FROM t1 WHERE _etl_parent_key NOT IN (SELECT _etl_key FROM t0)) AS orphans";

/// Records of writer `w`: 60 with members of its own at the top and in
/// the list elements (ids shared with the other writers), then 20 that
/// every writer loads.
fn writer_docs(w: usize) -> Vec<Doc> {
    let own = (0..60).map(|i| {
        let id = (i + w * 20) % 100;
        json!({"id": id, format!("w{w}_{}", i / 20): i,
               "labels": [{"name": format!("l{id}"), format!("x{w}"): true}]})
    });
    let shared = (0..20).map(|i| json!({"id": 1000 + i, "labels": [{"name": "s"}]}));
    own.chain(shared).map(Doc).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn four_writers_adding_columns_at_once_keep_each_row_and_column_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "many");
    let tasks: Vec<_> = (0..4)
        .map(|w| {
            let root = root.clone();
            tokio::spawn(async move {
                let sink = DeltaSink::open_typed::<Doc>(&root, "many", SchemaOptions::default())
                    .await
                    .unwrap();
                let mut new = 0;
                for batch in writer_docs(w).chunks(10) {
                    new += sink.load(batch).await.unwrap();
                }
                new
            })
        })
        .collect();
    let mut new = 0;
    for task in tasks {
        new += task.await.unwrap();
    }
    // Writer w's own records are distinct by their members: 4 x 60, and
    // the 20 every writer loads, each once.
    assert_eq!(new, 260);
    let labels = dir.path().join("many__labels");
    let read = query(&format!("SELECT {COUNTS}"), &[Path::new(&root), &labels]);
    assert_eq!(
        read.rows,
        [vec![
            json!(260),
            json!(260),
            json!(260),
            json!(260),
            json!(0)
        ]]
    );
    let (table, child) = (&read.schemas[0], &read.schemas[1]);
    for w in 0..4 {
        for part in 0..3 {
            assert_eq!(
                type_of(table, &format!("w{w}_{part}")),
                "PrimitiveType(\"long\")"
            );
        }
        assert_eq!(
            type_of(child, &format!("x{w}")),
            "PrimitiveType(\"boolean\")"
        );
    }
    let mut names: Vec<&str> = table.iter().map(|(n, _)| n.as_str()).collect();
    let all = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all, "a column twice");
}

/// Records of the kill test: each adds a column of its batch's own to the
/// resource's table (`b<batch>`) and to its child table (`c<batch>`), so
/// the loader grows both in every load, and has `id % 3 + 1` labels.
fn killable(n: i64) -> Doc {
    let labels: Vec<_> = (0..n % 3 + 1)
        .map(|l| json!({"name": format!("l{l}"), "rank": l, format!("c{}", n / 20): l}))
        .collect();
    Doc(json!({"id": n, format!("b{}", n / 20): n, "labels": labels}))
}

const KILLABLE: i64 = 2_000;

/// The loader the kill test starts as a process of its own (this test
/// binary, run again with `ETL_DELTA_KILL_TABLE`); a no-op otherwise.
#[tokio::test]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn kill_child_loader() {
    let Ok(root) = std::env::var("ETL_DELTA_KILL_TABLE") else {
        return;
    };
    let sink = DeltaSink::open_typed::<Doc>(&root, "killed", SchemaOptions::default())
        .await
        .unwrap();
    let records: Vec<Doc> = (0..KILLABLE).map(killable).collect();
    for batch in records.chunks(20) {
        sink.load(batch).await.unwrap();
    }
}

/// What must hold of the family after any kill, as Python reads it: each
/// record once, each child row once, and every record with all its child
/// rows. Child tables commit first, so a kill may leave child rows whose
/// record is not in yet (the re-run adds it, and not them again): `done`
/// says none may be left. Returns how many records.
fn whole(root: &Path, done: bool) -> i64 {
    let labels = root.with_file_name("killed__labels");
    if !labels.join("_delta_log").is_dir() {
        return 0;
    }
    let read = query(
        &format!(
            "SELECT {COUNTS}, (SELECT count(*) FROM t0 WHERE \
             (SELECT count(*) FROM t1 WHERE t1._etl_parent_key = t0._etl_key) \
             <> CAST(t0._etl_id AS BIGINT) % 3 + 1) AS short"
        ),
        &[root, &labels],
    );
    let n: Vec<i64> = read.rows[0].iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(n[0], n[1], "a record twice: {n:?}");
    assert_eq!(n[2], n[3], "a child row twice: {n:?}");
    if done {
        assert_eq!(n[4], 0, "a child row without its record: {n:?}");
    }
    assert_eq!(n[5], 0, "a record without all its child rows: {n:?}");
    n[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn kill_9_mid_load_then_a_rerun_leaves_each_record_and_child_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("killed");
    let mut seen = 0;
    for round in 0..3 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill_child_loader",
                "--include-ignored",
                "--nocapture",
            ])
            .env("ETL_DELTA_KILL_TABLE", &root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Killed once it has committed more than the round before: mid-load,
        // at a moment of the machine's choosing.
        let log = root.join("_delta_log");
        loop {
            let commits = std::fs::read_dir(&log).map_or(0, |d| d.count());
            if commits > 5 + 10 * (round + 1) || child.try_wait().unwrap().is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        seen = whole(&root, false);
    }
    assert!(seen < KILLABLE, "a kill came before the end ({seen} rows)");
    let sink =
        DeltaSink::open_typed::<Doc>(root.to_str().unwrap(), "killed", SchemaOptions::default())
            .await
            .unwrap();
    let records: Vec<Doc> = (0..KILLABLE).map(killable).collect();
    let mut new = 0;
    for batch in records.chunks(200) {
        new += sink.load(batch).await.unwrap();
    }
    assert_eq!(
        new as i64,
        KILLABLE - seen,
        "the re-run writes what the killed runs did not"
    );
    assert_eq!(whole(&root, true), KILLABLE);
    // Whatever the kills cut, no version holds columns without rows, and
    // the schema text lists each child column the table holds, once.
    let labels = root.with_file_name("killed__labels");
    for table in [&root, &labels] {
        for (version, actions) in log_actions(table.to_str().unwrap()).iter().enumerate() {
            assert!(
                version == 0 || actions.iter().any(|a| a == "add"),
                "{table:?} version {version}: {actions:?}"
            );
        }
    }
    let stored = DeltaSink::stored_schema(root.to_str().unwrap(), SchemaOptions::default())
        .await
        .unwrap()
        .unwrap();
    let mut listed: Vec<&str> = stored.tables()[1]
        .columns()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let read = query("SELECT * FROM t0 LIMIT 0", &[&labels]);
    let mut held: Vec<&str> = read.schemas[0]
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !n.starts_with("_etl_"))
        .collect();
    listed.sort_unstable();
    held.sort_unstable();
    assert_eq!(listed, held);
    assert_eq!(held.len(), 2 + KILLABLE as usize / 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn batches_prepared_before_another_writer_grew_the_family_load_each_row_and_column_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "issues");
    let options = SchemaOptions::default();
    let ours = DeltaSink::open_typed::<Doc>(&root, "issues", options.clone())
        .await
        .unwrap();
    let theirs = DeltaSink::open_typed::<Doc>(&root, "issues", options.clone())
        .await
        .unwrap();
    let first = docs(&[json!({"id": 1, "x": 1, "tags": ["a"]})]);
    let second = docs(&[json!({"id": 2, "x": 2, "z": "zed", "tags": ["b", "c"]})]);
    let dropped = docs(&[json!({"id": 3, "w": true})]);
    let after = docs(&[json!({"id": 4, "x": 4, "v": 1.5})]);
    let again = docs(&[json!({"id": 4, "x": 4, "v": 1.5}), json!({"id": 5, "x": 5})]);
    // Two batches made ahead, the second on the columns the first adds;
    // then another writer adds a column of its own before either is
    // written.
    let first = Sink::prepare(&ours, &first, None).await.unwrap();
    let second = Sink::prepare(&ours, &second, None).await.unwrap();
    theirs
        .load(&docs(&[json!({"id": 9, "y": "why"})]))
        .await
        .unwrap();
    assert_eq!(first.write().await.unwrap().new, 1);
    assert_eq!(second.write().await.unwrap().new, 1);
    // A batch made and dropped unwritten adds nothing; the batch made
    // behind it on the columns it would have added still loads, and one
    // holding a record already there loads the rest.
    let dropped = Sink::prepare(&ours, &dropped, None).await.unwrap();
    let after = Sink::prepare(&ours, &after, None).await.unwrap();
    drop(dropped);
    assert_eq!(after.write().await.unwrap().new, 1);
    assert_eq!(ours.load(&again).await.unwrap(), 1);

    let read = query(
        "SELECT _etl_id, x, y, z, v FROM t0 ORDER BY _etl_id",
        &[Path::new(&root)],
    );
    assert_eq!(
        read.rows,
        [
            vec![json!("1"), json!(1), Value::Null, Value::Null, Value::Null],
            vec![json!("2"), json!(2), Value::Null, json!("zed"), Value::Null],
            vec![json!("4"), json!(4), Value::Null, Value::Null, json!(1.5)],
            vec![json!("5"), json!(5), Value::Null, Value::Null, Value::Null],
            vec![
                json!("9"),
                Value::Null,
                json!("why"),
                Value::Null,
                Value::Null
            ],
        ]
    );
    let names: Vec<&str> = read.schemas[0].iter().map(|(n, _)| n.as_str()).collect();
    assert!(!names.contains(&"w"), "{names:?}");
    let tags = dir.path().join("issues__tags");
    let read = query("SELECT count(*) FROM t0", &[&tags]);
    assert_eq!(read.rows, [vec![json!(3)]], "each child row once");
}

/// The actions of each commit in the log of the table at `root`, by
/// version (`"metaData"`, `"add"`, `"txn"`, ...).
fn log_actions(root: &str) -> Vec<Vec<String>> {
    let log = Path::new(root).join("_delta_log");
    let mut versions: Vec<u64> = std::fs::read_dir(&log)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    versions
        .iter()
        .map(|v| {
            std::fs::read_to_string(log.join(format!("{v:020}.json")))
                .unwrap()
                .lines()
                .map(|l| {
                    let action: Value = serde_json::from_str(l).unwrap();
                    action.as_object().unwrap().keys().next().unwrap().clone()
                })
                .collect()
        })
        .collect()
}

/// A load that adds columns to the resource's table commits them with its
/// rows, one version. A writer whose schema another writer grew since it
/// made its batch loses the commit, makes the batch again on the winner's
/// schema and commits the union with its rows: every column once, every
/// row once, and no version with columns but no rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn columns_go_in_with_their_rows_and_a_writer_behind_the_schema_makes_its_batch_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "grow");
    let open = || DeltaSink::open_typed::<Doc>(&root, "grow", SchemaOptions::default());
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    assert_eq!(a.load(&docs(&[json!({"id": 1, "a": 1})])).await.unwrap(), 1);
    // `b` still knows the table as it was before `a`'s load.
    assert_eq!(
        b.load(&docs(&[json!({"id": 2, "b": "two"})]))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        a.load(&docs(&[json!({"id": 3, "a": 3, "c": true})]))
            .await
            .unwrap(),
        1
    );
    let log = log_actions(&root);
    assert_eq!(log.len(), 4, "created, then a version a load: {log:?}");
    for (version, actions) in log.iter().enumerate().skip(1) {
        let has = |a: &str| actions.iter().any(|x| x == a);
        assert!(
            has("metaData") && has("add"),
            "version {version}: {actions:?}"
        );
    }
    let read = query(
        "SELECT count(*), count(DISTINCT _etl_key), count(a), count(b), count(c) FROM t0",
        &[Path::new(&root)],
    );
    assert_eq!(
        read.rows,
        [vec![json!(3), json!(3), json!(2), json!(1), json!(1)]]
    );
    let schema = &read.schemas[0];
    assert_eq!(type_of(schema, "a"), "PrimitiveType(\"long\")");
    assert_eq!(type_of(schema, "b"), "PrimitiveType(\"string\")");
    assert_eq!(type_of(schema, "c"), "PrimitiveType(\"boolean\")");
    // The schema every writer reads back names every column once.
    let stored = DeltaSink::stored_schema(&root, SchemaOptions::default())
        .await
        .unwrap()
        .unwrap();
    let names: Vec<&str> = stored.tables()[0]
        .columns()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["a", "id", "b", "c"]);
}

/// A load that adds columns to a child table commits them with its rows,
/// and every other table of the family takes one commit too: no version
/// of either table holds columns without rows. A writer behind it, whose
/// record would give another member the same column name, loses its
/// commit to the child table, makes its batch again on the columns the
/// table holds, and names its member apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_load_that_grows_a_child_table_commits_once_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "grow");
    let tags = dir.path().join("grow__tags");
    let open = || DeltaSink::open_typed::<Doc>(&root, "grow", SchemaOptions::default());
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    let one = |record: Value| docs(&[record]);
    let first = one(json!({"id": 1, "tags": [{"x": 1}]}));
    assert_eq!(a.load(&first).await.unwrap(), 1);
    let grows = one(json!({"id": 2, "tags": [{"x": 2, "y": 2.5}]}));
    assert_eq!(a.load(&grows).await.unwrap(), 1);
    // `b` still knows the family as it was before `a`'s loads.
    let behind = one(json!({"id": 3, "tags": [{"X": "ex"}]}));
    assert_eq!(b.load(&behind).await.unwrap(), 1);
    for table in [root.as_str(), tags.to_str().unwrap()] {
        let log = log_actions(table);
        assert_eq!(log.len(), 4, "created, then a version a load: {log:?}");
        for (version, actions) in log.iter().enumerate().skip(1) {
            assert!(
                actions.iter().any(|a| a == "add"),
                "{table} version {version}: {actions:?}"
            );
        }
    }
    let read = query(
        "SELECT t0._etl_id, t1.* FROM t0 JOIN t1 ON t1._etl_parent_key = t0._etl_key ORDER BY t0._etl_id",
        &[Path::new(&root), &tags],
    );
    let schema = &read.schemas[1];
    assert_eq!(type_of(schema, "x"), "PrimitiveType(\"long\")");
    assert_eq!(type_of(schema, "y"), "PrimitiveType(\"double\")");
    let own: Vec<&str> = schema
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| n.starts_with("x_"))
        .collect();
    assert_eq!(own.len(), 1, "`X` named apart from `x`: {schema:?}");
    assert_eq!(type_of(schema, own[0]), "PrimitiveType(\"string\")");
    assert_eq!(read.rows.len(), 3, "each child row once: {:?}", read.rows);
}

/// An issue version: its `id`, `title`, time (seconds past 2026-01-01) and
/// labels; `deleted` marks a deletion.
fn version(id: i64, title: &str, secs: u64, labels: &[&str], deleted: bool) -> Doc {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_767_225_600 + secs);
    let labels: Vec<Value> = labels.iter().map(|l| json!({"name": l})).collect();
    Doc(
        json!({"id": id, "title": title, "deleted": deleted, "labels": labels,
               "updated_at": humantime::format_rfc3339(at).to_string()}),
    )
}

fn merging() -> SchemaOptions {
    let keys = MergeKeys::new(["/id".parse().unwrap()]).hard_delete("/deleted".parse().unwrap());
    SchemaOptions::default().write(Write::Merge(keys))
}

/// Rows as (id, text) pairs.
type Pairs = Vec<(i64, String)>;

/// Each current row's id and title, and its labels as a join reads them.
fn merged(root: &Path, labels: &Path) -> (Pairs, Pairs) {
    let rows = query("SELECT id, title FROM t0 ORDER BY id", &[root])
        .rows
        .into_iter()
        .map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_owned()))
        .collect();
    let joined = query(
        "SELECT t0.id, t1.name FROM t0 JOIN t1 ON t1._etl_parent_key = t0._etl_key ORDER BY t0.id, t1._etl_list_idx",
        &[root, labels],
    )
    .rows
    .into_iter()
    .map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_owned()))
    .collect();
    (rows, joined)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_merge_keeps_each_keys_newest_version_and_deletions_stay_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "gh");
    let labels = dir.path().join("gh__labels");
    let sink = DeltaSink::open_typed::<Doc>(&root, "issues", merging())
        .await
        .unwrap();
    let write = |page: Vec<Doc>| {
        let sink = &sink;
        async move {
            sink.prepare(&page, None)
                .await
                .unwrap()
                .write()
                .await
                .unwrap()
        }
    };
    let first = write(vec![
        version(1, "one", 10, &["a"], false),
        version(2, "two", 10, &[], false),
        version(3, "three", 10, &[], false),
    ])
    .await;
    assert_eq!(first.new, 3);
    // An update with new labels, an older version (seen), and two versions
    // of one key in one page: the newer wins, wherever it is in the page.
    let second = write(vec![
        version(1, "one, edited", 20, &["b", "c"], false),
        version(2, "two, older", 5, &[], false),
        version(3, "three, newest", 40, &[], false),
        version(3, "three, newer", 30, &[], false),
    ])
    .await;
    assert_eq!(second.new, 2);
    let (rows, joined) = merged(Path::new(&root), &labels);
    assert_eq!(
        rows,
        [
            (1, "one, edited".into()),
            (2, "two".into()),
            (3, "three, newest".into())
        ]
    );
    assert_eq!(
        joined,
        [(1, "b".into()), (1, "c".into())],
        "the old version's labels join no row"
    );

    // A deletion takes the row out; an older version read later does not
    // bring it back; a newer one does.
    let deletion = write(vec![version(2, "two", 50, &[], true)]).await;
    assert_eq!((deletion.new, deletion.deleted), (0, 1));
    assert_eq!(sink.count().await.unwrap(), 2);
    // The incremental cursor counts the deletion, newer than every row.
    assert_eq!(
        sink.newest_updated_at().await.unwrap().as_deref(),
        Some("2026-01-01T00:00:50Z")
    );
    let stale = write(vec![version(2, "two, stale", 45, &[], false)]).await;
    assert_eq!(stale.new, 0);
    let (rows, _) = merged(Path::new(&root), &labels);
    assert_eq!(
        rows,
        [(1, "one, edited".into()), (3, "three, newest".into())]
    );

    // Another writer, opened afresh, replays the first page and brings key
    // 2 back with a newer version: what it remembers is the table's.
    let again = DeltaSink::open_typed::<Doc>(&root, "issues", merging())
        .await
        .unwrap();
    let replay = vec![
        version(1, "one", 10, &["a"], false),
        version(2, "two", 10, &[], false),
        version(2, "two, made again", 60, &["z"], false),
    ];
    assert_eq!(again.load(&replay).await.unwrap(), 1);
    let (rows, joined) = merged(Path::new(&root), &labels);
    assert_eq!(
        rows,
        [
            (1, "one, edited".into()),
            (2, "two, made again".into()),
            (3, "three, newest".into())
        ]
    );
    assert_eq!(joined, [(1, "b".into()), (1, "c".into()), (2, "z".into())]);
}

/// Every label the child table holds, sorted.
fn all_labels(labels: &Path) -> Vec<String> {
    query("SELECT name FROM t0 ORDER BY name", &[labels])
        .rows
        .into_iter()
        .map(|r| r[0].as_str().unwrap().to_owned())
        .collect()
}

/// The child rows of a version replaced by a strictly newer one, or deleted
/// by a strictly newer deletion, leave their table after the commit that
/// took the version out (by the time the sink settles), by whichever writer
/// made it; those of a version replaced at an equal time stay (it may come
/// back, read again later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn the_child_rows_of_a_version_replaced_by_a_newer_one_leave_their_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "gh");
    let labels = dir.path().join("gh__labels");
    let sink = DeltaSink::open_typed::<Doc>(&root, "issues", merging())
        .await
        .unwrap();
    let first = [
        version(1, "one", 10, &["a", "b"], false),
        version(2, "two", 10, &["x"], false),
        version(3, "three", 10, &["p"], false),
    ];
    assert_eq!(sink.load(&first).await.unwrap(), 3);
    let second = [
        version(1, "one, edited", 20, &["c"], false),
        version(2, "two", 30, &[], true),
        version(3, "three, again", 10, &["q"], false),
    ];
    sink.load(&second).await.unwrap();
    // The child rows go beside the next load; settled, they are gone.
    sink.settle().await;
    let (rows, joined) = merged(Path::new(&root), &labels);
    assert_eq!(
        rows,
        [(1, "one, edited".into()), (3, "three, again".into())]
    );
    assert_eq!(joined, [(1, "c".into()), (3, "q".into())]);
    assert_eq!(
        all_labels(&labels),
        ["c", "p", "q"],
        "a and b (replaced by a newer version) and x (deleted) are gone; p (an equal time) stays"
    );

    // Another writer's newer version: its commit takes the rows out too.
    let other = DeltaSink::open_typed::<Doc>(&root, "issues", merging())
        .await
        .unwrap();
    let third = [version(1, "one, again", 40, &["d", "e"], false)];
    assert_eq!(other.load(&third).await.unwrap(), 1);
    other.settle().await;
    assert_eq!(all_labels(&labels), ["d", "e", "p", "q"]);
    let (_, joined) = merged(Path::new(&root), &labels);
    assert_eq!(joined, [(1, "d".into()), (1, "e".into()), (3, "q".into())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn four_writers_merging_one_table_at_once_keep_each_keys_newest_version_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "gh");
    let labels = dir.path().join("gh__labels");
    let mut writers = Vec::new();
    for w in 0..4u64 {
        let root = root.clone();
        writers.push(tokio::spawn(async move {
            let sink = DeltaSink::open_typed::<Doc>(&root, "issues", merging())
                .await
                .unwrap();
            // Every writer holds a version of every key; writer w's is
            // the newest for keys k with k % 4 == w.
            for page in 0..5i64 {
                let docs: Vec<Doc> = (page * 8..page * 8 + 8)
                    .map(|k| {
                        let newest = (k as u64) % 4 == w;
                        let secs = if newest { 100 } else { 10 + w };
                        let title = format!("{k} by {w}");
                        version(k, &title, secs, &[&title], false)
                    })
                    .collect();
                sink.load(&docs).await.unwrap();
            }
            sink.settle().await;
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let (rows, joined) = merged(Path::new(&root), &labels);
    let want: Vec<(i64, String)> = (0..40).map(|k| (k, format!("{k} by {}", k % 4))).collect();
    assert_eq!(rows, want, "each key once, its newest version");
    assert_eq!(joined, want, "each row with its own version's child row");
    // Every other version was older than its key's newest: its child row,
    // put in by a writer that lost or replaced since, is gone by the next
    // run (a writer whose removal failed left a note of what goes, which
    // opening the family reads).
    let next = DeltaSink::open_typed::<Doc>(&root, "issues", merging())
        .await
        .unwrap();
    next.settle().await;
    assert_eq!(all_labels(&labels).len(), 40);
}

/// A version put in again by the same writer (at an equal update time, read
/// later, after another version of its key): its row joins its own child
/// rows once, not the ones it wrote the first time as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_version_merged_again_by_its_writer_joins_its_child_rows_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = at(dir.path(), "gh");
    let labels = dir.path().join("gh__labels");
    let sink = DeltaSink::open_typed::<Doc>(&root, "issues", merging())
        .await
        .unwrap();
    let first = version(1, "first", 10, &["a", "b"], false);
    for page in [
        first.clone(),
        version(1, "second", 10, &["c"], false),
        first,
    ] {
        assert_eq!(sink.load(&[page]).await.unwrap(), 1);
    }
    let (rows, joined) = merged(Path::new(&root), &labels);
    assert_eq!(rows, [(1, "first".into())]);
    assert_eq!(joined, [(1, "a".into()), (1, "b".into())]);
}

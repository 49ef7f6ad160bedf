//! `etl schema PIPELINE.toml --out OUT`: the typed tables an output holds
//! for the file's resources, as the loads made them: each table's columns
//! in order with their type, JSON path and hint, and the members kept
//! untyped. Read only: nothing is made.

use clap::{Args as ClapArgs, ValueEnum};
use etl_core::content::typed::{Schema, Table};
use etl_core::content::write::Write;
use std::fmt::Write as _;
use std::path::PathBuf;

use super::{report_error, LogFormat, EXIT_FAILED, EXIT_USAGE};
use crate::pipeline::output::{Destination, Target};
use crate::pipeline::{Output, Pipeline};
use crate::rest::JsonRecord;

/// `etl schema`'s arguments.
#[derive(Debug, ClapArgs)]
pub struct SchemaArgs {
    /// The pipeline file (TOML) the output was loaded from.
    pub pipeline: PathBuf,
    /// The output: a PostgreSQL URL (postgres://user@host/db) or delta:PATH
    /// (with many resources, the tables PATH/NAME).
    #[arg(long)]
    pub out: String,
    /// The table a PostgreSQL output was loaded into [default: NAME].
    #[arg(long)]
    pub pg_table: Option<String>,
    /// Only this resource's tables (again for more) [default: every
    /// resource].
    #[arg(long = "resource", value_name = "NAME")]
    pub resources: Vec<String>,
    /// How to print: `text` for a person, `json` for a program
    /// (`{"tables": [{"name", "parent", "path", "columns": [{"name",
    /// "type", "path", "hint"}], "untyped", "write"}]}`; `write`, on a
    /// resource's own table only: `{"disposition", "primary_key",
    /// "hard_delete"}`).
    #[arg(long, value_enum, default_value_t = SchemaFormat::Text)]
    pub format: SchemaFormat,
}

/// How `etl schema` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum SchemaFormat {
    /// A block a table, columns aligned.
    #[default]
    Text,
    /// One JSON document, every table of every resource.
    Json,
}

/// `etl schema`: prints the schema; the exit status. An invalid file or
/// output, or a resource the file lacks, is exit 2; an output that cannot
/// be read, 1. A resource with no typed table there is said on stderr.
pub async fn run(args: &SchemaArgs) -> u8 {
    let fail = |code: u8, message: &str| {
        report_error(LogFormat::Text, code, message);
        code
    };
    let pipeline = match Pipeline::load(&args.pipeline) {
        Ok(pipeline) => pipeline,
        Err(e) => return fail(EXIT_USAGE, &e.to_string()),
    };
    let output = match Output::parse(&args.out) {
        Ok(output) => match &args.pg_table {
            Some(table) => output.table(table.clone()),
            None => output,
        },
        Err(e) => return fail(EXIT_USAGE, &e.to_string()),
    };
    let names: Vec<&str> = pipeline
        .resources()
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    if let Some(unknown) = args.resources.iter().find(|r| !names.contains(&r.as_str())) {
        return fail(
            EXIT_USAGE,
            &format!(
                "--resource {unknown}: the file has no such resource (it has {})",
                names.join(", ")
            ),
        );
    }
    let mut schemas = Vec::new();
    for resource in pipeline.resources() {
        if !args.resources.is_empty() && !args.resources.contains(&resource.name) {
            continue;
        }
        let target = Target::new(&resource.name, pipeline.is_many()).shaped(&resource.shape);
        match Destination::<JsonRecord>::schema(&output, target).await {
            Ok(Some(schema)) => schemas.push(schema),
            Ok(None) => eprintln!(
                "{}: no typed table in {} (not loaded yet, or in the JSON shape)",
                resource.name, args.out
            ),
            Err(e) => {
                let code = match e {
                    etl_core::EtlError::InvalidInput(_) => EXIT_USAGE,
                    _ => EXIT_FAILED,
                };
                return fail(code, &format!("{}: {e}", resource.name));
            }
        }
    }
    match args.format {
        SchemaFormat::Text => print!("{}", text(&schemas)),
        SchemaFormat::Json => println!("{}", json(&schemas)),
    }
    0
}

/// The schemas for a person: a block a table.
pub fn text(schemas: &[Schema]) -> String {
    let mut out = String::new();
    for schema in schemas {
        for table in schema.tables() {
            table_text(&mut out, schema, table);
        }
    }
    out
}

fn table_text(out: &mut String, schema: &Schema, table: &Table) {
    match table.parent() {
        None => {
            let _ = writeln!(out, "table {}", table.name());
            let _ = writeln!(out, "  write: {}", schema.write().summary());
        }
        Some(parent) => {
            let _ = writeln!(
                out,
                "table {} (child of {}: the list at {})",
                table.name(),
                schema.tables()[parent].name(),
                table.path()
            );
        }
    }
    let _ = writeln!(
        out,
        "  loader columns: {}",
        table.loader_columns().join(", ")
    );
    let width = table
        .columns()
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for column in table.columns() {
        let hint = column
            .hint
            .map(|h| format!("  hint {h}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:width$}  {:9}  {}{hint}",
            column.name,
            column.column_type.as_str(),
            if column.path.is_empty() {
                "(the element)"
            } else {
                &column.path
            },
        );
    }
    let untyped: Vec<&str> = table.untyped().collect();
    if !untyped.is_empty() {
        let more = match table.untyped_unlisted() {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        let _ = writeln!(out, "  untyped: {}{more}", untyped.join(", "));
    }
}

/// The schemas for a program: one `{"tables": [...]}`, every resource's
/// tables in order, as `Schema::to_json` writes each; the resource's own
/// table (the first of its family) also says how it is written:
/// `"write": {"disposition", "primary_key", "hard_delete"}` (a merge's
/// keys as JSON Pointers; `[]` and `null` for the other dispositions).
pub fn json(schemas: &[Schema]) -> String {
    let mut tables: Vec<serde_json::Value> = Vec::new();
    for schema in schemas {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&schema.to_json()) else {
            continue;
        };
        let Some(family) = doc.get("tables").and_then(|t| t.as_array()) else {
            continue;
        };
        for (at, table) in family.iter().enumerate() {
            let mut table = table.clone();
            if let (0, Some(fields)) = (at, table.as_object_mut()) {
                fields.insert("write".into(), write_json(schema.write()));
            }
            tables.push(table);
        }
    }
    serde_json::json!({ "tables": tables }).to_string()
}

/// How a table is written, for a program.
fn write_json(write: &Write) -> serde_json::Value {
    let (primary_key, hard_delete) = match write {
        Write::Merge(keys) => (
            keys.primary_key.iter().map(|p| p.as_str()).collect(),
            keys.hard_delete.as_ref().map(|p| p.as_str()),
        ),
        _ => (Vec::new(), None),
    };
    serde_json::json!({
        "disposition": write.name(),
        "primary_key": primary_key,
        "hard_delete": hard_delete,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etl_core::content::typed::{Cell, Misfit, RowKeys, RowWriter, SchemaOptions};
    use etl_core::content::write::MergeKeys;

    struct Skip;
    impl RowWriter for Skip {
        fn begin_row(&mut self, _: usize, _: RowKeys<'_>) {}
        fn cell(&mut self, _: usize, _: usize, _: Cell<'_>) {}
        fn end_row(&mut self, _: usize, _: &[Misfit]) {}
    }

    fn schema(name: &str, write: Write) -> Schema {
        let mut options = SchemaOptions::default();
        options.write = write;
        let mut schema = Schema::new(name, options).unwrap();
        schema
            .shred(
                r#"{"org":"x","number":3,"deleted":false,"labels":[{"name":"bug"}]}"#,
                "k",
                &mut Skip,
            )
            .unwrap();
        schema
    }

    #[test]
    fn the_json_form_says_how_each_resources_table_is_written() {
        let merge = Write::Merge(
            MergeKeys::new(["/org".parse().unwrap(), "/number".parse().unwrap()])
                .hard_delete("/deleted".parse().unwrap()),
        );
        let printed = json(&[schema("issues", merge), schema("events", Write::Append)]);
        let doc: serde_json::Value = serde_json::from_str(&printed).unwrap();
        let tables = doc["tables"].as_array().unwrap();
        let names: Vec<&str> = tables.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["issues", "issues__labels", "events", "events__labels"]
        );
        assert_eq!(
            tables[0]["write"],
            serde_json::json!({"disposition": "merge", "primary_key": ["/org", "/number"], "hard_delete": "/deleted"})
        );
        assert_eq!(
            tables[2]["write"],
            serde_json::json!({"disposition": "append", "primary_key": [], "hard_delete": null})
        );
        // A child table follows its resource's table: no disposition of its own.
        assert!(tables[1].get("write").is_none() && tables[3].get("write").is_none());
    }
}

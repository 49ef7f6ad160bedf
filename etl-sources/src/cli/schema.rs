//! `etl schema PIPELINE.toml --out OUT`: the typed tables an output holds
//! for the file's resources, as the loads made them: each table's columns
//! in order with their type, JSON path and hint, and the members kept
//! untyped. Read only: nothing is made.

use clap::{Args as ClapArgs, ValueEnum};
use etl_core::content::typed::{Schema, Table};
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
    /// "type", "path", "hint"}], "untyped"}]}`).
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
/// tables in order, as `Schema::to_json` writes each.
pub fn json(schemas: &[Schema]) -> String {
    let tables: Vec<serde_json::Value> = schemas
        .iter()
        .filter_map(|s| serde_json::from_str::<serde_json::Value>(&s.to_json()).ok())
        .filter_map(|doc| doc.get("tables").and_then(|t| t.as_array()).cloned())
        .flatten()
        .collect();
    serde_json::json!({ "tables": tables }).to_string()
}

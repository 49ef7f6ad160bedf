//! `shape`, `[columns]` and `[schema]`: the shape of a resource's table in
//! a database output, read from the pipeline file into a [`TableShape`].

use std::collections::BTreeMap;
use toml::Spanned;

use etl_core::content::typed::{loader, ColumnType, Contract, SchemaOptions};
use etl_core::content::write::Write;

use super::error::{closest, ConfigError, Locator, Problems};
use super::keys::{Keys, Table};

/// The shape of a resource's table in a database output (PostgreSQL,
/// Delta). A table that exists keeps the shape it was made in, whatever
/// this says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableShape {
    /// One JSON column `row` beside the key, id and times (`shape =
    /// "json"`, and every table made before typed tables).
    Json,
    /// Each member a typed column, each list a child table, as these
    /// options say: a new table's shape unless the file says
    /// `shape = "json"`.
    Typed(SchemaOptions),
}

impl TableShape {
    /// The typed options of the shape; for the JSON shape, those
    /// `shape = "typed"` starts from (what reads a stored typed schema).
    pub fn schema_options(&self) -> SchemaOptions {
        match self {
            TableShape::Typed(options) => options.clone(),
            TableShape::Json => SchemaOptions::postgres(),
        }
    }

    /// The shape of a table written by `write`: a typed table is made for
    /// how it is written, and keeps it ([`SchemaOptions::write`]).
    pub(crate) fn written(self, write: &Write) -> Self {
        match self {
            TableShape::Typed(options) => TableShape::Typed(options.write(write.clone())),
            json => json,
        }
    }
}

/// The shapes `shape` takes.
const SHAPES: &[&str] = &["json", "typed"];

/// The type names `[columns]` takes.
fn type_names() -> Vec<&'static str> {
    ColumnType::ALL.iter().map(|t| t.as_str()).collect()
}

/// The table shape the keys say: `typed` unless `shape = "json"`;
/// `[columns]` and `[schema]` shape a typed table. Every problem is named
/// with its line, all at once.
pub(crate) fn table_shape(
    shape: Option<&Spanned<String>>,
    columns: Option<&Spanned<BTreeMap<Spanned<String>, Spanned<String>>>>,
    schema: Option<&Spanned<Table>>,
    at: &Locator<'_>,
) -> Result<TableShape, ConfigError> {
    let mut problems = Problems::default();
    let typed = match shape {
        // A new table is typed; one made in the JSON shape keeps it (the
        // outputs tell the shapes apart by its columns).
        None => true,
        Some(s) if SHAPES.contains(&s.get_ref().as_str()) => s.get_ref() == "typed",
        Some(s) => {
            let hint = closest(s.get_ref(), SHAPES)
                .map_or(String::new(), |k| format!("; did you mean `{k}`?"));
            problems.take(Err::<(), _>(at.key(
                s.span(),
                "shape",
                &format!("is {:?}: the shapes are json, typed{hint}", s.get_ref()),
            )));
            false
        }
    };
    let mut options = SchemaOptions::postgres();
    if let Some(columns) = columns {
        for (name, type_name) in columns.get_ref() {
            if let Some(hint) = problems.take(hint(name, type_name, at)) {
                options = options.hint(name.get_ref(), hint);
            }
        }
    }
    if let Some(schema) = schema {
        if let Some(read) = problems.take(schema_keys(schema, at, options.clone())) {
            options = read;
        }
    }
    // A misspelt shape is named already.
    if shape.is_some_and(|s| s.get_ref() == "json") {
        let own = columns
            .map(Spanned::span)
            .or_else(|| schema.map(Spanned::span));
        if let Some(span) = own {
            problems.take(Err::<(), _>(at.at(
                span,
                "`[columns]` and `[schema]` shape a typed table, and `shape = \"json\"` asks for the JSON shape",
            )));
        }
    }
    problems.check()?;
    Ok(match typed {
        true => TableShape::Typed(options),
        false => TableShape::Json,
    })
}

/// One `[columns]` entry: a data column's name and a type.
fn hint(
    name: &Spanned<String>,
    type_name: &Spanned<String>,
    at: &Locator<'_>,
) -> Result<ColumnType, ConfigError> {
    let key = format!("columns.{}", name.get_ref());
    if loader::ALL.contains(&name.get_ref().as_str()) {
        return Err(at.key(
            name.span(),
            &key,
            "names a loader column; hints name data columns",
        ));
    }
    type_name.get_ref().parse().map_err(|_| {
        let names = type_names();
        let hint = closest(type_name.get_ref(), &names)
            .map_or(String::new(), |k| format!("; did you mean `{k}`?"));
        at.key(
            type_name.span(),
            &key,
            &format!(
                "is {:?}: the types are {}{hint}",
                type_name.get_ref(),
                names.join(", ")
            ),
        )
    })
}

/// `[schema]`: `contract` and `max_nesting`.
fn schema_keys(
    schema: &Spanned<Table>,
    at: &Locator<'_>,
    options: SchemaOptions,
) -> Result<SchemaOptions, ConfigError> {
    let mut keys = Keys::new(
        schema.get_ref(),
        at,
        "schema",
        "",
        ("the", "[schema] table", schema.span()),
    );
    let mut options = options;
    if let Some(contract) = keys.text("contract")? {
        let parsed: Contract = contract.get_ref().parse().map_err(|_| {
            let hint = closest(contract.get_ref(), &["evolve", "freeze"])
                .map_or(String::new(), |k| format!("; did you mean `{k}`?"));
            let what = format!(
                "is {:?}: the contracts are evolve, freeze{hint}",
                contract.get_ref()
            );
            keys.error(contract.span(), "contract", &what)
        })?;
        options = options.contract(parsed);
    }
    if let Some(levels) = keys.number("max_nesting")? {
        let levels = usize::try_from(*levels.get_ref()).unwrap_or(usize::MAX);
        options = options.max_nesting(levels);
    }
    keys.finish()?;
    Ok(options)
}

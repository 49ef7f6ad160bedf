//! [`Schema::shred_batch`]: a batch of records shredded on every core, with
//! the rows and the schema one pass in order would make.
//!
//! Each part of the batch is shredded on a copy of the schema into a writer
//! of its own. A part that added nothing to its copy made the rows one pass
//! would make (a column the parts before it added is one its records lack),
//! and its rows are joined after theirs. Once a table's members are all
//! known (every load after its first few), that is every part. A part whose
//! copy grew the schema is thrown away and made again after the parts
//! before it, on the schema they grew: columns are then numbered and named
//! in record order, as one pass numbers and names them.

use std::ops::Range;

use super::schema::Schema;
use super::shred::RowWriter;
use crate::content::parallel::cores;

/// Below this many records a part is not split again: shredding a record
/// takes a few microseconds, and a split costs a copy of the schema and a
/// hand-off to another core.
const SPLIT_MIN: usize = 256;

/// A [`RowWriter`] whose rows can be made in parts, on several cores, and
/// joined in order ([`Schema::shred_batch`]).
pub trait SplitWriter: RowWriter + Default + Send {
    /// Appends `later`'s rows after this writer's, both made on the same
    /// schema.
    fn append(&mut self, later: Self);
}

impl Schema {
    /// Shreds the records `0..n` of a batch into one writer, on every core
    /// when the batch is large, and returns it with each record's outcome
    /// in order. `each(schema, writer, i)` handles record `i`: typically
    /// [`Schema::shred`] of its text, then what the output keeps of it
    /// beside the rows.
    ///
    /// The rows, the outcomes and the schema after are those of `each`
    /// called on the records in order on one thread. The first error in
    /// record order is returned (the schema may then hold columns of the
    /// records before it, as after a pass that stopped there).
    ///
    /// ```
    /// use etl_core::content::typed::{Cell, Misfit, RowKeys, RowWriter, Schema, SchemaOptions, SplitWriter};
    ///
    /// /// How many rows each table got.
    /// #[derive(Default)]
    /// struct Count(Vec<usize>);
    /// impl RowWriter for Count {
    ///     fn begin_row(&mut self, table: usize, _: RowKeys<'_>) {
    ///         self.0.resize(self.0.len().max(table + 1), 0);
    ///         self.0[table] += 1;
    ///     }
    ///     fn cell(&mut self, _: usize, _: usize, _: Cell<'_>) {}
    ///     fn end_row(&mut self, _: usize, _: &[Misfit]) {}
    /// }
    /// impl SplitWriter for Count {
    ///     fn append(&mut self, later: Self) {
    ///         self.0.resize(self.0.len().max(later.0.len()), 0);
    ///         for (n, m) in self.0.iter_mut().zip(later.0) {
    ///             *n += m;
    ///         }
    ///     }
    /// }
    ///
    /// let records: Vec<String> = (0..2000)
    ///     .map(|i| format!(r#"{{"id":{i},"labels":["a","b"]}}"#))
    ///     .collect();
    /// let mut schema = Schema::new("issues", SchemaOptions::default())?;
    /// let (rows, keys) = schema.shred_batch(records.len(), |schema, rows: &mut Count, i| {
    ///     let key = etl_core::content_id("row", &records[i]);
    ///     schema.shred(&records[i], &key, rows).map(|()| key)
    /// })?;
    /// assert_eq!(rows.0, [2000, 4000]);
    /// assert_eq!(keys.len(), 2000);
    /// assert_eq!(schema.tables()[1].name(), "issues__labels");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shred_batch<W, O, E>(
        &mut self,
        n: usize,
        each: impl Fn(&mut Schema, &mut W, usize) -> Result<O, E> + Sync,
    ) -> Result<(W, Vec<O>), E>
    where
        W: SplitWriter,
        O: Send,
        E: Send,
    {
        // Parts no smaller than a core's share of half the batch: enough
        // of them to balance the cores, few enough that the copies and
        // joins stay small.
        let smallest = SPLIT_MIN.max(n / (2 * cores()));
        let mut writer = W::default();
        let outcomes = split(self, &mut writer, 0..n, smallest, &each)?;
        Ok((writer, outcomes))
    }

    /// What shredding may change without adding a column or a table: the
    /// members a full table keeps untyped. A part that changed either is
    /// made again in order.
    fn changes(&self) -> (u64, usize) {
        let untyped = self
            .tables()
            .iter()
            .map(|t| t.untyped().count() + t.untyped_unlisted())
            .sum();
        (self.generation(), untyped)
    }
}

/// The records `range` into `writer` on `schema`, halves on two cores
/// (rayon's pool) while a half holds at least `smallest` records.
fn split<W, O, E, F>(
    schema: &mut Schema,
    writer: &mut W,
    range: Range<usize>,
    smallest: usize,
    each: &F,
) -> Result<Vec<O>, E>
where
    W: SplitWriter,
    O: Send,
    E: Send,
    F: Fn(&mut Schema, &mut W, usize) -> Result<O, E> + Sync,
{
    if cores() == 1 || range.len() < 2 * smallest {
        return range.map(|i| each(schema, writer, i)).collect();
    }
    let mid = range.start + range.len() / 2;
    let before = schema.changes();
    let mut copy = schema.clone();
    let mut later = W::default();
    let (first, second) = rayon::join(
        || split(schema, writer, range.start..mid, smallest, each),
        || split(&mut copy, &mut later, mid..range.end, smallest, each),
    );
    let mut outcomes = first?;
    if copy.changes() == before {
        outcomes.extend(second?);
        writer.append(later);
    } else {
        // A half grew the schema: the second is made again on the first's
        // schema, as one pass would have made it.
        drop((second, later));
        for i in mid..range.end {
            outcomes.push(each(schema, writer, i)?);
        }
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::typed::{Cell, Misfit, RowKeys, SchemaOptions};

    /// Every call, as text, in order.
    #[derive(Default)]
    struct Trace(Vec<String>);

    impl RowWriter for Trace {
        fn begin_row(&mut self, table: usize, keys: RowKeys<'_>) {
            self.0.push(format!("{table} begin {keys:?}"));
        }
        fn cell(&mut self, table: usize, column: usize, cell: Cell<'_>) {
            self.0.push(format!("{table}.{column} = {cell:?}"));
        }
        fn end_row(&mut self, table: usize, misfits: &[Misfit]) {
            self.0.push(format!("{table} end {misfits:?}"));
        }
    }

    impl SplitWriter for Trace {
        fn append(&mut self, later: Self) {
            self.0.extend(later.0);
        }
    }

    /// Records whose members arrive late, misfit and overflow a small
    /// table, so that parts grow the schema in different places.
    fn records(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| match i % 997 {
                500 => format!(r#"{{"id":{i},"late_{i}":{{"x":"{i}"}},"tags":[{i}]}}"#),
                700 => r#"{"id":"not a number","tags":[[1]]}"#.to_owned(),
                _ => format!(r#"{{"id":{i},"tags":["t{i}"],"m":{{"k{}":1}}}}"#, i % 40),
            })
            .collect()
    }

    /// Records `0..n` then `n..2n` (the second batch on the schema the
    /// first grew: most of its parts add nothing and are joined), in two
    /// batches or in one pass.
    fn shred_all(n: usize, one_pass: bool) -> (Schema, Trace, Vec<String>) {
        let records = records(2 * n);
        let options = SchemaOptions {
            max_columns: 30,
            ..SchemaOptions::default()
        };
        let mut schema = Schema::new("r", options).unwrap();
        let each = |at: usize| {
            let records = &records;
            move |schema: &mut Schema, trace: &mut Trace, i: usize| {
                let record = &records[at + i];
                let key = crate::content_id("row", record);
                schema
                    .shred(record, &key, trace)
                    .map(|()| key)
                    .map_err(|e| e.to_string())
            }
        };
        let mut trace = Trace::default();
        let mut keys = Vec::new();
        if one_pass {
            for i in 0..2 * n {
                keys.push(each(0)(&mut schema, &mut trace, i).unwrap());
            }
            return (schema, trace, keys);
        }
        for at in [0, n] {
            let (part, part_keys) = schema.shred_batch(n, each(at)).unwrap();
            trace.append(part);
            keys.extend(part_keys);
        }
        (schema, trace, keys)
    }

    #[test]
    fn a_split_batch_makes_the_rows_and_schema_of_one_pass() {
        for n in [10, 600, 5_000] {
            let (one, one_trace, one_keys) = shred_all(n, true);
            let (split, split_trace, split_keys) = shred_all(n, false);
            assert_eq!(split.to_json(), one.to_json(), "{n} records");
            assert_eq!(split.generation(), one.generation());
            assert!(split_trace.0 == one_trace.0, "{n} records: rows differ");
            assert_eq!(split_keys, one_keys);
        }
    }

    #[test]
    fn the_first_error_in_record_order_is_returned() {
        let records: Vec<String> = (0..4_000)
            .map(|i| match i {
                1_500 | 3_500 => "{".to_owned(),
                _ => format!(r#"{{"id":{i}}}"#),
            })
            .collect();
        let mut schema = Schema::new("r", SchemaOptions::default()).unwrap();
        let failed = schema.shred_batch(records.len(), |schema, trace: &mut Trace, i| {
            schema.shred(&records[i], "k", trace).map_err(|_| i)
        });
        assert_eq!(failed.err(), Some(1_500));
    }
}
